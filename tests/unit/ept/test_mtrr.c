/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/ept/mtrr.c against a reference written straight from
 * SDM Vol. 3A 11.11 that evaluates one 4 KiB page at a time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ept/mtrr.h"
#include "fakes/mtrr_ref.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

#define UC EPT_MT_UC
#define WC EPT_MT_WC
#define WT EPT_MT_WT
#define WP EPT_MT_WP
#define WB EPT_MT_WB

static unsigned long n_uniform, n_mixed;

/* compare mtrr_range_type with the page-by-page reference */
static void check_range(const struct mtrr_state *m, uint64_t base, uint64_t size)
{
    unsigned t = 99, first = ref_type(m, base);
    bool uniform = true;
    uint64_t a;
    int rc;

    for (a = base; a < base + size && uniform; a += 4096)
        uniform = ref_type(m, a) == first;
    rc = mtrr_range_type(m, base, size, &t);
    n_uniform += uniform;
    n_mixed += !uniform;
    if (uniform) {
        if (rc != 0 || t != first)
            fail_msg("[%#llx, +%#llx): got rc %d type %u, want type %u", (unsigned long long)base,
                     (unsigned long long)size, rc, t, first);
    } else if (rc != MTRR_MIXED) {
        fail_msg("[%#llx, +%#llx): got rc %d type %u, want mixed", (unsigned long long)base,
                 (unsigned long long)size, rc, t);
    }
}

/* a PC-like layout: fixed ranges, WB RAM in two ranges, a UC hole, default UC */
static struct mtrr_state pc_state(void)
{
    struct mtrr_state m;
    unsigned i;

    memset(&m, 0, sizeof(m));
    m.cap = MTRR_CAP_FIX | MTRR_CAP_WC | 10;
    m.def_type = MTRR_DEF_TYPE_E | MTRR_DEF_TYPE_FE | UC;
    m.maxphyaddr = 39;
    m.fixed[0] = fixed8(WB, WB, WB, WB, WB, WB, WB, WB);
    m.fixed[1] = fixed8(WB, WB, WB, WB, WB, WB, WB, WB);
    m.fixed[2] = fixed8(UC, UC, UC, UC, WC, WC, UC, UC);
    for (i = 3; i < 11; i++)
        m.fixed[i] =
            i < 7 ? fixed8(WP, WP, WP, WP, WP, WP, WP, WP) : fixed8(WP, WP, WP, WP, WT, WT, WT, WT);
    set_var(&m, 0, 0, GiB(2), WB);
    set_var(&m, 1, GiB(2), GiB(1), WB);
    set_var(&m, 2, GiB(2) + MiB(512), MiB(256), UC); /* overlaps range 1 */
    set_var(&m, 3, GiB(4), GiB(4), WB);
    set_var(&m, 4, GiB(6) + MiB(6), MiB(2), WT); /* WT over WB */
    set_var(&m, 5, GiB(7), KiB(64), WC);         /* WC over WB: undefined -> UC */
    set_var(&m, 6, GiB(16), MiB(1), WP);
    return m;
}

static void test_point_types(void **state)
{
    struct mtrr_state m = pc_state();
    unsigned t;

    assert_int_equal(mtrr_check(&m), 0);
#define T(addr, want)                                                                              \
    do {                                                                                           \
        assert_int_equal(mtrr_range_type(&m, (addr), 4096, &t), 0);                                \
        assert_int_equal(t, (want));                                                               \
    } while (0)
    T(0, WB);
    T(0x9f000, WB);
    T(0xa0000, UC);
    T(0xb0000, WC);
    T(0xb8000, UC);
    T(0xc0000, WP);
    T(0xf0000, WP);
    T(0xf4000, WT);
    T(0xff000, WT);
    T(MiB(1), WB);
    T(GiB(2) + MiB(600), UC); /* UC wins over WB */
    T(GiB(3), UC);            /* default */
    T(GiB(6) + MiB(7), WT);   /* WT + WB -> WT */
    T(GiB(7), UC);            /* WC + WB -> UC */
    T(GiB(7) + KiB(64), WB);
    T(GiB(16), WP);
    T(GiB(16) + MiB(1), UC);
    /* fixed ranges disabled (FE = 0): < 1 MiB follows the variable ranges */
    m.def_type &= ~MTRR_DEF_TYPE_FE;
    T(0xa0000, WB);
    T(0xc0000, WB);
    /* the CPU has no fixed ranges: the same, whatever FE says */
    m.def_type |= MTRR_DEF_TYPE_FE;
    m.cap &= ~MTRR_CAP_FIX;
    T(0xa0000, WB);
    m.cap |= MTRR_CAP_FIX;
    /* an invalid (V = 0) variable range does not count */
    m.var_mask[2] &= ~MTRR_PHYSMASK_V;
    T(GiB(2) + MiB(600), WB);
    /* default type */
    m.def_type = (m.def_type & ~MTRR_DEF_TYPE_TYPE) | WB;
    T(GiB(3), WB);
    /* MTRRs disabled: UC everywhere, over any range, fixed included */
    m.def_type &= ~MTRR_DEF_TYPE_E;
    T(0, UC);
    T(GiB(1), UC);
    assert_int_equal(mtrr_range_type(&m, 0, GiB(64), &t), 0);
    assert_int_equal(t, UC);
#undef T
}

static void test_ranges(void **state)
{
    struct mtrr_state m = pc_state();
    unsigned t;

    /* uniform huge pages */
    assert_int_equal(mtrr_range_type(&m, GiB(1), GiB(1), &t), 0);
    assert_int_equal(t, WB);
    assert_int_equal(mtrr_range_type(&m, MiB(2), MiB(2), &t), 0);
    assert_int_equal(t, WB);
    assert_int_equal(mtrr_range_type(&m, GiB(2) + MiB(512), MiB(256), &t), 0);
    assert_int_equal(t, UC);
    /* across a type boundary */
    assert_int_equal(mtrr_range_type(&m, GiB(2), GiB(1), &t), MTRR_MIXED);
    assert_int_equal(mtrr_range_type(&m, 0, MiB(2), &t), MTRR_MIXED); /* fixed ranges */
    assert_int_equal(mtrr_range_type(&m, MiB(1), MiB(1), &t), 0);     /* above them */
    assert_int_equal(mtrr_range_type(&m, 0, KiB(640), &t), 0);
    assert_int_equal(t, WB);
    assert_int_equal(mtrr_range_type(&m, GiB(6), MiB(8) + KiB(4), &t), MTRR_MIXED);
    assert_int_equal(mtrr_range_type(&m, GiB(6) + MiB(6), MiB(2), &t), 0);
    assert_int_equal(t, WT);
    /* a range smaller than the page it sits in */
    assert_int_equal(mtrr_range_type(&m, GiB(7), MiB(2), &t), MTRR_MIXED);
    assert_int_equal(mtrr_range_type(&m, GiB(7), KiB(64), &t), 0);
    assert_int_equal(t, UC);
    /* the default type around a range that has it too is uniform */
    set_var(&m, 7, GiB(20) + MiB(4), MiB(2), UC);
    assert_int_equal(mtrr_range_type(&m, GiB(20), GiB(1), &t), 0);
    assert_int_equal(t, UC);
    check_range(&m, 0, GiB(1));
    check_range(&m, 0, MiB(1));
    check_range(&m, 0xa0000, KiB(128));
    check_range(&m, 0xc0000, KiB(192));
    check_range(&m, 0xc0000, KiB(256));
}

static void test_invalid(void **state)
{
    struct mtrr_state m = pc_state();
    unsigned t;

    assert_int_equal(mtrr_range_type(&m, 1, 4096, &t), -22);
    assert_int_equal(mtrr_range_type(&m, 0, 4095, &t), -22);
    assert_int_equal(mtrr_range_type(&m, 0, 0, &t), -22);
    assert_int_equal(mtrr_range_type(&m, (1ull << 39) - 4096, 8192, &t), -22);
    assert_int_equal(mtrr_range_type(&m, ~0xfffull, 4096, &t), -22);
    assert_int_equal(mtrr_range_type(&m, 0, 4096, NULL), -22);
    assert_int_equal(mtrr_range_type(NULL, 0, 4096, &t), -22);
    m.nvar = 17;
    assert_int_equal(mtrr_check(&m), -22);
    m = pc_state();
    m.nvar = 11; /* more than MTRRcap.VCNT */
    assert_int_equal(mtrr_check(&m), -22);
    m = pc_state();
    m.maxphyaddr = 53;
    assert_int_equal(mtrr_check(&m), -22);
    m = pc_state();
    m.def_type = (m.def_type & ~0xffull) | 2; /* reserved type */
    assert_int_equal(mtrr_range_type(&m, GiB(3), 4096, &t), -22);
    m = pc_state();
    m.fixed[5] |= 7ull << 16;
    assert_int_equal(mtrr_check(&m), -22);
    m.def_type &= ~MTRR_DEF_TYPE_FE; /* fixed ranges off: not consulted */
    assert_int_equal(mtrr_check(&m), 0);
    m = pc_state();
    m.var_base[1] = (m.var_base[1] & ~0xffull) | 3;
    assert_int_equal(mtrr_check(&m), -22);
    m.var_mask[1] &= ~MTRR_PHYSMASK_V; /* invalid range: its type does not matter */
    assert_int_equal(mtrr_check(&m), 0);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* random states (contiguous and not), random ranges, within a 64 MiB space */
static void test_random_vs_reference(void **state)
{
    static const unsigned types[] = {UC, WC, WT, WP, WB};
    unsigned it, j;

    for (it = 0; it < 1000; it++) {
        struct mtrr_state m;
        unsigned n;

        memset(&m, 0, sizeof(m));
        m.maxphyaddr = 36;
        m.cap = MTRR_CAP_FIX | 8;
        m.def_type = (rnd() % 8 ? MTRR_DEF_TYPE_E : 0) | (rnd() % 2 ? MTRR_DEF_TYPE_FE : 0) |
                     types[rnd() % 5];
        for (n = 0; n < 11; n++)
            m.fixed[n] = rnd() % 2 ? fixed8(WB, WB, WB, WB, WB, WB, WB, WB)
                                   : fixed8(types[rnd() % 5], types[rnd() % 5], WB, WB, WB, WB, WB,
                                            types[rnd() % 5]);
        m.nvar = (unsigned)(rnd() % 9);
        for (n = 0; n < m.nvar; n++) {
            unsigned k = 12 + (unsigned)(rnd() % 13); /* 4 KiB .. 16 MiB */
            uint64_t base = (rnd() % (1ull << 26)) & ~((1ull << k) - 1);

            set_var(&m, n, base, 1ull << k, types[rnd() % 5]);
            if (rnd() % 8 == 0) /* a non-contiguous mask */
                m.var_mask[n] &= ~(1ull << (12 + rnd() % 14));
            if (rnd() % 10 == 0)
                m.var_mask[n] &= ~MTRR_PHYSMASK_V;
        }
        for (j = 0; j < 20; j++) {
            unsigned k = 12 + (unsigned)(rnd() % 13); /* up to 16 MiB */
            uint64_t size = rnd() % 3 ? 1ull << k : (1 + rnd() % 512) * 4096;
            uint64_t base = (rnd() % (1ull << 26)) & ~0xfffull;

            if (rnd() % 2)
                base &= ~((1ull << k) - 1);
            if (rnd() % 8 == 0)
                base = (rnd() % 2) ? 0 : MiB(1) - KiB(64);
            check_range(&m, base, size);
        }
    }
    printf("random MTRR ranges: %lu uniform, %lu mixed\n", n_uniform, n_mixed);
    assert_true(n_uniform > 1000 && n_mixed > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_point_types),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_random_vs_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
