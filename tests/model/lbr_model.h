/* SPDX-License-Identifier: MIT */
/*
 * A model of a CPU's last branch records (test code): model-specific LBR (TOS
 * rotation, LBR_SELECT filters, call-stack mode, FROM flags of formats 3/4, LBR_INFO of format
 * 5) and architectural LBR (IA32_LBR_CTL filters, depth, entry 0 = newest, INFO branch type /
 * cycles), freeze on PMI (legacy: DEBUGCTL.LBR cleared; PMU v4 and arch: GLOBAL_STATUS.LBR_Frz),
 * #DB clearing the enable, and the RDMSR/WRMSR rules of every LBR MSR with their #GPs.
 *
 * It is bare metal for tests/model/test_lbr_diff.c and the reference of fuzz_lbr.  Its MSR
 * rules are written here from the SDM, independently of vmm/lbr/lbr_policy.c (same facts,
 * different code), so the two can disagree.  Facts marked [I] are inferences (docs/lbr.md).
 */
#ifndef PTV_TESTS_LBR_MODEL_H
#define PTV_TESTS_LBR_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#define LBRM_MAX 64

#define LBRM_MSR_GLOBAL_STATUS   0x38e /* IA32_PERF_GLOBAL_STATUS (RO) */
#define LBRM_MSR_GLOBAL_OVF_CTRL 0x390 /* IA32_PERF_GLOBAL_STATUS_RESET on PMU v4 */
#define LBRM_MSR_XSS             0xda0
#define LBRM_LBR_FRZ             (1ull << 58) /* IA32_PERF_GLOBAL_STATUS[58] */

/* What a retired control transfer is, for the filters (SDM Vol. 3B table 17-13). */
enum lbrm_br {
    LBRM_JCC,
    LBRM_REL_CALL,
    LBRM_IND_CALL,
    LBRM_RET,
    LBRM_IND_JMP,
    LBRM_REL_JMP,
    LBRM_FAR,   /* far CALL / JMP / RET, IRET, SYSCALL ... */
    LBRM_EVENT, /* interrupt or exception delivery: a far transfer for the filters */
    LBRM_NTYPES
};

/* The CPU the model is (every field as that CPU would report or behave). */
struct lbrm_cpu {
    bool has_debugctl;   /* IA32_DEBUGCTL exists (not in Bochs with ignore_bad_msrs=0) */
    bool debugctl_inert; /* its value is kept but has no effect (the VMM's fallback, lbr.md) */
    bool ds, ds_cpl, bts_unavail, pdcm, rtm, bus_lock, freeze_smm; /* feature flags */
    uint8_t pmu_version;
    /* model-specific LBR */
    bool legacy;
    uint8_t nr, fmt;
    uint32_t from, to, info; /* info 0 = none */
    bool call_stack;
    /* architectural LBR */
    bool arch;
    uint32_t leaf1c[3];
    /* IA32_PERF_CAPABILITIES (perf_caps_ok = it exists), IA32_XSS bits it supports */
    bool perf_caps_ok;
    uint64_t perf_caps;
    uint64_t xss_supported;
};

struct lbrm {
    struct lbrm_cpu c;
    uint64_t debugctl, select, tos;
    uint64_t from[LBRM_MAX], to[LBRM_MAX], info[LBRM_MAX];
    uint64_t ctl, depth;
    uint64_t afrom[LBRM_MAX], ato[LBRM_MAX], ainfo[LBRM_MAX];
    uint64_t global_status; /* LBR_Frz only */
    uint64_t xss;
    uint64_t now, last; /* core clocks; time of the last record */
    uint64_t records;   /* records written (statistics) */
};

/* power-on state: everything 0, arch depth the largest CPUID.1CH allows */
void lbrm_init(struct lbrm *m, const struct lbrm_cpu *c);
/* 0, or -1 for #GP(0) (the access changes nothing then) */
int lbrm_rdmsr(const struct lbrm *m, uint32_t msr, uint64_t *val);
int lbrm_wrmsr(struct lbrm *m, uint32_t msr, uint64_t val);
/* a taken branch (or event delivery) retires, ending at CPL to_cpl */
void lbrm_branch(struct lbrm *m, uint64_t from, uint64_t to, enum lbrm_br t, unsigned to_cpl,
                 bool mispred);
void lbrm_tick(struct lbrm *m, uint64_t clocks);
/* a PMI request (counter overflow): the freeze, if asked for; the delivery is an LBRM_EVENT */
void lbrm_pmi(struct lbrm *m);
/* #DB delivery: clears the LBR enables and is itself not recorded */
void lbrm_db(struct lbrm *m);
/* CPUID as this CPU answers leaves 7.0 (EDX), 0x1C and 0xD.1 (ECX) / 0xD.15 */
void lbrm_cpuid(const struct lbrm *m, uint32_t leaf, uint32_t sub, uint32_t r[4]);
/* the independent rules, for fuzz_lbr */
uint64_t lbrm_debugctl_writable(const struct lbrm_cpu *c);
bool lbrm_select_ok(const struct lbrm_cpu *c, uint64_t val);
bool lbrm_tos_ok(const struct lbrm_cpu *c, uint64_t val);
bool lbrm_ctl_ok(const struct lbrm_cpu *c, uint64_t val);
bool lbrm_depth_ok(const struct lbrm_cpu *c, uint64_t val);

#endif
