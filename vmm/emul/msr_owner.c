/* SPDX-License-Identifier: MIT */
/* The MSR owner table and the MSR bitmap it gives (see msr_owner.h). */
#include "emul/msr_owner.h"
#include "hw/vmx.h"
#include "emul/guest_policy.h"
#include "emul/emul_policy.h"
#include "pt/rtit.h"
#include "lbr/lbr_policy.h"

/* clang-format off */
#define ONE(msr, owner)           {msr, msr, MSR_OWNER_##owner, 0}
#define RANGE(first, last, owner) {first, last, MSR_OWNER_##owner, 0}
#define LBR(first, n)             {first, (first) + (n) - 1, MSR_OWNER_LBR, MSR_CLAIMED}
/* clang-format on */
#define LBR_LEGACY_MAX 32 /* the deepest model-specific stack lbr_policy.c knows */

/* sorted, no overlap (tests/unit/emul/test_msr_owner.c checks both) */
const struct msr_range msr_owner_table[] = {
    ONE(MSR_IA32_APIC_BASE, APIC_BASE),
    ONE(MSR_IA32_BIOS_UPDT_TRIG, UCODE),
    ONE(MSR_MTRR_CAP, MTRR),
    ONE(MSR_OC_MAILBOX, GP), /* undervolting from a guest faults the VMM's own computations */
    LBR(MSR_LBR_SELECT, 2),  /* and MSR_LBR_TOS */
    LBR(MSR_IA32_DEBUGCTLMSR, 1),
    RANGE(MSR_MTRR_PHYS_BASE, MSR_MTRR_PHYS_BASE + 2 * 16 - 1, MTRR), /* 16 variable pairs */
    ONE(0x250, MTRR),                                                 /* MTRR_FIX64K_00000 */
    RANGE(0x258, 0x259, MTRR),                                        /* FIX16K */
    RANGE(0x268, 0x26f, MTRR),                                        /* FIX4K */
    ONE(MSR_MTRR_DEF_TYPE, MTRR),
    LBR(MSR_IA32_PERF_CAPABILITIES, 1), /* its LBR_FMT: always claimed */
    ONE(MSR_CORE_PERF_GLOBAL_CTRL, PERF_GLOBAL),
    RANGE(MSR_IA32_VMX_FIRST, MSR_IA32_VMX_LAST, GP), /* VMX is not offered to the guest */
    RANGE(MSR_IA32_RTIT_OUTPUT_BASE, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, PT),
    RANGE(MSR_IA32_RTIT_CTL, MSR_IA32_RTIT_CR3_MATCH, PT), /* and RTIT_STATUS */
    RANGE(MSR_IA32_RTIT_ADDR0_A, MSR_IA32_RTIT_ADDR3_B, PT),
    LBR(MSR_LBR_NHM_FROM, LBR_LEGACY_MAX),
    LBR(MSR_LBR_NHM_TO, LBR_LEGACY_MAX),
    ONE(MSR_IA32_XSS, XSS),
    LBR(MSR_LBR_INFO_0, LBR_LEGACY_MAX),
    LBR(MSR_ARCH_LBR_INFO_0, ARCH_LBR_MAX_ENTRIES),
    LBR(MSR_ARCH_LBR_CTL, 2), /* and MSR_ARCH_LBR_DEPTH */
    LBR(MSR_ARCH_LBR_FROM_0, ARCH_LBR_MAX_ENTRIES),
    LBR(MSR_ARCH_LBR_TO_0, ARCH_LBR_MAX_ENTRIES),
};
const unsigned msr_owner_rows = sizeof(msr_owner_table) / sizeof(msr_owner_table[0]);

const struct msr_range *msr_range_of(uint32_t msr)
{
    unsigned lo = 0, hi = msr_owner_rows; /* binary search over [lo, hi) */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const struct msr_range *r = &msr_owner_table[mid];
        if (msr < r->first)
            hi = mid;
        else if (msr > r->last)
            lo = mid + 1;
        else
            return r;
    }
    return 0;
}

enum msr_owner msr_owner_search(uint32_t msr)
{
    const struct msr_range *r = msr_range_of(msr);
    return r ? (enum msr_owner)r->owner : MSR_OWNER_NONE;
}

uint8_t msr_owner_index[MSR_INDEXED];
bool msr_owner_indexed;

void msr_owner_index_build(void)
{
    for (uint32_t m = 0; m < MSR_INDEXED; m++)
        msr_owner_index[m] = (uint8_t)msr_owner_search(m);
    __atomic_store_n(&msr_owner_indexed, true, __ATOMIC_RELEASE);
}

static bool row_intercepts(const struct msr_range *r, uint32_t msr, msr_claim_fn *claims,
                           const void *ctx)
{
    return !(r->flags & MSR_CLAIMED) || claims((enum msr_owner)r->owner, msr, ctx);
}

bool msr_intercepted(uint32_t msr, msr_claim_fn *claims, const void *ctx)
{
    const struct msr_range *r = msr_range_of(msr);
    return r && row_intercepts(r, msr, claims, ctx);
}

/* the bitmap covers two ranges of 0x2000 MSRs; the others always exit */
static int bitmap_offset(uint32_t msr)
{
    if (msr < 0x2000)
        return 0;
    if (msr - 0xc0000000u < 0x2000)
        return 0x400;
    return -1;
}

void msr_bitmap_build(uint8_t bm[MSR_BITMAP_SIZE], msr_claim_fn *claims, const void *ctx)
{
    for (unsigned i = 0; i < MSR_BITMAP_SIZE; i++)
        bm[i] = 0;
    for (unsigned i = 0; i < msr_owner_rows; i++) {
        const struct msr_range *r = &msr_owner_table[i];
        for (uint32_t m = r->first;; m++) {
            int off = bitmap_offset(m);
            if (off >= 0 && row_intercepts(r, m, claims, ctx)) {
                uint32_t bit = m & 0x1fff;
                bm[off + bit / 8] |= (uint8_t)(1u << (bit % 8));         /* read */
                bm[0x800 + off + bit / 8] |= (uint8_t)(1u << (bit % 8)); /* write */
            }
            if (m == r->last)
                break;
        }
    }
}
