/* SPDX-License-Identifier: MIT */
/*
 * The vCPU's run loop: vmx_run() (enter the guest, return a decoded exit), the dispatch to one
 * handler per exit class (exit/exit_*.c), the owed NMI and vmx_loop(), in one file so that an
 * exit costs no call but the handler's (docs/ARCHITECTURE.md, "The exit path").  Event injection
 * and the exiting controls are vmx/vcpu_ops.c.
 */
#include "vmx/vmx_cpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "pmu/shim/pmu_vmx.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "base/panic.h"
#include "pt/shim/pt_vmx.h"
#include "emul/emul_policy.h"
#include "hw/percpu.h"
#include "smp/smp.h"
#include "dev/uart_console.h"
#include "trace/shim/trace_vmx.h"
#include "trace/shim/trace_dump.h"
#include "iommu/shim/iommu_vmm.h"
#include "lbr/shim/lbr_vmx.h"

int vmx_enter(struct guest_regs *regs, int launched);

/*
 * The guest's NMI is owed (it hit the VMM in root operation, or exited under NMI
 * exiting and was not an EPT shootdown request, vmm/smp/).  Inject it when the
 * guest can take one; while it is blocked (STI / MOV SS shadow, inside its NMI
 * handler) arm NMI-window exiting: the CPU exits as soon as the blocking ends (the
 * IRET of the guest's NMI handler), even from HLT, and the next entry injects it
 * (emul/emul_policy.c nmi_owed_action).  A CPU without the control steps the guest
 * with the monitor trap flag instead and tries again after each instruction.
 */
static void set_mtf(struct vcpu *v, bool on)
{
    if (v->nmi_stepping == on)
        return;
    v->nmi_stepping = on;
    vcpu_mtf_update(v); /* the software tracer may keep it on (trace_step.c) */
}

/* NMI-window exiting can be armed: allowed by the CPU, and virtual NMIs on (SDM Vol. 3C
 * 25.6.2: the control may be 1 only with "virtual NMIs") */
static bool have_nmi_window(void)
{
    return (vmx_caps.proc >> 32 & CPU_BASED_NMI_WINDOW_EXITING) &&
           (vmx_ctls.pin & PIN_BASED_VIRTUAL_NMIS);
}

static void deliver_owed_nmi(struct vcpu *v)
{
    bool window = have_nmi_window();
    switch (nmi_owed_action(
        true, v->inject.valid || (vmcs_read32(VM_ENTRY_INTR_INFO_FIELD) & INTR_INFO_VALID),
        vmcs_read32(GUEST_ACTIVITY_STATE), vmcs_read32(GUEST_INTERRUPTIBILITY_INFO), window)) {
    case NMI_INJECT:
        vmcs_write32(VM_ENTRY_INTR_INFO_FIELD, INTR_INFO_VALID | INTR_TYPE_NMI_INTR | NMI_VECTOR);
        this_cpu()->nmi_owed = 0;
        set_mtf(v, false);
        vcpu_nmi_window(v, false);
        break;
    case NMI_WAIT:
        if (window)
            vcpu_nmi_window(v, true);
        else if (vmx_have_mtf())
            set_mtf(v, true);
        break;
    case NMI_WAIT_STEP:
        if (vmx_have_mtf())
            set_mtf(v, true);
        else if (window)
            vcpu_nmi_window(v, true);
        break;
    case NMI_LATER:
    case NMI_NONE:
        break;
    }
}

/* basic exit reasons whose exit qualification is cleared (SDM Vol. 3C 28.2.1) */
#define EXIT_NO_QUAL                                                                               \
    (1ull << EXIT_REASON_CPUID | 1ull << EXIT_REASON_VMCALL | 1ull << EXIT_REASON_MSR_READ |       \
     1ull << EXIT_REASON_MSR_WRITE | 1ull << EXIT_REASON_XSETBV | 1ull << EXIT_REASON_NMI_WINDOW | \
     1ull << EXIT_REASON_MONITOR_TRAP_FLAG)

/* basic exit reasons that decode more than reason, qualification, RIP and length: an exception
 * or NMI (interruption information; the tracer's #DB step), a triple fault and the EPT exits
 * (IDT vectoring, the guest-physical address), MTF (the tracer's step) */
#define EXIT_RARE                                                                                  \
    (1ull << EXIT_REASON_EXCEPTION_NMI | 1ull << EXIT_REASON_TRIPLE_FAULT |                        \
     1ull << EXIT_REASON_MONITOR_TRAP_FLAG | 1ull << EXIT_REASON_EPT_VIOLATION |                   \
     1ull << EXIT_REASON_EPT_MISCONFIG)

/* the exit statistics (every exit, the tracer's own too) */
static void count_exit(struct vcpu *v, uint32_t reason)
{
    v->exits_total++;
    v->exits_by_reason[reason < EXIT_REASON_MAX ? reason : EXIT_REASON_MAX]++;
}

/* the exit ring keeps the exits that were handled (a crash report's recent exits) */
static void record_exit(struct vcpu *v, const struct vmexit *e)
{
    v->ring[v->ring_next % EXIT_RING_SIZE] = (struct exit_record){
        .reason = e->raw_reason, .qual = e->qual, .rip = e->rip, .tsc = rdtsc()};
    v->ring_next++;
    count_exit(v, e->reason);
}

/*
 * Enter the guest and return at its next exit.  Returns 0 with *e filled,
 * or a VM-instruction error number (> 0) / -1 (VMfailInvalid) when the entry
 * itself failed; a failed *entry check* (exit reason bit 31) is a decoded exit.
 * The software tracer's single steps (MTF exits, or the trap flag's #DB with sw_trace = tf) do
 * not return: they are traced at the exit and the guest entered again (trace_vmx_mtf_exit,
 * trace_vmx_step_exit), counted in the exit statistics but kept out of the exit ring, which
 * keeps the exits around them.
 */
static inline __attribute__((always_inline)) int vmx_run(struct vcpu *v, struct percpu *pc,
                                                         struct vmexit *e)
{
    bool stepped = false; /* the fast path traced the last exit's step already */
    for (;;) {
        bool event = v->inject.valid;
        if (v->inject.valid) {
            vmcs_write32(VM_ENTRY_INTR_INFO_FIELD, v->inject.info);
            if (v->inject.info & INTR_INFO_DELIVER_CODE)
                vmcs_write32(VM_ENTRY_EXCEPTION_ERROR_CODE, v->inject.error);
            vmcs_write32(VM_ENTRY_INSTRUCTION_LEN, v->inject.insn_len);
            v->inject.valid = false;
        }
        if (smp_behind(pc)) /* an EPT shootdown this CPU has not answered yet: INVEPT first */
            smp_catch_up();
        if (console_traps != v->io_trap_mask) /* another vCPU changed the UART's traps */
            io_traps_update(v);
        if (trace_vmx_db_stale(v)) /* frames with the tracer's TF came or went (trace_step.c) */
            trace_vmx_db_update(v);
        if (v->smi_block_quirk) {
            /* Bochs 2.7 keeps SMIs masked after a SIPI exit and saves "blocking by SMI"
             * at every exit: the VMM never runs the guest in SMM, so the bit can only be
             * the emulator's, and VM entry would refuse it (SDM Vol. 3C 27.3.1.5) */
            uint32_t intr = vmcs_read32(GUEST_INTERRUPTIBILITY_INFO);
            if (intr & GUEST_INTR_STATE_SMI)
                vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, intr & ~GUEST_INTR_STATE_SMI);
        }
        if (pc->root_nmi_pmu) { /* NMIs taken in root (desc.c); a plain read first: no locked
                                 * exchange on every entry */
            uint32_t root_nmi = __atomic_exchange_n(&pc->root_nmi_pmu, 0, __ATOMIC_RELAXED);
            if (pmu_vmx_nmi(root_nmi & ROOT_NMI_VMM))
                pc->nmi_owed = 1;
        }
        if (pc->nmi_owed) {
            event = true; /* injected now, or owed still */
            deliver_owed_nmi(v);
        }
        if (v->trace_stepping && !stepped)
            trace_vmx_before_entry(v); /* what the last step ran goes into the trace */
        stepped = false;
        /* the one guard of blocks against events (trace_step.c): after every writer of the
         * entry's event (the two above) and every arming (the tracer's step, the block exit) */
        if (v->trace_blk && (event || v->nmi_stepping))
            trace_vmx_block_cancel(v); /* a handler would run unseen inside the block */
        if (v->dumping)
            trace_dump_slice(v); /* a serial dump goes out in slices between guest runs */
        if (v->pt.active)
            pt_ctrl_before_entry(&v->pt);
        int r = vmx_enter(&v->regs, v->launched);
        if (r == 1)
            return (int)vmx_insn_error();
        if (r)
            return -1;
        v->launched = true;
        if (v->pt.active) {
            pt_ctrl_after_exit(&v->pt);
            pt_vmx_log(v);
        }
        uint32_t raw = vmcs_read32(VM_EXIT_REASON);
        e->raw_reason = raw;
        e->reason = raw & 0xffff;
        e->intr_info = e->intr_error = e->idt_vec_info = e->idt_vec_error = 0;
        /* ran unstepped outside the window: the tracer is put where the vCPU is (trace_step.c) */
        if (__builtin_expect(v->trace_free, 0))
            trace_vmx_free_exit(v, raw & 0xffff);
        e->gpa = 0;
        /* one test on the common path: the exits that decode more (EXIT_RARE, a failed entry,
         * reasons from 64) and any exit while a block of the tracer is out */
        bool rare = raw >= 64 || (EXIT_RARE >> raw & 1);
        if (__builtin_expect(rare || v->trace_blk, 0)) {
            if (e->reason == EXIT_REASON_EXCEPTION_NMI)
                e->intr_info = vmcs_read32(VM_EXIT_INTR_INFO);
            if (v->trace_blk) { /* a block was out (trace_step.c) */
                int b = trace_vmx_block_exit(v, e->raw_reason, e->intr_info);
                if (b >= 0) {
                    count_exit(v, e->reason);
                    stepped = b > 0;
                    continue;
                }
            }
            if (e->raw_reason == EXIT_REASON_MONITOR_TRAP_FLAG && v->trace_stepping &&
                trace_vmx_mtf_exit(v)) {
                count_exit(v, EXIT_REASON_MONITOR_TRAP_FLAG);
                stepped = true;
                continue;
            }
            if (e->reason == EXIT_REASON_EXCEPTION_NMI) {
                if (v->trace_stepping && e->raw_reason == EXIT_REASON_EXCEPTION_NMI &&
                    trace_vmx_step_exit(v, e->intr_info)) {
                    count_exit(v, EXIT_REASON_EXCEPTION_NMI);
                    stepped = true;
                    continue;
                }
                if (e->intr_info & INTR_INFO_DELIVER_CODE)
                    e->intr_error = vmcs_read32(VM_EXIT_INTR_ERROR_CODE);
            }
        }
        /* the exits that have no qualification (SDM Vol. 3C 28.2.1: the field is cleared)
         * skip its VMREAD: the instruction exits the VMM emulates most */
        e->qual = !rare && (EXIT_NO_QUAL >> raw & 1) ? 0 : vmcs_readl(EXIT_QUALIFICATION);
        e->rip = vmcs_readl(GUEST_RIP);
        e->insn_len = vmcs_read32(VM_EXIT_INSTRUCTION_LEN);
        /* the rest only where it means something: every VMREAD costs on the hot path */
        if (__builtin_expect(rare, 0)) {
            if (e->reason == EXIT_REASON_EPT_VIOLATION || e->reason == EXIT_REASON_EPT_MISCONFIG ||
                e->reason == EXIT_REASON_EXCEPTION_NMI || e->reason == EXIT_REASON_TRIPLE_FAULT) {
                /* exits that can interrupt event delivery (SDM Vol. 3C 28.2.4) */
                e->idt_vec_info = vmcs_read32(IDT_VECTORING_INFO_FIELD);
                if (e->idt_vec_info & INTR_INFO_DELIVER_CODE)
                    e->idt_vec_error = vmcs_read32(IDT_VECTORING_ERROR_CODE);
            }
            if (e->reason == EXIT_REASON_EPT_VIOLATION || e->reason == EXIT_REASON_EPT_MISCONFIG)
                e->gpa = vmcs_read64(GUEST_PHYSICAL_ADDRESS);
        }
        record_exit(v, e);
        return 0;
    }
}

/* ---- exit dispatch: one handler per exit class (exit_*.c) ---- */

typedef enum exit_action (*exit_handler)(struct vcpu *, const struct vmexit *);

static const exit_handler handlers[EXIT_REASON_MAX] = {
    [EXIT_REASON_EXCEPTION_NMI] = handle_exception_nmi,
    [EXIT_REASON_TRIPLE_FAULT] = handle_triple_fault,
    [EXIT_REASON_INIT_SIGNAL] = handle_init,
    [EXIT_REASON_SIPI_SIGNAL] = handle_sipi,
    [EXIT_REASON_CPUID] = handle_cpuid,
    [EXIT_REASON_GETSEC] = handle_ud,
    [EXIT_REASON_INVD] = handle_invd_wbinvd,
    [EXIT_REASON_WBINVD] = handle_invd_wbinvd,
    [EXIT_REASON_VMCALL] = handle_vmcall,
    [EXIT_REASON_VMCLEAR] = handle_ud,
    [EXIT_REASON_VMLAUNCH] = handle_ud,
    [EXIT_REASON_VMPTRLD] = handle_ud,
    [EXIT_REASON_VMPTRST] = handle_ud,
    [EXIT_REASON_VMREAD] = handle_ud,
    [EXIT_REASON_VMRESUME] = handle_ud,
    [EXIT_REASON_VMWRITE] = handle_ud,
    [EXIT_REASON_VMOFF] = handle_ud,
    [EXIT_REASON_VMON] = handle_ud,
    [EXIT_REASON_INVEPT] = handle_ud,
    [EXIT_REASON_INVVPID] = handle_ud,
    [EXIT_REASON_VMFUNC] = handle_ud,
    [EXIT_REASON_CR_ACCESS] = handle_cr_access,
    [EXIT_REASON_MSR_READ] = handle_msr_read,
    [EXIT_REASON_MSR_WRITE] = handle_msr_write,
    [EXIT_REASON_EPT_VIOLATION] = handle_ept_violation,
    [EXIT_REASON_EPT_MISCONFIG] = handle_ept_misconfig,
    [EXIT_REASON_XSETBV] = handle_xsetbv,
    [EXIT_REASON_IO_INSTRUCTION] = handle_io_instruction,
    [EXIT_REASON_TASK_SWITCH] = handle_task_switch,
    [EXIT_REASON_MONITOR_TRAP_FLAG] = handle_mtf,
    [EXIT_REASON_NMI_WINDOW] = handle_nmi_window,
    [EXIT_REASON_PREEMPTION_TIMER] = handle_preemption_timer,
};

/* the exiting instruction completed: RIP, RF, TF and the STI / MOV SS shadow as
 * hardware leaves them (emul/emul_policy.h insn_retire).  Runs on every CPUID, VMCALL, MSR and
 * I/O exit: two VMREADs and one VMWRITE where nothing but RIP changes; pending debug exceptions
 * and DEBUGCTL (BTF) are read only when TF is set, the guest's mode (IA-32e, CS.L) only where
 * RIP wraps at 4 GiB (insn_retire_mode_matters) */
static void skip_instruction(const struct vmexit *e)
{
    uint64_t rflags = vmcs_readl(GUEST_RFLAGS);
    uint32_t intr = vmcs_read32(GUEST_INTERRUPTIBILITY_INFO);
    bool code64 =
        insn_retire_mode_matters(e->rip, e->insn_len) ? vcpu_code64() : insn_retire_code64(e->rip);
    struct retire_state s = {
        .rip = e->rip,
        .rflags = rflags,
        .debugctl = (rflags & RFLAGS_TF) ? vmx_guest_debugctl() : 0,
        .intr = intr,
    };
    insn_retire(&s, e->insn_len, code64);
    vmcs_writel(GUEST_RIP, s.rip);
    if (s.rflags != rflags)
        vmcs_writel(GUEST_RFLAGS, s.rflags);
    if (s.pending_dbg)
        vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS,
                    vmcs_readl(GUEST_PENDING_DBG_EXCEPTIONS) | s.pending_dbg);
    if (s.intr != intr)
        vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, s.intr);
}

static inline __attribute__((always_inline)) enum exit_action
vmx_handle_exit(struct vcpu *v, struct percpu *pc, const struct vmexit *e)
{
    enum exit_action a;
    /* first the common case, a plain basic reason with a handler (one compare covers both) */
    if (__builtin_expect(e->raw_reason < EXIT_REASON_MAX && handlers[e->raw_reason], 1))
        a = handlers[e->raw_reason](v, e);
    else if (e->raw_reason & VMX_EXIT_REASONS_FAILED_VMENTRY)
        a = handle_entry_failure(v, e);
    else if (e->reason < EXIT_REASON_MAX && handlers[e->reason])
        a = handlers[e->reason](v, e);
    else {
        /* an exit the VMM never enabled: log it and answer as a CPU without that
         * feature would (#UD); the VMM carries on */
        pr_err_rl("vmx", "unexpected exit %u (%s) at RIP %#lx, qualification %#lx: injecting #UD",
                  e->reason, vmx_exit_reason_name(e->reason), e->rip, e->qual);
        vcpu_inject_ud(v);
        a = EXIT_INJECT;
    }
    if (a == EXIT_RESUME_SKIP_INSN) {
        skip_instruction(e);
        /* it never retired in non-root: the guest's instruction counters are owed it (a call
         * only where a counter of the guest counts: the mask against the VMM's copy of its
         * GLOBAL_CTRL, no VMREAD) */
        uint64_t m = pmu_vmx_retire_mask[pc->id];
        if (m && (m == PMU_RETIRE_UNDECIDED || (v->guest_perf_global & m)) &&
            pmu_vmx_emulated_retire())
            pc->nmi_owed = 1;
    } else if (a == EXIT_RESUME)
        vmx_reinject_idt_vectoring(v, e);
    return a;
}

/*
 * The exit loop: enter the guest, handle its exit, again.  vmx_run and the dispatch are inlined
 * here, so an exit makes no call but its handler's (and vmx_enter).  Returns only when the very
 * first VMLAUNCH fails (the VM-instruction error, or -1 for VMfailInvalid); a failed VMRESUME is a
 * VMM bug (panic).  first_exit runs once, at the vCPU's first exit (main.c: the host IDT).
 */
int vmx_loop(struct vcpu *v, void (*first_exit)(struct vcpu *, const struct vmexit *))
{
    struct percpu *pc = this_cpu(); /* the loop never leaves this CPU */
    for (;;) {
        struct vmexit e;
        int err = vmx_run(v, pc, &e);
        if (err) {
            if (!v->launched)
                return err;
            panic("VMRESUME failed: %s",
                  err > 0 ? vmx_insn_error_name((uint32_t)err) : "VMfailInvalid");
        }
        if (__builtin_expect(v->exits_total == 1, 0))
            first_exit(v, &e);
        if (vmx_handle_exit(v, pc, &e) == EXIT_STOP_GUEST)
            vcpu_stop_guest(v, vmx_exit_reason_name(e.reason));
        if (v->mtf_probe)
            trace_vmx_probe(v, e.reason, e.rip);
        if (__builtin_expect(v->exits_total % IOMMU_POLL_EXITS == 0, 0) && pc->bsp)
            iommu_poll_faults(); /* DMA faults the units recorded (nothing without VT-d) */
    }
}

/* after an exit that interrupted event delivery, deliver that event again
 * unless the handler queued another one (SDM Vol. 3C 28.2.4 / 27.2.4) */
void vmx_reinject_idt_vectoring(struct vcpu *v, const struct vmexit *e)
{
    if (!(e->idt_vec_info & INTR_INFO_VALID) || v->inject.valid)
        return;
    uint32_t type = e->idt_vec_info & INTR_INFO_INTR_TYPE_MASK;
    v->inject = (struct pending_event){
        .valid = true,
        .info = e->idt_vec_info & ~INTR_INFO_UNBLOCK_NMI,
        .error = e->idt_vec_error,
        .insn_len = (type == INTR_TYPE_SOFT_INTR || type == INTR_TYPE_SOFT_EXCEPTION ||
                     type == INTR_TYPE_PRIV_SW_EXCEPTION)
                        ? e->insn_len
                        : 0,
    };
}
