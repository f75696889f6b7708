/* SPDX-License-Identifier: MIT */
/*
 * Guest ToPA walker / validator.  See pt_topa.h for the bounds.
 *
 * Rules (pt-facts D.1-D.4, B.5; SDM Vol. 3C 33.2.7 "ToPA" and "ToPA Errors"):
 *  - OUTPUT_BASE bits 11:7 != 0 in ToPA mode: operational error (D.4).
 *  - entry reserved bits (1, 3, 5, 11:10, 63:MAXPHYADDR): operational error.
 *  - END together with INT or STOP: operational error (D.3).
 *  - END in entry 0 of a table: operational error.  This comes from the SDM
 *    "ToPA errors" list as recorded in pt-facts D.3, flagged there as not
 *    re-confirmed ("items not confirmed" #7).  We implement it because (a) it
 *    is what the fact sheet records, (b) no real driver (Linux) builds such a
 *    table, and (c) it guarantees every table holds an output region, so no
 *    chain of tables can make hardware (or this walker) spin without output.
 *  - region base not aligned to its size: operational error (D.1).
 *  - OutputOffset >= region size while STATUS.Stopped = 0: operational error.
 *  - single-entry ToPA (no CPUID.14.0:ECX[1]): entry 0 is an output region,
 *    entry 1 is END back to the same table, the table offset is 0 or 1 (the
 *    pointer may rest on the END after a fill); anything else is an
 *    operational error (D.2; SDM "ToPA Errors": entry 1 base != table base).
 *  - the END size field is ignored (only its base is used).
 * VMM rules on top (the guest sees them as operational errors too):
 *  - every byte of every table page and output region is guest RAM
 *    (never VMM memory, MMIO, unmapped or VMM-protected pages);
 *  - no output region overlaps a table page of this walk (the shadow's
 *    output bypasses the write-protection that keeps tables coherent);
 *  - the bounds in pt_topa.h;
 *  - FabricEn (output to the trace transport) is not virtualized.
 * Where the guest's current entry is an END entry (hardware may leave the
 * pointer there after filling the last region of a table), the walk starts at
 * the table it points to, as hardware does on its next output.
 */
#include <stddef.h>

#include "pt/pt_topa.h"
#include "pt/rtit.h"
#include "lib/range.h"

#define TOPA_RSVD_HIGH(maxpa) (~((1ull << (maxpa)) - 1))

static enum pt_topa_status fail(struct pt_topa_err *err, const char *reason, uint64_t gpa,
                                int32_t entry)
{
    err->reason = reason;
    err->gpa = gpa;
    err->entry = entry;
    return PT_TOPA_OPERR;
}

static const char *kind_reason(enum pt_mem_kind kind, bool table)
{
    switch (kind) {
    case PT_MEM_VMM:
        return table ? "ToPA table in VMM memory" : "output region in VMM memory";
    case PT_MEM_MMIO:
        return table ? "ToPA table in MMIO" : "output region in MMIO";
    case PT_MEM_PROTECTED:
        return table ? "ToPA table in a VMM-protected page"
                     : "output region in a VMM-protected page";
    case PT_MEM_COUNT:
        return "ToPA set-up too large to validate (VMM bound)";
    case PT_MEM_UNMAPPED:
    default:
        return table ? "ToPA table not in guest RAM" : "output region not in guest RAM";
    }
}

/*
 * Every byte of [gpa, gpa + size) is guest RAM.  size > 0; a range past 2^64 is not (the
 * callers' alignment and MAXPHYADDR checks already refuse one; lib/range.h).
 * *bad = PT_MEM_COUNT when the walk's translation budget ran out.
 */
static inline __attribute__((always_inline)) bool range_is_ram(const struct pt_mem_ops *mem,
                                                               struct pt_topa_walk *w, uint64_t gpa,
                                                               uint64_t size, enum pt_mem_kind *bad)
{
    uint64_t end;

    if (!range_end(gpa, size, &end)) {
        *bad = PT_MEM_UNMAPPED;
        return false;
    }
    while (gpa < end) {
        struct pt_mem_xlate x;
        uint64_t page_left = PT_PAGE_SIZE - (gpa & (PT_PAGE_SIZE - 1));

        if (w->xlates >= PT_TOPA_MAX_XLATE) {
            *bad = PT_MEM_COUNT;
            return false;
        }
        w->xlates++;
        pt_xlate(mem, &w->xc, gpa, &x);
        if (x.kind != PT_MEM_GUEST_RAM) {
            *bad = x.kind;
            return false;
        }
        if (x.len >= end - gpa)
            return true; /* one translation covers the rest */
        /* Never trust len below the page remainder: guarantees progress. */
        gpa += x.len > page_left ? (x.len < end - gpa ? x.len : end - gpa) : page_left;
    }
    return true;
}

static enum pt_topa_status add_table(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                     struct pt_topa_walk *w, uint64_t gpa, uint16_t *idx,
                                     struct pt_topa_err *err)
{
    enum pt_mem_kind bad;
    struct pt_mem_xlate x;

    for (uint16_t i = 0; i < w->ntables; i++) {
        if (w->tables[i].gpa == gpa) {
            *idx = i;
            return PT_TOPA_OK;
        }
    }
    if (w->ntables == PT_TOPA_MAX_TABLES)
        return fail(err, "too many ToPA tables (VMM bound)", gpa, -1);
    if (gpa >> cfg->maxphyaddr)
        return fail(err, "ToPA table beyond MAXPHYADDR", gpa, -1);
    if (!range_is_ram(mem, w, gpa, PT_PAGE_SIZE, &bad))
        return fail(err, kind_reason(bad, true), gpa, -1);
    pt_xlate(mem, &w->xc, gpa, &x); /* the translation range_is_ram() just made (no EPT walk) */
    w->tables[w->ntables].gpa = gpa;
    w->tables[w->ntables].hpa = x.hpa;
    w->tables[w->ntables].rd = mem->read_hpa64 ? x.hpa : gpa;
    w->tables[w->ntables].run0 = -1;
    *idx = w->ntables++;
    return PT_TOPA_OK;
}

static uint16_t new_run(struct pt_topa_walk *w, uint16_t table, uint16_t first_entry)
{
    /* Runs <= tables + 1 by construction: one per table's entry 0, plus run 0. */
    struct pt_topa_run *r = &w->runs[w->nruns];

    r->table = table;
    r->first_entry = first_entry;
    r->first_region = w->nregions;
    r->nregions = 0;
    r->nbig = 0;
    r->end = PT_RUN_END_STOP;
    r->end_entry = 0;
    r->next_run = 0;
    if (first_entry == 0)
        w->tables[table].run0 = (int16_t)w->nruns;
    return w->nruns++;
}

static inline __attribute__((always_inline)) enum pt_topa_status
read_entry(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem, struct pt_topa_walk *w,
           uint16_t table, uint32_t e, uint64_t *val, struct pt_topa_err *err)
{
    uint64_t tgpa = w->tables[table].gpa;
    uint64_t v;

    if (e >= PT_TOPA_ENTRIES_PER_TABLE)
        return fail(err, "no END inside the 4 KiB ToPA table (VMM bound)", tgpa, (int32_t)e);
    if (w->entries_read >= PT_TOPA_MAX_ENTRIES_READ)
        return fail(err, "ToPA walk too long (VMM bound)", tgpa, (int32_t)e);
    w->entries_read++;
    if (!w->read(mem->ctx, w->tables[table].rd + 8ull * e, &v))
        return fail(err, "ToPA table not readable", tgpa, (int32_t)e);
    *val = v;
    /* D.1: reserved bits */
    if (v & w->rsvd)
        return fail(err, "ToPA entry reserved bits set", tgpa, (int32_t)e);
    if (v & TOPA_END) {
        if (v & (TOPA_INT | TOPA_STOP))
            return fail(err, "ToPA END entry with INT or STOP", tgpa, (int32_t)e);
        if (e == 0)
            return fail(err, "ToPA END in entry 0", tgpa, 0);
    }
    if (!cfg->topa_multi) {
        if (e == 0 && (v & TOPA_END))
            return fail(err, "single-entry ToPA: entry 0 must be an output region", tgpa, 0);
        if (e == 1 && !(v & TOPA_END))
            return fail(err, "single-entry ToPA: entry 1 must be END", tgpa, 1);
        /* SDM Vol. 3C "ToPA Errors": with single-output-entry ToPA, table entry 1 with a base
         * address not matching the table base is an operational error (pt-facts D.2) */
        if (e == 1 && (v & TOPA_BASE_MASK(cfg->maxphyaddr)) != tgpa)
            return fail(err, "single-entry ToPA: END base does not match the table base", tgpa, 1);
    }
    return PT_TOPA_OK;
}

static enum pt_topa_status add_region(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                      struct pt_topa_walk *w, uint16_t table, uint32_t e,
                                      uint64_t val, struct pt_topa_err *err)
{
    uint64_t tgpa = w->tables[table].gpa;
    uint8_t log2size = (uint8_t)(12 + PTV_FIELD(val, TOPA_SIZE_SHIFT, 0xf));
    uint64_t size = 1ull << log2size;
    uint64_t base = val & w->base_mask;
    enum pt_mem_kind bad;

    if (base & (size - 1))
        return fail(err, "ToPA output region not aligned to its size", tgpa, (int32_t)e);
    /* Beyond MAXPHYADDR it cannot reach: base < 2^MAXPHYADDR (base_mask) and aligned to its
     * size, a power of two <= 128 MiB that divides 2^MAXPHYADDR (MAXPHYADDR >= 36). */
    uint64_t key = base | log2size; /* base is 4 KiB aligned, log2size < 4096 */
    uint64_t *slot = &w->rcache[((base >> 12) ^ log2size) % PT_TOPA_RCACHE];
    if (*slot != key) {
        if (size == PT_PAGE_SIZE) {
            /* range_is_ram()'s one step for one page (often the last translation again) */
            struct pt_mem_xlate x;
            if (w->xlates >= PT_TOPA_MAX_XLATE)
                return fail(err, kind_reason(PT_MEM_COUNT, false), tgpa, (int32_t)e);
            w->xlates++;
            pt_xlate(mem, &w->xc, base, &x);
            if (x.kind != PT_MEM_GUEST_RAM)
                return fail(err, kind_reason(x.kind, false), tgpa, (int32_t)e);
        } else if (!range_is_ram(mem, w, base, size, &bad)) {
            return fail(err, kind_reason(bad, false), tgpa, (int32_t)e);
        }
        *slot = key;
    }
    if (w->nregions >= w->max_regions)
        return fail(err, "too many ToPA output regions (VMM bound)", tgpa, (int32_t)e);
    w->regions[w->nregions++] =
        (struct pt_topa_region){.gpa = base,
                                .table = table,
                                .entry = (uint16_t)e,
                                .log2size = log2size,
                                .flags = (uint8_t)(val & (TOPA_INT | TOPA_STOP))};
    return PT_TOPA_OK;
}

/* Walk one run to its END, its STOP region, or the merge point. */
static enum pt_topa_status walk_run(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                    struct pt_topa_walk *w, uint16_t ri, uint16_t start_table,
                                    uint32_t start_entry, struct pt_topa_err *err)
{
    struct pt_topa_run *run = &w->runs[ri]; /* runs[] is a fixed array: new_run() keeps it */
    uint16_t table = run->table;
    uint32_t n = 0, nbig = 0; /* regions of this run, those larger than 4 KiB */
    enum pt_topa_status st;

    for (uint32_t e = run->first_entry;; e++) {
        uint64_t val;

        if (ri != 0 && table == start_table && e == start_entry) {
            run->end = PT_RUN_END_MERGE;
            run->next_run = 0;
            break;
        }
        st = read_entry(cfg, mem, w, table, e, &val, err);
        if (st != PT_TOPA_OK)
            return st;
        if (val & TOPA_END) {
            uint16_t next;
            st = add_table(cfg, mem, w, val & TOPA_BASE_MASK(cfg->maxphyaddr), &next, err);
            if (st != PT_TOPA_OK)
                return st;
            if (w->tables[next].run0 < 0)
                new_run(w, next, 0);
            run->end = PT_RUN_END_LINK;
            run->end_entry = (uint16_t)e;
            run->next_run = (uint16_t)w->tables[next].run0;
            break;
        }
        st = add_region(cfg, mem, w, table, e, val, err);
        if (st != PT_TOPA_OK)
            return st;
        n++;
        nbig += PTV_FIELD(val, TOPA_SIZE_SHIFT, 0xf) != 0;
        if (val & TOPA_STOP) {
            run->end = PT_RUN_END_STOP;
            break;
        }
    }
    run->nregions = n;
    run->nbig = nbig;
    return PT_TOPA_OK;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

static enum pt_topa_status walk_topa(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                     struct pt_topa_walk *w, struct pt_topa_err *err)
{
    uint64_t base = cfg->output_base;
    uint32_t cur =
        (uint32_t)PTV_FIELD(cfg->output_mask_ptrs, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
    uint64_t off = cfg->output_mask_ptrs >> RTIT_MASK_OUTPUT_OFFSET_SHIFT;
    uint16_t start_table;
    enum pt_topa_status st;
    uint64_t val;

    if (base & RTIT_MASK_LOWER)
        return fail(err, "OUTPUT_BASE bits 6:0 reserved", base, -1);
    if (base & 0xf80)
        return fail(err, "OUTPUT_BASE bits 11:7 not 0 in ToPA mode", base, -1);
    if (base >> cfg->maxphyaddr)
        return fail(err, "OUTPUT_BASE beyond MAXPHYADDR", base, -1);
    /* single-output-entry ToPA: the pointer is on entry 0, or rests on entry 1 (the END back to
     * this table) after the region filled; output goes on at entry 0, as hardware does */
    if (!cfg->topa_multi && cur > 1)
        return fail(err, "single-entry ToPA: table offset must be 0 or 1", base, (int32_t)cur);
    st = add_table(cfg, mem, w, base, &start_table, err);
    if (st != PT_TOPA_OK)
        return st;
    st = read_entry(cfg, mem, w, start_table, cur, &val, err);
    if (st != PT_TOPA_OK)
        return st;
    if (val & TOPA_END) {
        /* Current entry is END: output starts at entry 0 of the next table. */
        if (off != 0)
            return fail(err, "OutputOffset not 0 at an END entry", base, (int32_t)cur);
        st = add_table(cfg, mem, w, val & TOPA_BASE_MASK(cfg->maxphyaddr), &start_table, err);
        if (st != PT_TOPA_OK)
            return st;
        cur = 0;
    }
    new_run(w, start_table, (uint16_t)cur);
    for (uint16_t ri = 0; ri < w->nruns; ri++) {
        st = walk_run(cfg, mem, w, ri, start_table, cur, err);
        if (st != PT_TOPA_OK)
            return st;
    }
    /* D.4: OutputOffset must lie inside the current region unless Stopped. */
    if (!(cfg->status & RTIT_STATUS_STOPPED) &&
        off >= pt_region_size(&w->regions[w->runs[0].first_region]))
        return fail(err, "OutputOffset >= output region size", w->tables[start_table].gpa,
                    (int32_t)cur);
    w->start_offset = off;
    /* only regions reaching into [lowest table, highest table + 4 KiB) can overlap one */
    uint64_t tlo = UINT64_MAX, thi = 0;
    for (uint16_t t = 0; t < w->ntables; t++) {
        tlo = w->tables[t].gpa < tlo ? w->tables[t].gpa : tlo;
        thi = w->tables[t].gpa > thi ? w->tables[t].gpa : thi;
    }
    for (uint32_t i = 0; i < w->nregions; i++) {
        const struct pt_topa_region *r = &w->regions[i];
        if (!overlaps(r->gpa, pt_region_size(r), tlo, thi - tlo + PT_PAGE_SIZE))
            continue;
        for (uint16_t t = 0; t < w->ntables; t++) {
            if (overlaps(r->gpa, pt_region_size(r), w->tables[t].gpa, PT_PAGE_SIZE))
                return fail(err, "output region overlaps a ToPA table (VMM rule)",
                            w->tables[r->table].gpa, r->entry);
        }
    }
    return PT_TOPA_OK;
}

/* pt-facts B.5: single-range output, mask = MASK_PTRS[31:0] with bits 6:0 forced to 1. */
static enum pt_topa_status walk_single(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                       struct pt_topa_walk *w, struct pt_topa_err *err)
{
    uint64_t base = cfg->output_base;
    uint64_t mask = (cfg->output_mask_ptrs & 0xffffffffull) | RTIT_MASK_LOWER;
    uint64_t off = cfg->output_mask_ptrs >> RTIT_MASK_OUTPUT_OFFSET_SHIFT;
    enum pt_mem_kind bad;
    uint8_t log2size = 0;

    if (base & RTIT_MASK_LOWER)
        return fail(err, "OUTPUT_BASE bits 6:0 reserved", base, -1);
    if (mask & (mask + 1))
        return fail(err, "single-range mask not contiguous", base, -1);
    if (base & mask)
        return fail(err, "single-range base overlaps the mask", base, -1);
    if (off > mask)
        return fail(err, "single-range offset > mask", base, -1);
    if ((base + mask) >> cfg->maxphyaddr)
        return fail(err, "single-range buffer beyond MAXPHYADDR", base, -1);
    if (!range_is_ram(mem, w, base, mask + 1, &bad))
        return fail(err, kind_reason(bad, false), base, -1);
    if (w->max_regions < 1)
        return fail(err, "too many output regions (VMM bound)", base, -1);
    while ((1ull << log2size) != mask + 1)
        log2size++;
    w->single_range = true;
    w->regions[0] = (struct pt_topa_region){.gpa = base, .log2size = log2size};
    w->nregions = 1;
    w->start_offset = off;
    return PT_TOPA_OK;
}

enum pt_topa_status pt_out_walk(const struct pt_out_cfg *cfg, const struct pt_mem_ops *mem,
                                struct pt_topa_walk *w, struct pt_topa_err *err)
{
    w->single_range = false;
    w->ntables = 0;
    w->nruns = 0;
    w->nregions = 0;
    w->entries_read = 0;
    w->xlates = 0;
    w->start_offset = 0;
    w->xc.len = 0;
    w->read = mem->read_hpa64 ? mem->read_hpa64 : mem->read64;
    for (unsigned i = 0; i < PT_TOPA_RCACHE; i++)
        w->rcache[i] = 0; /* base 0 | log2size 0 is never a region key (log2size >= 12) */
    err->reason = NULL;
    err->gpa = 0;
    err->entry = -1;
    if (cfg->maxphyaddr < 36 || cfg->maxphyaddr > 52)
        return fail(err, "bad MAXPHYADDR", 0, -1);
    if (cfg->ctl & RTIT_CTL_FABRIC_EN)
        return fail(err, "trace transport output (FabricEn) not virtualized", 0, -1);
    w->rsvd = TOPA_RSVD_LOW | TOPA_RSVD_HIGH(cfg->maxphyaddr);
    w->base_mask = TOPA_BASE_MASK(cfg->maxphyaddr);
    if (cfg->ctl & RTIT_CTL_TOPA)
        return walk_topa(cfg, mem, w, err);
    return walk_single(cfg, mem, w, err);
}
