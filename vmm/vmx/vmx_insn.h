/* SPDX-License-Identifier: MIT */
/*
 * VMXON, VMCLEAR, VMPTRLD, VMXOFF, INVEPT and INVVPID: the VMX instructions other than
 * VMREAD/VMWRITE (vmcs_insn.h) and the entry (vmx_entry.S).  Host tests put their stand-in for
 * this header ahead of it on the include path.
 */
#ifndef PTV_VMX_VMX_INSN_H
#define PTV_VMX_VMX_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "hw/vmx.h" /* the INVEPT / INVVPID descriptors */

/* each returns true when the instruction failed (VMfailInvalid or VMfailValid) */
static inline bool __vmxon(const uint64_t *pa)
{
    uint8_t fail;
    asm volatile("vmxon %1; setna %0" : "=r"(fail) : "m"(*pa) : "cc", "memory");
    return fail;
}

static inline bool __vmclear(const uint64_t *pa)
{
    uint8_t fail;
    asm volatile("vmclear %1; setna %0" : "=r"(fail) : "m"(*pa) : "cc", "memory");
    return fail;
}

static inline bool __vmptrld(const uint64_t *pa)
{
    uint8_t fail;
    asm volatile("vmptrld %1; setna %0" : "=r"(fail) : "m"(*pa) : "cc", "memory");
    return fail;
}

static inline void __vmxoff(void)
{
    asm volatile("vmxoff" ::: "cc", "memory");
}

static inline bool __invept(uint64_t type, const struct invept_desc *d)
{
    uint8_t fail;
    asm volatile("invept %2, %1; setna %0" : "=r"(fail) : "r"(type), "m"(*d) : "cc", "memory");
    return fail;
}

static inline bool __invvpid(uint64_t type, const struct invvpid_desc *d)
{
    uint8_t fail;
    asm volatile("invvpid %2, %1; setna %0" : "=r"(fail) : "r"(type), "m"(*d) : "cc", "memory");
    return fail;
}

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

#endif
