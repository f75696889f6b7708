/* SPDX-License-Identifier: MIT */
/*
 * Mechanism of the virtual RTIT MSR file: decode the MSR index, ask the policy
 * (pt_ctl_policy.c) whether the write is legal, then commit it whole.  Validate, then commit:
 * nothing in *f changes before every rule has passed.
 */
#include "pt/pt_msr.h"

#include <stddef.h>

#include "lib/ptv_string.h"

void pt_msr_file_init(struct pt_msr_file *f)
{
    memset(f, 0, sizeof(*f));
    f->output_mask = RTIT_MASK_LOWER; /* bits 6:0 are forced to 1 (pt-facts B.5) */
}

bool pt_msr_is_rtit(uint32_t msr)
{
    return msr == MSR_IA32_RTIT_OUTPUT_BASE || msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS ||
           msr == MSR_IA32_RTIT_CTL || msr == MSR_IA32_RTIT_STATUS ||
           msr == MSR_IA32_RTIT_CR3_MATCH ||
           (msr >= MSR_IA32_RTIT_ADDR0_A && msr <= MSR_IA32_RTIT_ADDR3_B);
}

/* Byte offset in struct pt_msr_file of an RTIT MSR's value (pt_msr_is_rtit(msr) must hold). */
static size_t slot(uint32_t msr)
{
    size_t n = (msr - MSR_IA32_RTIT_ADDR0_A) / 2, ab = (msr - MSR_IA32_RTIT_ADDR0_A) % 2;

    switch (msr) {
    case MSR_IA32_RTIT_CTL:
        return offsetof(struct pt_msr_file, ctl);
    case MSR_IA32_RTIT_STATUS:
        return offsetof(struct pt_msr_file, status);
    case MSR_IA32_RTIT_OUTPUT_BASE:
        return offsetof(struct pt_msr_file, output_base);
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        return offsetof(struct pt_msr_file, output_mask);
    case MSR_IA32_RTIT_CR3_MATCH:
        return offsetof(struct pt_msr_file, cr3_match);
    }
    return offsetof(struct pt_msr_file, addr) + (2 * n + ab) * sizeof(uint64_t);
}

uint64_t pt_msr_file_get(const struct pt_msr_file *f, uint32_t msr)
{
    uint64_t v;

    memcpy(&v, (const char *)f + slot(msr), sizeof(v));
    return v;
}

void pt_msr_file_set(struct pt_msr_file *f, uint32_t msr, uint64_t value)
{
    if (msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS)
        value |= RTIT_MASK_LOWER;
    memcpy((char *)f + slot(msr), &value, sizeof(value));
}

static enum pt_msr_status result(struct pt_msr_result *res, enum pt_msr_status st,
                                 enum pt_rule rule)
{
    if (res) {
        memset(res, 0, sizeof(*res));
        res->status = st;
        res->rule = rule;
        res->reason = st == PT_MSR_NOT_PT_MSR ? "not an RTIT MSR" : pt_rule_name(rule);
    }
    return st;
}

enum pt_msr_status pt_msr_write(const struct pt_gcaps *g, struct pt_msr_file *f, uint32_t msr,
                                uint64_t value, struct pt_msr_result *res)
{
    enum pt_rule rule;
    uint64_t old_ctl = f->ctl;

    if (!pt_msr_is_rtit(msr))
        return result(res, PT_MSR_NOT_PT_MSR, PT_RULE_NONE);
    rule = pt_policy_check_write(g, f, msr, value);
    if (rule != PT_RULE_NONE)
        return result(res, PT_MSR_GP, rule);

    /* Commit: nothing below can fail. */
    if (msr == MSR_IA32_RTIT_STATUS)
        value = (value & ~PT_STATUS_WRITE_IGNORED) | (f->status & PT_STATUS_WRITE_IGNORED);
    pt_msr_file_set(f, msr, value); /* MASK_PTRS bits 6:0 stay 1: writes ignored (B.5) */

    result(res, PT_MSR_OK, PT_RULE_NONE);
    if (res && msr == MSR_IA32_RTIT_CTL) {
        res->trace_start = !(old_ctl & RTIT_CTL_TRACEEN) && (value & RTIT_CTL_TRACEEN);
        res->trace_stop = (old_ctl & RTIT_CTL_TRACEEN) && !(value & RTIT_CTL_TRACEEN);
    }
    return PT_MSR_OK;
}

enum pt_msr_status pt_msr_read(const struct pt_gcaps *g, const struct pt_msr_file *f, uint32_t msr,
                               uint64_t *value, struct pt_msr_result *res)
{
    if (!pt_msr_is_rtit(msr))
        return result(res, PT_MSR_NOT_PT_MSR, PT_RULE_NONE);
    if (!g->present)
        return result(res, PT_MSR_GP, PT_RULE_NO_PT);
    if (!pt_msr_present(g, msr))
        return result(res, PT_MSR_GP, PT_RULE_MSR_ABSENT);
    /* Reads are allowed while TraceEn=1 (only writes are locked, pt-facts B.3). */
    *value =
        pt_msr_file_get(f, msr) | (msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS ? RTIT_MASK_LOWER : 0);
    return result(res, PT_MSR_OK, PT_RULE_NONE);
}
