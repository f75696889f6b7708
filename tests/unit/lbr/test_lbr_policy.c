/* SPDX-License-Identifier: MIT */
/* The guest LBR policy (vmm/lbr/lbr_policy.c) against hand-written expectations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "lbr/lbr_policy.h"

#define BIT(n) (1ull << (n))

/* a Skylake-SP as it reports itself, with "save/load debug controls" chosen */
static struct lbr_host skx(void)
{
    return (struct lbr_host){
        .max_leaf = 0x16,
        .family = 6,
        .model = 0x55,
        .cpuid1_ecx = CPUID_1_ECX_DS_CPL | CPUID_1_ECX_PDCM,
        .cpuid1_edx = CPUID_1_EDX_DS,
        .cpuid7_ebx = CPUID_7_EBX_RTM,
        .pmu_version = 4,
        .perf_caps_ok = true,
        .perf_caps = 0x33c5,
        .misc_enable_ok = true,
        .exit_ctls = LBR_VMX_EXIT_SAVE_DEBUG,
        .entry_ctls = LBR_VMX_ENTRY_LOAD_DEBUG,
        .exit_allowed1 = LBR_VMX_EXIT_SAVE_DEBUG,
        .entry_allowed1 = LBR_VMX_ENTRY_LOAD_DEBUG,
    };
}

/* an arch-LBR-only part (LBR_FMT 0x3f) with the VMX load/clear controls */
static struct lbr_host arch_host(void)
{
    struct lbr_host h = skx();
    h.max_leaf = 0x20;
    h.model = 0x8f;
    h.perf_caps = 0x403f;
    h.cpuid7_edx = CPUID_7_EDX_ARCH_LBR;
    h.leaf1c[0] = 0x4000000f, h.leaf1c[1] = 7, h.leaf1c[2] = 7;
    h.xss_supported = BIT(8) | XFEATURE_ARCH_LBR;
    h.exit_allowed1 |= VM_EXIT_CLEAR_IA32_LBR_CTL;
    h.entry_allowed1 |= VM_ENTRY_LOAD_IA32_LBR_CTL;
    return h;
}

static void test_layout_table(void **state)
{
    const struct lbr_layout *l = lbr_layout_of(6, 0x55);
    assert_non_null(l);
    assert_int_equal(l->nr, 32);
    assert_int_equal(l->from, 0x680);
    assert_int_equal(l->to, 0x6c0);
    assert_int_equal(l->info, 0xdc0);
    assert_int_equal(l->fmt, 5);
    assert_true(l->call_stack);
    for (unsigned m = 0; m < 256; m++) { /* every model listed has a sane layout */
        const struct lbr_layout *x = lbr_layout_of(6, m);
        if (!x)
            continue;
        assert_true(x->nr == 16 || x->nr == 32);
        assert_true(x->info == 0 || x->fmt == LBR_FORMAT_INFO); /* LBR_INFO = format 5 */
    }
    l = lbr_layout_of(6, 0x3c); /* Haswell */
    assert_int_equal(l->nr, 16);
    assert_int_equal(l->fmt, 4);
    assert_int_equal(l->info, 0);
    l = lbr_layout_of(6, 0x3a); /* Ivy Bridge: no call-stack mode */
    assert_int_equal(l->fmt, 3);
    assert_false(l->call_stack);
    assert_null(lbr_layout_of(6, 0x97));  /* not known: hidden */
    assert_null(lbr_layout_of(6, 0x5c));  /* Goldmont (Atom): not listed */
    assert_null(lbr_layout_of(15, 0x55)); /* not family 6 */
}

static void test_debugctl_bits(void **state)
{
    struct lbr_host h = {0};
    assert_int_equal(lbr_debugctl_valid(&h), DEBUGCTLMSR_LBR | DEBUGCTLMSR_BTF | DEBUGCTLMSR_TR);
    h = skx();
    h.cpuid7_ecx = CPUID_7_ECX_BUS_LOCK_DETECT;
    assert_int_equal(lbr_debugctl_valid(&h), 0xdfc7); /* all but 5:3, 13, 63:16 */
    h.pmu_version = 1;                                /* freeze bits need PMU v2+ */
    assert_false(lbr_debugctl_valid(&h) & DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
    h = skx();
    h.cpuid1_ecx &= ~CPUID_1_ECX_PDCM; /* ... and PDCM */
    assert_false(lbr_debugctl_valid(&h) & DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI);
    h = skx();
    h.misc_enable = MISC_ENABLE_BTS_UNAVAIL;
    assert_false(lbr_debugctl_valid(&h) & (DEBUGCTLMSR_BTS | DEBUGCTLMSR_BTINT));
    assert_true(lbr_debugctl_valid(&h) & DEBUGCTLMSR_BTS_OFF_OS); /* DS-CPL still there */
    h = skx();
    h.perf_caps &= ~PERF_CAP_FREEZE_WHILE_SMM;
    assert_false(lbr_debugctl_valid(&h) & DEBUGCTLMSR_FREEZE_IN_SMM);
    h.cpuid7_ebx = 0;
    assert_false(lbr_debugctl_valid(&h) & DEBUGCTLMSR_RTM_DEBUG);
}

static void test_select_tos(void **state)
{
    const struct lbr_layout *skl = lbr_layout_of(6, 0x4e), *ivb = lbr_layout_of(6, 0x3a);
    assert_true(lbr_select_ok(skl, 0x3ff));
    assert_false(lbr_select_ok(skl, 0x400));
    assert_true(lbr_select_ok(ivb, 0x1ff));
    assert_false(lbr_select_ok(ivb, LBR_SEL_EN_CALL_STACK));
    assert_true(lbr_tos_ok(skl, 31));
    assert_false(lbr_tos_ok(skl, 32));
    assert_true(lbr_tos_ok(ivb, 15));
    assert_false(lbr_tos_ok(ivb, 16));
}

static void test_arch_rules(void **state)
{
    uint32_t all[3] = {0x0f, 7, 7}, none[3] = {0x80, 0, 0};
    assert_true(arch_lbr_ctl_ok(all, ARCH_LBR_CTL_MASK));
    assert_false(arch_lbr_ctl_ok(all, BIT(4)));  /* reserved */
    assert_false(arch_lbr_ctl_ok(all, BIT(23))); /* reserved */
    assert_true(arch_lbr_ctl_ok(none, ARCH_LBR_CTL_LBREN));
    assert_false(arch_lbr_ctl_ok(none, ARCH_LBR_CTL_OS));         /* no CPL filtering */
    assert_false(arch_lbr_ctl_ok(none, ARCH_LBR_CTL_JCC));        /* no branch filtering */
    assert_false(arch_lbr_ctl_ok(none, ARCH_LBR_CTL_CALL_STACK)); /* no call-stack mode */
    static const uint64_t ok[] = {8, 16, 24, 32}, bad[] = {0, 7, 9, 40, 64, 72, 1ull << 40};
    for (unsigned i = 0; i < 4; i++)
        assert_true(arch_lbr_depth_ok(all, ok[i]));
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(arch_lbr_depth_ok(all, bad[i]));
    assert_true(arch_lbr_depth_ok(none, 64));
    assert_false(arch_lbr_depth_ok(none, 32));
}

static void test_skylake_shown(void **state)
{
    struct lbr_host h = skx();
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_true(d.legacy);
    assert_false(d.arch);
    assert_false(d.debugctl_virtual);
    assert_int_equal(d.perf_caps, 0x33c5); /* LBR_FMT 5 shown, the rest as the CPU's */
    assert_int_equal(d.exit_ctls | d.entry_ctls, 0);
    /* only PERF_CAPABILITIES exits: the stack, DEBUGCTL, SELECT, TOS pass through */
    for (uint32_t m = 0; m < 0x2000; m++)
        assert_int_equal(lbr_msr_intercepted(&d, m), m == MSR_IA32_PERF_CAPABILITIES);
    uint64_t v = 0, dbg = 0;
    const char *why;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_PERF_CAPABILITIES, false, &v, &why), LBR_OK);
    assert_int_equal(v, 0x33c5);
    v = 0;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_PERF_CAPABILITIES, true, &v, &why), LBR_GP);
    assert_non_null(why);
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_LBR_NHM_FROM, false, &v, &why), LBR_NOT_MINE);
    assert_non_null(strstr(d.reason, "shown"));
    assert_non_null(strstr(d.reason, "32 entries"));
}

static void test_format_mismatch_hides(void **state)
{
    struct lbr_host h = skx();
    h.perf_caps = (h.perf_caps & ~PERF_CAP_LBR_FMT) | 0; /* nested KVM without guest LBR */
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_false(d.legacy);
    assert_non_null(strstr(d.reason, "LBR_FMT 0"));
    /* the Skylake stack is intercepted and #GPs, one past it is not touched */
    static const uint32_t in[] = {0x1c8, 0x1c9, 0x680, 0x69f, 0x6c0, 0x6df, 0xdc0, 0xddf};
    static const uint32_t out[] = {0x67f, 0x6a0, 0x6bf, 0x6e0, 0xdbf, 0xde0, 0x1d9, 0x1dd};
    uint64_t v = 0, dbg = 0;
    const char *why;
    for (unsigned i = 0; i < 8; i++) {
        assert_true(lbr_msr_intercepted(&d, in[i]));
        assert_int_equal(lbr_msr_access(&d, &dbg, in[i], i & 1, &v, &why), LBR_GP);
        assert_false(lbr_msr_intercepted(&d, out[i]));
    }
    h = skx();
    h.perf_caps = 0x33c4; /* a format the table does not read this layout with */
    lbr_decide(&h, &d);
    assert_false(d.legacy);
    assert_int_equal(d.perf_caps & PERF_CAP_LBR_FMT, 0); /* not shown */
    assert_non_null(strstr(d.reason, "LBR_FMT 4"));
}

static void test_no_perf_caps(void **state)
{
    struct lbr_host h = skx(); /* Bochs: PDCM = 1 but the MSR #GPs */
    h.perf_caps_ok = false;
    h.perf_caps = 0;
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_false(d.legacy);
    uint64_t v = 0, dbg = 0;
    const char *why;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_PERF_CAPABILITIES, false, &v, &why), LBR_GP);
    assert_non_null(strstr(d.reason, "IA32_PERF_CAPABILITIES unreadable"));
    assert_false(lbr_debugctl_valid(&h) & DEBUGCTLMSR_FREEZE_IN_SMM);
}

static void test_unknown_model(void **state)
{
    struct lbr_host h = skx();
    h.model = 0x97;
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_false(d.legacy);
    assert_null(d.lay);
    assert_int_equal(d.perf_caps, 0x33c0);        /* format not shown */
    assert_false(lbr_msr_intercepted(&d, 0x680)); /* addresses unknown: not intercepted */
    assert_non_null(strstr(d.reason, "06_97H"));
}

static void test_debugctl_virtual(void **state)
{
    struct lbr_host h = skx();
    h.exit_ctls = 0; /* no "save debug controls" */
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_true(d.debugctl_virtual);
    assert_false(d.legacy);
    assert_true(lbr_msr_intercepted(&d, MSR_IA32_DEBUGCTLMSR));
    uint64_t dbg = 0x1, v = BIT(13) | DEBUGCTLMSR_BTF;
    const char *why;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_DEBUGCTLMSR, true, &v, &why), LBR_GP);
    assert_int_equal(dbg, 0x1); /* a refused write changes nothing */
    v = DEBUGCTLMSR_BTF | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_DEBUGCTLMSR, true, &v, &why), LBR_OK);
    assert_int_equal(dbg, v);
    v = 0;
    assert_int_equal(lbr_msr_access(&d, &dbg, MSR_IA32_DEBUGCTLMSR, false, &v, &why), LBR_OK);
    assert_int_equal(v, DEBUGCTLMSR_BTF | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
    assert_non_null(strstr(d.reason, "not in effect"));
}

static void test_arch_shown(void **state)
{
    struct lbr_host h = arch_host();
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_true(d.arch);
    assert_false(d.legacy);
    assert_int_equal(d.exit_ctls, VM_EXIT_CLEAR_IA32_LBR_CTL);
    assert_int_equal(d.entry_ctls, VM_ENTRY_LOAD_IA32_LBR_CTL);
    assert_int_equal(d.perf_caps & PERF_CAP_LBR_FMT, 0x3f);
    assert_false(lbr_msr_intercepted(&d, MSR_ARCH_LBR_CTL));
    assert_false(lbr_msr_intercepted(&d, MSR_ARCH_LBR_DEPTH));
    assert_int_equal(lbr_xss_filter(&d, h.xss_supported), h.xss_supported);
    uint32_t r[4] = {0, 0, 0, CPUID_7_EDX_ARCH_LBR};
    lbr_cpuid_filter(&d, 7, 0, r);
    assert_int_equal(r[3], CPUID_7_EDX_ARCH_LBR);
    uint32_t c[4] = {1, 2, 3, 4};
    lbr_cpuid_filter(&d, 0x1c, 0, c);
    assert_int_equal(c[0], 0x4000000f);
    assert_int_equal(c[1], 7);
    assert_int_equal(c[2], 7);
}

static void test_arch_hidden(void **state)
{
    struct lbr_host h = arch_host();
    h.entry_allowed1 &= ~VM_ENTRY_LOAD_IA32_LBR_CTL;
    struct lbr_decision d;
    lbr_decide(&h, &d);
    assert_true(d.arch_present);
    assert_false(d.arch);
    assert_int_equal(d.exit_ctls | d.entry_ctls, 0);
    assert_int_equal(d.perf_caps & PERF_CAP_LBR_FMT, 0);
    assert_non_null(strstr(d.reason, "load/clear IA32_LBR_CTL"));
    /* CPUID: no arch LBR, leaf 0x1C empty, XSS component 15 gone */
    uint32_t r[4] = {~0u, ~0u, ~0u, ~0u};
    lbr_cpuid_filter(&d, 7, 0, r);
    assert_int_equal(r[3], ~CPUID_7_EDX_ARCH_LBR);
    lbr_cpuid_filter(&d, 0x1c, 0, r);
    assert_int_equal(r[0] | r[1] | r[2] | r[3], 0);
    uint32_t x[4] = {~0u, ~0u, ~0u, ~0u};
    lbr_cpuid_filter(&d, 0xd, 1, x);
    assert_int_equal(x[2], ~(uint32_t)XFEATURE_ARCH_LBR);
    uint32_t y[4] = {0x328, 0, 1, 0};
    lbr_cpuid_filter(&d, 0xd, 15, y);
    assert_int_equal(y[0] | y[1] | y[2] | y[3], 0);
    uint32_t z[4] = {0x100, 0, 1, 0};
    lbr_cpuid_filter(&d, 0xd, 14, z); /* another component: untouched */
    assert_int_equal(z[0], 0x100);
    assert_int_equal(lbr_xss_filter(&d, BIT(8) | XFEATURE_ARCH_LBR), BIT(8));
    /* every arch LBR MSR #GPs, the first past each range is not the policy's */
    static const uint32_t in[] = {0x14ce, 0x14cf, 0x1500, 0x153f, 0x1600, 0x163f, 0x1200, 0x123f};
    static const uint32_t out[] = {0x14cd, 0x14d0, 0x14ff, 0x1540, 0x15ff, 0x1640, 0x11ff, 0x1240};
    uint64_t v = 0, dbg = 0;
    const char *why;
    for (unsigned i = 0; i < 8; i++) {
        assert_int_equal(lbr_msr_access(&d, &dbg, in[i], i & 1, &v, &why), LBR_GP);
        assert_false(lbr_msr_intercepted(&d, out[i]));
    }
}

/* PTV_SELFCHECK_DEBUGCTL: root records nothing -- DEBUGCTL 0, and IA32_LBR_CTL 0 where the
 * CPU has arch LBR (shown: the exit control clears it; hidden: cleared once at set-up) */
static void test_root_check(void **state)
{
    struct lbr_host ha = arch_host(), hh = arch_host(), hs = skx();
    hh.entry_allowed1 &= ~VM_ENTRY_LOAD_IA32_LBR_CTL;
    struct lbr_decision shown, hidden, legacy;
    lbr_decide(&ha, &shown);
    lbr_decide(&hh, &hidden);
    lbr_decide(&hs, &legacy);
    bool holds;
    struct lbr_root_view quiet = {true, true, 0, 0};
    for (int i = 0; i < 3; i++) {
        const struct lbr_decision *d = i == 0 ? &shown : i == 1 ? &hidden : &legacy;
        assert_true(lbr_root_check(d, &quiet, &holds));
        assert_true(holds);
        struct lbr_root_view dbg = {true, true, DEBUGCTLMSR_LBR, 0};
        assert_true(lbr_root_check(d, &dbg, &holds));
        assert_false(holds);
        dbg.debugctl = DEBUGCTLMSR_BTF; /* any bit: VM exit clears them all */
        assert_true(lbr_root_check(d, &dbg, &holds));
        assert_false(holds);
    }
    /* IA32_LBR_CTL.LBREn on in root: recording VMM branches, shown or hidden */
    struct lbr_root_view ctl = {true, true, 0, ARCH_LBR_CTL_LBREN | ARCH_LBR_CTL_OS};
    assert_true(lbr_root_check(&shown, &ctl, &holds));
    assert_false(holds);
    assert_true(lbr_root_check(&hidden, &ctl, &holds));
    assert_false(holds);
    ctl.lbr_ctl = ARCH_LBR_CTL_OS; /* any value but 0: the exit control clears all of it */
    assert_true(lbr_root_check(&shown, &ctl, &holds));
    assert_false(holds);
    /* DEBUGCTL unreadable (Bochs with ignore_bad_msrs=0): LBR_CTL alone still checked */
    struct lbr_root_view only_ctl = {false, true, 0, ARCH_LBR_CTL_LBREN};
    assert_true(lbr_root_check(&shown, &only_ctl, &holds));
    assert_false(holds);
    /* no arch LBR on this CPU: LBR_CTL is not part of it (the shim does not read it) */
    struct lbr_root_view no_arch = {false, false, 0, 0};
    assert_false(lbr_root_check(&legacy, &no_arch, &holds));
    assert_true(holds);
    no_arch.debugctl_ok = true;
    assert_true(lbr_root_check(&legacy, &no_arch, &holds));
    assert_true(holds);
}

static void test_leaf_beyond_max(void **state)
{
    struct lbr_host h = skx(); /* max_leaf 0x16: CPUID 0x1C returns leaf 0x16's data */
    struct lbr_decision d;
    lbr_decide(&h, &d);
    uint32_t r[4] = {5, 6, 7, 8};
    lbr_cpuid_filter(&d, 0x1c, 0, r);
    assert_int_equal(r[0], 5);
    assert_int_equal(r[3], 8);
    h.max_leaf = 0x1c;
    lbr_decide(&h, &d);
    lbr_cpuid_filter(&d, 0x1c, 0, r);
    assert_int_equal(r[0] | r[1] | r[2] | r[3], 0);
    h = arch_host(); /* arch LBR present but leaf 0x1C beyond max: hidden */
    h.max_leaf = 0x1b;
    lbr_decide(&h, &d);
    assert_false(d.arch);
    assert_non_null(strstr(d.reason, "0x1C beyond"));
}

static void test_reason_fits(void **state)
{
    struct lbr_host h = arch_host(); /* the longest reasons: both hidden, DEBUGCTL virtual */
    h.model = 0x55;
    h.perf_caps = 0x33c4;
    h.exit_allowed1 = h.entry_allowed1 = 0;
    struct lbr_decision d;
    lbr_decide(&h, &d);
    size_t n = strnlen(d.reason, sizeof(d.reason));
    assert_true(n < sizeof(d.reason));
    assert_non_null(strstr(d.reason, "DEBUGCTL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_table),     cmocka_unit_test(test_debugctl_bits),
        cmocka_unit_test(test_select_tos),       cmocka_unit_test(test_arch_rules),
        cmocka_unit_test(test_skylake_shown),    cmocka_unit_test(test_format_mismatch_hides),
        cmocka_unit_test(test_no_perf_caps),     cmocka_unit_test(test_unknown_model),
        cmocka_unit_test(test_debugctl_virtual), cmocka_unit_test(test_arch_shown),
        cmocka_unit_test(test_arch_hidden),      cmocka_unit_test(test_leaf_beyond_max),
        cmocka_unit_test(test_reason_fits),      cmocka_unit_test(test_root_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
