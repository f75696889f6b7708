/* SPDX-License-Identifier: MIT */
/*
 * What the guest may see and do, as pure functions of guest-controlled exit
 * data (CPUID leaf/subleaf, XSETBV operands, IA32_XSS values).  The exit handlers
 * feed them decoded values; host tests and a fuzzer call them directly.
 */
#ifndef PTV_VMX_GUEST_POLICY_H
#define PTV_VMX_GUEST_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include "pt/pt_caps.h"

#define PTV_CPUID_BASE    0x40000000u /* hypervisor range (KVM/Xen convention) */
#define PTV_CPUID_MAX     0x40000001u
#define PTV_CPUID_HV_LAST 0x400000ffu

static inline int cpuid_is_hypervisor_leaf(uint32_t leaf)
{
    return leaf >= PTV_CPUID_BASE && leaf <= PTV_CPUID_HV_LAST;
}

/* Instructions that #UD in VMX non-root operation unless a secondary control
 * enables them: their CPUID bits are shown only with the control on. */
#define GUEST_FEAT_RDTSCP  (1u << 0) /* "enable RDTSCP": RDTSCP, RDPID */
#define GUEST_FEAT_INVPCID (1u << 1) /* "enable INVPCID" */
#define GUEST_FEAT_XSAVES  (1u << 2) /* "enable XSAVES/XRSTORS" */
#define GUEST_FEAT_WAITPKG (1u << 3) /* "enable user wait and pause": TPAUSE/UMWAIT/UMONITOR */
/* Not a control: the CPU's TSC-deadline timer, which the guest uses directly, has the erratum
 * bare-metal Linux checks its microcode for (tsc_deadline_erratum()): CPUID.1:ECX[24] hidden. */
#define GUEST_FEAT_NO_TSC_DEADLINE (1u << 4)

/* r[] = EAX..EDX: in, what the CPU returned (ignored for hypervisor leaves);
 * out, what the guest sees.  features: GUEST_FEAT_* the VMCS enables;
 * guest_cr4 is the guest's view of CR4. */
void cpuid_policy(const struct pt_decision *d, uint32_t features, uint32_t leaf, uint32_t subleaf,
                  uint64_t guest_cr4, uint32_t r[4]);

/*
 * The TSC-deadline timer erratum of Haswell .. Kaby Lake parts with old microcode, by the rule
 * bare-metal Linux applies (arch/x86/kernel/apic/apic.c: deadline_match[] and
 * apic_validate_deadline_timer(), Linux 4.14 .. 6.x): an Intel family 6 CPU of a listed model
 * (and stepping) whose microcode revision is below the listed one does not get the TSC-deadline
 * timer.  Linux skips the check when CPUID shows a hypervisor, trusting the hypervisor to
 * emulate the timer; ptvisor does not, the guest programs the CPU's own (IA32_TSC_DEADLINE
 * passes through), so the VMM makes the check for it and hides CPUID.1:ECX[24] where bare
 * Linux would not use the timer: the guest then picks the timer it would pick on bare metal.
 * Where the VMM itself runs under a hypervisor (hypervisor bit on its own CPUID: nested KVM)
 * that hypervisor's timer is what the guest programs, and the VMM does as Linux does there:
 * nothing.  Returns true when the timer must be hidden, with the first revision that fixes it
 * in *fixed_in.
 */
struct tsc_deadline_cpu {
    bool intel;      /* CPUID.0: "GenuineIntel" */
    bool hypervisor; /* CPUID.1:ECX[31] as the VMM sees it (a hypervisor below the VMM) */
    bool has_timer;  /* CPUID.1:ECX[24] */
    uint32_t sig;    /* CPUID.1:EAX: stepping, model, family (with their extended fields) */
    uint32_t ucode;  /* microcode revision: IA32_BIOS_SIGN_ID[63:32] (SDM Vol. 3A 10.11.7) */
};
bool tsc_deadline_erratum(const struct tsc_deadline_cpu *c, uint32_t *fixed_in);

enum xsetbv_verdict {
    XSETBV_OK,
    XSETBV_GP, /* #GP(0) */
    XSETBV_UD, /* #UD: CR4.OSXSAVE = 0 */
};
/* SDM Vol. 1 13.3 / XSETBV: supported = CPUID.(0xD,0) EDX:EAX */
enum xsetbv_verdict xsetbv_policy(uint32_t index, uint64_t value, uint64_t supported,
                                  uint64_t guest_cr4);

/* MSRs the owner table names (emul/msr_owner.c) */
#define MSR_IA32_APIC_BASE      0x1b
#define MSR_IA32_BIOS_UPDT_TRIG 0x79
#define MSR_OC_MAILBOX          0x150 /* overclocking / voltage mailbox (Plundervolt): hidden */

/*
 * IA32_XSS supervisor state components the guest may enable: what the CPU supports
 * (CPUID.(0xD,1):EDX:ECX) minus PT state (component 8), which would let XRSTORS load the RTIT
 * MSRs behind the PT engine's back (SDM Vol. 1 13.5.6).  CPUID hides component 8 to match.
 */
#define MSR_IA32_XSS     0xda0
#define XFEATURE_PT      (1ull << 8)
#define GUEST_XSS_HIDDEN XFEATURE_PT
/* A guest WRMSR IA32_XSS of value: true = allowed, false = #GP (SDM Vol. 4: unsupported bits) */
bool xss_policy(uint64_t value, uint64_t host_supported);

#endif
