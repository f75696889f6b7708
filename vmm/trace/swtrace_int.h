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

/*
 * The successor table: the block that followed the lead at `from` to `to` (64-bit code), kept
 * with the block-table entries its shape depends on (swblock.c block_from's block_src).  It is the
 * block block_from would build again while each of those entries is the one it was (gen) and its
 * bytes are the bytes at its address now (bc_blk_fresh): the runs' lengths, their direct JMP /
 * CALL targets, the instruction ending the last run and the run refused for overlapping are
 * all in those bytes, so only a max below `need` could build another.
 */
struct swtrace_next {
    uint64_t from, to;
    uint64_t need;
    unsigned nrun;
    bool bp_apart; /* the lead was a Jcc or a direct JMP (block_holds) */
    bool noted;    /* swtrace_block_noted, under noted_cr3 */
    uint64_t noted_cr3;
    uint64_t gen[SWTRACE_BLOCK_SEGS];
    const struct bc_blk_entry *run[SWTRACE_BLOCK_SEGS];
    struct swtrace_block b; /* nrun == 0: empty */
};

/* the successor table in mem, emptied, at the start of a window (swtrace.c); none without a block
 * table.  swblock.c alone reads and fills it */
void swtrace_next_init(struct swtrace *t, void *mem, uint64_t bytes);

#endif
