// SPDX-License-Identifier: MIT
/*
 * smp.efi: every CPU under the VMM, seen from inside a guest.  Run by
 * the loader in place of Linux in Bochs with 2 CPUs (tests/guest/smp.cfg,
 * tests/system/bochs-smp.sh).  The checks, in this order:
 *
 *   1 shootdown-idle  EPT shootdowns while the AP idles in the firmware's HLT
 *                     loop as the VMM's guest: it must answer (smp_shoot.c).
 *                     First, because nothing has sent the AP an INIT yet
 *   2 sipi-ap         our INIT-SIPI-SIPI to a real-mode trampoline (smp_tramp.S)
 *   3 init-storm      1,000 INITs, then INIT-SIPI-SIPI again: the AP comes back
 *   4 sipi-run        a SIPI to the running AP is ignored (SDM Vol. 3A 9.4.4.2:
 *                     only a CPU in wait-for-SIPI acts on one)
 *   5 shootdown       the VMM narrows EPT while the AP touches an on-demand page
 *                     (smp_shoot.c)
 *   6 mp-ap           a function on the AP through EFI MP services (smp_mp.c):
 *                     OVMF INITs the AP out of the trampoline, so it comes last;
 *                     never called for a lost AP (OVMF would wait for it for good)
 *   7 final           SELFCHECK on both CPUs (the AP back in the trampoline),
 *                     canary intact
 *
 * Checks 2, 3, 6 and 7 INIT the AP.  Where the CPU re-delivers INIT to a VMX guest (Bochs 2.7,
 * PTV_SMP_INIT_REDELIVERED) the AP is lost from then on: what needs it to run
 * is a SKIP (smp_ap_gone), what does not (the VMM answers, SELFCHECK and the
 * canary on the BSP, the AP never ran outside VMX) still runs.
 *
 * An INFO line names each check before it runs, so a check that ends the boot
 * is named in the serial log (tests/guest/check-smp-log.sh).  Every wait is
 * bounded: a lost AP costs seconds, not the boot.
 *
 * Never INIT the BSP itself (ICR destination self or its own APIC ID): the BSP
 * restarts at the reset vector and the boot ends (tests/guest/README.md).
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "smp.h"

uint64_t smp_vmm_base, smp_vmm_size, smp_canary_pa;
const uint64_t smp_canary_word = 0x2d726f7369767470ull; /* "ptvisor-" little endian */
volatile struct smp_mbox *smp_mb;

#define MSR_IA32_APIC_BASE   0x1b
#define APIC_BASE_EXTD       (1ull << 10) /* x2APIC mode */
#define APIC_BASE_ADDR_MASK  0x000ffffffffff000ull
#define APIC_ICR_LO          0x300
#define APIC_ICR_HI          0x310
#define MSR_X2APIC_ICR       0x830
#define ICR_DM_INIT          0x500
#define ICR_DM_STARTUP       0x600
#define ICR_LEVEL_ASSERT     (1u << 14)
#define ICR_TRIGGER_LEVEL    (1u << 15)
#define ICR_DELIVERY_PENDING (1u << 12)
#define INIT_STORM           1000u
#define CPUID_1_ECX_HV       (1u << 31)

static uint64_t apic_mmio;
static bool x2apic;
static uint32_t ap_apic_id;
static uint64_t tramp; /* the trampoline's block */

int smp_vmcall(uint64_t fn, uint64_t rbx, struct smp_regs *r)
{
    *r = (struct smp_regs){.rax = fn, .rbx = rbx};
    register uint64_t r8 __asm__("r8") = 0, r9 __asm__("r9") = 0, r10 __asm__("r10") = 0;
    trap_arm();
    __asm__ volatile(TRAP_INSN("vmcall")
                     : "+a"(r->rax), "+b"(r->rbx), "+c"(r->rcx), "+d"(r->rdx), "+S"(r->rsi),
                       "+D"(r->rdi), "+r"(r8), "+r"(r9), "+r"(r10)::"memory");
    int v = trap_disarm();
    r->r8 = r8, r->r9 = r9, r->r10 = r10;
    if (v != TRAP_NONE)
        r->rax = (uint64_t)-100;
    return v;
}

bool smp_canary_intact(void)
{
    struct smp_regs r;
    return smp_vmcall(PTV_VMCALL_CHECK_CANARY, 0, &r) == TRAP_NONE && r.rax == PTV_VMCALL_OK &&
           r.rbx == 1;
}

bool smp_wait(bool (*fn)(void), unsigned ms)
{
    for (unsigned i = 0; i <= ms; i++) {
        if (fn())
            return true;
        test_stall_us(1000);
    }
    return false;
}

/* ---- report lines, counted here (smp.h) ---- */

static unsigned n_tests, n_failed, n_skipped;

bool smp_report(bool cond, const char *fmt, ...)
{
    char text[LIBTEST_LINE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    test_vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    n_tests++;
    n_failed += !cond;
    return report(cond, "%s", text);
}

void smp_skip(const char *fmt, ...)
{
    char text[LIBTEST_LINE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    test_vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    n_skipped++;
    report_skip("%s", text);
}

/* libtest's SUMMARY form (libtest.h), with the whole-line SKIPs counted */
unsigned smp_summary(void)
{
    test_printf("SUMMARY: %u tests, %u unexpected failures, %u skipped\n", n_tests, n_failed,
                n_skipped);
    return n_failed;
}

/* ---- the AP after an INIT (smp.h) ---- */

static bool ap_lost;

bool smp_ap_gone(const char *check)
{
    if (!ap_lost)
        return false;
    test_printf("SKIP: %s: %s\n", check, SMP_INIT_BUG); /* whole: longer than libtest's cut */
    n_skipped++;
    return true;
}

bool smp_ap_back(bool up, const char *check)
{
    if (up)
        return true;
    struct smp_regs r = {0};
    bool ok = smp_vmcall(PTV_VMCALL_SMP_STATS, 0, &r) == TRAP_NONE && r.rax == PTV_VMCALL_OK;
    if (ok && (r.r9 & PTV_SMP_INIT_REDELIVERED))
        ap_lost = true;
    if (!smp_ap_gone(check))
        smp_report(false, "%s: the AP is lost, not flagged (SMP_STATS RAX %ld R9 0x%lx)", check,
                   (int64_t)r.rax, r.r9);
    return false;
}

/* ---- the local APIC's ICR (SDM Vol. 3A 11.6.1; x2APIC: 11.12.9) ---- */

static bool apic_setup(void)
{
    uint64_t base;
    if (rdmsr_trap(MSR_IA32_APIC_BASE, &base) != TRAP_NONE)
        return false;
    x2apic = base & APIC_BASE_EXTD;
    apic_mmio = base & APIC_BASE_ADDR_MASK;
    report_info("BSP APIC base 0x%lx (%s)", base, x2apic ? "x2APIC" : "xAPIC");
    return true;
}

static volatile uint32_t *apic_reg(unsigned off)
{
    return (volatile uint32_t *)(apic_mmio + off);
}

/* one IPI to the AP; false if the ICR still said "send pending" after 1 ms */
static bool ipi(uint32_t low)
{
    uint64_t flags;
    bool idle = true;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    if (x2apic) {
        wrmsr_trap(MSR_X2APIC_ICR, ((uint64_t)ap_apic_id << 32) | low);
    } else {
        *apic_reg(APIC_ICR_HI) = ap_apic_id << 24; /* high first: writing low sends */
        *apic_reg(APIC_ICR_LO) = low;
        unsigned i;
        for (i = 0; i < 1000 && (*apic_reg(APIC_ICR_LO) & ICR_DELIVERY_PENDING); i++)
            __asm__ volatile("pause");
        idle = !(*apic_reg(APIC_ICR_LO) & ICR_DELIVERY_PENDING);
    }
    if (flags & (1u << 9))
        __asm__ volatile("sti" ::: "memory");
    return idle;
}

static bool send_init(void)
{
    return ipi(ICR_DM_INIT | ICR_LEVEL_ASSERT | ICR_TRIGGER_LEVEL);
}

static bool send_sipi(void)
{
    return ipi(ICR_DM_STARTUP | ICR_LEVEL_ASSERT | (uint32_t)(tramp >> 12));
}

static bool ap_looping(void)
{
    return smp_mb->stage == SMP_STAGE_LOOP;
}

/*
 * INIT-SIPI-SIPI as Linux's smpboot sends it (wakeup_secondary_cpu_via_init):
 * INIT assert, INIT de-assert, 10 ms, then two SIPIs 200 us apart.  The
 * mailbox's results are cleared first; waits until the AP's loop runs.
 */
static bool ap_start(void)
{
    smp_mb->stage = 0;
    smp_mb->hv_ok = 0;
    smp_mb->cpuid1_ecx = smp_mb->hv_ebx = smp_mb->hv_ecx = smp_mb->hv_edx = 0;
    smp_mb->canary_val = 0;
    smp_mb->mode = SMP_MODE_COUNT;
    smp_mb->req = smp_mb->ack = 0;
    bool ok = send_init();
    ok &= ipi(ICR_DM_INIT | ICR_TRIGGER_LEVEL);
    test_stall_us(10000);
    for (int i = 0; i < 2; i++) {
        ok &= send_sipi();
        test_stall_us(200);
    }
    return smp_wait(ap_looping, 2000) && ok;
}

static uint64_t round_req;

static bool ap_acked(void)
{
    return smp_mb->ack == round_req;
}

bool smp_ap_round(void)
{
    smp_mb->smp_rax = smp_mb->exit_rax = smp_mb->sc_rax = smp_mb->ver_rax = (uint64_t)-100;
    smp_mb->smp_rbx = smp_mb->smp_rdx = smp_mb->smp_rdi = ~0ull;
    smp_mb->exit_rcx = smp_mb->sc_rbx = ~0ull;
    smp_mb->sc_rcx = 0;
    round_req = smp_mb->req + 1;
    __asm__ volatile("" ::: "memory");
    smp_mb->req = round_req;
    return smp_wait(ap_acked, 1000);
}

/* the SMP_STATS check of one AP round (check 2 and 3) */
static void report_ap_smp_stats(const char *check)
{
    if (!smp_ap_round()) {
        smp_report(false, "%s: AP does not answer the mailbox (VMCALL hung?)", check);
        return;
    }
    if (!smp_mb->hv_ok) {
        smp_report(false, "%s: AP outside the VMM: no SMP_STATS asked", check);
        return;
    }
    smp_report(smp_mb->smp_rax == PTV_VMCALL_OK && smp_mb->smp_rbx == 1,
               "%s: SMP_STATS on the AP: RAX %ld, vCPU index %lu (want 1)", check,
               (int64_t)smp_mb->smp_rax, smp_mb->smp_rbx);
}

static void report_hv(const char *check)
{
    uint32_t ecx = (uint32_t)smp_mb->cpuid1_ecx;
    if (ecx & CPUID_1_ECX_HV)
        smp_report(true, "%s: AP sees the hypervisor bit", check);
    else
        smp_report(false, "%s: AP sees no hypervisor bit (CPUID.1:ECX 0x%x)", check, ecx);
}

/* ---- the trampoline's block ---- */

static const char *tramp_setup(void)
{
    static const uint64_t fixed[] = {0x70000, 0x60000, 0x50000, 0x40000, 0x30000, 0x20000};
    EFI_PHYSICAL_ADDRESS a = 0;
    EFI_STATUS s = EFI_NOT_FOUND;
    size_t size = (size_t)(smp_tramp_end - smp_tramp_start);
    if (size > SMP_PAGE)
        return "the trampoline is larger than its page";
    for (unsigned i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && EFI_ERROR(s); i++) {
        a = fixed[i];
        s = uefi_call_wrapper(BS->AllocatePages, 4, AllocateAddress, EfiLoaderData, SMP_PAGES, &a);
    }
    if (EFI_ERROR(s)) {
        a = 0x9ffff;
        s = uefi_call_wrapper(BS->AllocatePages, 4, AllocateMaxAddress, EfiLoaderData, SMP_PAGES,
                              &a);
    }
    if (EFI_ERROR(s) || a + SMP_PAGES * SMP_PAGE > 0xa0000)
        return "no 7 pages free below 640 KiB";
    tramp = a;
    uint8_t *p = (uint8_t *)tramp;
    for (size_t i = 0; i < SMP_PAGES * SMP_PAGE; i++)
        p[i] = 0;
    for (size_t i = 0; i < size; i++)
        p[SMP_OFF_CODE + i] = (uint8_t)smp_tramp_start[i];
    smp_build_tables(tramp);
    smp_mb = (volatile struct smp_mbox *)(tramp + SMP_OFF_MBOX);
    smp_mb->canary_pa = smp_canary_pa;
    report_info("trampoline at 0x%lx (SIPI vector 0x%lx), %lu bytes", tramp, tramp >> 12,
                (unsigned long)size);
    return NULL;
}

/* ---- no trampoline run outside VMX ---- */

/*
 * Every run of the trampoline that reached 32-bit mode saw the hypervisor bit,
 * or none ran at all (boots 0: a lost AP stays in the VMM's wait-for-SIPI).
 * A run that stopped in real mode is no proof either way: a FAIL too.
 */
void smp_report_never_bare(const char *check)
{
    uint64_t boots = smp_mb->boots, stage = smp_mb->stage;
    uint32_t ecx = (uint32_t)smp_mb->cpuid1_ecx;
    bool ok = boots == 0 || (stage >= SMP_STAGE_PM32 && (ecx & CPUID_1_ECX_HV));
    smp_report(ok, "%s: AP never ran outside VMX (boots %lu, stage %lu, ECX 0x%x)", check, boots,
               stage, ecx);
}

/* ---- check 3: INIT-SIPI-SIPI to the trampoline ---- */

static void check_sipi_ap(void)
{
    bool lost_before = smp_ap_gone("sipi-ap");
    bool up = ap_start();
    smp_report_never_bare("sipi-ap");
    if (lost_before)
        return;
    if (smp_ap_back(up, "sipi-ap"))
        smp_report(true, "sipi-ap: AP ran the trampoline to long mode");
    if (smp_mb->stage < SMP_STAGE_PM32)
        return;
    report_hv("sipi-ap");
    smp_report(smp_mb->hv_ok, "sipi-ap: CPUID 0x40000000 on the AP says ptvisor (0x%x 0x%x 0x%x)",
               (uint32_t)smp_mb->hv_ebx, (uint32_t)smp_mb->hv_ecx, (uint32_t)smp_mb->hv_edx);
    if (smp_mb->canary_val == smp_canary_word)
        smp_report(false, "sipi-ap: AP read the VMM canary (\"ptvisor-\" at 0x%lx)", smp_canary_pa);
    else
        smp_report(true, "sipi-ap: AP's read of the VMM canary saw no VMM data (0x%lx)",
                   smp_mb->canary_val);
    if (up)
        report_ap_smp_stats("sipi-ap");
}

/* ---- check 4: the INIT storm ---- */

static void check_init_storm(void)
{
    uint64_t boots = smp_mb->boots;
    unsigned stuck = 0;
    for (unsigned i = 0; i < INIT_STORM; i++)
        stuck += !send_init();
    smp_report(stuck == 0, "init-storm: %u INITs sent (%u left the ICR busy)", INIT_STORM, stuck);
    bool lost_before = smp_ap_gone("init-storm");
    bool up = ap_start();
    smp_report_never_bare("init-storm");
    if (!lost_before && smp_ap_back(up, "init-storm")) {
        smp_report(smp_mb->boots == boots + 1,
                   "init-storm: AP restarts after it (boots %lu -> %lu)", boots, smp_mb->boots);
        report_hv("init-storm");
    }
    struct smp_regs ver, sc;
    bool alive = smp_vmcall(PTV_VMCALL_VERSION, 0, &ver) == TRAP_NONE && ver.rax == PTV_VMCALL_OK &&
                 ver.rbx == PTV_VMCALL_ABI_VERSION;
    bool checked =
        alive && smp_vmcall(PTV_VMCALL_SELFCHECK, 0, &sc) == TRAP_NONE && sc.rax == PTV_VMCALL_OK;
    smp_report(alive && checked && (sc.rcx & PTV_SELFCHECK_CANARY) && !sc.rbx,
               "init-storm: VMM answers, SELFCHECK ok (failed 0x%lx of 0x%lx)",
               checked ? sc.rbx : ~0ul, checked ? sc.rcx : 0ul);
    if (up)
        report_ap_smp_stats("init-storm");
}

/* ---- check 5: SIPI to the running AP ---- */

static void check_sipi_running(void)
{
    if (smp_ap_gone("sipi-run"))
        return;
    if (!ap_looping()) {
        smp_report(false, "sipi-run: the AP's loop does not run: nothing to SIPI");
        return;
    }
    uint64_t boots = smp_mb->boots, count = smp_mb->counter;
    bool sent = send_sipi();
    test_stall_us(200);
    sent &= send_sipi();
    test_stall_us(20000);
    smp_report(sent && smp_mb->boots == boots && ap_looping(),
               "sipi-run: SIPIs to the running AP ignored (boots %lu -> %lu)", boots,
               smp_mb->boots);
    smp_report(smp_mb->counter > count, "sipi-run: the AP kept counting (%lu -> %lu)", count,
               smp_mb->counter);
}

/* ---- check 7: after everything ---- */

static void report_ap_selfcheck(void)
{
    if (smp_mb && !ap_looping() && !smp_ap_back(ap_start(), "final"))
        return; /* MP services had it: back to the trampoline */
    if (!smp_mb || !smp_ap_round())
        smp_report(false, "final: AP does not answer the mailbox");
    else if (!smp_mb->hv_ok)
        smp_report(false, "final: AP outside the VMM: no SELFCHECK on it");
    else
        smp_report(smp_mb->sc_rax == PTV_VMCALL_OK && (smp_mb->sc_rcx & PTV_SELFCHECK_CANARY) &&
                       !smp_mb->sc_rbx,
                   "final: SELFCHECK on the AP: RAX %ld, failed 0x%lx of 0x%lx",
                   (int64_t)smp_mb->sc_rax, smp_mb->sc_rbx, smp_mb->sc_rcx);
}

static void check_final(void)
{
    struct smp_regs sc;
    bool ok = smp_vmcall(PTV_VMCALL_SELFCHECK, 0, &sc) == TRAP_NONE && sc.rax == PTV_VMCALL_OK;
    smp_report(ok && (sc.rcx & PTV_SELFCHECK_CANARY) && !sc.rbx,
               "final: SELFCHECK on the BSP: failed 0x%lx of 0x%lx", ok ? sc.rbx : ~0ul,
               ok ? sc.rcx : 0ul);
    if (!smp_ap_gone("final"))
        report_ap_selfcheck(); /* restarts the trampoline where OVMF took the AP (check 6) */
    if (smp_mb)
        smp_report_never_bare("final");
    smp_report(smp_canary_intact(), "final: VMM canary intact (CHECK_CANARY)");
}

static EFI_STATUS finish(void)
{
    return smp_summary() ? EFI_ABORTED : EFI_SUCCESS;
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    test_printf("smp: ptvisor with two CPUs, seen from inside\n");
    struct smp_regs r;
    if (smp_vmcall(PTV_VMCALL_VMM_RANGE, 0, &r) != TRAP_NONE || r.rax != PTV_VMCALL_OK) {
        smp_report(false, "VMCALL VMM_RANGE answered on the BSP (no ptvisor below?)");
        return finish();
    }
    smp_vmm_base = r.rbx, smp_vmm_size = r.rcx, smp_canary_pa = r.rdx;
    report_info("VMM at 0x%lx size 0x%lx canary 0x%lx", smp_vmm_base, smp_vmm_size, smp_canary_pa);

    uint32_t id = 0;
    unsigned long enabled = 0;
    if (!smp_find_ap(&id, &enabled)) {
        smp_report(false, "no AP to test: run Bochs with CPUS=2");
        return finish();
    }
    ap_apic_id = id;
    report_info("check 1: shootdown-idle");
    smp_check_shootdown_idle(enabled);
    const char *why = apic_setup() ? NULL : "IA32_APIC_BASE unreadable";
    if (!why && smp_canary_pa + SMP_PAGE > (1ull << 32))
        why = "the VMM canary is above 4 GiB: out of the trampoline's 32-bit reach";
    if (!why)
        why = tramp_setup();
    if (why) {
        smp_skip("INIT-SIPI checks: %s", why);
        report_info("check 6: mp-ap");
        smp_check_mp();
        report_info("check 7: final");
        check_final();
        return finish();
    }
    report_info("check 2: sipi-ap (INIT-SIPI-SIPI to APIC ID %u)", ap_apic_id);
    check_sipi_ap();
    report_info("check 3: init-storm");
    check_init_storm();
    report_info("check 4: sipi-run");
    check_sipi_running();
    report_info("check 5: shootdown");
    smp_check_shootdown();
    report_info("check 6: mp-ap");
    smp_check_mp();
    report_info("check 7: final");
    check_final();
    return finish();
}
