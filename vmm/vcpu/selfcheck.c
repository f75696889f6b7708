/* SPDX-License-Identifier: MIT */
/*
 * The VMM's invariants, checked in VMX root on request (PTV_VMCALL_SELFCHECK):
 * what a hostile guest must never be able to change about the VMM's own
 * execution environment.  The adversarial suite (tests/guest/attack*.c) asks
 * after every attack.  A bit is reported in `checked` only where this CPU has
 * the feature; a bit in `failed` is an invariant that does not hold.
 */
#include "vmx/vcpu.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "base/vmm_state.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "host/paging.h"
#include "pt/rtit.h"
#include "emul/guest_policy.h"
#include "emul/emul_policy.h"
#include "lbr/shim/lbr_vmx.h"
#include "dev/uart_console.h"
#include <ptv/vmcall.h>

#define CPUID_1_EDX_APIC       (1u << 9)
#define CPUID_1_EDX_MTRR       (1u << 12)
#define CPUID_A_EAX_VERSION(a) ((a)&0xff)
#define UART_MCR               4
#define UART_MCR_LOOP          0x10

static uint64_t boot_apic_base;
/* what this CPU has, read once at set-up: CPUID in root later would answer what a guest
 * made of it (IA32_MISC_ENABLE[22] limits the basic leaves) */
static bool have_apic, have_perf_global, have_mtrr;

void vmm_selfcheck_boot(void)
{
    struct cpuid_regs l1 = cpuid_count(1, 0);
    have_apic = l1.edx & CPUID_1_EDX_APIC;
    if (have_apic && rdmsr_safe(MSR_IA32_APICBASE, &boot_apic_base))
        have_apic = false;
    /* architectural perfmon v2+ has IA32_PERF_GLOBAL_CTRL (SDM Vol. 3B 20.2.2) */
    have_perf_global =
        cpuid_count(0, 0).eax >= 0xa && CPUID_A_EAX_VERSION(cpuid_count(0xa, 0).eax) >= 2;
    have_mtrr = l1.edx & CPUID_1_EDX_MTRR;
}

static void check(struct vmm_selfcheck *c, uint32_t bit, bool holds)
{
    c->checked |= bit;
    if (!holds)
        c->failed |= bit;
}

struct vmm_selfcheck vmm_selfcheck(const struct vcpu *v)
{
    struct vmm_selfcheck c = {0, 0};
    uint64_t val;
    check(&c, PTV_SELFCHECK_CANARY, vmm_canary_intact());
    if (have_perf_global && !rdmsr_safe(MSR_CORE_PERF_GLOBAL_CTRL, &val))
        check(&c, PTV_SELFCHECK_PERF_GLOBAL, val == 0);
    /* no LBR/BTS record of root: VM exit clears IA32_DEBUGCTL (SDM Vol. 3C 28.5.1) and, where
     * the CPU has arch LBR, IA32_LBR_CTL is 0 too (lbr/shim/lbr_vmx.c, lbr_root_check()) */
    bool quiet;
    if (lbr_vmx_root_check(&quiet))
        check(&c, PTV_SELFCHECK_DEBUGCTL, quiet);
    if (host_paging_checkable())
        check(&c, PTV_SELFCHECK_HOST_WX, host_paging_wx_free());
    /* the base address only: the guest may legitimately switch EN / x2APIC mode */
    if (have_apic && !rdmsr_safe(MSR_IA32_APICBASE, &val))
        check(&c, PTV_SELFCHECK_APIC_BASE, apic_base_addr(val) == apic_base_addr(boot_apic_base));
    if (have_mtrr)
        check(&c, PTV_SELFCHECK_MTRR, vmx_host_mtrrs_unchanged());
    /* the VMM traces only the guest: root runs with TraceEn = 0 */
    /* pt_host_caps: CPUID.7 as read at boot (pt_probe.c) */
    if (pt_host_caps.cpuid7_ebx & (1u << 25) && !rdmsr_safe(MSR_IA32_RTIT_CTL, &val))
        check(&c, PTV_SELFCHECK_RTIT, !(val & RTIT_CTL_TRACEEN));
    if (!rdmsr_safe(MSR_IA32_XSS, &val))
        check(&c, PTV_SELFCHECK_XSS, !(val & GUEST_XSS_HIDDEN));
    /* not looped, and the line the VMM set: the guest's LCR / divisor / MCR are virtual */
    if (vmm_cfg->serial_port)
        check(&c, PTV_SELFCHECK_UART,
              !(inb(vmm_cfg->serial_port + UART_MCR) & UART_MCR_LOOP) && console_line_intact());
    /* the copies the exit path reads instead of the VMCS (vmx_entry.S, vcpu_loop.c): HOST_RSP as
     * vmx_enter last wrote it (0: not yet), the guest's GLOBAL_CTRL where the VMCS loads it */
    bool copies = true;
    if (v->regs.host_rsp && (__vmread(HOST_RSP, &val) || val != v->regs.host_rsp))
        copies = false;
    if ((vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) &&
        (__vmread(GUEST_IA32_PERF_GLOBAL_CTRL, &val) || val != v->guest_perf_global))
        copies = false;
    check(&c, PTV_SELFCHECK_VMCS_COPY, copies);
    return c;
}
