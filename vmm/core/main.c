/* SPDX-License-Identifier: MIT */
/*
 * VMM start-up, on the BSP first and then on every AP (the loader calls the
 * entry on each through EFI MP services): validate the handoff, build host
 * structures, turn VMX on, build a VMCS whose guest state is the caller
 * itself, and VMLAUNCH into it (the blue pill).  Then the exit loop runs on
 * this CPU's VMM stack for the lifetime of the machine.  What all CPUs share
 * (pool, host page tables, EPT, controls) is built once by the BSP.
 */
#include "base/vmm_state.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/handoff.h"
#include "base/log.h"
#include "trace/shim/trace_vmx.h"
#include "lbr/shim/lbr_vmx.h"
#include "host/paging.h"
#include "base/palloc.h"
#include "base/panic.h"
#include "hw/percpu.h"
#include "dev/serial.h"
#include "lib/ptv_string.h"
#include "vmx/vmx_cpu.h"
#include "smp/smp.h"
#include "vmx/vmx_caps_policy.h"
#include "iommu/shim/iommu_vmm.h"
#include "dev/uart_console.h"
#include <ptv/vmcall.h>

#define VMM_STACK_PAGES 8

static struct ptv_handoff *vmm_handoff;    /* the BSP's, once validated */
static volatile uint32_t vmm_global_ready; /* the BSP set up what all CPUs share */
static volatile uint32_t cpu_claimed[PTV_MAX_CPUS];

static void panic_dump(void)
{
    struct percpu *pc = this_cpu();
    if (pc->vcpu)
        vcpu_dump(pc->vcpu);
}

/*
 * This CPU becomes CPU `id` of the VMM: its struct percpu, reached through
 * GS.base from now on (the caller's GS.base is kept for the guest and put
 * back if the VMM does not start here).
 */
static bool percpu_enter(unsigned id)
{
    if (id >= PTV_MAX_CPUS || __atomic_exchange_n(&cpu_claimed[id], 1, __ATOMIC_SEQ_CST))
        return false;
    struct percpu *pc = &percpu_area[id];
    pc->self = pc;
    pc->id = id;
    struct cpuid_regs l1 = cpuid_count(1, 0);
    pc->apic_id = l1.ebx >> 24;
    pc->x2apic_id = pc->apic_id;
    if (cpuid_count(0, 0).eax >= 0xb && cpuid_count(0xb, 0).ebx)
        pc->x2apic_id = cpuid_count(0xb, 0).edx;
    pc->caller_gs_base = rdmsr(MSR_GS_BASE);
    wrmsr(MSR_GS_BASE, (uint64_t)(uintptr_t)pc);
    uint64_t apic_base;
    pc->bsp = !rdmsr_safe(MSR_IA32_APICBASE, &apic_base) && (apic_base & (1u << 8));
    return true;
}

static void percpu_leave(void)
{
    struct percpu *pc = this_cpu();
    wrmsr(MSR_GS_BASE, pc->caller_gs_base);
    __atomic_store_n(&cpu_claimed[pc->id], 0, __ATOMIC_SEQ_CST);
}

/* the vCPU's first exit: the caller now runs as the guest */
static void vcpu_first_exit(struct vcpu *v, const struct vmexit *e)
{
    (void)v;
    host_idt_activate();
    panic_dump_hook = panic_dump;
    pr_info("vmx", "launched: the caller now runs as the guest (first exit: %s)",
            vmx_exit_reason_name(e->reason));
}

/* the exit loop (vcpu/vcpu_loop.c vmx_loop) -- returns only if the very first VMLAUNCH fails
 * (then the caller is told) */
static uint64_t vcpu_loop(void *arg)
{
    struct vcpu *v = arg;
    if (this_cpu()->bsp) /* sw_trace = auto learns how to step (trace_boot: at the hand-off) */
        trace_vmx_probe_start(v);
    int err = vmx_loop(v, vcpu_first_exit);
    pr_err("vmx", "VMLAUNCH failed: %s",
           err > 0 ? vmx_insn_error_name((uint32_t)err) : "VMfailInvalid");
    return PTV_ENTRY_VMX_FAILED;
}

/* The exception fix-up path that every "safe" MSR access relies on: a write to
 * the now-locked IA32_FEATURE_CONTROL must #GP (SDM Vol. 3C 23.7) and come
 * back as an error.  A broken fix-up table panics here, at boot, not later on a
 * guest's MSR access. */
static void fixup_selftest(void)
{
    uint64_t fc;
    if (rdmsr_safe(MSR_IA32_FEAT_CTL, &fc) || !(fc & FEAT_CTL_LOCKED))
        return;
    if (wrmsr_safe(MSR_IA32_FEAT_CTL, fc))
        pr_info("vmm", "exception fix-up self-test: #GP caught and fixed up");
    else
        pr_info("vmm",
                "exception fix-up self-test not possible here (locked MSR write did not fault)");
}

/* what only the BSP does, once, before VMXON: the pool, the canary, host page tables,
 * the VMX capabilities and controls, the PT decision */
static int vmm_global_setup(struct ptv_handoff *h)
{
    const char *why;
    int st;
    palloc_init(h->pool_base, h->pool_size);
    vmm_span.base = h->vmm_base;
    vmm_span.size = h->pool_base + h->pool_size - h->vmm_base;
    if (!palloc_page(&vmm_canary_pa))
        return PTV_ENTRY_NO_MEMORY;
    vmm_canary_fill();
    if ((st = vmx_read_caps(&why)) || (st = vmx_choose_controls(&why))) {
        pr_err("vmx", "%s", why);
        return st;
    }
    /* NMIs exit, so the VMM's shootdown IPIs never reach the guest; virtual NMIs
     * track the guest's own NMI blocking (SDM Vol. 3C 25.3, 26.6.1.2) */
    uint32_t nmi = PIN_BASED_NMI_EXITING | PIN_BASED_VIRTUAL_NMIS;
    if (((vmx_caps.pin >> 32) & nmi) == nmi)
        vmx_ctls.pin |= nmi;
    uint64_t top = 4ull << 30;
    for (unsigned i = 0; i < h->nr_mem; i++)
        if (h->mem[i].base + h->mem[i].size > top)
            top = h->mem[i].base + h->mem[i].size;
    vmm_host_cr3 = host_paging_build(top);
    if (!vmm_host_cr3)
        return PTV_ENTRY_NO_MEMORY;
    pt_probe(h->cfg.pt_mode);
    smp_init(vmx_invept_all);
    uart_console_relax_with(smp_relax); /* a console waiter still answers shootdowns */
    return 0;
}

/* this CPU's own structures: host GDT/TSS/IDT, exit stack, vCPU */
static int vmm_cpu_setup(struct ptv_handoff *h, struct desc_ptr *fw_idt)
{
    struct percpu *pc = this_cpu();
    struct vcpu *v = palloc_pages((sizeof(*v) + PAGE_SIZE - 1) / PAGE_SIZE, NULL);
    void *stack = palloc_pages(VMM_STACK_PAGES, NULL);
    if (!v || !stack || host_desc_init())
        return PTV_ENTRY_NO_MEMORY;
    sidt(fw_idt);
    host_idt_load();      /* from here on MSR probes survive #GP */
    lbr_vmx_root_enter(); /* the caller's LBR/BTS settings become the guest's, off in root */
    pc->stack_top = (uint64_t)(uintptr_t)stack + VMM_STACK_PAGES * PAGE_SIZE;
    pc->vcpu = v;
    v->id = pc->id;
    v->handoff = h;
    v->canary_pa = vmm_canary_pa;
    v->ept = &vm.ept;
    v->ept_od = &vm.ept_od;
    v->guest_idtr = *fw_idt;
    return 0;
}

static __attribute__((noreturn)) void park_in_root(int st);

/* VMXON and the VMCS whose guest is the caller; the BSP builds the shared EPT here */
static int vmm_cpu_vmx(struct ptv_handoff *h, struct caller_state *cs, bool bsp)
{
    struct vcpu *v = this_cpu()->vcpu;
    int st;
    if (vmx_on(v, &st))
        return st;
    if (bsp) {
        fixup_selftest();
        vmm_selfcheck_boot();
        if (vm_ept_setup(h)) {
            vmx_off();
            return PTV_ENTRY_NO_MEMORY;
        }
    }
    if (vmcs_setup(v, cs)) { /* out of pool, or a guest state VM entry would refuse */
        if (!bsp)            /* an AP never goes back bare once VMX is on */
            park_in_root(PTV_ENTRY_VMX_FAILED);
        vmx_off();
        return PTV_ENTRY_VMX_FAILED;
    }
    if (bsp) /* the last step before the launch: only a failing VMLAUNCH comes after it */
        iommu_setup(h, &vm.ept);
    pr_info("vmm", "pool: %lu KiB used, %lu KiB free", (h->pool_size - palloc_free_bytes()) >> 10,
            palloc_free_bytes() >> 10);
    pr_info("vmx", "launching the caller as guest at RIP %#lx", cs->rip);
    return 0;
}

/* only failures get here: leave the CPU as the caller had it */
static int vmm_not_started(int st, const struct desc_ptr *fw_idt, uint64_t rflags)
{
    struct vcpu *v = this_cpu()->vcpu;
    if (st != PTV_ENTRY_OK && v && v->vmxon_pa && (read_cr4() & X86_CR4_VMXE))
        vmx_off();
    if (fw_idt->base)
        lidt(fw_idt);
    pr_err("vmm", "not started on this CPU (status %d)", st);
    lbr_vmx_root_leave(); /* the caller's DEBUGCTL / LBR_CTL back */
    percpu_leave();
    if (rflags & X86_EFLAGS_IF)
        sti();
    return st;
}

/*
 * An AP that entered VMX but cannot run the guest stays in VMX root, where INIT
 * is blocked (SDM Vol. 3C 24.8 / 26.2): the guest can never wake it outside
 * the VMM.  It has never taken a VM exit, so it still runs on the firmware's
 * page tables, GDT, IDT gates and stack -- guest memory: first it moves onto
 * its own (host CR3 with EFER.NXE/CR0.WP, host GDT/TR/IDT, its VMM stack), so
 * an NMI the guest sends it runs VMM code through VMM tables only.  Nobody
 * waits for it in a shootdown (state OFF).
 */
static uint64_t park_here(void *arg)
{
    wrmsr(MSR_EFER, host_paging_efer(rdmsr(MSR_EFER)));
    write_cr0(host_paging_cr0(read_cr0()));
    write_cr3(vmm_host_cr3);
    host_desc_switch();
    halt_forever();
}

static __attribute__((noreturn)) void park_in_root(int st)
{
    pr_err("smp", "cannot run the guest here (status %d): CPU parked in VMX root, INIT blocked",
           st);
    run_on_stack(this_cpu()->stack_top, park_here, NULL);
    halt_forever();
}

static int vmm_bsp_main(struct ptv_handoff *h, struct caller_state *cs)
{
    const char *why;
    if (ptv_handoff_check(h, &why))
        return PTV_ENTRY_BAD_HANDOFF; /* no serial settings to trust yet: the loader reports */
    uint64_t rflags = read_rflags();
    cli();
    if (!percpu_enter(0))
        return PTV_ENTRY_BAD_HANDOFF;
    vmm_cfg = &h->cfg;
    serial_init(h->cfg.serial_port, h->cfg.serial_baud);
    log_set_level(h->cfg.log_level);
    pr_info("vmm", "ptvisor VMM %s: image %#lx+%#lx, pool %#lx+%#lx, %u memory ranges", PTV_VERSION,
            h->vmm_base, h->vmm_size, h->pool_base, h->pool_size, h->nr_mem);
    struct desc_ptr fw_idt = {0};
    int st = vmm_global_setup(h);
    if (!st)
        st = vmm_cpu_setup(h, &fw_idt);
    if (!st)
        st = vmm_cpu_vmx(h, cs, true);
    if (!st) {
        vmm_handoff = h;
        __atomic_store_n(&vmm_global_ready, 1, __ATOMIC_SEQ_CST);
        smp_set_state(SD_CPU_ACTIVE);
        st = (int)run_on_stack(this_cpu()->stack_top, vcpu_loop, this_cpu()->vcpu);
        smp_set_state(SD_CPU_OFF);
        __atomic_store_n(&vmm_global_ready, 0, __ATOMIC_SEQ_CST);
    }
    pr_err("vmm", "the loader boots the guest natively");
    return vmm_not_started(st, &fw_idt, rflags);
}

/*
 * An AP, called by the loader through EFI MP services after the BSP runs as
 * the guest: the same blue pill on this CPU, sharing the BSP's EPT, controls
 * and pool.  A failure before VMXON returns (the loader parks the CPU with
 * interrupts off and says so); after VMXON the CPU parks in VMX root.
 */
static int vmm_ap_main(struct ptv_handoff *h, struct caller_state *cs, unsigned cpu)
{
    if (!__atomic_load_n(&vmm_global_ready, __ATOMIC_SEQ_CST) || h != vmm_handoff)
        return PTV_ENTRY_BAD_HANDOFF;
    uint64_t rflags = read_rflags();
    cli();
    if (!percpu_enter(cpu))
        return PTV_ENTRY_BAD_HANDOFF;
    pr_info("smp", "AP %u (APIC ID %u) joining", cpu, this_cpu()->apic_id);
    struct desc_ptr fw_idt = {0};
    int st = vmm_cpu_setup(h, &fw_idt);
    struct vmx_caps mine;
    const char *why;
    /* the BSP's controls and EPT are shared: only a CPU with the same VMX capabilities */
    if (!st && ((st = vmx_read_caps_cpu(&mine, &why)) || !vmx_caps_same(&vmx_caps, &mine, &why))) {
        pr_err("smp", "%s", why);
        st = st ? st : PTV_ENTRY_MISSING_CONTROL;
    }
    if (!st)
        st = vmm_cpu_vmx(h, cs, false);
    if (!st) {
        /* without the wait-for-SIPI activity state a guest's SIPI never reaches the
         * VMM, without NMI exiting the VMM's IPIs reach the guest: the AP stays in root */
        if (!vmx_can_virtualize_aps(&(struct vmx_cpu_profile){.caps = vmx_caps}, &why)) {
            pr_err("smp", "%s", why);
            park_in_root(PTV_ENTRY_MISSING_CONTROL);
        }
        smp_set_state(SD_CPU_ACTIVE);
        st = (int)run_on_stack(this_cpu()->stack_top, vcpu_loop, this_cpu()->vcpu);
        smp_set_state(SD_CPU_OFF);
        park_in_root(st);
    }
    return vmm_not_started(st, &fw_idt, rflags);
}

int vmm_main(struct ptv_handoff *h, struct caller_state *cs, uint64_t cpu)
{
    return cpu == 0 ? vmm_bsp_main(h, cs) : vmm_ap_main(h, cs, (unsigned)cpu);
}
