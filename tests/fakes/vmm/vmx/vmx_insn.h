/* SPDX-License-Identifier: MIT */
/* Host tests' stand-in for vmm/vmx/vmx_insn.h: VMXON and friends on the fake VMCS. */
#ifndef PTV_VMX_VMX_INSN_H
#define PTV_VMX_VMX_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "hw/vmx.h" /* the INVEPT / INVVPID descriptors */
#include "fakes/vmm_world.h"

static inline bool __vmxon(const uint64_t *pa)
{
    return false;
}

static inline bool __vmclear(const uint64_t *pa)
{
    fake_vmcs_current = false;
    return false;
}

static inline bool __vmptrld(const uint64_t *pa)
{
    fake_vmcs_current = true;
    return false;
}

static inline void __vmxoff(void) {}

static inline bool __invept(uint64_t type, const struct invept_desc *d)
{
    fake_cpu.invepts++;
    return false;
}

static inline bool __invvpid(uint64_t type, const struct invvpid_desc *d)
{
    fake_cpu.invvpids++;
    return false;
}

static inline __attribute__((warn_unused_result)) int __vmread(uint32_t field, uint64_t *val)
{
    return fake_vmread(field, val) ? 0 : -1;
}

static inline __attribute__((warn_unused_result)) int __vmwrite(uint32_t field, uint64_t val)
{
    return fake_vmwrite(field, val) ? 0 : -1;
}

#endif
