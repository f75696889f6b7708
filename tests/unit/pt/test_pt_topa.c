/* SPDX-License-Identifier: MIT */
/* Guest ToPA walker / validator (vmm/pt/pt_topa.c) over the fake EPT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "pt/pt_topa.h"
#include "pt/rtit.h"

#define T0    0x10000ull
#define T1    0x11000ull
#define T2    0x12000ull
#define MAXPA 39

static struct fake_world *fw;
static struct pt_topa_walk w;
static struct pt_topa_region regions[2048];
static struct pt_topa_err err;

static int setup(void **state)
{
    fw = fw_new(1);
    memset(&w, 0, sizeof(w));
    w.regions = regions;
    w.max_regions = 2048;
    return 0;
}

/* the same tests with the entries read by host address (pt_mem_ops.read_hpa64) */
static int setup_hpa(void **state)
{
    setup(state);
    fw_offer_read_hpa64(fw, true);
    return 0;
}

static int teardown(void **state)
{
    fw_free(fw);
    return 0;
}

static void set(uint64_t gpa, uint64_t v)
{
    assert_true(fw_guest_store64(fw, gpa, v));
}

static uint64_t ent(uint64_t base, unsigned code, uint64_t flags)
{
    return base | ((uint64_t)code << TOPA_SIZE_SHIFT) | flags;
}

static enum pt_topa_status walk_full(uint64_t ctl, uint64_t status, uint64_t base, uint64_t mask,
                                     bool multi)
{
    struct pt_out_cfg cfg = {.ctl = ctl,
                             .status = status,
                             .output_base = base,
                             .output_mask_ptrs = mask,
                             .topa_multi = multi,
                             .maxphyaddr = MAXPA};
    enum pt_topa_status st = pt_out_walk(&cfg, &fw->mem, &w, &err);
    assert_true(w.entries_read <= PT_TOPA_MAX_ENTRIES_READ);
    return st;
}

static enum pt_topa_status walk(uint64_t base, uint64_t mask)
{
    return walk_full(RTIT_CTL_TOPA, 0, base, mask, true);
}

static void expect_err(enum pt_topa_status st, const char *reason, uint64_t gpa, int32_t entry)
{
    assert_int_equal(st, PT_TOPA_OPERR);
    assert_string_equal(err.reason, reason);
    assert_int_equal(err.gpa, gpa);
    assert_int_equal(err.entry, entry);
}

static void three_tables(void)
{
    set(T0 + 0, ent(0x100000, 0, 0));
    set(T0 + 8, ent(0x200000, 4, 0));
    set(T0 + 16, T1 | TOPA_END);
    set(T1 + 0, ent(0x400000, 6, TOPA_INT));
    set(T1 + 8, T2 | TOPA_END);
    set(T2 + 0, ent(0x800000, 8, TOPA_INT | TOPA_STOP));
    set(T2 + 8, T0 | TOPA_END);
}

static void test_valid_circular(void **state)
{
    three_tables();
    assert_int_equal(walk(T0, 0), PT_TOPA_OK);
    assert_int_equal(w.ntables, 3);
    assert_int_equal(w.nregions, 4);
    assert_int_equal(w.nruns, 3);
    assert_int_equal(w.runs[0].end, PT_RUN_END_LINK);
    assert_int_equal(w.runs[1].end, PT_RUN_END_LINK);
    assert_int_equal(w.runs[2].end, PT_RUN_END_STOP); /* T2 ends with STOP */
    assert_int_equal(w.regions[3].flags, TOPA_INT | TOPA_STOP);
    assert_int_equal(w.regions[1].log2size, 16);
}

static void test_end_to_itself_and_merge(void **state)
{
    set(T0 + 0, ent(0x100000, 0, 0));
    set(T0 + 8, ent(0x101000, 0, 0));
    set(T0 + 16, ent(0x102000, 0, 0));
    set(T0 + 24, T0 | TOPA_END); /* END to its own table: legal ring */
    assert_int_equal(walk(T0, 0), PT_TOPA_OK);
    assert_int_equal(w.nruns, 1);
    assert_int_equal(w.runs[0].next_run, 0);
    assert_int_equal(walk(T0, (2ull << 7) | (5ull << 32)), PT_TOPA_OK);
    assert_int_equal(w.nruns, 2);
    assert_int_equal(w.runs[1].first_entry, 0);
    assert_int_equal(w.runs[1].nregions, 2);
    assert_int_equal(w.runs[1].end, PT_RUN_END_MERGE);
    assert_int_equal(w.start_offset, 5);
}

static void test_current_entry_is_end(void **state)
{
    three_tables();
    assert_int_equal(walk(T0, 2ull << 7), PT_TOPA_OK);
    assert_int_equal(w.tables[w.runs[0].table].gpa, T1);
    expect_err(walk(T0, (2ull << 7) | (8ull << 32)), "OutputOffset not 0 at an END entry", T0, 2);
}

static void test_entries_after_stop_not_read(void **state)
{
    set(T0 + 0, ent(0x100000, 0, TOPA_STOP));
    set(T0 + 8, 0xffffffffffffffffull); /* never reached by hardware */
    assert_int_equal(walk(T0, 0), PT_TOPA_OK);
    assert_int_equal(w.nregions, 1);
}

static void test_register_errors(void **state)
{
    three_tables();
    expect_err(walk(T0 | 0x80, 0), "OUTPUT_BASE bits 11:7 not 0 in ToPA mode", T0 | 0x80, -1);
    expect_err(walk(T0 | 0x1, 0), "OUTPUT_BASE bits 6:0 reserved", T0 | 1, -1);
    expect_err(walk(1ull << MAXPA, 0), "OUTPUT_BASE beyond MAXPHYADDR", 1ull << MAXPA, -1);
    expect_err(walk(T0, 4096ull << 32), "OutputOffset >= output region size", T0, 0);
    /* Stopped = 1 with offset == size is how hardware leaves a STOP region */
    assert_int_equal(walk_full(RTIT_CTL_TOPA, RTIT_STATUS_STOPPED, T0, 4096ull << 32, true),
                     PT_TOPA_OK);
    expect_err(walk_full(RTIT_CTL_TOPA | RTIT_CTL_FABRIC_EN, 0, T0, 0, true),
               "trace transport output (FabricEn) not virtualized", 0, -1);
}

static void test_entry_errors(void **state)
{
    three_tables();
    set(T1 + 0, ent(0x400000, 6, PTV_BIT(3)));
    expect_err(walk(T0, 0), "ToPA entry reserved bits set", T1, 0);
    set(T1 + 0, ent(0x400000, 6, PTV_BIT(MAXPA)));
    expect_err(walk(T0, 0), "ToPA entry reserved bits set", T1, 0);
    set(T1 + 0, ent(0x401000, 6, 0));
    expect_err(walk(T0, 0), "ToPA output region not aligned to its size", T1, 0);
    set(T1 + 0, ent(0x400000, 6, 0));
    set(T1 + 8, T2 | TOPA_END | TOPA_INT);
    expect_err(walk(T0, 0), "ToPA END entry with INT or STOP", T1, 1);
    set(T1 + 8, T2 | TOPA_END | TOPA_STOP);
    expect_err(walk(T0, 0), "ToPA END entry with INT or STOP", T1, 1);
    set(T1 + 8, T2 | TOPA_END);
    set(T2 + 0, T0 | TOPA_END);
    expect_err(walk(T0, 0), "ToPA END in entry 0", T2, 0);
}

static void test_memory_kinds(void **state)
{
    three_tables();
    expect_err(walk(FW_GPA_VMM, 0), "ToPA table in VMM memory", FW_GPA_VMM, -1);
    expect_err(walk(FW_GPA_MMIO, 0), "ToPA table in MMIO", FW_GPA_MMIO, -1);
    expect_err(walk(FW_GPA_UNMAPPED, 0), "ToPA table not in guest RAM", FW_GPA_UNMAPPED, -1);
    set(T1 + 8, FW_GPA_MMIO | TOPA_END);
    expect_err(walk(T0, 0), "ToPA table in MMIO", FW_GPA_MMIO, -1);
    set(T1 + 8, T2 | TOPA_END);
    fw->protected_by_vmm[T2 >> 12] = true;
    expect_err(walk(T0, 0), "ToPA table in a VMM-protected page", T2, -1);
    fw->protected_by_vmm[T2 >> 12] = false;
    set(T0 + 0, ent(FW_GPA_VMM, 0, 0));
    expect_err(walk(T0, 0), "output region in VMM memory", T0, 0);
    set(T0 + 0, ent(FW_GPA_MMIO + 0x10000, 4, 0));
    expect_err(walk(T0, 0), "output region in MMIO", T0, 0);
    set(T0 + 0, ent(0x40000000, 0, 0));
    expect_err(walk(T0, 0), "output region not in guest RAM", T0, 0);
    set(T0 + 0, ent(FW_GRAM_SIZE - (1ull << 20), 8, 0)); /* last MiB of RAM */
    assert_int_equal(walk(T0, 0), PT_TOPA_OK);
    set(T0 + 0, ent(0, 13, 0)); /* 32 MiB from 0: runs from RAM into the VMM hole */
    expect_err(walk(T0, 0), "output region in VMM memory", T0, 0);
    set(T0 + 0, ent(0x100000, 0, 0));
    fw->protected_by_vmm[0x100000 >> 12] = true;
    expect_err(walk(T0, 0), "output region in a VMM-protected page", T0, 0);
    fw->protected_by_vmm[0x100000 >> 12] = false;
    set(T0 + 0, ent(0x0, 7, 0)); /* 512 KiB at 0 covers the tables */
    expect_err(walk(T0, 0), "output region overlaps a ToPA table (VMM rule)", T0, 0);
}

static void test_single_entry_layout(void **state)
{
    set(T0 + 0, ent(0x100000, 0, 0));
    set(T0 + 8, T0 | TOPA_END);
    assert_int_equal(walk_full(RTIT_CTL_TOPA, 0, T0, 0, false), PT_TOPA_OK);
    /* re-enabling with the read-back pointer resting on entry 1 (the END)
     * goes on at entry 0, as hardware does */
    assert_int_equal(walk_full(RTIT_CTL_TOPA, 0, T0, 1ull << 7, false), PT_TOPA_OK);
    assert_int_equal(w.runs[0].table, 0);
    assert_int_equal(w.runs[0].first_entry, 0);
    expect_err(walk_full(RTIT_CTL_TOPA, 0, T0, 2ull << 7, false),
               "single-entry ToPA: table offset must be 0 or 1", T0, 2);
    /* an END naming another table is an operational error (SDM ToPA errors) */
    set(T1 + 0, ent(0x101000, 0, 0));
    set(T1 + 8, T1 | TOPA_END);
    set(T0 + 8, T1 | TOPA_END);
    expect_err(walk_full(RTIT_CTL_TOPA, 0, T0, 0, false),
               "single-entry ToPA: END base does not match the table base", T0, 1);
    set(T0 + 8, T0 | TOPA_END);
    set(T0 + 8, ent(0x101000, 0, 0));
    expect_err(walk_full(RTIT_CTL_TOPA, 0, T0, 0, false), "single-entry ToPA: entry 1 must be END",
               T0, 1);
    set(T0 + 0, T1 | TOPA_END);
    expect_err(walk_full(RTIT_CTL_TOPA, 0, T0, 0, false), "ToPA END in entry 0", T0, 0);
}

static void test_bounds(void **state)
{
    /* a table without END inside its 4 KiB page */
    for (unsigned i = 0; i < 512; i++)
        set(T0 + 8 * i, ent(0x100000 + 4096ull * i, 0, 0));
    expect_err(walk(T0, 0), "no END inside the 4 KiB ToPA table (VMM bound)", T0, 512);
    /* more tables than the bound: a chain of 65 one-region tables */
    for (unsigned t = 0; t <= PT_TOPA_MAX_TABLES; t++) {
        uint64_t tg = 0x20000 + 4096ull * t;
        set(tg, ent(0x400000, 0, 0));
        set(tg + 8, (tg + 4096) | TOPA_END);
    }
    assert_int_not_equal(walk(0x20000, 0), PT_TOPA_OK);
    assert_string_equal(err.reason, "too many ToPA tables (VMM bound)");
    /* more regions than the caller's array */
    w.max_regions = 2;
    three_tables();
    expect_err(walk(T0, 0), "too many ToPA output regions (VMM bound)", T1, 0);
}

static void test_cycle_bounded(void **state)
{
    /* T0 -> T1 -> T2 -> T1 (T0 not revisited) */
    set(T0 + 0, ent(0x100000, 0, 0));
    set(T0 + 8, T1 | TOPA_END);
    set(T1 + 0, ent(0x101000, 0, 0));
    set(T1 + 8, T2 | TOPA_END);
    set(T2 + 0, ent(0x102000, 0, 0));
    set(T2 + 8, T1 | TOPA_END);
    assert_int_equal(walk(T0, 0), PT_TOPA_OK);
    assert_int_equal(w.nruns, 3);
    assert_int_equal(w.runs[2].next_run, 1);
    assert_true(w.entries_read <= 7);
}

static void test_single_range(void **state)
{
    assert_int_equal(walk_full(0, 0, 0x100000, 0xffff | (7ull << 32), true), PT_TOPA_OK);
    assert_true(w.single_range);
    assert_int_equal(w.regions[0].log2size, 16);
    assert_int_equal(w.start_offset, 7);
    expect_err(walk_full(0, 0, 0x100000, 0xf0ff, true), "single-range mask not contiguous",
               0x100000, -1);
    expect_err(walk_full(0, 0, 0x100800, 0xfff, true), "single-range base overlaps the mask",
               0x100800, -1);
    expect_err(walk_full(0, 0, 0x100000, 0xfff | (4096ull << 32), true),
               "single-range offset > mask", 0x100000, -1);
    expect_err(walk_full(0, 0, FW_GPA_MMIO, 0xfff, true), "output region in MMIO", FW_GPA_MMIO, -1);
    expect_err(walk_full(0, 0, 0, 0x1ffffff, true), "output region in VMM memory", 0, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid_circular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_end_to_itself_and_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_current_entry_is_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entries_after_stop_not_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_entry_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cycle_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_valid_circular, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_end_to_itself_and_merge, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_current_entry_is_end, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_entries_after_stop_not_read, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_register_errors, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_entry_errors, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_memory_kinds, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_single_entry_layout, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_cycle_bounded, setup_hpa, teardown),
        cmocka_unit_test_setup_teardown(test_single_range, setup_hpa, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
