/* SPDX-License-Identifier: MIT */
/* Exit dispatch: one handler per exit class (exit_*.c). */
#include "vmx/vcpu.h"
#include "vmx/pmu_vmx.h"
#include "percpu.h"
#include "vmx/exits.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "log.h"
#include "vmx/emul_policy.h"
#include "vmx/lbr_vmx.h"

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
 * hardware leaves them (vmx/emul_policy.c insn_retire).  Runs on every CPUID, VMCALL, MSR and
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
        .debugctl = (rflags & RFLAGS_TF) ? lbr_vmx_guest_debugctl() : 0,
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

enum exit_action vmx_handle_exit(struct vcpu *v, const struct vmexit *e)
{
    enum exit_action a;
    if (e->raw_reason & VMX_EXIT_REASONS_FAILED_VMENTRY)
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
        /* it never retired in non-root: the guest's instruction counters are owed it */
        if (pmu_vmx_emulated_retire())
            this_cpu()->nmi_owed = 1;
    } else if (a == EXIT_RESUME)
        vmx_reinject_idt_vectoring(v, e);
    return a;
}
