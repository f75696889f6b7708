// SPDX-License-Identifier: MIT
/*
 * conformance.efi: the VMM seen from inside its guest.  Started by the loader
 * in place of Linux (guest = \ptvisor\tests\conformance.efi); one PASS/FAIL
 * line per check, a SUMMARY line, then -- if the load options hold the word
 * "triple-fault" -- a deliberate CPU shutdown the VMM must report.
 *
 * Nothing here assumes the VMM is present: without it the VMM checks FAIL.
 */
#include <efi.h>

#include "ptv/vmcall.h"
#include "pt/rtit.h"

#include "conformance.h"
#include "libtest.h"
#include "user.h"

#define CPUID_1_ECX_VMX        (1u << 5)
#define CPUID_1_ECX_XSAVE      (1u << 26)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_HV_BASE          0x40000000u
#define CPUID_HV_LAST          0x400000ffu /* the range reserved for hypervisors */
#define X86_CR4_VMXE           (1ull << 13)
#define X86_CR4_OSXSAVE        (1ull << 18)
#define MSR_IA32_VMX_BASIC     0x480
#define XCR_XFEATURE_ENABLED   0
#define UNKNOWN_VMCALL         0x7fffu
#define X86_EFLAGS_IF          (1ull << 9)
#define NONCANONICAL_VA        0x8000000000000000ull
#define IDLE_TSC_TICKS         5000000ull /* Bochs: TSC counts instructions */

static bool hv_present, is_ptvisor; /* CPUID.1:ECX[31]; the 0x40000000 signature matched */

bool ptv_call(uint64_t fn, struct vmcall_regs *r, const char *what)
{
    *r = (struct vmcall_regs){.rax = fn};
    int v = vmcall_trap(r);
    if (v != TRAP_NONE)
        return report(false, "VMCALL %s: raised vector %d (no VMM?)", what, v);
    if (r->rax != PTV_VMCALL_OK)
        return report(false, "VMCALL %s: returned %ld", what, (int64_t)r->rax);
    return true;
}

static void check_cpuid_identity(void)
{
    struct cpuid_regs r = cpuid(1, 0);
    hv_present = r.ecx & CPUID_1_ECX_HYPERVISOR;
    report(hv_present, "CPUID.1:ECX[31] hypervisor present");
    report(!(r.ecx & CPUID_1_ECX_VMX), "CPUID.1:ECX[5] VMX hidden");

    r = cpuid(CPUID_HV_BASE, 0);
    static const char want[12] = "ptvisor";
    char sig[13];
    __builtin_memcpy(sig, &r.ebx, 4);
    __builtin_memcpy(sig + 4, &r.ecx, 4);
    __builtin_memcpy(sig + 8, &r.edx, 4);
    bool same = __builtin_memcmp(sig, want, sizeof(want)) == 0;
    is_ptvisor = same;
    sig[12] = '\0';
    for (int i = 0; i < 12; i++)
        if (sig[i] && (sig[i] < 0x20 || sig[i] > 0x7e))
            sig[i] = '?';
    report(same, "CPUID 0x40000000 signature \"ptvisor\" (got \"%s\")", sig);
    report(r.eax >= CPUID_HV_BASE && r.eax <= CPUID_HV_LAST,
           "CPUID 0x40000000 max leaf 0x%x in 0x40000000..0x400000ff", r.eax);
}

/* pt_mode = off (conformance.cfg), and Bochs has no PT: the guest must see none. */
static void check_pt_hidden(void)
{
    report(!(cpuid(7, 0).ebx & CPUID_7_EBX_INTEL_PT), "CPUID.7:EBX[25] Intel PT hidden");
    if (cpuid(0, 0).eax < PT_CPUID_LEAF) {
        report_skip("CPUID leaf 0x14 beyond the max basic leaf");
        return;
    }
    for (uint32_t sub = 0; sub <= 1; sub++) {
        struct cpuid_regs r = cpuid(PT_CPUID_LEAF, sub);
        report(!(r.eax | r.ebx | r.ecx | r.edx), "CPUID 0x14.%u all zero (%x %x %x %x)", sub, r.eax,
               r.ebx, r.ecx, r.edx);
    }
}

/* With PT hidden, every RTIT MSR access #GPs (SDM Vol. 4 table 2-2: exists only if
 * CPUID.7:EBX[25]). */
static void check_rtit_msrs(void)
{
    static const struct {
        uint32_t msr;
        const char *name;
        bool write;
    } msrs[] = {
        {MSR_IA32_RTIT_CTL, "RTIT_CTL", true},
        {MSR_IA32_RTIT_STATUS, "RTIT_STATUS", true},
        {MSR_IA32_RTIT_OUTPUT_BASE, "RTIT_OUTPUT_BASE", false},
        {MSR_IA32_RTIT_OUTPUT_MASK_PTRS, "RTIT_OUTPUT_MASK_PTRS", false},
        {MSR_IA32_RTIT_CR3_MATCH, "RTIT_CR3_MATCH", false},
        {MSR_IA32_RTIT_ADDR0_A, "RTIT_ADDR0_A", false},
    };
    for (unsigned i = 0; i < sizeof(msrs) / sizeof(msrs[0]); i++) {
        uint64_t val;
        int v = rdmsr_trap(msrs[i].msr, &val);
        report(v == TRAP_GP, "RDMSR %s #GP (vector %d, value 0x%lx)", msrs[i].name, v,
               v == TRAP_NONE ? val : 0);
        if (!msrs[i].write)
            continue;
        v = wrmsr_trap(msrs[i].msr, 0);
        report(v == TRAP_GP, "WRMSR %s = 0 #GP (vector %d)", msrs[i].name, v);
    }
}

/*
 * VMX is hidden from the guest: CR4.VMXE reads 0 although VMX non-root needs it
 * set (SDM Vol. 3C 24.8, CR4 read shadow), the VMX capability MSRs #GP, and a
 * VMX instruction -- which exits unconditionally (SDM Vol. 3C 25.1.2) -- comes
 * back as the #UD a CPU with CR4.VMXE = 0 raises.
 */
static void check_vmx_hidden(void)
{
    uint64_t val;

    report(!(read_cr4() & X86_CR4_VMXE), "CR4.VMXE reads 0");
    int v = rdmsr_trap(MSR_IA32_VMX_BASIC, &val);
    report(v == TRAP_GP, "RDMSR IA32_VMX_BASIC #GP (vector %d)", v);
    v = vmxoff_trap();
    report(v == TRAP_UD, "VMXOFF raises #UD (vector %d)", v);

    /*
     * CR4.VMXE is reserved where CPUID.1:ECX[5] = 0: setting it #GPs (SDM Vol.
     * 3A 2.5).  Only under ptvisor: QEMU 7.2 TCG hangs on this write.
     */
    if (!is_ptvisor) {
        report_skip("MOV CR4.VMXE: not running under ptvisor");
        return;
    }
    uint64_t cr4 = read_cr4();
    v = write_cr4_trap(cr4 | X86_CR4_VMXE);
    uint64_t after = read_cr4();
    if (after != cr4)
        write_cr4(cr4);
    report(v == TRAP_GP && after == cr4, "MOV CR4 with VMXE set #GP, CR4 kept (vector %d)", v);
}

static void check_vmcall_basic(void)
{
    struct vmcall_regs r;

    if (ptv_call(PTV_VMCALL_VERSION, &r, "VERSION")) {
        report(true, "VMCALL VERSION returns OK");
        report(r.rbx == PTV_VMCALL_ABI_VERSION, "VMCALL VERSION ABI version %d (got %lu)",
               PTV_VMCALL_ABI_VERSION, r.rbx);
        char name[9] = {0};
        __builtin_memcpy(name, &r.rcx, 8);
        report(__builtin_memcmp(name, "ptvisor", 8) == 0, "VMCALL VERSION RCX = \"ptvisor\"");
    }
    r = (struct vmcall_regs){.rax = UNKNOWN_VMCALL};
    int v = vmcall_trap(&r);
    report(v == TRAP_NONE && r.rax == (uint64_t)(int64_t)PTV_VMCALL_ENOSYS,
           "VMCALL 0x%x (unknown) returns ENOSYS (vector %d, rax %ld)", UNKNOWN_VMCALL, v,
           (int64_t)r.rax);
}

/*
 * include/ptv/vmcall.h: from CPL > 0 only the informational VERSION and
 * EXIT_STATS work; anything else (here VMM_RANGE, which tells where the VMM
 * lives) is refused with EPERM and leaves RBX alone.
 */
static void check_vmcall_cpl3(void)
{
    static const struct {
        uint64_t fn;
        const char *name;
        bool allowed;
    } calls[] = {
        {PTV_VMCALL_VERSION, "VERSION", true},
        {PTV_VMCALL_VMM_RANGE, "VMM_RANGE", false},
    };

    if (!is_ptvisor) {
        report_skip("VMCALL from CPL 3: not running under ptvisor");
        return;
    }
    for (unsigned i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        struct user_result u;
        const char *why = user_vmcall(calls[i].fn, &u);
        if (why) {
            report(false, "VMCALL from CPL 3: cannot reach ring 3 (%s)", why);
            return;
        }
        /* the trip must end at the UD2 after the VMCALL, in ring 3 */
        bool trip = u.vector == TRAP_UD && u.rip == u.ud2_rip && (u.cs & 3) == 3;
        if (!report(trip, "CPL 3 trip ended at its UD2 (vector %d, cs 0x%lx, rip %s)", u.vector,
                    u.cs, u.rip == u.ud2_rip ? "ok" : "elsewhere"))
            return;
        if (calls[i].allowed)
            report(u.rax == PTV_VMCALL_OK && u.rbx == PTV_VMCALL_ABI_VERSION,
                   "VMCALL %s from CPL 3 allowed (rax %ld, rbx 0x%lx)", calls[i].name,
                   (int64_t)u.rax, u.rbx);
        else
            report(u.rax == (uint64_t)(int64_t)PTV_VMCALL_EPERM && u.rbx == USER_RBX_MARK,
                   "VMCALL %s from CPL 3 refused: EPERM (rax %ld, rbx 0x%lx)", calls[i].name,
                   (int64_t)u.rax, u.rbx);
    }
}

/*
 * XSETBV always exits (SDM Vol. 3C 25.1.2); writing XCR0 back unchanged must
 * work.  Firmware usually leaves CR4.OSXSAVE clear: set it for the check.
 */
static void check_xsetbv(void)
{
    if (!(cpuid(1, 0).ecx & CPUID_1_ECX_XSAVE)) {
        report_skip("XSETBV: CPUID.1:ECX[26] XSAVE is 0");
        return;
    }
    uint64_t cr4 = read_cr4();
    if (!(cr4 & X86_CR4_OSXSAVE))
        write_cr4(cr4 | X86_CR4_OSXSAVE);
    uint64_t xcr0 = 0, again = 0;
    struct vmcall_regs before, after;
    bool stats = ptv_call(PTV_VMCALL_EXIT_STATS, &before, "EXIT_STATS");
    int v1 = xgetbv_trap(XCR_XFEATURE_ENABLED, &xcr0);
    int v2 = v1 == TRAP_NONE ? xsetbv_trap(XCR_XFEATURE_ENABLED, xcr0) : v1;
    stats = stats && ptv_call(PTV_VMCALL_EXIT_STATS, &after, "EXIT_STATS");
    int v3 = xgetbv_trap(XCR_XFEATURE_ENABLED, &again);
    if (!(cr4 & X86_CR4_OSXSAVE))
        write_cr4(cr4);
    report(v1 == TRAP_NONE && v2 == TRAP_NONE && v3 == TRAP_NONE && again == xcr0,
           "XSETBV XCR0 = 0x%lx unchanged (vectors %d %d %d)", xcr0, v1, v2, v3);
    /* between the two counts: the XSETBV exit and the second VMCALL's own exit */
    if (stats)
        report(after.rbx - before.rbx >= 2, "exit counter saw XSETBV (%lu -> %lu exits)",
               before.rbx, after.rbx);
}

/* INVD always exits (SDM Vol. 3C 25.1.2); the VMM must not drop guest writes. */
static void check_cache_insns(void)
{
    static volatile uint64_t marker;

    report(wbinvd_trap() == TRAP_NONE, "WBINVD runs");
    if (!hv_present) {
        report_skip("INVD: no hypervisor, it would run natively");
        return;
    }
    marker = 0x1234567887654321ull;
    int v = invd_trap();
    report(v == TRAP_NONE && marker == 0x1234567887654321ull,
           "INVD runs, a write before it survives (vector %d)", v);
}

/*
 * "An idle guest should cause no exits at all" (ARCHITECTURE.md section 2).
 * Interrupts off (the firmware's timer handler runs CPUID, which always
 * exits), then a PAUSE/RDTSC/memory loop: the exit count across it must grow
 * by exactly what two back-to-back EXIT_STATS calls add on their own.  With
 * IF = 0 an external-interrupt-exiting VMM still shows up here.
 */
static void check_idle_no_exits(void)
{
    struct vmcall_regs a, b, c, d, e;
    uint64_t flags;
    static volatile uint64_t sink;

    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    bool ok = ptv_call(PTV_VMCALL_EXIT_STATS, &a, "EXIT_STATS") &&
              ptv_call(PTV_VMCALL_EXIT_STATS, &b, "EXIT_STATS") &&
              ptv_call(PTV_VMCALL_EXIT_STATS, &c, "EXIT_STATS");
    if (ok) {
        uint64_t start = rdtsc();
        while (rdtsc() - start < IDLE_TSC_TICKS) {
            __asm__ volatile("pause" ::: "memory");
            sink++;
        }
        ok = ptv_call(PTV_VMCALL_EXIT_STATS, &d, "EXIT_STATS");
    }
    /* the guest's own exceptions go through its IDT: empty exception bitmap */
    int v1 = ok ? ud2_trap() : TRAP_NONE;
    int v2 = ok ? store64_trap(NONCANONICAL_VA, 0) : TRAP_NONE;
    ok = ok && ptv_call(PTV_VMCALL_EXIT_STATS, &e, "EXIT_STATS");
    if (flags & X86_EFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    if (!ok)
        return;
    uint64_t base = b.rbx - a.rbx;
    report(d.rbx - c.rbx == base, "idle loop (PAUSE, RDTSC, IF=0): %lu exits, %lu expected",
           d.rbx - c.rbx, base);
    report(v1 == TRAP_UD && v2 == TRAP_GP && e.rbx - d.rbx == base,
           "guest #UD and #GP cause no VM exit (%lu exits, %lu expected)", e.rbx - d.rbx, base);
}

/* Exits must not perturb CPUID: 1000 leaves, each equal to its first answer. */
static void check_cpuid_loop(void)
{
    static const uint32_t leaves[] = {0,          1,          7,          0xd,       PT_CPUID_LEAF,
                                      0x40000000, 0x40000001, 0x80000000, 0x80000001};
#define NLEAVES (sizeof(leaves) / sizeof(leaves[0]))
    struct cpuid_regs first[NLEAVES];
    unsigned bad = 0, first_bad = 0;

    for (unsigned i = 0; i < 1000; i++) {
        unsigned k = i % NLEAVES;
        struct cpuid_regs r = cpuid(leaves[k], 0);
        if (i < NLEAVES) {
            first[k] = r;
        } else if (__builtin_memcmp(&r, &first[k], sizeof(r)) != 0) {
            if (!bad++)
                first_bad = leaves[k];
        }
    }
    report(bad == 0, "1000 CPUIDs consistent (%u differ, first leaf 0x%x)", bad, first_bad);
#undef NLEAVES
}

/*
 * Last act: a CPU shutdown.  With a zero-limit IDT, INT3 cannot be delivered
 * (#GP), nor can the #GP, nor the #DF: triple fault (SDM Vol. 3A 6.15, "Interrupt
 * 8").  The VMM sees the exit and prints its report; the guest never resumes.
 */
static void __attribute__((noreturn)) force_shutdown(void)
{
    static const struct __attribute__((packed)) {
        uint16_t limit;
        uint64_t base;
    } no_idt = {0, 0};

    test_printf("conformance: zero-limit IDT and INT3 now; the VMM must report the shutdown\n");
    __asm__ volatile("cli; lidt %0; int3; ud2" ::"m"(no_idt) : "memory");
    for (;;)
        __asm__ volatile("cli; hlt");
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    test_printf("conformance: ptvisor in-guest checks\n");
    check_cpuid_identity();
    check_pt_hidden();
    check_rtit_msrs();
    check_vmx_hidden();
    check_vmcall_basic();
    check_vmm_memory();
    check_vmcall_cpl3();
    check_xsetbv();
    check_cache_insns();
    check_idle_no_exits();
    check_cpuid_loop();
    unsigned failed = report_summary();
    if (test_option("triple-fault"))
        force_shutdown();
    return failed ? EFI_ABORTED : EFI_SUCCESS;
}
