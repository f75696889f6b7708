/* SPDX-License-Identifier: MIT */
/* Control adjustment (pt-facts G.3) against synthetic and measured capability MSRs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include "hw/vmx.h"
#include "pt/rtit.h"

/* Bochs corei7_skylake_x, measured (TEST-VEHICLES.md) */
#define BOCHS_PROC2      0x02177fff00000000ull
#define BOCHS_TRUE_EXIT  0x007fffff00036dfbull
#define BOCHS_TRUE_ENTRY 0x0000ffff000011fbull

static void test_default1_bits_forced(void **state)
{
    uint32_t out, missing;
    assert_int_equal(
        vmx_adjust_controls(BOCHS_TRUE_EXIT, VM_EXIT_HOST_ADDR_SPACE_SIZE, 0, &out, &missing), 0);
    assert_int_equal(out & 0x00036dfb, 0x00036dfb); /* allowed-0 bits stay set */
    assert_true(out & VM_EXIT_HOST_ADDR_SPACE_SIZE);
    assert_int_equal(missing, 0);
}

static void test_optional_dropped_when_not_allowed(void **state)
{
    uint32_t out, missing;
    /* Bochs: PT_CONCEAL_VMX (19) and PT_USE_GPA (24) are not allowed-1 */
    assert_int_equal(vmx_adjust_controls(BOCHS_PROC2, SECONDARY_EXEC_ENABLE_EPT,
                                         SECONDARY_EXEC_PT_USE_GPA | SECONDARY_EXEC_PT_CONCEAL_VMX |
                                             SECONDARY_EXEC_UNRESTRICTED_GUEST,
                                         &out, &missing),
                     0);
    assert_int_equal(out & SECONDARY_EXEC_PT_USE_GPA, 0);
    assert_int_equal(out & SECONDARY_EXEC_PT_CONCEAL_VMX, 0);
    assert_true(out & SECONDARY_EXEC_UNRESTRICTED_GUEST);
}

static void test_required_missing_is_named(void **state)
{
    uint32_t out = 0xdead, missing;
    assert_int_equal(vmx_adjust_controls(BOCHS_PROC2, SECONDARY_EXEC_PT_USE_GPA, 0, &out, &missing),
                     -1);
    assert_int_equal(missing, SECONDARY_EXEC_PT_USE_GPA);
    assert_int_equal(out, 0xdead); /* nothing written on failure */
    /* entry control "load IA32_RTIT_CTL" (18) is not allowed-1 on Bochs */
    assert_int_equal(
        vmx_adjust_controls(BOCHS_TRUE_ENTRY, VM_ENTRY_LOAD_IA32_RTIT_CTL, 0, &out, &missing), -1);
    assert_int_equal(missing, VM_ENTRY_LOAD_IA32_RTIT_CTL);
}

static void test_contradictory_msr_refused(void **state)
{
    uint32_t out = 0x1234, missing;
    /* bit 3 must be 1 (allowed-0) but may not be 1 (allowed-1): broken MSR */
    assert_int_equal(vmx_adjust_controls(0x0000000000000008ull, 0, 0, &out, &missing), -1);
    assert_int_equal(missing, 8);
    assert_int_equal(out, 0x1234); /* untouched */
}

static void test_result_is_subset_of_allowed1(void **state)
{
    for (uint64_t seed = 1; seed < 2000; seed++) {
        uint64_t x = seed * 0x9e3779b97f4a7c15ull;
        uint32_t may1 = (uint32_t)(x >> 32) | 0x80000000u, must1 = (uint32_t)x & may1;
        uint32_t req = (uint32_t)(x >> 13) & may1, opt = (uint32_t)(x >> 7);
        uint32_t out, missing;
        assert_int_equal(
            vmx_adjust_controls(((uint64_t)may1 << 32) | must1, req, opt, &out, &missing), 0);
        assert_int_equal(out & ~may1, 0);
        assert_int_equal(out & must1, must1);
        assert_int_equal(out & req, req);
        assert_int_equal(out & opt & may1, opt & may1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default1_bits_forced),
        cmocka_unit_test(test_optional_dropped_when_not_allowed),
        cmocka_unit_test(test_required_missing_is_named),
        cmocka_unit_test(test_contradictory_msr_refused),
        cmocka_unit_test(test_result_is_subset_of_allowed1),
    };
    return cmocka_run_group_tests_name("vmx_controls", tests, NULL, NULL);
}
