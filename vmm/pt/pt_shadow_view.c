/* SPDX-License-Identifier: MIT */
/*
 * Shadow ToPA, the guest's side: guest-visible OUTPUT_BASE / MASK_PTRS from the
 * host values, guest writes to protected table pages, and reuse of a shadow
 * at TraceEn 0->1.  See pt_shadow.h.
 */
#include <stddef.h>

#include "pt/pt_shadow.h"
#include "pt/rtit.h"

#define MASK_LOW32 0xffffffffull

static int table_index(const struct pt_shadow *sh, uint64_t gpa)
{
    for (uint16_t i = 0; i < sh->ntables; i++) {
        if (sh->table_gpa[i] == gpa)
            return i;
    }
    return -1;
}

/* The host table page at hpa: the hint h_page first (where the trace started), then a search. */
static const struct pt_shadow_page *page_of(const struct pt_shadow *sh, uint64_t hpa)
{
    if (sh->h_page < sh->npages && sh->pages[sh->h_page].hpa == hpa)
        return &sh->pages[sh->h_page];
    for (uint16_t i = 0; i < sh->npages; i++) {
        if (sh->pages[i].hpa == hpa)
            return &sh->pages[i];
    }
    return NULL;
}

static uint64_t topa_offset(uint64_t mask)
{
    return mask >> RTIT_MASK_OUTPUT_OFFSET_SHIFT;
}

static uint32_t topa_index(uint64_t mask)
{
    return (uint32_t)PTV_FIELD(mask, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
}

/* Not a position of this shadow (or no shadow): the build-time guest values. */
static bool foreign(const struct pt_shadow *sh, uint64_t *g_base, uint64_t *g_mask)
{
    *g_base = sh->g_base;
    *g_mask = sh->g_mask;
    return false;
}

bool pt_shadow_guest_view(const struct pt_shadow *sh, uint64_t h_base, uint64_t h_mask,
                          uint64_t *g_base, uint64_t *g_mask)
{
    const struct pt_shadow_page *p;
    struct pt_shadow_pos pos;
    uint32_t idx = topa_index(h_mask);
    uint64_t goff;

    if (sh->mode != PT_SHADOW_TOPA && sh->mode != PT_SHADOW_SINGLE_AS_TOPA) {
        if (sh->mode != PT_SHADOW_SINGLE)
            return foreign(sh, g_base, g_mask);
        /* Same base and mask; only the offset moves (pt-facts B.5). */
        *g_base = sh->g_base;
        *g_mask = (sh->g_mask & MASK_LOW32) | (h_mask & ~MASK_LOW32);
        return h_base == sh->h_base;
    }
    /* Nothing written since the build: the guest's own values, exactly. */
    if (h_base == sh->h_base && h_mask == sh->h_mask) {
        *g_base = sh->g_base;
        *g_mask = sh->g_mask;
        return true;
    }
    p = page_of(sh, h_base);
    if (!p || idx >= p->n)
        return foreign(sh, g_base, g_mask);
    pos = p->map[idx];
    if (pos.gtable >= sh->ntables && sh->mode == PT_SHADOW_TOPA)
        return foreign(sh, g_base, g_mask);
    goff = pos.goff + topa_offset(h_mask);
    if (sh->mode == PT_SHADOW_SINGLE_AS_TOPA) {
        *g_base = sh->g_base;
        *g_mask = (sh->g_mask & MASK_LOW32) | (goff << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
        return true;
    }
    *g_base = sh->table_gpa[pos.gtable];
    *g_mask = RTIT_MASK_LOWER | ((uint64_t)pos.gentry << RTIT_MASK_TABLE_OFFSET_SHIFT) |
              (goff << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
    return true;
}

enum pt_shadow_wp_action pt_shadow_table_write(struct pt_shadow *sh,
                                               const struct pt_shadow_env *env, uint64_t gpa)
{
    if (!sh->protected || table_index(sh, gpa & PT_PAGE_MASK) < 0)
        return PT_SHADOW_WP_NOT_OURS;
    for (uint16_t i = 0; i < sh->ntables; i++)
        env->mem->set_wp(env->mem->ctx, sh->table_gpa[i], false);
    sh->protected = false;
    sh->stale = true;
    return PT_SHADOW_WP_RETRY;
}

/*
 * Host position of guest (table gt, entry, offset off) in the shadow: the
 * output entry whose piece holds off.  Only output entries: a guest pointer
 * at an END entry goes through a full build.
 */
static bool find_pos(const struct pt_shadow *sh, int gt, uint32_t entry, uint64_t off,
                     uint64_t *h_base, uint64_t *h_mask)
{
    for (uint16_t i = 0; i < sh->npages; i++) {
        const struct pt_shadow_page *p = &sh->pages[i];
        for (uint16_t j = 0; j < p->n; j++) {
            uint64_t e = p->tbl[j];
            uint64_t size = TOPA_REGION_SIZE(e);
            if ((e & TOPA_END) || p->map[j].gtable != gt || p->map[j].gentry != entry)
                continue;
            if (off < p->map[j].goff || off >= p->map[j].goff + size)
                continue;
            *h_base = p->hpa;
            *h_mask = RTIT_MASK_LOWER | ((uint64_t)j << RTIT_MASK_TABLE_OFFSET_SHIFT) |
                      ((off - p->map[j].goff) << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
            return true;
        }
    }
    return false;
}

/* Can the current shadow serve these guest registers?  Fills the host registers. */
static bool reusable(const struct pt_shadow *sh, const struct pt_out_cfg *cfg, uint64_t *h_base,
                     uint64_t *h_mask)
{
    uint64_t off = topa_offset(cfg->output_mask_ptrs);

    if (sh->mode == PT_SHADOW_NONE || sh->mode == PT_SHADOW_REFUSED || sh->stale ||
        (sh->ntables && !sh->protected))
        return false;
    if ((cfg->ctl & RTIT_CTL_TOPA) != sh->g_ctl_topa || (cfg->ctl & RTIT_CTL_FABRIC_EN))
        return false;
    if (cfg->output_base == sh->g_base && (cfg->output_mask_ptrs | RTIT_MASK_LOWER) == sh->g_mask) {
        *h_base = sh->h_base;
        *h_mask = sh->h_mask;
        return true;
    }
    switch (sh->mode) {
    case PT_SHADOW_TOPA:
        return find_pos(sh, table_index(sh, cfg->output_base), topa_index(cfg->output_mask_ptrs),
                        off, h_base, h_mask);
    case PT_SHADOW_SINGLE:
    case PT_SHADOW_SINGLE_AS_TOPA:
        if (cfg->output_base != sh->g_base ||
            ((cfg->output_mask_ptrs ^ sh->g_mask) & MASK_LOW32 & ~RTIT_MASK_LOWER))
            return false;
        if (off > ((sh->g_mask & MASK_LOW32) | RTIT_MASK_LOWER))
            return false;
        if (sh->mode == PT_SHADOW_SINGLE) {
            *h_base = sh->h_base;
            *h_mask = (sh->h_mask & MASK_LOW32) | (off << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
            return true;
        }
        return find_pos(sh, 0, 0, off, h_base, h_mask);
    default:
        return false;
    }
}

void pt_shadow_mem_changed(struct pt_shadow *sh)
{
    if (sh->mode != PT_SHADOW_NONE)
        sh->stale = true;
}

/* The registers the walk depends on are those of the refused set-up, and nothing changed. */
static bool refused_again(const struct pt_shadow *sh, const struct pt_out_cfg *cfg)
{
    return sh->mode == PT_SHADOW_REFUSED && !sh->stale && (sh->protected || !sh->ntables) &&
           (cfg->ctl & RTIT_CTL_TOPA) == sh->g_ctl_topa &&
           (cfg->ctl & RTIT_CTL_FABRIC_EN) == sh->g_ctl_fabric &&
           (cfg->status & RTIT_STATUS_STOPPED) == sh->g_stopped && cfg->output_base == sh->g_base &&
           (cfg->output_mask_ptrs | RTIT_MASK_LOWER) == sh->g_mask;
}

enum pt_shadow_status pt_shadow_prepare(struct pt_shadow *sh, struct pt_shadow_scratch *scr,
                                        const struct pt_shadow_env *env,
                                        const struct pt_out_cfg *cfg, struct pt_topa_err *err)
{
    uint64_t h_base, h_mask;

    if (refused_again(sh, cfg)) {
        *err = sh->refusal;
        return PT_SHADOW_OPERR;
    }

    if (reusable(sh, cfg, &h_base, &h_mask)) {
        sh->g_base = cfg->output_base;
        sh->g_mask = cfg->output_mask_ptrs | RTIT_MASK_LOWER;
        sh->h_base = h_base;
        sh->h_mask = h_mask;
        for (uint16_t i = 0; i < sh->npages; i++) {
            if (sh->pages[i].hpa == h_base) {
                sh->h_page = i; /* page_of()'s hint */
                break;
            }
        }
        return PT_SHADOW_OK;
    }
    return pt_shadow_build(sh, scr, env, cfg, err);
}
