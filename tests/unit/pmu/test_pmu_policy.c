/* SPDX-License-Identifier: MIT */
/* The guest PMU policy (vmm/pmu/pmu_policy.c) against hand-written expectations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "pmu/pmu_policy.h"

#define BIT(n) (1ull << (n))

/* CPUID.0AH as real parts report it (EAX, EBX, ECX, EDX) */
static const uint32_t skylake[4] = {0x07300404, 0, 0, 0x00000603};   /* v4, 4 x 48, 3 fixed x 48 */
static const uint32_t core2[4] = {0x07280202, 0, 0, 0x00000503};     /* v2, 2 x 40, 3 fixed x 40 */
static const uint32_t icelake[4] = {0x08300805, 0, 0xf, 0x00008604}; /* v5, 8, fixed 0-3 */

static struct pmu_decision decide(const uint32_t a[4], uint64_t perf_caps, bool xl, bool nl)
{
    struct pmu_caps c;
    pmu_caps_from_cpuid(0x20, a, true, perf_caps, &c);
    struct pmu_decision d;
    pmu_decide(&c, xl, nl, &d);
    return d;
}

static void test_caps(void **state)
{
    (void)state;
    struct pmu_caps c;
    pmu_caps_from_cpuid(0x16, skylake, true, PERF_CAP_FW_WRITE, &c);
    assert_int_equal(c.version, 4);
    assert_int_equal(c.n_gp, 4);
    assert_int_equal(c.gp_width, 48);
    assert_int_equal(c.fixed_mask, 0x7);
    assert_int_equal(c.fixed_width, 48);
    assert_true(c.full_width);
    assert_false(c.perf_metrics);
    /* v5: ECX adds fixed counters past EDX[4:0]; before v5 ECX means nothing */
    const uint32_t v5_sparse[4] = {0x08300805, 0, 0x9, 0x00000602};
    pmu_caps_from_cpuid(0x20, v5_sparse, true, 0, &c);
    assert_int_equal(c.fixed_mask, 0xb);
    const uint32_t v4_ecx[4] = {0x07300404, 0, 0x8, 0x00000603};
    pmu_caps_from_cpuid(0x20, v4_ecx, true, 0, &c);
    assert_int_equal(c.fixed_mask, 0x7);
    /* v1 has no fixed counters; max leaf below 0xA: no PMU at all */
    const uint32_t v1[4] = {0x07280201, 0, 0, 0x603};
    pmu_caps_from_cpuid(0x20, v1, true, 0, &c);
    assert_int_equal(c.fixed_mask, 0);
    pmu_caps_from_cpuid(0x9, skylake, true, 0, &c);
    assert_int_equal(c.version, 0);
    /* PERF_CAPABILITIES unreadable: no full-width writes */
    pmu_caps_from_cpuid(0x20, skylake, false, PERF_CAP_FW_WRITE, &c);
    assert_false(c.full_width);
}

static void test_decide(void **state)
{
    (void)state;
    struct pmu_decision d = decide(skylake, 0, true, true);
    assert_int_equal(d.mode, PMU_SWITCHED);
    assert_false(d.legacy_freeze);
    assert_non_null(strstr(d.reason, "PMU v4 shown"));
    d = decide(core2, 0, true, true);
    assert_int_equal(d.mode, PMU_SWITCHED);
    assert_true(d.legacy_freeze);
    d = decide(skylake, 0, true, false);
    assert_int_equal(d.mode, PMU_HIDDEN);
    assert_non_null(strstr(d.reason, "VM-entry"));
    d = decide(skylake, 0, false, true);
    assert_int_equal(d.mode, PMU_HIDDEN);
    assert_non_null(strstr(d.reason, "VM-exit"));
    const uint32_t none[4] = {0};
    d = decide(none, 0, true, true);
    assert_int_equal(d.mode, PMU_ABSENT);
    /* CPUID.0AH: zero only when hidden */
    uint32_t r[4] = {1, 2, 3, 4};
    pmu_cpuid_filter(&d, 0xa, r);
    assert_int_equal(r[0], 1);
    d = decide(skylake, 0, true, false);
    pmu_cpuid_filter(&d, 0xb, r);
    assert_int_equal(r[0], 1);
    pmu_cpuid_filter(&d, 0xa, r);
    assert_int_equal(r[0] | r[1] | r[2] | r[3], 0);
}

static void test_msrs(void **state)
{
    (void)state;
    struct pmu_decision d = decide(skylake, PERF_CAP_FW_WRITE, true, true);
    /* only IA32_PERF_GLOBAL_CTRL exits */
    for (uint32_t m = 0; m < 0x2000; m++)
        assert_int_equal(pmu_intercepts(&d, m), m == 0x38f);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x186 + 3), PMU_MSR_EVTSEL);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x186 + 4), PMU_MSR_NONE);
    assert_int_equal(pmu_msr_kind(&d.caps, 0xc1), PMU_MSR_PMC);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x4c4), PMU_MSR_A_PMC);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x4c5), PMU_MSR_NONE);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x30b), PMU_MSR_FIXED);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x30c), PMU_MSR_NONE); /* no fixed counter 3 */
    assert_int_equal(pmu_msr_kind(&d.caps, 0x391), PMU_MSR_GLOBAL_STATUS_SET);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x392), PMU_MSR_GLOBAL_INUSE);
    d = decide(core2, 0, true, true);
    assert_int_equal(pmu_msr_kind(&d.caps, 0x391), PMU_MSR_NONE); /* v4 */
    assert_int_equal(pmu_msr_kind(&d.caps, 0x4c1), PMU_MSR_NONE); /* no full-width writes */
}

static void test_global_ctrl_rule(void **state)
{
    (void)state;
    struct pmu_decision d = decide(skylake, 0, true, true);
    assert_true(pmu_global_ctrl_write_ok(&d, 0));
    assert_true(pmu_global_ctrl_write_ok(&d, 0x70000000full)); /* Linux: all counters */
    assert_false(pmu_global_ctrl_write_ok(&d, BIT(4)));        /* no PMC4 */
    assert_false(pmu_global_ctrl_write_ok(&d, BIT(35)));       /* no fixed counter 3 */
    assert_false(pmu_global_ctrl_write_ok(&d, BIT(48)));       /* no PERF_METRICS */
    assert_false(pmu_global_ctrl_write_ok(&d, BIT(63)));
    d = decide(icelake, PERF_CAP_METRICS, true, true);
    assert_true(pmu_global_ctrl_write_ok(&d, 0xf000000ffull | BIT(48)));
    d = decide(core2, 0, true, true);
    assert_true(pmu_global_ctrl_write_ok(&d, 0x700000003ull));
    assert_false(pmu_global_ctrl_write_ok(&d, BIT(2)));
    const uint32_t none[4] = {0};
    d = decide(none, 0, true, true);
    assert_false(pmu_global_ctrl_write_ok(&d, 0)); /* no such MSR */
}

static void test_nmi_rule(void **state)
{
    (void)state;
    struct pmu_decision d = decide(skylake, 0, true, true);
    struct pmu_nmi_state s = {0};
    struct pmu_nmi_verdict out;
    struct pmu_nmi_view v = {
        .vmm_ours = true, .status = BIT(0), .pmi_bits = BIT(0), .lvtpc = LVT_DM_NMI};
    /* a PMI merged into the VMM's NMI: new PMI-enabled bit, NMI entry -> owed once */
    pmu_on_nmi(&d, &s, &v, &out);
    assert_true(out.owe_guest);
    pmu_on_nmi(&d, &s, &v, &out); /* the same bit again: not new */
    assert_false(out.owe_guest);
    /* the guest acknowledged it and re-enabled (observed), then a new overflow merged */
    pmu_observe(&s, 0);
    pmu_on_nmi(&d, &s, &v, &out);
    assert_true(out.owe_guest);
    /* fixed-vector or masked entry: the PMI was no NMI, nothing merged */
    s.seen = 0;
    v.lvtpc = LVT_DM_FIXED | 0xfe;
    pmu_on_nmi(&d, &s, &v, &out);
    assert_false(out.owe_guest);
    s.seen = 0;
    v.lvtpc = LVT_DM_NMI | LVT_MASKED;
    pmu_on_nmi(&d, &s, &v, &out);
    assert_false(out.owe_guest);
    /* a bit of a counter without INT is no PMI's; one set before INT was turned on neither */
    s.seen = 0;
    v.lvtpc = LVT_DM_NMI;
    v.pmi_bits = BIT(1);
    pmu_on_nmi(&d, &s, &v, &out);
    assert_false(out.owe_guest);
    v.pmi_bits = BIT(0);
    pmu_on_nmi(&d, &s, &v, &out);
    assert_false(out.owe_guest);
    /* the guest's own NMI is always owed; no legacy freeze on v4 */
    v.vmm_ours = false;
    v.guest_debugctl = PMU_DEBUGCTL_FREEZE_PERFMON;
    pmu_on_nmi(&d, &s, &v, &out);
    assert_true(out.owe_guest);
    assert_false(out.clear_global_ctrl);
    /* v2: the guest's PMI NMI with FREEZE_PERFMON_ON_PMI clears the VMCS copy */
    d = decide(core2, 0, true, true);
    s.seen = 0;
    pmu_on_nmi(&d, &s, &v, &out);
    assert_true(out.owe_guest);
    assert_true(out.clear_global_ctrl);
    v.guest_debugctl = 0;
    pmu_on_nmi(&d, &s, &v, &out);
    assert_false(out.clear_global_ctrl);
}

static void test_emulated_retire(void **state)
{
    (void)state;
    struct pmu_decision d = decide(skylake, PERF_CAP_FW_WRITE, true, true);
    struct pmu_nmi_state s = {0};
    struct pmu_retire o;
    /* fixed counter 0 (OS+USR, PMI) one below the top, GP0 counting cycles, GP1 insns at USR */
    struct pmu_state g = {
        .global_ctrl = BIT(32) | BIT(0) | BIT(1),
        .fixed_ctrl = FIXED_CTRL_OS(0) | FIXED_CTRL_USR(0) | FIXED_CTRL_PMI(0),
        .evtsel = {EVTSEL_EN | EVTSEL_OS | ARCH_EVENT_CYCLES,
                   EVTSEL_EN | EVTSEL_USR | ARCH_EVENT_INSNS},
        .fixed = {(1ull << 48) - 2},
        .debugctl = PMU_DEBUGCTL_FREEZE_PERFMON | PMU_DEBUGCTL_FREEZE_LBRS,
        .lvtpc = LVT_DM_NMI,
    };
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_int_equal(o.inc, BIT(32)); /* GP1 counts at CPL > 0 only */
    assert_int_equal(o.status_set, 0);
    assert_false(o.pmi);
    pmu_emulated_retire(&d, &s, &g, 3, &o);
    assert_int_equal(o.inc, BIT(32) | BIT(1));
    g.fixed[0]++;
    pmu_emulated_retire(&d, &s, &g, 0, &o); /* wraps: overflow, PMI, streamlined freeze */
    assert_true(o.exact);
    assert_true(o.pmi);
    assert_int_equal(o.status_set, BIT(32) | GLOBAL_STATUS_CTR_FRZ | GLOBAL_STATUS_LBR_FRZ);
    assert_int_equal(o.deliver, 2);
    assert_true(s.seen & BIT(32)); /* the VMM's own PMI is not a merged one */
    g.lvtpc = LVT_DM_FIXED | 0xfe;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_int_equal(o.deliver, 1);
    g.lvtpc |= LVT_MASKED;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_true(o.pmi);
    assert_int_equal(o.deliver, 0);
    /* frozen (CTR_Frz) or not switched: nothing */
    g.status = GLOBAL_STATUS_CTR_FRZ;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_int_equal(o.inc, 0);
    /* v2: an overflow cannot be shown (no STATUS_SET) */
    d = decide(core2, 0, true, true);
    g.status = 0;
    g.fixed[0] = (1ull << 40) - 1;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_false(o.exact);
    /* ... so the counter is left at its maximum: it overflows at its next real event with its
     * PMI, instead of wrapping to 0 silently */
    assert_false(o.inc & BIT(32));
    assert_int_equal(o.status_set, 0);
    assert_false(o.pmi);
}

/* a PEBS counter's overflow (a PEBS record and a reload in hardware) is never emulated; its
 * plain counting is */
static void test_emulated_retire_pebs(void **state)
{
    struct pmu_decision d = decide(icelake, 0, true, true);
    struct pmu_nmi_state s = {0};
    struct pmu_state g = {
        .global_ctrl = BIT(0),
        .evtsel = {EVTSEL_EN | EVTSEL_OS | EVTSEL_USR | EVTSEL_INT | ARCH_EVENT_INSNS},
        .pebs_enable = BIT(0),
        .lvtpc = LVT_DM_NMI};
    struct pmu_retire o;
    g.pmc[0] = 5;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_true(o.exact);
    assert_int_equal(o.inc, BIT(0));
    g.pmc[0] = (1ull << 48) - 1;
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_false(o.exact);
    assert_int_equal(o.inc, 0);
    assert_false(o.pmi);
    g.pebs_enable = 0; /* the same overflow without PEBS: emulated, with its PMI */
    pmu_emulated_retire(&d, &s, &g, 0, &o);
    assert_true(o.exact);
    assert_int_equal(o.inc, BIT(0));
    assert_true(o.pmi);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_emulated_retire_pebs),
        cmocka_unit_test(test_msrs),
        cmocka_unit_test(test_global_ctrl_rule),
        cmocka_unit_test(test_nmi_rule),
        cmocka_unit_test(test_emulated_retire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
