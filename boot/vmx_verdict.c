/* SPDX-License-Identifier: MIT */
/*
 * SDM Vol. 3C 24.7 (23.7 in older editions), "Enabling and entering VMX
 * operation": VMX needs CPUID.1:ECX.VMX[5] = 1, and VMXON #GPs when
 * IA32_FEATURE_CONTROL is locked with "VMX outside SMX" clear.  Unlocked is
 * fine: the VMM sets and locks it.  The VMM runs the firmware itself as its
 * guest, so it also needs EPT and unrestricted guest; every other control is
 * the VMM's to check (it returns PTV_ENTRY_MISSING_CONTROL).
 */
#include "vmx_verdict.h"
#include "fmt.h"
#include "ptv/config.h"

static bool refuse(struct ptv_fmt *f, uint32_t on_no_vmx)
{
    ptv_fmt_str(f, on_no_vmx == PTV_NO_VMX_HALT ? " -- on_no_vmx = halt: stopping here"
                                                : " -- booting natively");
    return false;
}

bool ptv_vmx_verdict(const struct ptv_vmx_caps *c, uint32_t on_no_vmx, char *msg, size_t cap)
{
    const uint32_t need = SECONDARY_EXEC_ENABLE_EPT | SECONDARY_EXEC_UNRESTRICTED_GUEST;
    uint64_t fc = c->feature_control;
    struct ptv_fmt f;

    ptv_fmt_init(&f, msg, cap);
    if (!(c->cpuid1_ecx & X86_FEATURE_VMX_ECX)) {
        ptv_fmt_str(&f, "no VMX: CPUID.1:ECX[5]=0 (VMX disabled in firmware setup, or an "
                        "emulator without VMX)");
        return refuse(&f, on_no_vmx);
    }
    if ((fc & FEAT_CTL_LOCKED) && !(fc & FEAT_CTL_VMX_ENABLED_OUTSIDE_SMX)) {
        ptv_fmt_str(&f, "no VMX: IA32_FEATURE_CONTROL=");
        ptv_fmt_hex(&f, fc);
        ptv_fmt_str(&f, " is locked with VMX outside SMX off (enable VT-x in firmware setup)");
        return refuse(&f, on_no_vmx);
    }
    if (!(c->procbased_allowed1 & CPU_BASED_ACTIVATE_SECONDARY_CONTROLS) ||
        (c->procbased2_allowed1 & need) != need) {
        ptv_fmt_str(&f, "no usable VMX: no EPT or no unrestricted guest (IA32_VMX_PROCBASED_CTLS2 "
                        "allowed-1 = ");
        ptv_fmt_hex(&f, c->procbased2_allowed1);
        ptv_fmt_str(&f, ")");
        return refuse(&f, on_no_vmx);
    }
    ptv_fmt_str(&f, "VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=");
    ptv_fmt_hex(&f, fc);
    ptv_fmt_str(&f, fc & FEAT_CTL_LOCKED ? " (locked, VMX on)" : " (unlocked: the VMM locks it)");
    return true;
}
