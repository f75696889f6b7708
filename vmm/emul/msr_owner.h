/* SPDX-License-Identifier: MIT */
/*
 * Who owns each MSR: one sorted table of ranges (msr_owner.c), the only place that decides it.
 * The RDMSR/WRMSR exit (exit_msr.c) looks the owner up once and calls its hook; the MSR bitmap
 * is built from the same rows (msr_bitmap_build).  An MSR in no row belongs to nobody: the
 * guest reaches the real MSR (through the bitmap where it covers the MSR, else through the exit,
 * where a fault becomes the guest's #GP).  Pure data and pure functions: host-tested
 * (tests/unit/emul/test_msr_owner.c) and fuzzed (tests/fuzz/fuzz_msr_owner.c).
 *
 * Conditions live in the owners' hooks, with one table flag:
 * - MSR_CLAIMED: the owner takes an MSR of the range or leaves it to the guest, decided once at
 *   boot (the LBR policy: which stack the CPU model has, arch LBR present/shown, DEBUGCTL
 *   virtual).  The row spans the widest case; an MSR the owner does not claim has no bitmap bit
 *   and, on an exit, is the real MSR.
 * - PT: the RTIT MSRs always exit; the PT engine #GPs them when the guest has no PT.
 * - MTRRs: every MTRR index exits; the hook #GPs those this CPU's MTRRCAP does not have.
 */
#ifndef PTV_VMX_MSR_OWNER_H
#define PTV_VMX_MSR_OWNER_H

#include <stdbool.h>
#include <stdint.h>

enum msr_owner {
    MSR_OWNER_NONE,        /* the real MSR (an access that faults becomes the guest's #GP) */
    MSR_OWNER_LBR,         /* the LBR shim (lbr/shim/lbr_vmx.c), the MSRs its decision claims */
    MSR_OWNER_PT,          /* the PT engine's virtual RTIT MSR file */
    MSR_OWNER_PERF_GLOBAL, /* IA32_PERF_GLOBAL_CTRL: kept in the VMCS, 0 while the VMM runs */
    MSR_OWNER_XSS,         /* IA32_XSS: checked by xss_policy(), then the real MSR */
    MSR_OWNER_APIC_BASE,   /* IA32_APIC_BASE: virtual base, the real APIC never moves */
    MSR_OWNER_MTRR,        /* the MTRRs: a guest copy (EPT gives guest memory types) */
    MSR_OWNER_UCODE,       /* IA32_BIOS_UPDT_TRIG: a microcode load is ignored, as KVM does */
    MSR_OWNER_GP,          /* hidden from the guest: #GP */
};

#define MSR_CLAIMED 1u /* flags: the owner's boot-time decision takes each MSR or not */

struct msr_range {
    uint32_t first, last; /* inclusive */
    uint8_t owner;        /* enum msr_owner */
    uint8_t flags;
};
extern const struct msr_range msr_owner_table[];
extern const unsigned msr_owner_rows;

/* The row msr is in, or NULL (nobody's) */
const struct msr_range *msr_range_of(uint32_t msr);
/* the owner by the table's binary search */
enum msr_owner msr_owner_search(uint32_t msr);

/* the same answer for MSRs below MSR_INDEXED (every row of the table is there) read from a byte
 * each: the exit path's look-up costs a load, not a search (bench-exits' RDMSR).  Built from the
 * table on first use; test_msr_owner checks it against the search for every MSR */
#define MSR_INDEXED 0x2000u
extern uint8_t msr_owner_index[MSR_INDEXED];
extern bool msr_owner_indexed;
void msr_owner_index_build(void);

static inline enum msr_owner msr_owner(uint32_t msr)
{
    if (__builtin_expect(!__atomic_load_n(&msr_owner_indexed, __ATOMIC_ACQUIRE), 0))
        msr_owner_index_build(); /* idempotent: two CPUs may both build it, alike */
    return msr < MSR_INDEXED ? (enum msr_owner)msr_owner_index[msr] : msr_owner_search(msr);
}

/* For MSR_CLAIMED rows: does the owner take msr?  ctx is the caller's. */
typedef bool msr_claim_fn(enum msr_owner owner, uint32_t msr, const void *ctx);

/* Does an access to msr exit for its owner's sake (its bit in the MSR bitmap)? */
bool msr_intercepted(uint32_t msr, msr_claim_fn *claims, const void *ctx);

/* The 4 KiB MSR bitmap (SDM Vol. 3C 25.6.9: read 0-0x1fff, read 0xc0000000-0xc0001fff, then
 * the same for writes): read and write bits of every intercepted MSR set, the rest clear. */
#define MSR_BITMAP_SIZE 4096
void msr_bitmap_build(uint8_t bm[MSR_BITMAP_SIZE], msr_claim_fn *claims, const void *ctx);

#endif
