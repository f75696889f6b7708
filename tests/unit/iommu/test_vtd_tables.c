/* SPDX-License-Identifier: MIT */
/*
 * Host tests of the DMA-remapping tables (vmm/iommu/vtd_tables.c), walked the way a VT-d unit
 * walks them (root entry by bus, context entry by device/function, second-level levels): every
 * device sees guest memory 1:1 read/write and never a byte of the VMM or of the units' registers;
 * the same memory map gives the same view as the CPU's EPT identity map (ept_build_identity), page
 * for page, but for the register holes.  Also the bench figures (BENCH lines): table pages for
 * 512 MiB and 4 GiB of RAM.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "iommu/vtd_tables.h"
#include "ept/ept_identity.h"
#include "fakes/ept_fakemem.h"

#define KiB(x)  ((uint64_t)(x) << 10)
#define MiB(x)  ((uint64_t)(x) << 20)
#define GiB(x)  ((uint64_t)(x) << 30)
#define PA_BASE 0x0000004200000000ull /* fake physical addresses of table pages */

struct pool {
    uint8_t *mem;
    size_t npages, used;
    long budget; /* < 0: unlimited */
    unsigned long flushed;
};

static void *pool_alloc(void *ctx, uint64_t *pa)
{
    struct pool *p = ctx;
    if (p->used == p->npages || p->budget == 0)
        return NULL;
    if (p->budget > 0)
        p->budget--;
    memset(p->mem + p->used * 4096, 0xa5, 4096); /* the builder must clear it */
    *pa = PA_BASE + p->used * 4096;
    return p->mem + 4096 * p->used++;
}

static void pool_flush(void *ctx, const void *va, size_t n)
{
    struct pool *p = ctx;
    assert_int_equal(n, 4096);
    assert_true((const uint8_t *)va >= p->mem && (const uint8_t *)va < p->mem + p->used * 4096);
    p->flushed++;
}

static const uint64_t *va(const struct pool *p, uint64_t pa)
{
    if (pa < PA_BASE || (pa - PA_BASE) / 4096 >= p->used)
        fail_msg("pointer %#llx is not a table page", (unsigned long long)pa);
    return (const uint64_t *)(p->mem + (pa - PA_BASE));
}

static void pool_init(struct pool *p, size_t npages)
{
    p->mem = aligned_alloc(4096, npages * 4096);
    assert_non_null(p->mem);
    p->npages = npages;
    p->used = 0;
    p->budget = -1;
    p->flushed = 0;
}

/* the unit's walk (VT-d 3.6): 0 and *hpa, *level if mapped read+write, -1 if not present */
static int walk(const struct pool *p, const struct vtd_tables *t, unsigned bus, unsigned devfn,
                uint64_t addr, uint64_t *hpa, unsigned *level)
{
    const uint64_t *root = va(p, t->root_pa), *ctx, *tab;
    uint64_t e;
    if (!(root[2 * bus] & VTD_RE_P))
        return -2;
    ctx = va(p, root[2 * bus] & VTD_SL_ADDR_MASK);
    if (!(ctx[2 * devfn] & VTD_CE_P) || (ctx[2 * devfn] & 0xffe) != 0)
        return -3; /* present, FPD 0, TT 00 */
    assert_int_equal(ctx[2 * devfn + 1] & 7, t->levels - 2);
    assert_int_equal((ctx[2 * devfn + 1] >> 8) & 0xffff, VTD_DOMAIN_ID);
    tab = va(p, ctx[2 * devfn] & VTD_SL_ADDR_MASK);
    for (unsigned l = t->levels; l >= 1; l--) {
        e = tab[(addr >> (12 + 9 * (l - 1))) & 511];
        if (!(e & (VTD_SL_R | VTD_SL_W)))
            return -1;
        assert_int_equal(e & (VTD_SL_R | VTD_SL_W), VTD_SL_R | VTD_SL_W);
        assert_int_equal(e & ~(VTD_SL_ADDR_MASK | VTD_SL_R | VTD_SL_W | VTD_SL_PS), 0);
        if (l == 1 || (e & VTD_SL_PS)) {
            assert_true(l <= 3);
            *hpa = (e & VTD_SL_ADDR_MASK & ~(VTD_LEVEL_SIZE(l) - 1)) |
                   (addr & (VTD_LEVEL_SIZE(l) - 1));
            *level = l;
            return 0;
        }
        tab = va(p, e & VTD_SL_ADDR_MASK);
    }
    return -1;
}

#define R(b, s, t)                                                                                 \
    {                                                                                              \
        (b), (s), (t), 0                                                                           \
    }
/* QEMU q35 + OVMF with 512 MiB, the VMM in the middle of RAM */
static const struct ptv_mem_range q35_512[] = {
    R(0, 0xa0000, PTV_MEM_RAM),
    R(MiB(1), MiB(500) - MiB(1), PTV_MEM_RAM),
    R(MiB(500), MiB(6) + KiB(20), PTV_MEM_VMM),
    R(MiB(506) + KiB(20), MiB(4) - KiB(20), PTV_MEM_RAM),
    R(MiB(510), MiB(2), PTV_MEM_ACPI),
    R(0xb0000000, MiB(256), PTV_MEM_RESERVED), /* MMCONFIG */
    R(0xffc00000, MiB(4), PTV_MEM_RESERVED),   /* flash */
};
/* 4 GiB of RAM: 2 GiB low, 2 GiB above 4 GiB; the VMM high */
static const struct ptv_mem_range ram_4g[] = {
    R(0, 0xa0000, PTV_MEM_RAM),
    R(MiB(1), GiB(2) - MiB(1), PTV_MEM_RAM),
    R(0xb0000000, MiB(256), PTV_MEM_RESERVED),
    R(GiB(4), GiB(2) - MiB(64), PTV_MEM_RAM),
    R(GiB(6) - MiB(64), MiB(64) - MiB(1) + KiB(4), PTV_MEM_VMM),
    R(GiB(6) - MiB(1) + KiB(4), MiB(1) - KiB(4), PTV_MEM_RAM),
};
static const struct vtd_range qemu_regs[] = {{0xfed90000, 4096}};

static bool in_ranges(const struct ptv_mem_range *m, unsigned n, uint64_t a, uint32_t type)
{
    for (unsigned i = 0; i < n; i++)
        if (m[i].type == type && a - m[i].base < m[i].size)
            return true;
    return false;
}

/* build, then walk every page of [0, top) from a few requesters against the EPT identity map */
static struct vtd_tables check_against_ept(const struct ptv_mem_range *mem, unsigned n,
                                           const struct vtd_range *hole, unsigned nh,
                                           unsigned levels, bool has_2m, bool has_1g)
{
    static const unsigned req[][2] = {{0, 0x10}, {0, 0xff}, {3, 0x08}, {255, 0}};
    struct vtd_map_in in = {mem, n, hole, nh, levels, has_2m, has_1g};
    struct mtrr_state m = {.maxphyaddr = 46}; /* no MTRRs: UC everywhere, one type */
    struct vtd_tables t;
    struct pool p;
    struct fx f;
    uint64_t top, etop;
    char err[160];
    unsigned long want = vtd_tables_pages(&in, &top, err, sizeof(err));

    assert_true(want > 0);
    pool_init(&p, want + 4);
    struct vtd_page_ops ops = {pool_alloc, pool_flush, &p};
    assert_true(vtd_tables_build(&in, &ops, &t, err, sizeof(err)));
    assert_int_equal(t.pages, want); /* the count was exact */
    assert_int_equal(p.used, want);
    assert_int_equal(p.flushed, want); /* every table page flushed once */
    assert_int_equal(t.top, top);
    assert_int_equal(fx_setup(&f, 4096, has_1g, has_2m), 0);
    assert_int_equal(ept_build_identity(&f.e, mem, n, &m, &etop), 0);
    assert_int_equal(etop, t.top); /* one span for both */
    for (uint64_t a = 0; a < t.top; a += KiB(4)) {
        uint64_t hpa = 0, ehpa = 0;
        unsigned level = 0, r = (unsigned)(a >> 12) % 4;
        int rc = walk(&p, &t, req[r][0], req[r][1], a, &hpa, &level);
        bool ept = ept_translate(&f.e, a, &ehpa, NULL, NULL, NULL) == 0;
        bool is_hole = false;
        for (unsigned i = 0; i < nh; i++)
            is_hole |= a - (hole[i].base & ~0xfffull) < hole[i].size;
        if (rc == 0 && hpa != a)
            fail_msg("%#llx maps to %#llx", (unsigned long long)a, (unsigned long long)hpa);
        if (in_ranges(mem, n, a, PTV_MEM_VMM) && rc == 0)
            fail_msg("VMM page %#llx is reachable by DMA", (unsigned long long)a);
        if (is_hole ? rc == 0 : (rc == 0) != ept)
            fail_msg("%#llx: DMA %s, CPU (EPT) %s%s", (unsigned long long)a,
                     rc == 0 ? "mapped" : "not mapped", ept ? "mapped" : "not mapped",
                     is_hole ? " (a register hole)" : "");
        if (rc == 0 && ((level == 2 && !has_2m) || (level == 3 && !has_1g)))
            fail_msg("%#llx: a level-%u page the units cannot map", (unsigned long long)a, level);
    }
    assert_int_equal(walk(&p, &t, 0, 0, t.top, &(uint64_t){0}, &(unsigned){0}), -1);
    fakemem_free(&f.fm);
    free(p.mem);
    return t;
}

static void test_q35_512m_matches_ept(void **state)
{
    struct vtd_tables t = check_against_ept(q35_512, 7, qemu_regs, 1, 3, true, true);
    assert_int_equal(t.top, GiB(4));
    assert_int_equal(t.levels, 3);
}

static void test_4g_4level_2m_only(void **state)
{
    struct vtd_tables t = check_against_ept(ram_4g, 6, qemu_regs, 1, 4, true, false);
    assert_int_equal(t.top, GiB(6));
    assert_int_equal(t.leaves[2], 0);
}

static void test_4k_only(void **state)
{
    struct vtd_tables t = check_against_ept(q35_512, 7, qemu_regs, 1, 3, false, false);
    assert_int_equal(t.leaves[1] + t.leaves[2], 0);
}

/* a VMM range in two pieces that cover a 2 MiB block together: no empty table for it */
static void test_split_exclusion_no_empty_table(void **state)
{
    static const struct ptv_mem_range m[] = {
        R(0, MiB(2), PTV_MEM_RAM),
        R(MiB(2), MiB(1), PTV_MEM_VMM),
        R(MiB(3), MiB(1), PTV_MEM_VMM),
        R(MiB(4), MiB(60), PTV_MEM_RAM),
    };
    struct vtd_tables t = check_against_ept(m, 4, NULL, 0, 3, true, true);
    /* top table + one 1 GiB table (first GiB split) + root + context: no level-1 table */
    assert_int_equal(t.pages, 4);
}

static void test_refusals(void **state)
{
    static const struct ptv_mem_range high[] = {R(GiB(600), GiB(1), PTV_MEM_RAM)};
    static const struct ptv_mem_range bad[] = {R(0x800, MiB(1), PTV_MEM_RAM)};
    static const struct ptv_mem_range badtype[] = {R(0, MiB(1), 9)};
    struct vtd_map_in in = {high, 1, NULL, 0, 3, true, true};
    struct vtd_tables t;
    struct pool p;
    char err[160];
    uint64_t top;

    pool_init(&p, 64);
    struct vtd_page_ops ops = {pool_alloc, NULL, &p};
    assert_int_equal(vtd_tables_pages(&in, &top, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "beyond a 3-level walk's 39 bits"));
    assert_false(vtd_tables_build(&in, &ops, &t, err, sizeof(err)));
    assert_int_equal(p.used, 0); /* nothing taken on a refusal */
    in.levels = 4;
    assert_true(vtd_tables_pages(&in, &top, err, sizeof(err)) > 0);
    in.levels = 6;
    assert_int_equal(vtd_tables_pages(&in, &top, err, sizeof(err)), 0);
    in = (struct vtd_map_in){bad, 1, NULL, 0, 3, true, true};
    assert_int_equal(vtd_tables_pages(&in, &top, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "malformed"));
    in.mem = badtype;
    assert_int_equal(vtd_tables_pages(&in, &top, err, sizeof(err)), 0);
    /* out of pages midway: refused with the count */
    in = (struct vtd_map_in){q35_512, 7, qemu_regs, 1, 3, false, false};
    p.budget = 100;
    assert_false(vtd_tables_build(&in, &ops, &t, err, sizeof(err)));
    assert_non_null(strstr(err, "out of memory"));
    free(p.mem);
}

/* every bus, every device/function: the same domain and tables */
static void test_every_requester(void **state)
{
    struct vtd_map_in in = {q35_512, 7, qemu_regs, 1, 3, true, true};
    struct vtd_tables t;
    struct pool p;
    char err[160];
    uint64_t hpa;
    unsigned level;

    pool_init(&p, 64);
    struct vtd_page_ops ops = {pool_alloc, NULL, &p};
    assert_true(vtd_tables_build(&in, &ops, &t, err, sizeof(err)));
    for (unsigned bus = 0; bus < 256; bus++)
        for (unsigned df = 0; df < 256; df++) {
            assert_int_equal(walk(&p, &t, bus, df, MiB(1), &hpa, &level), 0);
            assert_int_equal(walk(&p, &t, bus, df, MiB(503), &hpa, &level), -1);
        }
    free(p.mem);
}

/* memory above 2^48: a 5-level walk, the VMM's page out, RAM in, nothing past the top */
static void test_5level(void **state)
{
    static const struct ptv_mem_range m[] = {
        R(0, GiB(2), PTV_MEM_RAM),
        R(1ull << 48, GiB(1), PTV_MEM_RAM),
        R((1ull << 48) + GiB(1), MiB(2), PTV_MEM_VMM),
    };
    struct vtd_map_in in = {m, 3, qemu_regs, 1, 4, true, true};
    struct vtd_tables t;
    struct pool p;
    char err[160];
    uint64_t top, hpa;
    unsigned level;

    assert_int_equal(vtd_tables_pages(&in, &top, err, sizeof(err)), 0); /* beyond 48 bits */
    in.levels = 5;
    /* [0, top) is all mapped, holes and MMIO too, as the EPT identity map does: 512 level-3
     * tables of 1 GiB pages below 2^48 */
    pool_init(&p, 1024);
    struct vtd_page_ops ops = {pool_alloc, NULL, &p};
    if (!vtd_tables_build(&in, &ops, &t, err, sizeof(err)))
        fail_msg("%s", err);
    assert_int_equal(t.pages, p.used);
    assert_int_equal(t.top, (1ull << 48) + GiB(2));
    assert_int_equal(walk(&p, &t, 0, 8, (1ull << 48) + 0x1234, &hpa, &level), 0);
    assert_int_equal(hpa, (1ull << 48) + 0x1234);
    assert_int_equal(level, 3);
    assert_int_equal(walk(&p, &t, 0, 8, (1ull << 48) + GiB(1) + 0x5000, &hpa, &level), -1);
    assert_int_equal(walk(&p, &t, 0, 8, (1ull << 48) + GiB(1) + MiB(2), &hpa, &level), 0);
    assert_int_equal(walk(&p, &t, 0, 8, 0xfed90000, &hpa, &level), -1);
    assert_int_equal(walk(&p, &t, 0, 8, 0xfed8f000, &hpa, &level), 0);
    assert_int_equal(walk(&p, &t, 0, 8, t.top, &hpa, &level), -1);
    free(p.mem);
}

static void bench(const char *name, const struct ptv_mem_range *m, unsigned n, unsigned levels,
                  bool has_2m, bool has_1g)
{
    struct vtd_map_in in = {m, n, qemu_regs, 1, levels, has_2m, has_1g};
    uint64_t top;
    char err[160];
    unsigned long pages = vtd_tables_pages(&in, &top, err, sizeof(err));
    assert_true(pages > 0);
    printf("BENCH vtd-tables %s, %u-level walk, %s pages: %lu table pages (%lu KiB) for [0, %llu "
           "GiB)\n",
           name, levels,
           has_1g   ? "1G+2M+4K"
           : has_2m ? "2M+4K"
                    : "4K",
           pages, pages * 4, (unsigned long long)(top >> 30));
}

static void test_bench(void **state)
{
    bench("512 MiB RAM (q35)", q35_512, 7, 3, true, true);
    bench("512 MiB RAM (q35)", q35_512, 7, 3, false, false);
    bench("4 GiB RAM", ram_4g, 6, 4, true, true);
    bench("4 GiB RAM", ram_4g, 6, 4, true, false);
    bench("4 GiB RAM", ram_4g, 6, 4, false, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q35_512m_matches_ept),
        cmocka_unit_test(test_4g_4level_2m_only),
        cmocka_unit_test(test_4k_only),
        cmocka_unit_test(test_split_exclusion_no_empty_table),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_every_requester),
        cmocka_unit_test(test_5level),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
