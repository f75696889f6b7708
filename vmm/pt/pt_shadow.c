/* SPDX-License-Identifier: MIT */
/*
 * Shadow ToPA builder: plan, allocate, fill, protect, commit.  See pt_shadow.h.
 */
#include <stddef.h>

#include "lib/ptv_string.h"
#include "pt/pt_shadow.h"
#include "pt/rtit.h"

/* Output entries per host table page: the last slot is always kept for END. */
static uint32_t host_cap(const struct pt_shadow_env *env)
{
    return env->host_topa_multi ? PT_SHADOW_HOST_ENTRIES - 1 : 1;
}

/*
 * Bytes from gpa that are guest RAM and contiguous in HPA after x (x = the
 * translation of gpa, RAM), looked for up to want: a translation may end at an
 * EPT leaf (pt_mem.h), so the next ones are asked while the answer is still
 * short of want.  HPA-contiguous RAM leaves count as one stretch, so what the
 * builder makes does not depend on the leaf sizes.  Translations come from the
 * walk's cache (pt_xlate): one EPT walk serves every piece inside a mapping.
 */
static uint64_t contig_len(const struct pt_mem_ops *mem, struct pt_xlate_cache *xc, uint64_t gpa,
                           const struct pt_mem_xlate *x, uint64_t want)
{
    uint64_t len = x->len < PT_PAGE_SIZE ? PT_PAGE_SIZE : x->len;

    while (len < want) {
        struct pt_mem_xlate y;
        pt_xlate(mem, xc, gpa + len, &y);
        if (y.kind != PT_MEM_GUEST_RAM || y.hpa != x->hpa + len || !y.len)
            break;
        len += y.len;
    }
    return len;
}

/*
 * The next host piece of a region at gpa with rem bytes left: the largest
 * power of two (4 KiB..128 MiB) that is contiguous in HPA, fits in rem and is
 * aligned to its size in HPA (pt-facts D.1).  false if gpa is no longer RAM.
 */
static inline __attribute__((always_inline)) bool next_piece(const struct pt_mem_ops *mem,
                                                             struct pt_xlate_cache *xc,
                                                             uint64_t gpa, uint64_t rem,
                                                             uint64_t *hpa, uint8_t *log2)
{
    struct pt_mem_xlate x;
    uint64_t len, want;
    uint8_t k;

    pt_xlate(mem, xc, gpa, &x);
    if (x.kind != PT_MEM_GUEST_RAM || (x.hpa & (PT_PAGE_SIZE - 1)))
        return false;
    if (rem == PT_PAGE_SIZE) { /* a 4 KiB piece: nothing else to look at */
        *hpa = x.hpa;
        *log2 = 12;
        return true;
    }
    /* the largest piece x.hpa can start: aligned to its size, at most 128 MiB, at most rem */
    want = 1ull << PT_TOPA_MAX_LOG2SIZE;
    if (x.hpa && (x.hpa & -x.hpa) < want)
        want = x.hpa & -x.hpa;
    if (rem < want)
        want = rem;
    len = contig_len(mem, xc, gpa, &x, want);
    if (len > rem)
        len = rem;
    /* the largest 2^k <= len that x.hpa is aligned to, at most 128 MiB (len >= 4 KiB) */
    k = (uint8_t)(63 - __builtin_clzll(len));
    if (x.hpa && __builtin_ctzll(x.hpa) < k)
        k = (uint8_t)__builtin_ctzll(x.hpa);
    if (k > PT_TOPA_MAX_LOG2SIZE)
        k = PT_TOPA_MAX_LOG2SIZE;
    *hpa = x.hpa;
    *log2 = k;
    return true;
}

/* Count host pieces of one region (for planning). 0 on failure. */
static uint64_t count_pieces(const struct pt_mem_ops *mem, struct pt_xlate_cache *xc, uint64_t gpa,
                             uint64_t size)
{
    uint64_t n = 0, off = 0;

    while (off < size) {
        uint64_t hpa;
        uint8_t k;
        if (!next_piece(mem, xc, gpa + off, size - off, &hpa, &k))
            return 0;
        off += 1ull << k;
        n++;
    }
    return n;
}

struct filler {
    const struct pt_shadow_env *env;
    struct pt_xlate_cache *xc;
    uint32_t cap; /* host_cap() */
    struct pt_shadow *sh;
    uint32_t page;      /* current page */
    uint32_t page_end;  /* one past the last page of this run */
    uint32_t start_reg; /* region holding the start position */
    uint64_t start_off;
    bool start_found;
};

static void put(struct pt_shadow_page *p, uint64_t entry, struct pt_shadow_pos pos)
{
    p->tbl[p->n] = entry;
    p->map[p->n] = pos;
    p->n++;
}

/* Append one output piece; chain to the next page of the run when full. */
static inline __attribute__((always_inline)) bool
fill_piece(struct filler *f, uint64_t hpa, uint8_t log2, uint64_t flags, struct pt_shadow_pos pos)
{
    struct pt_shadow_page *p = &f->sh->pages[f->page];

    if (p->n == f->cap) {
        if (f->page + 1 >= f->page_end)
            return false; /* more pieces than planned: EPT changed under us */
        put(p, f->sh->pages[f->page + 1].hpa | TOPA_END, pos);
        p = &f->sh->pages[++f->page];
    }
    put(p, hpa | ((uint64_t)(log2 - 12) << TOPA_SIZE_SHIFT) | flags, pos);
    return true;
}

/* The start position lies in the piece [off, off + 2^k) of its region, just put. */
static void set_start(struct filler *f, uint64_t off, uint8_t k)
{
    const struct pt_shadow_page *p = &f->sh->pages[f->page];
    uint64_t hoff = f->start_off - off;

    if (hoff > (1ull << k))
        hoff = 1ull << k; /* only when Stopped: see pt_shadow_guest_view */
    f->sh->h_base = p->hpa;
    f->sh->h_page = (uint16_t)f->page;
    f->sh->h_mask = RTIT_MASK_LOWER | ((uint64_t)(p->n - 1) << RTIT_MASK_TABLE_OFFSET_SHIFT) |
                    (hoff << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
    f->start_found = true;
}

static bool fill_region(struct filler *f, const struct pt_topa_region *r, uint32_t ri,
                        uint16_t gtable)
{
    uint64_t size = pt_region_size(r), off = 0;

    if (size == PT_PAGE_SIZE) { /* one piece: the page (what the loop below does, shorter) */
        struct pt_mem_xlate x;
        pt_xlate(f->env->mem, f->xc, r->gpa, &x);
        if (x.kind != PT_MEM_GUEST_RAM || (x.hpa & (PT_PAGE_SIZE - 1)) ||
            !fill_piece(f, x.hpa, PT_PAGE_SHIFT, r->flags & (TOPA_INT | TOPA_STOP),
                        (struct pt_shadow_pos){gtable, r->entry, 0}))
            return false;
        if (ri == f->start_reg && !f->start_found)
            set_start(f, 0, PT_PAGE_SHIFT);
        return true;
    }

    while (off < size) {
        uint64_t hpa, flags = 0;
        uint8_t k;
        struct pt_shadow_pos pos = {gtable, r->entry, (uint32_t)off};

        if (!next_piece(f->env->mem, f->xc, r->gpa + off, size - off, &hpa, &k))
            return false;
        if (off + (1ull << k) == size)
            flags = r->flags & (TOPA_INT | TOPA_STOP); /* last piece only */
        if (!fill_piece(f, hpa, k, flags, pos))
            return false;
        if (ri == f->start_reg && !f->start_found &&
            (f->start_off < off + (1ull << k) || off + (1ull << k) == size))
            set_start(f, off, k);
        off += 1ull << k;
    }
    return true;
}

static void free_pages(const struct pt_shadow_env *env, struct pt_shadow *sh)
{
    for (uint32_t i = 0; i < sh->npages; i++) {
        env->alloc->free(env->alloc->ctx, sh->pages[i].tbl, sh->pages[i].hpa);
        env->alloc->free(env->alloc->ctx, sh->pages[i].map, sh->pages[i].map_hpa);
    }
    sh->npages = 0;
}

static bool alloc_pages(const struct pt_shadow_env *env, struct pt_shadow *sh, uint32_t n)
{
    sh->npages = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct pt_shadow_page *p = &sh->pages[i];
        p->tbl = env->alloc->alloc(env->alloc->ctx, &p->hpa);
        if (!p->tbl)
            goto fail;
        p->map = env->alloc->alloc(env->alloc->ctx, &p->map_hpa);
        if (!p->map) {
            env->alloc->free(env->alloc->ctx, p->tbl, p->hpa);
            goto fail;
        }
        p->n = 0;
        sh->npages++;
    }
    return true;
fail:
    free_pages(env, sh);
    return false;
}

static bool table_in(const struct pt_shadow *sh, uint64_t gpa)
{
    for (uint16_t i = 0; i < sh->ntables; i++) {
        if (sh->table_gpa[i] == gpa)
            return true;
    }
    return false;
}

/* Fill every run of the walk (ToPA, or the single range as one circular run). */
static bool fill_runs(struct pt_shadow_scratch *scr, const struct pt_shadow_env *env)
{
    const struct pt_topa_walk *w = &scr->walk;
    struct filler f = {.env = env,
                       .xc = &scr->walk.xc,
                       .cap = host_cap(env),
                       .sh = &scr->next,
                       .start_off = w->start_offset};
    uint16_t nruns = w->single_range ? 1 : w->nruns;

    f.start_reg = w->single_range ? 0 : w->runs[0].first_region;
    for (uint16_t ri = 0; ri < nruns; ri++) {
        const struct pt_topa_run *run = &w->runs[ri];
        uint32_t first = w->single_range ? 0 : run->first_region;
        uint32_t n = w->single_range ? 1 : run->nregions;
        uint16_t next = w->single_range ? 0 : run->next_run;
        struct pt_shadow_pos endpos = {0, 0, 0};
        struct pt_shadow_page *last;

        f.page = scr->run_first[ri];
        f.page_end = f.page + scr->run_pages[ri];
        for (uint32_t i = first; i < first + n; i++) {
            const struct pt_topa_region *r = &w->regions[i];
            if (!fill_region(&f, r, i, w->single_range ? 0 : r->table))
                return false;
        }
        if (!w->single_range) {
            const struct pt_topa_region *lr = &w->regions[first + n - 1];
            if (run->end == PT_RUN_END_LINK)
                endpos = (struct pt_shadow_pos){run->table, run->end_entry, 0};
            else if (run->end == PT_RUN_END_MERGE)
                endpos = (struct pt_shadow_pos){w->runs[0].table, w->runs[0].first_entry, 0};
            else /* STOP: never followed; keeps the host table well formed */
                endpos = (struct pt_shadow_pos){lr->table, (uint16_t)(lr->entry + 1), 0};
            if (run->end == PT_RUN_END_STOP)
                next = ri;
        }
        last = &scr->next.pages[f.page];
        put(last, scr->next.pages[scr->run_first[next]].hpa | TOPA_END, endpos);
        if (f.page + 1 != f.page_end)
            return false;
    }
    return f.start_found;
}

/* Plan host pages per run. false if over the VMM bound or memory changed. */
static enum pt_shadow_status plan(struct pt_shadow_scratch *scr, const struct pt_shadow_env *env,
                                  uint32_t *total, struct pt_topa_err *err)
{
    const struct pt_topa_walk *w = &scr->walk;
    uint16_t nruns = w->single_range ? 1 : w->nruns;
    uint64_t sum = 0;

    for (uint16_t ri = 0; ri < nruns; ri++) {
        uint32_t first = w->single_range ? 0 : w->runs[ri].first_region;
        uint32_t n = w->single_range ? 1 : w->runs[ri].nregions;
        /* a 4 KiB region is one piece (filling it translates and checks it again) */
        bool small = !w->single_range && !w->runs[ri].nbig;
        uint64_t pieces = small ? n : 0;

        for (uint32_t i = first; !small && i < first + n; i++) {
            uint64_t c = w->regions[i].log2size == PT_PAGE_SHIFT
                             ? 1
                             : count_pieces(env->mem, &scr->walk.xc, w->regions[i].gpa,
                                            pt_region_size(&w->regions[i]));
            if (c == 0) {
                err->reason = "output region changed during the build";
                return PT_SHADOW_OPERR;
            }
            pieces += c;
            if (pieces > (uint64_t)PT_SHADOW_MAX_PAGES * PT_SHADOW_HOST_ENTRIES)
                break;
        }
        scr->run_first[ri] = (uint32_t)sum;
        scr->run_pages[ri] = (uint32_t)((pieces + host_cap(env) - 1) / host_cap(env));
        sum += scr->run_pages[ri];
        /*
         * A single-entry host (no CPUID.14.0:ECX[1]) takes only [region, END back to the same
         * table] (SDM "ToPA Errors"): one host piece, never a chain of tables.
         */
        if (!env->host_topa_multi && (sum > 1 || pieces > 1)) {
            err->reason = "output region not contiguous in host memory (single-entry ToPA host)";
            return PT_SHADOW_OPERR;
        }
        if (sum > PT_SHADOW_MAX_PAGES) {
            err->reason = "too fragmented in host memory to shadow (VMM bound)";
            return PT_SHADOW_OPERR;
        }
    }
    *total = (uint32_t)sum;
    return PT_SHADOW_OK;
}

/* Single range that the host can take as it is: contiguous and aligned in HPA. */
static bool single_direct(struct pt_shadow_scratch *scr, const struct pt_shadow_env *env,
                          const struct pt_out_cfg *cfg)
{
    const struct pt_topa_region *r = &scr->walk.regions[0];
    uint64_t size = pt_region_size(r);
    struct pt_mem_xlate x;

    if (!env->host_single_range)
        return false;
    pt_xlate(env->mem, &scr->walk.xc, r->gpa, &x);
    if (x.kind != PT_MEM_GUEST_RAM || (x.hpa & (size - 1)))
        return false;
    if (size > PT_PAGE_SIZE && contig_len(env->mem, &scr->walk.xc, r->gpa, &x, size) < size)
        return false;
    scr->next.mode = PT_SHADOW_SINGLE;
    scr->next.h_topa = false;
    scr->next.h_base = x.hpa;
    scr->next.h_mask = cfg->output_mask_ptrs | RTIT_MASK_LOWER;
    return true;
}

/* Protect new table pages not protected yet; undo on failure. */
static bool protect_new(const struct pt_shadow *old, struct pt_shadow *next,
                        const struct pt_shadow_env *env)
{
    for (uint16_t i = 0; i < next->ntables; i++) {
        uint64_t gpa = next->table_gpa[i];
        if (old->protected && table_in(old, gpa))
            continue;
        if (!env->mem->set_wp(env->mem->ctx, gpa, true)) {
            for (uint16_t j = 0; j < i; j++) {
                if (!(old->protected && table_in(old, next->table_gpa[j])))
                    env->mem->set_wp(env->mem->ctx, next->table_gpa[j], false);
            }
            return false;
        }
    }
    next->protected = true;
    return true;
}

void pt_shadow_init(struct pt_shadow *sh)
{
    memset(sh, 0, sizeof(*sh));
}

void pt_shadow_destroy(struct pt_shadow *sh, const struct pt_shadow_env *env)
{
    if (sh->protected) {
        for (uint16_t i = 0; i < sh->ntables; i++)
            env->mem->set_wp(env->mem->ctx, sh->table_gpa[i], false);
    }
    free_pages(env, sh);
    pt_shadow_init(sh);
}

/* Remember a refused set-up: see pt_shadow.h.  Without memory for the protection: no record. */
static void remember_refusal(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                             const struct pt_shadow_env *env, const struct pt_out_cfg *cfg,
                             const struct pt_topa_err *err)
{
    struct pt_shadow *next = &scr->next; /* holds no pages: build() freed them on OPERR */

    pt_shadow_destroy(sh, env);
    pt_shadow_init(next);
    next->mode = PT_SHADOW_REFUSED;
    next->g_base = cfg->output_base;
    next->g_mask = cfg->output_mask_ptrs | RTIT_MASK_LOWER;
    next->g_ctl_topa = cfg->ctl & RTIT_CTL_TOPA;
    next->g_ctl_fabric = cfg->ctl & RTIT_CTL_FABRIC_EN;
    next->g_stopped = cfg->status & RTIT_STATUS_STOPPED;
    next->refusal = *err;
    next->ntables = scr->walk.ntables;
    for (uint16_t i = 0; i < next->ntables; i++)
        next->table_gpa[i] = scr->walk.tables[i].gpa;
    if (next->ntables && !protect_new(sh, next, env))
        return;
    *sh = *next;
}

static enum pt_shadow_status build(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                   const struct pt_shadow_env *env, const struct pt_out_cfg *cfg,
                                   struct pt_topa_err *err);

enum pt_shadow_status pt_shadow_build(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                      const struct pt_shadow_env *env, const struct pt_out_cfg *cfg,
                                      struct pt_topa_err *err)
{
    enum pt_shadow_status st = build(sh, scr, env, cfg, err);

    if (st == PT_SHADOW_OPERR)
        remember_refusal(sh, scr, env, cfg, err);
    return st;
}

static enum pt_shadow_status build(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                   const struct pt_shadow_env *env, const struct pt_out_cfg *cfg,
                                   struct pt_topa_err *err)
{
    struct pt_shadow *next = &scr->next;
    enum pt_shadow_status st;
    uint32_t total = 0;

    /* 1. validate */
    if (pt_out_walk(cfg, env->mem, &scr->walk, err) != PT_TOPA_OK)
        return PT_SHADOW_OPERR;
    pt_shadow_init(next);
    next->g_base = cfg->output_base;
    next->g_mask = cfg->output_mask_ptrs | RTIT_MASK_LOWER; /* bits 6:0 read as 1 (B.5) */
    next->g_ctl_topa = cfg->ctl & RTIT_CTL_TOPA;
    next->g_ctl_fabric = cfg->ctl & RTIT_CTL_FABRIC_EN;
    next->g_stopped = cfg->status & RTIT_STATUS_STOPPED;
    next->ntables = scr->walk.ntables;
    for (uint16_t i = 0; i < next->ntables; i++)
        next->table_gpa[i] = scr->walk.tables[i].gpa;
    if (scr->walk.single_range && single_direct(scr, env, cfg))
        goto commit;
    if (!env->host_topa ||
        (scr->walk.single_range && pt_region_size(&scr->walk.regions[0]) < PT_PAGE_SIZE)) {
        /* ToPA regions are at least 4 KiB: a smaller buffer needs host single-range */
        err->reason = scr->walk.single_range ? "single-range buffer not expressible in host output"
                                             : "host has no ToPA output";
        err->gpa = cfg->output_base;
        err->entry = -1;
        return PT_SHADOW_OPERR;
    }
    next->mode = scr->walk.single_range ? PT_SHADOW_SINGLE_AS_TOPA : PT_SHADOW_TOPA;
    next->h_topa = true;

    /* 2. plan, 3. allocate, 4. fill */
    st = plan(scr, env, &total, err);
    if (st != PT_SHADOW_OK) {
        err->gpa = cfg->output_base;
        err->entry = -1;
        return st;
    }
    if (!alloc_pages(env, next, total)) {
        err->reason = "out of VMM pages for the shadow ToPA";
        return PT_SHADOW_NOMEM;
    }
    if (!fill_runs(scr, env)) {
        free_pages(env, next);
        err->reason = "guest memory changed during the build";
        err->gpa = cfg->output_base;
        err->entry = -1;
        return PT_SHADOW_OPERR;
    }
commit:
    /* 5. protect (may fail), 6. commit (cannot fail) */
    if (next->ntables && !protect_new(sh, next, env)) {
        free_pages(env, next);
        err->reason = "EPT write-protection of a ToPA table failed";
        return PT_SHADOW_NOMEM;
    }
    if (sh->protected) {
        for (uint16_t i = 0; i < sh->ntables; i++) {
            if (!table_in(next, sh->table_gpa[i]))
                env->mem->set_wp(env->mem->ctx, sh->table_gpa[i], false);
        }
    }
    free_pages(env, sh);
    *sh = *next;
    next->npages = 0;
    return PT_SHADOW_OK;
}
