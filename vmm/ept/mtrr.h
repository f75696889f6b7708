/* SPDX-License-Identifier: MIT */
/*
 * Memory types from the MTRRs (SDM Vol. 3A 11.11 "Memory Type Range
 * Registers"; 12.11 in recent editions).  Once EPT is on, the CPU no longer
 * consults the MTRRs for guest accesses (pt-facts.md G.6): the EPT leaves must
 * carry the type the MTRRs give.  Pure logic over a snapshot of the MSRs.
 *
 * Filling struct mtrr_state (the VMM reads the MSRs once, on the BSP):
 *   cap          MSR_MTRRcap
 *   def_type     MSR_MTRRdefType
 *   fixed[0]     MSR_MTRRfix64K_00000, fixed[1] MSR_MTRRfix16K_80000,
 *   fixed[2]     MSR_MTRRfix16K_A0000, fixed[3 + i] MSR_MTRRfix4K_C0000 + i (i < 8)
 *                (mtrr_fixed_msr(n) gives the MSR of fixed[n])
 *   var_base[n]  MTRRphysBase_MSR(n), var_mask[n] MTRRphysMask_MSR(n), n < nvar
 *   nvar         min(cap & MTRR_CAP_VCNT, MTRR_MAX_VAR)
 *   maxphyaddr   CPUID 0x80000008 EAX[7:0]
 */
#ifndef PTV_EPT_MTRR_H
#define PTV_EPT_MTRR_H

#include <stdint.h>
#include "ept/memtype.h"

/* MSRs (Linux msr-index.h / asm/mtrr.h names) */
#define MSR_MTRRcap           0x000000fe
#define MSR_MTRRdefType       0x000002ff
#define MSR_MTRRfix64K_00000  0x00000250
#define MSR_MTRRfix16K_80000  0x00000258
#define MSR_MTRRfix16K_A0000  0x00000259
#define MSR_MTRRfix4K_C0000   0x00000268 /* ... MSR_MTRRfix4K_F8000 0x26f */
#define MTRRphysBase_MSR(reg) (0x200 + 2 * (reg))
#define MTRRphysMask_MSR(reg) (0x200 + 2 * (reg) + 1)

#define MTRR_CAP_VCNT      0xffull     /* number of variable ranges */
#define MTRR_CAP_FIX       (1ull << 8) /* fixed ranges supported */
#define MTRR_CAP_WC        (1ull << 10)
#define MTRR_DEF_TYPE_TYPE 0xffull
#define MTRR_DEF_TYPE_FE   (1ull << 10) /* fixed ranges enabled */
#define MTRR_DEF_TYPE_E    (1ull << 11) /* MTRRs enabled */
#define MTRR_PHYSBASE_TYPE 0xffull
#define MTRR_PHYSMASK_V    (1ull << 11) /* variable range valid */

#define MTRR_NUM_FIXED 11
#define MTRR_MAX_VAR   16
#define MTRR_FIXED_END 0x100000ull /* fixed ranges cover [0, 1 MiB) */

#define MTRR_MIXED (-1) /* mtrr_range_type(): not uniform */

struct mtrr_state {
    uint64_t cap, def_type, fixed[MTRR_NUM_FIXED];
    uint64_t var_base[MTRR_MAX_VAR], var_mask[MTRR_MAX_VAR];
    unsigned nvar;
    unsigned maxphyaddr;
};

/* MSR number of fixed[n], n < MTRR_NUM_FIXED */
static inline uint32_t mtrr_fixed_msr(unsigned n)
{
    return n == 0  ? MSR_MTRRfix64K_00000
           : n < 3 ? MSR_MTRRfix16K_80000 + (n - 1)
                   : MSR_MTRRfix4K_C0000 + (n - 3);
}

/*
 * Check a snapshot: nvar, maxphyaddr and every memory type in use valid.
 * 0 or -22 (EINVAL).  mtrr_range_type() checks it too.
 */
int mtrr_check(const struct mtrr_state *m) __attribute__((warn_unused_result));

/*
 * The memory type of [base, base + size) (4 KiB aligned, size > 0, below
 * 2^maxphyaddr): 0 and *type if the MTRRs give one type to every byte,
 * MTRR_MIXED if not (the caller splits into smaller pages), -22 on bad input.
 */
int mtrr_range_type(const struct mtrr_state *m, uint64_t base, uint64_t size, unsigned *type)
    __attribute__((warn_unused_result));

#endif
