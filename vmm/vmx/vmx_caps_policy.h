/* SPDX-License-Identifier: MIT */
/*
 * The VMX set-up decision as pure logic: which controls every VMCS gets, from the raw capability
 * MSRs and the few CPUID facts the decision reads.  vmx_on.c gathers the inputs on the CPU and
 * calls it; host tests run it against capability profiles of real vehicles (nested KVM, Bochs,
 * bare-metal Skylake: tests/fakes/vmx_profiles.h) and against random MSRs (fuzz_vmx_caps_policy).
 */
#ifndef PTV_VMX_CAPS_POLICY_H
#define PTV_VMX_CAPS_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include "vmx/vmx_cpu.h"

/* IA32_VMX_MISC activity-state bits (SDM Vol. 3D A.6) */
#define VMX_MISC_ACTIVITY_HLT       (1ull << 6)
#define VMX_MISC_ACTIVITY_SHUTDOWN  (1ull << 7)
#define VMX_MISC_ACTIVITY_WAIT_SIPI (1ull << 8)

#define VMX_REASON_MAX 160

/* Everything the decision reads, exactly as the CPU reported it. */
struct vmx_cpu_profile {
    struct vmx_caps caps; /* capability MSRs (TRUE_* where VMX_BASIC[55]) and MAXPHYADDR */
    uint8_t pmu_version;  /* CPUID.0AH:EAX[7:0]; 0 when the largest basic leaf is below 0xa */
};

struct vmx_ctl_decision {
    struct vmx_controls ctls; /* valid only when vmx_decide_controls() returned 0 */
    /* The CPU has IA32_PERF_GLOBAL_CTRL (PMU v2+) but not both load controls: guest-programmed
     * counters keep running in VMX root.  The caller logs it; the decision does not refuse. */
    bool perf_global_unswitched;
    char reason[VMX_REASON_MAX]; /* one printable line when refused, else empty */
};

/*
 * Choose the controls for every VMCS.  Returns 0, or PTV_ENTRY_MISSING_CONTROL with d->reason
 * naming what is missing or broken.  Every accepted control word respects its capability MSR's
 * allowed-0 and allowed-1 settings (SDM Vol. 3D A.3-A.5).
 */
int vmx_decide_controls(const struct vmx_cpu_profile *p, struct vmx_ctl_decision *d)
    __attribute__((warn_unused_result));

/* Why IA32_VMX_BASIC rules this CPU out (region size, 32-bit addresses, VMCS memory type),
 * or NULL if it is usable (SDM Vol. 3D A.1). */
const char *vmx_basic_unusable(uint64_t basic);

/*
 * Can the VMM run APs as guests?  Only with the wait-for-SIPI activity state (IA32_VMX_MISC[8],
 * SDM Vol. 3D A.6): an AP parked by a guest INIT waits in that state, and without it the guest's
 * SIPI never reaches the VMM (a SIPI causes a VM exit only in wait-for-SIPI, SDM Vol. 3C 25.2).
 */
bool vmx_can_virtualize_aps(const struct vmx_cpu_profile *p, const char **why);

/*
 * 1 if an AP reports the same VMX capabilities as the BSP (it may then share the BSP's controls),
 * 0 if not, with *why naming the first capability MSR that differs.
 */
int vmx_caps_same(const struct vmx_caps *bsp, const struct vmx_caps *ap, const char **why)
    __attribute__((warn_unused_result));

/* Read this CPU's capabilities into *c (vmx_on.c; vmx_read_caps() reads the BSP's into vmx_caps).
 * An AP reads its own and compares them with vmx_caps_same() before sharing vmx_ctls. */
int vmx_read_caps_cpu(struct vmx_caps *c, const char **why) __attribute__((warn_unused_result));

#endif
