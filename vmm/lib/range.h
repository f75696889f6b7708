/* SPDX-License-Identifier: MIT */
/*
 * Walking an address range piece by piece, wrap-safe: the pages of a guest access (instruction
 * bytes, a stack frame, a guest memory copy), the code pages a dump sends.  A walk over
 * [start, start + len) visits its pieces in order, none crossing a chunk boundary (chunk: a
 * power of two, a page), and ends after len bytes whatever start is: every piece is at least
 * one byte, so there are at most len / chunk + 2 of them.  Never write the loop by hand as
 * `for (a = start; a <= start + n; a = (a | (chunk - 1)) + 1)`: in the last chunk of the
 * address space `(a | (chunk - 1)) + 1` wraps to 0, which is <= start + n again, and the walk
 * goes round the whole space (the tracer's CPU stuck in root for good).
 *
 * An address space wraps: `space` is its last address.  The VMM never hangs on, nor refuses, a
 * guest access across the top; it reads on from address 0, as the CPU computes the address.  In
 * 64-bit mode linear addresses are 64-bit sums (SDM Vol. 1 3.3.7); 0xffff_ffff_ffff_ffff and 0
 * are both canonical, so the SDM defines no fault for an access across the top and it goes on
 * at 0 (Bochs' split accesses: the second page at laddr + len1, mod 2^64).  Outside 64-bit mode
 * linear addresses are 32 bits (compatibility mode reaches the low 4 GBytes only, SDM Vol. 1
 * 3.3.7; legacy mode has a 4-GByte linear space) and wrap at 4 GiB.  The software tracer only
 * reads what the guest's CPU fetched, so this decides which bytes it decodes and which code
 * pages it keeps, never what the guest sees.  A physical range does not wrap: check it with
 * range_fits() / range_end() first (TRACE_READ and ToPA regions refuse one that does not fit).
 *
 * Pure and header-only: the VMM and its host tests (tests/unit/lib/test_range.c) include it.
 */
#ifndef PTV_LIB_RANGE_H
#define PTV_LIB_RANGE_H

#include <stdbool.h>
#include <stdint.h>

#define RANGE_SPACE64 (~0ull)       /* linear addresses in 64-bit mode, physical addresses */
#define RANGE_SPACE32 0xffffffffull /* linear addresses outside 64-bit mode */

struct range_walk {
    uint64_t addr; /* the piece: [addr, addr + len) inside one chunk, addr <= space */
    uint64_t len;
    uint64_t done; /* bytes of the range before the piece */
    uint64_t start, total, chunk, space;
};

/* a walk over the len bytes from start (start is taken mod space + 1) */
static inline struct range_walk range_walk(uint64_t start, uint64_t len, uint64_t chunk,
                                           uint64_t space)
{
    return (struct range_walk){.start = start, .total = len, .chunk = chunk, .space = space};
}

/* the next piece into w->addr / w->len; false once the range is done */
static inline bool range_next(struct range_walk *w)
{
    w->done += w->len;
    if (w->done >= w->total)
        return false;
    w->addr = (w->start + w->done) & w->space;
    uint64_t room = w->chunk - (w->addr & (w->chunk - 1)), left = w->total - w->done;
    w->len = room < left ? room : left;
    return true;
}

/* for (each piece of [start, start + len)) with the piece in w->addr, w->len */
#define range_for_each(w, start, len, chunk, space)                                                \
    for (*(w) = range_walk((start), (len), (chunk), (space)); range_next(w);)

/* [start, start + len) lies inside [0, space] without wrapping (an empty range always does) */
static inline bool range_fits(uint64_t start, uint64_t len, uint64_t space)
{
    return !len || (start <= space && len - 1 <= space - start);
}

/* *end = start + len, the end of a range for a `while (a < end)` loop, where that is an
 * address: false (and no such loop) where the range reaches 2^64, whose end wraps to 0 or past */
static inline bool range_end(uint64_t start, uint64_t len, uint64_t *end)
{
    *end = start + len;
    return len <= ~start;
}

#endif
