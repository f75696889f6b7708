/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: guest-chosen MSR indices through the owner table (vmm/emul/msr_owner.c), with claims
 * and LBR decisions from the input.  Invariants: the binary search finds exactly the row a
 * linear scan finds, the row holds the MSR; an MSR is intercepted exactly when it has an owner
 * that takes it, and its MSR bitmap bits say the same; whatever the CPU model and LBR decision,
 * the LBR policy claims no MSR outside the LBR rows (an MSR it claimed there would pass
 * through to the real CPU).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emul/msr_owner.h"
#include "lbr/lbr_policy.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

/* an arbitrary claim: a bit of the input's seed chosen by the MSR */
static bool seed_claims(enum msr_owner owner, uint32_t msr, const void *ctx)
{
    (void)owner;
    uint64_t seed = *(const uint64_t *)ctx;
    return seed >> ((msr * 2654435761u) >> 26) & 1;
}

static bool bitmap_bit(const uint8_t *bm, unsigned off, uint32_t msr)
{
    msr &= 0x1fff;
    return bm[off + msr / 8] >> (msr % 8) & 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct {
        uint32_t msr[4];
        uint64_t seed;
        uint8_t model, flags;
    } in;
    if (size < sizeof(in))
        return 0;
    memcpy(&in, data, sizeof(in));
    struct lbr_decision d = {.lay = lbr_layout_of(6, in.model)};
    d.legacy = in.flags & 1;
    d.arch_present = in.flags & 2;
    d.arch = d.arch_present && (in.flags & 4);
    d.debugctl_virtual = in.flags & 8;
    static uint8_t bm[MSR_BITMAP_SIZE];
    bool built = in.flags & 16; /* the build walks every row: not on every input */
    if (built)
        msr_bitmap_build(bm, seed_claims, &in.seed);

    for (unsigned k = 0; k < 4; k++) {
        /* around the table's rows and into the LBR stacks as often as anywhere */
        static const uint32_t lbr_bases[] = {
            MSR_LBR_NHM_FROM,    MSR_LBR_NHM_TO,    MSR_LBR_INFO_0,   MSR_ARCH_LBR_INFO_0,
            MSR_ARCH_LBR_FROM_0, MSR_ARCH_LBR_TO_0, MSR_ARCH_LBR_CTL, MSR_LBR_SELECT};
        uint32_t msr = in.msr[k];
        if (k == 1) {
            const struct msr_range *r = &msr_owner_table[(msr >> 8) % msr_owner_rows];
            msr = (msr & 0x80 ? r->last : r->first) + (int8_t)(msr & 0xff) % 4;
        } else if (k == 2) {
            msr = lbr_bases[msr % 8] + (msr >> 8) % (ARCH_LBR_MAX_ENTRIES + 8);
        }
        const struct msr_range *r = msr_range_of(msr), *lin = NULL;
        for (unsigned i = 0; i < msr_owner_rows; i++)
            if (msr >= msr_owner_table[i].first && msr <= msr_owner_table[i].last)
                lin = &msr_owner_table[i];
        CHECK(r == lin);
        CHECK(msr_owner(msr) == (r ? r->owner : MSR_OWNER_NONE));
        bool claimed = seed_claims(msr_owner(msr), msr, &in.seed);
        bool icpt = msr_intercepted(msr, seed_claims, &in.seed);
        CHECK(icpt == (r && (!(r->flags & MSR_CLAIMED) || claimed)));
        if (built && (msr < 0x2000 || msr - 0xc0000000u < 0x2000)) {
            unsigned off = msr < 0x2000 ? 0 : 0x400;
            CHECK(bitmap_bit(bm, off, msr) == icpt);
            CHECK(bitmap_bit(bm, 0x800 + off, msr) == icpt);
        }
        if (lbr_msr_intercepted(&d, msr))
            CHECK(msr_owner(msr) == MSR_OWNER_LBR);
    }
    return 0;
}
