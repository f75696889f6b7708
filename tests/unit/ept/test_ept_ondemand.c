/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/ept/ept_ondemand.c: on-demand identity maps above the
 * identity map are identity, RWX, of the MTRR type, of the largest uniform
 * page; their table pages stay within the budget for any access pattern (1 GiB
 * and 512 GiB strides, 4 and 5 levels, every page-size capability); retired
 * tables are reused only after the INVEPT; a short pool is survived.  Prints
 * the BENCH figure of `make bench-ept-ondemand`.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ept/ept_ondemand.h"
#include "ept/ept_entry.h"
#include "fakes/ept_fakemem.h"
#include "fakes/mtrr_ref.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

#define FLOOR GiB(4)

struct odfx {
    struct fx f;
    struct mtrr_state m;
    struct ept_od od;
    unsigned long flushes;
    unsigned long baseline; /* EPT pages held after the identity map */
};

static void flush_cb(void *ctx, struct ept *e)
{
    struct odfx *x = ctx;

    x->flushes++;
    fakemem_flush(&x->f.fm, e);
}

/* UC by default; a 2 MiB WC range at 16 GiB (its 1 GiB block is mixed), a
 * 64 KiB WT range at 17 GiB + 6 MiB (its 2 MiB block is mixed), WB at 32 GiB */
static void od_setup(struct odfx *x, bool has_1g, bool has_2m, unsigned levels, unsigned maxphy,
                     unsigned long budget)
{
    memset(x, 0, sizeof(*x));
    x->m.cap = MTRR_CAP_FIX | MTRR_CAP_WC | 8;
    x->m.def_type = MTRR_DEF_TYPE_E | EPT_MT_UC;
    x->m.maxphyaddr = maxphy;
    set_var(&x->m, 0, GiB(16), MiB(2), EPT_MT_WC);
    set_var(&x->m, 1, GiB(17) + MiB(6), KiB(64), EPT_MT_WT);
    set_var(&x->m, 2, GiB(32), GiB(1), EPT_MT_WB);
    assert_int_equal(fx_setup(&x->f, 4096, has_1g, has_2m), 0);
    if (levels == 5)
        assert_int_equal(ept_set_levels(&x->f.e, 5), 0);
    assert_int_equal(ept_set_maxphyaddr(&x->f.e, maxphy), 0);
    /* the identity map's stand-in: [0, 4 GiB) */
    assert_int_equal(ept_map(&x->f.e, 0, 0, FLOOR, EPT_RWX, EPT_MT_WB), 0);
    x->baseline = ept_pages_held(&x->f.e);
    assert_int_equal(
        ept_od_init(&x->od, &x->f.e, &x->m, FLOOR, 1ull << maxphy, budget, flush_cb, x), 0);
}

static void od_fini(struct odfx *x)
{
    fakemem_free(&x->f.fm);
}

/* what the VMM does on an EPT violation at gpa: map if not translated */
static void touch(struct odfx *x, uint64_t gpa)
{
    struct ept_od_map m;
    uint64_t hpa;
    unsigned perms, mt, level;

    if (ept_translate(&x->f.e, gpa, NULL, NULL, NULL, NULL) == EPT_ENOENT) {
        assert_int_equal(ept_od_fault(&x->od, &x->f.e, gpa, &m), 0);
        assert_true(m.base <= gpa && gpa - m.base < m.size);
        assert_true(m.base >= FLOOR);
        if (ept_flush_needed(&x->f.e)) /* as vmx_ept_sync() after the fault */
            flush_cb(x, &x->f.e);
    }
    assert_int_equal(ept_translate(&x->f.e, gpa, &hpa, &perms, &mt, &level), 0);
    assert_int_equal(hpa, gpa);
    assert_int_equal(perms, EPT_RWX);
    assert_int_equal(mt, ref_type(&x->m, gpa));
    assert_true(x->od.tables <= x->od.max_tables);
    assert_true(ept_pages_held(&x->f.e) <= x->baseline + x->od.max_tables);
}

static void expect_level(struct odfx *x, uint64_t gpa, unsigned level)
{
    unsigned l;

    touch(x, gpa);
    assert_int_equal(ept_translate(&x->f.e, gpa, NULL, NULL, NULL, &l), 0);
    assert_int_equal(l, level);
}

static void test_blocks(void **state)
{
    struct odfx x;
    struct ept_od_map m;

    od_setup(&x, true, true, 4, 40, EPT_OD_MAX_TABLES);
    expect_level(&x, GiB(5) + 123, EPT_LEVEL_1G);               /* UC 1 GiB */
    expect_level(&x, GiB(32) + MiB(7), EPT_LEVEL_1G);           /* WB 1 GiB */
    expect_level(&x, GiB(16) + 8, EPT_LEVEL_2M);                /* the WC 2 MiB */
    expect_level(&x, GiB(16) + MiB(2), EPT_LEVEL_2M);           /* UC next to it */
    expect_level(&x, GiB(17) + MiB(6) + KiB(60), EPT_LEVEL_4K); /* WT, in a mixed 2 MiB */
    expect_level(&x, GiB(17) + MiB(6) + KiB(64), EPT_LEVEL_4K); /* UC, same block */
    expect_level(&x, GiB(1023), EPT_LEVEL_1G);                  /* the last GiB below 2^40 */
    assert_int_equal(x.od.maps, 7);
    /* outside [floor, limit): not ours */
    assert_int_equal(ept_od_fault(&x.od, &x.f.e, GiB(4) - 1, &m), EPT_ENOENT);
    assert_int_equal(ept_od_fault(&x.od, &x.f.e, GiB(1024), &m), EPT_ENOENT);
    /* drop all: everything above floor goes, the identity map below stays */
    assert_int_equal(ept_od_drop_all(&x.od, &x.f.e), 0);
    assert_int_equal(x.od.tables, 0);
    assert_int_equal(ept_translate(&x.f.e, GiB(5), NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(ept_translate(&x.f.e, GiB(17) + MiB(6), NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(ept_translate(&x.f.e, GiB(3), NULL, NULL, NULL, NULL), 0);
    assert_int_equal(x.f.e.nr_tables, 2); /* PML4 + the PDPT the identity map uses */
    od_fini(&x);

    /* operand checks */
    od_setup(&x, true, true, 4, 40, EPT_OD_MAX_TABLES);
    assert_int_equal(ept_od_init(&x.od, &x.f.e, &x.m, FLOOR + 1, GiB(64), 16, flush_cb, &x),
                     EPT_EINVAL);
    assert_int_equal(ept_od_init(&x.od, &x.f.e, &x.m, FLOOR, 1ull << 41, 16, flush_cb, &x),
                     EPT_EINVAL);
    assert_int_equal(ept_od_init(&x.od, &x.f.e, &x.m, FLOOR, GiB(64), 2, flush_cb, &x), EPT_EINVAL);
    assert_int_equal(ept_od_init(&x.od, &x.f.e, &x.m, FLOOR, GiB(64), 16, NULL, &x), EPT_EINVAL);
    od_fini(&x);
}

/* a pinned page (another owner's 4 KiB map above floor) survives every drop */
static void test_pins(void **state)
{
    struct odfx x;
    unsigned i;

    od_setup(&x, true, true, 4, 40, EPT_OD_MAX_TABLES);
    touch(&x, GiB(7));
    /* the owner maps its page inside an on-demand 1 GiB block, then pins it */
    assert_int_equal(
        ept_map(&x.f.e, GiB(7) + MiB(3), GiB(2), KiB(4), EPT_R | EPT_W, EPT_MT_UC | EPT_MT_IPAT),
        0);
    assert_int_equal(ept_od_pin(&x.od, GiB(7) + MiB(3) + 5), 0);
    assert_int_equal(ept_od_pin(&x.od, GiB(1)), 0); /* below floor: nothing to do */
    assert_int_equal(x.od.nr_pins, 1);
    for (i = 1; i < EPT_OD_MAX_PINS; i++)
        assert_int_equal(ept_od_pin(&x.od, GiB(9) + i * KiB(4)), 0);
    assert_int_equal(ept_od_pin(&x.od, GiB(10)), EPT_ENOMEM);
    for (i = 1; i < EPT_OD_MAX_PINS; i++)
        ept_od_unpin(&x.od, GiB(9) + i * KiB(4));
    assert_int_equal(x.od.nr_pins, 1);
    assert_int_equal(ept_od_drop_all(&x.od, &x.f.e), 0);
    {
        uint64_t hpa;
        unsigned perms;

        assert_int_equal(ept_translate(&x.f.e, GiB(7) + MiB(3), &hpa, &perms, NULL, NULL), 0);
        assert_int_equal(hpa, GiB(2));
        assert_int_equal(perms, EPT_R | EPT_W);
    }
    assert_int_equal(ept_translate(&x.f.e, GiB(7), NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(ept_translate(&x.f.e, GiB(7) + MiB(3) + KiB(4), NULL, NULL, NULL, NULL),
                     EPT_ENOENT);
    /* unpinned, the next drop takes it and its tables */
    ept_od_unpin(&x.od, GiB(7) + MiB(3));
    assert_int_equal(ept_od_drop_all(&x.od, &x.f.e), 0);
    assert_int_equal(ept_translate(&x.f.e, GiB(7) + MiB(3), NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(x.f.e.nr_tables, 2);
    od_fini(&x);
}

/* n accesses from floor at 'stride' (+ 'skew' per access), wrapping below limit */
static unsigned long run_reads(struct odfx *x, unsigned long n, uint64_t stride, uint64_t skew)
{
    uint64_t span = x->od.limit - FLOOR, off = 0;
    unsigned long i, peak = 0;

    for (i = 0; i < n; i++) {
        uint64_t gpa = FLOOR + (off % span);

        touch(x, gpa & ~7ull);
        if (ept_pages_held(&x->f.e) - x->baseline > peak)
            peak = ept_pages_held(&x->f.e) - x->baseline;
        off += stride + skew * (i & 511);
    }
    return peak;
}

static void test_bounded(void **state)
{
    static const struct {
        bool has_1g, has_2m;
        unsigned levels, maxphy;
    } cpus[] = {{true, true, 4, 40},  {false, true, 4, 40},  {false, false, 4, 40},
                {true, true, 4, 46},  {false, false, 4, 48}, {true, true, 5, 52},
                {false, false, 5, 52}};
    static const uint64_t strides[][2] = {
        {GiB(1), 0}, {GiB(512) + MiB(2), KiB(4)}, {GiB(1) + MiB(2), KiB(4)}};
    unsigned c, s;

    for (c = 0; c < sizeof(cpus) / sizeof(cpus[0]); c++)
        for (s = 0; s < sizeof(strides) / sizeof(strides[0]); s++) {
            struct odfx x;
            unsigned long peak;

            od_setup(&x, cpus[c].has_1g, cpus[c].has_2m, cpus[c].levels, cpus[c].maxphy,
                     EPT_OD_MAX_TABLES);
            peak = run_reads(&x, 20000, strides[s][0], strides[s][1]);
            assert_true(peak <= EPT_OD_MAX_TABLES);
            /* every retired page went back to spare at an INVEPT, none leaked */
            assert_int_equal(x.f.e.nr_retired, 0);
            assert_int_equal(x.f.fm.nallocs, ept_pages_held(&x.f.e));
            /* the identity map below floor is untouched */
            assert_int_equal(ept_translate(&x.f.e, GiB(2), NULL, NULL, NULL, NULL), 0);
            if (!cpus[c].has_2m)
                assert_true(x.od.drops > 0); /* the budget was reached and honoured */
            od_fini(&x);
        }
}

/* a pool that runs dry: the on-demand tables are reused, the fault still maps */
static void test_short_pool(void **state)
{
    struct odfx x;
    unsigned i;

    od_setup(&x, false, false, 4, 46, EPT_OD_MAX_TABLES);
    x.f.fm.budget = 3; /* one 4 KiB map in a fresh 512 GiB region, no more */
    for (i = 0; i < 64; i++)
        touch(&x, GiB(512) * (1 + i % 60) + KiB(4) * i);
    assert_true(x.od.drops >= 63);
    assert_int_equal(x.f.fm.budget, 0);
    /* and a pool with less than one map's worth fails cleanly, tree as before */
    od_fini(&x);
    od_setup(&x, false, false, 4, 46, EPT_OD_MAX_TABLES);
    x.f.fm.budget = 2;
    {
        struct ept_od_map m;
        assert_int_equal(ept_od_fault(&x.od, &x.f.e, GiB(600), &m), EPT_ENOMEM);
        assert_int_equal(ept_translate(&x.f.e, GiB(600), NULL, NULL, NULL, NULL), EPT_ENOENT);
    }
    od_fini(&x);
}

/* the figure: EPT pool pages after 100,000 reads at 1 GiB strides above RAM */
static void test_bench(void **state)
{
    static const struct {
        const char *what;
        bool has_1g, has_2m;
        unsigned levels, maxphy;
        uint64_t stride, skew;
    } runs[] = {
        {"1G+2M pages, MAXPHYADDR 40 (Bochs), 1 GiB strides", true, true, 4, 40, GiB(1), 0},
        {"2M pages only, MAXPHYADDR 46, 1 GiB strides", false, true, 4, 46, GiB(1), 0},
        {"4K pages only, 5-level, MAXPHYADDR 52, 512 GiB + 2 MiB strides", false, false, 5, 52,
         GiB(512) + MiB(2), KiB(4)},
    };
    unsigned r;

    for (r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        struct odfx x;
        unsigned long peak;

        od_setup(&x, runs[r].has_1g, runs[r].has_2m, runs[r].levels, runs[r].maxphy,
                 EPT_OD_MAX_TABLES);
        peak = run_reads(&x, 100000, runs[r].stride, runs[r].skew);
        printf("BENCH ept on-demand, 100000 reads above RAM, %s: EPT pool pages +%lu after the "
               "identity map (peak), bound %u (EPT_OD_MAX_TABLES); %lu maps, %lu drop-all rounds\n",
               runs[r].what, peak, EPT_OD_MAX_TABLES, x.od.maps, x.od.drops);
        assert_true(peak <= EPT_OD_MAX_TABLES);
        od_fini(&x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),     cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_short_pool), cmocka_unit_test(test_pins),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
