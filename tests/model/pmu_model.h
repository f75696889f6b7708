/* SPDX-License-Identifier: MIT */
/*
 * A model of a CPU's architectural performance monitoring (test code), written
 * from the Intel SDM Vol. 3B ch. 20 "Performance Monitoring" (ch. 18 in editions before 2023):
 * CPUID leaf 0AH (versions 1-5), IA32_PERFEVTSELx with the OS/USR qualifiers, IA32_PMCx (32-bit
 * writes, sign-extended) and IA32_A_PMCx (full-width writes), IA32_FIXED_CTRx with
 * IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL / STATUS / OVF_CTRL (STATUS_RESET) / STATUS_SET /
 * INUSE, counter overflow setting its status bit and requesting a PMI when INT / PMI is set,
 * DEBUGCTL.FREEZE_PERFMON_ON_PMI (legacy: GLOBAL_CTRL cleared; v4: CTR_Frz) and
 * FREEZE_LBRS_ON_PMI (through the LBR model, tests/model/lbr_model.c), and the local APIC's LVT
 * performance-counter entry that turns a PMI request into an NMI or a fixed interrupt.
 *
 * The event stream is abstract: "N instructions retire at CPL c", "N core cycles at CPL c".
 * Counted events: Instructions Retired (PERFEVTSEL 0xC0/0x00, IA32_FIXED_CTR0), UnHalted Core
 * Cycles (0x3C/0x00, IA32_FIXED_CTR1, and IA32_FIXED_CTR2 whose reference clock the model
 * takes equal to the core clock); any other event, or CMASK / INV / EDGE set, counts nothing.
 * The rules are written here from the SDM, independently of vmm/pmu/pmu_policy.c, so the two
 * can disagree.  Facts marked [I] are inferences (docs/lbr.md "PMU").
 */
#ifndef PTV_TESTS_PMU_MODEL_H
#define PTV_TESTS_PMU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/lbr_model.h"

#define PMUM_GP    8 /* general-purpose counters the model holds */
#define PMUM_FIXED 4

struct pmum_cpu {
    uint8_t version, n_gp, gp_width, n_fixed, fixed_width;
    uint32_t fixed_ecx; /* v5: CPUID.0AH:ECX, the supported-fixed-counter mask */
    bool fw_write;      /* IA32_PERF_CAPABILITIES[13] */
};

struct pmum {
    struct pmum_cpu c;
    struct lbrm *lbr; /* DEBUGCTL and the LBR stack (LBR_Frz lives there); never NULL */
    uint64_t evtsel[PMUM_GP], pmc[PMUM_GP], fixed[PMUM_FIXED];
    uint64_t fixed_ctrl, global_ctrl, status; /* status without LBR_Frz (see lbr) */
    uint32_t lvtpc;                           /* the local APIC's LVT performance entry */
    bool pmi_req;                             /* a PMI was requested since the last boundary */
    uint64_t pmi_src;                         /* the counters that requested it (test truth) */
    uint64_t overflows, pmis;                 /* statistics */
};

/* power-on: every register 0, LVT entry masked (SDM Vol. 3A "Local Vector Table": reset masks the
 * LVT) */
void pmum_init(struct pmum *m, const struct pmum_cpu *c, struct lbrm *lbr);
/* 0 ok, -1 #GP(0) (nothing changes), 1 not a PMU MSR (the caller asks the LBR model) */
int pmum_rdmsr(const struct pmum *m, uint32_t msr, uint64_t *val);
int pmum_wrmsr(struct pmum *m, uint32_t msr, uint64_t val);
/* CPUID leaf 0AH as this CPU answers */
void pmum_cpuid(const struct pmum *m, uint32_t r[4]);
/* events: n instructions retire / n core clocks pass at CPL cpl */
void pmum_retire(struct pmum *m, uint64_t n, unsigned cpl);
void pmum_cycles(struct pmum *m, uint64_t n, unsigned cpl);
/*
 * The next instruction boundary: the PMI requested since the last one (several coalesce into
 * one) goes through the LVT entry; pmi_src is cleared.  Returns 0 (none, or the entry masked:
 * dropped), 2 (NMI), or 0x100 | vector (a fixed interrupt).
 */
unsigned pmum_boundary(struct pmum *m);
/* the model's own rules, for fuzz_pmu */
uint64_t pmum_global_ctrl_valid(const struct pmum_cpu *c);
bool pmum_has_fixed(const struct pmum_cpu *c, unsigned i);

#endif
