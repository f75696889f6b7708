// SPDX-License-Identifier: MIT
/*
 * pt-selftest.efi: the on-box self-test of guest-visible Intel PT under
 * ptvisor.  Boot build/ptvisor-selftest.img (make selftest-usb) on a Skylake+
 * machine; the loader starts the VMM with pt_mode = host-guest and then this
 * program as the guest.  It traces a short piece of its own code through a
 * two-region ToPA, checks what the hardware (through the VMM's shadow ToPA or
 * GPA mode) wrote, then checks that illegal set-ups end as hardware would.
 *
 * Where the CPU or the VMM does not offer PT to the guest, every check is
 * SKIPPED with the reason: this program never passes without real PT.
 * First it runs the guest-LBR checks of lbr_selftest.c, SKIPPED likewise, and the
 * check of the VMM's own trace of a known sequence (vmm_trace_selftest.c): hardware
 * system-mode PT where the VMM has it, else the software tracer, SKIPPED where neither runs.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"
#include "pt/rtit.h"

#include "lbr_selftest.h"
#include "libtest.h"
#include "pt_cont.h"
#include "vmm_trace_selftest.h"
#include "x86.h"

#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define PAGE                   4096u

static const uint8_t psb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};

static EFI_SYSTEM_TABLE *systab;

static uint64_t alloc_pages(unsigned n)
{
    EFI_PHYSICAL_ADDRESS pa = 0;
    if (uefi_call_wrapper(systab->BootServices->AllocatePages, 4, AllocateAnyPages, EfiLoaderData,
                          (UINTN)n, &pa) != EFI_SUCCESS)
        return 0;
    uint8_t *p = (uint8_t *)(uintptr_t)pa;
    for (unsigned i = 0; i < n * PAGE; i++)
        p[i] = 0;
    return pa;
}

/* something with many branches to trace */
static __attribute__((noinline)) uint64_t workload(unsigned n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < n; i++) {
        if (x & 1)
            x = x * 3 + 1;
        else
            x >>= 1;
        x ^= i;
    }
    return x;
}

static bool trace_ok(const char *what, uint64_t table, uint64_t ctl)
{
    int v = wrmsr_trap(MSR_IA32_RTIT_STATUS, 0) | wrmsr_trap(MSR_IA32_RTIT_OUTPUT_BASE, table) |
            wrmsr_trap(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x7f);
    if (!report(v == TRAP_NONE, "%s: program output registers", what))
        return false;
    if (!report(wrmsr_trap(MSR_IA32_RTIT_CTL, ctl) == TRAP_NONE, "%s: RTIT_CTL = %#lx", what,
                (unsigned long)ctl))
        return false;
    return true;
}

static void stop_trace(void)
{
    (void)wrmsr_trap(MSR_IA32_RTIT_CTL, 0);
}

static uint64_t exits_so_far(void)
{
    struct vmcall_regs r = {.rax = PTV_VMCALL_EXIT_STATS};
    return vmcall_trap(&r) == TRAP_NONE && r.rax == PTV_VMCALL_OK ? r.rbx : 0;
}

/*
 * 5. one trace across >= 1,000 VM exits must be continuous, as on bare metal: the
 * VMM switches the trace off and on around every exit, and must resume where the hardware was
 * (never at the start of the buffer).  One 1 MiB output region filled with FILL; every round
 * runs some branches, a CPUID (always exits) and a RDMSR OUTPUT_MASK_PTRS (exits: the RTIT
 * MSRs are virtualized); the verdict is pt_cont.c's, also run on the CPU twin on the host.
 */
#define CONT_ROUNDS 1200
#define CONT_CODE   8 /* ToPA size code: 4 KiB << 8 = 1 MiB */
#define CONT_SIZE   (4096ull << CONT_CODE)
#define CONT_FILL   0xa5
static uint64_t cont_samples[CONT_ROUNDS];

static void long_trace(uint64_t table, struct cpuid_regs l0)
{
    uint64_t raw = alloc_pages(2 * CONT_SIZE / PAGE), period = 0;
    if (!report(raw != 0, "allocate a 1 MiB output region"))
        return;
    uint64_t out = (raw + CONT_SIZE - 1) & ~(CONT_SIZE - 1);
    uint8_t *b = (uint8_t *)(uintptr_t)out;
    for (uint64_t i = 0; i < CONT_SIZE; i++)
        b[i] = CONT_FILL;
    uint64_t *t = (uint64_t *)(uintptr_t)table;
    t[0] = out | (uint64_t)CONT_CODE << TOPA_SIZE_SHIFT | TOPA_STOP;
    t[1] = table | TOPA_END;
    t[2] = 0;
    uint64_t ctl =
        RTIT_CTL_TRACEEN | RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_BRANCH_EN | RTIT_CTL_TOPA;
    /* PSBFreq 0 = every 2 KiB where the CPU lets it be chosen (CPUID.14.0:EBX[1], 14.1:EBX[16]) */
    if ((l0.ebx & PT_CAP_EBX_PSB_CYC) && (cpuid(0x14, 1).ebx & (1u << 16)))
        period = 2048;
    else
        report_info("PSB frequency not configurable: PSB spacing not checked");
    uint64_t exits0 = exits_so_far();
    if (!trace_ok("long trace", table, ctl))
        return;
    unsigned n = 0;
    for (; n < CONT_ROUNDS; n++) {
        (void)workload(16);
        (void)cpuid(0, 0);
        if (rdmsr_trap(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &cont_samples[n]) != TRAP_NONE)
            break;
    }
    stop_trace();
    uint64_t exits = exits_so_far() - exits0, status = ~0ull, mask = 0;
    (void)rdmsr_trap(MSR_IA32_RTIT_STATUS, &status);
    (void)rdmsr_trap(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &mask);
    report(n == CONT_ROUNDS && exits >= 1000, "%u rounds, %lu VM exits while tracing", n,
           (unsigned long)exits);
    report(!(status & RTIT_STATUS_ERROR), "no operational error (STATUS %#lx)",
           (unsigned long)status);
    struct pt_cont_in in = {cont_samples, n, b, CONT_SIZE, mask >> 32, CONT_FILL, period};
    struct pt_cont_out o;
    report(pt_cont_check(&in, &o), "one continuous trace across the exits: %s", o.why);
    struct vmcall_regs c = {.rax = PTV_VMCALL_SELFCHECK};
    report(vmcall_trap(&c) == TRAP_NONE && c.rax == PTV_VMCALL_OK && !(c.rbx & c.rcx),
           "the VMM's own checks hold afterwards (failed bits %#lx of %#lx)", (unsigned long)c.rbx,
           (unsigned long)c.rcx);
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *st)
{
    InitializeLib(image, st);
    systab = st;
    test_init(image, st);
    report_info("pt-selftest: guest-visible Intel PT under ptvisor");

    struct cpuid_regs c1 = cpuid(1, 0), hv = cpuid(0x40000000, 0);
    if (!(c1.ecx & CPUID_1_ECX_HYPERVISOR) || hv.ebx != 0x69767470) {
        report_skip("not running under ptvisor (no hypervisor signature)");
        report_summary();
        return EFI_SUCCESS;
    }
    lbr_selftest();         /* guest LBR: before the PT checks, which may end early */
    vmm_trace_selftest(st); /* the VMM's own trace of its guest */
    if (!(cpuid(7, 0).ebx & CPUID_7_EBX_INTEL_PT)) {
        report_skip("no Intel PT for the guest: the CPU has none, or the VMM hides it "
                    "(its [cpu0 pt] boot lines say why; pt_mode = host-guest is needed)");
        report_summary();
        return EFI_SUCCESS;
    }
    struct cpuid_regs l0 = cpuid(0x14, 0);
    if (!(l0.ecx & PT_CAP_ECX_TOPA)) {
        report_skip("the guest's PT has no ToPA output (CPUID.14.0:ECX[0]=0)");
        report_summary();
        return EFI_SUCCESS;
    }
    bool multi = l0.ecx & PT_CAP_ECX_TOPA_MULTI;

    /* 1. a legal ToPA: two 4 KiB regions, STOP on the last, END back to the table */
    uint64_t table = alloc_pages(1), out = alloc_pages(2);
    if (!report(table && out, "allocate ToPA table and output pages"))
        goto done;
    uint64_t *t = (uint64_t *)(uintptr_t)table;
    if (multi) {
        t[0] = out;
        t[1] = (out + PAGE) | TOPA_STOP;
        t[2] = table | TOPA_END;
    } else {
        t[0] = out | TOPA_STOP;
        t[1] = table | TOPA_END;
    }
    uint64_t ctl =
        RTIT_CTL_TRACEEN | RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_BRANCH_EN | RTIT_CTL_TOPA;
    if (trace_ok("legal ToPA", table, ctl)) {
        uint64_t sink = workload(20000);
        stop_trace();
        uint64_t status = 0, mask = 0;
        report(rdmsr_trap(MSR_IA32_RTIT_STATUS, &status) == TRAP_NONE &&
                   !(status & RTIT_STATUS_ERROR),
               "no operational error (STATUS %#lx, workload %lx)", (unsigned long)status,
               (unsigned long)sink);
        report(rdmsr_trap(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &mask) == TRAP_NONE &&
                   ((mask >> 32) || (mask >> 7) & 0x1ffffff),
               "output pointers advanced (MASK_PTRS %#lx)", (unsigned long)mask);
        const uint8_t *b = (const uint8_t *)(uintptr_t)out;
        bool has_psb = true;
        for (unsigned i = 0; i < sizeof(psb); i++)
            has_psb &= b[i] == psb[i];
        report(has_psb, "trace starts with a PSB at the guest's own output GPA");
        uint64_t base = 0;
        report(rdmsr_trap(MSR_IA32_RTIT_OUTPUT_BASE, &base) == TRAP_NONE && base == table,
               "OUTPUT_BASE reads the guest's table GPA (%#lx)", (unsigned long)base);
    }

    /* 2. while tracing, the other RTIT MSRs are locked (#GP), as on hardware */
    t[0] = out;
    if (trace_ok("lock check", table, ctl)) {
        int v = wrmsr_trap(MSR_IA32_RTIT_OUTPUT_BASE, table);
        stop_trace();
        report(v == TRAP_GP, "WRMSR OUTPUT_BASE while TraceEn=1 raises #GP (vector %d)", v);
    }

    /* 3. reserved RTIT_CTL bit -> #GP, nothing changes */
    report(wrmsr_trap(MSR_IA32_RTIT_CTL, 1ull << 63) == TRAP_GP, "reserved RTIT_CTL bit #GP");

    /* 4. a ToPA whose output region is VMM memory: an operational error, never a write there */
    struct vmcall_regs r = {.rax = PTV_VMCALL_VMM_RANGE};
    if (vmcall_trap(&r) == TRAP_NONE && r.rax == PTV_VMCALL_OK) {
        uint64_t vmm_page = (r.rbx + PAGE) & ~(uint64_t)(PAGE - 1);
        t[0] = vmm_page | TOPA_STOP;
        t[1] = table | TOPA_END;
        t[2] = 0;
        if (trace_ok("ToPA into VMM memory", table, ctl)) {
            (void)workload(2000);
            stop_trace();
            uint64_t status = 0;
            (void)rdmsr_trap(MSR_IA32_RTIT_STATUS, &status);
            report(status & RTIT_STATUS_ERROR,
                   "ToPA into VMM memory ends in an operational error (STATUS %#lx)",
                   (unsigned long)status);
            struct vmcall_regs c = {.rax = PTV_VMCALL_CHECK_CANARY};
            report(vmcall_trap(&c) == TRAP_NONE && c.rbx == 1, "VMM canary intact");
        }
    }

    long_trace(table, l0);
done:
    report_summary();
    return EFI_SUCCESS;
}
