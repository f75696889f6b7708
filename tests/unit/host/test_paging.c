/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/host/paging.c: the VMM's W^X page tables built in a buffer for
 * given layouts, then walked as the CPU walks them: every page of the VMM
 * image (text R+X, rodata R+NX, data R+W+NX) and a sample of all other memory
 * (R+W+NX, identity) has the right rights, the largest pages are used away
 * from the image, no page is W+X; the W+X checker itself is proven to bite.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host/paging.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

#define PA_BASE 0x0000004560000000ull /* "physical" addresses of the table pages */

struct arena {
    uint8_t *mem;
    size_t npages, used;
};

static void *a_alloc(void *ctx, uint64_t *pa)
{
    struct arena *a = ctx;
    void *va;

    if (a->used == a->npages)
        return NULL;
    va = a->mem + a->used * 4096;
    memset(va, 0, 4096);
    *pa = PA_BASE + a->used++ * 4096;
    return va;
}

static void *a_pa_to_va(void *ctx, uint64_t pa)
{
    struct arena *a = ctx;

    if (pa < PA_BASE || pa >= PA_BASE + a->used * 4096 || (pa & 4095))
        fail_msg("walk to a page that is no table: %#llx", (unsigned long long)pa);
    return a->mem + (pa - PA_BASE);
}

static struct hpt_ops arena_ops(struct arena *a, size_t npages)
{
    a->mem = aligned_alloc(4096, npages * 4096);
    assert_non_null(a->mem);
    a->npages = npages;
    a->used = 0;
    return (struct hpt_ops){.ctx = a, .alloc_page = a_alloc, .pa_to_va = a_pa_to_va};
}

/* a VMM image: text, rodata, data+bss, then handoff + pool (all RW) */
static struct hpt_layout image_at(uint64_t base, uint64_t top, bool has_1g)
{
    return (struct hpt_layout){.top = top,
                               .text_start = base,
                               .text_end = base + KiB(212),
                               .ro_start = base + KiB(212),
                               .ro_end = base + KiB(300),
                               .has_1g = has_1g,
                               .has_nx = true};
}

static void expect(const struct hpt_ops *ops, uint64_t cr3, uint64_t va, bool w, bool x)
{
    struct hpt_access a = hpt_lookup(ops, cr3, va, true, true);

    if (!a.present || a.pa != va || a.write != w || a.exec != x)
        fail_msg("va %#llx: present %d pa %#llx write %d exec %d, want write %d exec %d",
                 (unsigned long long)va, a.present, (unsigned long long)a.pa, a.write, a.exec, w,
                 x);
}

static void check_layout(const struct hpt_layout *l, size_t *tables)
{
    struct arena a;
    struct hpt_ops ops = arena_ops(&a, 64);
    uint64_t cr3 = 0, p, top = (l->top + GiB(1) - 1) & ~(GiB(1) - 1);

    assert_int_equal(hpt_build(l, &ops, &cr3), 0);
    assert_int_equal(cr3, PA_BASE);
    /* every page of the image and 8 MiB around it, at both ends and in the middle */
    for (p = (l->text_start > MiB(4) ? l->text_start - MiB(4) : 0);
         p < l->ro_end + MiB(4) && p < top; p += KiB(4)) {
        bool text = p >= l->text_start && p < l->text_end;
        bool ro = p >= l->ro_start && p < l->ro_end;

        expect(&ops, cr3, p, !text && !ro, text);
        expect(&ops, cr3, p + 4095, !text && !ro, text);
        expect(&ops, cr3, p + 2048 + 7, !text && !ro, text);
    }
    /* a sample of everything else: RW, NX, identity */
    for (p = 0; p < top; p += MiB(62) + KiB(36)) {
        if (p >= l->text_start - MiB(4) && p < l->ro_end + MiB(4))
            continue;
        expect(&ops, cr3, p, true, false);
    }
    expect(&ops, cr3, top - 8, true, false);
    assert_false(hpt_lookup(&ops, cr3, top, true, true).present);
    /* large pages away from the image */
    assert_int_equal(
        hpt_lookup(&ops, cr3, (l->text_start >= GiB(4) ? GiB(1) : GiB(6)) + MiB(6), true, true)
            .level,
        l->has_1g ? 3 : 2);
    assert_int_equal(hpt_lookup(&ops, cr3, l->text_start, true, true).level, 1);
    assert_true(hpt_wx_free(&ops, cr3, true, true));
    /* without EFER.NXE every page executes, without CR0.WP ring 0 writes every page */
    assert_false(hpt_wx_free(&ops, cr3, false, true));
    assert_false(hpt_wx_free(&ops, cr3, true, false));
    assert_true(hpt_lookup(&ops, cr3, l->text_start, true, false).write);
    assert_true(hpt_lookup(&ops, cr3, l->ro_end + MiB(1), false, true).exec);
    if (tables)
        *tables = a.used;
    free(a.mem);
}

static void test_layouts(void **state)
{
    static const uint64_t bases[] = {MiB(256) + KiB(20), GiB(2) - KiB(300), GiB(1) - KiB(212),
                                     MiB(2), GiB(5) + MiB(3) + KiB(4)};
    unsigned i, g;

    for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++)
        for (g = 0; g < 2; g++) {
            struct hpt_layout l = image_at(bases[i], GiB(8), g);
            size_t tables;

            check_layout(&l, &tables);
            /* PML4 + PDPT, +PD(s) and PT(s) around the image (+ PDs for 2 MiB pages) */
            assert_true(tables <= (g ? 2 + 2 + 2 : 2 + 8 + 2));
        }
    /* a top beyond 512 GiB: a second PDPT */
    {
        struct hpt_layout l = image_at(MiB(700), GiB(513) + 5, true);
        check_layout(&l, NULL);
    }
}

/* the checker bites: one W+X leaf anywhere, at any level, is found */
static void test_wx_detected(void **state)
{
    struct hpt_layout l = image_at(MiB(256) + KiB(20), GiB(4), true);
    unsigned level;

    for (level = 1; level <= 3; level++) {
        struct arena a;
        struct hpt_ops ops = arena_ops(&a, 64);
        uint64_t cr3, va = level == 1 ? l.text_start + KiB(4) : level == 2 ? MiB(600) : GiB(3);
        uint64_t *t;
        unsigned lv;

        assert_int_equal(hpt_build(&l, &ops, &cr3), 0);
        t = ops.pa_to_va(ops.ctx, cr3);
        assert_int_equal(hpt_lookup(&ops, cr3, va, true, true).level, level);
        /* walk to the leaf and make it W+X */
        for (lv = 4; lv > level; lv--)
            t = ops.pa_to_va(ops.ctx, t[(va >> (12 + 9 * (lv - 1))) & 511] & PTE_ADDR);
        t[(va >> (12 + 9 * (level - 1))) & 511] |= PTE_W;
        t[(va >> (12 + 9 * (level - 1))) & 511] &= ~PTE_NX;
        assert_false(hpt_wx_free(&ops, cr3, true, true));
        free(a.mem);
    }
}

static void test_bad_layouts(void **state)
{
    struct arena a;
    struct hpt_ops ops = arena_ops(&a, 3);
    struct hpt_layout l = image_at(MiB(256) + KiB(20), GiB(4), true);
    uint64_t cr3;

    l.text_end += 1;
    assert_int_equal(hpt_build(&l, &ops, &cr3), -22);
    l = image_at(MiB(256), GiB(4), true);
    l.ro_start -= KiB(4); /* overlaps text */
    assert_int_equal(hpt_build(&l, &ops, &cr3), -22);
    l = image_at(GiB(4), GiB(4), true); /* beyond top */
    assert_int_equal(hpt_build(&l, &ops, &cr3), -22);
    l = image_at(MiB(256) + KiB(20), GiB(4), false); /* needs more than 3 table pages */
    assert_int_equal(hpt_build(&l, &ops, &cr3), -12);
    free(a.mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_wx_detected),
        cmocka_unit_test(test_bad_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
