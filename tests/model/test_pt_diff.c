/* SPDX-License-Identifier: MIT */
/*
 * The PT wiring on the CPU twin against bare metal (diff.h): random guest programs in every
 * mode, plus one test per defect the wiring once had, each failing on the wiring as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "model/diff.h"
#include "model/twin.h"
#include "pt/pt_ctrl.h"
#include "pt/rtit.h"

#define OPS 1500
static uint64_t seeds = 8; /* DIFF_SEEDS overrides (oracle-bites.sh runs fewer) */

static void random_programs(enum diff_mode mode)
{
    uint64_t tot_ops = 0, tot_exits = 0, tot_traced = 0, tot_bytes = 0, tot_ep = 0;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        struct diff *x = diff_new(mode, seed);
        uint64_t o, e, t, b, ep;
        if (!diff_run(x, OPS) || !diff_finish(x))
            fail_msg("mode %d seed %lu: %s", mode, (unsigned long)seed, diff_why(x));
        diff_counts(x, &o, &e, &t, &b, &ep);
        tot_ops += o, tot_exits += e, tot_traced += t, tot_bytes += b, tot_ep += ep;
        diff_free(x);
    }
    printf("mode %d: %lu ops, %lu exits (%lu while tracing), %lu trace bytes, %lu episodes\n", mode,
           (unsigned long)tot_ops, (unsigned long)tot_exits, (unsigned long)tot_traced,
           (unsigned long)tot_bytes, (unsigned long)tot_ep);
    assert_true(tot_traced > 10 * seeds);
}

static void test_random_shadow(void **state)
{
    random_programs(DIFF_SHADOW);
}
static void test_random_shadow_lc(void **state)
{
    random_programs(DIFF_SHADOW_LC);
}
static void test_random_hw_gpa(void **state)
{
    random_programs(DIFF_HW_GPA);
}
static void test_random_shadow_single_entry(void **state)
{
    random_programs(DIFF_SHADOW_1E);
}

/* op codes of diff_step() */
enum {
    TRACE = 0,
    EXIT = 4,
    COMPARE_MSRS = 6,
    WRMSR = 7,
    BUILD = 9,
    TOGGLE = 10,
    REMAP = 13,
    COMPARE_ALL = 15
};

static struct diff *traced(enum diff_mode mode)
{
    struct diff *x = diff_new(mode, 77);
    assert_true(diff_step(x, BUILD, 0x102, 0));
    assert_true(diff_step(x, TOGGLE, 0, 0)); /* TraceEn 0->1 */
    return x;
}

/* Defect 1: the controller's shadow state comes from zeroed memory and still traces. */
static void test_shadow_traces_from_zeroed_state(void **state)
{
    struct diff *x = traced(DIFF_SHADOW);
    struct pt_ctrl *c = diff_ctrl(x);
    assert_true(c->hw_ok);
    assert_false(c->guest.status & RTIT_STATUS_ERROR);
    assert_true(diff_step(x, TRACE, 5000, 0));
    assert_true(diff_twin(x)->pt.bytes > 0);
    assert_true(diff_step(x, COMPARE_MSRS, 0, 0));
    if (!diff_finish(x))
        fail_msg("%s", diff_why(x));
    diff_free(x);
}

/* Defect 2: the output position survives every exit; MASK_PTRS never goes backwards. */
static void test_position_kept_across_exits(void **state)
{
    for (int mode = DIFF_SHADOW; mode <= DIFF_HW_GPA; mode++) {
        struct diff *x = traced(mode);
        struct pt_ctrl *c = diff_ctrl(x);
        uint64_t last = 0, v;
        struct pt_msr_result r;
        for (int i = 0; i < 1000; i++) {
            assert_true(diff_step(x, TRACE, 37 + i % 50, 0));
            assert_true(diff_step(x, EXIT, 0, 0));
            assert_int_equal(pt_ctrl_rdmsr(c, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &v, &r), PT_MSR_OK);
            /* within one region the offset only grows; a region switch moves the index */
            if (((v ^ last) & 0xffffff80ull) == 0)
                assert_true(v >= last);
            last = v;
        }
        if (!diff_finish(x))
            fail_msg("mode %d: %s", mode, diff_why(x));
        assert_true(c->stats.traced_exits >= 1000);
        diff_free(x);
    }
}

/* Defect 3: an MTCFreq CPUID does not list #GPs whatever MTCEn is; never a failed entry. */
static void test_mtc_freq_gp_without_mtcen(void **state)
{
    struct diff *x = diff_new(DIFF_SHADOW, 3);
    struct pt_ctrl *c = diff_ctrl(x);
    struct pt_msr_result r;
    uint64_t bad = RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | (1ull << RTIT_CTL_MTC_RANGE_SHIFT);
    assert_int_equal(pt_ctrl_wrmsr(c, MSR_IA32_RTIT_CTL, bad, &r), PT_MSR_GP);
    assert_int_equal(pt_ctrl_wrmsr(c, MSR_IA32_RTIT_CTL, bad | RTIT_CTL_TRACEEN, &r), PT_MSR_GP);
    assert_true(diff_step(x, EXIT, 0, 0));
    assert_int_equal(diff_twin(x)->entry_failures, 0);
    diff_free(x);
}

/* Defect 4: RTIT_STATUS.TriggerEn reads 1 while the guest traces, across exits. */
static void test_trigger_en_while_tracing(void **state)
{
    for (int mode = DIFF_SHADOW; mode <= DIFF_HW_GPA; mode++) {
        struct diff *x = traced(mode);
        struct pt_msr_result r;
        uint64_t v;
        assert_true(diff_step(x, TRACE, 100, 0));
        assert_true(diff_step(x, EXIT, 0, 0));
        assert_int_equal(pt_ctrl_rdmsr(diff_ctrl(x), MSR_IA32_RTIT_STATUS, &v, &r), PT_MSR_OK);
        assert_true(v & RTIT_STATUS_TRIGGEREN);
        assert_true(diff_step(x, COMPARE_MSRS, 0, 0));
        diff_free(x);
    }
}

/* Defect 7: the memory map changes under a running trace: the shadow follows it. */
static void test_remap_while_tracing(void **state)
{
    struct diff *x = traced(DIFF_SHADOW);
    struct pt_ctrl *c = diff_ctrl(x);
    for (unsigned i = 0; i < 200; i++) {
        assert_true(diff_step(x, TRACE, 3000, 0));
        /* swap a page of guest RAM (mostly output pages: [1M, 16M)) with another */
        assert_true(diff_step(x, REMAP, 256 + (i * 97) % 3840, 256 + (i * 31 + 7) % 3840));
    }
    assert_true(c->stats.rebuilds >= 200);
    if (!diff_finish(x))
        fail_msg("%s", diff_why(x));
    diff_free(x);
}

/* Defect 8: a WRMSR the CPU refuses while switching ends the guest's trace, nothing else. */
static void test_switch_wrmsr_fault(void **state)
{
    struct diff *x = diff_new(DIFF_SHADOW, 8);
    struct twin *t = diff_twin(x);
    struct pt_ctrl *c = diff_ctrl(x);
    struct pt_msr_result r;
    uint64_t v;
    assert_true(diff_step(x, BUILD, 0x102, 0));
    t->inject_fault_msr = MSR_IA32_RTIT_OUTPUT_BASE;
    assert_int_equal(pt_ctrl_wrmsr(c, MSR_IA32_RTIT_CTL,
                                   RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN, &r),
                     PT_MSR_OK);
    pt_ctrl_before_entry(c);
    twin_entry(t);
    assert_int_equal(t->entry_failures, 0);
    assert_false(t->pt.ctl & RTIT_CTL_TRACEEN);
    assert_int_equal(c->stats.wrmsr_faults, 1);
    assert_int_equal(pt_ctrl_rdmsr(c, MSR_IA32_RTIT_STATUS, &v, &r), PT_MSR_OK);
    assert_true(v & RTIT_STATUS_ERROR);
    assert_false(v & RTIT_STATUS_TRIGGEREN);
    twin_exit(t);
    pt_ctrl_after_exit(c);
    t->inject_fault_msr = 0;
    diff_free(x);
}

int main(void)
{
    if (getenv("DIFF_SEEDS"))
        seeds = strtoull(getenv("DIFF_SEEDS"), NULL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shadow_traces_from_zeroed_state),
        cmocka_unit_test(test_position_kept_across_exits),
        cmocka_unit_test(test_mtc_freq_gp_without_mtcen),
        cmocka_unit_test(test_trigger_en_while_tracing),
        cmocka_unit_test(test_remap_while_tracing),
        cmocka_unit_test(test_switch_wrmsr_fault),
        cmocka_unit_test(test_random_shadow),
        cmocka_unit_test(test_random_shadow_lc),
        cmocka_unit_test(test_random_hw_gpa),
        cmocka_unit_test(test_random_shadow_single_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
