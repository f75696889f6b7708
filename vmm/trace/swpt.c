/* SPDX-License-Identifier: MIT */
/*
 * The software PT packet generator (interface and settings in swpt.h).  Packet bytes come
 * from the project's encoder (vmm/pt/pt_pkt.c, SDM Vol. 3C 33.4.2); this file decides which
 * packets a CPU with those RTIT_CTL settings writes for each instruction or event, following
 * SDM Vol. 3C 33.2 (filtering, 33.2.5) and 33.4.2 (packet generation rules), and checks that
 * libipt's decoders accept the result (tests/unit/trace/test_swpt*.c).
 *
 * Rules, with their sources:
 *  - PacketEn = ContextEn && FilterEn (33.2.5): ContextEn from CPL (OS / User) and CR3Filter,
 *    FilterEn from the ADDRn ranges.  TraceEn and TriggerEn are 1 between start and stop.
 *  - TNT bits (Jcc taken / not taken) are written when 6 (short TNT) or 47 (long TNT) are
 *    gathered, and before any other packet so the decoder meets them in order.
 *  - Near indirect JMP/CALL, near RET (DisRETC = 1): TIP(target).  Direct JMP/CALL: nothing.
 *  - Far transfers (far JMP/CALL/RET, IRET, SYSCALL/SYSRET, SYSENTER/SYSEXIT): [PIP]
 *    [MODE.Exec] TIP(target); libipt binds a PIP to the next far branch or MOV CR3
 *    (test pip-far_call) and a MODE.Exec to the next TIP (mode_exec-tip).
 *  - INT n / INT3 / INTO / INT1, and asynchronous events: FUP(source) [PIP] [MODE.Exec]
 *    TIP(target) (libipt int-iret: software interrupts get FUP(CLIP) + TIP).
 *  - MOV CR3: PIP(new CR3).  Any PIP only with RTIT_CTL.OS = 1 and ContextEn (33.4.2.7:
 *    "TriggerEn && ContextEn && OS"; none at all when OS = 0).
 *  - MODE.Exec only when CS.L / CS.D differ from what the decoder was last told (the last
 *    MODE.Exec, in PSB+ or before a TIP / TIP.PGE).
 *  - Leaving the filter: TIP.PGD instead of the TIP (and without the Jcc's TNT bit).  Its IP
 *    is the branch target when ContextEn stays 1 (an ADDRn range was left), suppressed when
 *    ContextEn goes to 0 (CPL or CR3 left the traced context: the target lies in a context
 *    the trace must not show; libipt binds an IP-less TIP.PGD to the next far branch or
 *    CR3 / CPL change, test direct_call-tip_pgd_noip-syscall).
 *  - Entering the filter: [PIP] [MODE.Exec] TIP.PGE(target), no FUP, no TNT bit.
 *  - PSB+ (33.4.2.16 / 33.3.7): PSB [TSC] MODE.Exec [PIP] [FUP(IP) if PacketEn] PSBEND at
 *    start (then TIP.PGE) and at the first instruction boundary after psb_period bytes.
 *    PSB resets the last IP used for IP compression.
 *  - OVF (33.4.2.15): after it the first IP packet carries a full IP; FUP(resume) when
 *    tracing goes on inside the filter, TIP.PGE(resume) when it comes back from outside.
 *    Written only where the loss touches traced code (PacketEn 1 at either end): hardware
 *    writes no packet while PacketEn = 0, and the window's stream is about traced code alone.
 */
#include "trace/swpt.h"

#include "pt/pt_pkt.h"

#define PKT_MAX   16 /* the longest packet written (PSB) */
#define TNT_SHORT 6
#define TNT_LONG  47
#define PSB_MIN   256u
#define PSB_MAX   (1u << 20)

int swpt_cfg_check(const struct swpt_cfg *cfg, const char **why)
{
    const char *w = NULL;

    if (!cfg)
        w = "no configuration";
    else if (!cfg->filter.user && !cfg->filter.kernel)
        w = "filter traces neither user (CPL > 0) nor kernel (CPL 0)";
    else if (cfg->filter.nranges > SWPT_MAX_RANGES)
        w = "more than 4 IP ranges";
    else if (cfg->psb_period < PSB_MIN || cfg->psb_period > PSB_MAX ||
             (cfg->psb_period & (cfg->psb_period - 1)))
        w = "psb_period is not a power of two in 256 .. 1 MiB";
    if (!w && (cfg->filter.cr3_ignore & ~SWPT_CR3_IGNORABLE))
        w = "the CR3 match may ignore only bits 12:0 (PCID, the PTI half)";
    for (unsigned i = 0; !w && i < cfg->filter.nranges; i++)
        if (cfg->filter.range[i].lo > cfg->filter.range[i].hi)
            w = "an IP range has lo > hi";
    if (why)
        *why = w ? w : "ok";
    return w ? SWPT_EINVAL : 0;
}

/* ---- filter (SDM 33.2.5) ---- */

/* CPL and CR3 admit the context (ContextEn before the start trigger) */
static bool context_match(const struct swpt *t, const struct swpt_ctx *c)
{
    const struct swpt_filter *f = &t->cfg.filter;

    if (!(c->cpl == 0 ? f->kernel : f->user))
        return false;
    return !f->cr3_match || !((c->cr3 ^ f->cr3) & ~f->cr3_ignore);
}

/* ContextEn: nothing is in context while a start trigger waits */
static bool context_en(const struct swpt *t, const struct swpt_ctx *c)
{
    return !t->armed && context_match(t, c);
}

static bool filter_en(const struct swpt *t, uint64_t ip)
{
    const struct swpt_filter *f = &t->cfg.filter;

    if (f->nranges == 0)
        return true;
    for (unsigned i = 0; i < f->nranges; i++)
        if (ip >= f->range[i].lo && ip <= f->range[i].hi)
            return true;
    return false;
}

static inline __attribute__((always_inline)) bool packet_en(const struct swpt *t,
                                                            const struct swpt_ctx *c, uint64_t ip)
{
    if (t->armed) /* true only where the trigger fires */
        return ip == t->cfg.filter.start_ip && context_match(t, c) && filter_en(t, ip);
    return context_en(t, c) && filter_en(t, ip);
}

/* ---- output: whole packets into the ring ---- */

static void put(struct swpt *t, const uint8_t *p, int n)
{
    struct swpt_ring *r = t->ring;

    if (n <= 0)
        return;
    t->packets++;
    t->since_psb += (uint64_t)n;
    if (r->stop_on_full && (r->stopped || r->head + (uint64_t)n > r->size)) {
        r->stopped = true;
        r->dropped += (uint64_t)n;
        return;
    }
    uint64_t pos = r->head % r->size;
    for (int i = 0; i < n; i++) {
        r->buf[pos] = p[i];
        if (++pos == r->size)
            pos = 0;
    }
    r->head += (uint64_t)n;
}

/* an encoder over one packet's scratch bytes, carrying the IP compression state */
struct pkt {
    uint8_t b[PKT_MAX];
    struct pt_pkt_enc e;
};

static struct pt_pkt_enc *open_pkt(const struct swpt *t, struct pkt *p)
{
    pt_pkt_enc_init(&p->e, p->b, sizeof(p->b));
    p->e.last_ip = t->last_ip;
    p->e.have_ip = t->last_ip_valid;
    return &p->e;
}

static void close_pkt(struct swpt *t, struct pkt *p, int n)
{
    t->last_ip = p->e.last_ip;
    t->last_ip_valid = p->e.have_ip;
    put(t, p->b, n);
}

static void flush_tnt(struct swpt *t)
{
    struct pkt p;

    if (t->tnt_n == 0)
        return;
    struct pt_pkt_enc *e = open_pkt(t, &p);
    int n = t->tnt_n <= TNT_SHORT ? pt_pkt_tnt_8(e, t->tnt_bits, t->tnt_n)
                                  : pt_pkt_tnt_64(e, t->tnt_bits, t->tnt_n);
    close_pkt(t, &p, n);
    t->tnt_bits = 0;
    t->tnt_n = 0;
}

static void tnt(struct swpt *t, bool taken)
{
    t->tnt_bits = (t->tnt_bits << 1) | (taken ? 1 : 0);
    if (++t->tnt_n == (t->cfg.long_tnt ? TNT_LONG : TNT_SHORT))
        flush_tnt(t);
}

/* TIP / TIP.PGE / TIP.PGD / FUP; `ip_ok` false: IPBytes 0 (suppressed) */
static void ip_pkt(struct swpt *t, enum pt_pkt_ip_kind kind, uint64_t ip, bool ip_ok)
{
    struct pkt p;

    flush_tnt(t);
    struct pt_pkt_enc *e = open_pkt(t, &p);
    close_pkt(t, &p, pt_pkt_ip(e, kind, ip_ok ? PT_PKT_IPC_AUTO : PT_PKT_IPC_SUPPRESSED, ip));
}

static void pip(struct swpt *t, uint64_t cr3)
{
    struct pkt p;

    flush_tnt(t);
    struct pt_pkt_enc *e = open_pkt(t, &p);
    close_pkt(t, &p, pt_pkt_pip(e, cr3, t->cfg.pip_nr));
}

static void mode_exec(struct swpt *t, enum x86_code_size cs)
{
    static const enum pt_pkt_exec exec[] = {[X86_CODE16] = PT_PKT_EXEC_16,
                                            [X86_CODE32] = PT_PKT_EXEC_32,
                                            [X86_CODE64] = PT_PKT_EXEC_64};
    struct pkt p;

    flush_tnt(t);
    struct pt_pkt_enc *e = open_pkt(t, &p);
    close_pkt(t, &p, pt_pkt_mode_exec(e, exec[cs <= X86_CODE64 ? cs : X86_CODE64], false));
    t->mode_sent = (uint8_t)cs;
}

/* MODE.Exec if the code size differs from what the decoder knows */
static void mode_if_changed(struct swpt *t, enum x86_code_size cs)
{
    if (t->mode_sent != (uint8_t)cs)
        mode_exec(t, cs);
}

/* PIP allowed: OS = 1 and ContextEn (SDM 33.4.2.7) */
static bool pip_ok(const struct swpt *t, const struct swpt_ctx *c)
{
    return t->cfg.filter.kernel && context_en(t, c);
}

/* PSB+ at the boundary before `ip` in t->ctx; FUP(ip) when PacketEn */
static void psb_plus(struct swpt *t, uint64_t ip, uint64_t tsc)
{
    struct pkt p;

    flush_tnt(t);
    t->since_psb = 0;
    t->psbs++;
    close_pkt(t, &p, pt_pkt_psb(open_pkt(t, &p)));
    if (t->cfg.tsc)
        close_pkt(t, &p, pt_pkt_tsc(open_pkt(t, &p), tsc));
    mode_exec(t, t->ctx.cs);
    if (pip_ok(t, &t->ctx))
        pip(t, t->ctx.cr3);
    if (t->pkt_en)
        ip_pkt(t, PT_PKT_FUP, ip, true);
    close_pkt(t, &p, pt_pkt_psbend(open_pkt(t, &p)));
}

static void psb_if_due(struct swpt *t, uint64_t ip, uint64_t tsc)
{
    if (t->since_psb >= t->cfg.psb_period)
        psb_plus(t, ip, tsc);
}

/*
 * A transfer from the current context to `to` in *after.  `fup` names the source of an
 * event (FUP), `tip` says the transfer is reported by an IP packet (indirect, far, event),
 * `jcc` a conditional branch (a TNT bit while staying inside).
 */
struct xfer {
    uint64_t to;
    const struct swpt_ctx *after;
    bool fup;
    uint64_t from;
    bool tip;
    bool jcc, taken;
    uint64_t tsc;
};

/* the start trigger fires before `ip` in t->ctx: the trace starts there as at swpt_start */
static void fire(struct swpt *t, uint64_t ip, uint64_t tsc)
{
    t->armed = false;
    psb_plus(t, ip, tsc); /* PacketEn still 0: no FUP */
    ip_pkt(t, PT_PKT_TIP_PGE, ip, true);
    t->pkt_en = true;
}

static void transfer(struct swpt *t, const struct xfer *x)
{
    bool was = t->pkt_en;
    bool now = packet_en(t, x->after, x->to);

    if (t->armed) { /* nothing traced yet: the trigger fires here or the window stays silent */
        t->ctx = *x->after;
        if (now)
            fire(t, x->to, x->tsc);
        return;
    }
    bool cr3_moved = x->after->cr3 != t->ctx.cr3;
    bool want_pip =
        cr3_moved && t->cfg.filter.kernel && (context_en(t, &t->ctx) || context_en(t, x->after));

    if (was && now) {
        if (x->fup)
            ip_pkt(t, PT_PKT_FUP, x->from, true);
        if (want_pip)
            pip(t, x->after->cr3);
        if (x->tip) {
            mode_if_changed(t, x->after->cs);
            ip_pkt(t, PT_PKT_TIP, x->to, true);
        } else if (x->jcc) {
            tnt(t, x->taken);
        }
    } else if (was) {
        /* leaving: the branch's TNT bit / TIP is replaced by TIP.PGD */
        if (x->fup)
            ip_pkt(t, PT_PKT_FUP, x->from, true);
        if (want_pip)
            pip(t, x->after->cr3);
        ip_pkt(t, PT_PKT_TIP_PGD, x->to, context_en(t, x->after));
    } else {
        if (want_pip)
            pip(t, x->after->cr3);
        if (now) {
            mode_if_changed(t, x->after->cs);
            ip_pkt(t, PT_PKT_TIP_PGE, x->to, true);
        }
    }
    t->ctx = *x->after;
    t->pkt_en = now;
}

void swpt_start(struct swpt *t, const struct swpt_cfg *cfg, struct swpt_ring *ring,
                const struct swpt_ctx *ctx, uint64_t ip, uint64_t tsc)
{
    *t = (struct swpt){.ring = ring, .ctx = *ctx};
    if (swpt_cfg_check(cfg, NULL) != 0 || !ring || !ring->buf || ring->size == 0)
        return; /* stays off: every other call does nothing */
    t->cfg = *cfg;
    t->on = true;
    t->armed = cfg->filter.start_at;
    if (t->armed && packet_en(t, ctx, ip))
        t->armed = false; /* the trigger is the first instruction: a plain start */
    psb_plus(t, ip, tsc); /* PacketEn still 0: no FUP */
    if (packet_en(t, ctx, ip)) {
        ip_pkt(t, PT_PKT_TIP_PGE, ip, true);
        t->pkt_en = true;
    }
}

void swpt_insn(struct swpt *t, uint64_t ip, const struct x86_insn *in, uint64_t next_ip,
               const struct swpt_ctx *after, uint64_t tsc)
{
    if (!t->on)
        return;
    t->insns++;
    /* the common step, as transfer() would decide it: no IP packet and no PIP (a plain
     * instruction, a Jcc, a direct JMP / CALL in the same CR3), PacketEn unchanged */
    if (in->branch <= X86_BR_CALL_DIRECT && !t->armed && after->cr3 == t->ctx.cr3 &&
        packet_en(t, after, next_ip) == t->pkt_en) {
        t->ctx = *after;
        /* a REP string instruction fed once per iteration: the decode shows it once */
        t->traced += t->pkt_en && (next_ip != ip || !(in->flags & X86_F_REP));
        if (in->branch == X86_BR_JCC && t->pkt_en)
            tnt(t, next_ip != ip + in->len);
        psb_if_due(t, next_ip, tsc);
        return;
    }
    struct xfer x = {.to = next_ip, .after = after, .from = ip, .tsc = tsc};
    switch (in->branch) {
    case X86_BR_JCC:
        x.jcc = true;
        x.taken = next_ip != ip + in->len;
        break;
    case X86_BR_JMP_INDIRECT:
    case X86_BR_CALL_INDIRECT:
    case X86_BR_RET:
    case X86_BR_FAR_JMP:
    case X86_BR_FAR_CALL:
    case X86_BR_FAR_RET:
    case X86_BR_IRET:
    case X86_BR_SYSCALL:
    case X86_BR_SYSRET:
    case X86_BR_SYSENTER:
    case X86_BR_SYSEXIT:
        x.tip = true;
        break;
    case X86_BR_INT:
        x.tip = x.fup = true;
        break;
    case X86_BR_VMX:
    case X86_BR_UD:
        /* control left at the instruction (a fault, a VM function): as an event */
        x.tip = x.fup = next_ip != ip + in->len;
        break;
    default: /* no packet of its own; MOV CR3 gives a PIP through the context */
        break;
    }
    /* a decode shows it, unless the FUP at its own IP stands for it (INT n, a VM function or
     * #UD that left at it: libipt reports the event before the instruction) */
    t->traced += t->pkt_en && !x.fup;
    transfer(t, &x);
    psb_if_due(t, next_ip, tsc);
}

bool swpt_plain(struct swpt *t, uint64_t n, const struct swpt_ctx *after)
{
    /* what n swpt_insn calls of plain instructions do when their IPs decide nothing (no IP
     * range, no trigger) and no PSB is due after any of them (none writes a byte) */
    if (!t->on)
        return true;
    if (t->armed || t->cfg.filter.nranges || after->cr3 != t->ctx.cr3 ||
        t->since_psb >= t->cfg.psb_period || context_en(t, after) != t->pkt_en)
        return false;
    t->insns += n;
    t->traced += t->pkt_en ? n : 0;
    t->ctx = *after;
    return true;
}

void swpt_event(struct swpt *t, uint64_t from_ip, uint64_t to_ip, const struct swpt_ctx *after,
                uint64_t tsc)
{
    const struct xfer x = {
        .to = to_ip, .after = after, .fup = true, .from = from_ip, .tip = true, .tsc = tsc};

    if (!t->on)
        return;
    t->events++;
    if (!t->armed && (t->pkt_en || packet_en(t, after, to_ip)))
        t->win_events++;
    transfer(t, &x);
    psb_if_due(t, to_ip, tsc);
}

/* OVF (33.4.2.15), counted where it went into the ring: the stream's overflows */
static void ovf(struct swpt *t)
{
    struct pkt p;
    const uint64_t head = t->ring->head;

    close_pkt(t, &p, pt_pkt_ovf(open_pkt(t, &p)));
    t->overflows += t->ring->head != head;
}

/* execution goes on at resume_ip in *ctx by a way the packets so far do not show.  lost: what
 * ran in between is not known, from a point where PacketEn was in_before */
static void relocate(struct swpt *t, uint64_t resume_ip, const struct swpt_ctx *ctx, uint64_t tsc,
                     bool lost, bool in_before)
{
    if (!t->on)
        return;
    if (t->armed) { /* nothing traced yet: nothing lost; the trigger may fire here */
        t->ctx = *ctx;
        if (packet_en(t, ctx, resume_ip))
            fire(t, resume_ip, tsc);
        return;
    }
    bool was = t->pkt_en;
    bool now = packet_en(t, ctx, resume_ip);
    bool cr3_moved = ctx->cr3 != t->ctx.cr3;
    bool moved = cr3_moved || (uint8_t)ctx->cs != t->mode_sent;

    flush_tnt(t);
    /* a resume while PacketEn = 1 would hide a jump: a loss after all.  A loss is the window's
     * only where traced code's path is cut (it began or ends with PacketEn = 1); one wholly
     * outside shows nothing, as hardware shows nothing while PacketEn = 0 */
    if (was || (lost && (in_before || now)))
        ovf(t);
    t->ctx = *ctx;
    t->pkt_en = now;
    if (was && now && moved) {
        /* a MODE.Exec / PIP before the FUP would bind to a later TIP: restate all in PSB+ */
        psb_plus(t, resume_ip, tsc);
        return;
    }
    if (was && now) {
        ip_pkt(t, PT_PKT_FUP, resume_ip, true);
    } else {
        if (cr3_moved && pip_ok(t, ctx))
            pip(t, ctx->cr3);
        if (now) {
            mode_if_changed(t, ctx->cs);
            ip_pkt(t, PT_PKT_TIP_PGE, resume_ip, true);
        }
    }
    psb_if_due(t, resume_ip, tsc);
}

void swpt_lost(struct swpt *t, uint64_t resume_ip, const struct swpt_ctx *ctx, uint64_t tsc)
{
    relocate(t, resume_ip, ctx, tsc, true, t->pkt_en);
}

bool swpt_admits(const struct swpt *t, const struct swpt_ctx *ctx, uint64_t ip)
{
    return t->on && packet_en(t, ctx, ip);
}

bool swpt_cr3_off(const struct swpt *t, uint64_t cr3)
{
    const struct swpt_filter *f = &t->cfg.filter;
    return t->on && f->cr3_match && ((cr3 ^ f->cr3) & ~f->cr3_ignore);
}

bool swpt_context_off(const struct swpt *t, const struct swpt_ctx *ctx)
{
    return t->on && !context_match(t, ctx);
}

/* the known path ends before at_ip (a stop, an interrupt, a gap: 33.4.2.4): pending TNT,
 * then FUP(at_ip) + TIP.PGD with the IP suppressed where PacketEn was 1 */
static void disable_at(struct swpt *t, uint64_t at_ip)
{
    flush_tnt(t);
    if (t->pkt_en) {
        ip_pkt(t, PT_PKT_FUP, at_ip, true);
        ip_pkt(t, PT_PKT_TIP_PGD, at_ip, false);
        t->pkt_en = false;
    }
}

void swpt_leave(struct swpt *t, uint64_t at_ip, const struct swpt_ctx *ctx)
{
    if (!t->on)
        return;
    if (t->pkt_en && !t->armed) { /* the stream shows an asynchronous exit of traced code */
        t->events++;
        t->win_events++;
    }
    disable_at(t, at_ip);
    if (ctx->cr3 != t->ctx.cr3 && pip_ok(t, ctx))
        pip(t, ctx->cr3);
    t->ctx = *ctx;
}

void swpt_resume(struct swpt *t, uint64_t ip, const struct swpt_ctx *ctx, uint64_t tsc)
{
    relocate(t, ip, ctx, tsc, false, false);
}

void swpt_overflow(struct swpt *t)
{
    if (!t->on || t->armed || t->pkt_en) /* after swpt_leave: PacketEn = 0, a TIP.PGE follows */
        return;
    ovf(t);
}

void swpt_gap(struct swpt *t, uint64_t at_ip, uint64_t resume_ip, const struct swpt_ctx *ctx,
              uint64_t tsc)
{
    if (!t->on)
        return;
    const bool in_before = t->pkt_en;
    disable_at(t, at_ip);
    relocate(t, resume_ip, ctx, tsc, true, in_before);
}

void swpt_stop(struct swpt *t, uint64_t ip)
{
    if (!t->on)
        return;
    disable_at(t, ip);
    t->on = false;
}
