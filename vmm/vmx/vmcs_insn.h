/* SPDX-License-Identifier: MIT */
/*
 * The checked VMREAD and VMWRITE every field access goes through (a VMfail is the VMM's panic,
 * vmcs_fail.h).  Host tests put their stand-in for this header ahead of it on the include path
 * (a VMCS backed by an array); vmcs.h builds the width-checked accessors on top of whichever is
 * in use.  The raw instructions that return VMfail are in vmx_insn.h.
 */
#ifndef PTV_VMX_VMCS_INSN_H
#define PTV_VMX_VMCS_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "vmx/vmcs_fail.h"

/* VMREAD / VMWRITE and a branch on VMfail (CF or ZF): three instructions where __vmread's
 * flag byte and test took five, on the exit path's every field */
static inline uint64_t vmcs_read_checked(uint32_t field)
{
    uint64_t v;
    asm goto("vmread %1, %0; jbe %l[failed]" : "=r"(v) : "r"((uint64_t)field) : "cc" : failed);
    return v;
failed:
    vmcs_access_failed(field, false, 0);
}

static inline void vmcs_write_checked(uint32_t field, uint64_t val)
{
    asm goto("vmwrite %1, %0; jbe %l[failed]"
             :
             : "r"((uint64_t)field), "rm"(val)
             : "cc", "memory"
             : failed);
    return;
failed:
    vmcs_access_failed(field, true, val);
}

#endif
