/* SPDX-License-Identifier: MIT */
/*
 * The software PT packet generator: given the instructions a CPU
 * executed, one at a time, write exactly the Intel PT packets hardware would have
 * written for that path (SDM Vol. 3C chapter 33), so libipt decodes them as any PT
 * trace.  Pure code: compiled unchanged into vmm.elf (fed by the monitor-trap-flag
 * stepper, vmm/trace/shim/trace_step.c) and into the host tests (fed by ptrace single
 * steps of real programs, decoded back with libipt).
 *
 * Settings it models (as an RTIT_CTL would name them): BranchEn = 1, DisRETC = 1
 * (every near RET gives a TIP: no return compression), OS / User from the filter,
 * CR3Filter from the filter, up to 4 ADDRn ranges as TraceStop-free FilterEn
 * ranges, PSB every `psb_period` bytes, MTC / CYC off, TSCEn from the config.
 *
 * The generator never reads guest memory: the caller classifies the instruction
 * (vmm/trace/x86_class.c) and says where execution went.
 */
#ifndef PTV_SWPT_H
#define PTV_SWPT_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/x86_class.h"

/* where packets go: a byte ring (circular, or stop when full) */
struct swpt_ring {
    uint8_t *buf;
    uint64_t size;     /* bytes, > 0 */
    uint64_t head;     /* total bytes ever written; position = head % size */
    bool stop_on_full; /* else circular: the oldest bytes are overwritten */
    bool stopped;      /* stop_on_full and full: nothing more is written */
    uint64_t dropped;  /* bytes not written because the ring was stopped */
};

/* the CPU context that decides filtering and MODE / PIP packets */
struct swpt_ctx {
    uint64_t cr3;
    uint8_t cpl;           /* 0..3 */
    enum x86_code_size cs; /* CS.L / CS.D */
};

#define SWPT_MAX_RANGES    4
#define SWPT_CR3_IGNORABLE 0x1fffull /* PCID bits 11:0 and bit 12 (a PTI PGD pair) */
struct swpt_filter {
    bool user;      /* trace CPL > 0 (RTIT_CTL.User) */
    bool kernel;    /* trace CPL 0 (RTIT_CTL.OS) */
    bool cr3_match; /* trace only where ctx.cr3 == cr3 (RTIT_CTL.CR3Filter) */
    uint64_t cr3;
    uint64_t cr3_ignore; /* CR3 bits the match ignores (SWPT_CR3_IGNORABLE at most); 0 as PT */
    /* start trigger (no PT equivalent: what `ptvisor-ctl trace` needs to begin at a program's
     * entry): nothing is traced until the first instruction at start_ip the filter admits;
     * there the trace starts as at swpt_start (PSB+, TIP.PGE) */
    bool start_at;
    uint64_t start_ip;
    unsigned nranges; /* 0: every IP; else only IPs inside one of the ranges */
    struct {
        uint64_t lo, hi; /* inclusive, as ADDRn_A / ADDRn_B */
    } range[SWPT_MAX_RANGES];
};

struct swpt_cfg {
    struct swpt_filter filter;
    uint32_t psb_period; /* bytes between PSB+ (as PSBFreq): 256 .. 1 MiB, power of 2 */
    bool tsc;            /* TSC packet in every PSB+ and at enable */
    bool long_tnt;       /* up to 47 TNT bits a long TNT (02 A3); else short TNT, 6 a byte */
    bool pip_nr;         /* PIP.NR = 1 (non-root without "conceal VMX non-root from PT") */
};

struct swpt {
    struct swpt_cfg cfg;
    struct swpt_ring *ring;
    struct swpt_ctx ctx; /* context of the instruction about to run */
    bool on;             /* between swpt_start and swpt_stop */
    bool pkt_en;         /* the current IP / context is inside the filter */
    bool armed;          /* cfg.filter.start_at and start_ip not reached yet: silent */
    uint64_t last_ip;    /* IP compression state (reset by PSB) */
    bool last_ip_valid;
    uint64_t tnt_bits; /* pending TNT bits, oldest first from bit tnt_n-1 */
    unsigned tnt_n;
    uint64_t since_psb; /* bytes since the last PSB */
    /* figures */
    uint64_t insns; /* instructions seen while on (traced or filtered out) */
    uint64_t packets;
    uint64_t psbs;
    uint64_t events; /* asynchronous events */
    /* OVF packets in the stream: each a place where the trace lost the path of traced code,
     * counted only when it went into the ring (a stopped ring drops it), so a decoder of the
     * whole stream finds exactly this many.  The window's gaps, at any CPL (swtrace_gaps) */
    uint64_t overflows;
    /* what the stream itself shows (a CPL 3 owner is told these, nothing of other contexts) */
    uint64_t traced;     /* instructions with PacketEn = 1: what a decode of the stream yields */
    uint64_t win_events; /* events from or into traced code (FUP + TIP / TIP.PGD, TIP.PGE) */
    uint8_t mode_sent;   /* enum x86_code_size of the last MODE.Exec written */
};

/* validate a configuration: 0 or a negative SWPT_E*, with a one-line reason in *why */
#define SWPT_EINVAL (-1)
int swpt_cfg_check(const struct swpt_cfg *cfg, const char **why);

/* tracing starts (TraceEn 0 -> 1) with the CPU about to run `ip` in `ctx`:
 * PSB+ (PSB, [TSC], MODE.Exec, PIP, PSBEND) then TIP.PGE(ip) if inside the filter */
void swpt_start(struct swpt *t, const struct swpt_cfg *cfg, struct swpt_ring *ring,
                const struct swpt_ctx *ctx, uint64_t ip, uint64_t tsc);

/*
 * One instruction at `ip` (classified as *in) completed; the CPU is now about to
 * run `next_ip` in `*after` (CR3 / CPL / code size after the instruction).  The
 * caller passes `tsc` for periodic PSB+.  Emits TNT bits, TIPs, MODE.Exec / PIP,
 * TIP.PGD / TIP.PGE on filter edges, PSB+ when due.
 */
void swpt_insn(struct swpt *t, uint64_t ip, const struct x86_insn *in, uint64_t next_ip,
               const struct swpt_ctx *after, uint64_t tsc);

/* n plain instructions (no branch, no context change) completed, the CPU now in *after: true
 * when done as n swpt_insn calls would do them; false when their IPs matter (an IP range, a
 * start trigger) or a PSB may fall between them: nothing done, call swpt_insn for each */
bool swpt_plain(struct swpt *t, uint64_t n, const struct swpt_ctx *after);

/*
 * An asynchronous transfer (interrupt, exception, NMI, a signal as seen from user
 * space...): no instruction completed at `from_ip` (the IP the event interrupted,
 * which resumes there: FUP(from_ip)), control goes to `to_ip` in *after:
 * FUP + [MODE.Exec] [PIP] + TIP, or FUP + TIP.PGD / TIP.PGE across the filter.
 */
void swpt_event(struct swpt *t, uint64_t from_ip, uint64_t to_ip, const struct swpt_ctx *after,
                uint64_t tsc);

/*
 * The tracer lost track (code bytes unreadable, a step it could not see) and the CPU is at
 * resume_ip in *ctx: OVF, then FUP(resume_ip) (or TIP.PGE if it resumes inside the filter from
 * outside).  The OVF is written only where the loss cuts the path of traced code: PacketEn is 1
 * where it began or at resume_ip.  A loss that begins and ends with PacketEn = 0 writes nothing
 * and counts nothing (context changes aside, as a PIP): hardware writes no packet while
 * PacketEn = 0, so an OVF there would tell the window's owner what other contexts did (the
 * kernel, other processes), not what its own trace lost.
 */
void swpt_lost(struct swpt *t, uint64_t resume_ip, const struct swpt_ctx *ctx, uint64_t tsc);

/* the path is known up to (not including) at_ip, then the CPU was at resume_ip by a way
 * the tracer could not see: FUP(at_ip) + TIP.PGD (the decode keeps every instruction
 * before at_ip), OVF, then TIP.PGE(resume_ip) where it is inside the filter; the OVF as
 * swpt_lost writes it (PacketEn 1 before at_ip or at resume_ip) */
void swpt_gap(struct swpt *t, uint64_t at_ip, uint64_t resume_ip, const struct swpt_ctx *ctx,
              uint64_t tsc);

/*
 * The software tracer's departures (swtrace.c): control left the traced code before at_ip
 * for untraced code by a way the tracer did not see (an event the CPU delivered without a VM
 * exit).  swpt_leave: FUP(at_ip) + TIP.PGD as an asynchronous disable (an event of the window,
 * as the stream shows it: events, win_events), no OVF yet, the context
 * becomes *ctx.  swpt_resume: the traced code goes on at `ip` in *ctx with nothing lost
 * (TIP.PGE where the filter admits it, a PIP where OS = 1 needs one).  swpt_overflow: what
 * happened in between is not known after all: OVF (both only while PacketEn = 0).
 */
bool swpt_admits(const struct swpt *t, const struct swpt_ctx *ctx, uint64_t ip);
void swpt_leave(struct swpt *t, uint64_t at_ip, const struct swpt_ctx *ctx);
void swpt_resume(struct swpt *t, uint64_t ip, const struct swpt_ctx *ctx, uint64_t tsc);
void swpt_overflow(struct swpt *t);

/* no instruction under CR3 cr3 is in context, at any CPL: the window has a CR3 filter and cr3
 * is not its (a vCPU there traces nothing until a MOV to CR3) */
bool swpt_cr3_off(const struct swpt *t, uint64_t cr3);
/* the filter leaves context *ctx out (its CPL, or its CR3): PacketEn is 0 at every IP of it,
 * whatever the IP ranges or a start trigger say (the trigger fires only in context) */
bool swpt_context_off(const struct swpt *t, const struct swpt_ctx *ctx);

/* tracing stops (TraceEn 1 -> 0) before `ip`: pending TNT, then TIP.PGD (IP suppressed),
 * preceded by FUP(ip) when inside the filter, as a WRMSR clearing TraceEn writes them */
void swpt_stop(struct swpt *t, uint64_t ip);

#endif
