/* SPDX-License-Identifier: MIT */
/* PT-triggered EPT violations in hardware-GPA mode (vmm/pt/pt_eptv.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/fake_world.h"
#include "pt/pt_eptv.h"
#include "pt/rtit.h"

#define STATUS_TRACING (RTIT_STATUS_TRIGGEREN | RTIT_STATUS_CONTEXTEN | (5ull << 32))

static struct pt_eptv_decision decide(struct fake_world *fw, uint64_t qual, uint64_t gpa, bool en)
{
    struct pt_eptv_decision d;
    pt_eptv_decide(qual, gpa, en, STATUS_TRACING, &fw->mem, &d);
    return d;
}

static void test_sync_violation_not_pt(void **state)
{
    struct fake_world *fw = fw_new(1);
    struct pt_eptv_decision d = decide(fw, 0x2 | EPT_VIOLATION_GVA_IS_VALID, FW_GPA_MMIO, true);
    assert_int_equal(d.action, PT_EPTV_NOT_PT);
    assert_int_equal(d.guest_status, STATUS_TRACING);
    assert_false(d.stop_hw_trace);
    d = decide(fw, EPT_VIOLATION_ASYNC | 0x2, 0x100000, false); /* not tracing: not PT's */
    assert_int_equal(d.action, PT_EPTV_NOT_PT);
    fw_free(fw);
}

static void test_guest_ram_maps_and_resumes(void **state)
{
    struct fake_world *fw = fw_new(1);
    struct pt_eptv_decision d = decide(fw, EPT_VIOLATION_ASYNC | 0x2, 0x123456, true);
    assert_int_equal(d.action, PT_EPTV_MAP_RESUME);
    assert_int_equal(d.guest_status, STATUS_TRACING);
    assert_false(d.stop_hw_trace);
    d = decide(fw, EPT_VIOLATION_ASYNC | 0x1, 0x10000, true); /* ToPA table read */
    assert_int_equal(d.action, PT_EPTV_MAP_RESUME);
    fw_free(fw);
}

static void test_illegal_gpa_is_operational_error(void **state)
{
    struct fake_world *fw = fw_new(1);
    const uint64_t bad[] = {FW_GPA_VMM + 0x40, FW_GPA_MMIO, FW_GPA_UNMAPPED + 0x1000, 1ull << 38};
    const char *why[] = {"PT access to VMM memory", "PT access to MMIO",
                         "PT access to unmapped memory", "PT access to unmapped memory"};

    for (unsigned i = 0; i < 4; i++) {
        struct pt_eptv_decision d = decide(fw, EPT_VIOLATION_ASYNC | 0x2, bad[i], true);
        assert_int_equal(d.action, PT_EPTV_OPERR_RESUME);
        assert_true(d.guest_status & RTIT_STATUS_ERROR);
        assert_false(d.guest_status & RTIT_STATUS_TRIGGEREN);
        /* everything else in STATUS is kept (ContextEn, PacketByteCnt) */
        assert_int_equal(d.guest_status & ~(RTIT_STATUS_ERROR | RTIT_STATUS_TRIGGEREN),
                         STATUS_TRACING & ~RTIT_STATUS_TRIGGEREN);
        assert_true(d.stop_hw_trace);
        assert_string_equal(d.reason, why[i]);
    }
    fw->protected_by_vmm[0x5] = true;
    struct pt_eptv_decision d = decide(fw, EPT_VIOLATION_ASYNC | 0x2, 0x5000, true);
    assert_int_equal(d.action, PT_EPTV_OPERR_RESUME);
    assert_string_equal(d.reason, "PT access to a VMM-protected page");
    fw_free(fw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_violation_not_pt),
        cmocka_unit_test(test_guest_ram_maps_and_resumes),
        cmocka_unit_test(test_illegal_gpa_is_operational_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
