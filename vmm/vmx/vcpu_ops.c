/* SPDX-License-Identifier: MIT */
/*
 * The vCPU's controls as the exit handlers, the shims and the run loop change them: event
 * injection, the guest's code size, NMI-window and CR3-load exiting.  VMX mechanics only: no
 * policy of any feature.
 */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"

void vcpu_inject_exception(struct vcpu *v, unsigned vector, bool has_error, uint32_t error)
{
    /* real-mode guests (unrestricted guest, CR0.PE = 0) take no error codes (SDM 27.2.1.3) */
    if (has_error && !(vmcs_readl(GUEST_CR0) & X86_CR0_PE))
        has_error = false;
    /* a fault pushes RFLAGS.RF = 1, so the faulting instruction can restart past an
     * instruction breakpoint (SDM Vol. 3A 17.3.1.1) */
    if (exception_is_fault(vector))
        vmcs_writel(GUEST_RFLAGS, vmcs_readl(GUEST_RFLAGS) | RFLAGS_RF);
    v->inject = (struct pending_event){
        .valid = true,
        .info = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | vector |
                (has_error ? INTR_INFO_DELIVER_CODE : 0),
        .error = error,
    };
}

bool vcpu_code64(void)
{
    return (vmcs_read32(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE) &&
           (vmcs_read32(GUEST_CS_AR_BYTES) & VMX_AR_L);
}

void vcpu_nmi_window(struct vcpu *v, bool on)
{
    if (v->nmi_window == on)
        return;
    v->nmi_window = on;
    uint32_t proc = vmcs_read32(CPU_BASED_VM_EXEC_CONTROL);
    vmcs_write32(CPU_BASED_VM_EXEC_CONTROL,
                 on ? proc | CPU_BASED_NMI_WINDOW_EXITING : proc & ~CPU_BASED_NMI_WINDOW_EXITING);
}

void vcpu_cr3_exiting(struct vcpu *v, bool on)
{
    if (v->cr3_exiting == on)
        return;
    v->cr3_exiting = on;
    uint32_t proc = vmcs_read32(CPU_BASED_VM_EXEC_CONTROL);
    vmcs_write32(CPU_BASED_VM_EXEC_CONTROL,
                 on ? proc | CPU_BASED_CR3_LOAD_EXITING : proc & ~CPU_BASED_CR3_LOAD_EXITING);
}

void vcpu_mbec(struct vcpu *v, bool on)
{
    if (v->mbec == on)
        return;
    v->mbec = on;
    uint32_t p2 = vmcs_read32(SECONDARY_VM_EXEC_CONTROL);
    vmcs_write32(SECONDARY_VM_EXEC_CONTROL, on ? p2 | SECONDARY_EXEC_MODE_BASED_EPT_EXEC
                                               : p2 & ~SECONDARY_EXEC_MODE_BASED_EPT_EXEC);
    /* the guest's EPT sets bit 2 (X) and never bit 10: with the control on, every supervisor-mode
     * fetch runs as before and every user-mode one exits.  Translations are cached per EPTP, not
     * per setting, so the ones this CPU cached with the control off (user-mode fetches allowed)
     * must go before the guest runs with it on, and the other way round (they would refuse
     * fetches the EPT allows: stale violations) */
    vmx_invept_all();
}
