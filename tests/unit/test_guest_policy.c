/* SPDX-License-Identifier: MIT */
/* Guest-visible CPUID / XSETBV / MSR policy (vmm/vmx/guest_policy.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "vmx/guest_policy.h"
#include "pt/rtit.h"

#define CR4_OSXSAVE (1ull << 18)
#define CR4_PKE     (1ull << 22)
#define ALL         (GUEST_FEAT_RDTSCP | GUEST_FEAT_INVPCID | GUEST_FEAT_XSAVES | GUEST_FEAT_WAITPKG)

static struct pt_decision off(void)
{
    struct pt_decision d;
    memset(&d, 0, sizeof(d));
    d.mode = PT_ENGINE_OFF;
    return d;
}

static void test_signature_and_max_leaf(void **state)
{
    struct pt_decision d = off();
    uint32_t r[4] = {1, 2, 3, 4};
    cpuid_policy(&d, ALL, PTV_CPUID_BASE, 0, 0, r);
    char sig[13] = {0};
    memcpy(sig, &r[1], 4);
    memcpy(sig + 4, &r[2], 4);
    memcpy(sig + 8, &r[3], 4);
    assert_string_equal(sig, "ptvisor");
    assert_int_equal(r[0], PTV_CPUID_MAX);
    uint32_t z[4] = {9, 9, 9, 9};
    cpuid_policy(&d, ALL, 0x400000ff, 0, 0, z); /* beyond the max: all zero, never host data */
    assert_int_equal(z[0] | z[1] | z[2] | z[3], 0);
}

static void test_leaf1(void **state)
{
    struct pt_decision d = off();
    uint32_t r[4] = {0, 0, 0xffffffffu, 0};
    cpuid_policy(&d, ALL, 1, 0, 0, r);
    assert_true(r[2] & (1u << 31));  /* hypervisor present */
    assert_false(r[2] & (1u << 5));  /* VMX hidden */
    assert_false(r[2] & (1u << 27)); /* OSXSAVE follows the guest's CR4 (0) */
    uint32_t s[4] = {0, 0, 0, 0};
    cpuid_policy(&d, ALL, 1, 0, CR4_OSXSAVE, s);
    assert_true(s[2] & (1u << 27));
    assert_true(s[2] & (1u << 31));
}

static void test_leaf7_pt_and_ospke(void **state)
{
    struct pt_decision d = off();
    uint32_t r[4] = {0, 0xffffffffu, 0xffffffffu, 0};
    cpuid_policy(&d, ALL, 7, 0, 0, r);
    assert_false(r[1] & CPUID_7_EBX_INTEL_PT); /* PT hidden when the guest does not own it */
    assert_false(r[2] & (1u << 4));            /* OSPKE = guest CR4.PKE = 0 */
    uint32_t s[4] = {0, 0, 0, 0};
    cpuid_policy(&d, ALL, 7, 0, CR4_PKE, s);
    assert_true(s[2] & (1u << 4));
    uint32_t l14[4] = {1, 0xf, 0x7, 0};
    cpuid_policy(&d, ALL, 0x14, 0, 0, l14);
    assert_int_equal(l14[0] | l14[1] | l14[2] | l14[3], 0);
}

static void test_features_follow_controls(void **state)
{
    struct pt_decision d = off();
    uint32_t r[4] = {0, 0xffffffffu, 0xffffffffu, 0};
    cpuid_policy(&d, 0, 7, 0, 0, r);
    assert_false(r[1] & (1u << 10)); /* INVPCID */
    assert_false(r[2] & (1u << 5));  /* WAITPKG */
    assert_false(r[2] & (1u << 22)); /* RDPID */
    uint32_t x[4] = {0xffffffffu, 0, 0, 0};
    cpuid_policy(&d, GUEST_FEAT_RDTSCP, 0xd, 1, 0, x);
    assert_false(x[0] & (1u << 3)); /* XSAVES */
    uint32_t e[4] = {0, 0, 0, 0xffffffffu};
    cpuid_policy(&d, 0, 0x80000001, 0, 0, e);
    assert_false(e[3] & (1u << 27)); /* RDTSCP */
    uint32_t k[4] = {0, 0xffffffffu, 0xffffffffu, 0};
    cpuid_policy(&d, ALL, 7, 0, 0, k);
    assert_true(k[1] & (1u << 10));
    assert_true(k[2] & (1u << 5));
}

static void test_xsetbv(void **state)
{
    uint64_t sup = 0x7; /* x87, SSE, AVX */
    assert_int_equal(xsetbv_policy(0, 0x7, sup, 0), XSETBV_UD);
    assert_int_equal(xsetbv_policy(0, 0x7, sup, CR4_OSXSAVE), XSETBV_OK);
    assert_int_equal(xsetbv_policy(0, 0x3, sup, CR4_OSXSAVE), XSETBV_OK);
    assert_int_equal(xsetbv_policy(1, 0x3, sup, CR4_OSXSAVE), XSETBV_GP); /* XCR1 */
    assert_int_equal(xsetbv_policy(0, 0x6, sup, CR4_OSXSAVE), XSETBV_GP); /* x87 off */
    assert_int_equal(xsetbv_policy(0, 0x5, sup, CR4_OSXSAVE), XSETBV_GP); /* AVX w/o SSE */
    assert_int_equal(xsetbv_policy(0, 0xf, sup, CR4_OSXSAVE), XSETBV_GP); /* unsupported */
}

static void test_msr(void **state)
{
    assert_int_equal(msr_policy(MSR_IA32_RTIT_CTL), MSR_PT_ENGINE);
    assert_int_equal(msr_policy(MSR_IA32_RTIT_ADDR3_B), MSR_PT_ENGINE);
    assert_int_equal(msr_policy(0x480), MSR_GP);
    assert_int_equal(msr_policy(0x491), MSR_GP);
    assert_int_equal(msr_policy(0x38f), MSR_PERF_GLOBAL);
    assert_int_equal(msr_policy(0x10), MSR_PASS_THROUGH); /* TSC */
    assert_int_equal(msr_policy(0xc0000080), MSR_PASS_THROUGH);
    assert_int_equal(msr_policy(0x1b), MSR_APIC_BASE);
    assert_int_equal(msr_policy(0x2ff), MSR_MTRR);
    assert_int_equal(msr_policy(0x201), MSR_MTRR);
    assert_int_equal(msr_policy(0x26f), MSR_MTRR);
    assert_int_equal(msr_policy(0x79), MSR_UCODE_WRITE);
    assert_int_equal(msr_policy(0x150), MSR_GP);
    assert_int_equal(msr_policy(0x277), MSR_PASS_THROUGH); /* PAT is VMCS-switched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature_and_max_leaf),   cmocka_unit_test(test_leaf1),
        cmocka_unit_test(test_leaf7_pt_and_ospke),       cmocka_unit_test(test_xsetbv),
        cmocka_unit_test(test_features_follow_controls), cmocka_unit_test(test_msr),
    };
    return cmocka_run_group_tests_name("guest_policy", tests, NULL, NULL);
}
