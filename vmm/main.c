/* SPDX-License-Identifier: MIT */
/*
 * VMM start-up on the BSP: validate the handoff, build host structures, turn
 * VMX on, build a VMCS whose guest state is the caller itself, and VMLAUNCH
 * into it (the blue pill).  Then the exit loop runs on the VMM's own stack for
 * the lifetime of the machine.
 */
#include "vmm.h"
#include "cpu.h"
#include "desc.h"
#include "handoff.h"
#include "log.h"
#include "paging.h"
#include "palloc.h"
#include "panic.h"
#include "percpu.h"
#include "serial.h"
#include "lib/ptv_string.h"
#include "vmx/vmx_cpu.h"
#include <ptv/vmcall.h>

#define VMM_STACK_PAGES 8

unsigned ptv_cpu_id;
struct vmm_span vmm_span;
const struct ptv_config *vmm_cfg;
uint64_t vmm_host_cr3, vmm_stack_top;

static struct vcpu bsp_vcpu;

static void canary_fill(uint8_t *page)
{
    static const char pat[16] = PTV_CANARY_PATTERN;
    for (unsigned i = 0; i < PAGE_SIZE; i += sizeof(pat))
        memcpy(page + i, pat, sizeof(pat));
}

bool vmm_canary_intact(const struct vcpu *v)
{
    static const char pat[16] = PTV_CANARY_PATTERN;
    const uint8_t *page = (const uint8_t *)(uintptr_t)v->canary_pa;
    for (unsigned i = 0; i < PAGE_SIZE; i += sizeof(pat))
        if (memcmp(page + i, pat, sizeof(pat)))
            return false;
    return true;
}

static void panic_dump(void)
{
    vcpu_dump(&bsp_vcpu);
}

/* the exit loop: for (;;) { vmx_run(); handle(); } -- returns only if the very first
 * VMLAUNCH fails (then the caller is told and boots natively) */
static uint64_t vcpu_loop(void *arg)
{
    struct vcpu *v = arg;
    for (;;) {
        struct vmexit e;
        int err = vmx_run(v, &e);
        if (err) {
            if (!v->launched) {
                pr_err("vmx", "VMLAUNCH failed: %s",
                       err > 0 ? vmx_insn_error_name((uint32_t)err) : "VMfailInvalid");
                return PTV_ENTRY_VMX_FAILED;
            }
            panic("VMRESUME failed: %s",
                  err > 0 ? vmx_insn_error_name((uint32_t)err) : "VMfailInvalid");
        }
        if (v->exits_total == 1) {
            host_idt_activate();
            panic_dump_hook = panic_dump;
            pr_info("vmx", "launched: the caller now runs as the guest (first exit: %s)",
                    vmx_exit_reason_name(e.reason));
        }
        switch (vmx_handle_exit(v, &e)) {
        case EXIT_STOP_GUEST:
            vcpu_stop_guest(v, vmx_exit_reason_name(e.reason));
        default:
            break;
        }
    }
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

static int vmm_setup(struct ptv_handoff *h, struct caller_state *cs, struct desc_ptr *fw_idt)
{
    const char *why;
    int st;
    struct vcpu *v = &bsp_vcpu;
    palloc_init(h->pool_base, h->pool_size);
    vmm_span.base = h->vmm_base;
    vmm_span.size = h->pool_base + h->pool_size - h->vmm_base;
    v->handoff = h;
    if (!palloc_page(&v->canary_pa))
        return PTV_ENTRY_NO_MEMORY;
    canary_fill((uint8_t *)(uintptr_t)v->canary_pa);
    if (host_desc_init())
        return PTV_ENTRY_NO_MEMORY;
    asm volatile("sidt %0" : "=m"(*fw_idt));
    v->guest_idtr = *fw_idt;
    host_idt_load(); /* from here on MSR probes survive #GP */
    if ((st = vmx_read_caps(&why)) || (st = vmx_choose_controls(&why))) {
        pr_err("vmx", "%s", why);
        return st;
    }
    uint64_t top = 4ull << 30;
    for (unsigned i = 0; i < h->nr_mem; i++)
        if (h->mem[i].base + h->mem[i].size > top)
            top = h->mem[i].base + h->mem[i].size;
    vmm_host_cr3 = host_paging_build(top);
    void *stack = palloc_pages(VMM_STACK_PAGES, NULL);
    if (!vmm_host_cr3 || !stack)
        return PTV_ENTRY_NO_MEMORY;
    vmm_stack_top = (uint64_t)(uintptr_t)stack + VMM_STACK_PAGES * PAGE_SIZE;
    pt_probe(h->cfg.pt_mode);
    if (vmx_on(v, &st))
        return st;
    fixup_selftest();
    vmm_selfcheck_boot();
    if (vmcs_setup(v, cs)) { /* out of pool, or a guest state VM entry would refuse */
        vmx_off();
        return PTV_ENTRY_VMX_FAILED;
    }
    pr_info("vmm", "pool: %lu KiB used, %lu KiB free", (h->pool_size - palloc_free_bytes()) >> 10,
            palloc_free_bytes() >> 10);
    pr_info("vmx", "launching the caller as guest at RIP %#lx", cs->rip);
    return 0;
}

int vmm_main(struct ptv_handoff *h, struct caller_state *cs)
{
    const char *why;
    if (ptv_handoff_check(h, &why))
        return PTV_ENTRY_BAD_HANDOFF; /* no serial settings to trust yet: the loader reports */
    vmm_cfg = &h->cfg;
    serial_init(h->cfg.serial_port, h->cfg.serial_baud);
    log_set_level(h->cfg.log_level);
    pr_info("vmm", "ptvisor VMM %s: image %#lx+%#lx, pool %#lx+%#lx, %u memory ranges", PTV_VERSION,
            h->vmm_base, h->vmm_size, h->pool_base, h->pool_size, h->nr_mem);
    uint64_t rflags = read_rflags();
    cli();
    struct desc_ptr fw_idt = {0};
    int st = vmm_setup(h, cs, &fw_idt);
    if (!st)
        st = (int)run_on_stack(vmm_stack_top, vcpu_loop, &bsp_vcpu);
    /* only failures get here: leave the CPU as the caller had it */
    if (st != PTV_ENTRY_OK && bsp_vcpu.vmxon_pa && (read_cr4() & X86_CR4_VMXE))
        vmx_off();
    if (fw_idt.base)
        asm volatile("lidt %0" ::"m"(fw_idt));
    if (rflags & X86_EFLAGS_IF)
        asm volatile("sti");
    pr_err("vmm", "not started (status %d): the loader boots the guest natively", st);
    return st;
}

void machine_crash_action(unsigned action)
{
    if (action == PTV_CRASH_REBOOT) {
        pr_err("vmm", "rebooting");
        outb(0xcf9, 0x06); /* PCI reset control: hard reset */
        outb(0x64, 0xfe);  /* keyboard controller pulse */
    } else if (action == PTV_CRASH_POWEROFF) {
        pr_err("vmm", "powering off");
        static const char bochs_shutdown[] = "Shutdown";
        for (const char *p = bochs_shutdown; *p; p++)
            outb(0x8900, (uint8_t)*p); /* Bochs/QEMU-isa shutdown port */
        outw(0x604, 0x2000);           /* QEMU q35/PIIX ACPI PM1a S5 */
        outb(0xf4, 0);                 /* QEMU isa-debug-exit */
    }
    pr_err("vmm", "halted");
    halt_forever();
}
