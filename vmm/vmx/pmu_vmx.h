/* SPDX-License-Identifier: MIT */
/*
 * The PMU shim (issue 11 item 3): executes vmm/pmu/pmu_policy.c's rules on this CPU.  One hook,
 * the guest's WRMSR IA32_PERF_GLOBAL_CTRL in exit_msr.c.  Nothing here runs on the VM-exit /
 * VM-entry path: IA32_PERF_GLOBAL_CTRL is switched by the VMCS (docs/lbr.md "PMU").
 */
#ifndef PTV_VMX_PMU_VMX_H
#define PTV_VMX_PMU_VMX_H

#include <stdbool.h>
#include <stdint.h>

/* May the guest write val to IA32_PERF_GLOBAL_CTRL?  The SDM's rule from this CPU's CPUID.0AH
 * (false: #GP), decided without running the value on the CPU in root. */
bool pmu_vmx_global_ctrl_ok(uint64_t val);

#endif
