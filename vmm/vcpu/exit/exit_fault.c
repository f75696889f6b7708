/* SPDX-License-Identifier: MIT */
/*
 * Exits that report guest faults and signals: exceptions/NMI, triple fault,
 * INIT/SIPI (pt-facts G.4, G.8), failed VM entries.
 */
#include "vmx/vcpu.h"
#include "pmu/shim/pmu_vmx.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "base/log.h"
#include "vmx/vmx_cpu.h"
#include "pt/rtit.h"
#include "hw/percpu.h"
#include "smp/smp.h"
#include "emul/vcpu_reset.h"
#include "trace/shim/trace_vmx.h"

/*
 * NMIs exit (NMI exiting + virtual NMIs, so the VMM's shootdown IPIs never reach
 * the guest): one that was an EPT shootdown request is answered here
 * (vmm/smp/smp.c); any other is the guest's and is owed to it, delivered when
 * the guest can take it (vcpu_loop.c).  The exception bitmap is empty, so other
 * vectors only come from a VMM change; reflect them exactly as they arrived.
 */
enum exit_action handle_exception_nmi(struct vcpu *v, const struct vmexit *e)
{
    if (!(e->intr_info & INTR_INFO_VALID))
        return EXIT_RESUME;
    uint32_t type = e->intr_info & INTR_INFO_INTR_TYPE_MASK;
    if (type == INTR_TYPE_NMI_INTR) {
        struct percpu *pc = this_cpu();
        /* the exit interrupted an IRET that had unblocked NMIs: block them again */
        if (e->intr_info & INTR_INFO_UNBLOCK_NMI && !(e->idt_vec_info & INTR_INFO_VALID))
            vmcs_write32(GUEST_INTERRUPTIBILITY_INFO,
                         vmcs_read32(GUEST_INTERRUPTIBILITY_INFO) | GUEST_INTR_STATE_NMI);
        if (pmu_vmx_nmi(smp_nmi(pc))) /* not the VMM's, or a guest PMI merged in */
            pc->nmi_owed = 1;
        nmi_unblock(); /* the next VMM NMI must reach this CPU (cpu.h) */
        return EXIT_RESUME;
    }
    if ((e->intr_info & INTR_INFO_VECTOR_MASK) == DB_VECTOR) {
        uint64_t qual;
        if (trace_vmx_db_exit(v, e->qual, &qual))
            return EXIT_RESUME;
        /* the guest's own #DB: DR6 as the CPU would have left it had the #DB not exited */
        if (type == INTR_TYPE_HARD_EXCEPTION)
            write_dr6(db_dr6_deliver(read_dr6(), qual));
    }
    /* a #PF that exited (the tracer's blocks trap every exception) left CR2 as it was */
    uint64_t cr2;
    if (pf_reflect_cr2(e->intr_info, e->qual, &cr2))
        write_cr2(cr2);
    v->inject = (struct pending_event){
        .valid = true,
        .info = e->intr_info & ~INTR_INFO_UNBLOCK_NMI,
        .error = e->intr_error,
        .insn_len = (type == INTR_TYPE_SOFT_EXCEPTION || type == INTR_TYPE_PRIV_SW_EXCEPTION)
                        ? e->insn_len
                        : 0,
    };
    return EXIT_INJECT;
}

enum exit_action handle_triple_fault(struct vcpu *v, const struct vmexit *e)
{
    pr_err("vmx", "guest triple fault at RIP %#lx", e->rip);
    return EXIT_STOP_GUEST;
}

/*
 * Load the architectural state after INIT / at SIPI (emul/vcpu_reset.c: SDM Vol.
 * 3A 9.1.1 Table 9-1, host-tested against the VM-entry checks) into the VMCS.
 * CR2 and DR0-DR3/DR6 are not switched by the VMM: the guest's values stay in
 * the registers (documented deviation, no guest relies on them after INIT).
 */
static void vcpu_load_reset(struct vcpu *v, enum vreset_kind kind, uint8_t vector)
{
    struct vreset_state s;
    vreset_state(&s, kind, vector, cpuid_count(1, 0).eax, vcpu_guest_cr0(v));
    for (unsigned i = 0; i < NR_GPRS; i++)
        v->regs.gpr[i] = s.gpr[i];
    vmcs_writel(GUEST_RSP, s.gpr[GPR_RSP]);
    vmcs_writel(CR0_READ_SHADOW, s.cr0);
    vmcs_writel(GUEST_CR0, (s.cr0 | v->cr0_fixed0) & v->cr0_fixed1);
    vmcs_writel(CR4_READ_SHADOW, s.cr4);
    vmcs_writel(GUEST_CR4, (s.cr4 | v->cr4_fixed0) & v->cr4_fixed1);
    vmcs_writel(GUEST_CR3, s.cr3);
    vmcs_write64(GUEST_IA32_EFER, s.efer);
    vmcs_write32(VM_ENTRY_CONTROLS, vmcs_read32(VM_ENTRY_CONTROLS) & ~VM_ENTRY_IA32E_MODE);
    VMCS_SEG_WRITE(CS, s.cs);
    VMCS_SEG_WRITE(DS, s.ds);
    VMCS_SEG_WRITE(ES, s.es);
    VMCS_SEG_WRITE(SS, s.ss);
    VMCS_SEG_WRITE(FS, s.fs);
    VMCS_SEG_WRITE(GS, s.gs);
    VMCS_SEG_WRITE(LDTR, s.ldtr);
    VMCS_SEG_WRITE(TR, s.tr);
    vmcs_writel(GUEST_GDTR_BASE, s.gdtr_base);
    vmcs_write32(GUEST_GDTR_LIMIT, s.gdtr_limit);
    vmcs_writel(GUEST_IDTR_BASE, s.idtr_base);
    vmcs_write32(GUEST_IDTR_LIMIT, s.idtr_limit);
    vmcs_writel(GUEST_RIP, s.rip);
    vmcs_writel(GUEST_RFLAGS, s.rflags);
    vmcs_writel(GUEST_DR7, s.dr7);
    vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, s.interruptibility);
    vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, s.pending_dbg);
    vmcs_write32(GUEST_ACTIVITY_STATE, s.activity);
    vmx_invept_all(); /* INIT flushes the TLBs: the guest's VPID-tagged ones with them */
}

/*
 * What INIT resets beyond the register file that the VMM, not the CPU, holds for
 * the guest: a queued event, pending debug exceptions, PT TraceEn (cleared on warm
 * reset, pt-facts B: the other RTIT MSRs are kept where CPUID.14.0:EBX[2] says so,
 * and the engine's view of them with it).  MSRs INIT leaves alone (IA32_DEBUGCTL,
 * IA32_LBR_CTL, PAT, PERF_GLOBAL_CTRL, MTRRs, APIC base) stay as they were, as on
 * hardware (SDM Vol. 3A 9.1.1, table 9-1: "all other MSRs" unchanged by INIT).
 */
static void vcpu_init_event(struct vcpu *v)
{
    v->inject.valid = false;
    this_cpu()->nmi_owed = 0; /* an NMI owed from before the INIT is gone with it */
    if (v->nmi_stepping) {
        v->nmi_stepping = false;
        vcpu_mtf_update(v); /* a trace window keeps stepping across the INIT */
    }
    vcpu_nmi_window(v, false);
    vmcs_write32(VM_ENTRY_INTR_INFO_FIELD, 0);
    vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, 0);
    struct pt_msr_result res;
    uint64_t ctl;
    if (pt_ctrl_rdmsr(&v->pt, MSR_IA32_RTIT_CTL, &ctl, &res) == PT_MSR_OK &&
        (ctl & RTIT_CTL_TRACEEN) &&
        pt_ctrl_wrmsr(&v->pt, MSR_IA32_RTIT_CTL, ctl & ~RTIT_CTL_TRACEEN, &res) != PT_MSR_OK)
        pr_warn_rl("pt", "INIT: clearing TraceEn refused (%s)", res.reason);
}

bool vmm_init_redelivery; /* some CPU re-delivers INIT (VMCALL SMP_STATS) */

/*
 * INIT (pt-facts G.4; SDM Vol. 3A 9.1, 9.4): the BSP restarts at the reset
 * vector; an AP enters the wait-for-SIPI activity state (Vol. 3C 25.4.2), in
 * which INIT is blocked and NMIs are held, so the EPT shootdown protocol stops
 * waiting for it until its SIPI.  No log line on this path: a SIPI that
 * arrives while the AP is still in root is lost (Vol. 3C 26.2), so the way
 * back into wait-for-SIPI stays short.
 */
enum exit_action handle_init(struct vcpu *v, const struct vmexit *e)
{
    bool bsp = this_cpu()->bsp;
    /* an INIT before the first instruction of a SIPI start, again and again:
     * the CPU keeps re-delivering the INIT that preceded the SIPI (Bochs 2.7,
     * vcpu_reset.h).  No VMM can run this vCPU again: it stays in wait-for-SIPI
     * for good (never outside VMX), said once.  "No other exit since the SIPI"
     * comes from the exit count (record_exit() already counted this one). */
    if (v->exits_total != v->sipi_start_exit + 1)
        v->sipi_start.fresh = false;
    v->sipi_start_exit = v->exits_total;
    switch (vreset_init_redelivery(&v->sipi_start, e->rip, vmcs_readl(GUEST_CS_BASE))) {
    case VRESET_INIT_IGNORE:
        v->spurious_inits++;
        return EXIT_RESUME;
    case VRESET_INIT_GIVE_UP:
        /* only where the CPU showed the emulator's fingerprint (blocking by SMI saved outside
         * SMM): elsewhere INITs a guest sends back to back right after a SIPI are each ignored,
         * and the AP is never given up (attacker review: 16 of them killed it for good) */
        if (!v->smi_block_quirk) {
            v->spurious_inits++;
            v->sipi_start.redelivered = 0;
            return EXIT_RESUME;
        }
        v->init_broken = true;
        vmm_init_redelivery = true;
        pr_err("smp",
               "the CPU re-delivers INIT at every VM entry (a Bochs 2.7 bug): this AP cannot "
               "be restarted under VMX; it stays in wait-for-SIPI");
        break;
    case VRESET_INIT_REAL:
        break;
    }
    switch (vreset_on_init(bsp, vmcs_read32(GUEST_ACTIVITY_STATE))) {
    case VRESET_RESET_VECTOR:
        vcpu_init_event(v);
        vcpu_load_reset(v, VRESET_INIT_BSP, 0);
        pr_info_rl("vmx", "INIT received: the BSP restarts at the reset vector");
        return EXIT_RESUME;
    case VRESET_WAIT_SIPI:
        v->inits++;
        v->sipi_start.fresh = false;
        vcpu_init_event(v);
        vcpu_load_reset(v, VRESET_INIT_AP, 0);
        smp_set_state(SD_CPU_WAIT_SIPI);
        return EXIT_RESUME;
    default: /* blocked in wait-for-SIPI: never an exit there */
        return EXIT_RESUME;
    }
}

/*
 * SIPI (exits only in wait-for-SIPI, Vol. 3C 26.2): real mode at vector << 12.
 * The activity state the CPU saves on a SIPI exit is not what the vCPU was in
 * (Bochs saves "active"), so the VMM's own record decides: the shootdown
 * protocol's state of this CPU, set to WAIT_SIPI by handle_init().
 */
enum exit_action handle_sipi(struct vcpu *v, const struct vmexit *e)
{
    uint8_t vec = (uint8_t)e->qual;
    if (v->init_broken) { /* see handle_init(): SIPIs can no longer start it */
        vmcs_write32(GUEST_ACTIVITY_STATE, GUEST_ACTIVITY_WAIT_SIPI);
        return EXIT_RESUME;
    }
    uint32_t activity = smp_get_state() == SD_CPU_WAIT_SIPI ? GUEST_ACTIVITY_WAIT_SIPI
                                                            : vmcs_read32(GUEST_ACTIVITY_STATE);
    if (vreset_on_sipi(activity, vec) != VRESET_START)
        return EXIT_RESUME;
    if (vmcs_read32(GUEST_INTERRUPTIBILITY_INFO) & GUEST_INTR_STATE_SMI)
        v->smi_block_quirk = true; /* see vmx_run() */
    /* an INIT exit before this start's first instruction is an INIT held while the vCPU
     * waited for this SIPI (vcpu_reset.h): ignored, as a CPU outside VMX already in
     * wait-for-SIPI ignores it */
    v->sipi_start = (struct vreset_sipi_start){.fresh = true, .cs_base = (uint64_t)vec << 12};
    v->sipi_start_exit = v->exits_total;
    smp_set_state(SD_CPU_ACTIVE); /* answers any shootdown it missed, before guest code */
    vcpu_load_reset(v, VRESET_SIPI, vec);
    pr_info_rl("vmx", "SIPI vector %#x: vCPU starts in real mode at %#x", vec, vec << 12);
    return EXIT_RESUME;
}

/*
 * Task switches exit unconditionally (SDM Vol. 3C 26.4.2) and only happen outside
 * IA-32e mode: emulated as hardware does them (emul/task_switch.h: the rules and what
 * is not modelled; vcpu/exit/exit_task_switch.c: the VMCS side).  In IA-32e mode, which
 * cannot raise one, the guest gets #UD and a rate-limited line.
 */
enum exit_action handle_entry_failure(struct vcpu *v, const struct vmexit *e)
{
    pr_err("vmx", "VM entry failed: %s (qualification %#lx): invalid guest state",
           vmx_exit_reason_name(e->reason), e->qual);
    return EXIT_STOP_GUEST;
}
