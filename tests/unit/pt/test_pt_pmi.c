/* SPDX-License-Identifier: MIT */
/*
 * ToPA PMI routing and the guest's GLOBAL_STATUS bit 55 (vmm/pt/pt_pmi.c): every engine mode
 * with the host's bit 55 set and clear, and the guest's acknowledge through 0x390.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pt/pt_pmi.h"

#define B55      GLOBAL_STATUS_TRACE_TOPAPMI
#define COUNTERS 0x3ull /* PMC0/PMC1 overflow bits: not the engine's */

static const enum pt_engine_mode modes[] = {PT_ENGINE_OFF, PT_ENGINE_SYSTEM,
                                            PT_ENGINE_HOST_GUEST_HW, PT_ENGINE_HOST_GUEST_SHADOW};

static void routing(void **state)
{
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        struct pt_vpmi v;
        struct pt_pmi_result r;
        enum pt_engine_mode m = modes[i];

        pt_vpmi_init(&v);
        /* a counter-overflow PMI is not the engine's, in any mode */
        assert_int_equal(pt_pmi_host(m, COUNTERS, &v, &r), PT_PMI_NOT_PT);
        assert_false(r.ack_host);
        assert_int_equal(pt_pmi_guest_status(&v), 0);

        enum pt_pmi_action a = pt_pmi_host(m, B55 | COUNTERS, &v, &r);
        assert_int_equal(r.action, a);
        assert_true(r.ack_host); /* the real bit 55 is always acknowledged */
        assert_non_null(r.reason);
        switch (m) {
        case PT_ENGINE_HOST_GUEST_HW:
        case PT_ENGINE_HOST_GUEST_SHADOW:
            assert_int_equal(a, PT_PMI_INJECT_GUEST);
            assert_int_equal(pt_pmi_guest_status(&v), B55);
            assert_int_equal(v.injected, 1);
            break;
        case PT_ENGINE_SYSTEM:
            assert_int_equal(a, PT_PMI_CONSUME_VMM);
            assert_int_equal(pt_pmi_guest_status(&v), 0); /* never visible to the guest */
            assert_int_equal(v.consumed, 1);
            break;
        case PT_ENGINE_OFF:
            assert_int_equal(a, PT_PMI_SPURIOUS);
            assert_int_equal(pt_pmi_guest_status(&v), 0);
            break;
        }
    }
}

/* The guest sees bit 55 until it clears it through IA32_PERF_GLOBAL_OVF_CTRL. */
static void guest_ack(void **state)
{
    struct pt_vpmi v;
    uint64_t rest = 0xdead;

    pt_vpmi_init(&v);
    assert_int_equal(pt_pmi_host(PT_ENGINE_HOST_GUEST_HW, B55, &v, NULL), PT_PMI_INJECT_GUEST);
    /* a second region fills before the guest acknowledges: injected again, bit stays set */
    assert_int_equal(pt_pmi_host(PT_ENGINE_HOST_GUEST_HW, B55, &v, NULL), PT_PMI_INJECT_GUEST);
    assert_int_equal(v.injected, 2);
    assert_int_equal(pt_pmi_guest_status(&v), B55);

    /* clearing only counter bits leaves bit 55 and hands the counter bits on */
    assert_int_equal(pt_pmi_ovf_ctrl_write(PT_ENGINE_HOST_GUEST_HW, &v, COUNTERS, &rest),
                     PT_MSR_OK);
    assert_int_equal(rest, COUNTERS);
    assert_int_equal(pt_pmi_guest_status(&v), B55);

    assert_int_equal(pt_pmi_ovf_ctrl_write(PT_ENGINE_HOST_GUEST_HW, &v, B55 | COUNTERS, &rest),
                     PT_MSR_OK);
    assert_int_equal(rest, COUNTERS);
    assert_int_equal(pt_pmi_guest_status(&v), 0);
}

/* Outside host-guest mode bit 55 of OVF_CTRL is reserved for the guest: #GP, nothing changes. */
static void ack_without_pt(void **state)
{
    for (size_t i = 0; i < 2; i++) {
        struct pt_vpmi v, before;
        uint64_t rest = 0xdead;

        pt_vpmi_init(&v);
        v.global_status = 0;
        before = v;
        assert_int_equal(pt_pmi_ovf_ctrl_write(modes[i], &v, B55, &rest), PT_MSR_GP);
        assert_memory_equal(&v, &before, sizeof(v));
        assert_int_equal(pt_pmi_ovf_ctrl_write(modes[i], &v, COUNTERS, &rest), PT_MSR_OK);
        assert_int_equal(rest, COUNTERS);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routing),
        cmocka_unit_test(guest_ack),
        cmocka_unit_test(ack_without_pt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
