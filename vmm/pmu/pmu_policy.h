/* SPDX-License-Identifier: MIT */
/*
 * Guest PMU policy: the performance counters and PMIs that `perf record -b`
 * needs, as pure decisions.  ptvisor has no PMU use of its own and one guest, so the counters
 * are the guest's: every PMU MSR passes through the MSR bitmap except IA32_PERF_GLOBAL_CTRL,
 * which the VMCS switches ("load IA32_PERF_GLOBAL_CTRL" at exit = 0, at entry = the guest's).
 * This file decides and states it.  Wired into the VMM (vmm/pmu/shim/pmu_vmx.c): the GLOBAL_CTRL
 * write rule and pmu_observe (exit_msr.c), the CPUID filter of the hidden case (exit_cpuid.c),
 * the NMI rule (the NMI exit; NMIs taken in root before the next entry), the emulated-instruction
 * count (vcpu_loop.c); docs/lbr.md "PMU".  The same file runs in the differential against the
 * PMU model (tests/model/test_pmu_diff.c) and in fuzz_pmu.
 *
 * Sources: Intel SDM Vol. 3B "Performance Monitoring", cited as 20.x (the 2022+
 * edition; the same sub-sections are 18.x in editions before 2022: 20.2.1-20.2.5 = architectural
 * PMU versions 1-5, 20.2.6 = full-width writes), Vol. 3C 25-28 (VMX), Vol. 4 table 2-2 (MSRs).
 * [I] = inference, [U] = not confirmed in a source read here (docs/lbr.md).
 */
#ifndef PTV_PMU_POLICY_H
#define PTV_PMU_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* --- MSRs (Linux msr-index.h names; SDM Vol. 4 table 2-2) --- */
#define MSR_IA32_PERFCTR0               0x0c1u /* IA32_PMC0..: writes take bits 31:0 */
#define MSR_ARCH_PERFMON_EVENTSEL0      0x186u /* IA32_PERFEVTSEL0.. */
#define MSR_CORE_PERF_FIXED_CTR0        0x309u /* IA32_FIXED_CTR0.. */
#define MSR_CORE_PERF_FIXED_CTR_CTRL    0x38d
#define MSR_CORE_PERF_GLOBAL_STATUS     0x38e
#define MSR_PMU_GLOBAL_CTRL             0x38f  /* IA32_PERF_GLOBAL_CTRL (vmx.h: MSR_CORE_...) */
#define MSR_CORE_PERF_GLOBAL_OVF_CTRL   0x390  /* IA32_PERF_GLOBAL_STATUS_RESET from v4 */
#define MSR_CORE_PERF_GLOBAL_STATUS_SET 0x391  /* v4 */
#define MSR_CORE_PERF_GLOBAL_INUSE      0x392  /* v4 */
#define MSR_IA32_PMC0                   0x4c1u /* IA32_A_PMC0..: full-width writes */
#define MSR_PMU_PERF_CAPABILITIES       0x345
#define MSR_PMU_PEBS_ENABLE             0x3f1 /* IA32_PEBS_ENABLE */

/* IA32_PERFEVTSELx (SDM Vol. 3B 20.2.1.1, figure 20-1) */
#define EVTSEL_EVENT_UMASK 0xffffull
#define EVTSEL_USR         (1ull << 16)
#define EVTSEL_OS          (1ull << 17)
#define EVTSEL_EDGE        (1ull << 18)
#define EVTSEL_PC          (1ull << 19)
#define EVTSEL_INT         (1ull << 20)
#define EVTSEL_ANY         (1ull << 21) /* AnyThread, v3+ */
#define EVTSEL_EN          (1ull << 22)
#define EVTSEL_INV         (1ull << 23)
#define EVTSEL_CMASK       (0xffull << 24)
/* architectural events (SDM Vol. 3B 20.2.1.2, table 20-1): event | umask << 8 */
#define ARCH_EVENT_CYCLES 0x003c /* UnHalted Core Cycles */
#define ARCH_EVENT_INSNS  0x00c0 /* Instructions Retired */

/* IA32_FIXED_CTR_CTRL: 4 bits per counter (SDM Vol. 3B 20.2.2, figure 20-2) */
#define FIXED_CTRL_OS(i)  (1ull << (4 * (i))) /* count at CPL 0 */
#define FIXED_CTRL_USR(i) (2ull << (4 * (i))) /* count at CPL > 0 */
#define FIXED_CTRL_ANY(i) (4ull << (4 * (i))) /* AnyThread, v3+ */
#define FIXED_CTRL_PMI(i) (8ull << (4 * (i))) /* PMI on overflow */

/* IA32_PERF_GLOBAL_STATUS / _CTRL bits above the counters (SDM Vol. 3B 20.2.2, 20.2.4) */
#define GLOBAL_FIXED_SHIFT     32
#define GLOBAL_CTRL_METRICS_EN (1ull << 48)
#define GLOBAL_STATUS_TOPA     (1ull << 55)
#define GLOBAL_STATUS_LBR_FRZ  (1ull << 58) /* v4 */
#define GLOBAL_STATUS_CTR_FRZ  (1ull << 59) /* v4 */
#define GLOBAL_STATUS_ASCI     (1ull << 60)
#define GLOBAL_STATUS_OVF_UNC  (1ull << 61)
#define GLOBAL_STATUS_OVF_BUF  (1ull << 62)
#define GLOBAL_STATUS_COND_CHG (1ull << 63)
#define PERF_CAP_FW_WRITE      (1ull << 13) /* IA32_A_PMCx exist */
#define PERF_CAP_METRICS       (1ull << 15)

/* DEBUGCTL bits the PMI acts on (same values as lbr_policy.h) */
#define PMU_DEBUGCTL_LBR            (1ull << 0)
#define PMU_DEBUGCTL_FREEZE_LBRS    (1ull << 11)
#define PMU_DEBUGCTL_FREEZE_PERFMON (1ull << 12)

/* local APIC LVT performance-counter entry (SDM Vol. 3A "Local Vector Table", 10.5.1 in editions
 * before 2022) */
#define LVT_MASKED    (1u << 16)
#define LVT_DM_MASK   (7u << 8)
#define LVT_DM_FIXED  (0u << 8)
#define LVT_DM_NMI    (4u << 8)
#define LVT_VECTOR(v) ((v)&0xffu)

#define PMU_MAX_GP    32 /* CPUID.0AH:EAX[15:8] is 8 bits; the GLOBAL_CTRL layout holds 32 */
#define PMU_MAX_FIXED 16 /* GLOBAL_CTRL bits 47:32 */

/* What CPUID.0AH (and IA32_PERF_CAPABILITIES) say about the PMU (SDM Vol. 3B 20.2.1-20.2.5) */
struct pmu_caps {
    uint8_t version;     /* EAX[7:0] */
    uint8_t n_gp;        /* EAX[15:8], capped at PMU_MAX_GP */
    uint8_t gp_width;    /* EAX[23:16] */
    uint8_t fixed_width; /* EDX[12:5] (v2+) */
    uint32_t fixed_mask; /* bit i: IA32_FIXED_CTRi exists: i < EDX[4:0], or ECX[i] (v5) */
    bool full_width;     /* IA32_PERF_CAPABILITIES[13] */
    bool perf_metrics;   /* IA32_PERF_CAPABILITIES[15] */
};

/*
 * leaf_a = CPUID.0AH EAX..EDX as the CPU answered (ignored when max_leaf < 0xA);
 * perf_caps only where IA32_PERF_CAPABILITIES could be read (perf_caps_ok).
 */
void pmu_caps_from_cpuid(uint32_t max_leaf, const uint32_t leaf_a[4], bool perf_caps_ok,
                         uint64_t perf_caps, struct pmu_caps *c);

/* the bits of IA32_PERF_GLOBAL_CTRL that exist (writes with any other bit #GP) */
uint64_t pmu_global_ctrl_bits(const struct pmu_caps *c);
/* the GLOBAL_STATUS overflow bits whose counters request a PMI (INT / PMI set) */
uint64_t pmu_pmi_bits(const struct pmu_caps *c, const uint64_t *evtsel, uint64_t fixed_ctrl);
/* the LVT performance-counter entry delivers an NMI (unmasked, delivery mode NMI) */
static inline bool pmu_lvtpc_nmi(uint32_t lvt)
{
    return !(lvt & LVT_MASKED) && (lvt & LVT_DM_MASK) == LVT_DM_NMI;
}

enum pmu_mode {
    PMU_ABSENT,   /* no architectural PMU (CPUID.0AH:EAX[7:0] = 0): nothing to switch */
    PMU_SWITCHED, /* v2+, both VMCS controls: the guest's, GLOBAL_CTRL switched by the VMCS */
    PMU_HIDDEN,   /* counters could run in root: CPUID.0AH shown as 0, GLOBAL_CTRL virtual */
};

struct pmu_decision {
    enum pmu_mode mode;
    struct pmu_caps caps;
    /* PMU v2/v3: FREEZE_PERFMON_ON_PMI clears IA32_PERF_GLOBAL_CTRL in non-root and no VM exit
     * saves that MSR; the VMM clears the VMCS copy when it sees the PMI (pmu_on_nmi) */
    bool legacy_freeze;
    char reason[160];
};

/* exit_load / entry_load: the VMM chose "load IA32_PERF_GLOBAL_CTRL" at exit / at entry */
void pmu_decide(const struct pmu_caps *c, bool exit_load, bool entry_load, struct pmu_decision *d);

/* --- MSRs: which exit, and the rules of those that do --- */
enum pmu_msr_kind {
    PMU_MSR_NONE, /* not a PMU MSR this file knows */
    PMU_MSR_EVTSEL,
    PMU_MSR_PMC,   /* IA32_PMCx */
    PMU_MSR_A_PMC, /* IA32_A_PMCx */
    PMU_MSR_FIXED,
    PMU_MSR_FIXED_CTRL,
    PMU_MSR_GLOBAL_STATUS,
    PMU_MSR_GLOBAL_CTRL,
    PMU_MSR_GLOBAL_OVF_CTRL,
    PMU_MSR_GLOBAL_STATUS_SET,
    PMU_MSR_GLOBAL_INUSE,
};
/* the kind of msr on this CPU, or PMU_MSR_NONE where the CPU has no such counter */
enum pmu_msr_kind pmu_msr_kind(const struct pmu_caps *c, uint32_t msr);
/* true: the MSR bitmap intercepts msr (only IA32_PERF_GLOBAL_CTRL, and only with a PMU) */
bool pmu_intercepts(const struct pmu_decision *d, uint32_t msr);

/*
 * The guest's WRMSR IA32_PERF_GLOBAL_CTRL = val, which exits.  true: the VMM keeps val as the
 * guest's (GUEST_IA32_PERF_GLOBAL_CTRL, or the virtual copy when hidden); false: #GP(0),
 * nothing changes.  The check is the SDM's rule from CPUID, never a WRMSR in root: a trial
 * write would let the guest's counters count the VMM's own instructions.
 */
bool pmu_global_ctrl_write_ok(const struct pmu_decision *d, uint64_t val);

/* CPUID leaf 0xA as the guest sees it (hidden: all zero) */
void pmu_cpuid_filter(const struct pmu_decision *d, uint32_t leaf, uint32_t r[4]);

/* --- PMIs that reach the VMM --- */

/* per CPU: IA32_PERF_GLOBAL_STATUS when the VMM last looked (an NMI, pmu_observe) */
struct pmu_nmi_state {
    uint64_t seen;
};

/* what the VMM reads when an NMI reached it (at the NMI exit, or before the entry after one in
 * root) */
struct pmu_nmi_view {
    bool vmm_ours;           /* the EPT shootdown protocol claimed the NMI (vmm/smp) */
    uint64_t status;         /* IA32_PERF_GLOBAL_STATUS now */
    uint64_t pmi_bits;       /* pmu_pmi_bits() of the guest's EVTSELs / FIXED_CTR_CTRL */
    uint32_t lvtpc;          /* the guest's (real) LVT performance-counter entry */
    uint64_t guest_debugctl; /* GUEST_IA32_DEBUGCTL */
};

struct pmu_nmi_verdict {
    bool owe_guest;         /* the guest is owed one NMI (injected when it can take it) */
    bool clear_global_ctrl; /* legacy freeze: GUEST_IA32_PERF_GLOBAL_CTRL = 0 */
};

void pmu_on_nmi(const struct pmu_decision *d, struct pmu_nmi_state *s, const struct pmu_nmi_view *v,
                struct pmu_nmi_verdict *out);

/*
 * The VMM looked at IA32_PERF_GLOBAL_STATUS outside an NMI (at the guest's WRMSR of
 * IA32_PERF_GLOBAL_CTRL, which a PMI handler does after acknowledging its overflows): what is
 * set now is not new any more, what the guest cleared can be new again.
 */
void pmu_observe(struct pmu_nmi_state *s, uint64_t status);

/* --- an instruction the VMM completes for the guest (RESUME_SKIP_INSN) --- */

/* the guest's PMU state, as the VMM would read it in root (counters pass through) */
struct pmu_state {
    uint64_t global_ctrl; /* the guest's (VMCS copy) */
    uint64_t status, fixed_ctrl, debugctl;
    uint64_t pebs_enable; /* IA32_PEBS_ENABLE (0x3f1) where it exists, else 0 */
    uint64_t evtsel[PMU_MAX_GP], pmc[PMU_MAX_GP], fixed[PMU_MAX_FIXED];
    uint32_t lvtpc;
};

struct pmu_retire {
    uint64_t inc;        /* counters to add 1 to (GLOBAL_CTRL bit layout); never one whose
                          * result cannot be written as hardware would leave it (below) */
    uint64_t status_set; /* bits to set through IA32_PERF_GLOBAL_STATUS_SET */
    bool exact;          /* false: an overflow v2/v3 cannot show (no STATUS_SET), or a value
                          * IA32_PMCx cannot take (no full-width writes) */
    bool pmi;            /* a PMI is requested (freezes are in status_set: v4 only) */
    uint8_t deliver;     /* 0 none, 2 NMI, 1 the LVT's fixed vector */
};

/*
 * Hardware does not count an instruction that VM-exits (it never retires in non-root); the VMM
 * that completes it for the guest owes the counters that count "instructions retired" at the
 * guest's CPL one increment, with overflow, PMI and freeze as if the CPU had retired it [I].
 * Computed from the guest's state after the instruction's own effect (a WRMSR of
 * IA32_PERF_GLOBAL_CTRL is counted under its new value) [U: the SDM does not say under which
 * value an MSR write that changes counting is itself counted; the model counts it the same way].
 * The overflow bits it sets are the VMM's own PMI: *s records them as seen (a later VMM NMI must
 * not take them for a merged PMI).  Where the result cannot be written as hardware leaves it, the
 * counter is left alone and exact = false (one count lost, never a corrupted counter): an
 * overflow before v4 (no STATUS_SET: the counter stays at its maximum and overflows at its next
 * real event, with its PMI), an overflow of a PEBS counter (hardware writes a PEBS record and
 * reloads the counter, which the VMM does not emulate), and a value IA32_PMCx cannot take
 * without full-width writes (bits 31:0 are sign-extended, SDM Vol. 3B 20.2.6).
 */
void pmu_emulated_retire(const struct pmu_decision *d, struct pmu_nmi_state *s,
                         const struct pmu_state *g, unsigned cpl, struct pmu_retire *out);

#endif
