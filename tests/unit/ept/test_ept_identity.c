/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/ept/ept_identity.c: every page of the identity map is
 * checked against the memory map and a per-page MTRR reference: VMM pages not
 * present, all others gpa == hpa, RWX, the MTRR type, and the largest page
 * size that a uniform, VMM-free block allows.  Allocation failure at every
 * point; a table-page figure for a small machine.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ept/ept_identity.h"
#include "fakes/ept_fakemem.h"
#include "fakes/mtrr_ref.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

static struct mtrr_state pc_mtrrs(void)
{
    struct mtrr_state m;
    unsigned i;

    memset(&m, 0, sizeof(m));
    m.cap = MTRR_CAP_FIX | MTRR_CAP_WC | 10;
    m.def_type = MTRR_DEF_TYPE_E | MTRR_DEF_TYPE_FE | EPT_MT_UC;
    m.maxphyaddr = 39;
    m.fixed[0] = m.fixed[1] = fixed8(6, 6, 6, 6, 6, 6, 6, 6);
    m.fixed[2] = fixed8(0, 0, 0, 0, 1, 1, 0, 0);
    for (i = 3; i < 11; i++)
        m.fixed[i] = fixed8(5, 5, 5, 5, 5, 5, 5, 5);
    set_var(&m, 0, 0, GiB(2), EPT_MT_WB);
    set_var(&m, 1, GiB(2), GiB(1), EPT_MT_WB);
    set_var(&m, 2, GiB(2) + MiB(512), MiB(256), EPT_MT_UC);
    set_var(&m, 3, GiB(4), GiB(4), EPT_MT_WB);
    set_var(&m, 4, GiB(8), MiB(2), EPT_MT_WB);
    set_var(&m, 5, GiB(6) + MiB(6), KiB(64), EPT_MT_WT);
    return m;
}

#define R(b, s, t)                                                                                 \
    {                                                                                              \
        (b), (s), (t), 0                                                                           \
    }
static const struct ptv_mem_range pc_mem[] = {
    R(0, 0x9f000, PTV_MEM_RAM),
    R(0x9f000, 0x61000, PTV_MEM_RESERVED),
    R(MiB(1), MiB(255), PTV_MEM_RAM),
    R(MiB(256), 0x345000, PTV_MEM_VMM), /* 2 MiB aligned start, 4 KiB aligned end */
    R(MiB(256) + 0x345000, GiB(2) - MiB(257) - 0x345000, PTV_MEM_RAM),
    R(GiB(2) - MiB(1), MiB(1), PTV_MEM_VMM),
    R(GiB(2), MiB(1), PTV_MEM_ACPI),
    R(0xfec00000, KiB(4), PTV_MEM_MMIO),
    R(GiB(4), GiB(1) + KiB(4), PTV_MEM_RAM),
    R(GiB(5) + KiB(4), KiB(4), PTV_MEM_VMM),                   /* one page in a 1 GiB block */
    R(GiB(5) + KiB(8), GiB(3) + MiB(2) - KiB(8), PTV_MEM_RAM), /* ends at 8G + 2M */
};
#define PC_TOP GiB(9)

/* per 2 MiB block of [0, top): uniform MTRR type (or -1) and VMM overlap */
struct expect {
    const struct ptv_mem_range *mem;
    unsigned n;
    const struct mtrr_state *m;
    uint64_t top;
    bool has_1g, has_2m;
    int *type2m; /* -1: mixed */
    bool *vmm2m; /* some VMM byte in the block */
};

static bool page_is_vmm(const struct expect *x, uint64_t gpa)
{
    unsigned i;

    for (i = 0; i < x->n; i++)
        if (x->mem[i].type == PTV_MEM_VMM && gpa >= x->mem[i].base &&
            gpa < x->mem[i].base + x->mem[i].size)
            return true;
    return false;
}

static void expect_init(struct expect *x)
{
    size_t nb = x->top / MiB(2), b;

    x->type2m = calloc(nb, sizeof(int));
    x->vmm2m = calloc(nb, sizeof(bool));
    assert_non_null(x->type2m);
    assert_non_null(x->vmm2m);
    for (b = 0; b < nb; b++) {
        uint64_t g;
        int t = (int)ref_type(x->m, b * MiB(2));

        for (g = b * MiB(2); g < (b + 1) * MiB(2); g += KiB(4)) {
            if ((int)ref_type(x->m, g) != t)
                t = -1;
            x->vmm2m[b] |= page_is_vmm(x, g);
        }
        x->type2m[b] = t;
    }
}

static void expect_fini(struct expect *x)
{
    free(x->type2m);
    free(x->vmm2m);
}

static unsigned expected_level(const struct expect *x, uint64_t gpa)
{
    size_t b = gpa / MiB(2), first = gpa / GiB(1) * 512, i;
    bool ok1g = x->has_1g;

    for (i = first; ok1g && i < first + 512; i++)
        ok1g = !x->vmm2m[i] && x->type2m[i] >= 0 && x->type2m[i] == x->type2m[first];
    if (ok1g)
        return EPT_LEVEL_1G;
    if (x->has_2m && !x->vmm2m[b] && x->type2m[b] >= 0)
        return EPT_LEVEL_2M;
    return EPT_LEVEL_4K;
}

static void check_page(const struct ept *e, const struct expect *x, uint64_t gpa)
{
    uint64_t hpa;
    unsigned perms, mt, level;
    int rc = ept_translate(e, gpa, &hpa, &perms, &mt, &level);

    if (page_is_vmm(x, gpa)) {
        if (rc != EPT_ENOENT)
            fail_msg("VMM page %#llx is mapped", (unsigned long long)gpa);
        return;
    }
    if (rc != 0 || hpa != gpa || perms != EPT_RWX || mt != ref_type(x->m, gpa) ||
        level != expected_level(x, gpa))
        fail_msg("gpa %#llx: rc %d hpa %#llx perms %u mt %u level %u; want mt %u level %u",
                 (unsigned long long)gpa, rc, (unsigned long long)hpa, perms, mt, level,
                 ref_type(x->m, gpa), expected_level(x, gpa));
}

static void check_map(const struct ept *e, const struct expect *x)
{
    uint64_t g;
    unsigned i;

    /* every 4 KiB page of the first GiB and around the interesting places */
    for (g = 0; g < GiB(1); g += KiB(4))
        check_page(e, x, g);
    for (g = GiB(2) - MiB(4); g < GiB(2) + MiB(4); g += KiB(4))
        check_page(e, x, g);
    for (g = GiB(5) - MiB(2); g < GiB(5) + MiB(4) && g < x->top; g += KiB(4))
        check_page(e, x, g);
    /* first and last page of every 2 MiB block of the whole map */
    for (g = 0; g < x->top; g += MiB(2)) {
        check_page(e, x, g);
        check_page(e, x, g + MiB(2) - KiB(4));
    }
    /* every page of every VMM range */
    for (i = 0; i < x->n; i++)
        for (g = x->mem[i].base;
             x->mem[i].type == PTV_MEM_VMM && g < x->mem[i].base + x->mem[i].size; g += KiB(4))
            assert_int_equal(ept_translate(e, g, NULL, NULL, NULL, NULL), EPT_ENOENT);
    /* nothing at or above the top */
    assert_int_equal(ept_translate(e, x->top, NULL, NULL, NULL, NULL), EPT_ENOENT);
    assert_int_equal(ept_translate(e, x->top + GiB(1), NULL, NULL, NULL, NULL), EPT_ENOENT);
}

static void fx_init(struct fx *f, size_t npages, bool has_1g, bool has_2m)
{
    assert_int_equal(fx_setup(f, npages, has_1g, has_2m), 0);
}

static void run_layout(const struct ptv_mem_range *mem, unsigned n, const struct mtrr_state *m,
                       uint64_t want_top, bool has_1g, bool has_2m, size_t npages)
{
    struct expect x = {mem, n, m, want_top, has_1g, has_2m, NULL, NULL};
    struct fx f;
    uint64_t top = 0;

    expect_init(&x);
    fx_init(&f, npages, has_1g, has_2m);
    f.fm.nallocs = 0;
    assert_int_equal(ept_build_identity(&f.e, mem, n, m, &top), 0);
    assert_int_equal(top, want_top);
    assert_int_equal(f.e.nr_spare, 0); /* the reservation was exact */
    assert_int_equal(f.fm.nallocs, f.e.nr_tables - 1);
    assert_false(ept_flush_needed(&f.e));
    assert_int_equal(f.e.nr_breaks, 0); /* maps into holes only: nothing to invalidate at boot */
    check_map(&f.e, &x);
    printf(
        "identity map to %llu GiB (1G %d, 2M %d): %lu table pages, leaves 4K %lu 2M %lu 1G %lu\n",
        (unsigned long long)(top >> 30), has_1g, has_2m, f.e.nr_tables, f.e.nr_leaves[0],
        f.e.nr_leaves[1], f.e.nr_leaves[2]);
    /* a second build is refused */
    assert_int_equal(ept_build_identity(&f.e, mem, n, m, &top), EPT_EEXIST);
    fakemem_free(&f.fm);
    expect_fini(&x);
}

static void test_pc_layout(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const unsigned n = sizeof(pc_mem) / sizeof(pc_mem[0]);

    run_layout(pc_mem, n, &m, PC_TOP, true, true, 256);
    run_layout(pc_mem, n, &m, PC_TOP, false, true, 256);
    run_layout(pc_mem, n, &m, PC_TOP, false, false, 5000);
}

/* a 5-level walk: the same map, one more table (the PML4 under PML5 entry 0) */
static void test_five_levels(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const unsigned n = sizeof(pc_mem) / sizeof(pc_mem[0]);
    struct expect x = {pc_mem, n, &m, PC_TOP, true, true, NULL, NULL};
    struct fx f4, f5;
    uint64_t top;

    expect_init(&x);
    fx_init(&f4, 256, true, true);
    fx_init(&f5, 256, true, true);
    assert_int_equal(ept_set_levels(&f5.e, 5), 0);
    assert_int_equal(ept_build_identity(&f4.e, pc_mem, n, &m, &top), 0);
    assert_int_equal(ept_build_identity(&f5.e, pc_mem, n, &m, &top), 0);
    assert_int_equal(f5.e.nr_spare, 0); /* the reservation was exact */
    assert_int_equal(f5.e.nr_tables, f4.e.nr_tables + 1);
    check_map(&f5.e, &x);
    fakemem_free(&f4.fm);
    fakemem_free(&f5.fm);
    free(x.type2m);
    free(x.vmm2m);
}

static void test_mtrr_variants(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const unsigned n = sizeof(pc_mem) / sizeof(pc_mem[0]);

    /* MTRRs disabled: UC everywhere, so only VMM bytes split pages */
    m.def_type &= ~MTRR_DEF_TYPE_E;
    run_layout(pc_mem, n, &m, PC_TOP, true, true, 256);
    /* fixed ranges off, default WB */
    m = pc_mtrrs();
    m.def_type = MTRR_DEF_TYPE_E | EPT_MT_WB;
    run_layout(pc_mem, n, &m, PC_TOP, true, true, 256);
    /* no memory map at all: [0, 4 GiB) */
    m = pc_mtrrs();
    run_layout(NULL, 0, &m, GiB(4), true, true, 256);
}

static void test_top(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const struct ptv_mem_range one[] = {R(GiB(6), KiB(4), PTV_MEM_MMIO)};
    const struct ptv_mem_range tight[] = {R(GiB(6), GiB(1), PTV_MEM_RAM)};

    run_layout(one, 1, &m, GiB(7), true, true, 64);
    run_layout(tight, 1, &m, GiB(7), true, true, 64);
}

static void test_invalid(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    struct fx f;
    uint64_t top = 1;
    unsigned i;
    const struct ptv_mem_range bad[][1] = {
        {R(1, KiB(4), PTV_MEM_RAM)},
        {R(0, 1, PTV_MEM_RAM)},
        {R(0, 0, PTV_MEM_RAM)},
        {R(0, KiB(4), 0)},
        {R(0, KiB(4), 6)},
        {R(~0xfffull, KiB(8), PTV_MEM_RAM)},
        {R(1ull << 48, KiB(4), PTV_MEM_RAM)}, /* beyond a 4-level EPT */
        {R(1ull << 39, KiB(4), PTV_MEM_RAM)}, /* beyond the MTRRs' MAXPHYADDR */
    };

    fx_init(&f, 16, true, true);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ept_build_identity(&f.e, bad[i], 1, &m, &top), EPT_EINVAL);
    assert_int_equal(ept_build_identity(&f.e, NULL, 1, &m, &top), EPT_EINVAL);
    assert_int_equal(ept_build_identity(&f.e, pc_mem, 1, NULL, &top), EPT_EINVAL);
    m.nvar = 11;
    assert_int_equal(ept_build_identity(&f.e, pc_mem, 1, &m, &top), EPT_EINVAL);
    m = pc_mtrrs();
    m.var_base[0] = (m.var_base[0] & ~0xffull) | 7;
    assert_int_equal(ept_build_identity(&f.e, pc_mem, 1, &m, &top), EPT_EINVAL);
    assert_int_equal(top, 1);
    assert_int_equal(f.e.nr_tables, 1);
    assert_int_equal(f.fm.nallocs, 1);
    /* not empty */
    m = pc_mtrrs();
    assert_int_equal(ept_map(&f.e, GiB(20), GiB(20), KiB(4), EPT_R, EPT_MT_WB), 0);
    assert_int_equal(ept_build_identity(&f.e, pc_mem, 1, &m, &top), EPT_EEXIST);
    fakemem_free(&f.fm);
}

static void test_alloc_failure_every_point(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const unsigned n = sizeof(pc_mem) / sizeof(pc_mem[0]);
    unsigned long needed;
    long b;
    struct fx f;
    uint64_t top;

    fx_init(&f, 256, true, true);
    f.fm.nallocs = 0;
    assert_int_equal(ept_build_identity(&f.e, pc_mem, n, &m, &top), 0);
    needed = f.fm.nallocs;
    fakemem_free(&f.fm);
    assert_true(needed > 4);
    for (b = 0; b < (long)needed; b++) {
        struct tree_dump before = {0}, after = {0};

        fx_init(&f, 256, true, true);
        tree_dump(&f.e, &before);
        f.fm.budget = b;
        top = 1;
        assert_int_equal(ept_build_identity(&f.e, pc_mem, n, &m, &top), EPT_ENOMEM);
        assert_int_equal(top, 1);
        tree_dump(&f.e, &after);
        assert_true(tree_equal(&before, &after));
        assert_int_equal(f.e.nr_spare, b);
        f.fm.budget = -1;
        assert_int_equal(ept_build_identity(&f.e, pc_mem, n, &m, &top), 0);
        assert_int_equal(top, PC_TOP);
        assert_int_equal(f.e.nr_spare, 0);
        tree_dump_free(&before);
        tree_dump_free(&after);
        fakemem_free(&f.fm);
    }
}

/* The figure: table pages for a small machine, 512 MiB of RAM and MMIO up to 4 GiB. */
static void test_bench_table_pages(void **state)
{
    struct mtrr_state m = pc_mtrrs();
    const struct ptv_mem_range mem[] = {
        R(0, 0x9f000, PTV_MEM_RAM),
        R(0x9f000, 0x61000, PTV_MEM_RESERVED),
        R(MiB(1), MiB(447), PTV_MEM_RAM),
        R(MiB(448), MiB(64), PTV_MEM_VMM),
        R(0xe0000000, MiB(256), PTV_MEM_MMIO),
        R(0xfec00000, KiB(4), PTV_MEM_MMIO),
        R(0xfee00000, KiB(4), PTV_MEM_MMIO),
    };
    bool caps[2][2] = {{true, true}, {false, true}};
    unsigned c;

    memset(&m.var_base, 0, sizeof(m.var_base));
    memset(&m.var_mask, 0, sizeof(m.var_mask));
    m.nvar = 0;
    set_var(&m, 0, 0, MiB(512), EPT_MT_WB);
    for (c = 0; c < 2; c++) {
        struct fx f;
        uint64_t top;

        fx_init(&f, 64, caps[c][0], caps[c][1]);
        assert_int_equal(ept_build_identity(&f.e, mem, sizeof(mem) / sizeof(mem[0]), &m, &top), 0);
        assert_int_equal(top, GiB(4));
        printf("BENCH ept identity map, 512 MiB RAM + MMIO to 4 GiB, %s: %lu table pages "
               "(%lu KiB), leaves 4K %lu 2M %lu 1G %lu\n",
               caps[c][0] ? "1G+2M pages" : "2M pages only", f.e.nr_tables, f.e.nr_tables * 4,
               f.e.nr_leaves[0], f.e.nr_leaves[1], f.e.nr_leaves[2]);
        assert_int_equal(ept_translate(&f.e, MiB(448), NULL, NULL, NULL, NULL), EPT_ENOENT);
        fakemem_free(&f.fm);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pc_layout),         cmocka_unit_test(test_five_levels),
        cmocka_unit_test(test_mtrr_variants),     cmocka_unit_test(test_top),
        cmocka_unit_test(test_invalid),           cmocka_unit_test(test_alloc_failure_every_point),
        cmocka_unit_test(test_bench_table_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
