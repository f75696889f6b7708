/* SPDX-License-Identifier: MIT */
/*
 * The per-vCPU virtual RTIT MSR file and guest RDMSR/WRMSR emulation.
 *
 * A VMX MSR-exit handler calls pt_msr_read()/pt_msr_write() with the decoded MSR index and value
 * and acts on the result: OK (resume, skip the instruction), GP (inject #GP(0)), NOT_PT_MSR (not
 * ours; try the next handler).  Every write is checked exactly as hardware checks it against the
 * CPUID leaf 0x14 the guest was shown (struct pt_gcaps); a write either commits completely or
 * changes nothing.  The rules themselves live in pt_ctl_policy.c, one table row each.
 */
#ifndef PTV_PT_MSR_H
#define PTV_PT_MSR_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_caps.h"

/*
 * IA32_RTIT_STATUS bits the processor owns: a guest WRMSR may include them (no #GP, for state
 * restore) but does not change them -- "Writes are ignored" (SDM-p1704, Table 36-7).
 */
#define PT_STATUS_WRITE_IGNORED                                                                    \
    (RTIT_STATUS_FILTEREN | RTIT_STATUS_CONTEXTEN | RTIT_STATUS_TRIGGEREN)

struct pt_msr_file {
    uint64_t ctl;
    uint64_t status;
    uint64_t output_base;
    uint64_t output_mask; /* bits 6:0 always 1 (pt-facts B.5) */
    uint64_t cr3_match;
    uint64_t addr[PT_MAX_ADDR_RANGES][2]; /* [n][0] = ADDRn_A, [n][1] = ADDRn_B */
};

enum pt_msr_status {
    PT_MSR_OK = 0,
    PT_MSR_GP,         /* inject #GP(0); the file is unchanged */
    PT_MSR_NOT_PT_MSR, /* the index is not an RTIT MSR */
};

/* The rule that decided a #GP (pt_ctl_policy.c holds name, citation and check for each). */
enum pt_rule {
    PT_RULE_NONE = 0,
    PT_RULE_NO_PT,             /* guest has no PT: every RTIT MSR #GPs */
    PT_RULE_MSR_ABSENT,        /* the MSR does not exist for this CPUID view */
    PT_RULE_CTL_RESERVED,      /* RTIT_CTL reserved bit */
    PT_RULE_CTL_CYC,           /* CYCEn/CycThresh/PSBFreq without psb_cyc */
    PT_RULE_CTL_PWR_EVT,       /* PwrEvtEn without power event trace */
    PT_RULE_CTL_PTW,           /* PTWEn/FUPonPTW without ptwrite */
    PT_RULE_CTL_FABRIC,        /* FabricEn without output to transport */
    PT_RULE_CTL_CR3EN,         /* CR3Filter without CR3 filtering */
    PT_RULE_CTL_TOPA,          /* ToPA without ToPA output */
    PT_RULE_CTL_MTC,           /* MTCEn/MTCFreq without MTC */
    PT_RULE_CTL_EVENT_EN,      /* EventEn without event trace */
    PT_RULE_CTL_NOTNT,         /* DisTNT without TNT disable */
    PT_RULE_CTL_INJ_PSB_PMI,   /* InjectPsbPmiOnEnable without PSB/PMI preservation */
    PT_RULE_CTL_ADDR_RANGE,    /* ADDRn_CFG != 0 for n >= number of ranges */
    PT_RULE_CTL_ADDR_ENCODING, /* ADDRn_CFG > 2 */
    PT_RULE_CTL_MTC_FREQ,      /* MTCFreq not in the CPUID bitmap (whatever MTCEn is) */
    PT_RULE_CTL_CYC_THRESH,    /* CycThresh not in the CPUID bitmap */
    PT_RULE_CTL_PSB_FREQ,      /* PSBFreq not in the CPUID bitmap */
    PT_RULE_CTL_SINGLE_RANGE,  /* TraceEn=1, ToPA=0, FabricEn=0 without single-range output */
    PT_RULE_CTL_LOCKED,        /* TraceEn=1: only clearing TraceEn (or the same value) allowed */
    PT_RULE_LOCKED,            /* TraceEn=1: writes to the other RTIT MSRs #GP */
    PT_RULE_STATUS_RESERVED,   /* STATUS bit that software may not write */
    PT_RULE_BASE_RESERVED,     /* OUTPUT_BASE bits 6:0 */
    PT_RULE_BASE_MAXPHYADDR,   /* OUTPUT_BASE at or above 2^MAXPHYADDR */
    PT_RULE_CR3_RESERVED,      /* CR3_MATCH bits 4:0 */
    PT_RULE_ADDR_CANONICAL,    /* ADDRn_A/B not canonical */
    PT_RULE_COUNT
};

struct pt_msr_result {
    enum pt_msr_status status;
    enum pt_rule rule;  /* PT_RULE_NONE unless status == PT_MSR_GP */
    const char *reason; /* printable: rule name and citation, or "ok" */
    /* For an OK write to RTIT_CTL: TraceEn turned 0->1 or 1->0 (the switch plan changes). */
    bool trace_start;
    bool trace_stop;
};

/* The state of a vCPU's RTIT MSRs after reset (all zero; OUTPUT_MASK_PTRS reads 0x7f). */
void pt_msr_file_init(struct pt_msr_file *f);

/* True if `msr` is one of the RTIT MSRs this file models: 0x560-0x561, 0x570-0x572, 0x580-0x587. */
bool pt_msr_is_rtit(uint32_t msr);

/*
 * Raw access for the VM entry/exit switch (pt_switch.h SAVE/LOAD steps): values that come from
 * or go to the hardware, not from the guest, so no rule applies.  pt_msr_is_rtit(msr) must hold.
 */
uint64_t pt_msr_file_get(const struct pt_msr_file *f, uint32_t msr);
void pt_msr_file_set(struct pt_msr_file *f, uint32_t msr, uint64_t value);

__attribute__((warn_unused_result)) enum pt_msr_status pt_msr_write(const struct pt_gcaps *g,
                                                                    struct pt_msr_file *f,
                                                                    uint32_t msr, uint64_t value,
                                                                    struct pt_msr_result *res);

__attribute__((warn_unused_result)) enum pt_msr_status pt_msr_read(const struct pt_gcaps *g,
                                                                   const struct pt_msr_file *f,
                                                                   uint32_t msr, uint64_t *value,
                                                                   struct pt_msr_result *res);

/* --- policy (pt_ctl_policy.c) --- */

/* The RTIT_CTL bits a guest with view g may set at all (pt-facts B.3 bitmask). */
uint64_t pt_ctl_allowed_mask(const struct pt_gcaps *g);

/* STATUS bits software may write (pt-facts A.7/B.4). */
uint64_t pt_status_writable_mask(const struct pt_gcaps *g);

/* Whether the MSR exists for this view (reads and writes of absent MSRs #GP). */
bool pt_msr_present(const struct pt_gcaps *g, uint32_t msr);

/*
 * Check a write of `value` to `msr` given the current file.  Returns the first rule violated
 * (PT_RULE_NONE if the write is legal).  Never changes anything.
 */
enum pt_rule pt_policy_check_write(const struct pt_gcaps *g, const struct pt_msr_file *f,
                                   uint32_t msr, uint64_t value);

const char *pt_rule_name(enum pt_rule r);
const char *pt_rule_cite(enum pt_rule r);

#endif
