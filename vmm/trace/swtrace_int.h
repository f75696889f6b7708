/* SPDX-License-Identifier: MIT */
/* What the software tracer's stepping logic (swtrace.c) shares with its block stepping
 * (swblock.c); internal to those two files. */
#ifndef PTV_SWTRACE_INT_H
#define PTV_SWTRACE_INT_H

#include "trace/swtrace.h"

/* ip after it wrapped at the code size */
static inline uint64_t ip_wrap(uint64_t ip, enum x86_code_size cs)
{
    return x86_ip_wrap(ip, cs);
}

/* the linear address of ip in c's code segment */
static inline uint64_t lin_of(const struct swtrace_cpu *c, uint64_t ip)
{
    return c->ctx.cs == X86_CODE64 ? ip : (c->cs_base + ip) & 0xffffffffu;
}

static inline bool same_ctx(const struct swpt_ctx *a, const struct swpt_ctx *b)
{
    return a->cr3 == b->cr3 && a->cpl == b->cpl && a->cs == b->cs;
}

/* the tracer is at c after the steps it counted: read the instruction there, or close the
 * window if the budget is spent (false) */
bool swtrace_fetch_within_budget(struct swtrace *t, const struct gw_mem *m,
                                 const struct swtrace_cpu *c);

/* the successor table (swblock.c) in mem, emptied; none without a block table */
void swtrace_next_init(struct swtrace *t, void *mem, uint64_t bytes);

#endif
