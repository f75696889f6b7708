/* SPDX-License-Identifier: MIT */
/*
 * Host tests for the loader's VMX verdict (boot/vmx_verdict.c): every branch,
 * including the FEATURE_CONTROL-locked-off case no emulator here produces
 * (OVMF leaves the MSR unlocked; docs/TEST-VEHICLES.md).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ptv/config.h"
#include "../../../boot/vmx_verdict.h"

/* what Bochs corei7_skylake_x reports (docs/TEST-VEHICLES.md) */
static const struct ptv_vmx_caps skylake = {
    .cpuid1_ecx = X86_FEATURE_VMX_ECX,
    .feature_control = 0,
    .procbased_allowed1 = 0xfff9fffe,
    .procbased2_allowed1 = 0x02177fff,
};

static void verdict(const struct ptv_vmx_caps *c, uint32_t on_no_vmx, bool want, const char *line)
{
    char msg[200];
    assert_int_equal(ptv_vmx_verdict(c, on_no_vmx, msg, sizeof(msg)), want);
    assert_string_equal(msg, line);
}

static void test_no_vmx(void **state)
{
    struct ptv_vmx_caps c = skylake;
    c.cpuid1_ecx = ~X86_FEATURE_VMX_ECX;
    verdict(&c, PTV_NO_VMX_BOOT, false,
            "no VMX: CPUID.1:ECX[5]=0 (VMX disabled in firmware setup, or an emulator without "
            "VMX) -- booting natively");
    verdict(&c, PTV_NO_VMX_HALT, false,
            "no VMX: CPUID.1:ECX[5]=0 (VMX disabled in firmware setup, or an emulator without "
            "VMX) -- on_no_vmx = halt: stopping here");
}

static void test_feature_control(void **state)
{
    struct ptv_vmx_caps c = skylake;
    c.feature_control = FEAT_CTL_LOCKED;
    verdict(&c, PTV_NO_VMX_BOOT, false,
            "no VMX: IA32_FEATURE_CONTROL=0x1 is locked with VMX outside SMX off (enable VT-x in "
            "firmware setup) -- booting natively");
    c.feature_control = FEAT_CTL_LOCKED | FEAT_CTL_VMX_ENABLED_INSIDE_SMX; /* SMX only */
    verdict(&c, PTV_NO_VMX_HALT, false,
            "no VMX: IA32_FEATURE_CONTROL=0x3 is locked with VMX outside SMX off (enable VT-x in "
            "firmware setup) -- on_no_vmx = halt: stopping here");
    c.feature_control = FEAT_CTL_LOCKED | FEAT_CTL_VMX_ENABLED_OUTSIDE_SMX; /* legacy BIOS: 5 */
    verdict(&c, PTV_NO_VMX_BOOT, true,
            "VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=0x5 (locked, VMX on)");
    c.feature_control = FEAT_CTL_VMX_ENABLED_INSIDE_SMX; /* unlocked: the VMM sets bit 2 */
    verdict(&c, PTV_NO_VMX_BOOT, true,
            "VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=0x2 (unlocked: the VMM locks "
            "it)");
}

static void test_ept_and_unrestricted_guest(void **state)
{
    struct ptv_vmx_caps c = skylake;
    c.procbased2_allowed1 &= ~SECONDARY_EXEC_UNRESTRICTED_GUEST;
    verdict(&c, PTV_NO_VMX_BOOT, false,
            "no usable VMX: no EPT or no unrestricted guest (IA32_VMX_PROCBASED_CTLS2 allowed-1 = "
            "0x2177f7f) -- booting natively");
    c = skylake;
    c.procbased2_allowed1 &= ~SECONDARY_EXEC_ENABLE_EPT;
    assert_false(ptv_vmx_verdict(&c, PTV_NO_VMX_BOOT, (char[200]){0}, 200));
    c = skylake; /* secondary controls cannot be activated: CTLS2 means nothing */
    c.procbased_allowed1 &= ~CPU_BASED_ACTIVATE_SECONDARY_CONTROLS;
    assert_false(ptv_vmx_verdict(&c, PTV_NO_VMX_BOOT, (char[200]){0}, 200));
    verdict(&skylake, PTV_NO_VMX_HALT, true,
            "VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=0x0 (unlocked: the VMM locks "
            "it)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_vmx),
        cmocka_unit_test(test_feature_control),
        cmocka_unit_test(test_ept_and_unrestricted_guest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
