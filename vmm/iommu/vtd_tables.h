/* SPDX-License-Identifier: MIT */
/*
 * The DMA-remapping tables every unit gets (Intel VT-d spec rev 4.1, chapter 9, legacy mode):
 * one root table whose 256 bus entries all point to one context table whose 256 device/function
 * entries all name domain VTD_DOMAIN_ID and one second-level page table.  That table maps [0, top)
 * 1:1, read and write, except the VMM's own memory (the handoff map's PTV_MEM_VMM ranges: the same
 * source ept_build_identity() leaves out for the CPU) and the holes the caller adds (the remapping
 * units' register sets).  top is the EPT identity map's: max(4 GiB, end of the highest range),
 * rounded up to 1 GiB.  2 MiB / 1 GiB pages wherever a block holds no excluded byte and every unit
 * can map them.
 *
 * Every device on a segment a unit covers gets the same view, so the DMAR's device scopes do not
 * matter for what is mapped: any unit may take any device.  Context entries use translation type
 * 00 (untranslated requests only): a device's "already translated" (ATS) requests are blocked.
 *
 * Pure code: pages come from a callback; host-tested (test_vtd_tables, against the EPT identity
 * map) and compiled unchanged into the VMM and the QEMU test program.
 */
#ifndef PTV_IOMMU_VTD_TABLES_H
#define PTV_IOMMU_VTD_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptv/handoff.h"

#define VTD_DOMAIN_ID     1 /* 0 is reserved where the unit has caching mode (VT-d 9.3) */
#define VTD_TABLE_ENTRIES 512
#define VTD_ROOT_ENTRIES  256

/* second-level paging entry bits (VT-d 9.8) */
#define VTD_SL_R         (1ull << 0)
#define VTD_SL_W         (1ull << 1)
#define VTD_SL_PS        (1ull << 7)
#define VTD_SL_ADDR_MASK 0x000ffffffffff000ull
/* root / context entry bits (VT-d 9.1, 9.3) */
#define VTD_RE_P            (1ull << 0)
#define VTD_CE_P            (1ull << 0)
#define VTD_CE_HI_AW_SHIFT  0
#define VTD_CE_HI_DID_SHIFT 8

/* bytes one entry of a level-l table maps: 4 KiB at level 1, 2 MiB at 2, 1 GiB at 3, ... */
#define VTD_LEVEL_SIZE(l) (1ull << (12 + 9 * ((l)-1)))

struct vtd_range {
    uint64_t base, size;
};

struct vtd_map_in {
    const struct ptv_mem_range *mem; /* the handoff's map (sorted or not) */
    unsigned n;
    const struct vtd_range *hole; /* also left out (rounded out to 4 KiB) */
    unsigned n_hole;
    unsigned levels;     /* 3, 4 or 5 (39-, 48-, 57-bit address width) */
    bool has_2m, has_1g; /* every unit maps such pages (CAP.SLLPS) */
};

struct vtd_page_ops {
    void *(*alloc_page)(void *ctx, uint64_t *pa);       /* a 4 KiB page (contents: any) */
    void (*flush)(void *ctx, const void *va, size_t n); /* to memory; NULL if every unit snoops */
    void *ctx;
};

struct vtd_tables {
    uint64_t root_pa; /* what every unit's RTADDR gets */
    uint64_t top;     /* [0, top) is the mapped span */
    unsigned levels;
    unsigned long pages;     /* root + context + second-level tables */
    unsigned long leaves[3]; /* 4 KiB, 2 MiB, 1 GiB */
};

/* the span [0, *top) in would map (false and err set if in is malformed); in->levels may be any
 * walk here (5 checks the most): what a caller needs before it chooses one */
bool vtd_tables_span(const struct vtd_map_in *in, uint64_t *top, char *err, size_t cap)
    __attribute__((warn_unused_result));

/* the span and the pages vtd_tables_build() would take for in (0 and err set if refused) */
unsigned long vtd_tables_pages(const struct vtd_map_in *in, uint64_t *top, char *err, size_t cap);

/*
 * Build the tables for in into pages from ops.  Checks in first (ranges 4 KiB aligned, types
 * known, top within the levels' reach) and allocates nothing if it refuses.  False with one line
 * in err on a refusal or when ops runs out (the pages taken so far are not given back).
 */
bool vtd_tables_build(const struct vtd_map_in *in, const struct vtd_page_ops *ops,
                      struct vtd_tables *out, char *err, size_t cap)
    __attribute__((warn_unused_result));

#endif
