// SPDX-License-Identifier: MIT
/*
 * smp.efi check 1, shootdown-idle (smp.h): before anything INITs the AP, it
 * idles in the firmware's HLT loop as the VMM's guest.  The BSP reads
 * SMP_TOUCH_PA (an on-demand map), drops it with PTV_VMCALL_EPT_DROP, then
 * moves its xAPIC window onto an above-RAM page and back; each is a narrowing
 * the VMM shoots down on every CPU before it returns.  Evidence: SMP_STATS RDX
 * (shootdowns completed) grew each time, and R8 - RDI on the BSP (requests
 * answered by the other CPUs) grew each time: the idle AP took the VMM's NMI,
 * did INVEPT and answered.  This needs no INIT, so it holds in Bochs 2.7 too.
 *
 * smp.efi check 5, shootdown (smp.h): an EPT shootdown under load.  The trampoline AP
 * loops reading SMP_TOUCH_PA (512 GiB: above RAM, which the VMM identity maps
 * on demand, one 1 GiB block at a time) while the BSP makes the VMM narrow
 * EPT three ways:
 *
 *  - strides: one read in every other 1 GiB block of [4 GiB, 1 TiB)
 *    (attack_mem.c's reads), twice.  Where the VMM drops its on-demand maps
 *    (its EPT_OD_MAX_TABLES bound) the second pass faults again on the BSP.
 *    Measured in Bochs: it never does -- with 1 GiB EPT pages and uniform MTRR
 *    types there, the maps of [4 GiB, 1 TiB) need one table page, far below
 *    the bound -- so the strides are kept as the hostile guest's attempt and
 *    their figures printed, not relied on;
 *  - xAPIC window: the BSP moves its xAPIC window (IA32_APIC_BASE) onto the
 *    page after SMP_TOUCH_PA and back.  The VMM maps the real APIC page there
 *    and later the old translation back (exit_msr.c): a changed translation
 *    inside the 1 GiB block the AP's TLB holds, a narrowing on every CPU;
 *  - PTV_VMCALL_EPT_DROP, where the VMM's ABI has it: drop every on-demand map
 *    now.  Only a drop makes the AP's next read fault again (the window's way
 *    back maps the page again at once), so only it proves the AP's TLB entry
 *    for SMP_TOUCH_PA itself was flushed.
 *
 * Evidence, all from the VMM's own counters: SMP_STATS RDX (shootdowns
 * completed) grew; SMP_STATS RDI asked ON the AP (requests it answered) grew;
 * EXIT_STATS(48) asked ON the AP grew after the drop (its TLB was really
 * flushed: its next read faulted); the AP kept running; the canary is intact.
 * The cost of the last shootdown (SMP_STATS RSI) is printed for `make bench`.
 *
 * The BSP reaches GPAs above 4 GiB through a private window (as attack_mem.c):
 * a copy of the firmware's PML4 whose slots 256 and 257 map GPA [0, 1 TiB)
 * with 1 GiB pages, interrupts off while it is loaded.
 */
#include "ptv/vmcall.h"

#include "smp.h"

#define GiB                (1ull << 30)
#define PTE_P              (1ull << 0)
#define PTE_W              (1ull << 1)
#define PTE_PS             (1ull << 7)
#define WIN_SLOT           256u
#define WIN_BASE           0xffff800000000000ull
#define FIRST_GIB          4u    /* above the identity map: the VMM's on-demand floor in Bochs */
#define MIN_TOUCH          100ul /* AP reads before and after the drop */
#define MSR_IA32_APIC_BASE 0x1b
#define APIC_WINDOW_PA     (SMP_TOUCH_PA + 0x1000) /* the AP never reads it */

/* ---- the trampoline's long-mode tables: [0, 1 GiB) and SMP_TOUCH_PA, 2 MiB pages ---- */

void smp_build_tables(uint64_t base)
{
    uint64_t *pml4 = (uint64_t *)(base + SMP_OFF_PML4);
    uint64_t *pdpt_lo = (uint64_t *)(base + SMP_OFF_PDPT_LO),
             *pd_lo = (uint64_t *)(base + SMP_OFF_PD_LO);
    uint64_t *pdpt_hi = (uint64_t *)(base + SMP_OFF_PDPT_HI),
             *pd_hi = (uint64_t *)(base + SMP_OFF_PD_HI);
    _Static_assert((SMP_TOUCH_PA >> 39) == 1 && !(SMP_TOUCH_PA & ((1ull << 30) - 1)),
                   "SMP_TOUCH_PA: PML4 slot 1, PDPT and PD slot 0");
    pml4[0] = (base + SMP_OFF_PDPT_LO) | PTE_P | PTE_W;
    pml4[1] = (base + SMP_OFF_PDPT_HI) | PTE_P | PTE_W;
    pdpt_lo[0] = (base + SMP_OFF_PD_LO) | PTE_P | PTE_W;
    for (uint64_t i = 0; i < 512; i++)
        pd_lo[i] = (i << 21) | PTE_P | PTE_W | PTE_PS;
    pdpt_hi[0] = (base + SMP_OFF_PD_HI) | PTE_P | PTE_W;
    pd_hi[0] = SMP_TOUCH_PA | PTE_P | PTE_W | PTE_PS;
}

/* ---- the BSP's window above 4 GiB ---- */

static uint8_t pages_raw[4 * SMP_PAGE];
static uint64_t *win_pml4;
static unsigned maxphy;

static const char *window_setup(void)
{
    if (win_pml4)
        return NULL;
    if (!(cpuid(0x80000001, 0).edx & (1u << 26)))
        return "no 1 GiB guest pages";
    maxphy = cpuid(0x80000008, 0).eax & 0xff;
    if (maxphy < 40)
        return "MAXPHYADDR below 40: no 512 GiB page to touch";
    uint8_t *p = (uint8_t *)(((uint64_t)pages_raw + SMP_PAGE - 1) & ~(uint64_t)(SMP_PAGE - 1));
    uint64_t *fw = (uint64_t *)(cr3_read() & 0x000ffffffffff000ull);
    if (fw[WIN_SLOT] || fw[WIN_SLOT + 1])
        return "the firmware uses PML4 slots 256/257";
    uint64_t *pdpt0 = (uint64_t *)(p + SMP_PAGE), *pdpt1 = (uint64_t *)(p + 2 * SMP_PAGE);
    win_pml4 = (uint64_t *)p;
    for (uint64_t i = 0; i < 512; i++) {
        win_pml4[i] = fw[i];
        pdpt0[i] = (i * GiB) | PTE_P | PTE_W | PTE_PS;
        pdpt1[i] = (512 * GiB + i * GiB) | PTE_P | PTE_W | PTE_PS;
    }
    win_pml4[WIN_SLOT] = (uint64_t)pdpt0 | PTE_P | PTE_W; /* UEFI: identity mapped */
    win_pml4[WIN_SLOT + 1] = (uint64_t)pdpt1 | PTE_P | PTE_W;
    return NULL;
}

/* one read in every 1 GiB block of [4 GiB, 1 TiB) but the AP's; faults caught */
static unsigned long stride_pass(void)
{
    uint64_t flags, fw = cr3_read(), v;
    unsigned long faults = 0;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    cr3_write((uint64_t)win_pml4);
    for (uint64_t g = FIRST_GIB; g < (1ull << (40 - 30)); g++)
        if (g * GiB != SMP_TOUCH_PA)
            faults += load64_trap(WIN_BASE + g * GiB + 8 * g, &v) != TRAP_NONE;
    cr3_write(fw);
    if (flags & (1u << 9))
        __asm__ volatile("sti" ::: "memory");
    return faults;
}

/* the BSP reads SMP_TOUCH_PA through its window: TRAP_NONE or the vector */
static int bsp_touch(uint64_t *v)
{
    uint64_t flags, fw = cr3_read();
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    cr3_write((uint64_t)win_pml4);
    int vec = load64_trap(WIN_BASE + SMP_TOUCH_PA, v);
    cr3_write(fw);
    if (flags & (1u << 9))
        __asm__ volatile("sti" ::: "memory");
    return vec;
}

/* the xAPIC window there and back, interrupts off; 0 or why not */
static const char *apic_window_bounce(void)
{
    uint64_t base, flags;
    if (rdmsr_trap(MSR_IA32_APIC_BASE, &base) != TRAP_NONE)
        return "RDMSR IA32_APIC_BASE faulted";
    if (base & (1ull << 10))
        return "x2APIC mode: no xAPIC window to move";
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    int v1 = wrmsr_trap(MSR_IA32_APIC_BASE, APIC_WINDOW_PA | (base & 0xfff));
    int v2 = wrmsr_trap(MSR_IA32_APIC_BASE, base);
    if (flags & (1u << 9))
        __asm__ volatile("sti" ::: "memory");
    return v1 != TRAP_NONE || v2 != TRAP_NONE ? "WRMSR IA32_APIC_BASE faulted" : NULL;
}

static uint64_t bsp_ept_exits(void)
{
    struct smp_regs r;
    return smp_vmcall(PTV_VMCALL_EXIT_STATS, EXIT_REASON_EPT_VIOLATION, &r) == TRAP_NONE &&
                   r.rax == PTV_VMCALL_OK
               ? r.rcx
               : 0;
}

static bool bsp_smp_stats(struct smp_regs *r)
{
    return smp_vmcall(PTV_VMCALL_SMP_STATS, 0, r) == TRAP_NONE && r->rax == PTV_VMCALL_OK;
}

static uint64_t touch_goal;

static bool touched_enough(void)
{
    return smp_mb->touches >= touch_goal;
}

/* the AP's counters in one mailbox round */
struct ap_view {
    bool ok; /* the AP answered and made its VMCALLs */
    uint64_t answered, ept_exits, counter, touches;
};

static struct ap_view ap_view(void)
{
    struct ap_view a = {0};
    a.ok = smp_ap_round() && smp_mb->hv_ok && smp_mb->smp_rax == PTV_VMCALL_OK &&
           smp_mb->exit_rax == PTV_VMCALL_OK;
    a.answered = smp_mb->smp_rdi;
    a.ept_exits = smp_mb->exit_rcx;
    a.counter = smp_mb->counter;
    a.touches = smp_mb->touches;
    return a;
}

/* one narrowing seen in SMP_STATS: completed, and answered by the other CPUs */
static void report_answered(const char *what, const struct smp_regs *a, const struct smp_regs *b)
{
    smp_report(b->rdx > a->rdx, "shootdown-idle: %s: shootdowns completed %lu -> %lu", what, a->rdx,
               b->rdx);
    smp_report(b->r8 - b->rdi > a->r8 - a->rdi,
               "shootdown-idle: %s: answers by the other CPUs %lu -> %lu", what, a->r8 - a->rdi,
               b->r8 - b->rdi);
}

/* the BSP's on-demand map: read (all ones), then EPT_DROP; false if not done */
static bool touch_and_drop(const char *check)
{
    uint64_t v = 0;
    int tv = bsp_touch(&v);
    smp_report(tv == TRAP_NONE && v == ~0ull, "%s: BSP reads 0x%lx: all ones (0x%lx)", check,
               (unsigned long)SMP_TOUCH_PA, v);
    struct smp_regs d;
    int dv = smp_vmcall(PTV_VMCALL_EPT_DROP, 0, &d);
    return smp_report(dv == TRAP_NONE && d.rax == PTV_VMCALL_OK && d.rbx == 0,
                      "%s: VMCALL EPT_DROP: vector %d, RAX %ld, RBX %ld", check, dv, (int64_t)d.rax,
                      (int64_t)d.rbx);
}

void smp_check_shootdown_idle(unsigned long cpus)
{
    struct smp_regs s0, s1, s2;
    if (!bsp_smp_stats(&s0)) {
        smp_report(false, "shootdown-idle: SMP_STATS on the BSP: RAX %ld", (int64_t)s0.rax);
        return;
    }
    smp_report(s0.rbx == 0 && s0.rcx == cpus && cpus >= 2,
               "shootdown-idle: SMP_STATS: vCPU %lu, %lu CPUs under the VMM (want 0, %lu)", s0.rbx,
               s0.rcx, cpus);
    smp_report(!(s0.r9 & PTV_SMP_INIT_REDELIVERED),
               "shootdown-idle: no INIT re-delivery flagged yet (R9 0x%lx)", s0.r9);
    report_info("shootdown-idle: %lu shootdowns, %lu answers (%lu by the BSP) so far", s0.rdx,
                s0.r8, s0.rdi);
    const char *why = window_setup();
    if (why)
        smp_skip("shootdown-idle: EPT_DROP: %s", why);
    else if (touch_and_drop("shootdown-idle") && bsp_smp_stats(&s1))
        report_answered("EPT_DROP", &s0, &s1);
    if (!bsp_smp_stats(&s1))
        s1 = s0;
    const char *bounce = apic_window_bounce();
    if (bounce)
        smp_skip("shootdown-idle: xAPIC window: %s", bounce);
    else if (bsp_smp_stats(&s2))
        report_answered("xAPIC window", &s1, &s2);
    if (bsp_smp_stats(&s2) && s2.rdx > s0.rdx)
        report_info("bench ept_shootdown_ticks=%lu shootdowns=%lu", s2.rsi, s2.rdx);
    /* the figure: VM exits of the AP, idle as a guest in the firmware's loop, over
     * one second (SMP_STATS R10 = exit total of the vCPU named in RBX) */
    struct smp_regs a0, a1;
    if (smp_vmcall(PTV_VMCALL_SMP_STATS, 1, &a0) == TRAP_NONE && a0.rax == PTV_VMCALL_OK) {
        test_stall_us(1000000);
        if (smp_vmcall(PTV_VMCALL_SMP_STATS, 1, &a1) == TRAP_NONE && a1.rax == PTV_VMCALL_OK)
            report_info("bench idle_ap_exits_per_s=%lu (AP exits %lu -> %lu)", a1.r10 - a0.r10,
                        a0.r10, a1.r10);
    }
    smp_report(smp_canary_intact(), "shootdown-idle: VMM canary intact (CHECK_CANARY)");
}

/* the AP is lost (smp.h): the BSP's part only, the VMM must not wait for it */
static void shootdown_bsp_only(void)
{
    struct smp_regs s0, s1;
    bool ok0 = bsp_smp_stats(&s0);
    if (touch_and_drop("shootdown") && ok0 && bsp_smp_stats(&s1))
        smp_report(s1.rdx > s0.rdx,
                   "shootdown: AP in wait-for-SIPI: shootdowns completed %lu -> %lu", s0.rdx,
                   s1.rdx);
    smp_report(smp_canary_intact(), "shootdown: VMM canary intact (CHECK_CANARY)");
}

void smp_check_shootdown(void)
{
    const char *why = window_setup();
    if (why) {
        smp_skip("shootdown: %s", why);
        return;
    }
    if (smp_ap_gone("shootdown")) {
        shootdown_bsp_only();
        return;
    }
    if (smp_mb->stage != SMP_STAGE_LOOP) {
        smp_report(false, "shootdown: the AP's loop does not run");
        return;
    }
    smp_mb->mode = SMP_MODE_TOUCH;
    touch_goal = smp_mb->touches + MIN_TOUCH;
    bool touching = smp_wait(touched_enough, 1000);
    smp_report(touching && smp_mb->touch_val == ~0ull,
               "shootdown: AP reads 0x%lx: all ones (0x%lx)", (unsigned long)SMP_TOUCH_PA,
               smp_mb->touch_val);
    if (!touching)
        return;

    struct smp_regs s0, s1;
    bool bsp0 = bsp_smp_stats(&s0);
    struct ap_view a0 = ap_view();
    uint64_t e0 = bsp_ept_exits();
    unsigned long f1 = stride_pass();
    uint64_t e1 = bsp_ept_exits();
    unsigned long f2 = stride_pass();
    uint64_t e2 = bsp_ept_exits();
    report_info("shootdown: BSP strides: %lu + %lu EPT exits, %lu + %lu faults", e1 - e0, e2 - e1,
                f1, f2);
    const char *bounce = apic_window_bounce();
    report_info("shootdown: xAPIC window to 0x%lx and back: %s", (unsigned long)APIC_WINDOW_PA,
                bounce ? bounce : "done");
#ifdef PTV_VMCALL_EPT_DROP
    struct smp_regs d;
    int dv = smp_vmcall(PTV_VMCALL_EPT_DROP, 0, &d);
    report_info("shootdown: VMCALL EPT_DROP: vector %d, RAX %ld", dv, (int64_t)d.rax);
#else
    report_info("shootdown: no EPT_DROP in the VMCALL ABI: nothing drops the AP's map");
#endif
    touch_goal = smp_mb->touches + MIN_TOUCH;
    bool ran_on = smp_wait(touched_enough, 1000);
    struct ap_view a1 = ap_view();
    bool bsp1 = bsp_smp_stats(&s1);

    if (bsp0 && bsp1)
        smp_report(s1.rdx > s0.rdx, "shootdown: SMP_STATS shootdowns completed %lu -> %lu", s0.rdx,
                   s1.rdx);
    else
        smp_report(false, "shootdown: SMP_STATS on the BSP: RAX %ld", (int64_t)s1.rax);
    if (!a0.ok || !a1.ok) {
        smp_report(false, "shootdown: AP made no VMCALL (%s)",
                   smp_mb->hv_ok ? "no answer" : "outside the VMM");
    } else {
        smp_report(a1.answered > a0.answered, "shootdown: AP answered requests %lu -> %lu (RDI)",
                   a0.answered, a1.answered);
        smp_report(a1.ept_exits > a0.ept_exits,
                   "shootdown: AP re-faulted after the drop: EPT exits %lu -> %lu", a0.ept_exits,
                   a1.ept_exits);
    }
    smp_report(ran_on && a1.counter > a0.counter && smp_mb->touch_val == ~0ull,
               "shootdown: AP ran on (loop %lu -> %lu, reads all ones)", a0.counter, a1.counter);
    smp_report(smp_canary_intact(), "shootdown: VMM canary intact (CHECK_CANARY)");
    if (bsp1 && s1.rdx > s0.rdx)
        report_info("bench ept_shootdown_load_ticks=%lu shootdowns=%lu", s1.rsi, s1.rdx - s0.rdx);
    smp_mb->mode = SMP_MODE_COUNT;
}
