/* SPDX-License-Identifier: MIT */
/*
 * The bare-metal differential: one guest program — RTIT MSR writes and reads, ToPA
 * set-ups and edits, traced bursts, TraceEn toggles, VM exits of every kind, remapped guest
 * pages, PMIs, IA32_XSS / XRSTORS of PT state — runs
 *   (a) on "bare metal": the PT output model + the SDM's RTIT MSR rules (ptm_cpu) with the
 *       guest's CPUID view, on a flat copy of guest RAM (GPA == PA), and
 *   (b) through the VMM: the real controller + engine (vmm/pt/) on the CPU twin (twin.h),
 *       guest RAM behind a scrambled fake EPT.
 * After every step what the guest can see must be identical: every RDMSR verdict and value,
 * every WRMSR verdict, PMIs, and (at the end of each trace episode) every byte of guest RAM;
 * host memory outside guest RAM never changes, the twin never fails an entry and the VMM never
 * runs with TraceEn = 1.
 * Set-ups that break a documented VMM rule (output outside guest RAM: an operational error at
 * TraceEn 0->1 where bare metal would write to absent memory or fail later) are run "unchecked":
 * only the isolation checks apply, and both machines are re-synchronised afterwards.
 */
#ifndef PTV_TESTS_DIFF_H
#define PTV_TESTS_DIFF_H

#include <stdbool.h>
#include <stdint.h>

enum diff_mode {
    DIFF_SHADOW,    /* Skylake: shadow ToPA, MSR-load lists (no load/clear controls) */
    DIFF_SHADOW_LC, /* shadow ToPA with the load/clear RTIT_CTL controls */
    DIFF_HW_GPA,    /* Ice Lake-SP+: PT uses guest physical addresses, load/clear */
    DIFF_SHADOW_1E, /* shadow on a single-output-entry ToPA host (first generation) */
};

struct diff;

struct diff *diff_new(enum diff_mode mode, uint64_t seed);
void diff_free(struct diff *x);
/* One guest operation from (op, a, b).  false: the machines differ (diff_why says how). */
bool diff_step(struct diff *x, uint8_t op, uint64_t a, uint64_t b);
/* n random operations from the seed's generator; false at the first difference. */
bool diff_run(struct diff *x, uint64_t n);
/* Final full comparison (guest RAM, canaries, counters). */
bool diff_finish(struct diff *x);
const char *diff_why(const struct diff *x);
/* Figures: operations run, VM exits taken, exits while tracing, trace bytes, episodes. */
void diff_counts(const struct diff *x, uint64_t *ops, uint64_t *exits, uint64_t *traced_exits,
                 uint64_t *bytes, uint64_t *episodes);
/*
 * A scripted guest (tests/model/test_pt_cont.c): a ToPA of n entries written at the first table
 * slot, then STATUS = 0, OUTPUT_BASE = that table, MASK_PTRS = 0x7f, checked on both machines;
 * a guest RDMSR through the VMM (an exit), with compare also on bare metal (false: they
 * differ); guest stores; guest RAM as the guest reads it through the VMM.
 */
bool diff_setup_topa(struct diff *x, const uint64_t *entries, unsigned n);
uint64_t diff_table_gpa(void);
uint64_t diff_data_gpa(void);
bool diff_rdmsr(struct diff *x, uint32_t msr, uint64_t *val, bool compare);
bool diff_wrmsr(struct diff *x, uint32_t msr, uint64_t val);
void diff_guest_store(struct diff *x, uint64_t gpa, uint64_t val);
void diff_guest_read(struct diff *x, uint64_t gpa, void *buf, uint64_t n);
/* Test hooks: the controller under test and the twin (for defect tests). */
struct pt_ctrl *diff_ctrl(struct diff *x);
struct twin *diff_twin(struct diff *x);

#endif
