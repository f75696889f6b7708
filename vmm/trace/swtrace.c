/* SPDX-License-Identifier: MIT */
/* The software tracer's stepping logic (swtrace.h). */
#include "trace/swtrace.h"

static uint64_t ip_wrap(uint64_t ip, enum x86_code_size cs)
{
    return cs == X86_CODE64 ? ip : cs == X86_CODE32 ? (ip & 0xffffffffu) : (ip & 0xffffu);
}

/* the linear address of ip in c's code segment */
static uint64_t lin_of(const struct swtrace_cpu *c, uint64_t ip)
{
    return c->ctx.cs == X86_CODE64 ? ip : (c->cs_base + ip) & 0xffffffffu;
}

/* read and classify the instruction at c->rip (the bytes that are about to run) */
static void fetch(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t lin = lin_of(c, c->rip);

    t->ip = c->rip;
    t->rsp = c->rsp;
    t->cs_sel = c->cs_sel;
    t->ctx = c->ctx;
    t->valid = bc_fetch_hot(&t->bc, m, &c->paging, lin, c->ctx.cs, &t->insn) ||
               bc_fetch(&t->bc, m, &c->paging, lin, c->ctx.cs, &t->insn);
    if (!t->valid)
        t->st.unreadable++;
}

/*
 * The frame an event delivery pushed at the new stack, if there is one: saved IP
 * (and CS of the interrupted code equal to cs, RFLAGS bit 1 set), with or without
 * an error code (SDM Vol. 3A 6.12.1, 6.14.2).  Only for protected/long-mode handlers.
 */
static bool event_frame(struct bcache *bc, const struct gw_mem *m, const struct swtrace_cpu *c,
                        uint16_t cs, uint64_t *saved)
{
    if (c->ctx.cs == X86_CODE16)
        return false;
    unsigned w = c->ctx.cs == X86_CODE64 ? 8 : 4;
    uint8_t raw[32];
    uint64_t f[4];
    if (bc_read(bc, m, &c->paging, c->ctx.cs == X86_CODE64 ? c->rsp : c->rsp & 0xffffffffu, raw,
                4 * w))
        return false;
    for (unsigned i = 0; i < 4; i++) {
        f[i] = 0;
        for (unsigned b = 0; b < w; b++)
            f[i] |= (uint64_t)raw[i * w + b] << (8 * b);
    }
    for (unsigned k = 0; k < 2; k++) /* k = 1: an error code below the frame */
        if ((f[k + 1] & 0xffff) == cs && (f[k + 2] & 2)) {
            *saved = f[k];
            return true;
        }
    return false;
}

/* may the classified instruction `in` at ip send control to `to`? *any: to every IP */
static bool insn_flows_to(uint64_t ip, const struct x86_insn *in, enum x86_code_size cs,
                          uint64_t to, bool *any)
{
    uint64_t fall = ip_wrap(ip + in->len, cs);
    *any = false;
    switch (in->branch) {
    case X86_BR_NONE:
    case X86_BR_VMX: /* the VMM emulated it: execution goes on after it */
        return to == fall;
    case X86_BR_JCC:
        return to == fall || to == x86_direct_target(ip, in, cs);
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
        return to == x86_direct_target(ip, in, cs);
    case X86_BR_UD:
        return false; /* always #UD: an event */
    default:          /* indirect, near RET, far transfers */
        *any = true;
        return true;
    }
}

static bool flows_to(const struct swtrace *t, uint64_t to, bool *any)
{
    return insn_flows_to(t->ip, &t->insn, t->ctx.cs, to, any);
}

static bool insn_self_branch(bool valid, uint64_t ip, const struct x86_insn *in,
                             enum x86_code_size cs)
{
    bool any;
    return valid && in->branch != X86_BR_NONE && insn_flows_to(ip, in, cs, ip, &any);
}

static bool self_branch(const struct swtrace *t)
{
    return insn_self_branch(t->valid, t->ip, &t->insn, t->ctx.cs);
}

#define LEFT_RSP_SLACK 0x10000ull /* how far one instruction may move RSP (SUB RSP, imm) */

/* can the instruction change CR3, CPL or the code size (else a step to another context is
 * not its doing: with two processes running the same code, an IP alone explains nothing) */
static bool may_switch(const struct x86_insn *in)
{
    if (in->flags & (X86_F_MOV_CR3 | X86_F_MOV_CR))
        return true;
    switch (in->branch) {
    case X86_BR_NONE:
    case X86_BR_JCC:
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
    case X86_BR_JMP_INDIRECT:
    case X86_BR_CALL_INDIRECT:
    case X86_BR_RET:
        return false;
    default:
        return true;
    }
}

static bool same_ctx(const struct swpt_ctx *a, const struct swpt_ctx *b)
{
    return a->cr3 == b->cr3 && a->cpl == b->cpl && a->cs == b->cs;
}

/* traced code is left (PacketEn 1 -> 0): it should go on at `resume` on stack `rsp`; unseen:
 * the tracer did not see how it left */
static void depart(struct swtrace *t, uint64_t resume, uint64_t rsp, bool unseen)
{
    t->left.on = true;
    t->left.ip = resume;
    t->left.rsp = rsp;
    t->left.cs_sel = t->cs_sel;
    t->left.ctx = t->ctx;
    t->left.unseen = unseen;
    t->st.departures++;
}

/* the traced code that was left comes back at c: where it was to go on (its instruction had
 * not run) or where that instruction goes (it ran, once: where the tracer steps with the trap
 * flag, the first instruction after the IRET back runs before the single-step #DB), on the
 * same stack (another thread of the process runs on another) */
static bool left_resumes(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                         bool *ran, struct x86_insn *in)
{
    bool any;
    if (c->cs_sel != t->left.cs_sel || !same_ctx(&c->ctx, &t->left.ctx))
        return false;
    uint64_t drsp = c->rsp - t->left.rsp;
    *ran = c->rip != t->left.ip;
    if (!*ran)
        return drsp == 0;
    if (drsp + LEFT_RSP_SLACK > 2 * LEFT_RSP_SLACK)
        return false;
    if (!bc_fetch(&t->bc, m, &c->paging, lin_of(c, t->left.ip), c->ctx.cs, in))
        return false;
    /* a branch to itself could have run any number of times */
    return !insn_self_branch(true, t->left.ip, in, c->ctx.cs) &&
           insn_flows_to(t->left.ip, in, c->ctx.cs, c->rip, &any) && !any;
}

/*
 * Control went somewhere the instruction at t->ip cannot send it, with no event frame that
 * explains it.  Where the tracer steps with the trap flag this is an event the CPU delivered
 * without a VM exit (an interrupt, a syscall's return): its handler, and what it switched to,
 * ran unstepped.  Leaving traced code for untraced code is then a departure (FUP + TIP.PGD),
 * judged only when traced code runs again (left_resumes): nothing lost, or OVF.
 */
static void unexplained(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    bc_flush(&t->bc); /* whatever happened unseen may have changed paging too */
    bool admitted = swpt_admits(&t->pt, &c->ctx, c->rip);
    if (!admitted && (t->left.on || t->pt.pkt_en)) {
        if (!t->left.on)
            depart(t, t->ip, t->rsp, true);
        t->left.unseen = true;
        swpt_leave(&t->pt, t->left.ip, &c->ctx);
        return;
    }
    bool ran;
    struct x86_insn in;
    if (t->left.on && left_resumes(t, m, c, &ran, &in)) {
        t->left.on = false;
        swpt_resume(&t->pt, t->left.ip, &c->ctx, c->tsc);
        if (ran)
            swpt_insn(&t->pt, t->left.ip, &in, c->rip, &c->ctx, c->tsc);
        return;
    }
    t->st.lost++; /* the instruction at t->ip may or may not have run: the gap starts there */
    if (t->left.on) {
        t->left.on = false;
        swpt_overflow(&t->pt);
        swpt_resume(&t->pt, c->rip, &c->ctx, c->tsc);
        return;
    }
    swpt_gap(&t->pt, t->ip, c->rip, &c->ctx, c->tsc);
}

/* how the step from t->ip to c is explained */
enum how { BY_FLOW, BY_EVENT_BEFORE, BY_FLOW_ANY, BY_TRAP_AFTER, UNEXPLAINED };

static enum how explain(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                        uint64_t *saved)
{
    bool any;
    bool ctx_ok = t->valid && (same_ctx(&c->ctx, &t->ctx) || may_switch(&t->insn));
    if (ctx_ok && flows_to(t, c->rip, &any) && !any)
        return BY_FLOW;
    bool frame = event_frame(&t->bc, m, c, t->cs_sel, saved);
    if (frame && *saved == t->ip) /* fault or interrupt before the instruction */
        return BY_EVENT_BEFORE;
    if (ctx_ok && flows_to(t, c->rip, &any))
        return BY_FLOW_ANY;
    if (frame && t->valid && flows_to(t, *saved, &any)) /* it completed, then a trap */
        return BY_TRAP_AFTER;
    return UNEXPLAINED;
}

static void account(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t saved = 0;

    t->st.steps++;
    enum how how = explain(t, m, c, &saved);
    if (how == UNEXPLAINED) {
        unexplained(t, m, c);
        return;
    }
    if (t->left.on && swpt_admits(&t->pt, &c->ctx, c->rip)) {
        /* traced code runs again by a step the tracer saw; if it lost sight of the way in
         * between, it must come back where it was to go on, else what ran is not known */
        bool ran;
        struct x86_insn in;
        if (t->left.unseen && (!left_resumes(t, m, c, &ran, &in) || ran)) {
            t->st.lost++;
            swpt_overflow(&t->pt);
        }
        t->left.on = false;
    }
    bool was = t->pt.pkt_en;
    uint64_t resume = t->ip + t->insn.len; /* where a system call or INT n returns */
    switch (how) {
    case BY_FLOW:
    case BY_FLOW_ANY:
        swpt_insn(&t->pt, t->ip, &t->insn, c->rip, &c->ctx, c->tsc);
        break;
    case BY_EVENT_BEFORE:
        t->st.events++;
        resume = t->ip;
        swpt_event(&t->pt, t->ip, c->rip, &c->ctx, c->tsc);
        break;
    default: /* BY_TRAP_AFTER */
        t->st.events++;
        swpt_insn(&t->pt, t->ip, &t->insn, saved, &t->ctx, c->tsc);
        swpt_event(&t->pt, saved, c->rip, &c->ctx, c->tsc);
        return; /* the instruction ran: where its stack is now is not known here */
    }
    /* leaving traced code for a system call, INT n or an event: remember where it goes on */
    uint8_t br = t->insn.branch;
    if (was && !t->pt.pkt_en && !t->left.on &&
        (how == BY_EVENT_BEFORE || br == X86_BR_SYSCALL || br == X86_BR_SYSENTER ||
         br == X86_BR_INT))
        depart(t, ip_wrap(resume, t->ctx.cs), t->rsp, false);
}

/* the common step, decided without explain(): the instruction at t->ip, a plain one, a Jcc
 * or a direct JMP / CALL that changes no translation, went where it goes, in the same context,
 * with no departure pending.  account() would take it BY_FLOW and do only what this does. */
static bool plain_step(struct swtrace *t, const struct swtrace_cpu *c)
{
    const struct x86_insn *in = &t->insn;
    if (!t->valid || t->left.on || in->branch > X86_BR_CALL_DIRECT ||
        (in->flags & (X86_F_MOV_CR | X86_F_MOV_CR3 | X86_F_INVLPG)) || !same_ctx(&c->ctx, &t->ctx))
        return false;
    bool to_fall = c->rip == ip_wrap(t->ip + in->len, t->ctx.cs);
    if (in->branch == X86_BR_NONE ? !to_fall
                                  : !(c->rip == x86_direct_target(t->ip, in, t->ctx.cs) ||
                                      (in->branch == X86_BR_JCC && to_fall)))
        return false;
    t->st.steps++;
    swpt_insn(&t->pt, t->ip, in, c->rip, &c->ctx, c->tsc);
    return true;
}

void swtrace_start(struct swtrace *t, const struct swpt_cfg *cfg, struct swpt_ring *ring,
                   const struct gw_mem *m, const struct swtrace_cpu *c, uint64_t budget)
{
    t->st = (struct swtrace_stats){0};
    t->left.on = false;
    t->budget = budget;
    t->budget_used = false;
    t->on = true;
    bc_init(&t->bc, !t->nocache, t->cache_mem, t->cache_bytes);
    bc_blocks(&t->bc, t->blk_mem, t->blk_bytes);
    swpt_start(&t->pt, cfg, ring, &c->ctx, c->rip, c->tsc);
    fetch(t, m, c);
}

/* the tracer is at c after the steps it counted: read the instruction there, or close the
 * window if the budget is spent (false) */
static bool fetch_within_budget(struct swtrace *t, const struct gw_mem *m,
                                const struct swtrace_cpu *c)
{
    fetch(t, m, c);
    if (t->budget && t->st.steps >= t->budget) {
        swtrace_stop(t);
        t->budget_used = true;
        return false;
    }
    return true;
}

bool swtrace_observe(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                     bool mtf)
{
    if (!t->on)
        return false;
    if (c->rip == t->ip && c->cs_sel == t->cs_sel) {
        if (!mtf || !t->valid)
            return true; /* nothing ran: an exit the VMM resumed without emulating */
        if (t->insn.flags & X86_F_REP) {
            t->st.rep_iters++; /* one iteration of a REP string instruction */
            return true;
        }
        if (!self_branch(t))
            return true;
    }
    if (!plain_step(t, c)) {
        account(t, m, c);
        if (t->valid)
            bc_retired(&t->bc, &t->insn); /* MOV CR3, INVLPG...: translations are stale */
    }
    return fetch_within_budget(t, m, c);
}

void swtrace_cache_mem(struct swtrace *t, void *mem, uint64_t bytes)
{
    t->cache_mem = mem;
    t->cache_bytes = mem ? bytes : 0;
}

void swtrace_block_mem(struct swtrace *t, void *mem, uint64_t bytes)
{
    t->blk_mem = mem;
    t->blk_bytes = mem ? bytes : 0;
}

void swtrace_stop(struct swtrace *t)
{
    if (!t->on)
        return;
    swpt_stop(&t->pt, t->ip);
    t->on = false;
}

/* ---- block stepping (swtrace.h) ---- */

static bool block_plain(const struct x86_insn *in)
{
    return in->branch == X86_BR_NONE &&
           !(in->flags & (X86_F_MOV_CR | X86_F_MOV_CR3 | X86_F_INVLPG | X86_F_HLT | X86_F_NOBLOCK));
}

/* block b from ip as the block table keeps it (e), cut at max: false where its IPs would wrap
 * (then it is decoded) */
static bool block_cached(const struct swtrace_cpu *c, const struct bc_blk_entry *e, uint64_t ip,
                         uint64_t lin0, uint64_t max, struct swtrace_block *b)
{
    uint64_t bytes = 0;
    unsigned n = 0;
    while (n < e->n && n < max)
        bytes += (b->len[n] = e->len[n]), n++;
    /* the same linear bytes at every IP of it: no wrap of the IP or of the linear address */
    if (ip_wrap(ip + bytes, c->ctx.cs) != ip + bytes || lin_of(c, ip + bytes) != lin0 + bytes)
        return false;
    b->ip = ip;
    b->n = n;
    b->end = ip + bytes;
    b->end_lin = lin0 + bytes;
    return true;
}

/* the plain instructions from ip (decoded: *first) as far as max allows, decoded one by one;
 * the block is kept in the block table (bcache.h) */
static unsigned block_decode(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                             uint64_t ip, const struct x86_insn *first, uint64_t max,
                             struct swtrace_block *b)
{
    uint64_t lin0 = lin_of(c, ip);
    struct x86_insn in[BC_BLK_INSNS + 1];
    struct x86_insn cur = *first;
    bool ended = false; /* by an instruction that is not plain (decoded: cur) */
    unsigned n = 0;
    b->ip = ip;
    while (n < max && n < SWTRACE_BLOCK_MAX) {
        if (!block_plain(&cur)) {
            ended = true;
            break;
        }
        if (n < BC_BLK_INSNS)
            in[n] = cur;
        b->len[n++] = cur.len;
        ip = ip_wrap(ip + cur.len, c->ctx.cs);
        uint64_t lin = lin_of(c, ip);
        if (!bc_fetch_hot(&t->bc, m, &c->paging, lin, c->ctx.cs, &cur) &&
            !bc_fetch(&t->bc, m, &c->paging, lin, c->ctx.cs, &cur))
            break; /* unreadable: the block ends before it, the step reads it again */
    }
    b->n = n;
    b->end = ip;
    b->end_lin = lin_of(c, ip);
    if (ended && n <= BC_BLK_INSNS) {
        uint64_t bytes = 0;
        for (unsigned i = 0; i < n; i++)
            bytes += b->len[i];
        if (b->ip + bytes == b->end && lin0 + bytes == b->end_lin) {
            in[n] = cur;
            bc_blk_put(&t->bc, m, &c->paging, lin0, c->ctx.cs, in, n);
        }
    }
    return n;
}

/* the block at ip as far as max allows: from the block table where the code page read in place
 * (the last fetch's) has it, else decoded from *first, or from a fetch at ip when first is NULL
 * (-1: not readable; 0: the instruction at ip is not plain, b ends at ip) */
static int block_from(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                      uint64_t ip, const struct x86_insn *first, uint64_t max,
                      struct swtrace_block *b)
{
    uint64_t lin = lin_of(c, ip);
    const struct bc_blk_entry *e = bc_blk_get(&t->bc, m, &c->paging, lin, c->ctx.cs);
    struct x86_insn in;
    if (!e && !first) { /* read at ip: its page is now the one in place, the table is asked again */
        if (!bc_fetch_hot(&t->bc, m, &c->paging, lin, c->ctx.cs, &in) &&
            !bc_fetch(&t->bc, m, &c->paging, lin, c->ctx.cs, &in))
            return -1;
        first = &in;
        e = bc_blk_get(&t->bc, m, &c->paging, lin, c->ctx.cs);
    }
    if (e && block_cached(c, e, ip, lin, max, b))
        return (int)b->n;
    if (!first) {
        if (!bc_fetch_hot(&t->bc, m, &c->paging, lin, c->ctx.cs, &in) &&
            !bc_fetch(&t->bc, m, &c->paging, lin, c->ctx.cs, &in))
            return -1;
        first = &in;
    }
    return (int)block_decode(t, m, c, ip, first, max, b);
}

/* instructions the window may still trace (the budget) */
static uint64_t budget_left(const struct swtrace *t)
{
    return t->budget ? t->budget - t->st.steps : UINT64_MAX;
}

/* blocks run only in traced code with nothing to judge: no departure out, no trigger armed */
static bool block_ok(const struct swtrace *t, const struct swtrace_cpu *c)
{
    return t->on && t->valid && t->pt.pkt_en && !t->pt.armed && !t->left.on && c->rip == t->ip &&
           c->cs_sel == t->cs_sel && same_ctx(&c->ctx, &t->ctx);
}

unsigned swtrace_block_plan(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                            struct swtrace_block *b)
{
    b->lead = false;
    b->n = 0;
    if (!block_ok(t, c))
        return 0;
    int n = block_from(t, m, c, t->ip, &t->insn, budget_left(t), b);
    return n > 0 ? (unsigned)n : (b->n = 0);
}

bool swtrace_block_next(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                        const struct swtrace_regs *r, struct swtrace_block *b)
{
    const struct x86_insn *in = &t->insn;
    uint64_t to;
    b->lead = false;
    b->n = 0;
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
    case X86_BR_RET: {
        /* the return address the RET pops: 64-bit code only (a near RET there is 64-bit) */
        uint8_t raw[8];
        if (c->ctx.cs != X86_CODE64 || bc_read(&t->bc, m, &c->paging, c->rsp, raw, 8))
            return false;
        to = 0;
        for (unsigned k = 0; k < 8; k++)
            to |= (uint64_t)raw[k] << (8 * k);
        break;
    }
    default:
        return false; /* indirect, far, events, not a branch (MOV CR...): stepped */
    }
    if (!swpt_admits(&t->pt, &c->ctx, to))
        return false;
    /* the branch alone leads a block with no plain instruction when its target is not plain
     * (the breakpoint at the target); not one that ends at this branch again: stopped there,
     * the vCPU could have run it or not */
    if (block_from(t, m, c, to, NULL, budget_left(t) - 1, b) < 0 || b->end == t->ip) {
        b->n = 0;
        return false;
    }
    b->lead = true;
    b->lead_ip = t->ip;
    return true;
}

int swtrace_block_settle(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                         const struct swtrace_block *b)
{
    if (!t->on || c->cs_sel != t->cs_sel || !same_ctx(&c->ctx, &t->ctx))
        return SWTRACE_NOT_IN_BLOCK;
    if (b->lead && c->rip == b->lead_ip)
        return SWTRACE_SETTLED; /* stopped before the lead: nothing ran */
    /* how far into the block: k instructions ran */
    uint64_t ip = b->ip;
    unsigned k = 0;
    while (ip != c->rip && k < b->n)
        ip = ip_wrap(ip + b->len[k++], c->ctx.cs);
    if (ip != c->rip)
        return SWTRACE_NOT_IN_BLOCK;
    if (b->lead) {
        t->st.steps++;
        swpt_insn(&t->pt, t->ip, &t->insn, b->ip, &c->ctx, c->tsc);
    }
    t->st.steps += k;
    ip = b->ip;
    if (k && !swpt_plain(&t->pt, k, &c->ctx))
        for (unsigned i = 0; i < k; i++) { /* one by one: their IPs matter (swpt_plain) */
            const struct x86_insn in = {.len = b->len[i], .branch = X86_BR_NONE};
            uint64_t next = ip_wrap(ip + in.len, c->ctx.cs);
            swpt_insn(&t->pt, ip, &in, next, &c->ctx, c->tsc);
            ip = next;
        }
    return fetch_within_budget(t, m, c) ? SWTRACE_SETTLED : SWTRACE_CLOSED;
}
