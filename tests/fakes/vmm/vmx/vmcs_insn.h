/* SPDX-License-Identifier: MIT */
/*
 * Host tests' stand-in for vmm/vmx/vmcs_insn.h: VMREAD/VMWRITE on the fake VMCS of
 * tests/fakes/vmm_world.c (an array indexed through vmcs_fields.def).  A field the table does not
 * name is the VMfail path, as on the CPU: vmcs_access_failed(), the VMM's panic.
 */
#ifndef PTV_VMX_VMCS_INSN_H
#define PTV_VMX_VMCS_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "vmx/vmcs_fail.h"
#include "fakes/vmm_world.h"

static inline uint64_t vmcs_read_checked(uint32_t field)
{
    uint64_t v;
    if (!fake_vmread(field, &v))
        vmcs_access_failed(field, false, 0);
    return v;
}

static inline void vmcs_write_checked(uint32_t field, uint64_t val)
{
    if (!fake_vmwrite(field, val))
        vmcs_access_failed(field, true, val);
}

#endif
