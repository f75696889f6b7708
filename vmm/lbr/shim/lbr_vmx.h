/* SPDX-License-Identifier: MIT */
/*
 * The LBR shim: executes vmm/lbr/lbr_policy.c's decision on this CPU.  Each hook in
 * another file is one call here: VMCS set-up (vcpu_setup.c), the MSR bitmap and RDMSR/WRMSR
 * exits (exit_msr.c), IA32_XSS (exit_msr.c), CPUID (exit_cpuid.c).  Nothing here runs on the
 * VM-exit / VM-entry path: DEBUGCTL and IA32_LBR_CTL are switched by the VMCS (docs/lbr.md).
 */
#ifndef PTV_VMX_LBR_VMX_H
#define PTV_VMX_LBR_VMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vcpu;

/*
 * At VMM entry on this CPU, as early as an MSR probe survives #GP (after host_idt_load()): the
 * caller's IA32_DEBUGCTL and IA32_LBR_CTL are kept as the guest's first values (lbr_vmx_setup
 * writes them into the VMCS) and the real MSRs cleared, so the VMM's own set-up records no
 * branch into the stack the guest then owns, nor into a BTS buffer.  lbr_vmx_root_leave() puts
 * the caller's values back when the VMM does not start on this CPU.  Without the call the
 * set-up runs with the caller's values until the first VM exit clears them.
 */
void lbr_vmx_root_enter(void);
void lbr_vmx_root_leave(void);

/* Before the VMCS controls are written: decide once (one boot log line), add the arch-LBR
 * controls, set GUEST_IA32_LBR_CTL from the caller's value. */
void lbr_vmx_setup(struct vcpu *v);

/* The MSR bitmap: does msr, in an LBR row of the owner table, exit for LBR's sake? */
bool lbr_vmx_intercepts(uint32_t msr);

/* RDMSR/WRMSR exit of an MSR the owner table gives LBR (emul/msr_owner.c): -1 if the decision
 * leaves msr to the guest (the caller passes it through), else the enum exit_action it took (the
 * result of a read is in the guest's RDX:RAX, a refusal is a queued #GP). */
int lbr_vmx_msr(struct vcpu *v, uint32_t msr, bool write, uint64_t val);

/* PTV_SELFCHECK_DEBUGCTL, in root: false if nothing could be read, else *holds = no LBR, BTS
 * or BTF in root (IA32_DEBUGCTL 0 and, where the CPU has arch LBR, IA32_LBR_CTL 0). */
bool lbr_vmx_root_check(bool *holds);

/*
 * The crash report's LBR part (vmm/lbr/lbr_report.c): this CPU's guest LBR stack as the last VM
 * exit froze it, as whole lines of text into buf (at most cap bytes with the NUL); returns the
 * bytes written.  In root, with this CPU's VMCS current (GUEST_IA32_DEBUGCTL, _LBR_CTL).
 */
size_t lbr_vmx_crash_text(char *buf, size_t cap);

/* The IA32_XSS bits a guest may set, from the CPU's: arch LBR state only when shown. */
uint64_t lbr_vmx_xss(uint64_t host_xss);

/* CPUID exit, after the guest policy: leaf 7 EDX[19], 0x1C, 0xD.1 / 0xD.15.  Every CPUID exit
 * pays the three compares; the rest only for those leaves. */
void lbr_vmx_cpuid_leaf(uint32_t leaf, uint32_t sub, uint32_t r[4]);
static inline void lbr_vmx_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    if (leaf == 7 || leaf == 0xd || leaf == 0x1c)
        lbr_vmx_cpuid_leaf(leaf, sub, r);
}

#endif
