/* SPDX-License-Identifier: MIT */
/*
 * VMREAD and VMWRITE themselves: the only VMCS access that touches hardware.  Host tests put
 * their stand-in for this header ahead of it on the include path (a VMCS backed by an array);
 * vmcs.h builds the width-checked accessors on top of whichever is in use.
 */
#ifndef PTV_VMX_VMCS_INSN_H
#define PTV_VMX_VMCS_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "vmx/vmcs_fail.h"

/* raw instructions: return 0 on success, -1 on VMfail (see vmx_insn_error()).
 * Inline: they sit on the exit path, which every VM exit pays for. */
static inline __attribute__((warn_unused_result)) int __vmread(uint32_t field, uint64_t *val)
{
    uint8_t fail;
    uint64_t v = 0;
    asm volatile("vmread %2, %1; setna %0" : "=r"(fail), "=rm"(v) : "r"((uint64_t)field) : "cc");
    *val = v;
    return fail ? -1 : 0;
}

static inline __attribute__((warn_unused_result)) int __vmwrite(uint32_t field, uint64_t val)
{
    uint8_t fail;
    asm volatile("vmwrite %2, %1; setna %0"
                 : "=r"(fail)
                 : "r"((uint64_t)field), "rm"(val)
                 : "cc", "memory");
    return fail ? -1 : 0;
}

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
