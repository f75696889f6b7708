/* SPDX-License-Identifier: MIT */
/*
 * vmm/emul/msr_owner.c: the one table that says who owns each MSR.  The table must be sorted and
 * disjoint, and must give every MSR the handler and the MSR bitmap bit the exit handler gave it
 * before the table existed.  That handler asked, in this order: the LBR shim (its policy's
 * lbr_msr_intercepted, still the LBR hook's own test), then msr_policy(), a chain of compares in
 * guest_policy.c.  OLD_POLICY below is that chain's answer for every 32-bit MSR index, taken by
 * running it over all of them; the bitmap intercepted an MSR below 0x2000 when either said so.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "emul/msr_owner.h"
#include "emul/emul_policy.h"
#include "pt/pt_msr.h"
#include "lbr/lbr_policy.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* msr_policy() before the table, every index not listed passed through */
static const struct msr_range OLD_POLICY[] = {
    {0x1b, 0x1b, MSR_OWNER_APIC_BASE, 0}, {0x79, 0x79, MSR_OWNER_UCODE, 0},
    {0xfe, 0xfe, MSR_OWNER_MTRR, 0},      {0x150, 0x150, MSR_OWNER_GP, 0},
    {0x200, 0x21f, MSR_OWNER_MTRR, 0},    {0x250, 0x250, MSR_OWNER_MTRR, 0},
    {0x258, 0x259, MSR_OWNER_MTRR, 0},    {0x268, 0x26f, MSR_OWNER_MTRR, 0},
    {0x2ff, 0x2ff, MSR_OWNER_MTRR, 0},    {0x38f, 0x38f, MSR_OWNER_PERF_GLOBAL, 0},
    {0x480, 0x492, MSR_OWNER_GP, 0},      {0x560, 0x561, MSR_OWNER_PT, 0},
    {0x570, 0x572, MSR_OWNER_PT, 0},      {0x580, 0x587, MSR_OWNER_PT, 0},
    {0xda0, 0xda0, MSR_OWNER_XSS, 0},
};

static enum msr_owner old_policy(uint32_t msr)
{
    for (unsigned i = 0; i < N(OLD_POLICY); i++)
        if (msr >= OLD_POLICY[i].first && msr <= OLD_POLICY[i].last)
            return OLD_POLICY[i].owner;
    return MSR_OWNER_NONE;
}

/* the old exit handler: the LBR hook first, then msr_policy() */
static enum msr_owner old_handler(const struct lbr_decision *d, uint32_t msr)
{
    return lbr_msr_intercepted(d, msr) ? MSR_OWNER_LBR : old_policy(msr);
}

static bool lbr_claims(enum msr_owner owner, uint32_t msr, const void *ctx)
{
    return owner == MSR_OWNER_LBR && lbr_msr_intercepted(ctx, msr);
}

/* exit_msr.c now: one look-up; an LBR MSR the decision does not claim is the real MSR */
static enum msr_owner new_handler(const struct lbr_decision *d, uint32_t msr)
{
    enum msr_owner o = msr_owner(msr);
    if (o == MSR_OWNER_LBR && !lbr_msr_intercepted(d, msr))
        return MSR_OWNER_NONE;
    return o;
}

/* LBR decisions: every layout lbr_policy.c knows and none, shown or hidden, arch LBR absent,
 * hidden or shown, DEBUGCTL virtual or not */
static unsigned profiles(struct lbr_decision *out, unsigned cap)
{
    const struct lbr_layout *lays[8] = {NULL};
    unsigned nlay = 1, n = 0;
    for (uint32_t model = 0; model < 256; model++) {
        const struct lbr_layout *l = lbr_layout_of(6, model);
        unsigned i = 0;
        while (i < nlay && lays[i] != l)
            i++;
        if (i == nlay) {
            assert_true(nlay < N(lays));
            lays[nlay++] = l;
        }
    }
    assert_int_equal(nlay, 4); /* none, Nehalem, Haswell, Skylake */
    for (unsigned l = 0; l < nlay; l++)
        for (unsigned bits = 0; bits < 16; bits++) {
            struct lbr_decision d = {.lay = lays[l]};
            d.legacy = bits & 1;
            d.arch_present = bits & 2;
            d.arch = (bits & 4) && d.arch_present;
            d.debugctl_virtual = bits & 8;
            if ((bits & 4) && !d.arch_present)
                continue;
            assert_true(n < cap);
            out[n++] = d;
        }
    return n;
}

/* a walk over every MSR the bitmap covers and far beyond, then a sample of the rest up to
 * 0xffffffff; false after the last */
static bool next_msr(uint32_t *m)
{
    bool dense = *m < 0x10000 || (*m >= 0xc0000000u && *m < 0xc0002000u);
    uint64_t n = *m + (dense ? 1ull : 0x10001ull);
    if (*m < 0xc0000000u && n > 0xc0000000u)
        n = 0xc0000000u;
    if (*m == 0xffffffffu)
        return false;
    *m = n > 0xffffffffu ? 0xffffffffu : (uint32_t)n;
    return true;
}

static void test_sorted_disjoint(void **state)
{
    (void)state;
    assert_true(msr_owner_rows > 0);
    for (unsigned i = 0; i < msr_owner_rows; i++) {
        const struct msr_range *r = &msr_owner_table[i];
        assert_true(r->first <= r->last);
        assert_true(r->owner != MSR_OWNER_NONE && r->owner <= MSR_OWNER_GP);
        assert_true((r->flags & ~MSR_CLAIMED) == 0);
        /* only LBR decides per MSR at boot; every other owner takes its whole range */
        assert_int_equal(!!(r->flags & MSR_CLAIMED), r->owner == MSR_OWNER_LBR);
        if (i > 0)
            assert_true(msr_owner_table[i - 1].last < r->first);
        assert_ptr_equal(msr_range_of(r->first), r);
        assert_ptr_equal(msr_range_of(r->last), r);
    }
}

/* the exit path's index gives the search's answer for every MSR, indexed or not, and every row
 * of the table lies inside the index (else its MSRs would pay the search on every exit) */
static void test_index(void **state)
{
    (void)state;
    for (uint64_t m = 0; m < 0x100000; m++)
        assert_int_equal(msr_owner((uint32_t)m), msr_owner_search((uint32_t)m));
    for (uint64_t m = 0xc0000000u; m < 0xc0002000u; m++)
        assert_int_equal(msr_owner((uint32_t)m), msr_owner_search((uint32_t)m));
    assert_true(msr_owner_indexed);
    for (unsigned i = 0; i < msr_owner_rows; i++)
        assert_true(msr_owner_table[i].last < MSR_INDEXED);
    msr_owner_index[0x1b] = MSR_OWNER_NONE; /* IA32_APIC_BASE: a stale index is seen */
    assert_int_not_equal(msr_owner(0x1b), msr_owner_search(0x1b));
    msr_owner_index_build();
    assert_int_equal(msr_owner(0x1b), MSR_OWNER_APIC_BASE);
}

/* probes a reader can check against the SDM, with the handler for the widest LBR decision */
static void test_probes(void **state)
{
    (void)state;
    static const struct {
        uint32_t msr;
        enum msr_owner owner;
    } probes[] = {
        {0x10, MSR_OWNER_NONE},         /* TSC */
        {0x1b, MSR_OWNER_APIC_BASE},    /* IA32_APIC_BASE */
        {0x3a, MSR_OWNER_NONE},         /* FEATURE_CONTROL */
        {0x79, MSR_OWNER_UCODE},        /* IA32_BIOS_UPDT_TRIG */
        {0x8b, MSR_OWNER_NONE},         /* IA32_BIOS_SIGN_ID */
        {0xfe, MSR_OWNER_MTRR},         /* MTRRCAP */
        {0x150, MSR_OWNER_GP},          /* overclocking mailbox */
        {0x1c8, MSR_OWNER_LBR},         /* LBR_SELECT */
        {0x1c9, MSR_OWNER_LBR},         /* LASTBRANCH_TOS */
        {0x1d9, MSR_OWNER_LBR},         /* IA32_DEBUGCTL */
        {0x200, MSR_OWNER_MTRR},        /* PHYSBASE0 */
        {0x21f, MSR_OWNER_MTRR},        /* PHYSMASK15 */
        {0x220, MSR_OWNER_NONE},        /* past the 16 variable pairs */
        {0x250, MSR_OWNER_MTRR},        /* FIX64K */
        {0x251, MSR_OWNER_NONE},        /* between the fixed MTRRs */
        {0x26f, MSR_OWNER_MTRR},        /* FIX4K_F8000 */
        {0x277, MSR_OWNER_NONE},        /* PAT: VMCS-switched */
        {0x2ff, MSR_OWNER_MTRR},        /* MTRR_DEF_TYPE */
        {0x345, MSR_OWNER_LBR},         /* IA32_PERF_CAPABILITIES */
        {0x38f, MSR_OWNER_PERF_GLOBAL}, /* IA32_PERF_GLOBAL_CTRL */
        {0x390, MSR_OWNER_NONE},        /* IA32_PERF_GLOBAL_OVF_CTRL */
        {0x47f, MSR_OWNER_NONE},        /* below the VMX MSRs */
        {0x480, MSR_OWNER_GP},          /* IA32_VMX_BASIC */
        {0x491, MSR_OWNER_GP},          /* IA32_VMX_VMFUNC */
        {0x492, MSR_OWNER_GP},          /* last VMX MSR */
        {0x493, MSR_OWNER_NONE},        /* */
        {0x560, MSR_OWNER_PT},          /* RTIT_OUTPUT_BASE */
        {0x562, MSR_OWNER_NONE},        /* */
        {0x570, MSR_OWNER_PT},          /* RTIT_CTL */
        {0x572, MSR_OWNER_PT},          /* RTIT_CR3_MATCH */
        {0x573, MSR_OWNER_NONE},        /* */
        {0x587, MSR_OWNER_PT},          /* RTIT_ADDR3_B */
        {0x588, MSR_OWNER_NONE},        /* */
        {0x680, MSR_OWNER_LBR},         /* LASTBRANCH_0_FROM_IP */
        {0x69f, MSR_OWNER_LBR},         /* LASTBRANCH_31_FROM_IP */
        {0x6c0, MSR_OWNER_LBR},         /* LASTBRANCH_0_TO_IP */
        {0x6e0, MSR_OWNER_NONE},        /* IA32_TSC_DEADLINE (after the 32 TO_IPs) */
        {0x800, MSR_OWNER_NONE},        /* x2APIC: the guest owns its APIC */
        {0x8ff, MSR_OWNER_NONE},        /* */
        {0xda0, MSR_OWNER_XSS},         /* IA32_XSS */
        {0xdc0, MSR_OWNER_LBR},         /* LBR_INFO_0 */
        {0xddf, MSR_OWNER_LBR},         /* LBR_INFO_31 */
        {0x1200, MSR_OWNER_LBR},        /* IA32_LBR_0_INFO */
        {0x14ce, MSR_OWNER_LBR},        /* IA32_LBR_CTL */
        {0x14cf, MSR_OWNER_LBR},        /* IA32_LBR_DEPTH */
        {0x1500, MSR_OWNER_LBR},        /* IA32_LBR_0_FROM_IP */
        {0x163f, MSR_OWNER_LBR},        /* IA32_LBR_63_TO_IP */
        {0x1640, MSR_OWNER_NONE},       /* */
        {0xc0000080, MSR_OWNER_NONE},   /* EFER: VMCS-switched */
        {0xc0000100, MSR_OWNER_NONE},   /* FS_BASE */
        {0x4b564d00, MSR_OWNER_NONE},   /* KVM's: faults on the real CPU, the guest's #GP */
        {0xffffffffu, MSR_OWNER_NONE},  /* */
    };
    struct lbr_decision widest = {.lay = lbr_layout_of(6, 0x4e), .arch_present = true};
    widest.debugctl_virtual = true;
    for (unsigned i = 0; i < N(probes); i++) {
        assert_int_equal(new_handler(&widest, probes[i].msr), probes[i].owner);
        assert_int_equal(old_handler(&widest, probes[i].msr), probes[i].owner);
    }
}

/* every LBR decision: each MSR goes where it went before */
static void test_same_handler(void **state)
{
    (void)state;
    struct lbr_decision d[64];
    unsigned n = profiles(d, N(d));
    for (unsigned p = 0; p < n; p++) {
        uint32_t m = 0;
        do {
            if (new_handler(&d[p], m) != old_handler(&d[p], m))
                fail_msg("profile %u MSR %#x: %d, before %d", p, m, new_handler(&d[p], m),
                         old_handler(&d[p], m));
        } while (next_msr(&m));
    }
}

/* the engines' own MSR tests agree with the table where they are the owner */
static void test_engines_agree(void **state)
{
    (void)state;
    uint32_t m = 0;
    do {
        assert_int_equal(msr_owner(m) == MSR_OWNER_PT, pt_msr_is_rtit(m));
        assert_int_equal(msr_owner(m) == MSR_OWNER_MTRR, mtrr_is_msr(m));
    } while (next_msr(&m));
}

/* every LBR decision: the bitmap the table builds is the one the old loop built */
static void test_bitmap(void **state)
{
    (void)state;
    struct lbr_decision d[64];
    unsigned n = profiles(d, N(d));
    for (unsigned p = 0; p < n; p++) {
        uint8_t old[MSR_BITMAP_SIZE] = {0}, new[MSR_BITMAP_SIZE];
        for (uint32_t m = 0; m < 0x2000; m++) /* the old loop: 0-0x1fff only */
            if (old_handler(&d[p], m) != MSR_OWNER_NONE) {
                old[m / 8] |= 1u << (m % 8);
                old[0x800 + m / 8] |= 1u << (m % 8);
            }
        memset(new, 0xa5, sizeof(new)); /* the build clears what it does not set */
        msr_bitmap_build(new, lbr_claims, &d[p]);
        assert_memory_equal(new, old, sizeof(old));
        for (uint32_t m = 0; m < 0x2000; m++)
            assert_int_equal(msr_intercepted(m, lbr_claims, &d[p]), !!(old[m / 8] >> (m % 8) & 1));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sorted_disjoint), cmocka_unit_test(test_probes),
        cmocka_unit_test(test_same_handler),    cmocka_unit_test(test_engines_agree),
        cmocka_unit_test(test_bitmap),          cmocka_unit_test(test_index),
    };
    return cmocka_run_group_tests_name("msr_owner", tests, NULL, NULL);
}
