/* SPDX-License-Identifier: MIT */
/*
 * Guest LBR policy: what the guest is shown of the last branch records and what the
 * VMM answers itself.  Pure logic: the VMM fills a struct lbr_host with raw values (CPUID, two
 * MSRs, the VMX controls it chose) and calls lbr_decide() once; the shim (vmm/lbr/shim/lbr_vmx.c)
 * only executes the decision.  The same file runs in host tests (tests/unit/lbr/test_lbr_policy.c),
 * in the differential against the LBR model (tests/model/test_lbr_diff.c) and in fuzz_lbr.
 *
 * The design (docs/lbr.md): ptvisor has no PMU of its own and one guest, so the LBR hardware
 * *is* the guest's.  Every LBR MSR passes through the MSR bitmap; IA32_DEBUGCTL is saved and
 * loaded by the VMCS "save/load debug controls" (a VM exit clears it, SDM Vol. 3C 28.5.1), and
 * IA32_LBR_CTL by "load guest IA32_LBR_CTL" / "clear IA32_LBR_CTL": root runs with LBR off and
 * no VMM instruction runs per exit for LBR.  The VMM answers only IA32_PERF_CAPABILITIES (its
 * LBR_FMT shown exactly when the host's format is one ptvisor knows) and, where LBR is hidden,
 * the LBR MSRs of the known layout (#GP, as a CPU without them).
 *
 * Sources: docs/pt-facts.md F (MSR numbers, DEBUGCTL bits, arch LBR, VMX fields), Intel SDM
 * Vol. 3B ch. 17 (LBR) and Vol. 4 (MSR tables), cited at each rule.
 */
#ifndef PTV_LBR_POLICY_H
#define PTV_LBR_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- MSRs (Linux msr-index.h names; pt-facts F.1, F.2) --- */
#define MSR_IA32_DEBUGCTLMSR       0x000001d9 /* same spelling as vmm/hw/cpu.h */
#define MSR_LBR_SELECT             0x1c8
#define MSR_LBR_TOS                0x1c9
#define MSR_IA32_PERF_CAPABILITIES 0x345
#define MSR_LBR_NHM_FROM           0x680
#define MSR_LBR_NHM_TO             0x6c0
#define MSR_LBR_INFO_0             0xdc0
#define MSR_ARCH_LBR_CTL           0x14ce
#define MSR_ARCH_LBR_DEPTH         0x14cf
#define MSR_ARCH_LBR_FROM_0        0x1500
#define MSR_ARCH_LBR_TO_0          0x1600
#define MSR_ARCH_LBR_INFO_0        0x1200
#define ARCH_LBR_MAX_ENTRIES       64 /* CPUID.1CH:EAX[7:0] bit 7 = depth 64 */
#define LBR_MAX_ENTRIES            64

/* IA32_DEBUGCTL (SDM Vol. 3B 17.4.1, Vol. 4 table 2-2; pt-facts F.1) */
#define DEBUGCTLMSR_LBR                   (1ull << 0)
#define DEBUGCTLMSR_BTF                   (1ull << 1)
#define DEBUGCTLMSR_BUS_LOCK_DETECT       (1ull << 2)
#define DEBUGCTLMSR_TR                    (1ull << 6)
#define DEBUGCTLMSR_BTS                   (1ull << 7)
#define DEBUGCTLMSR_BTINT                 (1ull << 8)
#define DEBUGCTLMSR_BTS_OFF_OS            (1ull << 9)
#define DEBUGCTLMSR_BTS_OFF_USR           (1ull << 10)
#define DEBUGCTLMSR_FREEZE_LBRS_ON_PMI    (1ull << 11)
#define DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI (1ull << 12)
#define DEBUGCTLMSR_FREEZE_IN_SMM         (1ull << 14)
#define DEBUGCTLMSR_RTM_DEBUG             (1ull << 15)

/* MSR_LBR_SELECT: a set bit *suppresses* that class (SDM Vol. 3B 17.9.2, table 17-13) */
#define LBR_SEL_CPL_EQ_0      (1ull << 0) /* branches ending in ring 0 */
#define LBR_SEL_CPL_NEQ_0     (1ull << 1) /* branches ending in ring > 0 */
#define LBR_SEL_JCC           (1ull << 2)
#define LBR_SEL_NEAR_REL_CALL (1ull << 3)
#define LBR_SEL_NEAR_IND_CALL (1ull << 4)
#define LBR_SEL_NEAR_RET      (1ull << 5)
#define LBR_SEL_NEAR_IND_JMP  (1ull << 6)
#define LBR_SEL_NEAR_REL_JMP  (1ull << 7)
#define LBR_SEL_FAR_BRANCH    (1ull << 8)
#define LBR_SEL_EN_CALL_STACK (1ull << 9) /* Haswell and later (SDM Vol. 3B 17.11) */

/* IA32_PERF_CAPABILITIES (SDM Vol. 4 table 2-2) */
#define PERF_CAP_LBR_FMT          0x3full
#define PERF_CAP_FREEZE_WHILE_SMM (1ull << 12)
#define LBR_FORMAT_EIP_FLAGS      3    /* FROM bit 63 = mispredicted */
#define LBR_FORMAT_EIP_FLAGS2     4    /* + FROM bits 62/61 = in TSX / TSX abort */
#define LBR_FORMAT_INFO           5    /* flags and cycles in MSR_LBR_INFO_x */
#define LBR_FORMAT_ARCH           0x3f /* [U] pt-facts F.1: "use CPUID 0x1C" */

/* LBR_INFO_x, legacy format 5 and architectural (pt-facts F.1, F.2) */
#define LBR_INFO_MISPRED       (1ull << 63)
#define LBR_INFO_IN_TX         (1ull << 62)
#define LBR_INFO_ABORT         (1ull << 61)
#define LBR_INFO_CYC_CNT_VALID (1ull << 60) /* architectural only */
#define LBR_INFO_BR_TYPE_SHIFT 56           /* architectural only, bits 59:56 */
#define LBR_INFO_CYC_CNT       0xffffull

/* IA32_LBR_CTL: a set bit *enables* (pt-facts F.2, ARCH_LBR_CTL_MASK 0x7f000f) */
#define ARCH_LBR_CTL_LBREN         (1ull << 0)
#define ARCH_LBR_CTL_OS            (1ull << 1)
#define ARCH_LBR_CTL_USR           (1ull << 2)
#define ARCH_LBR_CTL_CALL_STACK    (1ull << 3)
#define ARCH_LBR_CTL_JCC           (1ull << 16)
#define ARCH_LBR_CTL_NEAR_IND_JMP  (1ull << 17)
#define ARCH_LBR_CTL_NEAR_REL_JMP  (1ull << 18)
#define ARCH_LBR_CTL_NEAR_IND_CALL (1ull << 19)
#define ARCH_LBR_CTL_NEAR_REL_CALL (1ull << 20)
#define ARCH_LBR_CTL_NEAR_RET      (1ull << 21)
#define ARCH_LBR_CTL_OTHER_BRANCH  (1ull << 22)
#define ARCH_LBR_CTL_CPLS          (ARCH_LBR_CTL_OS | ARCH_LBR_CTL_USR)
#define ARCH_LBR_CTL_FILTER        (0x7full << 16)
#define ARCH_LBR_CTL_MASK          0x7f000full

/* CPUID bits the policy reads */
#define CPUID_1_ECX_DS_CPL          (1u << 4)
#define CPUID_1_ECX_PDCM            (1u << 15)
#define CPUID_1_EDX_DS              (1u << 21)
#define CPUID_7_EBX_RTM             (1u << 11)
#define CPUID_7_ECX_BUS_LOCK_DETECT (1u << 24)
#define CPUID_7_EDX_ARCH_LBR        (1u << 19)
#define CPUID_1C_EBX_CPL_FILTER     (1u << 0)
#define CPUID_1C_EBX_BRANCH_FILTER  (1u << 1)
#define CPUID_1C_EBX_CALL_STACK     (1u << 2)
#define MISC_ENABLE_BTS_UNAVAIL     (1ull << 11) /* IA32_MISC_ENABLE[11] */
#define XFEATURE_ARCH_LBR           (1ull << 15) /* XSAVES state component 15 */

/* VMX controls for arch LBR (pt-facts A.2, F.2); Linux vmx.h names */
#define VM_ENTRY_LOAD_IA32_LBR_CTL (1u << 21)
#define VM_EXIT_CLEAR_IA32_LBR_CTL (1u << 26)
#define LBR_VMX_EXIT_SAVE_DEBUG    (1u << 2) /* = VM_EXIT_SAVE_DEBUG_CONTROLS */
#define LBR_VMX_ENTRY_LOAD_DEBUG   (1u << 2) /* = VM_ENTRY_LOAD_DEBUG_CONTROLS */

/* Everything the decision reads, exactly as the CPU reported it. */
struct lbr_host {
    uint32_t max_leaf;                           /* CPUID.0:EAX */
    uint32_t family, model;                      /* display family / model from CPUID.1:EAX */
    uint32_t cpuid1_ecx, cpuid1_edx;             /* CPUID.1 */
    uint32_t cpuid7_ebx, cpuid7_ecx, cpuid7_edx; /* CPUID.(7,0); 0 when max_leaf < 7 */
    uint8_t pmu_version;                         /* CPUID.0AH:EAX[7:0]; 0 when max_leaf < 0xa */
    uint32_t leaf1c[3];                          /* CPUID.1CH EAX, EBX, ECX; 0 when absent */
    uint64_t xss_supported;                      /* CPUID.(0DH,1):EDX:ECX */
    bool perf_caps_ok;                           /* RDMSR IA32_PERF_CAPABILITIES did not fault */
    uint64_t perf_caps;
    bool misc_enable_ok; /* RDMSR IA32_MISC_ENABLE did not fault */
    uint64_t misc_enable;
    uint32_t exit_ctls, entry_ctls;         /* the VM-exit / VM-entry controls the VMM chose */
    uint32_t exit_allowed1, entry_allowed1; /* IA32_VMX_(TRUE_)EXIT/ENTRY_CTLS bits 63:32 */
};

/* A model-specific LBR stack: where its MSRs are (SDM Vol. 3B 17.x per microarchitecture). */
struct lbr_layout {
    const char *name;
    uint8_t nr;        /* entries */
    uint8_t fmt;       /* the LBR_FMT this layout is read with */
    uint32_t from, to; /* first FROM_IP / TO_IP MSR */
    uint32_t info;     /* first LBR_INFO MSR, 0 = none */
    bool call_stack;   /* LBR_SELECT.EN_CALL_STACK exists */
};

struct lbr_decision {
    /* model-specific LBR */
    const struct lbr_layout *lay; /* the host's layout, NULL when ptvisor does not know it */
    bool legacy;                  /* shown: PERF_CAPABILITIES.LBR_FMT = the host's, MSRs pass */
    /* architectural LBR */
    bool arch_present; /* the CPU has it (CPUID.7:EDX[19]) */
    bool arch;         /* shown: CPUID.7:EDX[19], leaf 0x1C, XSS[15] (if the CPU has it) */
    uint32_t leaf1c[3];
    /* IA32_DEBUGCTL */
    uint64_t debugctl_valid; /* the SDM's writable bits on this CPU */
    bool debugctl_virtual;   /* no save+load debug controls: the VMM keeps the guest's value */
    /* IA32_PERF_CAPABILITIES as the guest reads it (#GP when !perf_caps_ok) */
    bool perf_caps_ok;
    uint64_t perf_caps;
    uint32_t max_leaf;
    uint64_t xss_hidden;            /* IA32_XSS bits hidden for LBR's sake */
    uint32_t exit_ctls, entry_ctls; /* VMX controls to add */
    char reason[200];               /* one line for the boot log */
};

/* The host's model-specific layout, or NULL (family 6 models of SDM Vol. 3B 17.6-17.12). */
const struct lbr_layout *lbr_layout_of(uint32_t family, uint32_t model);

/* Decide once at boot (the BSP); every vCPU executes the same decision. */
void lbr_decide(const struct lbr_host *h, struct lbr_decision *d);

/* --- hardware rules (#GP where the CPU would), each from the SDM --- */
/* IA32_DEBUGCTL bits writable on a CPU with these features */
uint64_t lbr_debugctl_valid(const struct lbr_host *h);
/* MSR_LBR_SELECT / MSR_LBR_TOS values the layout accepts */
bool lbr_select_ok(const struct lbr_layout *l, uint64_t val);
bool lbr_tos_ok(const struct lbr_layout *l, uint64_t val);
/* IA32_LBR_CTL / IA32_LBR_DEPTH against CPUID.1CH as the guest sees it */
bool arch_lbr_ctl_ok(const uint32_t leaf1c[3], uint64_t val);
bool arch_lbr_depth_ok(const uint32_t leaf1c[3], uint64_t val);

/* --- what the shim asks --- */
/* Does RDMSR/WRMSR of msr exit to the VMM for LBR's sake (its bit in the MSR bitmap)? */
bool lbr_msr_intercepted(const struct lbr_decision *d, uint32_t msr);

enum lbr_verdict {
    LBR_NOT_MINE, /* not an MSR this policy intercepts: the caller's other policies decide */
    LBR_OK,       /* done: *val is the result of a read */
    LBR_GP,       /* #GP(0), *why names the rule */
};
/*
 * An intercepted access.  *debugctl is the guest's IA32_DEBUGCTL where the VMM keeps it (the
 * VMCS guest field; only used when d->debugctl_virtual).  Validate, then commit: nothing is
 * written unless the verdict is LBR_OK.
 */
enum lbr_verdict lbr_msr_access(const struct lbr_decision *d, uint64_t *debugctl, uint32_t msr,
                                bool write, uint64_t *val, const char **why);

/* CPUID as the guest sees it: leaf 7 EDX[19], leaf 0x1C, leaf 0xD subleaves 1 and 15.
 * r[] = EAX..EDX, in: what the CPU returned for (leaf, sub) */
void lbr_cpuid_filter(const struct lbr_decision *d, uint32_t leaf, uint32_t sub, uint32_t r[4]);

/* The IA32_XSS bits a guest WRMSR may set, given the CPU's: arch LBR state only when shown */
uint64_t lbr_xss_filter(const struct lbr_decision *d, uint64_t host_xss);

/*
 * The root-mode invariant behind PTV_SELFCHECK_DEBUGCTL: the VMM records no branch of its own
 * (no LBR, BTS, BTF in root).  What RDMSR read in root: *_ok false where it faulted (or was not
 * tried).  IA32_DEBUGCTL must be 0: every VM exit clears it (SDM Vol. 3C 28.5.1).  Where the CPU
 * has arch LBR, IA32_LBR_CTL must be 0 too: cleared by the "clear IA32_LBR_CTL" exit control
 * when arch LBR is shown, cleared once at set-up and out of the guest's reach (its MSRs #GP,
 * XSS[15] refused) when hidden.  Returns false when nothing could be read (nothing checked),
 * else true with *holds.
 */
struct lbr_root_view {
    bool debugctl_ok, lbr_ctl_ok;
    uint64_t debugctl, lbr_ctl;
};
bool lbr_root_check(const struct lbr_decision *d, const struct lbr_root_view *r, bool *holds);

#endif
