/* SPDX-License-Identifier: MIT */
/*
 * The PMU shim: executes vmm/pmu/pmu_policy.c's rules on this CPU.  Four
 * hooks: the guest's WRMSR IA32_PERF_GLOBAL_CTRL (exit_msr.c), CPUID leaf 0xA (exit_cpuid.c),
 * every NMI that reaches the VMM (the NMI exit in exit_fault.c; those taken in root, recorded
 * by desc.c, before the next entry in vcpu_loop.c) and every instruction the VMM completes for the
 * guest (vcpu_loop.c).  Of this, the ordinary VM-exit / VM-entry path runs one mask test
 * (pmu_vmx_retire_mask): IA32_PERF_GLOBAL_CTRL is switched by the VMCS (docs/lbr.md "PMU").
 */
#ifndef PTV_VMX_PMU_VMX_H
#define PTV_VMX_PMU_VMX_H

#include <stdbool.h>
#include <stdint.h>

/* May the guest write val to IA32_PERF_GLOBAL_CTRL?  The SDM's rule from this CPU's CPUID.0AH
 * (false: #GP), decided without running the value on the CPU in root. */
bool pmu_vmx_global_ctrl_ok(uint64_t val);

/* CPUID leaf 0xA as the guest sees it (all zero where the PMU is hidden); other leaves pass
 * (no call: it runs on every CPUID exit) */
void pmu_vmx_cpuid_0a(uint32_t r[4]);
static inline void pmu_vmx_cpuid(uint32_t leaf, uint32_t r[4])
{
    if (leaf == 0xa)
        pmu_vmx_cpuid_0a(r);
}

/*
 * An NMI reached the VMM; vmm_ours: the EPT shootdown protocol claimed it.  true: the guest is
 * owed one NMI (it is not the VMM's, or a guest PMI merged into the VMM's: pmu_on_nmi()).
 * Called with the VMCS current: at the NMI exit, and for NMIs taken in root at the next entry
 * (vcpu_loop.c; the root handler only records them, desc.c).
 */
bool pmu_vmx_nmi(bool vmm_ours);

/*
 * The VMM completed an instruction for the guest (RESUME_SKIP_INSN), at the guest's CPL: the
 * counters that count Instructions Retired there get the increment hardware never gave it, with
 * overflow, freeze and PMI (pmu_emulated_retire()).  Called by the exit path only where the
 * guest's GLOBAL_CTRL enables a general counter or IA32_FIXED_CTR0 (below).  true: the PMI is an
 * NMI the guest is owed.
 */
bool pmu_vmx_emulated_retire(void);
/*
 * Per CPU, for the exit path's test before the call above (vcpu_loop.c): the
 * IA32_PERF_GLOBAL_CTRL bits of the counters an emulated instruction can count (general ones,
 * IA32_FIXED_CTR0) where the guest owns the PMU; 0 where it does not (absent, hidden): no call,
 * no VMREAD; PMU_RETIRE_UNDECIDED until this CPU's first call decided.
 */
#define PMU_RETIRE_UNDECIDED (~0ull)
extern uint64_t pmu_vmx_retire_mask[];

/* VMWRITE the guest's IA32_PERF_GLOBAL_CTRL and keep v->guest_perf_global, the copy the exit
 * path reads: the only way the VMM writes that field */
struct vcpu;
void pmu_vmx_set_guest_global(struct vcpu *v, uint64_t val);

#endif
