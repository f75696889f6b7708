/* SPDX-License-Identifier: MIT */
/*
 * The PMU shim: reads what the CPU offers (CPUID.0AH, IA32_PERF_CAPABILITIES, the VMX controls
 * chosen) and lets vmm/pmu/pmu_policy.c decide.  It decides nothing itself.
 */
#include "vmx/pmu_vmx.h"
#include "pmu/pmu_policy.h"
#include "vmx/vmx.h"
#include "vmx/vmx_cpu.h"
#include "cpu.h"
#include "percpu.h"

#define CPUID_1_ECX_PDCM (1u << 15) /* IA32_PERF_CAPABILITIES exists */

/* per CPU, decided at its first GLOBAL_CTRL write exit (each CPU reads its own CPUID) */
static struct pmu_decision pmu_dec[PTV_MAX_CPUS];
static bool pmu_decided[PTV_MAX_CPUS];

static const struct pmu_decision *decision(void)
{
    unsigned id = this_cpu_id();
    if (pmu_decided[id])
        return &pmu_dec[id];
    uint32_t max = cpuid_count(0, 0).eax, a[4] = {0};
    if (max >= 0xa) {
        struct cpuid_regs r = cpuid_count(0xa, 0);
        a[0] = r.eax, a[1] = r.ebx, a[2] = r.ecx, a[3] = r.edx;
    }
    uint64_t caps = 0;
    bool caps_ok =
        (cpuid_count(1, 0).ecx & CPUID_1_ECX_PDCM) && !rdmsr_safe(MSR_PMU_PERF_CAPABILITIES, &caps);
    struct pmu_caps c;
    pmu_caps_from_cpuid(max, a, caps_ok, caps, &c);
    pmu_decide(&c, vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL,
               vmx_ctls.entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, &pmu_dec[id]);
    pmu_decided[id] = true;
    return &pmu_dec[id];
}

bool pmu_vmx_global_ctrl_ok(uint64_t val)
{
    return pmu_global_ctrl_write_ok(decision(), val);
}
