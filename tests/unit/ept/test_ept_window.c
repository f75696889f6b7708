/* SPDX-License-Identifier: MIT */
/*
 * Host tests for vmm/ept/ept_window.c with ept.c's merges: a guest moving
 * its xAPIC window around, as vcpu/exit/exit_msr.c moves it (remove the old one, place the new one,
 * INVEPT), over an identity map with 4 KiB, 2 MiB and 1 GiB leaves, holes above RAM and
 * on-demand maps there.  Thousands of moves hold a bounded number of EPT pool pages (the
 * bound ept_window.h states), every page the window left translates exactly as before, page
 * size included (the split merged back), and when the windows are gone the tree is the one
 * the identity map built.  Fails on the code before the merges: every move split a 1 GiB or
 * 2 MiB leaf for good, and a window over a hole left its tables behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ept/ept_window.h"
#include "ept/ept_entry.h"
#include "fakes/ept_fakemem.h"
#include "fakes/mtrr_ref.h"

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

#define FLOOR GiB(4)
#define HOME  0xfee00000ull /* the real APIC page: its window never moves */
#define MOVES 5000u
#define NWIN  2u

struct wfx {
    struct fx f;
    struct mtrr_state m;
    struct ept_od od;
    struct ept_window win[NWIN];
    struct ept_window *all[NWIN];
    unsigned long baseline; /* EPT pages held after the identity map */
    unsigned long peak;     /* the most held after a move and its INVEPT */
    uint64_t rng;
};

static void flush_cb(void *ctx, struct ept *e)
{
    struct wfx *x = ctx;

    fakemem_flush(&x->f.fm, e);
}

/* RAM and MMIO below 4 GiB as the identity map builds it: 4 KiB pages with mixed types in the
 * first 2 MiB, 2 MiB pages to 1 GiB, 1 GiB pages above (where the CPU has them); UC above
 * RAM, WB at 32 GiB */
static void w_setup(struct wfx *x, bool has_1g, bool has_2m)
{
    struct ept *e = &x->f.e;

    memset(x, 0, sizeof(*x));
    x->rng = 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < NWIN; i++)
        x->all[i] = &x->win[i];
    x->m.cap = MTRR_CAP_FIX | MTRR_CAP_WC | 8;
    x->m.def_type = MTRR_DEF_TYPE_E | EPT_MT_UC;
    x->m.maxphyaddr = 40;
    set_var(&x->m, 0, GiB(32), GiB(1), EPT_MT_WB);
    assert_int_equal(fx_setup(&x->f, has_2m ? 4096 : 8192, has_1g, has_2m), 0);
    assert_int_equal(ept_set_maxphyaddr(e, 40), 0);
    assert_int_equal(ept_map(e, 0, 0, KiB(640), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_map(e, KiB(640), KiB(640), KiB(384), EPT_RWX, EPT_MT_UC), 0);
    assert_int_equal(ept_map(e, MiB(1), MiB(1), GiB(3) - MiB(1), EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_map(e, GiB(3), GiB(3), GiB(1), EPT_RWX, EPT_MT_UC), 0);
    fx_flush(&x->f);
    x->baseline = ept_pages_held(e);
    assert_int_equal(
        ept_od_init(&x->od, e, &x->m, FLOOR, 1ull << 40, EPT_OD_MAX_TABLES, flush_cb, x), 0);
}

static uint64_t next(struct wfx *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return x->rng;
}

/* an EPT violation at gpa: the VMM maps it on demand if EPT does not translate it */
static void touch(struct wfx *x, uint64_t gpa)
{
    struct ept_od_map m;

    if (ept_translate(&x->f.e, gpa, NULL, NULL, NULL, NULL) == EPT_ENOENT)
        assert_int_equal(ept_od_fault(&x->od, &x->f.e, gpa, &m), 0);
}

struct xl {
    int rc;
    uint64_t hpa;
    unsigned perms, mt, level;
};

static struct xl xlate(const struct ept *e, uint64_t gpa)
{
    struct xl t = {0};

    t.rc = ept_translate(e, gpa, &t.hpa, &t.perms, &t.mt, &t.level);
    return t;
}

/* a page for the window: in 1 GiB / 2 MiB / 4 KiB leaves, in MMIO, above RAM in a hole or in
 * an on-demand map, or the APIC's own page */
static uint64_t pick(struct wfx *x)
{
    uint64_t r = next(x), page = (r >> 8) & ~(KiB(4) - 1);

    switch (r % 7) {
    case 0:
        return GiB(1) + page % GiB(2);
    case 1:
        return MiB(2) + page % (GiB(1) - MiB(2));
    case 2:
        return page % MiB(2);
    case 3:
        return GiB(3) + page % GiB(1);
    case 4:
        return FLOOR + page % ((1ull << 40) - FLOOR);
    case 5: { /* where the guest touched first: an on-demand map */
        uint64_t g = FLOOR + page % GiB(64);
        touch(x, g);
        return g;
    }
    default:
        return HOME;
    }
}

/* what vcpu/exit/exit_msr.c does when the guest moves window i to `to` (and its vmx_ept_sync());
 * the page the window leaves must translate as before it came, page size included, unless an
 * on-demand drop took that map meanwhile */
static void move(struct wfx *x, unsigned i, uint64_t to)
{
    static struct xl saved[NWIN];
    static unsigned long drops_at[NWIN];
    struct ept *e = &x->f.e;
    struct ept_window *w = &x->win[i];
    uint64_t from = w->placed ? w->gpa : HOME;
    const struct xl was = saved[i];
    const unsigned long was_drops = drops_at[i];

    if (from == to)
        return;
    if (from != HOME)
        assert_int_equal(ept_window_remove(w, x->all, NWIN, e, &x->od), 0);
    if (to != HOME) {
        struct xl old = xlate(e, to), now;
        unsigned long drops = x->od.drops;

        for (unsigned k = 0; k < NWIN; k++) /* stacked on another window: what that one saved */
            if (k != i && x->win[k].placed && x->win[k].gpa == to) {
                old = saved[k];
                drops = drops_at[k];
            }
        assert_int_equal(ept_window_place(w, x->all, NWIN, e, &x->od, to, HOME), 0);
        now = xlate(e, to);
        assert_int_equal(now.rc, 0);
        assert_int_equal(now.hpa, HOME);
        assert_int_equal(now.perms, EPT_R | EPT_W);
        assert_int_equal(now.mt, EPT_MT_UC | EPT_MT_IPAT);
        assert_int_equal(w->err, old.rc);
        saved[i] = old;
        drops_at[i] = drops;
    }
    if (ept_flush_needed(e))
        fx_flush(&x->f); /* vmx_ept_sync(): INVEPT everywhere */
    if (from != HOME) {
        struct xl now = xlate(e, from);
        bool shared = false;

        for (unsigned k = 0; k < NWIN; k++)
            shared |= k != i && x->win[k].placed && x->win[k].gpa == from;
        /* above RAM, leaving may drop the on-demand maps (ept_window.h): the saved one too */
        bool od_dropped = now.rc == EPT_ENOENT && from >= FLOOR && x->od.drops != was_drops;

        if (!shared && was.rc) {
            assert_int_equal(now.rc, EPT_ENOENT);
        } else if (!shared && !od_dropped) {
            assert_int_equal(now.rc, 0);
            assert_int_equal(now.hpa, was.hpa);
            assert_int_equal(now.perms, was.perms);
            assert_int_equal(now.mt, was.mt);
            /* merged back (unless a drop took the map meanwhile, or a window in the same
             * 1 GiB splits it now); at least as large: a window may have split it before */
            bool near = false;
            for (unsigned k = 0; k < NWIN; k++)
                near |= x->win[k].placed && x->win[k].gpa >> 30 == from >> 30;
            if (x->od.drops == was_drops && !near)
                assert_true(now.level >= was.level);
        }
    }
    if (ept_pages_held(e) > x->peak)
        x->peak = ept_pages_held(e);
}

/* tables of the identity map only: an on-demand map or a window above RAM adds its own */
static void expect_leaf_level(struct wfx *x, uint64_t gpa, unsigned level)
{
    struct xl t = xlate(&x->f.e, gpa);

    assert_int_equal(t.rc, 0);
    assert_int_equal(t.level, level);
}

static void run_moves(bool has_1g, bool has_2m, const char *what)
{
    static struct wfx x;
    struct tree_dump t0 = {0}, t1 = {0};
    unsigned long bound;

    w_setup(&x, has_1g, has_2m);
    tree_dump(&x.f.e, &t0);
    for (unsigned n = 0; n < MOVES; n++)
        move(&x, n % NWIN, pick(&x));
    /* ept_window.h's bound: 2 x (levels - 1) per window, plus the on-demand budget */
    bound = 2ul * (x.f.e.levels - 1) * NWIN + EPT_OD_MAX_TABLES;
    printf("BENCH ept window, %u moves of %u xAPIC windows, %s: EPT pool pages +%lu after the "
           "identity map (peak), bound %lu\n",
           MOVES, NWIN, what, x.peak - x.baseline, bound);
    assert_true(x.peak - x.baseline <= bound);
    /* every window gone and the on-demand maps dropped: the identity map's own tree, page
     * sizes included (every split merged back) */
    for (unsigned i = 0; i < NWIN; i++)
        move(&x, i, HOME);
    assert_int_equal(ept_od_drop_all(&x.od, &x.f.e), 0);
    fx_flush(&x.f);
    tree_dump(&x.f.e, &t1);
    assert_true(tree_equal(&t0, &t1));
    if (has_1g)
        expect_leaf_level(&x, GiB(2), EPT_LEVEL_1G);
    if (has_2m)
        expect_leaf_level(&x, MiB(600), EPT_LEVEL_2M);
    expect_leaf_level(&x, KiB(700), EPT_LEVEL_4K);
    tree_dump_free(&t0);
    tree_dump_free(&t1);
    fakemem_free(&x.f.fm);
}

static void test_moves_1g(void **state)
{
    (void)state;
    run_moves(true, true, "1G+2M pages");
}

static void test_moves_2m(void **state)
{
    (void)state;
    run_moves(false, true, "2M pages only");
}

static void test_moves_4k(void **state)
{
    (void)state;
    run_moves(false, false, "4K pages only");
}

/* one move splits a 1 GiB leaf into two tables; moving on merges both back at once */
static void test_split_merged_back(void **state)
{
    static struct wfx x;
    struct ept *e = &x.f.e;
    (void)state;

    w_setup(&x, true, true);
    unsigned long tables = e->nr_tables;
    move(&x, 0, GiB(2) + MiB(7) + KiB(12));
    assert_int_equal(e->nr_tables, tables + 2);
    expect_leaf_level(&x, GiB(2) + MiB(7), EPT_LEVEL_4K);
    expect_leaf_level(&x, GiB(2) + MiB(9), EPT_LEVEL_2M);
    move(&x, 0, HOME);
    assert_int_equal(e->nr_tables, tables);
    assert_int_equal(e->nr_spare, 2); /* the two pages, reused by the next split */
    expect_leaf_level(&x, GiB(2) + MiB(7), EPT_LEVEL_1G);
    move(&x, 0, GiB(2) + MiB(100));
    assert_int_equal(e->nr_spare, 0);
    /* over a hole above RAM: three fresh tables, pruned when it leaves */
    move(&x, 0, GiB(700));
    assert_int_equal(e->nr_tables, tables + 3);
    move(&x, 0, HOME);
    assert_int_equal(e->nr_tables, tables);
    assert_int_equal(xlate(e, GiB(700)).rc, EPT_ENOENT);
    fakemem_free(&x.f.fm);
}

/* two vCPUs' windows on one page: the first to leave keeps the page for the other, the last
 * restores it; done over and over on new pages, nothing is left behind */
static void test_two_windows_one_page(void **state)
{
    static struct wfx x;
    struct ept *e = &x.f.e;
    struct tree_dump t0 = {0}, t1 = {0};
    struct xl t;
    (void)state;

    w_setup(&x, true, true);
    tree_dump(e, &t0);
    unsigned long held = ept_pages_held(e);
    for (unsigned k = 0; k < 1000; k++) {
        uint64_t g = GiB(1) + (uint64_t)(k * 7919 % 500000) * KiB(4);

        move(&x, 0, g);
        move(&x, 1, g);
        move(&x, k & 1, HOME); /* either one leaves first */
        t = xlate(e, g);
        assert_int_equal(t.hpa, HOME); /* the other still sees its APIC */
        move(&x, !(k & 1), GiB(5) + KiB(4) * k);
        t = xlate(e, g);
        assert_int_equal(t.hpa, g);
        assert_int_equal(t.level, EPT_LEVEL_1G);
        move(&x, !(k & 1), HOME);
        assert_true(ept_pages_held(e) <= held + 2ul * (e->levels - 1) * NWIN);
    }
    tree_dump(e, &t1);
    assert_true(tree_equal(&t0, &t1));
    tree_dump_free(&t0);
    tree_dump_free(&t1);
    fakemem_free(&x.f.fm);
}

/* an on-demand map next to a window above RAM leaves the window alone (its block shrinks) */
static void test_ondemand_next_to_window(void **state)
{
    static struct wfx x;
    struct ept *e = &x.f.e;
    struct xl t;
    (void)state;

    w_setup(&x, true, true);
    move(&x, 0, GiB(5) + KiB(12));
    touch(&x, GiB(5) + MiB(1)); /* same 2 MiB and 1 GiB block */
    touch(&x, GiB(5) + MiB(300));
    t = xlate(e, GiB(5) + KiB(12));
    assert_int_equal(t.hpa, HOME);
    assert_int_equal(t.perms, EPT_R | EPT_W);
    t = xlate(e, GiB(5) + MiB(1));
    assert_int_equal(t.hpa, GiB(5) + MiB(1));
    assert_int_equal(t.level, EPT_LEVEL_4K);
    expect_leaf_level(&x, GiB(5) + MiB(300), EPT_LEVEL_2M);
    move(&x, 0, HOME);
    assert_int_equal(xlate(e, GiB(5) + KiB(12)).rc, EPT_ENOENT);
    fakemem_free(&x.f.fm);
}

/* finding M1: on-demand maps the guest touches next to a window over a hole above RAM go into
 * the window's own tables (the pin shrinks their blocks to 4 KiB / 2 MiB, linking no table
 * ept_od counts); the window moving on must not leave those tables behind.  Failed before the
 * fix: +2 pages per move, od.tables 0, no drop ever */
static void test_ondemand_in_window_tables(void **state)
{
    static struct wfx x;
    struct ept *e = &x.f.e;
    unsigned long bound;
    (void)state;

    w_setup(&x, true, true);
    bound = 2ul * 2 * (e->levels - 1) + EPT_OD_MAX_TABLES; /* README: bench-ept-window */
    for (unsigned k = 0; k < 200; k++) {
        uint64_t g = GiB(8) + GiB(1) * k + MiB(4); /* a fresh 1 GiB each time */

        move(&x, 0, g);
        touch(&x, g + KiB(4)); /* a 4 KiB map in the window's page table */
        if (k & 1)
            touch(&x, g + MiB(2)); /* a 2 MiB map in the window's directory */
        assert_int_equal(xlate(e, g + KiB(4)).level, EPT_LEVEL_4K);
        assert_int_equal(xlate(e, g).hpa, HOME);
        move(&x, 0, HOME);
        assert_int_equal(xlate(e, g).rc, EPT_ENOENT);
        assert_true(ept_pages_held(e) - x.baseline <= bound);
    }
    printf("BENCH ept window, 200 moves with on-demand maps in the window's tables: EPT pool "
           "pages +%lu after the identity map (peak), bound %lu\n",
           x.peak - x.baseline, bound);
    assert_true(x.peak - x.baseline <= bound);
    fakemem_free(&x.f.fm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_merged_back),
        cmocka_unit_test(test_ondemand_next_to_window),
        cmocka_unit_test(test_ondemand_in_window_tables),
        cmocka_unit_test(test_two_windows_one_page),
        cmocka_unit_test(test_moves_1g),
        cmocka_unit_test(test_moves_2m),
        cmocka_unit_test(test_moves_4k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
