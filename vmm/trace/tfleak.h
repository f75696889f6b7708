/* SPDX-License-Identifier: MIT */
/*
 * Event frames that carry the tracer's trap flag, and which single steps they explain.
 *
 * With sw_trace = tf the tracer steps the guest with RFLAGS.TF, set before every entry.  An
 * event the CPU delivers while it is set (an interrupt, an exception, INT n) pushes a frame
 * whose saved RFLAGS has TF = 1 and runs its handler with TF = 0, unstepped: that TF is how
 * stepping comes back when the handler returns.  A frame still on a stack when the window
 * closes (its context was switched away) brings TF back later, outside any window: a single
 * step the guest never asked for.  A single step the guest did ask for (a debugger's TF, set
 * by POPF / IRET / SYSRET from an image the guest wrote) must reach it as on bare metal.
 *
 * The two are told apart here.  Every step whose exit shows that code ran unstepped after an
 * event (swtrace: a frame found, or a step nothing explains) records the frame it left: the
 * context (CR3 without its PCID bits, CS), the IP the frame returns to and the stack pointer
 * it restores.  A single step that comes back to such a frame -- on its stack, at its return
 * IP (the IRET was stepped) or one instruction after it (a TF an IRET restored traps after
 * the next instruction: SDM Vol. 3B,
 * "Single-Step Exception Condition") -- is the tracer's, and takes the record; any
 * other single step is the guest's own.
 *
 * RFLAGS images the tracer sees being written are cleaned where they are written instead
 * (trace_step.c: PUSHF's image, SYSCALL's R11), so they never need a record.
 *
 * The table is bounded: when full, the oldest record of the context that holds the most goes
 * (counted, logged once by the shim), so a context that floods it with its own events loses its
 * own records first; a frame whose record went brings, should it ever return, the stray single
 * step to the guest.  Pure code, for
 * the VMM (one table for all vCPUs: a process interrupted on one CPU may resume on another)
 * and for test_tfleak / fuzz_tfleak.
 */
#ifndef PTV_TFLEAK_H
#define PTV_TFLEAK_H

#include <stdbool.h>
#include <stdint.h>

#include "trace/x86_class.h"

#define TFL_MAX       128
#define TFL_RSP_SLACK 0x10000ull /* how far one instruction may move RSP (SUB RSP, imm) */

struct tfl_frame {
    uint64_t cr3; /* CR3 of the interrupted context, PCID bits (11:0) cleared */
    uint64_t ret; /* the IP the frame returns to */
    uint64_t rsp; /* the stack pointer it restores */
    uint16_t cs;  /* the code segment selector it restores */
};

struct tfl {
    struct tfl_frame f[TFL_MAX];
    uint64_t seq[TFL_MAX]; /* age of each record: the smallest goes first when full */
    unsigned n;
    uint64_t next_seq;
    uint64_t recorded, taken, dropped;
};

/* one instruction at f->ret, of code size cs, can go to `to` (the shim reads and classifies
 * it; false where its bytes cannot be read) */
typedef bool (*tfl_reach_fn)(void *ctx, const struct tfl_frame *f, uint64_t to);

void tfl_init(struct tfl *l);

/* a frame the tracer's TF went into; the same frame recorded again replaces its record (the
 * same stack slot cannot hold two frames at once) */
void tfl_record(struct tfl *l, const struct tfl_frame *f);

/* a single step at (cr3, cs, rip, rsp): true when a recorded frame explains it (that record is
 * taken, the newest first where several do), false when the step is the guest's own */
bool tfl_take(struct tfl *l, uint64_t cr3, uint16_t cs, uint64_t rip, uint64_t rsp,
              tfl_reach_fn reach, void *ctx);

/* does frame f explain a single step at (cr3, cs, rip, rsp): same context (CR3 without PCID)
 * and code segment, at its return IP on its stack or one instruction after it nearby */
bool tfl_explains(const struct tfl_frame *f, uint64_t cr3, uint16_t cs, uint64_t rip, uint64_t rsp,
                  tfl_reach_fn reach, void *ctx);

/* may the instruction `in` at ip go to `to` in one step (fall-through, its direct target, or
 * anywhere for indirect and far transfers) */
bool tfl_insn_reaches(const struct x86_insn *in, uint64_t ip, enum x86_code_size cs, uint64_t to);

static inline bool tfl_empty(const struct tfl *l)
{
    return l->n == 0;
}

#endif
