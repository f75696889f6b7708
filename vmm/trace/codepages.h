/* SPDX-License-Identifier: MIT */
/*
 * The code pages a trace window executed ("code snapshots"): a bounded set of
 * (address space, page) with a CRC32 of the page's bytes when it first ran.  A dump sends each
 * page's bytes as they are at dump time and says which ones no longer match their CRC: the
 * host tool never decodes silently against bytes that did not run (Linux patches its own
 * text at run time).  Pure code, shared by the VMM shim (trace/shim/trace_step.c, trace_vmx.c)
 * and the host tests.
 *
 * Pages in the upper canonical half (a 64-bit kernel) are shared by every address space and
 * kept once, with cr3 = CP_CR3_ANY.
 */
#ifndef PTV_TRACE_CODEPAGES_H
#define PTV_TRACE_CODEPAGES_H

#include <stdbool.h>
#include <stdint.h>

#define CP_CR3_ANY   0xffffffffffffffffull
#define CP_PAGE      4096ull
#define CP_KERNEL_LO 0xffff800000000000ull

struct cp_entry {
    uint64_t va; /* page-aligned linear address; 0 with cr3 == 0: a free slot */
    uint64_t cr3;
    uint32_t crc;  /* CRC32 of the page when it first ran */
    uint32_t seen; /* 1: the CRC is valid (the page could be read) */
};

struct codepages {
    struct cp_entry *e;
    uint32_t cap;      /* a power of two; the set holds at most cap * 3 / 4 pages */
    uint32_t n;        /* pages recorded */
    uint64_t overflow; /* pages not recorded because the set was full */
    uint64_t last_va, last_cr3;
    bool last_valid;
};

/* mem: cap entries (cap a power of two, >= 4) the caller owns */
void cp_init(struct codepages *s, struct cp_entry *mem, uint32_t cap);
void cp_reset(struct codepages *s);
/* the (address space, page) of linear address va: what cp_note keys on */
void cp_key(uint64_t cr3, uint64_t va, uint64_t *key_cr3, uint64_t *key_va);
/* 1: a new page (the caller then sets its CRC with cp_set_crc), 0: known, -1: the set is full */
int cp_note(struct codepages *s, uint64_t cr3, uint64_t va);
void cp_set_crc(struct codepages *s, uint64_t cr3, uint64_t va, uint32_t crc);
/* entry i (0 <= i < cap) if used, in slot order; NULL for a free slot */
const struct cp_entry *cp_slot(const struct codepages *s, uint32_t i);

#endif
