/* SPDX-License-Identifier: MIT */
#include "fakes/vmm_boot.h"
#include "fakes/vmm_world.h"
#include "fakes/vmx_profiles.h"
#include "../../boot/config.h"
#include "base/vmm_state.h"
#include "ept/mtrr.h"
#include "hw/percpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <sanitizer/common_interface_defs.h>

static struct vcpu *booted;
void (*fake_boot_config)(struct ptv_config *cfg);

static void set_cpu(void)
{
    const struct vmx_caps *c = &vmx_profiles[PROFILE_SKYLAKE].vmx.caps;
    fake_msr_set(MSR_IA32_VMX_BASIC, c->basic);
    fake_msr_set(MSR_IA32_VMX_MISC, c->misc);
    fake_msr_set(MSR_IA32_VMX_EPT_VPID_CAP, c->ept_vpid);
    fake_msr_set(MSR_IA32_VMX_TRUE_PINBASED_CTLS, c->pin);
    fake_msr_set(MSR_IA32_VMX_TRUE_PROCBASED_CTLS, c->proc);
    fake_msr_set(MSR_IA32_VMX_PINBASED_CTLS, c->pin);
    fake_msr_set(MSR_IA32_VMX_PROCBASED_CTLS, c->proc);
    fake_msr_set(MSR_IA32_VMX_PROCBASED_CTLS2, c->proc2);
    fake_msr_set(MSR_IA32_VMX_TRUE_EXIT_CTLS, c->exit);
    fake_msr_set(MSR_IA32_VMX_TRUE_ENTRY_CTLS, c->entry);
    fake_msr_set(MSR_IA32_VMX_EXIT_CTLS, c->exit);
    fake_msr_set(MSR_IA32_VMX_ENTRY_CTLS, c->entry);
    fake_msr_set(MSR_IA32_VMX_CR0_FIXED0, c->cr0_fixed0);
    fake_msr_set(MSR_IA32_VMX_CR0_FIXED1, c->cr0_fixed1);
    fake_msr_set(MSR_IA32_VMX_CR4_FIXED0, c->cr4_fixed0);
    fake_msr_set(MSR_IA32_VMX_CR4_FIXED1, c->cr4_fixed1);
    fake_msr_set(MSR_IA32_FEAT_CTL, FEAT_CTL_LOCKED | FEAT_CTL_VMX_OUTSIDE_SMX);
    fake_msr_gp_on_write(MSR_IA32_FEAT_CTL, true); /* locked */
    fake_msr_set(MSR_IA32_APICBASE, FAKE_APIC_BASE | 1u << 11 | 1u << 10 | 1u << 8);
    fake_msr_set(MSR_EFER, EFER_LME | EFER_LMA | 1u << 11 | 1u); /* + NXE, SCE */
    fake_msr_set(MSR_FS_BASE, 0);
    fake_msr_set(MSR_GS_BASE, 0);
    fake_msr_set(MSR_LSTAR, 0);
    fake_msr_set(MSR_IA32_CR_PAT, 0x0007040600070406ull);
    fake_msr_set(MSR_IA32_SYSENTER_CS, 0);
    fake_msr_set(MSR_IA32_SYSENTER_ESP, 0);
    fake_msr_set(MSR_IA32_SYSENTER_EIP, 0);
    fake_msr_set(MSR_IA32_DEBUGCTLMSR, 0);
    fake_msr_set(MSR_IA32_BIOS_SIGN_ID, 0xf000000000ull);
    fake_msr_set(MSR_MTRRcap, 0x508); /* 8 variable, fixed, WC */
    fake_msr_set(MSR_MTRRdefType, 0xc06);
    fake_msr_set(MSR_MTRRfix64K_00000, 0x0606060606060606ull);
    fake_msr_set(MSR_MTRRfix16K_80000, 0x0606060606060606ull);
    fake_msr_set(MSR_MTRRfix16K_A0000, 0);
    for (uint32_t m = MSR_MTRRfix4K_C0000; m <= 0x26f; m++)
        fake_msr_set(m, 0x0505050505050505ull);
    for (uint32_t m = 0x200; m < 0x210; m++)
        fake_msr_set(m, 0);
    /* PMU v4 (4 general counters, 3 fixed), its debug store and LBRs (32 entries) */
    static const uint32_t pmu[] = {0xc1,  0xc2,  0xc3,  0xc4,  0x186, 0x187, 0x188, 0x189,
                                   0x309, 0x30a, 0x30b, 0x38d, 0x38e, 0x38f, 0x390, 0x3f1,
                                   0x600, 0x1c8, 0x1c9, 0x345, 0x1a0, 0x10,  0x3a};
    for (unsigned i = 0; i < sizeof(pmu) / sizeof(pmu[0]); i++)
        if (pmu[i] != 0x3a)
            fake_msr_set(pmu[i], 0);
    for (uint32_t m = 0; m < 32; m++) {
        fake_msr_set(0x680 + m, 0);
        fake_msr_set(0x6c0 + m, 0);
        fake_msr_set(0xdc0 + m, 0);
    }
    for (uint32_t m = 0x800; m < 0x840; m++) /* x2APIC registers */
        fake_msr_set(m, 0);

    const struct cpu_profile *p = &vmx_profiles[PROFILE_SKYLAKE];
    fake_cpuid_set(0, 0, 0x16, 0x756e6547, 0x6c65746e, 0x49656e69);
    fake_cpuid_set(1, 0, 0x906e9, 0x00100800, 0x7ffafbff & ~(1u << 31), 0xbfebfbff);
    fake_cpuid_set(7, 0, 0, p->vmx.caps.proc2 ? p->cpuid7_ebx & ~(1u << 25) : 0, 0, 0);
    fake_cpuid_set(0xa, 0, 0x07300400u | p->vmx.pmu_version, 0, 0, 0x603);
    fake_cpuid_set(0xd, 0, 0x7, 0x340, 0x340, 0);
    fake_cpuid_set(0x80000000, 0, 0x80000008, 0, 0, 0);
    fake_cpuid_set(0x80000001, 0, 0, 0, 0x121, 0x2c100800);
    fake_cpuid_set(0x80000008, 0, 39 | 48 << 8, 0, 0, 0);

    fake_cpu.cr0 = 0x80050033; /* PG, WP, NE, ET, MP, PE */
    fake_cpu.cr3 = FAKE_RAM_BASE + 0x10000;
    fake_cpu.cr4 = 0x406a0; /* OSXSAVE, OSXMMEXCPT, OSFXSR, PGE, PAE */
    fake_cpu.rflags = 0x202;
    fake_cpu.xcr0 = 7;
    fake_cpu.cs = 0x38;
    fake_cpu.ds = fake_cpu.es = fake_cpu.ss = fake_cpu.fs = fake_cpu.gs = 0x30;
    fake_cpu.gdt_base = FAKE_RAM_BASE + 0x1000;
    fake_cpu.gdt_limit = 0x47;
    fake_cpu.idt_base = FAKE_RAM_BASE + 0x2000;
    fake_cpu.idt_limit = 0xfff;
}

/* the firmware's GDT, as UEFI has it: 64-bit code at 0x38, data at 0x30; its page tables: the
 * first GiB identity mapped by one 1-GiB page (guest RAM lies in it) */
static void set_gdt(void)
{
    uint64_t *gdt = (uint64_t *)(uintptr_t)(FAKE_RAM_BASE + 0x1000);
    gdt[0x30 >> 3] = 0x00cf93000000ffffull;
    gdt[0x38 >> 3] = 0x00af9b000000ffffull;
    uint64_t *pml4 = (uint64_t *)(uintptr_t)(FAKE_RAM_BASE + 0x10000);
    uint64_t *pdpt = (uint64_t *)(uintptr_t)(FAKE_RAM_BASE + 0x11000);
    pml4[0] = (FAKE_RAM_BASE + 0x11000) | 3;
    pdpt[0] = 0x83; /* 1 GiB page at 0: present, writable, PS */
}

static void set_handoff(struct ptv_handoff *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = PTV_HANDOFF_MAGIC;
    h->version = PTV_HANDOFF_VERSION;
    h->size = sizeof(*h);
    h->vmm_base = FAKE_VMM_BASE;
    h->vmm_size = FAKE_VMM_SIZE;
    h->pool_base = FAKE_POOL_BASE;
    h->pool_size = FAKE_POOL_SIZE;
    h->nr_mem = 2;
    h->mem[0] = (struct ptv_mem_range){FAKE_RAM_BASE, FAKE_RAM_SIZE, PTV_MEM_RAM, 0};
    h->mem[1] =
        (struct ptv_mem_range){FAKE_VMM_BASE, FAKE_VMM_SIZE + FAKE_POOL_SIZE, PTV_MEM_VMM, 0};
    ptv_config_defaults(&h->cfg);
    h->cfg.serial_port = 0x3f8;
    h->cfg.pool_size = FAKE_POOL_SIZE;
    h->cfg.log_level = PTV_LOG_DEBUG;
    if (fake_boot_config)
        fake_boot_config(&h->cfg);
}

/*
 * The VMM runs as a coroutine on a stack of its own (ucontext): at every VM entry (vmx_enter ->
 * guest_step) it hands the CPU to the test, which scripts the guest's next exit and hands it
 * back; vmx_enter then returns that exit.  So each entry happens once, with the state the VMM
 * left for it, as on the CPU.  A halt (halt_forever) leaves the VMM's context for good; the next
 * exit starts the exit loop again on this vCPU (vmx_loop, as if the CPU were resumed).
 */
static ucontext_t test_ctx, vmm_ctx;
static void *vmm_stack;
#define VMM_STACK_SIZE (1u << 20)
static bool vmm_alive;
static struct vcpu *loop_vcpu;
static struct ptv_handoff *boot_h;
static struct caller_state boot_cs;
static int boot_status = -1;
static const struct fake_exit *pending;
static uint32_t injected, injected_before;

/* the sanitizer follows the switches between the two stacks (else it takes the VMM's stack for
 * a corrupt one of the test's) */
static void *test_fake_stack, *vmm_fake_stack;
static const void *test_stack_bottom;
static size_t test_stack_size;

static void to_vmm(void)
{
    __sanitizer_start_switch_fiber(&test_fake_stack, vmm_stack, VMM_STACK_SIZE);
    swapcontext(&test_ctx, &vmm_ctx);
    __sanitizer_finish_switch_fiber(test_fake_stack, NULL, NULL);
}

/* from the VMM's stack to the test's; returns when the test hands the CPU back (never when
 * the VMM is done) */
static void to_test(bool done)
{
    __sanitizer_start_switch_fiber(done ? NULL : &vmm_fake_stack, test_stack_bottom,
                                   test_stack_size);
    swapcontext(&vmm_ctx, &test_ctx);
    __sanitizer_finish_switch_fiber(vmm_fake_stack, &test_stack_bottom, &test_stack_size);
}

static void leave_vmm(void)
{
    vmm_alive = false;
    to_test(true);
    abort();
}

/* the VMM's halt: its context is left where it is */
static void halt_hook(void)
{
    leave_vmm();
}

static void load_exit(const struct fake_exit *x)
{
    fake_vmcs_set(VM_EXIT_REASON, x->reason);
    fake_vmcs_set(EXIT_QUALIFICATION, x->qual);
    fake_vmcs_set(VM_EXIT_INSTRUCTION_LEN, x->insn_len);
    fake_vmcs_set(VM_EXIT_INTR_INFO, x->intr_info);
    fake_vmcs_set(VM_EXIT_INTR_ERROR_CODE, x->intr_error);
    fake_vmcs_set(IDT_VECTORING_INFO_FIELD, x->idt_vec_info);
    fake_vmcs_set(IDT_VECTORING_ERROR_CODE, x->idt_vec_error);
    fake_vmcs_set(GUEST_PHYSICAL_ADDRESS, x->gpa);
    if (x->set_intr)
        fake_vmcs_set(GUEST_INTERRUPTIBILITY_INFO, x->intr);
}

/* vmx_enter: the guest runs (the test's turn) until its next exit */
static void guest_step(void *ctx)
{
    (void)ctx;
    /* the event this entry delivers, consumed as the CPU does */
    injected = (uint32_t)fake_vmcs_get(VM_ENTRY_INTR_INFO_FIELD);
    fake_vmcs_set(VM_ENTRY_INTR_INFO_FIELD, 0);
    to_test(false);
    struct fake_exit x = *pending;
    pending = NULL;
    if (x.at_entry)
        x.at_entry(&x);
    load_exit(&x);
}

uint32_t fake_take_injected_before(void)
{
    uint32_t i = injected_before;
    injected_before = 0;
    return i;
}

uint32_t fake_take_injected(void)
{
    uint32_t i = injected;
    injected = 0;
    return i;
}

static void first_exit(struct vcpu *v, const struct vmexit *e)
{
    (void)v;
    (void)e;
}

static void vmm_boot_main(void)
{
    __sanitizer_finish_switch_fiber(NULL, &test_stack_bottom, &test_stack_size);
    boot_status = vmm_main(boot_h, &boot_cs, 0);
    leave_vmm();
}

static void vmm_loop_main(void)
{
    __sanitizer_finish_switch_fiber(NULL, &test_stack_bottom, &test_stack_size);
    vmx_loop(loop_vcpu, first_exit);
    leave_vmm();
}

/* run fn as the VMM up to its first VM entry */
static void vmm_start(void (*fn)(void))
{
    if (!vmm_stack && !(vmm_stack = malloc(VMM_STACK_SIZE)))
        abort();
    getcontext(&vmm_ctx);
    vmm_ctx.uc_stack.ss_sp = vmm_stack;
    vmm_ctx.uc_stack.ss_size = VMM_STACK_SIZE;
    vmm_ctx.uc_link = NULL;
    makecontext(&vmm_ctx, fn, 0);
    vmm_alive = true;
    fake_guest = guest_step;
    fake_halt_hook = halt_hook;
    to_vmm();
}

bool fake_run_exit(struct vcpu *v, const struct fake_exit *x)
{
    if (!vmm_alive) {
        loop_vcpu = v;
        vmm_start(vmm_loop_main);
        if (!vmm_alive)
            return false;
    }
    pending = x;
    injected_before = injected;
    injected = 0;
    to_vmm();
    return vmm_alive;
}

struct vcpu *fake_vmm_boot(void)
{
    if (booted)
        return booted;
    fake_world_reset();
    void *mem =
        mmap((void *)(uintptr_t)FAKE_RAM_BASE, FAKE_RAM_SIZE + FAKE_VMM_SIZE + FAKE_POOL_SIZE,
             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    void *apic = mmap((void *)(uintptr_t)FAKE_APIC_BASE, 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (mem != (void *)(uintptr_t)FAKE_RAM_BASE || apic != (void *)(uintptr_t)FAKE_APIC_BASE) {
        perror("fake_vmm_boot: mmap of the fake physical memory");
        return NULL;
    }
    set_cpu();
    set_gdt();
    struct ptv_handoff *h = (struct ptv_handoff *)(uintptr_t)FAKE_VMM_BASE;
    set_handoff(h);
    boot_h = h;
    boot_cs = (struct caller_state){
        .rflags = 0x202, .rip = FAKE_GUEST_RIP, .rsp = FAKE_RAM_BASE + 0x8000};
    vmm_start(vmm_boot_main);
    /* the guest's first exit: the monitor trap flag the start-up's probe armed (this CPU
     * delivers it: the software tracer steps with MTF) */
    static const struct fake_exit first = {.reason = EXIT_REASON_MONITOR_TRAP_FLAG};
    if (!vmm_alive || !fake_run_exit(percpu_area[0].vcpu, &first)) {
        fake_console[fake_console_len] = 0;
        fprintf(stderr, "fake_vmm_boot: the VMM did not launch (status %d); console:\n%s\n",
                boot_status, fake_console);
        return NULL;
    }
    booted = percpu_area[0].vcpu;
    return booted;
}
