/* SPDX-License-Identifier: MIT */
/* The software tracer's stepping logic (swtrace.h). */
#include "trace/swtrace.h"
#include "trace/swtrace_int.h"
#include "lib/ptv_string.h"

/* read and classify the instruction at c->rip (the bytes that are about to run) */
static void fetch(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t lin = lin_of(c, c->rip);

    t->ip = c->rip;
    t->rsp = c->rsp;
    t->cs_sel = c->cs_sel;
    t->ctx = c->ctx;
    t->valid = bc_fetch_fast(&t->bc, m, &c->paging, lin, c->ctx.cs, &t->insn);
    if (!t->valid) {
        t->st.unreadable++;
        t->st.unreadable_in += swpt_admits(&t->pt, &c->ctx, c->rip);
    }
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

static bool flows_to(const struct swtrace *t, uint64_t to, bool *any)
{
    return x86_flows_to(t->ip, &t->insn, t->ctx.cs, to, any);
}

static bool insn_self_branch(bool valid, uint64_t ip, const struct x86_insn *in,
                             enum x86_code_size cs)
{
    bool any;
    return valid && in->branch != X86_BR_NONE && x86_flows_to(ip, in, cs, ip, &any);
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
           x86_flows_to(t->left.ip, in, c->ctx.cs, c->rip, &any) && !any;
}

/*
 * Control went somewhere the instruction at t->ip cannot send it, with no event frame that
 * explains it.  Where the tracer steps with the trap flag this is an event the CPU delivered
 * without a VM exit (an interrupt, a syscall's return): its handler, and what it switched to,
 * ran unstepped.  Leaving traced code for untraced code is then a departure (FUP + TIP.PGD),
 * judged only when traced code runs again (left_resumes): nothing lost, or OVF.  A step the
 * tracer cannot explain between two points outside the window costs the window nothing.
 */
static void unexplained(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    bc_flush(&t->bc); /* whatever happened unseen may have changed paging too */
    bool admitted = swpt_admits(&t->pt, &c->ctx, c->rip);
    if (!admitted && (t->left.on || t->pt.pkt_en)) {
        /* traced code left by a way not seen; with a departure pending, a stretch of untraced
         * code not seen, which is not the window's: the departure is judged by where traced
         * code runs again and by which way, never by what the others did meanwhile */
        if (!t->left.on)
            depart(t, t->ip, t->rsp, true);
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
    if (t->left.on) { /* traced code runs again, not where it left: what ran is not known */
        t->left.on = false;
        swpt_overflow(&t->pt);
        swpt_resume(&t->pt, c->rip, &c->ctx, c->tsc);
        return;
    }
    /* the instruction at t->ip may or may not have run: the gap starts there (an OVF only where
     * it touches traced code: swpt_lost) */
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

/* traced code runs again at c after a departure (t->left.on); if the tracer did not see the way
 * out, it must come back where it was to go on, else what ran is not known: an OVF */
static void left_back(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    bool ran;
    struct x86_insn in;
    if (t->left.unseen && (!left_resumes(t, m, c, &ran, &in) || ran))
        swpt_overflow(&t->pt);
    t->left.on = false;
}

static void account(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t saved = 0;

    t->st.steps++;
    enum how how = explain(t, m, c, &saved);
    if (how == BY_EVENT_BEFORE || how == BY_TRAP_AFTER || how == UNEXPLAINED) {
        /* where the frame of the stepped context returns: before the instruction, or after
         * it for a trap and for INT n (it completes, then its handler runs) */
        bool after = how == BY_TRAP_AFTER || (t->valid && t->insn.branch == X86_BR_INT);
        t->pushed.on = true;
        t->pushed.ret = how == BY_TRAP_AFTER ? saved
                        : after              ? ip_wrap(t->ip + t->insn.len, t->ctx.cs)
                                             : t->ip;
        t->pushed.rsp = t->rsp;
        t->pushed.cr3 = t->ctx.cr3;
        t->pushed.cs_sel = t->cs_sel;
    }
    if (how == UNEXPLAINED) {
        t->st.unexplained++;
        unexplained(t, m, c);
        return;
    }
    if (t->left.on && swpt_admits(&t->pt, &c->ctx, c->rip))
        left_back(t, m, c); /* traced code runs again by a step the tracer saw */
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

void swtrace_next_init(struct swtrace *t, void *mem, uint64_t bytes)
{
    uint64_t n = mem ? bc_pow2_fit(bytes, sizeof(struct swtrace_next), 1u << 16) : 0;
    t->next = t->next_last = NULL;
    t->next_mask = 0;
    if (!n || !t->bc.blk)
        return;
    memset(mem, 0, n * sizeof(struct swtrace_next));
    t->next = mem;
    t->next_mask = (uint32_t)(n - 1);
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
    /* a third of the block memory to the block table, the rest to the blocks after leads */
    uint64_t third = t->blk_bytes / 3 & ~63ull;
    bc_blocks(&t->bc, t->blk_mem, third);
    swtrace_next_init(t, t->blk_mem ? (uint8_t *)t->blk_mem + third : NULL, t->blk_bytes - third);
    swpt_start(&t->pt, cfg, ring, &c->ctx, c->rip, c->tsc);
    fetch(t, m, c);
}

bool swtrace_fetch_within_budget(struct swtrace *t, const struct gw_mem *m,
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
    return swtrace_fetch_within_budget(t, m, c);
}

void swtrace_resync(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                    bool caught)
{
    if (!t->on)
        return;
    if (c->rip == t->ip && c->cs_sel == t->cs_sel && c->rsp == t->rsp && same_ctx(&c->ctx, &t->ctx))
        return; /* where it was let go: nothing to learn (a loop back here changed nothing) */
    t->st.free_runs++;
    if (caught && swpt_admits(&t->pt, &c->ctx, c->rip)) {
        /* caught coming back, before its first instruction in the window (swtrace.h) */
        bc_flush(&t->bc); /* paging may have changed meanwhile */
        /* a way out the tracer did not see (trap-flag steps: an event's handler ran unstepped
         * before the span, and may have switched to another thread of the process that ran
         * unseen) still has to come back where it was to go on */
        if (t->left.on)
            left_back(t, m, c);
        swpt_resume(&t->pt, c->rip, &c->ctx, c->tsc);
    } else
        unexplained(t, m, c); /* judged as a step nothing explains, from outside the window */
    fetch(t, m, c);
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
