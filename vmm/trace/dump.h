/* SPDX-License-Identifier: MIT */
/*
 * A serial trace dump, driven one line at a time.  A dump is one or more
 * sections (one per CPU: its trace window, its crash report, its code snapshots); this file
 * decides what goes out in which order and feeds vmm/trace/frame.c, so the VMM shim
 * (trace/shim/trace_dump.c) only reads bytes and decides when a line may go out.  Pure code, no
 * allocation: compiled unchanged into vmm.elf and into the host tests
 * (tests/unit/trace/test_dump.c, and tests/tools/mkdump.c writes its serial logs through it).
 *
 *     dump_start(j, sections, n, &ops, &out);
 *     while (dump_step(j))        one BEGIN or END record, or one DATA line, per call:
 *         ... return to the guest ... the caller paces the dump (a stall budget)
 *
 * Order per section: BEGIN, the trace stream, the crash report, snapshots 0..n-1, END.
 * Bytes are read through ops.read at the first line of each block (at most FRAME_BLOCK
 * bytes), so a ring that keeps being written while the dump goes out is read late: a block
 * the ring has already overwritten (read returns less than asked) is skipped, counted in
 * `lost`, and END then gives no whole-stream CRC for that stream (the host reports the gap).
 */
#ifndef PTV_TRACE_DUMP_H
#define PTV_TRACE_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

/* one CPU's part of a dump: its BEGIN metadata (arrays owned by the caller, valid until the
 * dump is done) and where its trace stream starts in the CPU's ring (absolute offset) */
struct dump_sect {
    struct frame_begin b;
    uint64_t t_start;
};

struct dump_ops {
    void *ctx;
    /* bytes [off, off + len) of stream `stream` (FRAME_STREAM_*) of section `sect`; for the
     * trace stream off is absolute in the ring (t_start + offset in the stream).  Returns
     * the bytes read: fewer than len means the rest is gone (skipped, counted) */
    size_t (*read)(void *ctx, unsigned sect, unsigned stream, uint64_t off, uint8_t *buf,
                   size_t len);
};

enum dump_phase { DUMP_BEGIN = 0, DUMP_DATA, DUMP_END, DUMP_DONE };

struct dump_job {
    struct frame_enc enc; /* large: keep the job static */
    struct dump_ops ops;
    struct frame_out out;
    const struct dump_sect *sect;
    unsigned nsect, cur;
    enum dump_phase phase;
    unsigned si;     /* stream index in the section: 0 trace, 1 crash, 2 + n snapshot n */
    uint64_t off;    /* offset in that stream of the block going out */
    size_t blen;     /* bytes of the block in buf (0: none read yet) */
    const char *err; /* sticky: the first error (metadata refused by the encoder) */
    /* figures */
    uint64_t lines; /* frame lines written */
    uint64_t bytes; /* stream bytes sent */
    uint64_t lost;  /* stream bytes the source no longer had */
    uint8_t buf[FRAME_BLOCK];
};

/* check the sections and prepare; 0, or -1 with the reason in j->err (nothing emitted) */
int dump_start(struct dump_job *j, const struct dump_sect *s, unsigned n,
               const struct dump_ops *ops, const struct frame_out *out)
    __attribute__((warn_unused_result));
/* write the next record or line; true while more is to come */
bool dump_step(struct dump_job *j);
/* true once the last END is out (or the dump failed: j->err) */
static inline bool dump_done(const struct dump_job *j)
{
    return j->phase == DUMP_DONE;
}

/*
 * Who sends a paced dump's slices.  The VMM shim (trace/shim/trace_dump.c) sends
 * them before one vCPU's VM entries: the owner, the vCPU that started the dump.  An owner
 * can stop entering the guest for good (an AP parked in wait-for-SIPI: no exit, not even the
 * VMX-preemption timer's, comes from that state) and would hold the dump, and every later
 * request's EBUSY, forever.  So a request that finds the dump still going out takes it over
 * once the owner has not come for a slice in `stale` ticks: the dump then finishes from the
 * requester's entries, each slice still bounded by the stall budget, and the old owner,
 * should it come back, finds the dump no longer its own.  A request waits at most `stale`
 * plus the rest of the dump.  Pure; ids are the callers' (vCPU numbers).
 */
struct dump_pacer {
    unsigned owner; /* owner's id + 1; 0: no paced dump */
    uint64_t seen;  /* when the owner last came for a slice (or took the dump) */
};

/* `who` started a paced dump at `now` */
void dump_pacer_start(struct dump_pacer *p, unsigned who, uint64_t now);
/* before who's VM entry: true if who sends the next slice (the owner; its time is noted),
 * false if the dump is not who's (any more): who stops coming */
bool dump_pacer_turn(struct dump_pacer *p, unsigned who, uint64_t now);
/* a request of who's found the dump still going out: true if who took it over (the owner
 * had not come for `stale` ticks; a clock behind `seen` never counts as stale) */
bool dump_pacer_adopt(struct dump_pacer *p, unsigned who, uint64_t now, uint64_t stale);
/* the dump is done (or abandoned): nobody's */
static inline void dump_pacer_end(struct dump_pacer *p)
{
    p->owner = 0;
}

/* p[0..DUMP_PSB_LEN) is a whole PSB (02 82 x 8, Vol. 3C 33.4.2.17), the decoder's sync point */
#define DUMP_PSB_LEN 16
bool dump_is_psb(const uint8_t *p);

/*
 * Where the trace stream of a window starts: at the newest `window` bytes of the ring's
 * [oldest, written), moved forward to the first PSB (the decoder's sync point) when that
 * cuts the ring's bytes (a start in the middle of a packet would decode as garbage).
 * `read` reads absolute ring offsets as ops.read does for the trace stream.  Returns
 * `written` when the cut part holds no PSB (nothing a decoder could start from).
 */
uint64_t dump_trace_start(size_t (*read)(void *ctx, uint64_t off, uint8_t *buf, size_t len),
                          void *ctx, uint64_t oldest, uint64_t written, uint64_t window);

#endif
