/* SPDX-License-Identifier: MIT */
/*
 * Shadow ToPA: host ToPA tables whose entries are the guest's output regions
 * translated to host-physical addresses, plus the map back to what the guest
 * must see in OUTPUT_BASE / OUTPUT_MASK_PTRS.  ARCHITECTURE.md section 3.
 *
 * Build = walk + validate (pt_topa.c), plan, allocate, fill, write-protect the
 * guest table pages, and only then commit (free the previous shadow).  A
 * failure for want of VMM memory (NOMEM) leaves the previous shadow exactly as
 * it was.  A refused set-up (OPERR) replaces the previous shadow, which no CPU
 * uses at that point (builds run at guest TraceEn 0->1, or with the guest's
 * hardware trace stopped), by a *refusal record* (PT_SHADOW_REFUSED): the
 * guest registers and the reason, with the guest table pages the walk read
 * write-protected.  Until the guest writes one of those pages, the memory map
 * changes (pt_shadow_mem_changed) or its registers differ, another TraceEn
 * 0->1 is refused again at once, without a walk (a hostile set-up
 * costs its bounded walk once, not at every retry).
 *
 * Host layout:
 *  - a guest region contiguous in GPA but not in HPA is split into several
 *    host entries, each aligned to its own size in HPA (pt-facts D.1);
 *  - INT and STOP only on the last host piece of the guest region, so the PMI
 *    and the stop happen when the guest's region is full, not earlier;
 *  - every walk run (pt_topa.h) starts a host table page; runs longer than a
 *    host page chain through host-only END entries; a guest END becomes a host
 *    END to the first page of the target run, including the circular back-link;
 *  - every host table page holds at least one output entry before its END, so
 *    the host never has an END in entry 0; with a single-entry host
 *    (no CPUID.14.0:ECX[1]) every host page is [region, END] (pt-facts D.2).
 * Next to each host table page sits a metadata page (never given to hardware)
 * with, per host entry, the guest position it stands for: (guest table,
 * guest entry, offset in the guest region).  For END entries it is the guest
 * position the link leads to.
 *
 * Single-range output: one host single range if the buffer is contiguous and
 * size-aligned in HPA (or smaller than a page); otherwise, if the host has
 * ToPA, a circular host ToPA without INT/STOP whose offsets map back to the
 * guest's single-range offset exactly (host RTIT_CTL.ToPA = 1 while the guest
 * sees ToPA = 0: see pt_shadow.h_topa); otherwise an operational error.
 *
 * Guest edits of protected table pages (pt_shadow_table_write): the SDM forbids
 * modifying in-use tables while TraceEn = 1 (pt-facts D.3) and lets the CPU
 * cache entries.  Defined outcome here, tracing or not: the engine lifts the
 * protection of all the guest's table pages, marks the shadow stale and lets
 * the guest's write complete (the VMM resumes the guest without emulation).
 * If tracing, the hardware keeps using the current shadow, exactly as if it had
 * cached the old entries; its regions are guest RAM validated at build, so no
 * byte can land outside the guest.  The edit takes effect at the next
 * TraceEn 0->1, where the VMM calls pt_shadow_prepare(), which rebuilds.
 */
#ifndef PTV_PT_SHADOW_H
#define PTV_PT_SHADOW_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_mem.h"
#include "pt/pt_topa.h"

#define PT_SHADOW_MAX_PAGES    128 /* host table pages per shadow (VMM bound) */
#define PT_SHADOW_HOST_ENTRIES 512 /* entries per host table page */
#define PT_TOPA_MAX_LOG2SIZE   27  /* Size = 15: 128 MiB */

/* Guest position a host entry stands for.  512 of them fill one page. */
struct pt_shadow_pos {
    uint16_t gtable; /* index in pt_shadow.table_gpa[] */
    uint16_t gentry; /* guest entry index */
    uint32_t goff;   /* offset in the guest region */
};
_Static_assert(sizeof(struct pt_shadow_pos) * PT_SHADOW_HOST_ENTRIES == PT_PAGE_SIZE,
               "one metadata page per host table page");

struct pt_shadow_page {
    uint64_t *tbl;             /* host ToPA table (VMM virtual address) */
    struct pt_shadow_pos *map; /* metadata page */
    uint64_t hpa;              /* host-physical address of tbl */
    uint64_t map_hpa;
    uint16_t n; /* entries used, END included */
};

enum pt_shadow_mode {
    PT_SHADOW_NONE = 0,
    PT_SHADOW_TOPA,           /* guest ToPA -> host ToPA */
    PT_SHADOW_SINGLE,         /* guest single-range -> host single-range */
    PT_SHADOW_SINGLE_AS_TOPA, /* guest single-range -> host circular ToPA */
    PT_SHADOW_REFUSED,        /* no shadow: a refused set-up, remembered (below) */
};

struct pt_shadow {
    uint8_t mode;               /* enum pt_shadow_mode */
    bool protected;             /* the guest table pages below are write-protected */
    bool stale;                 /* a guest table page was written since the build */
    uint64_t g_base, g_mask;    /* guest OUTPUT_BASE / MASK_PTRS the shadow was built from */
    uint64_t g_ctl_topa;        /* guest RTIT_CTL.ToPA at build */
    uint64_t g_ctl_fabric;      /* guest RTIT_CTL.FabricEn at build */
    uint64_t g_stopped;         /* guest RTIT_STATUS.Stopped at build */
    struct pt_topa_err refusal; /* PT_SHADOW_REFUSED: why */
    bool h_topa;                /* load host RTIT_CTL.ToPA = h_topa */
    uint64_t h_base, h_mask;    /* host OUTPUT_BASE / MASK_PTRS to load */
    uint16_t h_page;            /* hint: pages[] index of h_base (checked before use) */
    uint16_t ntables;
    uint16_t npages;
    uint64_t table_gpa[PT_TOPA_MAX_TABLES];
    struct pt_shadow_page pages[PT_SHADOW_MAX_PAGES];
};

/* Host capabilities and services the builder uses. */
struct pt_shadow_env {
    const struct pt_mem_ops *mem;
    const struct pt_page_alloc *alloc;
    bool host_topa;         /* host CPUID.14.0:ECX[0] */
    bool host_topa_multi;   /* host CPUID.14.0:ECX[1] */
    bool host_single_range; /* host CPUID.14.0:ECX[2] */
};

/* Working memory for one build; the caller sets walk.regions / max_regions. */
struct pt_shadow_scratch {
    struct pt_topa_walk walk;
    struct pt_shadow next;
    uint32_t run_pages[PT_TOPA_MAX_RUNS]; /* host pages per run */
    uint32_t run_first[PT_TOPA_MAX_RUNS]; /* first host page of each run */
};

enum pt_shadow_status {
    PT_SHADOW_OK = 0,
    PT_SHADOW_OPERR, /* guest setup illegal: guest sees STATUS.Error (pt_status_operr) */
    PT_SHADOW_NOMEM, /* VMM out of pages or EPT split failed; previous state kept */
};

void pt_shadow_init(struct pt_shadow *sh);

/* Build a new shadow from the guest's registers; commit only on success. */
enum pt_shadow_status pt_shadow_build(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                      const struct pt_shadow_env *env, const struct pt_out_cfg *cfg,
                                      struct pt_topa_err *err) __attribute__((warn_unused_result));

/*
 * Call at guest TraceEn 0->1: reuse the current shadow when it is still exact
 * for the guest's registers (not stale, same tables, position found in it),
 * otherwise rebuild.
 */
enum pt_shadow_status pt_shadow_prepare(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                        const struct pt_shadow_env *env,
                                        const struct pt_out_cfg *cfg, struct pt_topa_err *err)
    __attribute__((warn_unused_result));

/* Unprotect the guest tables and free every host page. */
void pt_shadow_destroy(struct pt_shadow *sh, const struct pt_shadow_env *env);

/*
 * The guest-visible OUTPUT_BASE / OUTPUT_MASK_PTRS for host register values as
 * the hardware left them.  Returns false (and the build-time guest values) if
 * the host values are not a position of this shadow.
 */
bool pt_shadow_guest_view(const struct pt_shadow *sh, uint64_t h_base, uint64_t h_mask,
                          uint64_t *g_base, uint64_t *g_mask);

/*
 * The EPT mapping of some guest memory changed (remap, unmap, kind change): host addresses in
 * the shadow may be stale.  Marks the shadow (or refusal record) stale; the next
 * pt_shadow_prepare() rebuilds.  A caller whose CPU is tracing through the shadow must rebuild
 * before the next VM entry (pt_ctrl does).
 */
void pt_shadow_mem_changed(struct pt_shadow *sh);

enum pt_shadow_wp_action {
    PT_SHADOW_WP_NOT_OURS = 0, /* not a page of this shadow: someone else's violation */
    PT_SHADOW_WP_RETRY,        /* protection lifted, shadow stale: resume the guest */
};

/* EPT write violation at gpa: see the header comment for the defined outcome. */
enum pt_shadow_wp_action pt_shadow_table_write(struct pt_shadow *sh,
                                               const struct pt_shadow_env *env, uint64_t gpa);

#endif
