/* SPDX-License-Identifier: MIT */
/* Shadow ToPA builder (vmm/pt/pt_shadow*.c): layout, validate-then-commit, protection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "pt/pt_shadow.h"
#include "pt/rtit.h"

#define T0    0x10000ull
#define T1    0x11000ull
#define MAXPA 39

static struct fake_world *fw;
static struct pt_shadow sh;
static struct pt_shadow_scratch *scr;
static struct pt_shadow_env env;
static struct pt_topa_err err;

static int setup(void **state)
{
    fw = fw_new(1);
    scr = calloc(1, sizeof(*scr));
    scr->walk.regions = calloc(4096, sizeof(struct pt_topa_region));
    scr->walk.max_regions = 4096;
    env = (struct pt_shadow_env){.mem = &fw->mem,
                                 .alloc = &fw->alloc,
                                 .host_topa = true,
                                 .host_topa_multi = true,
                                 .host_single_range = true};
    pt_shadow_init(&sh);
    return 0;
}

static int teardown(void **state)
{
    pt_shadow_destroy(&sh, &env);
    assert_int_equal(fw->pool_in_use, 0);
    assert_int_equal(fw_wp_count(fw), 0);
    assert_int_equal(fw->wp_errors, 0);
    assert_int_equal(fw->free_errors, 0);
    free(scr->walk.regions);
    free(scr);
    fw_free(fw);
    return 0;
}

/* A guest store; a protected table page exits and the engine lets the store through. */
static void set(uint64_t gpa, uint64_t v)
{
    if (!fw_guest_store64(fw, gpa, v)) {
        assert_int_equal(pt_shadow_table_write(&sh, &env, gpa), PT_SHADOW_WP_RETRY);
        assert_true(fw_guest_store64(fw, gpa, v));
    }
}

static uint64_t ent(uint64_t base, unsigned code, uint64_t flags)
{
    return base | ((uint64_t)code << TOPA_SIZE_SHIFT) | flags;
}

static enum pt_shadow_status build(uint64_t ctl, uint64_t base, uint64_t mask)
{
    struct pt_out_cfg cfg = {.ctl = ctl,
                             .output_base = base,
                             .output_mask_ptrs = mask,
                             .topa_multi = true,
                             .maxphyaddr = MAXPA};
    return pt_shadow_build(&sh, scr, &env, &cfg, &err);
}

static void two_tables(void)
{
    set(T0 + 0, ent(0x400000, 10, TOPA_INT)); /* 4 MiB over scrambled blocks */
    set(T0 + 8, ent(0x104000, 2, 0));
    set(T0 + 16, T1 | TOPA_END);
    set(T1 + 0, ent(0x900000, 8, TOPA_INT | TOPA_STOP));
    set(T1 + 8, T0 | TOPA_END);
}

static bool is_shadow_page(uint64_t hpa)
{
    for (unsigned i = 0; i < sh.npages; i++) {
        if (sh.pages[i].hpa == hpa)
            return true;
    }
    return false;
}

/* Every host entry is exact: pieces tile the guest region page by page in HPA. */
static void check_layout(void)
{
    for (unsigned i = 0; i < sh.npages; i++) {
        const struct pt_shadow_page *p = &sh.pages[i];
        assert_true(p->n >= 2);
        assert_true(p->tbl[p->n - 1] & TOPA_END);
        assert_true(is_shadow_page(p->tbl[p->n - 1] & TOPA_BASE_MASK(MAXPA)));
        for (unsigned j = 0; j + 1 < p->n; j++) {
            uint64_t e = p->tbl[j], size = TOPA_REGION_SIZE(e), hpa = e & TOPA_BASE_MASK(MAXPA);
            struct pt_shadow_pos pos = p->map[j];
            uint64_t g = fw_guest_load64(fw, sh.table_gpa[pos.gtable] + 8ull * pos.gentry);
            uint64_t gbase = g & TOPA_BASE_MASK(MAXPA), gsize = TOPA_REGION_SIZE(g);

            assert_false(e & TOPA_END);
            assert_int_equal(e & TOPA_RSVD_LOW, 0);
            assert_int_equal(hpa & (size - 1), 0); /* aligned in HPA */
            assert_true(fw_hpa_is_guest_ram(hpa) && fw_hpa_is_guest_ram(hpa + size - 1));
            assert_true(pos.goff + size <= gsize);
            for (uint64_t o = 0; o < size; o += 4096)
                assert_int_equal(fw_gpa_to_hpa(fw, gbase + pos.goff + o), hpa + o);
            if (pos.goff + size == gsize)
                assert_int_equal(e & (TOPA_INT | TOPA_STOP), g & (TOPA_INT | TOPA_STOP));
            else
                assert_int_equal(e & (TOPA_INT | TOPA_STOP), 0);
        }
    }
}

static void test_layout_exact(void **state)
{
    unsigned outputs = 0;

    two_tables();
    assert_int_equal(build(RTIT_CTL_TOPA, T0, 0), PT_SHADOW_OK);
    assert_int_equal(sh.mode, PT_SHADOW_TOPA);
    check_layout();
    for (unsigned i = 0; i < sh.npages; i++)
        outputs += sh.pages[i].n - 1;
    assert_true(outputs > 100); /* 4 MiB over swapped pages: many 4 KiB pieces */
    assert_true(sh.npages >= 2);
    assert_true(fw->wp[T0 >> 12] && fw->wp[T1 >> 12]);
    assert_true(sh.h_topa);
    assert_true(is_shadow_page(sh.h_base));
}

static void test_single_entry_host(void **state)
{
    env.host_topa_multi = false;
    set(T0 + 0, ent(0x104000, 2, TOPA_INT));
    set(T0 + 8, T0 | TOPA_END);
    assert_int_equal(build(RTIT_CTL_TOPA, T0, 0), PT_SHADOW_OK);
    check_layout();
    for (unsigned i = 0; i < sh.npages; i++)
        assert_int_equal(sh.pages[i].n, 2);
    /* not one piece in host memory: a single-entry host never chains tables */
    set(T0 + 0, ent(0x400000, 10, 0));
    assert_int_equal(build(RTIT_CTL_TOPA, T0, 0), PT_SHADOW_OPERR);
    assert_string_equal(err.reason,
                        "output region not contiguous in host memory (single-entry ToPA host)");
}

static void snapshot(struct pt_shadow *copy, uint8_t *pages)
{
    *copy = sh;
    for (unsigned i = 0; i < sh.npages; i++) {
        memcpy(pages + 8192ull * i, sh.pages[i].tbl, 4096);
        memcpy(pages + 8192ull * i + 4096, sh.pages[i].map, 4096);
    }
}

static void assert_unchanged(const struct pt_shadow *copy, const uint8_t *pages, uint32_t in_use,
                             uint32_t wp)
{
    assert_memory_equal(copy, &sh, sizeof(sh));
    for (unsigned i = 0; i < sh.npages; i++) {
        assert_memory_equal(pages + 8192ull * i, sh.pages[i].tbl, 4096);
        assert_memory_equal(pages + 8192ull * i + 4096, sh.pages[i].map, 4096);
    }
    assert_int_equal(fw->pool_in_use, in_use);
    assert_int_equal(fw_wp_count(fw), wp);
}

/* Validate, then commit: any failure leaves the previous shadow as it was. */
static void test_failures_keep_previous(void **state)
{
    static uint8_t pages[PT_SHADOW_MAX_PAGES * 8192];
    struct pt_shadow copy;
    uint32_t in_use, wp;

    two_tables();
    assert_int_equal(build(RTIT_CTL_TOPA, T0, 0), PT_SHADOW_OK);
    snapshot(&copy, pages);
    in_use = fw->pool_in_use;
    wp = fw_wp_count(fw);
    /* a different, valid guest setup on other tables, failing at each allocation */
    set(0x20000, ent(0x600000, 9, 0));
    set(0x20008, 0x21000 | TOPA_END);
    set(0x21000, ent(0x300000, 4, 0));
    set(0x21008, 0x20000 | TOPA_END);
    for (uint32_t k = 0; k < 4; k++) {
        fw->alloc_fail_after = k;
        assert_int_equal(build(RTIT_CTL_TOPA, 0x20000, 0), PT_SHADOW_NOMEM);
        assert_unchanged(&copy, pages, in_use, wp);
    }
    fw->alloc_fail_after = UINT32_MAX;
    for (uint32_t k = 0; k < 2; k++) {
        fw->wp_fail_after = k;
        assert_int_equal(build(RTIT_CTL_TOPA, 0x20000, 0), PT_SHADOW_NOMEM);
        assert_unchanged(&copy, pages, in_use, wp);
    }
    fw->wp_fail_after = UINT32_MAX;
    /* a refused set-up replaces the (unused) old shadow by a refusal record: its pages are
     * freed, the refused tables protected, and a retry is refused without a walk */
    set(0x21000, ent(0x300000, 4, PTV_BIT(1)));
    assert_int_equal(build(RTIT_CTL_TOPA, 0x20000, 0), PT_SHADOW_OPERR);
    assert_int_equal(sh.mode, PT_SHADOW_REFUSED);
    assert_int_equal(fw->pool_in_use, 0);
    assert_false(fw->wp[T0 >> 12]);
    assert_true(fw->wp[0x20] && fw->wp[0x21]);
    {
        uint32_t changes = fw->wp_changes;
        struct pt_out_cfg cfg = {
            .ctl = RTIT_CTL_TOPA, .output_base = 0x20000, .topa_multi = true, .maxphyaddr = MAXPA};
        scr->walk.entries_read = 0;
        assert_int_equal(pt_shadow_prepare(&sh, scr, &env, &cfg, &err), PT_SHADOW_OPERR);
        assert_string_equal(err.reason, "ToPA entry reserved bits set");
        assert_int_equal(scr->walk.entries_read, 0); /* no walk */
        assert_int_equal(fw->wp_changes, changes);
    }
    /* the guest's edit of a refused table lifts the record */
    assert_int_equal(pt_shadow_table_write(&sh, &env, 0x21000), PT_SHADOW_WP_RETRY);
    set(0x21000, ent(0x300000, 4, 0));
    assert_int_equal(build(RTIT_CTL_TOPA, 0x20000, 0), PT_SHADOW_OK);
    assert_false(fw->wp[T0 >> 12]); /* old tables released */
    assert_true(fw->wp[0x20] && fw->wp[0x21]);
    check_layout();
}

static void test_guest_view_rejects_foreign_values(void **state)
{
    uint64_t b, m;

    two_tables();
    assert_int_equal(build(RTIT_CTL_TOPA, T0, (1ull << 7) | (3ull << 32)), PT_SHADOW_OK);
    assert_true(pt_shadow_guest_view(&sh, sh.h_base, sh.h_mask, &b, &m));
    assert_int_equal(b, T0);
    assert_int_equal(m, 0x7full | (1ull << 7) | (3ull << 32)); /* bits 6:0 read as 1 */
    assert_false(pt_shadow_guest_view(&sh, 0x1234000, 0x7f, &b, &m));
    assert_int_equal(b, T0);
    assert_false(pt_shadow_guest_view(&sh, sh.pages[0].hpa, 0x7f | (511ull << 7), &b, &m));
}

static void test_table_write(void **state)
{
    two_tables();
    assert_int_equal(build(RTIT_CTL_TOPA, T0, 0), PT_SHADOW_OK);
    assert_int_equal(pt_shadow_table_write(&sh, &env, 0x104008), PT_SHADOW_WP_NOT_OURS);
    assert_int_equal(fw_wp_count(fw), 2);
    assert_int_equal(pt_shadow_table_write(&sh, &env, T1 + 0x10), PT_SHADOW_WP_RETRY);
    assert_int_equal(fw_wp_count(fw), 0);
    assert_true(sh.stale);
    assert_int_equal(pt_shadow_table_write(&sh, &env, T1 + 0x10), PT_SHADOW_WP_NOT_OURS);
}

static void test_single_range_modes(void **state)
{
    /* contiguous + aligned in HPA: direct */
    assert_int_equal(build(0, 0x500000, 0x3ffff), PT_SHADOW_OK);
    assert_int_equal(sh.mode, PT_SHADOW_SINGLE);
    /* not contiguous: circular host ToPA */
    assert_int_equal(build(0, 0x440000, 0x3ffff | (9ull << 32)), PT_SHADOW_OK);
    assert_int_equal(sh.mode, PT_SHADOW_SINGLE_AS_TOPA);
    for (unsigned i = 0; i < sh.npages; i++) {
        for (unsigned j = 0; j + 1 < sh.pages[i].n; j++)
            assert_int_equal(sh.pages[i].tbl[j] & (TOPA_INT | TOPA_STOP), 0);
    }
    /* host without single range: contiguous buffer still served through ToPA */
    env.host_single_range = false;
    assert_int_equal(build(0, 0x500000, 0x3ffff), PT_SHADOW_OK);
    assert_int_equal(sh.mode, PT_SHADOW_SINGLE_AS_TOPA);
    /* host without ToPA: a non-contiguous buffer cannot be expressed */
    env.host_single_range = true;
    env.host_topa = false;
    assert_int_equal(build(0, 0x440000, 0x3ffff), PT_SHADOW_OPERR);
    assert_string_equal(err.reason, "single-range buffer not expressible in host output");
    env.host_topa = true;
    env.host_single_range = false;
    assert_int_equal(build(0, 0x441100, 0xff), PT_SHADOW_OPERR); /* < 4 KiB needs single-range */
    env.host_single_range = true;
    env.host_topa = true;
}

/* What a build made: every host table page (entries and positions) and the host registers. */
struct layout {
    uint8_t mode;
    uint64_t h_base, h_mask;
    uint16_t npages;
    uint16_t n[PT_SHADOW_MAX_PAGES];
    uint64_t tbl[8][PT_SHADOW_HOST_ENTRIES];
    struct pt_shadow_pos map[8][PT_SHADOW_HOST_ENTRIES];
};

static void record(struct layout *l)
{
    memset(l, 0, sizeof(*l));
    l->mode = sh.mode;
    l->h_base = sh.h_base;
    l->h_mask = sh.h_mask;
    l->npages = sh.npages;
    assert_true(sh.npages <= 8);
    for (unsigned i = 0; i < sh.npages; i++) {
        l->n[i] = sh.pages[i].n;
        memcpy(l->tbl[i], sh.pages[i].tbl, sizeof(l->tbl[i]));
        memcpy(l->map[i], sh.pages[i].map, sizeof(l->map[i]));
    }
}

/*
 * The layout does not depend on how far one translation reaches: EPT answers up to the end of
 * its leaf (4 KiB, 2 MiB, 1 GiB), the fake's default answers the whole contiguous run.  The
 * builder joins HPA-contiguous translations into the same pieces either way.
 */
static void test_layout_independent_of_leaf_size(void **state)
{
    static struct layout ref, got;
    const int modes[] = {FW_XLATE_MAX, FW_XLATE_PAGE, FW_XLATE_FAST};
    /* ToPA: regions from 4 KiB to 4 MiB over identity, swapped and rotated blocks */
    set(T0 + 0, ent(0x400000, 10, TOPA_INT)); /* 4 MiB */
    set(T0 + 8, ent(0x104000, 2, 0));         /* 16 KiB */
    set(T0 + 16, ent(0x200000, 9, 0));        /* 2 MiB */
    set(T0 + 24, ent(0x180000, 7, 0));        /* 512 KiB, rotated block */
    set(T0 + 32, ent(0x1c0000, 6, TOPA_INT)); /* 256 KiB, identity block */
    set(T0 + 40, ent(0x141000, 0, 0));        /* 4 KiB, swapped block */
    set(T0 + 48, T1 | TOPA_END);
    set(T1 + 0, ent(0x900000, 8, TOPA_INT | TOPA_STOP));
    set(T1 + 8, T0 | TOPA_END);
    for (unsigned m = 0; m < 3; m++) {
        fw->xlate_mode = modes[m];
        if (modes[m] == FW_XLATE_FAST)
            fw_fast_translate(fw);
        pt_shadow_destroy(&sh, &env); /* the pool hands out the same pages again */
        assert_int_equal(build(RTIT_CTL_TOPA, T0, 3ull << 7 | 0x1000ull << 32), PT_SHADOW_OK);
        check_layout();
        record(m ? &got : &ref);
        if (m)
            assert_memory_equal(&ref, &got, sizeof(ref));
    }
    /* single range: direct when contiguous and aligned (256 KiB identity block), else ToPA */
    for (unsigned buf = 0; buf < 2; buf++) {
        for (unsigned m = 0; m < 3; m++) {
            fw->xlate_mode = modes[m];
            pt_shadow_destroy(&sh, &env);
            assert_int_equal(build(0, buf ? 0x440000 : 0x500000, 0x3ffff | (9ull << 32)),
                             PT_SHADOW_OK);
            assert_int_equal(sh.mode, buf ? PT_SHADOW_SINGLE_AS_TOPA : PT_SHADOW_SINGLE);
            record(m ? &got : &ref);
            if (m)
                assert_memory_equal(&ref, &got, sizeof(ref));
        }
    }
    fw->xlate_mode = FW_XLATE_MAX;
}

/* The benchmarks' O(1) fake EPT answers exactly as the page-by-page one, VMM-protected pages
 * (a kind boundary inside a contiguous run) included. */
static void test_fast_fake_translate(void **state)
{
    fw->protected_by_vmm[0x1c5] = fw->protected_by_vmm[0x1c6] = true;
    fw->protected_by_vmm[0x23f] = true;
    fw_fast_translate(fw);
    for (uint64_t gpa = 0; gpa < FW_GPA_UNMAPPED + 0x3000; gpa += 0x1000 - 8 * (gpa % 5)) {
        struct pt_mem_xlate a, b;
        fw->xlate_mode = FW_XLATE_MAX;
        fw->mem.translate(fw, gpa, &a);
        fw->xlate_mode = FW_XLATE_FAST;
        fw->mem.translate(fw, gpa, &b);
        assert_int_equal(a.kind, b.kind);
        assert_int_equal(a.hpa, b.hpa);
        assert_int_equal(a.len, b.len);
    }
    fw_swap_pages(fw, 3, 700); /* the runs changed: back to the page-by-page answers */
    assert_int_equal(fw->xlate_mode, FW_XLATE_MAX);
    fw->protected_by_vmm[0x1c5] = fw->protected_by_vmm[0x1c6] = false;
    fw->protected_by_vmm[0x23f] = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layout_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_entry_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_keep_previous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guest_view_rejects_foreign_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_range_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_independent_of_leaf_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast_fake_translate, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
