/* SPDX-License-Identifier: MIT */
/*
 * The VMM's exit handlers, exit loop and start-up, the real sources, on the fake machine of
 * tests/fakes/vmm_world.c: booted by vmm_main() as the loader would call it, then driven one VM
 * exit at a time through vmx_loop(), with the results read back from the fake VMCS, the vCPU's
 * registers and the serial console.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fakes/vmm_boot.h"
#include "fakes/vmm_world.h"
#include "base/vmm_state.h"
#include "hw/percpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "ept/mtrr.h"
#include "ept/ept.h"
#include "base/log.h"
#include <ptv/vmcall.h>

static struct vcpu *v;

static int setup(void **state)
{
    v = fake_vmm_boot();
    return v ? 0 : -1;
}

static void set_rip(uint64_t rip)
{
    fake_vmcs_set(GUEST_RIP, rip);
}

static uint64_t rip(void)
{
    return fake_vmcs_get(GUEST_RIP);
}

/* the VMM may never crash the machine on a plain RDMSR/WRMSR, never VMfail, never touch its
 * canary */
static void assert_vmm_sound(void)
{
    assert_int_equal(fake_root_faults, 0);
    assert_int_equal(fake_vmcs_fails, 0);
    assert_true(vmm_canary_intact());
}

static void assert_injected(uint32_t vector, bool has_error)
{
    uint32_t info = fake_take_injected();
    assert_true(info & INTR_INFO_VALID);
    assert_int_equal(info & 0xff, vector);
    assert_int_equal(info & INTR_INFO_INTR_TYPE_MASK, INTR_TYPE_HARD_EXCEPTION);
    assert_int_equal(!!(info & INTR_INFO_DELIVER_CODE), has_error);
}

static void test_boot(void **state)
{
    assert_non_null(v);
    assert_true(v->launched);
    assert_true(fake_console_has("launching the caller as guest"));
    assert_int_equal(fake_vmcs_get(GUEST_RIP), FAKE_GUEST_RIP);
    assert_false(v->mtf_probe); /* the MTF probe saw its exit */
    assert_vmm_sound();
}

static void test_cpuid(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RAX] = 0;
    v->regs.gpr[GPR_RCX] = 0;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_CPUID, .insn_len = 2}));
    assert_int_equal(rip(), 0x10200002);
    assert_int_equal(v->regs.gpr[GPR_RBX], 0x756e6547); /* "Genu" */
    assert_int_equal(fake_take_injected(), 0);
    /* leaf 1: the guest is told there is no VMX */
    v->regs.gpr[GPR_RAX] = 1;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_CPUID, .insn_len = 2}));
    assert_int_equal(v->regs.gpr[GPR_RCX] & (1u << 5), 0);
    assert_int_equal(rip(), 0x10200004);
    assert_vmm_sound();
}

static void test_vmcall_version(void **state)
{
    set_rip(0x10200000);
    fake_vmcs_set(GUEST_CS_AR_BYTES, 0xa09b); /* CPL 0 */
    fake_vmcs_set(GUEST_SS_AR_BYTES, 0xc093);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_VERSION;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMCALL, .insn_len = 3}));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], PTV_VMCALL_ABI_VERSION);
    assert_int_equal(rip(), 0x10200003);
    /* a number no VMCALL has */
    v->regs.gpr[GPR_RAX] = 0x7fff;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMCALL, .insn_len = 3}));
    assert_int_equal((int64_t)v->regs.gpr[GPR_RAX], PTV_VMCALL_ENOSYS);
    assert_vmm_sound();
}

static void test_vmx_insn_ud(void **state)
{
    set_rip(0x10200000);
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMON, .insn_len = 4}));
    assert_int_equal(rip(), 0x10200000); /* not skipped */
    assert_injected(UD_VECTOR, false);
    assert_vmm_sound();
}

static bool run(uint32_t reason, uint64_t qual, uint32_t len)
{
    fake_vmcs_clear_written();
    return fake_run_exit(v, &(struct fake_exit){.reason = reason, .qual = qual, .insn_len = len});
}

static void cpl(unsigned n)
{
    fake_vmcs_set(GUEST_CS_AR_BYTES, n ? 0xa0fb : 0xa09b);
    fake_vmcs_set(GUEST_SS_AR_BYTES, n ? 0xc0f3 : 0xc093);
}

/* RDMSR of the APIC base: the guest's copy, not the real MSR */
static void test_msr_read_owned(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RCX] = MSR_IA32_APICBASE;
    v->regs.gpr[GPR_RAX] = v->regs.gpr[GPR_RDX] = 0xdead;
    assert_true(run(EXIT_REASON_MSR_READ, 0, 2));
    assert_int_equal(v->regs.gpr[GPR_RAX] | v->regs.gpr[GPR_RDX] << 32, v->apic_base);
    assert_int_equal(rip(), 0x10200002);
    assert_int_equal(fake_take_injected(), 0);
    assert_vmm_sound();
}

/* the VMX capability MSRs: the guest was told there is no VMX -> #GP, RIP stays */
static void test_msr_refused(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RCX] = MSR_IA32_VMX_BASIC;
    assert_true(run(EXIT_REASON_MSR_READ, 0, 2));
    assert_int_equal(rip(), 0x10200000);
    assert_injected(GP_VECTOR, true);
    v->regs.gpr[GPR_RCX] = MSR_IA32_VMX_BASIC;
    assert_true(run(EXIT_REASON_MSR_WRITE, 0, 2));
    assert_int_equal(rip(), 0x10200000);
    assert_injected(GP_VECTOR, true);
    /* an MSR no CPU has: the real RDMSR #GPs under the fix-up, the guest gets the #GP */
    v->regs.gpr[GPR_RCX] = 0x4fff0000;
    assert_true(run(EXIT_REASON_MSR_READ, 0, 2));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), 0x10200000);
    assert_vmm_sound();
}

/* MTRRs: the guest's copy; a reserved memory type #GPs */
static void test_msr_mtrr(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RCX] = MSR_MTRRdefType;
    v->regs.gpr[GPR_RAX] = 0xc06;
    v->regs.gpr[GPR_RDX] = 0;
    assert_true(run(EXIT_REASON_MSR_WRITE, 0, 2));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(rip(), 0x10200002);
    v->regs.gpr[GPR_RCX] = MSR_MTRRdefType;
    v->regs.gpr[GPR_RAX] = 0xc02; /* type 2 is reserved */
    assert_true(run(EXIT_REASON_MSR_WRITE, 0, 2));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), 0x10200002);
    assert_vmm_sound();
}

#define CR_MOV_TO(cr, gpr) ((uint64_t)(cr) | (uint64_t)(gpr) << 8)

/* MOV to CR3 with bit 63 set while CR4.PCIDE is clear: #GP (SDM Vol. 2A MOV CR) */
static void test_cr3(void **state)
{
    set_rip(0x10200000);
    uint64_t cr3 = fake_vmcs_get(GUEST_CR3);
    fake_vmcs_set(CR4_READ_SHADOW, fake_vmcs_get(CR4_READ_SHADOW) & ~(1ull << 17));
    fake_vmcs_set(GUEST_CR4, fake_vmcs_get(GUEST_CR4) & ~(1ull << 17));
    v->regs.gpr[GPR_RBX] = 1ull << 63 | (FAKE_RAM_BASE + 0x20000);
    assert_true(run(EXIT_REASON_CR_ACCESS, CR_MOV_TO(3, GPR_RBX), 3));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), 0x10200000);
    assert_int_equal(fake_vmcs_get(GUEST_CR3), cr3);
    /* a plain one is loaded */
    v->regs.gpr[GPR_RBX] = FAKE_RAM_BASE + 0x20000;
    assert_true(run(EXIT_REASON_CR_ACCESS, CR_MOV_TO(3, GPR_RBX), 3));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(fake_vmcs_get(GUEST_CR3), FAKE_RAM_BASE + 0x20000);
    assert_int_equal(rip(), 0x10200003);
    assert_vmm_sound();
}

/* MOV to CR4 setting VMXE: the guest has no VMX -> #GP; the shadow keeps the guest's view */
static void test_cr4(void **state)
{
    set_rip(0x10200000);
    uint64_t shadow = fake_vmcs_get(CR4_READ_SHADOW);
    v->regs.gpr[GPR_RDX] = shadow | X86_CR4_VMXE;
    assert_true(run(EXIT_REASON_CR_ACCESS, CR_MOV_TO(4, GPR_RDX), 3));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(fake_vmcs_get(CR4_READ_SHADOW), shadow);
    /* the same value: accepted, and the real CR4 keeps VMXE (VMX requires it) */
    v->regs.gpr[GPR_RDX] = shadow;
    assert_true(run(EXIT_REASON_CR_ACCESS, CR_MOV_TO(4, GPR_RDX), 3));
    assert_int_equal(fake_take_injected(), 0);
    assert_true(fake_vmcs_get(GUEST_CR4) & X86_CR4_VMXE);
    assert_int_equal(rip(), 0x10200003);
    /* MOV to CR0 clearing PE with PG set: #GP */
    v->regs.gpr[GPR_RDX] = fake_vmcs_get(CR0_READ_SHADOW) & ~X86_CR0_PE;
    assert_true(run(EXIT_REASON_CR_ACCESS, CR_MOV_TO(0, GPR_RDX), 3));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), 0x10200003);
    assert_vmm_sound();
}

#define IO_QUAL(port, size, in) ((uint64_t)(port) << 16 | ((size)-1) | ((in) ? 8u : 0u))

/* OUT to the UART's data port: the byte reaches the console through the multiplexer */
static void test_io_uart(void **state)
{
    set_rip(0x10200000);
    fake_console_clear();
    const char *msg = "hello from the guest\r\n";
    for (const char *p = msg; *p; p++) {
        v->regs.gpr[GPR_RAX] = (uint8_t)*p;
        assert_true(run(EXIT_REASON_IO_INSTRUCTION, IO_QUAL(0x3f8, 1, false), 1));
    }
    assert_int_equal(rip(), 0x10200000 + strlen(msg));
    assert_true(fake_console_has("hello from the guest"));
    /* IN of the line status: a byte merged into AL, the rest of RAX kept */
    v->regs.gpr[GPR_RAX] = 0x1122334455667700ull;
    assert_true(run(EXIT_REASON_IO_INSTRUCTION, IO_QUAL(0x3fd, 1, true), 1));
    assert_int_equal(v->regs.gpr[GPR_RAX] & ~0xffull, 0x1122334455667700ull);
    assert_true(v->regs.gpr[GPR_RAX] & 0x20); /* THR empty */
    /* string I/O to the UART is not emulated: #GP */
    uint64_t r = rip();
    assert_true(run(EXIT_REASON_IO_INSTRUCTION, IO_QUAL(0x3f8, 1, false) | 16, 2));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), r);
    /* a size the CPU never reports (qualification bits 2:0 = 7: 8 bytes) is refused, RAX kept */
    v->regs.gpr[GPR_RAX] = 0x1122334455667788ull;
    assert_true(run(EXIT_REASON_IO_INSTRUCTION, (IO_QUAL(0x3f8, 1, true) & ~7ull) | 7, 1));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(rip(), r);
    assert_int_equal(v->regs.gpr[GPR_RAX], 0x1122334455667788ull);
    assert_vmm_sound();
}

/* XSETBV: x87 must stay set (#GP); a valid value reaches the real XCR0 */
static void test_xsetbv(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RCX] = 0;
    v->regs.gpr[GPR_RAX] = 6;
    v->regs.gpr[GPR_RDX] = 0;
    assert_true(run(EXIT_REASON_XSETBV, 0, 3));
    assert_injected(GP_VECTOR, true);
    v->regs.gpr[GPR_RAX] = 3;
    assert_true(run(EXIT_REASON_XSETBV, 0, 3));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(fake_cpu.xcr0, 3);
    assert_int_equal(rip(), 0x10200003);
    assert_vmm_sound();
}

/* INVD is emulated as WBINVD (never discard the VMM's dirty lines) */
static void test_invd(void **state)
{
    set_rip(0x10200000);
    unsigned long before = fake_cpu.wbinvds;
    assert_true(run(EXIT_REASON_INVD, 0, 2));
    assert_int_equal(fake_cpu.wbinvds, before + 1);
    assert_int_equal(rip(), 0x10200002);
    assert_vmm_sound();
}

/* an exit the VMM never enabled (RDTSC exiting is off): #UD, the VMM carries on */
static void test_unexpected_exit(void **state)
{
    set_rip(0x10200000);
    assert_true(run(EXIT_REASON_RDTSC, 0, 2));
    assert_injected(UD_VECTOR, false);
    assert_int_equal(rip(), 0x10200000);
    assert_vmm_sound();
}

/* VMCALLs from CPL 3 are refused unless the configuration allows them */
static void test_vmcall_cpl3(void **state)
{
    set_rip(0x10200000);
    cpl(3);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_VMM_RANGE;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal((int64_t)v->regs.gpr[GPR_RAX], PTV_VMCALL_EPERM);
    cpl(0);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_VMM_RANGE;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], vmm_span.base);
    assert_int_equal(rip(), 0x10200006);
    /* the canary VMCALL: intact */
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_CHECK_CANARY;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_vmm_sound();
}

/* the self-check VMCALL: every check the VMM can make of itself passes on this machine */
static void test_selfcheck(void **state)
{
    cpl(0);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_SELFCHECK;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    struct vmm_selfcheck c = vmm_selfcheck(v);
    if (c.failed)
        fprintf(stderr, "self-check failed: %#x of %#x\n", c.failed, c.checked);
    assert_int_equal(c.failed, 0);
    assert_true(c.checked != 0);
    assert_vmm_sound();
}

/* a guest write to the VMM's memory: logged, counted, then the access lands on the sink page
 * (the guest goes on, the canary stays); a fetch there is #GP */
static void test_ept_violation_vmm(void **state)
{
    set_rip(0x10200000);
    uint64_t blocked = v->ept_blocked, hpa = 0;
    unsigned perms = 0;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_WRITE,
                                                     .insn_len = 3,
                                                     .gpa = vmm_canary_pa + 8}));
    assert_int_equal(v->ept_blocked, blocked + 1);
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(rip(), 0x10200000); /* retried, on the sink */
    assert_int_equal(ept_translate(v->ept, vmm_canary_pa, &hpa, &perms, NULL, NULL), 0);
    assert_int_equal(hpa, vm.sink_pa);
    assert_int_equal(perms & EPT_X, 0);
    assert_true(fake_console_has("of VMM memory"));
    /* a fetch from VMM memory */
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_INSTR,
                                                     .gpa = FAKE_VMM_BASE + 0x10000}));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(v->ept_blocked, blocked + 2);
    assert_vmm_sound();
}

/* device memory the map does not name is mapped on demand; an address beyond the EPT's walk
 * is #GP */
static void test_ept_violation_guest(void **state)
{
    set_rip(0x10200000);
    uint64_t hpa = 0;
    unsigned perms = 0;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_READ,
                                                     .gpa = 0xfed00000}));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(ept_translate(v->ept, 0xfed00000, &hpa, &perms, NULL, NULL), 0);
    assert_int_equal(hpa, 0xfed00000);
    uint64_t unmappable = v->ept_unmappable;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_READ,
                                                     .gpa = 1ull << 50}));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(v->ept_unmappable, unmappable + 1);
    assert_vmm_sound();
}

/* an exception that exited is reflected exactly (a #PF with its CR2); an NMI that exited and
 * was not the VMM's is owed to the guest and injected at the next entry */
static void test_exception_nmi(void **state)
{
    set_rip(0x10200000);
    uint32_t pf = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | INTR_INFO_DELIVER_CODE | PF_VECTOR;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EXCEPTION_NMI,
                                                     .qual = 0xdead000,
                                                     .intr_info = pf,
                                                     .intr_error = 6}));
    assert_int_equal(fake_take_injected(), pf);
    assert_int_equal(fake_vmcs_get(VM_ENTRY_EXCEPTION_ERROR_CODE), 6);
    assert_int_equal(fake_cpu.cr2, 0xdead000);
    assert_int_equal(rip(), 0x10200000);
    unsigned long unblocks = fake_cpu.nmi_unblocks;
    fake_vmcs_set(GUEST_INTERRUPTIBILITY_INFO, 0);
    assert_true(fake_run_exit(
        v, &(struct fake_exit){.reason = EXIT_REASON_EXCEPTION_NMI,
                               .intr_info = INTR_INFO_VALID | INTR_TYPE_NMI_INTR | NMI_VECTOR}));
    assert_int_equal(fake_cpu.nmi_unblocks, unblocks + 1);
    assert_int_equal(fake_take_injected(), INTR_INFO_VALID | INTR_TYPE_NMI_INTR | NMI_VECTOR);
    assert_int_equal(percpu_area[0].nmi_owed, 0);
    assert_vmm_sound();
}

/* INIT on the BSP: the architectural reset state at the reset vector (SDM Vol. 3A 9.1.1); a
 * SIPI outside wait-for-SIPI changes nothing */
static void test_init_sipi(void **state)
{
    set_rip(0x10200000);
    assert_true(run(EXIT_REASON_INIT_SIGNAL, 0, 0));
    assert_int_equal(rip(), 0xfff0);
    assert_int_equal(fake_vmcs_get(GUEST_CS_BASE), 0xffff0000);
    assert_int_equal(fake_vmcs_get(GUEST_CS_SELECTOR), 0xf000);
    assert_int_equal(fake_vmcs_get(CR0_READ_SHADOW), 0x10); /* ET; CD and NW kept (they were 0) */
    assert_int_equal(fake_vmcs_get(GUEST_IA32_EFER), 0);
    assert_int_equal(fake_vmcs_get(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE, 0);
    assert_int_equal(v->regs.gpr[GPR_RDX] >> 8, 0x906); /* family/model */
    assert_true(fake_console_has("the BSP restarts at the reset vector"));
    assert_true(run(EXIT_REASON_SIPI_SIGNAL, 0x9a, 0));
    assert_int_equal(rip(), 0xfff0);
    assert_int_equal(fake_vmcs_get(GUEST_CS_BASE), 0xffff0000);
    assert_vmm_sound();
}

/* the VMX-preemption timer with no dump going: nothing happens, the guest resumes */
static void test_preemption_timer(void **state)
{
    set_rip(0x10200000);
    assert_true(run(EXIT_REASON_PREEMPTION_TIMER, 0, 0));
    assert_int_equal(rip(), 0x10200000);
    assert_int_equal(fake_take_injected(), 0);
    assert_vmm_sound();
}

/* the software tracer: TRACE_START over a few guest NOPs stepped by MTF exits, TRACE_STOP
 * counts them and the ring holds packets */
static void test_trace_window(void **state)
{
    uint8_t *code = (uint8_t *)(uintptr_t)0x10300000;
    memset(code, 0x90, 64); /* NOPs */
    set_rip(0x10300000 - 3);
    cpl(0);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_START;
    v->regs.gpr[GPR_RBX] = PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER;
    v->regs.gpr[GPR_R8] = 0;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], PTV_TRACE_SRC_SOFTWARE);
    assert_true(v->trace_stepping);
    assert_int_equal(rip(), 0x10300000);
    for (unsigned i = 1; i <= 8; i++) { /* the CPU runs one NOP and exits (MTF) */
        set_rip(0x10300000 + i);
        assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
        assert_int_equal(fake_take_injected(), 0);
    }
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_STOP;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    fprintf(stderr, "trace: %lu bytes, %lu instructions, flags %#lx\n",
            (unsigned long)v->regs.gpr[GPR_RBX], (unsigned long)v->regs.gpr[GPR_RCX],
            (unsigned long)v->regs.gpr[GPR_RDX]);
    assert_true(v->regs.gpr[GPR_RCX] >= 8); /* instructions stepped */
    assert_true(v->regs.gpr[GPR_RBX] > 0);  /* bytes of packets */
    assert_false(v->trace_stepping);
    assert_vmm_sound();
}

/* the mode-based execute control in the vCPU's secondary controls */
static bool mbec_on(void)
{
    return fake_vmcs_get(SECONDARY_VM_EXEC_CONTROL) & SECONDARY_EXEC_MODE_BASED_EPT_EXEC;
}

/* a user-mode fetch that EPT's mode-based execute control refused, at rip */
static void user_fetch_exit(uint64_t at)
{
    set_rip(at);
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_INSTR | 0x38,
                                                     .gpa = at}));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(rip(), at); /* retried, now stepped */
}

/*
 * A user-only window on a CPU with EPT's mode-based execute control (trace_step.c): at CPL 0
 * the vCPU runs free with the control on (a fresh INVEPT each way), the user-mode fetch that
 * ends the span is the tracer's (retried, no stale-violation INVEPT, no injection) and stepping
 * resumes with the control off; a user-mode page the kernel runs is stepped once, then free again
 */
static void test_trace_free_cpl(void **state)
{
    uint8_t *code = (uint8_t *)(uintptr_t)0x10300000;
    memset(code, 0x90, 64); /* NOPs: the kernel at +0, user code at +32 */
    const uint64_t proc2 = vmx_caps.proc2;
    vmx_caps.proc2 |= (uint64_t)SECONDARY_EXEC_MODE_BASED_EPT_EXEC << 32;
    set_rip(0x10300000 - 3);
    cpl(0);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_START;
    v->regs.gpr[GPR_RBX] = PTV_TRACE_F_USER;
    v->regs.gpr[GPR_R8] = 0;
    uint64_t invepts = fake_cpu.invepts, stale = v->ept_stale;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_true(v->trace_free && v->trace_free_cpl && mbec_on());
    assert_true(fake_cpu.invepts > invepts);
    /* the kernel returns to user mode: caught at the fetch of its first instruction */
    cpl(3);
    invepts = fake_cpu.invepts;
    user_fetch_exit(0x10300020);
    assert_false(v->trace_free || mbec_on());
    assert_true(fake_cpu.invepts > invepts);
    assert_int_equal(v->ept_stale, stale);
    assert_true(v->trace_stepping);
    set_rip(0x10300021); /* one user instruction stepped */
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_false(v->trace_free);
    /* back at CPL 0 (a system call), free again; then the kernel runs a user-mode page */
    cpl(0);
    set_rip(0x10300000);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_true(v->trace_free_cpl && mbec_on());
    user_fetch_exit(0x10300028);
    assert_false(v->trace_free || mbec_on()); /* that instruction is stepped */
    set_rip(0x10300029);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_true(v->trace_free_cpl && mbec_on()); /* and free again after it */
    /* the way back as a #PF of the first user fetch (a page not present yet): it exits while
     * free, is reflected, and the control, the #PF exit and its mask and match go */
    assert_true(fake_vmcs_get(EXCEPTION_BITMAP) & 1u << PF_VECTOR);
    assert_int_equal(fake_vmcs_get(PAGE_FAULT_ERROR_CODE_MASK), 0x14);
    cpl(3);
    set_rip(0x10300030);
    assert_true(
        fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EXCEPTION_NMI,
                                             .intr_info = INTR_INFO_VALID | INTR_INFO_DELIVER_CODE |
                                                          INTR_TYPE_HARD_EXCEPTION | PF_VECTOR,
                                             .intr_error = 0x14,
                                             .qual = 0x10300030}));
    assert_injected(PF_VECTOR, true);
    assert_false(v->trace_free || mbec_on());
    assert_false(fake_vmcs_get(EXCEPTION_BITMAP) & 1u << PF_VECTOR);
    assert_int_equal(fake_vmcs_get(PAGE_FAULT_ERROR_CODE_MASK), 0);
    assert_int_equal(fake_vmcs_get(PAGE_FAULT_ERROR_CODE_MATCH), 0);
    /* the handler at CPL 0: free again */
    cpl(0);
    set_rip(0x10300000);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_true(v->trace_free_cpl && mbec_on());
    /* a fetch refused by the EPT's own rights (VMM memory: not executable at all) is not the
     * tracer's: the VMM's answer, #GP, as ever */
    uint64_t blocked = v->ept_blocked;
    cpl(3);
    set_rip(0x10300020);
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_EPT_VIOLATION,
                                                     .qual = EPT_VIOLATION_ACC_INSTR,
                                                     .gpa = FAKE_VMM_BASE + 0x10000}));
    assert_injected(GP_VECTOR, true);
    assert_int_equal(v->ept_blocked, blocked + 1);
    assert_false(v->trace_free || mbec_on());
    cpl(0);
    set_rip(0x10300000);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_true(v->trace_free_cpl && mbec_on());
    /* CPL 0 with paging off (after INIT, say): every fetch would be user-mode to the control,
     * so no free running there */
    uint64_t cr0 = fake_vmcs_get(GUEST_CR0);
    fake_vmcs_set(GUEST_CR0, cr0 & ~X86_CR0_PG);
    set_rip(0x10300001);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_false(v->trace_free || mbec_on());
    fake_vmcs_set(GUEST_CR0, cr0);
    set_rip(0x10300002);
    assert_true(run(EXIT_REASON_MONITOR_TRAP_FLAG, 0, 0));
    assert_true(v->trace_free_cpl && mbec_on());
    /* TRACE_STATUS says so; TRACE_STOP turns the control off */
    set_rip(0x10300000);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_STATUS;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_true(v->regs.gpr[GPR_RBX] & PTV_TRACE_ST_FREE_CPL);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_STOP;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_false(v->trace_stepping || v->trace_free || mbec_on());
    assert_int_equal(v->ept_stale, stale);
    vmx_caps.proc2 = proc2;
    assert_vmm_sound();
}

static uint64_t vmcall(uint64_t nr, uint64_t rbx, uint64_t rcx, uint64_t rdx)
{
    cpl(0);
    v->regs.gpr[GPR_RAX] = nr;
    v->regs.gpr[GPR_RBX] = rbx;
    v->regs.gpr[GPR_RCX] = rcx;
    v->regs.gpr[GPR_RDX] = rdx;
    uint64_t r = rip();
    assert_true(run(EXIT_REASON_VMCALL, 0, 3));
    assert_int_equal(rip(), r + 3);
    assert_int_equal(fake_take_injected(), 0);
    return v->regs.gpr[GPR_RAX];
}

/* the statistics VMCALLs, and the trace ring of test_trace_window read into guest memory and
 * dumped over the serial line */
static void test_vmcall_stats_and_trace(void **state)
{
    set_rip(0x10200000);
    assert_int_equal(vmcall(PTV_VMCALL_EXIT_STATS, EXIT_REASON_CPUID, 0, 0), PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], v->exits_total);
    assert_int_equal(v->regs.gpr[GPR_RCX], v->exits_by_reason[EXIT_REASON_CPUID]);
    assert_true(v->regs.gpr[GPR_RCX] >= 2);
    assert_int_equal(vmcall(PTV_VMCALL_VMM_STATS, 0, 0, 0), PTV_VMCALL_OK);
    assert_true(v->regs.gpr[GPR_RBX] > 0 && v->regs.gpr[GPR_RBX] < FAKE_POOL_SIZE / 4096);
    assert_int_equal(v->regs.gpr[GPR_RDX], log_lines);
    assert_int_equal(vmcall(PTV_VMCALL_SMP_STATS, 0, 0, 0), PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], 0); /* this CPU */
    assert_int_equal(v->regs.gpr[GPR_RCX], 1); /* CPUs online */
    assert_int_equal(v->regs.gpr[GPR_R10], v->exits_total);
    assert_int_equal(vmcall(PTV_VMCALL_EPT_BLOCKED, 0, 0, 0), PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], v->ept_blocked);
    assert_int_equal(vmcall(PTV_VMCALL_EPT_DROP, 0, 0, 0), PTV_VMCALL_OK);
    assert_int_equal(vmcall(PTV_VMCALL_DMA_STATS, 0, 0, 0), PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], 0); /* no VT-d unit on this machine */
    /* the ring: TRACE_STATUS, then TRACE_READ into guest RAM */
    assert_int_equal(vmcall(PTV_VMCALL_TRACE_STATUS, 0, 0, 0), PTV_VMCALL_OK);
    assert_true(v->regs.gpr[GPR_RBX] & PTV_TRACE_ST_SOFTWARE);
    assert_false(v->regs.gpr[GPR_RBX] & PTV_TRACE_ST_ON);
    uint64_t written = v->regs.gpr[GPR_RDX];
    assert_true(written > 0);
    uint8_t *buf = (uint8_t *)(uintptr_t)0x10400000;
    memset(buf, 0xee, 4096);
    assert_int_equal(vmcall(PTV_VMCALL_TRACE_READ, 0x10400000, 4096, 0), PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], written); /* bytes copied */
    assert_int_equal(buf[0], 0x02);                  /* PSB: 02 82, eight times */
    assert_int_equal(buf[1], 0x82);
    assert_int_equal(buf[written], 0xee);
    /* into the VMM's memory: refused, the canary stays */
    assert_int_equal((int64_t)vmcall(PTV_VMCALL_TRACE_READ, vmm_canary_pa, 4096, 0),
                     PTV_VMCALL_EINVAL);
    assert_true(vmm_canary_intact());
    /* TRACE_DUMP: the dump goes out in slices between guest runs, paced by the preemption
     * timer */
    fake_console_clear();
    assert_int_equal(vmcall(PTV_VMCALL_TRACE_DUMP, 0, 0, 0), PTV_VMCALL_OK);
    for (unsigned i = 0; i < 100000 && v->dumping; i++)
        assert_true(run(EXIT_REASON_PREEMPTION_TIMER, 0, 0));
    assert_false(v->dumping);
    assert_true(fake_console_has("done:"));
    assert_vmm_sound();
}

/* a task switch while the guest runs 64-bit code: IA-32e mode has no task switching -> #UD */
static void test_task_switch_64(void **state)
{
    set_rip(0x10200000);
    assert_true(run(EXIT_REASON_TASK_SWITCH, 0x40 | 2u << 30 /* JMP */, 7));
    assert_injected(UD_VECTOR, false);
    assert_int_equal(rip(), 0x10200000);
    assert_vmm_sound();
}

/* an NMI the VMM took in root for the guest: the next entry injects it when the guest can take
 * one, else NMI-window exiting waits for the blocking to end */
static void test_owed_nmi(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RAX] = 0;
    fake_vmcs_set(GUEST_INTERRUPTIBILITY_INFO, 0);
    percpu_area[0].nmi_owed = 1;
    assert_true(run(EXIT_REASON_CPUID, 0, 2)); /* the NMI came while root handled the exit */
    assert_int_equal(fake_take_injected(), INTR_INFO_VALID | INTR_TYPE_NMI_INTR | NMI_VECTOR);
    assert_int_equal(percpu_area[0].nmi_owed, 0);
    /* blocked by MOV SS: not injected, NMI-window exiting armed (an exit that resumes at the
     * same RIP keeps the blocking; a skipped instruction would end it and inject at once); the
     * window exit delivers it */
    fake_vmcs_set(GUEST_INTERRUPTIBILITY_INFO, GUEST_INTR_STATE_MOV_SS);
    percpu_area[0].nmi_owed = 1;
    assert_true(run(EXIT_REASON_PREEMPTION_TIMER, 0, 0));
    assert_int_equal(fake_take_injected(), 0);
    assert_true(v->nmi_window);
    assert_true(fake_vmcs_get(CPU_BASED_VM_EXEC_CONTROL) & CPU_BASED_NMI_WINDOW_EXITING);
    /* the blocking ends: the window exit */
    assert_true(
        fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_NMI_WINDOW, .set_intr = true}));
    assert_int_equal(fake_take_injected(), INTR_INFO_VALID | INTR_TYPE_NMI_INTR | NMI_VECTOR);
    assert_false(v->nmi_window);
    assert_vmm_sound();
}

static uint64_t tss_desc(uint32_t base, unsigned type)
{
    return 0x67 | (uint64_t)(base & 0xffffff) << 16 | (uint64_t)type << 40 | 1ull << 47 |
           (uint64_t)(base >> 24) << 56;
}

/* a JMP to a 32-bit TSS in protected mode: the old task's state saved in its TSS, the new one
 * loaded from its TSS, the busy bits moved (SDM Vol. 3A 7.3) */
static void test_task_switch_32(void **state)
{
    uint64_t *gdt = (uint64_t *)(uintptr_t)0x10004000;
    uint32_t old_tss = 0x10005000, new_tss = 0x10006000;
    memset(gdt, 0, 0x58);
    gdt[1] = 0x00cf9b000000ffffull;   /* 0x08: flat 32-bit code */
    gdt[2] = 0x00cf93000000ffffull;   /* 0x10: flat data */
    gdt[9] = tss_desc(old_tss, 0xb);  /* 0x48: the current task, busy */
    gdt[10] = tss_desc(new_tss, 0x9); /* 0x50: available */
    uint32_t *t = (uint32_t *)(uintptr_t)new_tss;
    memset(t, 0, 0x68);
    memset((void *)(uintptr_t)old_tss, 0, 0x68);
    t[0x20 / 4] = 0x10201000; /* EIP */
    t[0x24 / 4] = 0x2;        /* EFLAGS */
    t[0x28 / 4] = 0x1234;     /* EAX */
    t[0x38 / 4] = 0x10008000; /* ESP */
    t[0x4c / 4] = 0x08;       /* CS */
    t[0x48 / 4] = t[0x50 / 4] = t[0x54 / 4] = t[0x58 / 4] = t[0x5c / 4] = 0x10;
    /* the guest: protected mode, no paging, 32-bit code */
    fake_vmcs_set(CR0_READ_SHADOW, X86_CR0_PE | 0x10);
    fake_vmcs_set(GUEST_CR0, (X86_CR0_PE | 0x10 | v->cr0_fixed0) & ~X86_CR0_PG);
    fake_vmcs_set(CR4_READ_SHADOW, 0);
    fake_vmcs_set(GUEST_CR4, X86_CR4_VMXE);
    fake_vmcs_set(GUEST_IA32_EFER, 0);
    fake_vmcs_set(VM_ENTRY_CONTROLS, fake_vmcs_get(VM_ENTRY_CONTROLS) & ~VM_ENTRY_IA32E_MODE);
    fake_vmcs_set(GUEST_GDTR_BASE, 0x10004000);
    fake_vmcs_set(GUEST_GDTR_LIMIT, 0x57);
    fake_vmcs_set(GUEST_CS_SELECTOR, 0x08);
    fake_vmcs_set(GUEST_CS_BASE, 0);
    fake_vmcs_set(GUEST_CS_LIMIT, 0xffffffff);
    fake_vmcs_set(GUEST_CS_AR_BYTES, 0xc09b);
    static const uint32_t data_seg[][4] = {
        {GUEST_SS_SELECTOR, GUEST_SS_LIMIT, GUEST_SS_AR_BYTES, GUEST_SS_BASE},
        {GUEST_DS_SELECTOR, GUEST_DS_LIMIT, GUEST_DS_AR_BYTES, GUEST_DS_BASE},
        {GUEST_ES_SELECTOR, GUEST_ES_LIMIT, GUEST_ES_AR_BYTES, GUEST_ES_BASE},
        {GUEST_FS_SELECTOR, GUEST_FS_LIMIT, GUEST_FS_AR_BYTES, GUEST_FS_BASE},
        {GUEST_GS_SELECTOR, GUEST_GS_LIMIT, GUEST_GS_AR_BYTES, GUEST_GS_BASE},
    };
    for (unsigned i = 0; i < 5; i++) {
        fake_vmcs_set(data_seg[i][0], 0x10);
        fake_vmcs_set(data_seg[i][1], 0xffffffff);
        fake_vmcs_set(data_seg[i][2], 0xc093);
        fake_vmcs_set(data_seg[i][3], 0);
    }
    fake_vmcs_set(GUEST_TR_SELECTOR, 0x48);
    fake_vmcs_set(GUEST_TR_BASE, old_tss);
    fake_vmcs_set(GUEST_TR_LIMIT, 0x67);
    fake_vmcs_set(GUEST_TR_AR_BYTES, 0x8b);
    fake_vmcs_set(GUEST_LDTR_AR_BYTES, 0x10000);
    fake_vmcs_set(GUEST_RFLAGS, 0x2);
    set_rip(0x10200000);
    v->regs.gpr[GPR_RAX] = 0xaaaa;
    assert_true(run(EXIT_REASON_TASK_SWITCH, 0x50 | 2u << 30 /* JMP */, 7));
    assert_int_equal(fake_take_injected(), 0);
    assert_int_equal(rip(), 0x10201000);
    assert_int_equal(v->regs.gpr[GPR_RAX], 0x1234);
    assert_int_equal(fake_vmcs_get(GUEST_RSP), 0x10008000);
    assert_int_equal(fake_vmcs_get(GUEST_TR_SELECTOR), 0x50);
    assert_int_equal(fake_vmcs_get(GUEST_TR_BASE), new_tss);
    const uint32_t *o = (const uint32_t *)(uintptr_t)old_tss;
    assert_int_equal(o[0x20 / 4], 0x10200007); /* the old task resumes after the JMP */
    assert_int_equal(o[0x28 / 4], 0xaaaa);
    assert_int_equal(gdt[9] >> 40 & 0xf, 0x9);  /* JMP: the old task no longer busy */
    assert_int_equal(gdt[10] >> 40 & 0xf, 0xb); /* the new one busy */
    assert_vmm_sound();
}

/* a triple fault stops the guest: the crash report on the console, then the crash action
 * (halt: back to the test) */
static void test_triple_fault(void **state)
{
    set_rip(0x10200000);
    fake_console_clear();
    unsigned long halts = fake_halts;
    assert_false(run(EXIT_REASON_TRIPLE_FAULT, 0, 0));
    assert_int_equal(fake_halts, halts + 1);
    assert_true(fake_console_has("guest triple fault"));
    assert_true(fake_console_has("guest stopped"));
    assert_true(fake_console_has("halted"));
    assert_vmm_sound();
}

/* a failed VM entry (invalid guest state) stops the guest the same way */
static void test_entry_failure(void **state)
{
    fake_console_clear();
    unsigned long halts = fake_halts;
    assert_false(run(VMX_EXIT_REASONS_FAILED_VMENTRY | EXIT_REASON_INVALID_STATE, 0, 0));
    assert_int_equal(fake_halts, halts + 1);
    assert_true(fake_console_has("VM entry failed"));
    assert_true(fake_console_has("guest stopped"));
    assert_vmm_sound();
}

/* a VMREAD that fails (no current VMCS) is a VMM bug: the panic names the field and the
 * VM-instruction error, then the VMM halts */
static void test_vmcs_failure_panics(void **state)
{
    fake_console_clear();
    fake_vmcs_current = false;
    unsigned long halts = fake_halts;
    assert_false(run(EXIT_REASON_CPUID, 0, 2));
    fake_vmcs_current = true;
    assert_int_equal(fake_halts, halts + 1);
    assert_true(fake_console_has("VMREAD VM_EXIT_REASON (0x4402) failed"));
    assert_true(fake_console_has("VMM halted"));
    assert_true(fake_vmcs_fails > 0);
    fake_vmcs_fails = 0;
    assert_true(vmm_canary_intact());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boot),
        cmocka_unit_test(test_cpuid),
        cmocka_unit_test(test_vmcall_version),
        cmocka_unit_test(test_vmx_insn_ud),
        cmocka_unit_test(test_msr_read_owned),
        cmocka_unit_test(test_msr_refused),
        cmocka_unit_test(test_msr_mtrr),
        cmocka_unit_test(test_cr3),
        cmocka_unit_test(test_cr4),
        cmocka_unit_test(test_io_uart),
        cmocka_unit_test(test_xsetbv),
        cmocka_unit_test(test_invd),
        cmocka_unit_test(test_unexpected_exit),
        cmocka_unit_test(test_vmcall_cpl3),
        cmocka_unit_test(test_selfcheck),
        cmocka_unit_test(test_ept_violation_vmm),
        cmocka_unit_test(test_ept_violation_guest),
        cmocka_unit_test(test_exception_nmi),
        cmocka_unit_test(test_preemption_timer),
        cmocka_unit_test(test_trace_window),
        cmocka_unit_test(test_vmcall_stats_and_trace),
        cmocka_unit_test(test_trace_free_cpl),
        cmocka_unit_test(test_task_switch_64),
        cmocka_unit_test(test_owed_nmi),
        cmocka_unit_test(test_init_sipi), /* the guest restarts in real mode */
        cmocka_unit_test(test_task_switch_32),
        cmocka_unit_test(test_triple_fault), /* the guest is stopped after these */
        cmocka_unit_test(test_entry_failure),
        cmocka_unit_test(test_vmcs_failure_panics),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
