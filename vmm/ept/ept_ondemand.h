/* SPDX-License-Identifier: MIT */
/*
 * On-demand identity maps above the identity map (device memory above RAM,
 * 64-bit BARs, and addresses where nothing answers), in bounded memory.
 *
 * The identity map (ept_identity.c) covers [0, floor); a guest access in
 * [floor, limit) that EPT cannot translate is identity mapped here, one block
 * at a time: 1 GiB where the CPU has 1 GiB pages and the MTRR type is uniform,
 * else 2 MiB, else 4 KiB (a mixed 4 KiB page is UC).  Identity onto nothing is
 * what bare metal does: the bus answers reads with all ones and drops writes.
 *
 * Bound: the table pages these maps link never exceed max_tables.  Before a
 * map that could pass it, every on-demand map is dropped at once (one
 * ept_unmap_prune() of [floor, limit), which unlinks every table there), the
 * caller's flush() executes INVEPT, and the retired tables are reused: the
 * EPT's pool footprint grows by at most max_tables pages for any sequence of
 * guest accesses.  Dropped maps fault in again when next touched.
 *
 * Invariant the caller keeps: nothing but this module maps GPAs >= floor
 * (the sink page and the PT engine only touch GPAs below floor), so every
 * table wholly above floor is an on-demand table -- except 4 KiB pages another
 * part of the VMM maps there and *pins* (ept_od_pin(), e.g. a relocated APIC
 * window): a drop leaves pinned pages (and the tables holding them) alone.
 */
#ifndef PTV_EPT_ONDEMAND_H
#define PTV_EPT_ONDEMAND_H

#include <stdint.h>
#include "ept/ept.h"
#include "ept/mtrr.h"

/* the default budget: 16 table pages (64 KiB) */
#define EPT_OD_MAX_TABLES 16u
#define EPT_OD_MAX_PINS   4u

struct ept_od {
    uint64_t floor, limit;    /* on-demand maps live in [floor, limit) */
    unsigned long max_tables; /* budget of linked table pages */
    unsigned long tables;     /* table pages linked for on-demand maps now */
    const struct mtrr_state *mtrr;
    /* executes INVEPT for e, then calls ept_flush_done(e) */
    void (*flush)(void *ctx, struct ept *e);
    void *ctx;
    unsigned long maps, drops;     /* counters: blocks mapped, drop-all rounds */
    uint64_t pin[EPT_OD_MAX_PINS]; /* 4 KiB pages a drop leaves alone, ascending */
    unsigned nr_pins;
};

/* the block ept_od_fault() mapped */
struct ept_od_map {
    uint64_t base, size;
    unsigned type; /* EPT_MT_* */
    bool dropped;  /* every older on-demand map was dropped first */
};

/*
 * floor and limit 1 GiB aligned, floor < limit <= ept_gpa_limit(e) and <=
 * 2^mtrr->maxphyaddr; max_tables >= e->levels - 1 (one map's worst case).
 */
int ept_od_init(struct ept_od *od, const struct ept *e, const struct mtrr_state *mtrr,
                uint64_t floor, uint64_t limit, unsigned long max_tables,
                void (*flush)(void *ctx, struct ept *e), void *ctx)
    __attribute__((warn_unused_result));

/*
 * Map the block holding gpa (which EPT does not translate).  0 and *m on
 * success; EPT_ENOENT if gpa is outside [floor, limit); EPT_ENOMEM if even
 * after dropping every on-demand map the allocator cannot give the tables.
 */
int ept_od_fault(struct ept_od *od, struct ept *e, uint64_t gpa, struct ept_od_map *m)
    __attribute__((warn_unused_result));

/*
 * Keep the 4 KiB page at gpa out of every drop (its owner maps it, at 4 KiB,
 * and unpins it when done).  A page outside [floor, limit) needs no pin: 0.
 * EPT_ENOMEM when EPT_OD_MAX_PINS are pinned.
 */
int ept_od_pin(struct ept_od *od, uint64_t gpa) __attribute__((warn_unused_result));
void ept_od_unpin(struct ept_od *od, uint64_t gpa);

/* Drop every on-demand map now (and INVEPT through flush()). */
int ept_od_drop_all(struct ept_od *od, struct ept *e) __attribute__((warn_unused_result));

#endif
