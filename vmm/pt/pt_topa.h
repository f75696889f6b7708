/* SPDX-License-Identifier: MIT */
/*
 * Guest ToPA walker and validator (and single-range output validation).
 *
 * From the guest's RTIT registers, walk the guest's ToPA tables through the
 * pt_mem interface (GPAs only, never host memory) and either return a validated
 * description of every table and output region the hardware could reach, or
 * the operational error hardware would raise (pt-facts D.4), with a reason and
 * the table/entry at fault.
 *
 * The walk is bounded and cannot loop:
 *  - at most PT_TOPA_MAX_TABLES distinct tables; a table is one 4 KiB page,
 *    so at most PT_TOPA_ENTRIES_PER_TABLE entries are read per table;
 *  - every table is walked from entry 0 at most once, plus the partial walk
 *    from the current entry, so at most (PT_TOPA_MAX_TABLES + 1) * 512 entries
 *    are read in total;
 *  - END back to an already walked table closes a cycle (the normal circular
 *    buffer) instead of walking again.
 * Limits beyond which the walk gives up (more tables, more regions than the
 * caller's array, a table without END inside its page) end as operational
 * errors for the guest; they are VMM limits, not hardware rules, and their
 * reason strings say so.
 */
#ifndef PTV_PT_TOPA_H
#define PTV_PT_TOPA_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_mem.h"
#include "pt/rtit.h"

#define PT_TOPA_ENTRIES_PER_TABLE 512 /* VMM bound: a guest table lives in one 4 KiB page */
#define PT_TOPA_MAX_TABLES        64  /* VMM bound on distinct guest tables */
#define PT_TOPA_MAX_RUNS          (PT_TOPA_MAX_TABLES + 1)
#define PT_TOPA_MAX_ENTRIES_READ  (PT_TOPA_MAX_RUNS * PT_TOPA_ENTRIES_PER_TABLE)
/*
 * VMM bound on the work of one walk: EPT translations spent checking that tables and output
 * regions are guest RAM.  An output region already checked in this walk (same base and size:
 * a ToPA may name one region many times) costs none (a small cache).  A set-up that needs more
 * is refused as an operational error, so a hostile ToPA costs a bounded amount per WRMSR.
 */
#define PT_TOPA_MAX_XLATE 65536
#define PT_TOPA_RCACHE    64 /* checked regions remembered per walk (direct-mapped) */

/* What the walker needs to know: raw RTIT values and the guest's capabilities. */
struct pt_out_cfg {
    uint64_t ctl;              /* IA32_RTIT_CTL as the guest wrote it */
    uint64_t status;           /* IA32_RTIT_STATUS (only Stopped is used) */
    uint64_t output_base;      /* IA32_RTIT_OUTPUT_BASE */
    uint64_t output_mask_ptrs; /* IA32_RTIT_OUTPUT_MASK_PTRS */
    bool topa_multi;           /* guest CPUID.(14H,0):ECX[1], multiple ToPA entries */
    unsigned maxphyaddr;       /* the guest's MAXPHYADDR, 36..52 */
};

/* One output region (ToPA entry without END), or the single-range buffer. */
struct pt_topa_region {
    uint64_t gpa;
    uint16_t table;   /* index into walk->tables[] (0 for single-range) */
    uint16_t entry;   /* entry index in that table (0 for single-range) */
    uint8_t log2size; /* 12..27 for ToPA (4 KiB << Size), 7..32 for single-range */
    uint8_t flags;    /* TOPA_INT | TOPA_STOP as in the guest entry */
};

struct pt_topa_table {
    uint64_t gpa;
    uint64_t hpa; /* its translation */
    uint64_t rd;  /* where walk->read reads entry 0: hpa (read_hpa64) or gpa (read64) */
    int16_t run0; /* run that starts at entry 0, -1 if no END leads here */
};

/*
 * A run is what hardware walks from one starting point: from the current entry
 * (run 0) or from entry 0 of a table an END points to, to the END, the STOP
 * region, or (only for the current table when the current entry is not 0) up
 * to the current entry, where it merges into run 0.
 */
enum pt_run_end {
    PT_RUN_END_LINK,  /* guest END entry at end_entry -> runs[next_run] */
    PT_RUN_END_STOP,  /* last region has STOP: hardware reads nothing further */
    PT_RUN_END_MERGE, /* reached the current entry: continues in runs[next_run] (= 0) */
};

struct pt_topa_run {
    uint16_t table;
    uint16_t first_entry;
    uint32_t first_region; /* regions of a run are consecutive in walk->regions[] */
    uint32_t nregions;     /* >= 1 always */
    uint32_t nbig;         /* regions larger than 4 KiB among them */
    uint8_t end;           /* enum pt_run_end */
    uint16_t end_entry;    /* LINK: index of the guest END entry */
    uint16_t next_run;
};

struct pt_topa_walk {
    /* set by the caller */
    struct pt_topa_region *regions;
    uint32_t max_regions;
    /* results */
    bool single_range; /* regions[0] is the single-range buffer; no tables, no runs */
    uint16_t ntables;
    uint16_t nruns;
    uint32_t nregions;
    uint32_t entries_read;
    uint32_t xlates;                 /* EPT translations spent (bounded by PT_TOPA_MAX_XLATE) */
    uint64_t start_offset;           /* OutputOffset inside runs[0]'s first region */
    uint64_t rcache[PT_TOPA_RCACHE]; /* base | log2size of regions found to be guest RAM */
    struct pt_xlate_cache xc;        /* the last translation (pt_mem.h), reset by each walk */
    uint64_t rsvd, base_mask;        /* entry reserved bits, entry base bits (MAXPHYADDR) */
    bool (*read)(void *ctx, uint64_t addr, uint64_t *val); /* read_hpa64 if offered, else read64 */
    struct pt_topa_table tables[PT_TOPA_MAX_TABLES];
    struct pt_topa_run runs[PT_TOPA_MAX_RUNS];
};

/* Where and why the guest's setup is illegal. */
struct pt_topa_err {
    const char *reason;
    uint64_t gpa;  /* the table (or OUTPUT_BASE) at fault */
    int32_t entry; /* entry index, -1 when a register is at fault */
};

enum pt_topa_status {
    PT_TOPA_OK = 0,
    PT_TOPA_OPERR, /* hardware would raise an operational error (STATUS.Error) */
};

/* Walk and validate the guest's output configuration (ToPA or single-range). */
enum pt_topa_status pt_out_walk(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                struct pt_topa_walk *w, struct pt_topa_err *err)
    __attribute__((warn_unused_result));

/* Size in bytes of a region. */
static inline uint64_t pt_region_size(const struct pt_topa_region *r)
{
    return 1ull << r->log2size;
}

/* STATUS as the guest sees it after an operational error (pt-facts D.4). */
static inline uint64_t pt_status_operr(uint64_t status)
{
    return (status | RTIT_STATUS_ERROR) & ~RTIT_STATUS_TRIGGEREN;
}

#endif
