/* SPDX-License-Identifier: MIT */
/*
 * Fuzz the guest ToPA walker and the shadow builder: arbitrary guest memory
 * images, RTIT register values, capabilities, EPT layouts and allocation /
 * write-protect failures.  Invariants checked (abort on violation):
 *  - the walk never reads more than PT_TOPA_MAX_ENTRIES_READ entries;
 *  - a successful build's host entries all point into guest-RAM host pages,
 *    exactly where EPT maps the guest region, aligned to their size; END
 *    entries point to the shadow's own table pages; no END in entry 0;
 *  - the guest view of the initial host registers is the guest's registers;
 *  - a failed build leaves the previous shadow, its pages, the pool and the
 *    write-protection state untouched;
 *  - the engine never writes guest memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef FUZZ_PT_TOPA_TRACE
#include <stdio.h>
#endif

#include "pt/pt_shadow.h"
#include "pt/rtit.h"

#define GPAGES   64  /* guest RAM pages: GPA [0, 256K) */
#define KPAGES   64  /* GPA [256K, 512K): pages of other kinds */
#define POOL     300 /* host pool pages */
#define MAXPA    39
#define HRAM_HPA 0x40000000ull
#define POOL_HPA 0x80000000ull

static uint8_t gram[GPAGES][4096]; /* guest RAM backing, indexed by host page */
static uint8_t gram_before[GPAGES][4096];
static uint8_t pool[POOL][4096];
static bool pool_used[POOL];
static uint32_t perm[GPAGES]; /* guest page -> host page */
static uint8_t kinds[KPAGES]; /* kind of GPA [256K + 4K i] */
static bool prot_vmm[GPAGES]; /* guest RAM pages the VMM protects */
static bool wp[GPAGES];
static int alloc_budget, wp_budget;

static void translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    uint64_t pg = gpa >> 12;

    out->hpa = 0;
    out->len = 4096 - (gpa & 0xfff);
    if (pg < GPAGES) {
        out->kind = prot_vmm[pg] ? PT_MEM_PROTECTED : PT_MEM_GUEST_RAM;
        out->hpa = HRAM_HPA + ((uint64_t)perm[pg] << 12) + (gpa & 0xfff);
        while (++pg < GPAGES && perm[pg] == perm[pg - 1] + 1 && prot_vmm[pg] == prot_vmm[pg - 1])
            out->len += 4096;
    } else if (pg < GPAGES + KPAGES) {
        out->kind = (enum pt_mem_kind)(1 + kinds[pg - GPAGES] % 4);
    } else {
        out->kind = PT_MEM_UNMAPPED;
    }
}

static bool read64(void *ctx, uint64_t gpa, uint64_t *v)
{
    if ((gpa >> 12) >= GPAGES || (gpa & 7))
        return false;
    memcpy(v, &gram[perm[gpa >> 12]][gpa & 0xfff], 8);
    return true;
}

static bool set_wp(void *ctx, uint64_t gpa, bool protect)
{
    if ((gpa & 0xfff) || (gpa >> 12) >= GPAGES || wp[gpa >> 12] == protect)
        abort(); /* engine bug: bad page, double protect or double unprotect */
    if (protect && wp_budget-- == 0)
        return false;
    wp[gpa >> 12] = protect;
    return true;
}

static void *alloc(void *ctx, uint64_t *hpa)
{
    if (alloc_budget-- == 0)
        return NULL;
    for (int i = 0; i < POOL; i++) {
        if (!pool_used[i]) {
            pool_used[i] = true;
            memset(pool[i], 0, 4096);
            *hpa = POOL_HPA + ((uint64_t)i << 12);
            return pool[i];
        }
    }
    return NULL;
}

static void pfree(void *ctx, void *va, uint64_t hpa)
{
    uint64_t i = (hpa - POOL_HPA) >> 12;
    if (hpa < POOL_HPA || i >= POOL || va != pool[i] || !pool_used[i])
        abort();
    pool_used[i] = false;
    memset(pool[i], 0xa5, 4096);
}

static const struct pt_mem_ops mem = {.translate = translate, .read64 = read64, .set_wp = set_wp};
static const struct pt_page_alloc palloc = {.alloc = alloc, .free = pfree};

struct input {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct input *in, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes && in->n; i++, in->n--, in->p++)
        v |= (uint64_t)*in->p << (8 * i);
    return v;
}

/* Mostly plausible addresses: pages of the interesting 512 KiB, sometimes raw. */
static uint64_t addr(uint64_t raw)
{
    if (raw & 1)
        return raw & ~0xfffull;
    return ((raw >> 8) % (GPAGES + KPAGES + 4)) << 12;
}

static bool is_pool_page(const struct pt_shadow *sh, uint64_t hpa)
{
    for (unsigned i = 0; i < sh->npages; i++) {
        if (sh->pages[i].hpa == hpa)
            return true;
    }
    return false;
}

static void check_shadow(const struct pt_shadow *sh, const struct pt_out_cfg *cfg)
{
    uint64_t b, m;

    if (sh->mode == PT_SHADOW_SINGLE) {
        if (sh->h_base < HRAM_HPA || sh->h_base >= HRAM_HPA + GPAGES * 4096ull)
            abort();
        return;
    }
    for (unsigned i = 0; i < sh->npages; i++) {
        const struct pt_shadow_page *p = &sh->pages[i];
        if (p->n < 2 || !(p->tbl[p->n - 1] & TOPA_END) || (p->tbl[0] & TOPA_END))
            abort();
        if (!is_pool_page(sh, p->tbl[p->n - 1] & TOPA_BASE_MASK(MAXPA)))
            abort();
        for (unsigned j = 0; j + 1 < p->n; j++) {
            uint64_t e = p->tbl[j], size = TOPA_REGION_SIZE(e), hpa = e & TOPA_BASE_MASK(MAXPA);
            if ((e & TOPA_END) || (hpa & (size - 1)) || hpa < HRAM_HPA ||
                hpa + size > HRAM_HPA + GPAGES * 4096ull)
                abort();
            /* host piece pages are guest RAM pages the VMM does not protect */
            for (uint64_t o = 0; o < size; o += 4096) {
                uint32_t hp = (uint32_t)((hpa + o - HRAM_HPA) >> 12);
                bool found = false;
                for (unsigned g = 0; g < GPAGES; g++)
                    found |= perm[g] == hp && !prot_vmm[g];
                if (!found)
                    abort();
            }
        }
    }
    if (!pt_shadow_guest_view(sh, sh->h_base, sh->h_mask, &b, &m) || b != cfg->output_base ||
        m != (cfg->output_mask_ptrs | RTIT_MASK_LOWER))
        abort();
}

static struct pt_shadow sh, copy;
static struct pt_shadow_scratch scr;
static struct pt_topa_region regions[512];
static uint8_t pages_copy[PT_SHADOW_MAX_PAGES][2][4096];

static void one_build(struct input *in, const struct pt_shadow_env *env, bool multi)
{
    struct pt_out_cfg cfg = {.topa_multi = multi, .maxphyaddr = MAXPA};
    struct pt_topa_err err;
    bool pool_before[POOL], wp_before[GPAGES];
    uint64_t f = take(in, 2);
    enum pt_shadow_status st;

    cfg.ctl = (f & 1) ? RTIT_CTL_TOPA : 0;
    cfg.ctl |= (f & 0x300) == 0x300 ? RTIT_CTL_FABRIC_EN : 0;
    cfg.status = (f & 2) ? RTIT_STATUS_STOPPED : 0;
    cfg.output_base = (f & 4) ? take(in, 8) : addr(take(in, 3)) | ((f >> 3) & 3) << 7;
    cfg.output_mask_ptrs =
        (f & 0x20) ? take(in, 8) : ((take(in, 1) % 8) << 7) | (take(in, 2) << 32);
    if (!(f & 1) && !(f & 4))
        cfg.output_mask_ptrs = ((1ull << (take(in, 1) % 20)) - 1) | (take(in, 2) << 32);
    alloc_budget = (f & 0x40) ? (int)take(in, 1) : -1;
    wp_budget = (f & 0x80) ? (int)(take(in, 1) % 4) : -1;

    copy = sh;
    for (unsigned i = 0; i < sh.npages; i++) {
        memcpy(pages_copy[i][0], sh.pages[i].tbl, 4096);
        memcpy(pages_copy[i][1], sh.pages[i].map, 4096);
    }
    memcpy(pool_before, pool_used, sizeof(pool_used));
    memcpy(wp_before, wp, sizeof(wp));
    memcpy(gram_before, gram, sizeof(gram));

    st = pt_shadow_prepare(&sh, &scr, env, &cfg, &err);
#ifdef FUZZ_PT_TOPA_TRACE
    fprintf(stderr, "build: st=%d mode=%d pages=%u reason=%s\n", st, sh.mode, sh.npages,
            st ? err.reason : "-");
#endif
    if (scr.walk.entries_read > PT_TOPA_MAX_ENTRIES_READ)
        abort();
    if (memcmp(gram_before, gram, sizeof(gram)))
        abort();
    if (st == PT_SHADOW_OK) {
        check_shadow(&sh, &cfg);
        /* the guest view of arbitrary host values never crashes, and names only own tables */
        for (int k = 0; k < 4 && in->n >= 9; k++) {
            uint64_t hb = take(in, 1), hm = take(in, 8), gb, gm;
            hb = sh.npages && (hb & 1) ? sh.pages[(hb >> 1) % sh.npages].hpa : hb << 12;
            if (pt_shadow_guest_view(&sh, hb, hm, &gb, &gm) && sh.mode == PT_SHADOW_TOPA) {
                bool own = false;
                for (unsigned t = 0; t < sh.ntables; t++)
                    own |= sh.table_gpa[t] == gb;
                if (!own)
                    abort();
            }
        }
        return;
    }
    if (!err.reason)
        abort();
    if (st == PT_SHADOW_OPERR) {
        /* a refusal replaces the old shadow by a record (pt_shadow.h): no host pages kept,
         * exactly the record's guest tables protected, and a retry is refused without a walk */
        const char *why = err.reason;
        unsigned nwp = 0;
        for (int i = 0; i < POOL; i++)
            if (pool_used[i])
                abort();
        for (int g = 0; g < GPAGES; g++)
            nwp += wp[g];
        if (sh.mode == PT_SHADOW_REFUSED) {
            if (nwp != sh.ntables || !sh.protected == !!sh.ntables)
                abort();
            scr.walk.entries_read = 12345;
            if (pt_shadow_prepare(&sh, &scr, env, &cfg, &err) != PT_SHADOW_OPERR ||
                scr.walk.entries_read != 12345 || strcmp(why, err.reason))
                abort();
        } else if (sh.mode != PT_SHADOW_NONE || nwp) {
            abort();
        }
        return;
    }
    if (memcmp(&copy, &sh, sizeof(sh)) || memcmp(pool_before, pool_used, sizeof(pool_used)) ||
        memcmp(wp_before, wp, sizeof(wp)))
        abort();
    for (unsigned i = 0; i < sh.npages; i++) {
        if (memcmp(pages_copy[i][0], sh.pages[i].tbl, 4096) ||
            memcmp(pages_copy[i][1], sh.pages[i].map, 4096))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size};
    uint64_t hdr = take(&in, 4);
    struct pt_shadow_env env = {.mem = &mem,
                                .alloc = &palloc,
                                .host_topa = !(hdr & 1),
                                .host_topa_multi = !(hdr & 2),
                                .host_single_range = !(hdr & 4)};
    bool multi = !(hdr & 8);
    unsigned stride = 1 + (unsigned)((hdr >> 8) % 7), nrec;

    /* EPT: guest page g -> host page (g * stride + rot) mod 64, some runs swapped */
    for (unsigned g = 0; g < GPAGES; g++)
        perm[g] = g;
    if (stride % 2 == 0)
        stride++;
    for (unsigned g = 0; g < GPAGES; g++)
        perm[g] = (g * stride + (unsigned)(hdr >> 16)) % GPAGES;
    memset(prot_vmm, 0, sizeof(prot_vmm));
    if (hdr & 0x10)
        prot_vmm[(hdr >> 24) % GPAGES] = true;
    for (unsigned k = 0; k < KPAGES; k++)
        kinds[k] = (uint8_t)(k + (hdr >> 20));
    memset(gram, 0, sizeof(gram));
    memset(wp, 0, sizeof(wp));
    memset(pool_used, 0, sizeof(pool_used));
    scr.walk.regions = regions;
    scr.walk.max_regions = 512;
    pt_shadow_init(&sh);

    /* guest memory: (slot, entry) records; entries with plausible bases */
    nrec = (unsigned)take(&in, 1) % 65;
    for (unsigned r = 0; r < nrec && in.n >= 10; r++) {
        uint64_t slot = take(&in, 2) % (GPAGES * 512);
        uint64_t raw = take(&in, 8);
        uint64_t e = (raw & 0x8000) ? raw : addr(raw >> 16) | (raw & 0xfff);
        memcpy(&gram[perm[slot / 512]][(slot % 512) * 8], &e, 8);
    }
    /* up to three builds: the later ones over a committed (or failed) previous shadow */
    for (int b = 0; b < 3 && in.n; b++) {
        one_build(&in, &env, multi);
        if (in.n && (take(&in, 1) & 1)) {
            /* a guest store to a table page */
            uint64_t gpa = (take(&in, 2) % (GPAGES * 512)) * 8;
            if (wp[gpa >> 12] && pt_shadow_table_write(&sh, &env, gpa) != PT_SHADOW_WP_RETRY)
                abort();
            if (wp[gpa >> 12])
                abort();
            memcpy(&gram[perm[gpa >> 12]][gpa & 0xfff], in.p, in.n >= 8 ? 8 : in.n);
        }
    }
    pt_shadow_destroy(&sh, &env);
    for (int i = 0; i < POOL; i++) {
        if (pool_used[i])
            abort();
    }
    for (int g = 0; g < GPAGES; g++) {
        if (wp[g])
            abort();
    }
    return 0;
}
