/* SPDX-License-Identifier: MIT */
/*
 * Reading guest memory by linear address, as the guest's CPU would translate it:
 * no paging, 32-bit (with 4 MiB pages), PAE, 4-level and 5-level paging (SDM Vol.
 * 3A 4.3-4.5).  Pure code: the VMM reads guest-physical memory through a callback
 * over EPT (vmm/trace/shim/trace_step.c), the host tests over a fake RAM.  The software
 * tracer uses it for the code bytes the guest is about to run and for the frame
 * an event pushed; it checks presence only (the CPU already decided access rights
 * for what it ran), and never follows a translation outside guest RAM.
 */
#ifndef PTV_GWALK_H
#define PTV_GWALK_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/range.h"

struct gw_mem {
    void *ctx;
    /* read len bytes (not crossing a 4 KiB page) of guest RAM at gpa; false where
     * gpa is not guest RAM (VMM memory, MMIO, unmapped) */
    bool (*read)(void *ctx, uint64_t gpa, void *buf, unsigned len);
    /* optional (NULL: none): the bytes of the guest RAM page at page-aligned gpa, readable
     * in place for as long as `gen` keeps its value (the VMM: its EPT shootdown count); NULL
     * where the page is not plain guest RAM.  The decode cache (bcache.h) reads the code
     * page of consecutive instructions through it instead of a copy per instruction. */
    const uint8_t *(*map)(void *ctx, uint64_t gpa);
    uint64_t gen;
};

/* the paging state that decides the walk (guest CR0/CR3/CR4/EFER as the guest sees them) */
struct gw_paging {
    uint64_t cr0, cr3, cr4, efer;
};

/* the linear space a read walks in, wrapping at its top (lib/range.h): 2^64 under IA-32e
 * paging, 4 GiB otherwise.  Compatibility mode's 32-bit addresses under IA-32e paging are the
 * caller's to mask: a read across 4 GiB there goes on at 4 GiB, not at 0 */
static inline uint64_t gw_space(const struct gw_paging *p)
{
    return p->efer & (1ull << 10) ? RANGE_SPACE64 : RANGE_SPACE32; /* EFER.LMA */
}

#define GW_E_NOTPRESENT (-1) /* a paging entry on the way is not present */
#define GW_E_MEM        (-2) /* a table or the data is not guest RAM */
#define GW_E_RIGHTS     (-3) /* the page is there but the access is not allowed */

/* linear -> guest-physical; 0 or GW_E_* */
int gw_translate(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, uint64_t *gpa);

/* linear -> guest-physical for a data write the guest itself could make at CPL cpl with these
 * RFLAGS (AC): every level of the walk present and, as SDM Vol. 3A 4.6.1 has it, writable by
 * that CPL (user: every level user and R/W; supervisor: R/W unless CR0.WP = 0, and not a user
 * page under CR4.SMAP with AC = 0).  Protection keys are not looked at (they are the process's
 * own restriction of its own pages).  0 or GW_E_*. */
int gw_translate_write(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
                       unsigned cpl, uint64_t rflags, uint64_t *gpa);

/* read len bytes at a linear address (may cross pages); 0 or GW_E_*; on error the
 * number of bytes read before the failing page is in *got (if got != NULL) */
int gw_read(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, void *buf,
            unsigned len, unsigned *got);

#endif
