/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/ept/ept.c: page sizes, translate round trips, splits,
 * protect/narrowed, unmap/remap, operand validation, allocation failure at
 * every point, and a replay of every recorded store proving no torn state.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ept/ept.h"
#include "ept/ept_entry.h"
#include "fakes/ept_fakemem.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

static void fx_init(struct fx *f, size_t npages, bool has_1g, bool has_2m)
{
    assert_int_equal(fx_setup(f, npages, has_1g, has_2m), 0);
}

static void fx_fini(struct fx *f)
{
    fakemem_free(&f->fm);
}

struct xl {
    int rc;
    uint64_t hpa;
    unsigned perms, mt, level;
};

static struct xl xlate(const struct ept *e, uint64_t gpa)
{
    struct xl x = {0};

    x.rc = ept_translate(e, gpa, &x.hpa, &x.perms, &x.mt, &x.level);
    return x;
}

static void expect_map(const struct ept *e, uint64_t gpa, uint64_t hpa, unsigned perms, unsigned mt,
                       unsigned level)
{
    struct xl x = xlate(e, gpa);

    assert_int_equal(x.rc, 0);
    assert_int_equal(x.hpa, hpa);
    assert_int_equal(x.perms, perms);
    assert_int_equal(x.mt, mt);
    if (level)
        assert_int_equal(x.level, level);
}

static void test_init_eptp(void **state)
{
    struct fx f;

    fx_init(&f, 16, true, true);
    assert_int_equal(f.e.root_pa, FAKEMEM_PA_BASE);
    assert_ptr_equal(f.e.root, f.fm.arena);
    /* WB paging structures, 4-level walk, A/D off (pt-facts.md G.6) */
    assert_int_equal(ept_eptp(&f.e), FAKEMEM_PA_BASE | (3 << 3) | 6);
    assert_int_equal(ept_eptp(&f.e) & VMX_EPTP_AD_ENABLE_BIT, 0);
    assert_int_equal(f.e.nr_tables, 1);
    assert_int_equal(ept_translate(&f.e, 0, NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(ept_translate(&f.e, 1ull << 48, NULL, NULL, NULL, NULL), EPT_EINVAL);
    fx_fini(&f);

    /* 1 GiB pages are used only together with 2 MiB pages */
    fx_init(&f, 600, true, false);
    assert_false(f.e.has_1g);
    assert_int_equal(ept_map(&f.e, 0, 0, GiB(1), EPT_R, EPT_MT_WB), 0);
    assert_int_equal(f.e.nr_leaves[0], 512 * 512);
    fx_fini(&f);

    /* allocator out at init */
    fakemem_init(&f.fm, 0);
    {
        struct ept_ops ops = fakemem_ops(&f.fm);
        assert_int_equal(ept_init(&f.e, &ops, true, true), EPT_ENOMEM);
        ops.alloc_page = NULL;
        assert_int_equal(ept_init(&f.e, &ops, true, true), EPT_EINVAL);
        /* no invalidation hook: break-before-make would be impossible */
        ops = fakemem_ops(&f.fm);
        ops.flush = NULL;
        assert_int_equal(ept_init(&f.e, &ops, true, true), EPT_EINVAL);
    }
    fx_fini(&f);
}

static void test_page_sizes(void **state)
{
    struct fx f;
    unsigned i;

    /* 1 GiB page where gpa, hpa and size allow it */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(7), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    expect_map(&f.e, GiB(1), GiB(7), EPT_RWX, EPT_MT_WB, EPT_LEVEL_1G);
    expect_map(&f.e, GiB(2) - 8, GiB(8) - 8, EPT_RWX, EPT_MT_WB, EPT_LEVEL_1G);
    assert_int_equal(xlate(&f.e, GiB(2)).rc, EPT_ENOENT);
    assert_int_equal(xlate(&f.e, GiB(1) - 4096).rc, EPT_ENOENT);
    assert_int_equal(f.e.nr_leaves[2], 1);
    assert_int_equal(f.e.nr_tables, 2); /* PML4 + PDPT */
    assert_false(ept_flush_needed(&f.e));
    fx_fini(&f);

    /* without 1 GiB pages: 512 x 2 MiB */
    fx_init(&f, 64, false, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(7), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(f.e.nr_leaves[1], 512);
    assert_int_equal(f.e.nr_leaves[2], 0);
    assert_int_equal(f.e.nr_tables, 3);
    expect_map(&f.e, GiB(1) + MiB(3) + 5, GiB(7) + MiB(3) + 5, EPT_RWX, EPT_MT_WB, EPT_LEVEL_2M);
    fx_fini(&f);

    /* neither: 4 KiB pages */
    fx_init(&f, 64, false, false);
    assert_int_equal(ept_map(&f.e, MiB(4), MiB(8), MiB(4), EPT_R, EPT_MT_UC), 0);
    assert_int_equal(f.e.nr_leaves[0], 1024);
    expect_map(&f.e, MiB(6) + 123, MiB(10) + 123, EPT_R, EPT_MT_UC, EPT_LEVEL_4K);
    fx_fini(&f);

    /* hpa only 4 KiB aligned relative to gpa: 4 KiB pages although gpa is 1 GiB aligned */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), MiB(2) + KiB(4), MiB(4), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(f.e.nr_leaves[0], 1024);
    assert_int_equal(f.e.nr_leaves[1] + f.e.nr_leaves[2], 0);
    fx_fini(&f);

    /* unaligned ends: 4K head, 2M middle, 1G core, 2M, 4K tail */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1) - MiB(2) - KiB(8), GiB(5) - MiB(2) - KiB(8),
                             GiB(1) + MiB(4) + KiB(12), EPT_R | EPT_X, EPT_MT_WT | EPT_MT_IPAT),
                     0);
    assert_int_equal(f.e.nr_leaves[0], 3);
    assert_int_equal(f.e.nr_leaves[1], 2);
    assert_int_equal(f.e.nr_leaves[2], 1);
    expect_map(&f.e, GiB(1) - MiB(2) - KiB(8), GiB(5) - MiB(2) - KiB(8), EPT_R | EPT_X,
               EPT_MT_WT | EPT_MT_IPAT, EPT_LEVEL_4K);
    expect_map(&f.e, GiB(1) - 1, GiB(5) - 1, EPT_R | EPT_X, EPT_MT_WT | EPT_MT_IPAT, EPT_LEVEL_2M);
    expect_map(&f.e, GiB(1), GiB(5), EPT_R | EPT_X, EPT_MT_WT | EPT_MT_IPAT, EPT_LEVEL_1G);
    expect_map(&f.e, GiB(2) + 7, GiB(6) + 7, EPT_R | EPT_X, EPT_MT_WT | EPT_MT_IPAT, EPT_LEVEL_2M);
    expect_map(&f.e, GiB(2) + MiB(2) + 7, GiB(6) + MiB(2) + 7, EPT_R | EPT_X,
               EPT_MT_WT | EPT_MT_IPAT, EPT_LEVEL_4K);
    assert_int_equal(xlate(&f.e, GiB(2) + MiB(2) + KiB(4)).rc, EPT_ENOENT);
    assert_int_equal(xlate(&f.e, GiB(1) - MiB(2) - KiB(12)).rc, EPT_ENOENT);
    fx_fini(&f);

    /* raw leaf format: memtype bits 5:3, IPAT bit 6, bit 7 on huge leaves only, no reserved bits */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, 0, GiB(3), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_map(&f.e, GiB(1), MiB(2), MiB(2), EPT_R, EPT_MT_WC | EPT_MT_IPAT), 0);
    assert_int_equal(ept_map(&f.e, GiB(1) + MiB(2), KiB(4), KiB(4), EPT_R | EPT_W, EPT_MT_WP), 0);
    {
        uint64_t *pdpt = (uint64_t *)(f.fm.arena + 4096);
        uint64_t pml4e = f.e.root[0], pdpte0 = pdpt[0];
        uint64_t *pd = (uint64_t *)(f.fm.arena + ((pdpt[1] & EPT_ADDR_MASK) - FAKEMEM_PA_BASE));
        uint64_t *pt = (uint64_t *)(f.fm.arena + ((pd[1] & EPT_ADDR_MASK) - FAKEMEM_PA_BASE));

        assert_int_equal(pml4e & ~EPT_ADDR_MASK, EPT_SW_USED | 7);
        assert_int_equal(pdpte0, GiB(3) | EPT_SW_USED | (1 << 7) | (6 << 3) | 7);
        assert_int_equal(pd[0], MiB(2) | EPT_SW_USED | (1 << 7) | (1 << 6) | (1 << 3) | 1);
        assert_int_equal(pd[1] & ~EPT_ADDR_MASK, EPT_SW_USED | 7);
        assert_int_equal(pt[0], KiB(4) | EPT_SW_USED | (5 << 3) | 3);
    }
    for (i = 0; i < 3; i++)
        assert_true(f.e.nr_leaves[i] == 1);
    fx_fini(&f);
}

static void test_validation(void **state)
{
    struct fx f;
    struct tree_dump before = {0}, after = {0};
    bool narrowed = true;
    unsigned i;
    static const unsigned bad_mt[] = {2, 3, 7, 0xa, 0xf, 0x10, 0x16, 0xff};
    static const unsigned bad_perms[] = {0, EPT_W, EPT_X, EPT_W | EPT_X, 8, 9};

    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    tree_dump(&f.e, &before);
    f.fm.nallocs = 0;
    assert_int_equal(ept_map(&f.e, 4096 + 1, 0, 4096, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, 1, 4096, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, 0, 4095, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, 0, 0, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, (1ull << 48) - 4096, 0, 8192, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 1ull << 48, 0, 4096, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, 0, ~0xfffull, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, (1ull << 52) - 4096, 8192, EPT_R, EPT_MT_WB), EPT_EINVAL);
    for (i = 0; i < sizeof(bad_mt) / sizeof(bad_mt[0]); i++)
        assert_int_equal(ept_map(&f.e, 0, 0, 4096, EPT_R, bad_mt[i]), EPT_EINVAL);
    for (i = 0; i < sizeof(bad_perms) / sizeof(bad_perms[0]); i++)
        assert_int_equal(ept_map(&f.e, 0, 0, 4096, bad_perms[i], EPT_MT_WB), EPT_EINVAL);
    for (i = 1; i < sizeof(bad_perms) / sizeof(bad_perms[0]); i++)
        assert_int_equal(ept_protect(&f.e, GiB(1), 4096, bad_perms[i], &narrowed), EPT_EINVAL);
    assert_false(narrowed);
    assert_int_equal(ept_protect(&f.e, GiB(1) + 1, 4096, EPT_R, NULL), EPT_EINVAL);
    assert_int_equal(ept_unmap(&f.e, GiB(1), 0), EPT_EINVAL);
    assert_int_equal(ept_unmap(&f.e, (1ull << 48) - 4096, 8192), EPT_EINVAL);
    /* protect over a hole: nothing changes, not even the part that is mapped */
    assert_int_equal(ept_protect(&f.e, GiB(1) - 4096, 8192, EPT_R, &narrowed), EPT_ENOENT);
    assert_int_equal(ept_protect(&f.e, GiB(2) - 4096, 8192, EPT_R, &narrowed), EPT_ENOENT);
    assert_false(narrowed);
    tree_dump(&f.e, &after);
    assert_true(tree_equal(&before, &after));
    assert_int_equal(f.fm.nallocs, 0);
    assert_false(ept_flush_needed(&f.e));

    /* MAXPHYADDR: refused once mapped; then limits hpa */
    assert_int_equal(ept_set_maxphyaddr(&f.e, 39), EPT_EINVAL);
    fx_fini(&f);
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_set_maxphyaddr(&f.e, 53), EPT_EINVAL);
    assert_int_equal(ept_set_maxphyaddr(&f.e, 39), 0);
    assert_int_equal(ept_map(&f.e, 0, (1ull << 39) - 4096, 8192, EPT_R, EPT_MT_WB), EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 0, (1ull << 39) - 4096, 4096, EPT_R, EPT_MT_WB), 0);
    fx_fini(&f);
    /* table pages above MAXPHYADDR (the fake PAs are above 2^36) */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_set_maxphyaddr(&f.e, 36), EPT_EINVAL);
    fx_fini(&f);
    tree_dump_free(&before);
    tree_dump_free(&after);
}

static void test_split_on_map(void **state)
{
    struct fx f;
    unsigned i;

    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    /* same mapping again: no change, no split, no flush */
    assert_int_equal(ept_map(&f.e, GiB(1) + MiB(6), GiB(1) + MiB(6), KiB(4), EPT_RWX, EPT_MT_WB),
                     0);
    assert_int_equal(f.e.nr_tables, 2);
    assert_false(ept_flush_needed(&f.e));
    /* one page remapped elsewhere: 1G -> 2M table -> 4K table, linked with one
     * break-before-make; the narrowed page was written before that invalidation, into a
     * table no CPU could reach, so nothing is owed after it */
    assert_int_equal(ept_map(&f.e, GiB(1) + MiB(6), GiB(9), KiB(4), EPT_R, EPT_MT_UC), 0);
    assert_int_equal(f.e.nr_breaks, 1);
    assert_false(ept_flush_needed(&f.e));
    assert_int_equal(f.e.nr_tables, 4);
    assert_int_equal(f.e.nr_leaves[2], 0);
    assert_int_equal(f.e.nr_leaves[1], 511);
    assert_int_equal(f.e.nr_leaves[0], 512);
    expect_map(&f.e, GiB(1) + MiB(6), GiB(9), EPT_R, EPT_MT_UC, EPT_LEVEL_4K);
    expect_map(&f.e, GiB(1) + MiB(6) + KiB(4), GiB(1) + MiB(6) + KiB(4), EPT_RWX, EPT_MT_WB,
               EPT_LEVEL_4K);
    expect_map(&f.e, GiB(1) + MiB(6) - 1, GiB(1) + MiB(6) - 1, EPT_RWX, EPT_MT_WB, EPT_LEVEL_2M);
    for (i = 0; i < 512; i++) {
        uint64_t g = GiB(1) + (uint64_t)i * MiB(2) + KiB(4) * (i % 512);
        if (g != GiB(1) + MiB(6))
            expect_map(&f.e, g, g, EPT_RWX, EPT_MT_WB, 0);
    }
    /* remap 1G over the split region: the existing tables are filled, left uniform and
     * merged back into the 1G leaf with one break-before-make, whose
     * invalidation makes both tables spare at once */
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(f.e.nr_breaks, 2);
    assert_false(ept_flush_needed(&f.e));
    assert_int_equal(f.e.nr_tables, 2);
    assert_int_equal(f.e.nr_retired, 0);
    assert_int_equal(f.e.nr_spare, 2);
    expect_map(&f.e, GiB(1) + MiB(6), GiB(1) + MiB(6), EPT_RWX, EPT_MT_WB, EPT_LEVEL_1G);
    assert_int_equal(f.e.nr_leaves[2], 1);
    assert_int_equal(f.e.nr_leaves[1], 0);
    assert_int_equal(f.e.nr_leaves[0], 0);
    fx_fini(&f);
}

static void test_protect(void **state)
{
    struct fx f;
    bool narrowed;
    unsigned long tables;

    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, 0, 0, GiB(1), EPT_R | EPT_W, EPT_MT_WB), 0);
    /* widening: not narrowed */
    narrowed = true;
    assert_int_equal(ept_protect(&f.e, 0, GiB(1), EPT_RWX, &narrowed), 0);
    assert_false(narrowed);
    assert_int_equal(f.e.nr_tables, 2); /* whole page: no split */
    expect_map(&f.e, 12345, 12345, EPT_RWX, EPT_MT_WB, EPT_LEVEL_1G);
    /* same perms on part of a huge page: nothing to split */
    assert_int_equal(ept_protect(&f.e, MiB(3), KiB(4), EPT_RWX, &narrowed), 0);
    assert_false(narrowed);
    assert_int_equal(f.e.nr_tables, 2);
    /* narrowing one page */
    fx_flush(&f);
    assert_int_equal(ept_protect(&f.e, MiB(3), KiB(4), EPT_R | EPT_X, &narrowed), 0);
    assert_true(narrowed);
    /* the split's break-before-make invalidated after the narrowed page was written */
    assert_int_equal(f.e.nr_breaks, 1);
    assert_false(ept_flush_needed(&f.e));
    expect_map(&f.e, MiB(3), MiB(3), EPT_R | EPT_X, EPT_MT_WB, EPT_LEVEL_4K);
    expect_map(&f.e, MiB(3) + KiB(4), MiB(3) + KiB(4), EPT_RWX, EPT_MT_WB, EPT_LEVEL_4K);
    expect_map(&f.e, MiB(3) - KiB(4), MiB(3) - KiB(4), EPT_RWX, EPT_MT_WB, EPT_LEVEL_4K);
    expect_map(&f.e, MiB(4), MiB(4), EPT_RWX, EPT_MT_WB, EPT_LEVEL_2M);
    tables = f.e.nr_tables;
    /* R|X -> R|W: X removed, W added: narrowed */
    assert_int_equal(ept_protect(&f.e, MiB(3), KiB(4), EPT_R | EPT_W, &narrowed), 0);
    assert_true(narrowed);
    /* -> 0: not present, keeps address and type; translate still reports them */
    assert_int_equal(ept_protect(&f.e, MiB(3), KiB(8), 0, &narrowed), 0);
    assert_true(narrowed);
    expect_map(&f.e, MiB(3) + KiB(4), MiB(3) + KiB(4), 0, EPT_MT_WB, EPT_LEVEL_4K);
    /* back to RWX: widening only; the 4K and 2M tables are uniform again and merge back
     * into the 1G leaf, with one break-before-make */
    assert_int_equal(ept_protect(&f.e, MiB(3), KiB(8), EPT_RWX, &narrowed), 0);
    assert_false(narrowed);
    assert_int_equal(f.e.nr_breaks, 2);
    assert_int_equal(f.e.nr_tables, tables - 2);
    expect_map(&f.e, MiB(3), MiB(3), EPT_RWX, EPT_MT_WB, EPT_LEVEL_1G);
    /* whole 1G to 0 and back keeps address and type */
    assert_int_equal(ept_protect(&f.e, 0, GiB(1), 0, &narrowed), 0);
    assert_true(narrowed);
    expect_map(&f.e, MiB(700), MiB(700), 0, EPT_MT_WB, EPT_LEVEL_1G);
    assert_int_equal(ept_protect(&f.e, 0, GiB(1), EPT_R, &narrowed), 0);
    assert_false(narrowed);
    expect_map(&f.e, MiB(3), MiB(3), EPT_R, EPT_MT_WB, EPT_LEVEL_1G);
    fx_fini(&f);
}

static void test_unmap_remap(void **state)
{
    struct fx f;

    fx_init(&f, 64, true, true);
    assert_int_equal(ept_unmap(&f.e, 0, GiB(4)), 0); /* holes are fine */
    assert_int_equal(f.fm.nallocs, 1);
    assert_false(ept_flush_needed(&f.e));
    assert_int_equal(ept_map(&f.e, GiB(2), GiB(2), GiB(1), EPT_RWX, EPT_MT_UC), 0);
    assert_int_equal(ept_unmap(&f.e, GiB(2) + MiB(5), KiB(4)), 0);
    assert_int_equal(f.e.nr_breaks, 1); /* the 1G leaf split: invalidated before the link */
    assert_false(ept_flush_needed(&f.e));
    assert_int_equal(xlate(&f.e, GiB(2) + MiB(5)).rc, EPT_ENOENT);
    expect_map(&f.e, GiB(2) + MiB(5) + KiB(4), GiB(2) + MiB(5) + KiB(4), EPT_RWX, EPT_MT_UC,
               EPT_LEVEL_4K);
    expect_map(&f.e, GiB(2) + MiB(5) - KiB(4), GiB(2) + MiB(5) - KiB(4), EPT_RWX, EPT_MT_UC,
               EPT_LEVEL_4K);
    assert_int_equal(f.e.nr_leaves[0], 511);
    /* protect across the hole fails and changes nothing */
    assert_int_equal(ept_protect(&f.e, GiB(2) + MiB(4), MiB(2), EPT_R, NULL), EPT_ENOENT);
    expect_map(&f.e, GiB(2) + MiB(4), GiB(2) + MiB(4), EPT_RWX, EPT_MT_UC, EPT_LEVEL_4K);
    /* remap the page: the split is undone, the 1G leaf is back */
    assert_int_equal(ept_map(&f.e, GiB(2) + MiB(5), GiB(2) + MiB(5), KiB(4), EPT_RWX, EPT_MT_UC),
                     0);
    expect_map(&f.e, GiB(2) + MiB(5), GiB(2) + MiB(5), EPT_RWX, EPT_MT_UC, EPT_LEVEL_1G);
    assert_int_equal(f.e.nr_tables, 2);
    /* split again, unmap everything: no leaf left, the tables still linked stay */
    assert_int_equal(ept_unmap(&f.e, GiB(2) + MiB(5), KiB(4)), 0);
    assert_int_equal(f.e.nr_tables, 4);
    assert_int_equal(ept_unmap(&f.e, GiB(1), GiB(3)), 0);
    assert_int_equal(f.e.nr_leaves[0] + f.e.nr_leaves[1] + f.e.nr_leaves[2], 0);
    assert_int_equal(xlate(&f.e, GiB(2) + MiB(5)).rc, EPT_ENOENT);
    assert_int_equal(f.e.nr_tables, 4);
    /* and map again at a different size and place: filled, uniform, merged */
    assert_int_equal(ept_map(&f.e, GiB(2), GiB(30), GiB(1), EPT_R, EPT_MT_WB), 0);
    expect_map(&f.e, GiB(2) + MiB(5), GiB(30) + MiB(5), EPT_R, EPT_MT_WB, EPT_LEVEL_1G);
    expect_map(&f.e, GiB(2) + MiB(9), GiB(30) + MiB(9), EPT_R, EPT_MT_WB, EPT_LEVEL_1G);
    assert_int_equal(f.e.nr_tables, 2);
    fx_fini(&f);
}

/* ---- allocation failure at every point ---- */

/* a retired page: unreachable, all zero but a not-present word 0 (the list link) */
static void expect_retired_page(struct fx *f, uint64_t pa)
{
    const uint64_t *t = f->e.ops.pa_to_va(f->e.ops.ctx, pa);
    unsigned i;

    assert_false(slot_reachable(&f->e, t));
    assert_int_equal(t[0] & (VMX_EPT_RWX_MASK | EPT_SW_USED | (1ull << 10)), 0);
    for (i = 1; i < EPT_ENTRIES; i++)
        assert_int_equal(t[i], 0);
}

static void test_unmap_prune(void **state)
{
    struct fx f;
    uint64_t pa, pages[3];
    unsigned i;

    fx_init(&f, 64, true, true);
    /* a 4 KiB page in a fresh 512 GiB region: PDPT, PD, PT */
    assert_int_equal(ept_map(&f.e, GiB(513) + KiB(8), GiB(2), KiB(4), EPT_RWX, EPT_MT_UC), 0);
    assert_int_equal(f.e.nr_tables, 4);
    fx_flush(&f);
    /* plain unmap keeps the tables */
    assert_int_equal(ept_unmap(&f.e, GiB(513), GiB(1)), 0);
    assert_int_equal(f.e.nr_tables, 4);
    assert_int_equal(f.e.nr_retired, 0);
    fx_flush(&f);
    assert_int_equal(ept_map(&f.e, GiB(513) + KiB(8), GiB(2), KiB(4), EPT_RWX, EPT_MT_UC), 0);
    fx_flush(&f);
    /* prune: all three become empty, are unlinked and retired, INVEPT needed */
    assert_int_equal(ept_unmap_prune(&f.e, GiB(512), GiB(512)), 0);
    assert_int_equal(f.e.nr_tables, 1);
    assert_int_equal(f.e.nr_retired, 3);
    assert_int_equal(f.e.nr_spare, 0);
    assert_int_equal(ept_pages_held(&f.e), 4);
    assert_true(ept_flush_needed(&f.e));
    assert_int_equal(f.e.root[1], 0);
    assert_int_equal(xlate(&f.e, GiB(513) + KiB(8)).rc, EPT_ENOENT);
    for (pa = f.e.retired_pa, i = 0; i < 3; i++) {
        pages[i] = pa;
        expect_retired_page(&f, pa);
        pa = ((uint64_t *)f.e.ops.pa_to_va(f.e.ops.ctx, pa))[0];
    }
    /* before the INVEPT a retired page is never reused: a new map allocates */
    f.fm.nallocs = 0;
    assert_int_equal(ept_map(&f.e, GiB(1024), GiB(2), KiB(4), EPT_R, EPT_MT_WB), 0);
    assert_int_equal(f.fm.nallocs, 3);
    for (i = 0; i < 3; i++)
        expect_retired_page(&f, pages[i]);
    /* after it they are spare: the next map allocates nothing */
    fx_flush(&f);
    assert_int_equal(f.e.nr_retired, 0);
    assert_int_equal(f.e.nr_spare, 3);
    f.fm.nallocs = 0;
    assert_int_equal(ept_map(&f.e, GiB(513), GiB(2), KiB(4), EPT_R, EPT_MT_WB), 0);
    assert_int_equal(f.fm.nallocs, 0);
    assert_int_equal(f.e.nr_spare, 0);
    expect_map(&f.e, GiB(513), GiB(2), EPT_R, EPT_MT_WB, EPT_LEVEL_4K);
    expect_map(&f.e, GiB(1024), GiB(2), EPT_R, EPT_MT_WB, EPT_LEVEL_4K);
    assert_int_equal(ept_pages_held(&f.e), 7);
    fx_fini(&f);

    /* a table that keeps an entry in use stays, a protected-to-0 entry included */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), MiB(4), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_map(&f.e, GiB(1) + MiB(4), GiB(1), KiB(8), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_protect(&f.e, GiB(1) + MiB(4), KiB(4), 0, NULL), 0);
    assert_int_equal(f.e.nr_tables, 4);
    assert_int_equal(ept_unmap_prune(&f.e, GiB(1), MiB(4)), 0);
    assert_int_equal(ept_unmap_prune(&f.e, GiB(1) + MiB(4) + KiB(4), KiB(4)), 0);
    assert_int_equal(f.e.nr_tables, 4); /* PT holds the protected page, PD the PT */
    assert_int_equal(xlate(&f.e, GiB(1) + MiB(4)).perms, 0);
    assert_int_equal(ept_unmap_prune(&f.e, GiB(1) + MiB(4), KiB(4)), 0);
    assert_int_equal(f.e.nr_tables, 1);
    assert_int_equal(f.e.nr_retired, 3);
    /* a prune that splits at its ends: the split table stays, the rest goes */
    fx_flush(&f);
    assert_int_equal(ept_map(&f.e, GiB(3), GiB(3), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_unmap_prune(&f.e, GiB(3), GiB(1) - KiB(4)), 0);
    expect_map(&f.e, GiB(4) - KiB(4), GiB(4) - KiB(4), EPT_RWX, EPT_MT_WB, EPT_LEVEL_4K);
    assert_int_equal(f.e.nr_leaves[0] + f.e.nr_leaves[1] + f.e.nr_leaves[2], 1);
    assert_int_equal(f.e.nr_tables, 4);
    fx_fini(&f);
}

static void test_five_levels(void **state)
{
    struct fx f;

    fx_init(&f, 64, true, true);
    assert_int_equal(ept_set_levels(&f.e, 3), EPT_EINVAL);
    assert_int_equal(ept_set_levels(&f.e, 5), 0);
    assert_int_equal(ept_eptp(&f.e), FAKEMEM_PA_BASE | (4 << 3) | 6);
    assert_int_equal(ept_gpa_limit(&f.e), 1ull << 57);
    /* above 2^48 and at 2^52 - 1 GiB: one PML4, one PDPT each for a 1 GiB page */
    assert_int_equal(ept_map(&f.e, 1ull << 48, GiB(1), GiB(1), EPT_RWX, EPT_MT_UC), 0);
    assert_int_equal(f.e.nr_tables, 3);
    assert_int_equal(ept_map(&f.e, (1ull << 52) - GiB(1), GiB(2), MiB(2), EPT_R, EPT_MT_UC), 0);
    assert_int_equal(f.e.nr_tables, 6);
    expect_map(&f.e, (1ull << 48) + 5, GiB(1) + 5, EPT_RWX, EPT_MT_UC, EPT_LEVEL_1G);
    expect_map(&f.e, (1ull << 52) - GiB(1), GiB(2), EPT_R, EPT_MT_UC, EPT_LEVEL_2M);
    assert_int_equal(xlate(&f.e, 0).rc, EPT_ENOENT);
    assert_int_equal(xlate(&f.e, 1ull << 57).rc, EPT_EINVAL);
    assert_int_equal(ept_map(&f.e, 1ull << 57, 0, KiB(4), EPT_R, EPT_MT_UC), EPT_EINVAL);
    /* refused once anything is mapped */
    assert_int_equal(ept_set_levels(&f.e, 4), EPT_EINVAL);
    /* prune below the root: PML4 and PDPT go, the PML5 stays */
    assert_int_equal(ept_unmap_prune(&f.e, 1ull << 48, 1ull << 48), 0);
    assert_int_equal(f.e.nr_tables, 4);
    assert_int_equal(f.e.nr_retired, 2);
    fx_fini(&f);

    /* 4 levels: 2^48 is beyond the walk */
    fx_init(&f, 16, true, true);
    assert_int_equal(ept_map(&f.e, 1ull << 48, 0, KiB(4), EPT_R, EPT_MT_UC), EPT_EINVAL);
    assert_int_equal(ept_gpa_limit(&f.e), 1ull << 48);
    fx_fini(&f);
}

enum op_kind { OP_MAP, OP_UNMAP, OP_PROTECT, OP_UNMAP_PRUNE };
struct op {
    enum op_kind kind;
    uint64_t gpa, hpa, size;
    unsigned perms, mt;
};

static int do_op(struct ept *e, const struct op *o, bool *narrowed)
{
    switch (o->kind) {
    case OP_MAP:
        return ept_map(e, o->gpa, o->hpa, o->size, o->perms, o->mt);
    case OP_UNMAP:
        return ept_unmap(e, o->gpa, o->size);
    case OP_PROTECT:
        return ept_protect(e, o->gpa, o->size, o->perms, narrowed);
    case OP_UNMAP_PRUNE:
        return ept_unmap_prune(e, o->gpa, o->size);
    }
    return -1;
}

/* the fixture state before each op: a 1 GiB page, a 2 MiB page and a few 4 KiB pages */
static void setup_mixed(struct fx *f)
{
    fx_init(f, 256, true, true);
    assert_int_equal(ept_map(&f->e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_map(&f->e, GiB(3), GiB(5), MiB(2), EPT_R, EPT_MT_UC), 0);
    assert_int_equal(ept_map(&f->e, GiB(3) + MiB(2), GiB(6), KiB(12), EPT_R, EPT_MT_UC), 0);
    fx_flush(f);
}

static const struct op fail_ops[] = {
    {OP_MAP, GiB(1) + MiB(7), GiB(20), KiB(4), EPT_R, EPT_MT_WB},          /* split 1G twice */
    {OP_MAP, (1ull << 47) + GiB(1) + KiB(4), 0, KiB(8), EPT_R, EPT_MT_WB}, /* 3 new tables */
    {OP_MAP, GiB(1) - KiB(4), GiB(9) - KiB(4), GiB(1) + KiB(8), EPT_RWX,
     EPT_MT_WT}, /* both ends split */
    {OP_UNMAP, GiB(1) + MiB(9), KiB(4), 0, 0, 0},
    {OP_UNMAP, GiB(1) + MiB(1), GiB(2) + MiB(1) + KiB(4), 0, 0, 0},
    {OP_PROTECT, GiB(1) + MiB(9), KiB(4), 0, EPT_R, 0},
    {OP_PROTECT, GiB(3) + KiB(4), KiB(4), 0, 0, 0},
    {OP_PROTECT, GiB(1) + MiB(1), GiB(1) - MiB(2), 0, EPT_R | EPT_X, 0},
};

static void test_alloc_failure_every_point(void **state)
{
    unsigned k;

    for (k = 0; k < sizeof(fail_ops) / sizeof(fail_ops[0]); k++) {
        const struct op *o = &fail_ops[k];
        struct op fixed = *o;
        unsigned long needed;
        long b;

        if (o->kind != OP_MAP) { /* table layout: {kind, gpa, size, ?, perms} */
            fixed.size = o->hpa;
            fixed.hpa = 0;
        }
        /* how many allocations the op needs at all */
        {
            struct fx f;
            bool nar;

            setup_mixed(&f);
            f.fm.nallocs = 0;
            if (do_op(&f.e, &fixed, &nar) != 0)
                fail_msg("op %u failed", k);
            needed = f.fm.nallocs;
            assert_true(needed >= 1);
            fx_fini(&f);
        }
        for (b = 0; b < (long)needed; b++) {
            struct fx f;
            struct tree_dump before = {0}, after = {0};
            bool nar = o->kind == OP_PROTECT;

            setup_mixed(&f);
            tree_dump(&f.e, &before);
            f.fm.budget = b;
            assert_int_equal(do_op(&f.e, &fixed, &nar), EPT_ENOMEM);
            assert_false(nar);
            tree_dump(&f.e, &after);
            assert_true(tree_equal(&before, &after));
            assert_false(ept_flush_needed(&f.e));
            assert_int_equal(f.e.nr_spare, b); /* kept for the retry, not leaked */
            /* the retry succeeds without allocating what it already has */
            f.fm.budget = -1;
            f.fm.nallocs = 0;
            assert_int_equal(do_op(&f.e, &fixed, &nar), 0);
            assert_int_equal(f.fm.nallocs, needed - b);
            assert_int_equal(f.e.nr_spare, 0);
            tree_dump_free(&before);
            tree_dump_free(&after);
            fx_fini(&f);
        }
    }
}

/* ---- no torn state: replay every recorded store ---- */

struct sample {
    uint64_t gpa;
    struct xl old, new_;
    bool seen_new;   /* translated as after the op */
    bool translated; /* after the last store applied */
    size_t gone_at;  /* the store that made it not translate; SIZE_MAX: none since */
};

static bool xl_eq(struct xl a, struct xl b)
{
    if (a.rc || b.rc)
        return a.rc == b.rc;
    return a.hpa == b.hpa && a.perms == b.perms && a.mt == b.mt;
}

static size_t add_samples(struct sample *s, size_t n, uint64_t lo, uint64_t hi, uint64_t step)
{
    uint64_t g;

    for (g = lo; g < hi; g += step) {
        s[n++].gpa = g;
        s[n++].gpa = g + step - KiB(4);
    }
    return n;
}

/* the log records an invalidation in (from, to] */
static bool flushed_between(const struct fakemem *fm, size_t from, size_t to)
{
    for (size_t k = from + 1; k <= to; k++)
        if (!fm->log[k].slot)
            return true;
    return false;
}

/*
 * Replay step j (the log's entry j just applied) for sample s: each GPA translates as before
 * the op, as after it, or not at all; never as before once it translated as after; and where
 * it stopped translating and translates again (the break and the make of a page-size change),
 * an invalidation lies between the two stores.
 */
static void sample_step(const struct fakemem *fm, struct sample *s, size_t j, struct xl now)
{
    bool as_old = xl_eq(now, s->old), as_new = xl_eq(now, s->new_);

    if (now.rc == EPT_ENOENT) {
        if (s->translated)
            s->gone_at = j;
        s->translated = false;
        return;
    }
    if ((!as_old && !as_new) || (as_old && !as_new && s->seen_new)) {
        fprintf(stderr, "store %zu/%zu: gpa %#llx torn\n", j, fm->nlog, (unsigned long long)s->gpa);
        fail();
    }
    if (!s->translated && s->gone_at != SIZE_MAX && !flushed_between(fm, s->gone_at, j)) {
        fprintf(stderr,
                "store %zu: gpa %#llx translated again with no invalidation since "
                "store %zu made it not present\n",
                j, (unsigned long long)s->gpa, s->gone_at);
        fail();
    }
    s->seen_new |= as_new;
    s->translated = true;
    s->gone_at = SIZE_MAX;
}

/*
 * Run o on a fixture while recording stores and invalidations.  Then restore the arena to
 * its state before o and apply the stores one by one: after each, every sampled GPA must
 * translate as before o, not at all (only across an invalidation: break-before-make), or as
 * after it, in that order; stores to tables reachable from the root must number exactly
 * 'reachable', invalidations 'flushes'.
 */
static void check_no_torn_state(struct fx *f, const struct op *o, const uint64_t *win,
                                unsigned long reachable, unsigned long flushes)
{
    size_t bytes = f->fm.npages * 4096, n = 0, i, j;
    uint8_t *snap = malloc(bytes), *final = malloc(bytes);
    struct sample *s = calloc(2 * 2048 + 2 * 1024, sizeof(*s));
    unsigned long nreach = 0, nflush = 0;
    bool nar;

    assert_non_null(snap);
    assert_non_null(final);
    assert_non_null(s);
    n = add_samples(s, n, win[0], win[1], KiB(4));          /* every 4 KiB page, <= 4 MiB */
    n = add_samples(s, n, win[2], win[2] + GiB(1), MiB(2)); /* every 2 MiB page of 1 GiB */
    for (i = 0; i < n; i++) {
        s[i].old = xlate(&f->e, s[i].gpa);
        s[i].translated = s[i].old.rc == 0;
        s[i].gone_at = SIZE_MAX;
    }
    memcpy(snap, f->fm.arena, bytes);
    /* pages the op will allocate are zero when handed out */
    memset(snap + f->fm.used * 4096, 0, bytes - f->fm.used * 4096);
    f->fm.recording = true;
    f->fm.nlog = 0;
    assert_int_equal(do_op(&f->e, o, &nar), 0);
    f->fm.recording = false;
    for (i = 0; i < n; i++)
        s[i].new_ = xlate(&f->e, s[i].gpa);
    memcpy(final, f->fm.arena, bytes);
    memcpy(f->fm.arena, snap, bytes);
    for (j = 0; j < f->fm.nlog; j++) {
        const struct fake_store *st = &f->fm.log[j];

        if (!st->slot) { /* an invalidation */
            nflush++;
            continue;
        }
        assert_int_equal(*st->slot, st->old);
        if (slot_reachable(&f->e, st->slot))
            nreach++;
        *st->slot = st->val;
        for (i = 0; i < n; i++)
            sample_step(&f->fm, &s[i], j, xlate(&f->e, s[i].gpa));
    }
    assert_memory_equal(f->fm.arena, final, f->fm.used * 4096);
    assert_int_equal(nreach, reachable);
    assert_int_equal(nflush, flushes);
    /* and the op changed something in the window */
    for (i = 0; i < n && xl_eq(s[i].old, s[i].new_); i++)
        ;
    assert_true(i < n);
    free(snap);
    free(final);
    free(s);
}

static void test_no_torn_state(void **state)
{
    struct fx f;
    const struct op prot = {OP_PROTECT, GiB(1) + MiB(3) + KiB(8), 0, KiB(4), EPT_R, 0};
    const struct op unm = {OP_UNMAP, GiB(1) + MiB(3) + KiB(12), 0, KiB(12), 0, 0};
    const struct op map = {
        OP_MAP, GiB(1) + MiB(2) - KiB(4), GiB(40) - KiB(4), MiB(2) + KiB(8), EPT_R, EPT_MT_UC};
    const struct op fresh = {OP_MAP, GiB(513), GiB(2), MiB(2) + KiB(4), EPT_RWX, EPT_MT_WB};
    const uint64_t w1[] = {GiB(1), GiB(1) + MiB(4), GiB(1)};
    const uint64_t w2[] = {GiB(513), GiB(513) + MiB(4), GiB(513)};
    const struct op prune = {OP_UNMAP_PRUNE, GiB(512), 0, GiB(512), 0, 0};

    /* 1G -> 2M table -> 4K table, filled while unreachable, then break-before-make: the 1G
     * leaf cleared, an invalidation, the table linked (two reachable stores) */
    fx_init(&f, 64, true, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    check_no_torn_state(&f, &prot, w1, 2, 1);
    /* then, inside the existing 4K table, each changed entry is one store */
    check_no_torn_state(&f, &unm, w1, 3, 0);
    /* and the protection lifted: the tables are uniform again, one break-before-make merges
     * them back (the PT's two pages written in place, the PDPTE cleared, then the 1G leaf) */
    const struct op lift = {OP_PROTECT, GiB(1) + MiB(3) + KiB(8), 0, KiB(4), EPT_RWX, 0};
    const struct op back = {
        OP_MAP, GiB(1) + MiB(3) + KiB(12), GiB(1) + MiB(3) + KiB(12), KiB(12), EPT_RWX, EPT_MT_WB};
    check_no_torn_state(&f, &lift, w1, 1, 0);
    check_no_torn_state(&f, &back, w1, 5, 1);
    assert_int_equal(xlate(&f.e, GiB(1)).level, EPT_LEVEL_1G);
    fx_fini(&f);
    /* a map whose both ends split: two 2M pages split, each with break-before-make (two
     * stores, one invalidation each), plus the 2M leaf between them written in place */
    fx_init(&f, 64, false, true);
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    check_no_torn_state(&f, &map, w1, 5, 2);
    fx_fini(&f);
    /* a map into a new 512 GiB region: PDPT, PD, PT filled, then one store in the PML4 (a
     * hole with nothing owed: no invalidation needed) */
    fx_init(&f, 64, true, true);
    check_no_torn_state(&f, &fresh, w2, 1, 0);
    /* pruning it: the 4K leaf cleared, the PT unlinked, the 2M leaf cleared,
     * the PD and the PDPT unlinked: one store each (the retired pages' list
     * links land in pages no longer reachable) */
    fx_flush(&f);
    check_no_torn_state(&f, &prune, w2, 5, 0);
    fx_fini(&f);
}

/* ---- break-before-make ---- */

static void bbm_op(struct fx *f, int rc, unsigned long breaks, const char *what)
{
    if (rc)
        fail_msg("%s: %d", what, rc);
    if (f->fm.bbm_violations)
        fail_msg("%s: %s", what, f->fm.bbm_first);
    if (f->e.nr_breaks != breaks)
        fail_msg("%s: %lu invalidations for break-before-make, expected %lu", what, f->e.nr_breaks,
                 breaks);
}

/*
 * Every page-size change of a present entry, with 1 GiB + 2 MiB and with 2 MiB pages only:
 * the entry goes not present, every CPU invalidates (ops.flush), then the new entry is
 * written.  The fake memory checks it store by store (count mode here, so the message names
 * the first bad store); the code before wrote splits and merges with one store in place.
 */
static void test_break_before_make(void **state)
{
    for (unsigned cfg = 0; cfg < 2; cfg++) {
        const bool has_1g = cfg == 0;
        const uint64_t g = GiB(1);
        struct fx f;
        unsigned long b = 0;

        fx_init(&f, 64, has_1g, true);
        f.fm.bbm_count_only = true;
        assert_int_equal(ept_map(&f.e, g, g, GiB(1), EPT_RWX, EPT_MT_WB), 0);
        const unsigned big = has_1g ? EPT_LEVEL_1G : EPT_LEVEL_2M;
        /* a ToPA page write-protected: the large leaf split down to 4 KiB ... */
        bbm_op(&f, ept_protect(&f.e, g + MiB(3), KiB(4), EPT_R | EPT_X, NULL), ++b, "protect");
        expect_map(&f.e, g + MiB(3), g + MiB(3), EPT_R | EPT_X, EPT_MT_WB, EPT_LEVEL_4K);
        /* the log: the large leaf cleared, an invalidation, the new table linked */
        {
            struct fx r;
            const struct op o = {OP_PROTECT, g + MiB(5), 0, KiB(4), EPT_R, 0};
            size_t k, clear = SIZE_MAX, flush = SIZE_MAX, link = SIZE_MAX;

            fx_init(&r, 64, has_1g, true);
            assert_int_equal(ept_map(&r.e, g, g, GiB(1), EPT_RWX, EPT_MT_WB), 0);
            r.fm.recording = true;
            assert_int_equal(do_op(&r.e, &o, NULL), 0);
            for (k = 0; k < r.fm.nlog; k++) {
                const struct fake_store *st = &r.fm.log[k];

                if (!st->slot)
                    flush = flush == SIZE_MAX ? k : flush;
                else if (st->old & VMX_EPT_PAGE_SIZE_MASK && st->val == 0)
                    clear = k;
                else if (clear != SIZE_MAX && st->old == 0 && (st->val & EPT_SW_USED))
                    link = k;
            }
            assert_true(clear < flush && flush < link && link == r.fm.nlog - 1);
            fx_fini(&r);
        }
        /* ... and lifted: merged back with one break-before-make */
        bbm_op(&f, ept_protect(&f.e, g + MiB(3), KiB(4), EPT_RWX, NULL), ++b, "unprotect");
        expect_map(&f.e, g + MiB(3), g + MiB(3), EPT_RWX, EPT_MT_WB, big);
        /* a page unmapped, then mapped back */
        bbm_op(&f, ept_unmap(&f.e, g + MiB(5), KiB(4)), ++b, "unmap");
        assert_int_equal(xlate(&f.e, g + MiB(5)).rc, EPT_ENOENT);
        bbm_op(&f, ept_map(&f.e, g + MiB(5), g + MiB(5), KiB(4), EPT_RWX, EPT_MT_WB), ++b, "remap");
        expect_map(&f.e, g + MiB(5), g + MiB(5), EPT_RWX, EPT_MT_WB, big);
        /* an APIC window placed and moved away (its page's old mapping restored) */
        bbm_op(&f, ept_map(&f.e, g + MiB(7), GiB(40), KiB(4), EPT_R | EPT_W, EPT_MT_UC), ++b,
               "window");
        bbm_op(&f, ept_map(&f.e, g + MiB(7), g + MiB(7), KiB(4), EPT_RWX, EPT_MT_WB), ++b,
               "window gone");
        expect_map(&f.e, g + MiB(7), g + MiB(7), EPT_RWX, EPT_MT_WB, big);
        /* the whole range unmapped, then a 4 KiB page mapped there before the caller's INVEPT:
         * the large leaf may still be cached, so the new table waits for an invalidation */
        bbm_op(&f, ept_unmap(&f.e, g, GiB(1)), b, "unmap all");
        assert_true(ept_flush_needed(&f.e));
        bbm_op(&f, ept_map(&f.e, g + MiB(9), GiB(50), KiB(4), EPT_RWX, EPT_MT_WB), ++b,
               "4K into the hole");
        /* the reverse: the 4 KiB tables pruned, a large leaf mapped before the INVEPT */
        bbm_op(&f, ept_unmap_prune(&f.e, g, GiB(1)), b, "prune");
        bbm_op(&f, ept_map(&f.e, g, g, GiB(1), EPT_RWX, EPT_MT_WB), ++b, "large into the hole");
        expect_map(&f.e, g + MiB(9), g + MiB(9), EPT_RWX, EPT_MT_WB, big);
        /* with nothing owed, maps into holes and same-size changes need no invalidation */
        fx_flush(&f);
        bbm_op(&f, ept_map(&f.e, GiB(600), GiB(2), KiB(4), EPT_R, EPT_MT_UC), b, "fresh");
        bbm_op(&f, ept_protect(&f.e, g, GiB(1), EPT_R, NULL), b, "narrow in place");
        assert_true(ept_flush_needed(&f.e));
        fx_fini(&f);

        /* a 2 MiB leaf into a hole of a live table whose 4 KiB table was just pruned */
        fx_init(&f, 64, has_1g, true);
        f.fm.bbm_count_only = true;
        assert_int_equal(ept_map(&f.e, g, g, MiB(4), EPT_RWX, EPT_MT_WB), 0);
        b = 0;
        bbm_op(&f, ept_map(&f.e, g + MiB(2), GiB(40), KiB(4), EPT_R, EPT_MT_WB), ++b, "split");
        bbm_op(&f, ept_unmap_prune(&f.e, g + MiB(2), MiB(2)), b, "prune the 4K table");
        assert_int_equal(f.e.nr_retired, 1);
        bbm_op(&f, ept_map(&f.e, g + MiB(2), g + MiB(2), MiB(2), EPT_RWX, EPT_MT_WB), ++b,
               "2M leaf into the hole");
        expect_map(&f.e, g + MiB(3), g + MiB(3), EPT_RWX, EPT_MT_WB, EPT_LEVEL_2M);
        fx_fini(&f);
    }
}

/*
 * A CPU that does not answer the invalidation: ept.c cannot wait for ever, so it writes the
 * new entry anyway and leaves the invalidation owed (the caller's next vmx_ept_sync() retries
 * and reports the CPU).  That CPU may then hold both sizes: the checker sees it, as it must.
 */
static void test_break_flush_fails(void **state)
{
    struct fx f;

    fx_init(&f, 64, true, true);
    f.fm.bbm_count_only = true;
    assert_int_equal(ept_map(&f.e, GiB(1), GiB(1), GiB(1), EPT_RWX, EPT_MT_WB), 0);
    f.fm.flush_fails = true;
    assert_int_equal(ept_protect(&f.e, GiB(1) + MiB(3), KiB(4), EPT_R, NULL), 0);
    assert_int_equal(f.e.nr_breaks, 1);
    assert_true(ept_flush_needed(&f.e));
    assert_true(f.fm.bbm_violations > 0);
    expect_map(&f.e, GiB(1) + MiB(3), GiB(1) + MiB(3), EPT_R, EPT_MT_WB, EPT_LEVEL_4K);
    expect_map(&f.e, GiB(1) + MiB(4), GiB(1) + MiB(4), EPT_RWX, EPT_MT_WB, EPT_LEVEL_2M);
    fx_fini(&f);
}

/* ---- random operations against a per-4K reference model ---- */

#define WIN_PAGES 2048u /* an 8 MiB window around a 2 MiB boundary at 1 GiB */

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

struct ref_page {
    bool used;
    uint64_t hpa;
    unsigned perms, mt;
};

static void test_random_vs_model(void **state)
{
    const uint64_t base = GiB(1) - MiB(4);
    struct ref_page *ref = calloc(WIN_PAGES, sizeof(*ref));
    struct fx f;
    unsigned it, p;
    static const unsigned perms_tab[] = {EPT_R, EPT_R | EPT_W, EPT_R | EPT_X, EPT_RWX};
    static const unsigned mt_tab[] = {EPT_MT_UC, EPT_MT_WB, EPT_MT_WT | EPT_MT_IPAT};

    assert_non_null(ref);
    fx_init(&f, 4096, true, true);
    for (it = 0; it < 3000; it++) {
        unsigned first = (unsigned)(rnd() % WIN_PAGES);
        unsigned cnt = 1 + (unsigned)(rnd() % (rnd() % 4 ? 16 : WIN_PAGES - first));
        uint64_t gpa = base + (uint64_t)first * 4096, size;
        unsigned kind = (unsigned)(rnd() % 3);
        int rc;

        if (first + cnt > WIN_PAGES)
            cnt = WIN_PAGES - first;
        size = (uint64_t)cnt * 4096;
        if (kind == 0) {
            /* hpa congruent to gpa mod 2 MiB half the time, so huge pages appear */
            uint64_t hpa = (rnd() % 2 ? gpa + GiB(64) : GiB(64) + (rnd() % 4096) * 4096);
            unsigned pr = perms_tab[rnd() % 4], mt = mt_tab[rnd() % 3];

            assert_int_equal(ept_map(&f.e, gpa, hpa, size, pr, mt), 0);
            for (p = first; p < first + cnt; p++)
                ref[p] = (struct ref_page){true, hpa + (uint64_t)(p - first) * 4096, pr, mt};
        } else if (kind == 1) {
            /* half of them prune; INVEPT (flush_done) only now and then, so
             * retired pages wait across later operations */
            if (rnd() & 1)
                assert_int_equal(ept_unmap_prune(&f.e, gpa, size), 0);
            else
                assert_int_equal(ept_unmap(&f.e, gpa, size), 0);
            if (!(rnd() & 3))
                fx_flush(&f);
            for (p = first; p < first + cnt; p++)
                ref[p].used = false;
        } else {
            unsigned pr = rnd() % 5 ? perms_tab[rnd() % 4] : 0;
            bool hole = false, expect_nar = false, nar;

            for (p = first; p < first + cnt; p++) {
                hole |= !ref[p].used;
                expect_nar |= ref[p].used && (ref[p].perms & ~pr);
            }
            rc = ept_protect(&f.e, gpa, size, pr, &nar);
            assert_int_equal(rc, hole ? EPT_ENOENT : 0);
            assert_int_equal(nar, hole ? false : expect_nar);
            for (p = first; !hole && p < first + cnt; p++)
                ref[p].perms = pr;
        }
        /* check the whole window now and then, the touched range always */
        for (p = (it % 50 ? first : 0); p < (it % 50 ? first + cnt : WIN_PAGES); p++) {
            struct xl x = xlate(&f.e, base + (uint64_t)p * 4096);

            if (!ref[p].used) {
                assert_int_equal(x.rc, EPT_ENOENT);
                continue;
            }
            assert_int_equal(x.rc, 0);
            assert_int_equal(x.hpa, ref[p].hpa);
            assert_int_equal(x.perms, ref[p].perms);
            assert_int_equal(x.mt, ref[p].mt);
        }
    }
    printf("random ops: %lu tables, %lu/%lu/%lu leaves 4K/2M/1G\n", f.e.nr_tables, f.e.nr_leaves[0],
           f.e.nr_leaves[1], f.e.nr_leaves[2]);
    fx_fini(&f);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_eptp),
        cmocka_unit_test(test_page_sizes),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_split_on_map),
        cmocka_unit_test(test_protect),
        cmocka_unit_test(test_unmap_remap),
        cmocka_unit_test(test_unmap_prune),
        cmocka_unit_test(test_five_levels),
        cmocka_unit_test(test_alloc_failure_every_point),
        cmocka_unit_test(test_no_torn_state),
        cmocka_unit_test(test_break_before_make),
        cmocka_unit_test(test_break_flush_fails),
        cmocka_unit_test(test_random_vs_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
