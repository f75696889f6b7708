/* SPDX-License-Identifier: MIT */
/* VMX capability discovery, the control decision's inputs, and VMXON (SDM Vol. 3C 24.7, 24.8). */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_insn.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "base/palloc.h"
#include "vmx/vmx_caps_policy.h"
#include "emul/guest_policy.h"
#include <ptv/handoff.h>

struct vmx_caps vmx_caps;
struct vmx_controls vmx_ctls;

int vmx_read_caps_cpu(struct vmx_caps *c, const char **why)
{
    if (!(cpuid_count(1, 0).ecx & (1u << 5))) {
        *why = "no VMX: CPUID.1:ECX[5]=0";
        return PTV_ENTRY_NO_VMX;
    }
    uint64_t fc;
    if (rdmsr_safe(MSR_IA32_FEAT_CTL, &fc))
        fc = 0;
    if ((fc & FEAT_CTL_LOCKED) && !(fc & FEAT_CTL_VMX_OUTSIDE_SMX)) {
        *why = "VMX disabled: IA32_FEATURE_CONTROL locked without VMX outside SMX (enable VT-x "
               "in firmware setup)";
        return PTV_ENTRY_VMX_LOCKED_OFF;
    }
    c->basic = rdmsr(MSR_IA32_VMX_BASIC);
    bool true_ctls = c->basic & VMX_BASIC_TRUE_CTLS;
    c->pin = rdmsr(true_ctls ? MSR_IA32_VMX_TRUE_PINBASED_CTLS : MSR_IA32_VMX_PINBASED_CTLS);
    c->proc = rdmsr(true_ctls ? MSR_IA32_VMX_TRUE_PROCBASED_CTLS : MSR_IA32_VMX_PROCBASED_CTLS);
    c->exit = rdmsr(true_ctls ? MSR_IA32_VMX_TRUE_EXIT_CTLS : MSR_IA32_VMX_EXIT_CTLS);
    c->entry = rdmsr(true_ctls ? MSR_IA32_VMX_TRUE_ENTRY_CTLS : MSR_IA32_VMX_ENTRY_CTLS);
    c->misc = rdmsr(MSR_IA32_VMX_MISC);
    c->cr0_fixed0 = rdmsr(MSR_IA32_VMX_CR0_FIXED0);
    c->cr0_fixed1 = rdmsr(MSR_IA32_VMX_CR0_FIXED1);
    c->cr4_fixed0 = rdmsr(MSR_IA32_VMX_CR4_FIXED0);
    c->cr4_fixed1 = rdmsr(MSR_IA32_VMX_CR4_FIXED1);
    /* secondary controls exist only if primary bit 31 may be 1 */
    c->proc2 = (c->proc >> 32) & CPU_BASED_ACTIVATE_SECONDARY_CONTROLS
                   ? rdmsr(MSR_IA32_VMX_PROCBASED_CTLS2)
                   : 0;
    c->ept_vpid = (c->proc2 >> 32) & (SECONDARY_EXEC_ENABLE_EPT | SECONDARY_EXEC_ENABLE_VPID)
                      ? rdmsr(MSR_IA32_VMX_EPT_VPID_CAP)
                      : 0;
    c->maxphyaddr =
        cpuid_count(0x80000000, 0).eax >= 0x80000008 ? cpuid_count(0x80000008, 0).eax & 0xff : 36;
    const char *basic = vmx_basic_unusable(c->basic);
    if (basic) {
        *why = basic;
        return PTV_ENTRY_MISSING_CONTROL;
    }
    return 0;
}

/* Who gives this VMX (CPUID.1:ECX[31] and leaf 0x40000000's vendor: under nested KVM,
 * "KVMKVMKVM"), and the capability MSRs the control decision reads, once, in the boot log:
 * a user's report then shows what the VMM ran on; tests/fakes/vmx_profiles.h is built from them. */
static void vmx_log_caps(const struct vmx_caps *c)
{
    char below[16] = "none";
    if (cpuid_count(1, 0).ecx >> 31 & 1) {
        struct cpuid_regs r = cpuid_count(0x40000000, 0);
        uint32_t w[3] = {r.ebx, r.ecx, r.edx};
        unsigned i = 0;
        for (; i < 12; i++) {
            char ch = (char)(w[i / 4] >> (8 * (i % 4)));
            if (!ch) /* "KVMKVMKVM\0\0\0" */
                break;
            below[i] = ch >= 0x20 && ch < 0x7f ? ch : '.';
        }
        below[i] = 0;
    }
    pr_info("vmx", "hypervisor below: %s; VMX_BASIC %lx MISC %lx EPT_VPID %lx", below, c->basic,
            c->misc, c->ept_vpid);
    pr_info("vmx", "controls allowed: PIN %lx PROC %lx PROC2 %lx EXIT %lx ENTRY %lx", c->pin,
            c->proc, c->proc2, c->exit, c->entry);
}

int vmx_read_caps(const char **why)
{
    int st = vmx_read_caps_cpu(&vmx_caps, why);
    if (!st)
        vmx_log_caps(&vmx_caps);
    return st;
}

/* The CPU's TSC-deadline timer, which the guest programs directly: hidden from the guest's
 * CPUID where bare-metal Linux would not use it for an erratum (guest_policy.h). */
static void vmx_tsc_deadline_check(void)
{
    struct cpuid_regs v = cpuid_count(0, 0), one;
    uint64_t rev = 0;
    uint32_t fixed_in;

    /* SDM Vol. 3A 10.11.7: write 0, CPUID.1 loads the revision, read it back */
    if (wrmsr_safe(MSR_IA32_BIOS_SIGN_ID, 0) == 0) {
        one = cpuid_count(1, 0);
        if (rdmsr_safe(MSR_IA32_BIOS_SIGN_ID, &rev))
            rev = 0;
    } else {
        one = cpuid_count(1, 0);
    }
    struct tsc_deadline_cpu c = {
        .intel = v.ebx == 0x756e6547 && v.edx == 0x49656e69 && v.ecx == 0x6c65746e,
        .hypervisor = one.ecx >> 31 & 1,
        .has_timer = one.ecx >> 24 & 1,
        .sig = one.eax,
        .ucode = (uint32_t)(rev >> 32),
    };
    if (!tsc_deadline_erratum(&c, &fixed_in))
        return;
    vmx_ctls.guest_features |= GUEST_FEAT_NO_TSC_DEADLINE;
    pr_info("vmx",
            "TSC-deadline timer hidden from the guest: CPU %x, microcode %#x < %#x (its "
            "erratum; bare-metal Linux would not use it either)",
            c.sig, c.ucode, fixed_in);
}

/* Gather the decision's inputs on this CPU; the decision itself is vmx_caps_policy.c. */
int vmx_choose_controls(const char **why)
{
    static struct vmx_ctl_decision d; /* *why points into it after a refusal */
    struct vmx_cpu_profile p = {.caps = vmx_caps};
    if (cpuid_count(0, 0).eax >= 0xa)
        p.pmu_version = (uint8_t)cpuid_count(0xa, 0).eax;
    int st = vmx_decide_controls(&p, &d);
    if (d.perf_global_unswitched)
        pr_warn("vmx", "no load-PERF_GLOBAL_CTRL controls: guest-programmed counters keep "
                       "running in the VMM (PEBS could write VMM memory)");
    if (st) {
        *why = d.reason;
        return st;
    }
    vmx_ctls = d.ctls;
    vmx_tsc_deadline_check();
    return 0;
}

int vmx_on(struct vcpu *v, int *status)
{
    uint64_t fc;
    if (rdmsr_safe(MSR_IA32_FEAT_CTL, &fc))
        fc = 0;
    if (!(fc & FEAT_CTL_LOCKED)) {
        /* OVMF leaves it unlocked (TEST-VEHICLES); lock it as Linux does (pt-facts G.1) */
        if (wrmsr_safe(MSR_IA32_FEAT_CTL, fc | FEAT_CTL_VMX_OUTSIDE_SMX | FEAT_CTL_LOCKED)) {
            pr_err("vmx", "cannot lock IA32_FEATURE_CONTROL");
            *status = PTV_ENTRY_VMX_LOCKED_OFF;
            return -1;
        }
        pr_info("vmx", "IA32_FEATURE_CONTROL was unlocked: locked with VMX outside SMX");
    }
    uint64_t cr0 = read_cr0(), cr4 = read_cr4() | X86_CR4_VMXE;
    if ((cr0 & vmx_caps.cr0_fixed0) != vmx_caps.cr0_fixed0 || (cr0 & ~vmx_caps.cr0_fixed1) ||
        (cr4 & vmx_caps.cr4_fixed0) != vmx_caps.cr4_fixed0 || (cr4 & ~vmx_caps.cr4_fixed1)) {
        pr_err("vmx", "CR0 %lx / CR4 %lx violate the VMX fixed bits", cr0, cr4);
        *status = PTV_ENTRY_VMX_FAILED;
        return -1;
    }
    uint32_t *vmxon = palloc_page(&v->vmxon_pa);
    uint32_t *vmcs = palloc_page(&v->vmcs_pa);
    if (!vmxon || !vmcs) {
        *status = PTV_ENTRY_NO_MEMORY;
        return -1;
    }
    *vmxon = VMX_BASIC_REVISION(vmx_caps.basic);
    *vmcs = VMX_BASIC_REVISION(vmx_caps.basic);
    write_cr4(cr4);
    if (__vmxon(&v->vmxon_pa)) {
        pr_err("vmx", "VMXON failed");
        write_cr4(cr4 & ~X86_CR4_VMXE);
        *status = PTV_ENTRY_VMX_FAILED;
        return -1;
    }
    if (__vmclear(&v->vmcs_pa) || __vmptrld(&v->vmcs_pa)) {
        pr_err("vmx", "VMCLEAR/VMPTRLD failed");
        vmx_off();
        *status = PTV_ENTRY_VMX_FAILED;
        return -1;
    }
    pr_info("vmx", "VMXON ok (VMCS revision %#x)", VMX_BASIC_REVISION(vmx_caps.basic));
    return 0;
}

void vmx_off(void)
{
    __vmxoff();
    write_cr4(read_cr4() & ~X86_CR4_VMXE);
}

uint64_t vmx_guest_debugctl(void)
{
    /* without the save + load debug controls the guest runs with the 0 every exit leaves (SDM
     * Vol. 3C 28.5.1) and the field is the VMM's copy: none of its bits is in effect */
    bool field_live = (vmx_ctls.exit & VM_EXIT_SAVE_DEBUG_CONTROLS) &&
                      (vmx_ctls.entry & VM_ENTRY_LOAD_DEBUG_CONTROLS);
    return field_live ? vmcs_read64(GUEST_IA32_DEBUGCTL) : 0;
}
