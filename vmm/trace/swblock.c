/* SPDX-License-Identifier: MIT */
/* The software tracer's block stepping (swtrace.h): which instructions a block holds, the
 * branch that leads the next one, and what a vCPU that exited inside a block ran. */
#include "trace/swtrace.h"
#include "trace/swtrace_int.h"
#include "lib/ptv_string.h"

static bool block_plain(const struct x86_insn *in)
{
    return in->branch == X86_BR_NONE &&
           !(in->flags & (X86_F_MOV_CR | X86_F_MOV_CR3 | X86_F_INVLPG | X86_F_HLT | X86_F_NOBLOCK));
}

/* a direct JMP or CALL: the block runs on at its target (one more run) */
static bool block_chains(const struct x86_insn *in)
{
    return in->branch == X86_BR_JMP_DIRECT || in->branch == X86_BR_CALL_DIRECT;
}

/*
 * One straight run of plain instructions from ip appended to b (b->n grows, b->n <= max), as
 * the block table keeps it (bcache.h) or decoded one by one (and then kept).  Sets b->end /
 * end_lin after them.  *end: the instruction that ends the run where it is known (true), else
 * the run stopped at max, at SWTRACE_BLOCK_MAX or before an unreadable instruction.  *src: the
 * block-table entry that holds exactly this run and its end (bytes, lengths, end), or NULL.
 * -1: the instruction at ip is not readable (nothing appended).
 */
static int block_run(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                     uint64_t ip, const struct x86_insn *first, uint64_t max,
                     struct swtrace_block *b, struct x86_insn *end, bool *ended,
                     const struct bc_blk_entry **src)
{
    const uint64_t lin0 = lin_of(c, ip);
    const unsigned n0 = b->n;
    struct x86_insn cur;
    /* the table reads any cached code page in place (bc_code_bytes): a miss stays a miss */
    const struct bc_blk_entry *e = bc_blk_get(&t->bc, m, &c->paging, lin0, c->ctx.cs);
    *src = NULL;
    if (e) {
        uint64_t bytes = e->pbytes;
        unsigned k = e->n;
        if (n0 + k <= max && n0 + k <= SWTRACE_BLOCK_MAX)
            memcpy(b->len + n0, e->len, k);
        else
            for (k = 0, bytes = 0; n0 + k < max && n0 + k < SWTRACE_BLOCK_MAX; k++)
                bytes += (b->len[n0 + k] = e->len[k]);
        /* the same linear bytes at every IP of it: no wrap of the IP or the linear address */
        if (ip_wrap(ip + bytes, c->ctx.cs) == ip + bytes && lin_of(c, ip + bytes) == lin0 + bytes) {
            b->n = n0 + k;
            b->end = ip + bytes;
            b->end_lin = lin0 + bytes;
            *ended = k == e->n;
            *end = e->end;
            *src = *ended ? e : NULL;
            return (int)k;
        }
    }
    if (!first) {
        if (!bc_fetch_fast(&t->bc, m, &c->paging, lin0, c->ctx.cs, &cur))
            return -1;
        first = &cur;
    }
    struct x86_insn in[BC_BLK_INSNS + 1];
    unsigned k = 0;
    uint64_t at = ip;
    cur = *first;
    *ended = false;
    while (n0 + k < max && n0 + k < SWTRACE_BLOCK_MAX) {
        if (!block_plain(&cur)) {
            *ended = true;
            break;
        }
        /* a run is the same linear bytes at every IP: it stops before an instruction whose
         * IP or linear address wraps (16 / 32-bit code), which a step then runs */
        if (ip_wrap(at + cur.len, c->ctx.cs) != at + cur.len ||
            lin_of(c, at + cur.len) != lin0 + (at + cur.len - ip))
            break;
        if (k < BC_BLK_INSNS)
            in[k] = cur;
        b->len[n0 + k++] = cur.len;
        at = ip_wrap(at + cur.len, c->ctx.cs);
        uint64_t lin = lin_of(c, at);
        if (!bc_fetch_fast(&t->bc, m, &c->paging, lin, c->ctx.cs, &cur))
            break; /* unreadable: the run ends before it, a step reads it again */
    }
    b->n = n0 + k;
    b->end = at;
    b->end_lin = lin_of(c, at);
    *end = cur;
    if (*ended && k <= BC_BLK_INSNS) {
        uint64_t bytes = 0;
        for (unsigned i = 0; i < k; i++)
            bytes += b->len[n0 + i];
        if (ip + bytes == b->end && lin0 + bytes == b->end_lin) {
            in[k] = cur;
            *src = bc_blk_put(&t->bc, m, &c->paging, lin0, c->ctx.cs, in, k);
        }
    }
    return (int)k;
}

/* [lo, hi) holds x, in IP order (a wrapped span holds everything: never chained) */
static bool span_has(uint64_t lo, uint64_t hi, uint64_t x)
{
    return hi <= lo || (x >= lo && x < hi);
}

/* the IPs of run s of b: its instructions', the jump's or the breakpoint's (the last run's
 * end) included */
static void run_span(const struct swtrace_block *b, unsigned s, uint64_t *lo, uint64_t *hi)
{
    *lo = b->seg[s].ip;
    *hi = (s + 1 < b->nseg ? b->seg[s].jmp : b->end) + 1;
}

/* an instruction of b is at ip (its breakpoint too, unless `bp_apart`) */
static bool block_holds(const struct swtrace_block *b, uint64_t ip, bool bp_apart)
{
    for (unsigned s = 0; s < b->nseg; s++) {
        uint64_t lo, hi;
        run_span(b, s, &lo, &hi);
        if (bp_apart && s + 1 == b->nseg && ip == b->end)
            hi--; /* [lo, end): a wrapped span still holds everything */
        if (span_has(lo, hi, ip))
            return true;
    }
    return false;
}

/* the last run of b shares no IP with the others (nor does `lead`) */
static bool last_run_apart(const struct swtrace_block *b, uint64_t lead)
{
    uint64_t lo, hi;
    run_span(b, b->nseg - 1, &lo, &hi);
    if (span_has(lo, hi, lead))
        return false;
    for (unsigned s = 0; s + 1 < b->nseg; s++) {
        uint64_t l, h;
        run_span(b, s, &l, &h);
        if (h <= l || span_has(l, h, lead) || (lo < h && l < hi))
            return false;
    }
    return true;
}

/* what block_from built a block from (the successor table keeps it) */
struct block_src {
    /* the block-table entries holding its runs whole, and the run refused after them (it
     * would overlap the block: last_run_apart) */
    const struct bc_blk_entry *e[SWTRACE_BLOCK_SEGS];
    /* e[s]->gen when run s was read from it: a later bc_blk_put into that entry (another run of
     * this very block whose slot it shares, too) moves it */
    uint64_t gen[SWTRACE_BLOCK_SEGS];
    unsigned n;    /* the entries its shape depends on; 0: it cannot be kept */
    uint64_t need; /* the least max for which block_from builds it again */
};

/* run s was read from the entry block_run gave (if any): its generation then */
static void src_read(struct block_src *src, unsigned s)
{
    src->gen[s] = src->e[s] ? src->e[s]->gen : 0;
}

/* every one of the first n runs is held whole by an entry, the one it was read from */
static bool src_whole(const struct block_src *src, unsigned n)
{
    for (unsigned s = 0; s < n; s++)
        if (!src->e[s] || src->e[s]->gen != src->gen[s])
            return false;
    return true;
}

/*
 * The block at ip (first: the instruction there, decoded; NULL: read it) of at most max
 * instructions: its first run, and while a run ends with a direct JMP / CALL, the jump and the
 * run at its target (up to SWTRACE_BLOCK_SEGS runs).  A run joins only where every IP of the
 * block stays distinct and neither the breakpoint nor `lead` (the IP the block is led from, or
 * none: UINT64_MAX) falls on another instruction of it: an exit's RIP names one place in it.
 * -1: the instruction at ip is not readable; else the instructions (0: the one at ip is not
 * plain and does not chain; b ends at ip).  *src: the entries whose bytes decide the block,
 * where the block is a function of those bytes and of max alone (no run cut short by max, none
 * unreadable).
 */
static int block_from(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                      uint64_t ip, const struct x86_insn *first, uint64_t max, uint64_t lead,
                      struct swtrace_block *b, struct block_src *src)
{
    struct x86_insn end;
    bool ended;
    int k;
    b->ip = ip;
    b->n = 0;
    b->nseg = 1;
    b->seg[0].ip = ip;
    b->seg[0].first = 0;
    src->n = 0;
    if (block_run(t, m, c, ip, first, max, b, &end, &ended, &src->e[0]) < 0)
        return -1;
    src_read(src, 0);
    while (ended && block_chains(&end) && b->nseg < SWTRACE_BLOCK_SEGS && b->n + 1 < max &&
           b->n + 1 < SWTRACE_BLOCK_MAX) {
        /* the block as it is, ending at the jump (the next block's lead if the run fails) */
        const unsigned n = b->n;
        const uint64_t jmp = b->end, jmp_lin = b->end_lin;
        uint64_t to = x86_direct_target(jmp, &end, c->ctx.cs);
        b->seg[b->nseg - 1].jmp = jmp;
        b->len[b->n++] = end.len;
        b->seg[b->nseg].ip = to;
        b->seg[b->nseg].first = (uint8_t)b->n;
        b->nseg++;
        k = block_run(t, m, c, to, NULL, max, b, &end, &ended, &src->e[b->nseg - 1]);
        src_read(src, b->nseg - 1);
        if (k < 0 || !last_run_apart(b, lead)) {
            b->nseg--;
            b->n = n;
            b->end = jmp;
            b->end_lin = jmp_lin;
            /* refused for overlapping, whole: so with any max that lets that run be whole */
            if (k >= 0 && src_whole(src, b->nseg + 1)) {
                src->n = b->nseg + 1;
                src->need = n + 1 + (unsigned)k + !k;
            }
            return (int)b->n;
        }
    }
    if (ended && b->n + 1 < max && src_whole(src, b->nseg)) {
        src->n = b->nseg;
        src->need = b->n + 2;
    }
    return (int)b->n;
}

/* the IP after instruction i of b, which is at ip in run *s: where i ends a run (its direct JMP /
 * CALL), the next run's first (*s moves on) */
static uint64_t ip_after(const struct swtrace_block *b, unsigned i, unsigned *s, uint64_t ip,
                         enum x86_code_size cs)
{
    if (*s + 1 < b->nseg && b->seg[*s + 1].first == i + 1)
        return b->seg[++*s].ip;
    return ip_wrap(ip + b->len[i], cs);
}

uint64_t swtrace_block_ip(const struct swtrace_block *b, unsigned i, enum x86_code_size cs)
{
    uint64_t ip = b->ip;
    unsigned s = 0;
    for (unsigned k = 0; k < i && k < b->n; k++)
        ip = ip_after(b, k, &s, ip, cs);
    return i == b->n ? b->end : ip;
}

/* instructions the window may still trace (the budget) */
static uint64_t budget_left(const struct swtrace *t)
{
    return t->budget ? t->budget - t->st.steps : UINT64_MAX;
}

/*
 * Blocks run in traced code with nothing to judge (no departure out, no trigger armed), or in a
 * context the filter leaves out (another CR3 or CPL: the kernel under a user-only window, the
 * other processes under a one-process one).  There PacketEn is 0 at every IP, trigger or not,
 * and no instruction of a block or its lead can leave that context: a departure stays as it is
 * until a step sees traced code again, and the trace gets nothing but the instruction count.
 */
static bool block_ok(const struct swtrace *t, const struct swtrace_cpu *c)
{
    return t->on && t->valid && c->rip == t->ip && c->cs_sel == t->cs_sel &&
           same_ctx(&c->ctx, &t->ctx) &&
           ((t->pt.pkt_en && !t->pt.armed && !t->left.on) || swpt_context_off(&t->pt, &c->ctx));
}

unsigned swtrace_block_plan(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                            struct swtrace_block *b)
{
    b->lead = b->lead_rf = b->noted = false;
    b->n = 0;
    if (!block_ok(t, c))
        return 0;
    struct block_src src;
    int n = block_from(t, m, c, t->ip, &t->insn, budget_left(t), UINT64_MAX, b, &src);
    return n > 0 ? (unsigned)n : (b->n = 0);
}

/* the 8 bytes at linear lin, little-endian, read as the vCPU would now (through the
 * tracer's translations): false where they are not all readable */
static bool read64(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                   uint64_t lin, uint64_t *val)
{
    uint8_t raw[8];
    const uint8_t *p = bc_code_bytes(&t->bc, m, &c->paging, lin, 8); /* in place, or copied */
    if (!p) {
        if (bc_read(&t->bc, m, &c->paging, lin, raw, 8))
            return false;
        p = raw;
    }
    __builtin_memcpy(val, p, 8); /* x86: little-endian */
    return true;
}

/* where the indirect JMP / CALL at the tracer's IP goes, from the registers and memory as
 * they are now, the vCPU stopped before it (64-bit code, a DS-based operand: x86_class.h) */
static bool indirect_target(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                            const struct swtrace_regs *r, uint64_t *to)
{
    uint8_t raw[X86_MAX_INSN];
    struct x86_ind op;
    const uint64_t lin = lin_of(c, t->ip);
    const uint8_t *code = bc_code_bytes(&t->bc, m, &c->paging, lin, t->insn.len);
    if (!r->gpr || c->ctx.cs != X86_CODE64)
        return false;
    if (!code) {
        if (bc_read(&t->bc, m, &c->paging, lin, raw, t->insn.len))
            return false;
        code = raw;
    }
    if (x86_indirect_operand(code, t->insn.len, c->ctx.cs, &op))
        return false;
#define GPR(n) ((n) == 4 ? c->rsp : r->gpr[(n)&15])
    if (op.kind == X86_IND_REG) {
        *to = GPR(op.base);
        return true;
    }
    uint64_t ea = (uint64_t)(int64_t)op.disp;
    if (op.base == X86_IND_RIP)
        ea += t->ip + t->insn.len;
    else if (op.base != X86_IND_NONE)
        ea += GPR(op.base);
    if (op.index != X86_IND_NONE)
        ea += GPR(op.index) * op.scale;
#undef GPR
    return read64(t, m, c, ea, to);
}

/* the successor table (struct swtrace_next, swtrace_int.h): where the block after a lead is kept */
static struct swtrace_next *next_slot(const struct swtrace *t, uint64_t from, uint64_t to)
{
    uint64_t h = (from ^ (to * 0x9e3779b97f4a7c15ull)) >> 20 ^ to;
    return &t->next[(unsigned)(h ^ h >> 9) & t->next_mask];
}

/* *d = *s where it is used: its n lengths and nseg runs (the copy is on every hit) */
static void block_copy(struct swtrace_block *d, const struct swtrace_block *s)
{
    d->lead = s->lead;
    d->lead_ip = s->lead_ip;
    d->lead_rf = s->lead_rf;
    d->ip = s->ip;
    d->end = s->end;
    d->end_lin = s->end_lin;
    d->n = s->n;
    d->nseg = s->nseg;
    for (unsigned i = 0; i < s->n; i += 8) /* 8 lengths at a time: len[] has room for it */
        __builtin_memcpy(d->len + i, s->len + i, 8);
    for (unsigned k = 0; k < s->nseg; k++)
        d->seg[k] = s->seg[k];
}

/* the kept block after the lead at the tracer's IP to `to`, if it is still what block_from would
 * build (max: as block_from's) and the lead is of the same kind (bp_apart: as block_holds';
 * the lead's bytes are read again at every breakpoint, and may have changed) */
static bool next_kept(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                      uint64_t to, uint64_t max, bool bp_apart, struct swtrace_block *b)
{
    if (!t->next || c->ctx.cs != X86_CODE64)
        return false;
    struct swtrace_next *x = next_slot(t, t->ip, to);
    if (!x->nrun || x->from != t->ip || x->to != to || max < x->need || x->bp_apart != bp_apart)
        return false;
    for (unsigned s = 0; s < x->nrun; s++)
        if (x->run[s]->gen != x->gen[s] || !bc_blk_fresh(&t->bc, m, &c->paging, x->run[s]))
            return false;
    block_copy(b, &x->b);
    b->noted = x->noted && x->noted_cr3 == c->ctx.cr3;
    t->next_last = x;
    t->st.next_hits++;
    return true;
}

/* keep b, the block block_from built after the lead at the tracer's IP to `to` (block_holds
 * passed it with bp_apart) */
static void next_keep(struct swtrace *t, const struct swtrace_cpu *c, uint64_t to, bool bp_apart,
                      const struct swtrace_block *b, const struct block_src *src)
{
    if (!t->next || c->ctx.cs != X86_CODE64 || !src->n || !src_whole(src, src->n))
        return;
    struct swtrace_next *x = next_slot(t, t->ip, to);
    x->from = t->ip;
    x->to = to;
    x->need = src->need;
    x->nrun = src->n;
    x->bp_apart = bp_apart;
    x->noted = false;
    t->next_last = x;
    for (unsigned s = 0; s < src->n; s++) {
        x->run[s] = src->e[s];
        x->gen[s] = src->gen[s];
    }
    x->b = *b;
}

bool swtrace_block_next(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                        const struct swtrace_regs *r, struct swtrace_block *b)
{
    const struct x86_insn *in = &t->insn;
    uint64_t to;
    b->lead = b->lead_rf = b->noted = false;
    b->n = 0;
    t->next_last = NULL;
    if (!block_ok(t, c) || budget_left(t) < 2)
        return false;
    switch (in->branch) {
    case X86_BR_JCC:
        if (!(in->flags & X86_F_JCC_CC))
            return false; /* LOOP, JrCXZ: stepped */
        to = x86_jcc_taken(in, r->rflags) ? x86_direct_target(t->ip, in, c->ctx.cs)
                                          : ip_wrap(t->ip + in->len, c->ctx.cs);
        break;
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
        to = x86_direct_target(t->ip, in, c->ctx.cs);
        break;
    case X86_BR_RET:
        /* the return address the RET pops: 64-bit code only (a near RET there is 64-bit) */
        if (c->ctx.cs != X86_CODE64 || !read64(t, m, c, c->rsp, &to))
            return false;
        break;
    case X86_BR_JMP_INDIRECT:
    case X86_BR_CALL_INDIRECT:
        if (!indirect_target(t, m, c, r, &to))
            return false;
        break;
    default:
        return false; /* far, events, not a branch (MOV CR...): stepped */
    }
    /* block_ok: PacketEn on in this context, no trigger armed: only an IP filter can say no
     * (out of context it stays off at any IP) */
    if (t->pt.cfg.filter.nranges && !swpt_admits(&t->pt, &c->ctx, to) &&
        !swpt_context_off(&t->pt, &c->ctx))
        return false;
    const bool bp_apart = in->branch == X86_BR_JCC || in->branch == X86_BR_JMP_DIRECT;
    if (next_kept(t, m, c, to, budget_left(t) - 1, bp_apart, b))
        return true;
    /* the branch alone may lead a block with no plain instruction (its target is not plain: the
     * breakpoint at the target); not one with the branch itself inside (an exit there: the
     * vCPU could have run it or not).  A Jcc or a direct JMP may lead the block that ends at
     * it, a loop's body: RFLAGS.RF tells its two times apart (lead_rf).  Only those: they
     * touch no memory, so the only exits before one completes are events and its own #GP,
     * all with RF saved set (SDM Vol. 3C 27.3.3: RF as the event's frame would hold it) */
    struct block_src src;
    if (block_from(t, m, c, to, NULL, budget_left(t) - 1, t->ip, b, &src) < 0 ||
        block_holds(b, t->ip, bp_apart)) {
        b->n = 0;
        return false;
    }
    b->lead = true;
    b->lead_ip = t->ip;
    b->lead_rf = b->end == t->ip;
    next_keep(t, c, to, bp_apart, b, &src);
    return true;
}

void swtrace_block_noted(struct swtrace *t, uint64_t cr3)
{
    if (t->next_last) {
        t->next_last->noted = true;
        t->next_last->noted_cr3 = cr3;
    }
}

int swtrace_block_settle(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                         const struct swtrace_block *b)
{
    const enum x86_code_size cs = c->ctx.cs;
    if (!t->on || c->cs_sel != t->cs_sel || !same_ctx(&c->ctx, &t->ctx))
        return SWTRACE_NOT_IN_BLOCK;
    if (b->lead && c->rip == b->lead_ip && (!b->lead_rf || c->rf))
        /* stopped before the lead: nothing ran; the lead is read again, as before any step
         * (another vCPU may have written it meanwhile) */
        return swtrace_fetch_within_budget(t, m, c) ? SWTRACE_SETTLED : SWTRACE_CLOSED;
    /* how far into the block: k instructions ran (its IPs are distinct: block_from) */
    unsigned k = b->n;
    if (c->rip != b->end) {
        uint64_t ip = b->ip;
        unsigned s = 0;
        for (k = 0; k < b->n && ip != c->rip; k++)
            ip = ip_after(b, k, &s, ip, cs);
        if (k == b->n)
            return SWTRACE_NOT_IN_BLOCK;
    }
    if (b->lead) {
        t->st.steps++;
        swpt_insn(&t->pt, t->ip, &t->insn, b->ip, &c->ctx, c->tsc);
    }
    t->st.steps += k;
    if (k && !swpt_plain(&t->pt, k, &c->ctx)) {
        /* one by one: their IPs matter (swpt_plain); a run's last instruction before the
         * next run is its direct JMP / CALL */
        uint64_t ip = b->ip;
        unsigned s = 0;
        for (unsigned i = 0; i < k; i++) {
            unsigned run = s;
            uint64_t next = ip_after(b, i, &s, ip, cs);
            const struct x86_insn in = {.len = b->len[i],
                                        .branch = s != run ? X86_BR_JMP_DIRECT : X86_BR_NONE};
            swpt_insn(&t->pt, ip, &in, next, &c->ctx, c->tsc);
            ip = next;
        }
    }
    return swtrace_fetch_within_budget(t, m, c) ? SWTRACE_SETTLED : SWTRACE_CLOSED;
}
