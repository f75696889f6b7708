/* SPDX-License-Identifier: MIT */
/*
 * A TRACE_START request (include/ptv/vmcall.h) as the software tracer's configuration: the
 * call's filter flags and registers over the configured defaults (ptvisor.cfg's pt_filter,
 * pt_cr3, pt_range, psb_period).  Pure: compiled into vmm.elf (vmm/vmx/trace_vmx.c) and into
 * test_swpt and fuzz_swpt, which give it every flag combination.
 */
#ifndef PTV_TREQ_H
#define PTV_TREQ_H

#include <stdint.h>
#include "trace/swpt.h"

struct ptv_config;

struct trace_req {
    uint32_t flags;      /* PTV_TRACE_F_* (RBX) */
    uint64_t cr3;        /* RCX: the CR3 to match (PTV_TRACE_F_CR3) */
    uint64_t caller_cr3; /* the CR3 the VMCALL ran under (PTV_TRACE_F_CR3_SELF) */
    uint64_t cr3_ignore; /* R9 (PTV_TRACE_F_CR3_MASK) */
    uint64_t lo, hi;     /* RDX, RSI (PTV_TRACE_F_RANGE) */
    uint64_t start_ip;   /* RDI (PTV_TRACE_F_START_IP) */
};

/* 0 and *out, or -1 with a one-line reason in *why (the VMCALL answers EINVAL) */
int trace_req_swpt(const struct trace_req *rq, const struct ptv_config *cfg, struct swpt_cfg *out,
                   const char **why);

/* the CR3 a request matches: RCX's with PTV_TRACE_F_CR3, else the caller's */
uint64_t trace_req_cr3(const struct trace_req *rq);

/* the request as system-mode PT can take it: 0, or -1 with a reason (RTIT_CR3_MATCH compares
 * CR3[63:5], so no ignored bits above 4; PT has no start trigger and counts no instructions) */
int trace_req_hw_check(const struct trace_req *rq, uint64_t budget, const char **why);

#endif
