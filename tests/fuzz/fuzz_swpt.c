/* SPDX-License-Identifier: MIT */
/*
 * The software PT generator (vmm/trace/swpt.c) under random call sequences: start / insn /
 * event / lost / stop with random contexts, filters, ring sizes and modes.  Checks: nothing is
 * written outside the ring (guard bytes, and ASan on the exact allocation), a full
 * stop-on-full ring holds whole packets only and its head never passes its size, and
 * libipt's packet decoder parses every byte from the first PSB to the end, finding as many OVF
 * packets as the generator counted (its overflows: the window's gaps).  The CPL 3 rule
 * (vmm/trace/treq.c): a TRACE_START a guest process may make is a window on its own
 * process in user mode, whose stream, traced count, events and gaps never move at a step or a
 * loss that leaves and enters only other contexts (a PSB+ when due aside), and only its owner
 * may act on it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

#include <ptv/config.h>
#include <ptv/vmcall.h>

#include "trace/dump.h"
#include "trace/swpt.h"
#include "trace/treq.h"
#include "fakes/swpt_dec.h"

#define GUARD 32

struct in {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)*in->p << (8 * i);
    return v;
}

/* IPs from a few places so that ranges, compression and returns all happen */
static uint64_t pick_ip(struct in *in)
{
    static const uint64_t base[] = {
        0x400000, 0x401000, 0x7fffffffe000ull, 0xffffffff81000000ull, 0x500000,
        0x7000,   0,        ~0ull - 0xfff};

    uint64_t v = take(in, 2);
    return base[v & 7] + ((v >> 3) & 0xfff);
}

static struct swpt_ctx pick_ctx(struct in *in)
{
    uint8_t v = (uint8_t)take(in, 1);
    struct swpt_ctx c = {.cr3 = 0x1000ull * (v & 3),
                         .cpl = (uint8_t)((v >> 2) & 3),
                         .cs = (enum x86_code_size)((v >> 4) % 3)};
    return c;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_swpt: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    struct swpt_cfg cfg = {0};
    struct swpt t;
    struct swpt_ring r;
    uint8_t *mem, *lin;
    unsigned counts[SWPT_PKT_TYPES];
    char err[200];
    size_t whole;

    uint8_t f = (uint8_t)take(&in, 1);
    cfg.filter.user = f & 1;
    cfg.filter.kernel = f & 2;
    cfg.filter.cr3_match = f & 4;
    cfg.filter.cr3 = 0x1000ull * ((f >> 3) & 3);
    cfg.tsc = f & 0x20;
    cfg.long_tnt = f & 0x40;
    cfg.pip_nr = f & 0x80;
    uint8_t g = (uint8_t)take(&in, 1);
    cfg.psb_period = 256u << (g & 15); /* some too large: swpt_start then stays off */
    cfg.filter.nranges = (g >> 4) % 6;
    for (unsigned i = 0; i < cfg.filter.nranges && i < SWPT_MAX_RANGES; i++) {
        cfg.filter.range[i].lo = pick_ip(&in);
        cfg.filter.range[i].hi = cfg.filter.range[i].lo + take(&in, 2);
    }
    uint8_t h = (uint8_t)take(&in, 1);
    cfg.filter.cr3_ignore = h & 1 ? take(&in, 2) : 0; /* some beyond 12:0: refused */
    cfg.filter.start_at = h & 2;
    if (cfg.filter.start_at)
        cfg.filter.start_ip = pick_ip(&in);
    bool own = false; /* cfg is a CPL 3 caller's window: the caller's context only */
    uint64_t own_cr3 = 0, own_ignore = 0;
    if (h & 4) { /* the same configuration as a TRACE_START would ask for it */
        struct ptv_config pc = {.psb_period = cfg.psb_period, .trace_filter = f & 3};
        uint8_t u = (uint8_t)take(&in, 1);
        struct trace_req rq = {.flags = (uint32_t)take(&in, 1),
                               .cr3 = cfg.filter.cr3,
                               /* often one of pick_ctx's CR3s with PCID bits */
                               .caller_cr3 =
                                   u & 2 ? take(&in, 8) : 0x1000ull * ((u >> 2) & 3) + (u >> 4),
                               .cr3_ignore = cfg.filter.cr3_ignore,
                               .lo = pick_ip(&in),
                               .hi = pick_ip(&in),
                               .start_ip = cfg.filter.start_ip,
                               .user = u & 1};
        uint64_t budget = h & 8 ? take(&in, 2) : 0;
        const char *why = NULL;
        struct swpt_cfg rc;
        int ok = trace_req_swpt(&rq, &pc, &rc, &why);
        if (ok != 0 && (!why || !*why))
            fail("trace_req_swpt refused without a reason");
        if (ok == 0 && swpt_cfg_check(&rc, NULL) != 0)
            fail("trace_req_swpt accepted a configuration swpt_cfg_check refuses");
        /* the CPL 3 rule: refused (with a reason), or the caller's own window, user mode
         * only, PCID bits the most the match ignores, no budget */
        int user_ok = trace_req_user_check(&rq, budget, &why);
        if (user_ok != 0 && (!why || !*why))
            fail("trace_req_user_check refused without a reason");
        if (!rq.user && user_ok != 0)
            fail("trace_req_user_check refused a CPL 0 request");
        if (rq.user && user_ok == 0 && ok == 0 &&
            (!rc.filter.user || rc.filter.kernel || !rc.filter.cr3_match ||
             rc.filter.cr3 != rq.caller_cr3 || (rc.filter.cr3_ignore & ~PTV_TRACE_CR3_PCID) ||
             budget))
            fail("the CPL 3 rule let through a window beyond the caller's process in user mode");
        /* only the owner acts on it from CPL 3; CPL 0 on every window */
        struct trace_owner o = trace_owner_of(&rq);
        uint64_t other = take(&in, 1) & 1 ? take(&in, 8) : rq.caller_cr3 ^ take(&in, 2);
        for (unsigned cpl = 0; cpl < 4; cpl++)
            if (trace_owner_allows(&o, cpl, other) !=
                (cpl == 0 || (rq.user && !((other ^ rq.caller_cr3) & ~PTV_TRACE_CR3_PCID))))
                fail("trace_owner_allows: not the owner's process, or CPL 0 refused");
        if (ok == 0 && (!rq.user || user_ok == 0)) {
            cfg = rc;
            own = rq.user;
            own_cr3 = rc.filter.cr3;
            own_ignore = rc.filter.cr3_ignore;
        }
    }
    size_t rsize = 1 + (size_t)take(&in, 2) % 4096;
    bool stop_on_full = take(&in, 1) & 1;

    mem = malloc(rsize + 2 * GUARD);
    if (!mem)
        return 0;
    memset(mem, 0xa5, rsize + 2 * GUARD);
    r = (struct swpt_ring){.buf = mem + GUARD, .size = rsize, .stop_on_full = stop_on_full};
    struct swpt_ctx ctx = pick_ctx(&in);
    uint64_t ip = pick_ip(&in);
    swpt_start(&t, &cfg, &r, &ctx, ip, take(&in, 8));
    bool valid = swpt_cfg_check(&cfg, NULL) == 0;
    if (t.on != valid)
        fail("swpt_start on/off disagrees with swpt_cfg_check");
    uint64_t overflows = 0; /* of the windows before a restart in the same ring */

    while (in.n) {
        uint8_t op = (uint8_t)take(&in, 1);
        uint64_t to = (op & 0x80) ? pick_ip(&in) : ip + 1 + (op & 7);
        struct swpt_ctx after = (op & 0x40) ? pick_ctx(&in) : ctx;
        const uint64_t head0 = r.head, traced0 = t.traced, ev0 = t.win_events, psbs0 = t.psbs,
                       ovf0 = t.overflows;

        switch (op & 0x38) {
        case 0x00:
        case 0x08:
        case 0x10: {
            struct x86_insn x = {.len = (uint8_t)(1 + (op & 7)),
                                 .branch = (uint8_t)(take(&in, 1) % X86_BR_COUNT)};
            swpt_insn(&t, ip, &x, to, &after, 0);
            break;
        }
        case 0x18: {
            struct x86_insn x = {.len = 2, .branch = X86_BR_JCC};
            swpt_insn(&t, ip, &x, (op & 1) ? ip : ip + 2, &ctx, 0);
            to = (op & 1) ? ip : ip + 2;
            after = ctx;
            break;
        }
        case 0x20:
            swpt_event(&t, ip, to, &after, 0);
            break;
        case 0x28:
            swpt_lost(&t, to, &after, 0);
            break;
        case 0x30:
            swpt_stop(&t, ip);
            break;
        default:
            overflows += t.overflows;
            swpt_start(&t, &cfg, &r, &after, to, 0);
            break;
        }
        /* a step from another context to another (the kernel, another process), an event
         * or a loss between them: nothing of it in a CPL 3 caller's window (a restart aside) */
        bool off_before = ctx.cpl == 0 || ((ctx.cr3 ^ own_cr3) & ~own_ignore),
             off_after = after.cpl == 0 || ((after.cr3 ^ own_cr3) & ~own_ignore);
        if (own && off_before && off_after && (op & 0x38) <= 0x28 &&
            (t.traced != traced0 || t.win_events != ev0 || t.overflows != ovf0 ||
             (r.head != head0 && t.psbs == psbs0)))
            fail("a CPL 3 caller's window shows a step of another context");
        ip = to;
        ctx = after;
        if (stop_on_full && r.head > r.size)
            fail("stop-on-full ring head past its size");
    }
    swpt_stop(&t, ip);
    overflows += t.overflows;

    for (size_t i = 0; i < GUARD; i++)
        if (mem[i] != 0xa5 || mem[GUARD + rsize + i] != 0xa5)
            fail("write outside the ring");
    if (!valid)
        goto out;
    /* the ring's bytes, oldest first; every byte from the first PSB parses */
    size_t n = r.head < r.size ? (size_t)r.head : r.size;
    size_t start = r.head < r.size ? 0 : (size_t)(r.head % r.size);
    lin = malloc(n ? n : 1);
    if (!lin)
        goto out;
    for (size_t i = 0; i < n; i++)
        lin[i] = r.buf[(start + i) % r.size];
    /* a whole PSB, as libipt's sync looks for it (a wrapped ring may splice bytes that match
     * it in part) */
    bool has_psb = false;
    for (size_t i = 0; i + DUMP_PSB_LEN <= n && !has_psb; i++)
        has_psb = dump_is_psb(lin + i);
    if (has_psb) {
        if (swpt_pkt_scan(lin, n, counts, &whole, err, sizeof(err)) != 0)
            fail(err);
        if (whole != n)
            fail("partial packet at the end of the ring");
        /* every OVF counted is in the stream, and none else (a wrapped ring lost its oldest) */
        if (r.head <= r.size && counts[ppt_ovf] != overflows)
            fail("OVF packets in the stream differ from the overflows counted");
    }
    if (stop_on_full && r.head == 0 && r.dropped == 0)
        fail("nothing written and nothing dropped");
    free(lin);
out:
    free(mem);
    return 0;
}
