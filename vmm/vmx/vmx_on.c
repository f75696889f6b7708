/* SPDX-License-Identifier: MIT */
/* VMX capability discovery, control selection and VMXON (SDM Vol. 3C 24.7, 24.8). */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "cpu.h"
#include "log.h"
#include "palloc.h"
#include "pt/rtit.h"
#include "lib/fmt.h"
#include "vmx/guest_policy.h"
#include <ptv/handoff.h>

struct vmx_caps vmx_caps;
struct vmx_controls vmx_ctls;

int vmx_read_caps(const char **why)
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
    struct vmx_caps *c = &vmx_caps;
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
    if (VMX_BASIC_REGION_SIZE(c->basic) > PAGE_SIZE || (c->basic & VMX_BASIC_32BIT_PHYS) ||
        VMX_BASIC_MEM_TYPE(c->basic) != VMX_MEMTYPE_WB) {
        *why = "IA32_VMX_BASIC: unsupported region size, 32-bit addresses or non-WB VMCS type";
        return PTV_ENTRY_MISSING_CONTROL;
    }
    return 0;
}

/* one named message per missing required control */
static int need(uint64_t cap, uint32_t req, uint32_t opt, uint32_t *out, const char *what,
                const char **why)
{
    uint32_t missing;
    if (vmx_adjust_controls(cap, req, opt, out, &missing)) {
        static char msg[120];
        ptv_snprintf(msg, sizeof(msg), "required %s control(s) %#x not supported", what, missing);
        *why = msg;
        return -1;
    }
    return 0;
}

int vmx_choose_controls(const char **why)
{
    struct vmx_caps *c = &vmx_caps;
    struct vmx_controls *k = &vmx_ctls;
    if (need(c->pin, 0, 0, &k->pin, "pin-based", why) ||
        need(c->proc, CPU_BASED_USE_MSR_BITMAPS | CPU_BASED_ACTIVATE_SECONDARY_CONTROLS, 0,
             &k->proc, "primary processor-based", why) ||
        need(c->proc2, SECONDARY_EXEC_ENABLE_EPT | SECONDARY_EXEC_UNRESTRICTED_GUEST,
             SECONDARY_EXEC_ENABLE_RDTSCP | SECONDARY_EXEC_ENABLE_INVPCID | SECONDARY_EXEC_XSAVES |
                 SECONDARY_EXEC_ENABLE_VPID | SECONDARY_EXEC_ENABLE_USR_WAIT_PAUSE,
             &k->proc2, "secondary processor-based (EPT, unrestricted guest)", why) ||
        need(c->exit,
             VM_EXIT_HOST_ADDR_SPACE_SIZE | VM_EXIT_SAVE_IA32_EFER | VM_EXIT_LOAD_IA32_EFER |
                 VM_EXIT_SAVE_IA32_PAT | VM_EXIT_LOAD_IA32_PAT,
             VM_EXIT_SAVE_DEBUG_CONTROLS | VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL, &k->exit, "VM-exit",
             why) ||
        need(c->entry, VM_ENTRY_LOAD_IA32_EFER | VM_ENTRY_LOAD_IA32_PAT,
             VM_ENTRY_LOAD_DEBUG_CONTROLS | VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, &k->entry,
             "VM-entry", why))
        return PTV_ENTRY_MISSING_CONTROL;
    /* Performance counters must not run in VMX root: a guest-programmed PEBS/DS area
     * would be written through the VMM's page tables, past EPT.  Load 0 into
     * IA32_PERF_GLOBAL_CTRL at every exit (and the guest's value at entry) when the
     * CPU has the MSR (architectural PMU v2+, CPUID.0xA) and both controls. */
    bool pmu2 = cpuid_count(0, 0).eax >= 0xa && (cpuid_count(0xa, 0).eax & 0xff) >= 2;
    if (!pmu2 || !(k->exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) ||
        !(k->entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL)) {
        k->exit &= ~VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL;
        k->entry &= ~VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL;
        if (pmu2)
            pr_warn("vmx", "no load-PERF_GLOBAL_CTRL controls: guest-programmed counters keep "
                           "running in the VMM (PEBS could write VMM memory)");
    }
    /* the PT controls are only turned on by the PT engine when it owns them */
    k->proc2 &= ~(SECONDARY_EXEC_PT_USE_GPA | SECONDARY_EXEC_PT_CONCEAL_VMX);
    uint64_t ev = c->ept_vpid;
    if (!(ev & VMX_EPT_PAGE_WALK_4_BIT) || !(ev & VMX_EPTP_WB_BIT)) {
        *why = "EPT lacks 4-level walks or write-back paging structures";
        return PTV_ENTRY_MISSING_CONTROL;
    }
    if (!(ev & VMX_EPT_INVEPT_BIT) ||
        !(ev & (VMX_EPT_EXTENT_GLOBAL_BIT | VMX_EPT_EXTENT_SINGLE_CONTEXT_BIT))) {
        *why = "INVEPT not supported";
        return PTV_ENTRY_MISSING_CONTROL;
    }
    if ((k->proc2 & SECONDARY_EXEC_ENABLE_VPID) && !(ev & VMX_VPID_INVVPID_BIT))
        k->proc2 &= ~SECONDARY_EXEC_ENABLE_VPID;
    k->guest_features = (k->proc2 & SECONDARY_EXEC_ENABLE_RDTSCP ? GUEST_FEAT_RDTSCP : 0) |
                        (k->proc2 & SECONDARY_EXEC_ENABLE_INVPCID ? GUEST_FEAT_INVPCID : 0) |
                        (k->proc2 & SECONDARY_EXEC_XSAVES ? GUEST_FEAT_XSAVES : 0) |
                        (k->proc2 & SECONDARY_EXEC_ENABLE_USR_WAIT_PAUSE ? GUEST_FEAT_WAITPKG : 0);
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
    uint8_t fail;
    asm volatile("vmxon %1; setna %0" : "=r"(fail) : "m"(v->vmxon_pa) : "cc", "memory");
    if (fail) {
        pr_err("vmx", "VMXON failed");
        write_cr4(cr4 & ~X86_CR4_VMXE);
        *status = PTV_ENTRY_VMX_FAILED;
        return -1;
    }
    asm volatile("vmclear %1; setna %0" : "=r"(fail) : "m"(v->vmcs_pa) : "cc", "memory");
    if (!fail)
        asm volatile("vmptrld %1; setna %0" : "=r"(fail) : "m"(v->vmcs_pa) : "cc", "memory");
    if (fail) {
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
    asm volatile("vmxoff" ::: "cc", "memory");
    write_cr4(read_cr4() & ~X86_CR4_VMXE);
}
