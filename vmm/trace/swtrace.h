/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's stepping logic: between two observations of a
 * vCPU (one monitor-trap-flag step, or a VM exit the VMM emulated) decide what
 * ran -- one instruction, an event (interrupt, exception) before it, or both --
 * and feed the packet generator (swpt.h).  Pure code: the VMM calls it from the
 * shim vmm/trace/shim/trace_step.c with the VMCS state, the host tests with scripted
 * CPUs over fake guest memory.
 *
 * Per observation the vCPU state is the architectural state before the next
 * instruction.  The instruction about to run is classified from its code bytes,
 * read through guest paging and EPT *before* it runs (so the trace names the bytes
 * that ran, even for self-modifying code), through a cache of translations and
 * decoded instructions that never answers otherwise than a fresh walk and decode
 * would (vmm/trace/bcache.h says when it forgets what).  When control did not go where that
 * instruction can send it, or went to an event handler, an event is recognised
 * from the frame the CPU pushed (saved RIP, CS, RFLAGS with bit 1 set):
 *   saved RIP == the instruction's IP: the event came before it (fault,
 *   interrupt): FUP(ip) + TIP(handler);
 *   saved RIP == where the instruction goes: it completed, then the event (trap):
 *   the instruction, then FUP + TIP.
 * Anything else the tracer cannot explain becomes OVF + FUP at the new IP
 * (swpt_lost) where it touches traced code: the decode says where the gap is, it never
 * invents a path.  Where it does not (the kernel under a user-only window, another process
 * under a one-process one), the window's stream shows nothing of it.
 */
#ifndef PTV_SWTRACE_H
#define PTV_SWTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/bcache.h"
#include "trace/gwalk.h"
#include "trace/swpt.h"
#include "trace/x86_class.h"

/* one observation of the vCPU */
struct swtrace_cpu {
    uint64_t rip;
    uint64_t rsp;
    uint64_t cs_base; /* linear IP = cs_base + rip outside 64-bit code */
    uint16_t cs_sel;
    struct swpt_ctx ctx;
    struct gw_paging paging;
    uint64_t tsc;
    bool rf; /* RFLAGS.RF at an exit on a block whose lead is its end (swtrace_block.lead_rf) */
};

struct swtrace_stats {
    uint64_t steps;  /* instructions traced (or filtered out) */
    uint64_t events; /* events recognised from their frame */
    /* steps the tracer could not explain, in any context: a diagnostic, not the window's gaps
     * (swtrace_gaps), since a loss wholly outside the window costs its stream nothing */
    uint64_t unexplained;
    uint64_t unreadable;    /* code bytes that could not be read before they ran */
    uint64_t unreadable_in; /* of them, in what the window traces (a CPL 3 owner's figure) */
    uint64_t rep_iters;     /* steps that stayed on a REP string instruction */
    uint64_t departures;    /* traced code left unseen for untraced code (swtrace.c) */
    uint64_t next_hits;     /* blocks after a lead found in the successor table (swblock.c) */
    uint64_t free_runs;     /* stretches run unstepped outside the window (swtrace_resync) */
};

struct swtrace {
    struct swpt pt;
    bool on;
    uint64_t budget;  /* instructions left before the window closes (0 = no limit) */
    bool budget_used; /* the window closed because the budget ran out */
    /* the instruction about to run */
    uint64_t ip, rsp;
    uint16_t cs_sel;
    struct swpt_ctx ctx;
    bool valid; /* its bytes were read and classified */
    struct x86_insn insn;
    /* traced code left unseen (a departure): where, until traced code runs again */
    struct {
        bool on;
        uint64_t ip, rsp; /* where it goes on, on which stack */
        uint16_t cs_sel;
        struct swpt_ctx ctx;
        bool unseen; /* the tracer did not see the way out of traced code */
    } left;
    struct swtrace_stats st;
    /* the last step ran code unstepped after an event (a frame found, or nothing explains
     * it): the frame the stepped context left, which the stepper's trap flag went into
     * (trace/tfleak.h); the caller reads and clears it */
    struct {
        bool on;
        uint64_t ret, rsp, cr3;
        uint16_t cs_sel;
    } pushed;
    /* code bytes are fetched and decoded through a cache (bcache.h), emptied at every
     * swtrace_start; nocache (set before swtrace_start; 0 in a zeroed struct) turns it
     * off: the differential tests and the bench compare both */
    bool nocache;
    void *cache_mem; /* optional larger instruction table (swtrace_cache_mem) */
    uint64_t cache_bytes;
    void *blk_mem; /* optional block table (swtrace_block_mem) */
    uint64_t blk_bytes;
    struct bcache bc;
    /* the blocks that followed a lead, kept (swblock.c): a third of blk_mem's bytes go to the
     * block table, the rest here */
    struct swtrace_next *next;
    uint32_t next_mask;
    struct swtrace_next *next_last; /* the entry the last swtrace_block_next kept or hit */
};

/* give the decode cache a larger instruction table (memory the caller keeps for the
 * tracer's life; used from the next swtrace_start); without it, BC_INSN_SIZE entries */
void swtrace_cache_mem(struct swtrace *t, void *mem, uint64_t bytes);

/* give the decode cache a table of straight-line blocks (bcache.h; memory the caller keeps,
 * used from the next swtrace_start): block stepping then decodes a block it ran before
 * with one byte comparison, and finds the block that followed a lead before with one
 * comparison per run (swblock.c); without it, instruction by instruction */
void swtrace_block_mem(struct swtrace *t, void *mem, uint64_t bytes);

/* open a window with the vCPU about to run c->rip; budget 0 = until swtrace_stop */
void swtrace_start(struct swtrace *t, const struct swpt_cfg *cfg, struct swpt_ring *ring,
                   const struct gw_mem *m, const struct swtrace_cpu *c, uint64_t budget);

/*
 * The vCPU is now in state *c.  mtf: a monitor-trap-flag exit came since the last
 * observation (something ran even if RIP did not move: a REP iteration, a jump to
 * itself).  Returns false when the window closed (budget spent).
 */
bool swtrace_observe(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                     bool mtf);

/*
 * Free running: the vCPU ran unstepped from the last observation to c, out of the window all
 * along, and the caller let it run so only while every way back into the window exits first:
 * a MOV to CR3 (out of the window's CR3, CR3-load exiting), or the fetch of a user-mode page
 * (at CPL 0 in a user-only window, EPT's mode-based execute control: trace_step.c).  So nothing
 * it ran was in the window.  Where c is out of the window too, the tracer is at c as after a
 * step it could not explain: no packet (PacketEn was 0 at both ends), a departure from traced
 * code stays pending.  Where c is in the window (the exit that caught the vCPU coming back,
 * before its first instruction there), the window is entered at c as a branch into it enters
 * it: MODE.Exec where the mode changed, TIP.PGE(c) -- no OVF, wherever a departure the tracer
 * saw was to go on, since nothing of the window ran unseen during the span (a departure it did
 * not see must still come back where it was to go on, else an OVF first: what ran before the
 * span is not known).  Either way translations cached before are
 * dropped, and the next observation is judged from c as usual.
 * caught: the exit is the one that catches the way back (the fetch of the user-mode page).  At
 * any other exit a c in the window is not known to be the first state there (code at CPL 1 or 2
 * runs supervisor-mode fetches), and is judged as after a step nothing explains: TIP.PGE where
 * the departure was to go on, else an OVF first.
 */
void swtrace_resync(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                    bool caught);

/*
 * Block stepping: fewer VM exits than instructions.  A block is the straight line of plain
 * instructions (no branch, no MOV CR / INVLPG / HLT, nothing X86_F_NOBLOCK) from where the
 * vCPU is, up to the first other one, its end; where that is a direct JMP or CALL, the block
 * runs on through it at its target, up to SWTRACE_BLOCK_SEGS straight runs whose IPs are all
 * distinct (swblock.c).  The shim lets the vCPU run the block
 * unstepped with an instruction breakpoint at the end, while every event that could take it
 * elsewhere (an exception, an external interrupt, an NMI, an injected event) is a VM exit or
 * keeps blocks off: so at any exit the vCPU ran exactly the block's instructions before its
 * RIP.  A block may lead with the branch at the last block's end, predicted here from the
 * state at the breakpoint (a Jcc from RFLAGS, a direct JMP / CALL, a near RET from the return
 * address on the stack, an indirect JMP / CALL in 64-bit code from the register or the memory
 * it names): the vCPU stopped at the lead has not run it yet, anywhere in the
 * block it has.  The packets are those of swtrace_observe stepping the same instructions
 * (test_swtrace_ptrace replays real programs both ways, byte for byte).
 */
#define SWTRACE_BLOCK_MAX 64

#define SWTRACE_BLOCK_SEGS 4

struct swtrace_block {
    bool lead;        /* the block begins with the branch at lead_ip, to ip */
    uint64_t lead_ip; /* = the tracer's ip while the block is out */
    /* the lead is the block's end, its breakpoint (a loop's branch back to its head): the
     * vCPU goes out with RFLAGS.RF set, so the breakpoint lets the lead run once (SDM Vol. 3B
     * 17.3.1.1: RF keeps the first instruction's breakpoint from firing; the CPU clears it as
     * that instruction starts, and a fault in it saves RF set); at another exit there, RF
     * still set says it did not complete */
    bool lead_rf;
    /* from the successor table, and the shim noted its code pages in this window under the
     * CR3 the vCPU runs now (swtrace_block_noted): noting them again adds nothing */
    bool noted;
    uint64_t ip;           /* its first instruction */
    uint64_t end, end_lin; /* the first instruction after them: the breakpoint */
    unsigned n;            /* its instructions */
    uint8_t len[SWTRACE_BLOCK_MAX];
    /* its straight runs: run s starts at seg[s].ip with instruction seg[s].first; each but the
     * last ends with the direct JMP / CALL at seg[s].jmp to the next (the vCPU runs it) */
    unsigned nseg;
    struct {
        uint64_t ip, jmp;
        uint8_t first;
    } seg[SWTRACE_BLOCK_SEGS];
};

/* the IP of instruction i of b (i == b->n: its end) */
uint64_t swtrace_block_ip(const struct swtrace_block *b, unsigned i, enum x86_code_size cs);

/* the state the shim reads at the breakpoint to predict the branch there */
struct swtrace_regs {
    uint64_t rflags;
    /* RAX .. R15 as encoded (x86_class.h; RSP's slot is not read: swtrace_cpu.rsp), for an
     * indirect JMP / CALL in 64-bit code; NULL: such a branch is stepped */
    const uint64_t *gpr;
};

/* a block from the instruction about to run (no lead); 0: none (step it) */
unsigned swtrace_block_plan(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                            struct swtrace_block *b);

/* at the block's end (its breakpoint, the tracer settled there): the next block, led by the
 * branch there when its target is known; false: none (step the branch) */
bool swtrace_block_next(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                        const struct swtrace_regs *r, struct swtrace_block *b);

/* the block swtrace_block_next gave last had its code pages noted under cr3 (the shim's
 * code-page set, emptied with each window as the successor table is): a successor-table hit on
 * it in the same CR3 says so (swtrace_block.noted) */
void swtrace_block_noted(struct swtrace *t, uint64_t cr3);

/* the vCPU exited in state c while block b was out: what it ran goes into the trace and the
 * tracer is at c.  SWTRACE_SETTLED, SWTRACE_CLOSED (the budget closed the window), or
 * SWTRACE_NOT_IN_BLOCK (c is not on the block: nothing was changed; swtrace_observe judges c) */
enum { SWTRACE_SETTLED, SWTRACE_CLOSED, SWTRACE_NOT_IN_BLOCK };
int swtrace_block_settle(struct swtrace *t, const struct gw_mem *m, const struct swtrace_cpu *c,
                         const struct swtrace_block *b);

/* close the window before the instruction at the current IP */
void swtrace_stop(struct swtrace *t);

/*
 * The window's gaps, as every report of it gives them (TRACE_STATUS and TRACE_STOP at any CPL,
 * the dump's metadata, the VMM's line when the window closes): the OVF packets its stream holds,
 * each a place where the tracer lost the path of traced code -- what a PT decoder of the stream
 * reports as overflows.  A loss where the window is not (the kernel, another process, a start
 * trigger still armed) is no gap of it.
 */
static inline uint64_t swtrace_gaps(const struct swtrace *t)
{
    return t->pt.overflows;
}

#endif
