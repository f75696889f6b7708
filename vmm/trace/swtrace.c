/* SPDX-License-Identifier: MIT */
/* The software tracer's stepping logic (swtrace.h). */
#include "trace/swtrace.h"

static uint64_t ip_wrap(uint64_t ip, enum x86_code_size cs)
{
    return cs == X86_CODE64 ? ip : cs == X86_CODE32 ? (ip & 0xffffffffu) : (ip & 0xffffu);
}

/* read and classify the instruction at c->rip (the bytes that are about to run) */
static void fetch(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t lin = c->ctx.cs == X86_CODE64 ? c->rip : (c->cs_base + c->rip) & 0xffffffffu;

    t->ip = c->rip;
    t->cs_sel = c->cs_sel;
    t->ctx = c->ctx;
    t->valid = bc_fetch(&t->bc, m, &c->paging, lin, c->ctx.cs, &t->insn);
    if (!t->valid)
        t->st.unreadable++;
}

/*
 * The frame an event delivery pushed at the new stack, if there is one: saved IP
 * (and CS of the interrupted code equal to cs, RFLAGS bit 1 set), with or without
 * an error code (SDM Vol. 3A 6.12.1, 6.14.2).  Only for protected/long-mode handlers.
 */
static bool event_frame(const struct gw_mem *m, const struct swtrace_cpu *c, uint16_t cs,
                        uint64_t *saved)
{
    if (c->ctx.cs == X86_CODE16)
        return false;
    unsigned w = c->ctx.cs == X86_CODE64 ? 8 : 4;
    uint8_t raw[32];
    uint64_t f[4];
    if (gw_read(m, &c->paging, c->ctx.cs == X86_CODE64 ? c->rsp : c->rsp & 0xffffffffu, raw, 4 * w,
                NULL))
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

/* may the classified instruction at t->ip send control to `to`? *any: to every IP */
static bool flows_to(const struct swtrace *t, uint64_t to, bool *any)
{
    const struct x86_insn *in = &t->insn;
    uint64_t fall = ip_wrap(t->ip + in->len, t->ctx.cs);
    *any = false;
    switch (in->branch) {
    case X86_BR_NONE:
    case X86_BR_VMX: /* the VMM emulated it: execution goes on after it */
        return to == fall;
    case X86_BR_JCC:
        return to == fall || to == x86_direct_target(t->ip, in, t->ctx.cs);
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
        return to == x86_direct_target(t->ip, in, t->ctx.cs);
    case X86_BR_UD:
        return false; /* always #UD: an event */
    default:          /* indirect, near RET, far transfers */
        *any = true;
        return true;
    }
}

static bool self_branch(const struct swtrace *t)
{
    bool any;
    return t->valid && t->insn.branch != X86_BR_NONE && flows_to(t, t->ip, &any);
}

static void account(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c)
{
    uint64_t saved;
    bool any;

    t->st.steps++;
    if (t->valid && flows_to(t, c->rip, &any) && !any) {
        swpt_insn(&t->pt, t->ip, &t->insn, c->rip, &c->ctx, c->tsc);
        return;
    }
    bool frame = event_frame(m, c, t->cs_sel, &saved);
    if (frame && saved == t->ip) { /* fault or interrupt before the instruction */
        t->st.events++;
        swpt_event(&t->pt, t->ip, c->rip, &c->ctx, c->tsc);
        return;
    }
    if (t->valid && flows_to(t, c->rip, &any)) {
        swpt_insn(&t->pt, t->ip, &t->insn, c->rip, &c->ctx, c->tsc);
        return;
    }
    if (frame && t->valid && flows_to(t, saved, &any)) { /* it completed, then a trap */
        t->st.events++;
        swpt_insn(&t->pt, t->ip, &t->insn, saved, &t->ctx, c->tsc);
        swpt_event(&t->pt, saved, c->rip, &c->ctx, c->tsc);
        return;
    }
    t->st.lost++;     /* the instruction at t->ip may or may not have run: the gap starts there */
    bc_flush(&t->bc); /* whatever happened unseen may have changed paging too */
    swpt_gap(&t->pt, t->ip, c->rip, &c->ctx, c->tsc);
}

void swtrace_start(struct swtrace *t, const struct swpt_cfg *cfg, struct swpt_ring *ring,
                   const struct gw_mem *m, const struct swtrace_cpu *c, uint64_t budget)
{
    t->st = (struct swtrace_stats){0};
    t->budget = budget;
    t->budget_used = false;
    t->on = true;
    bc_init(&t->bc, !t->nocache, t->cache_mem, t->cache_bytes);
    swpt_start(&t->pt, cfg, ring, &c->ctx, c->rip, c->tsc);
    fetch(t, m, c);
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
    account(t, m, c);
    if (t->valid)
        bc_retired(&t->bc, &t->insn); /* MOV CR3, INVLPG...: translations are stale */
    fetch(t, m, c);
    if (t->budget && t->st.steps >= t->budget) {
        swtrace_stop(t);
        t->budget_used = true;
        return false;
    }
    return true;
}

void swtrace_cache_mem(struct swtrace *t, void *mem, uint64_t bytes)
{
    t->cache_mem = mem;
    t->cache_bytes = mem ? bytes : 0;
}

void swtrace_stop(struct swtrace *t)
{
    if (!t->on)
        return;
    swpt_stop(&t->pt, t->ip);
    t->on = false;
}
