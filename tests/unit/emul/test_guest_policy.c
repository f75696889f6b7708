/* SPDX-License-Identifier: MIT */
/* Guest-visible CPUID / XSETBV / MSR policy (vmm/emul/guest_policy.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "emul/guest_policy.h"
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

static void test_leaf1_tsc_deadline(void **state)
{
    struct pt_decision d = off();
    uint32_t r[4] = {0, 0, 0xffffffffu, 0};
    cpuid_policy(&d, ALL, 1, 0, 0, r);
    assert_true(r[2] & (1u << 24)); /* shown by default: the CPU's own */
    uint32_t h[4] = {0, 0, 0xffffffffu, 0};
    cpuid_policy(&d, ALL | GUEST_FEAT_NO_TSC_DEADLINE, 1, 0, 0, h);
    assert_false(h[2] & (1u << 24));
    assert_true(h[2] & (1u << 31)); /* nothing else of leaf 1 changes */
    assert_int_equal(h[2] | (1u << 24), r[2]);
    uint32_t k[4] = {0, 0xffffffffu, 0xffffffffu, 0};
    cpuid_policy(&d, ALL | GUEST_FEAT_NO_TSC_DEADLINE, 7, 0, 0, k); /* other leaves untouched */
    assert_int_equal(k[2] & (1u << 24), 1u << 24);
}

/* family 6, model, stepping as CPUID.1:EAX encodes them */
static uint32_t sig6(unsigned model, unsigned step)
{
    return (model >> 4 & 0xf) << 16 | 6u << 8 | (model & 0xf) << 4 | step;
}

static bool erratum(uint32_t sig, uint32_t ucode, uint32_t *fixed)
{
    struct tsc_deadline_cpu c = {.intel = true, .has_timer = true, .sig = sig, .ucode = ucode};
    return tsc_deadline_erratum(&c, fixed);
}

/* Linux 6.1's deadline_match[]: each entry below its revision, at it, and its neighbours */
static void test_tsc_deadline_erratum(void **state)
{
    uint32_t f;
    /* Bochs' corei7_skylake_x: 0x50654, microcode 0 (the bench's Linux prints the same) */
    assert_int_equal(sig6(0x55, 4), 0x50654);
    assert_true(erratum(0x50654, 0, &f));
    assert_int_equal(f, 0x02000014);
    assert_true(erratum(0x50654, 0x02000013, &f));
    assert_false(erratum(0x50654, 0x02000014, &f));
    assert_int_equal(f, 0);
    assert_true(erratum(sig6(0x55, 3), 0x01000135, &f));
    assert_int_equal(f, 0x01000136);
    assert_false(erratum(sig6(0x55, 3), 0x01000136, &f));
    assert_false(erratum(sig6(0x55, 7), 0, &f));   /* Cascade Lake: revision 0 is enough */
    assert_false(erratum(sig6(0x55, 2), 0, &f));   /* no entry for stepping 2 */
    assert_true(erratum(sig6(0x3f, 2), 0x39, &f)); /* Haswell-X EP */
    assert_false(erratum(sig6(0x3f, 2), 0x3a, &f));
    assert_true(erratum(sig6(0x3f, 4), 0x0e, &f)); /* EX */
    assert_false(erratum(sig6(0x3f, 3), 0, &f));   /* no entry */
    assert_true(erratum(sig6(0x4f, 1), 0x0b00001f, &f));
    assert_false(erratum(sig6(0x4f, 1), 0x0b000020, &f));
    assert_true(erratum(sig6(0x56, 5), 0x0e000002, &f));
    assert_int_equal(f, 0x0e000003);
    assert_false(erratum(sig6(0x56, 6), 0, &f));
    static const struct {
        unsigned model;
        uint32_t rev;
    } any[] = {{0x3c, 0x22}, {0x45, 0x20}, {0x46, 0x17}, {0x3d, 0x25}, {0x47, 0x17},
               {0x4e, 0xb2}, {0x5e, 0xb2}, {0x8e, 0x52}, {0x9e, 0x52}};
    for (unsigned i = 0; i < sizeof(any) / sizeof(any[0]); i++)
        for (unsigned step = 0; step < 16; step++) {
            assert_true(erratum(sig6(any[i].model, step), any[i].rev - 1, &f));
            assert_int_equal(f, any[i].rev);
            assert_false(erratum(sig6(any[i].model, step), any[i].rev, &f));
        }
    assert_false(erratum(sig6(0x6a, 6), 0, &f)); /* Ice Lake-SP: not listed */
    assert_false(erratum(sig6(0x8f, 8), 0, &f)); /* Sapphire Rapids */
    /* the same model number in another family is another CPU */
    assert_false(erratum(0x50654 & ~0xf00u, 0, &f));
    assert_false(erratum((0x50654 & ~0xf00u) | 0xf00u, 0, &f));
    /* not Intel, a hypervisor below the VMM (its timer, not the CPU's), no timer at all */
    struct tsc_deadline_cpu c = {.intel = false, .has_timer = true, .sig = 0x50654};
    assert_false(tsc_deadline_erratum(&c, &f));
    c.intel = true;
    c.hypervisor = true;
    assert_false(tsc_deadline_erratum(&c, &f));
    c.hypervisor = false;
    c.has_timer = false;
    assert_false(tsc_deadline_erratum(&c, &f));
    c.has_timer = true;
    assert_true(tsc_deadline_erratum(&c, &f));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature_and_max_leaf),
        cmocka_unit_test(test_leaf1),
        cmocka_unit_test(test_leaf7_pt_and_ospke),
        cmocka_unit_test(test_xsetbv),
        cmocka_unit_test(test_features_follow_controls),
        cmocka_unit_test(test_leaf1_tsc_deadline),
        cmocka_unit_test(test_tsc_deadline_erratum),
    };
    return cmocka_run_group_tests_name("guest_policy", tests, NULL, NULL);
}
