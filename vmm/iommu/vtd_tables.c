/* SPDX-License-Identifier: MIT */
/*
 * The DMA-remapping tables (see vtd_tables.h).  One recursion over [0, top), run twice: the
 * first pass counts the table pages, the second writes them.  A block is a leaf where it holds no
 * excluded byte and its level has leaves, left not present where it is all excluded, and a table
 * otherwise -- the rule ept_identity.c follows, without its memory types (second-level entries
 * have none in legacy mode).
 */
#include <stdarg.h>
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include "iommu/vtd_tables.h"

#define GIB       (1ull << 30)
#define PAGE_MASK 0xfffull

enum cover { COVER_NONE, COVER_PART, COVER_ALL };

struct build {
    const struct vtd_map_in *in;
    const struct vtd_page_ops *ops; /* NULL: count only */
    uint64_t top;
    unsigned long pages;
    unsigned long leaves[3];
    bool nomem;
};

static enum cover cover1(uint64_t rb, uint64_t re, uint64_t p, uint64_t size, enum cover o)
{
    if (rb >= p + size || re <= p)
        return o;
    if (rb <= p && re >= p + size)
        return COVER_ALL;
    return COVER_PART;
}

/* how much of [p, p + size) the VMM's ranges and the holes cover */
static enum cover excluded(const struct vtd_map_in *in, uint64_t p, uint64_t size)
{
    enum cover o = COVER_NONE;
    for (unsigned i = 0; i < in->n && o != COVER_ALL; i++)
        if (in->mem[i].type == PTV_MEM_VMM)
            o = cover1(in->mem[i].base, in->mem[i].base + in->mem[i].size, p, size, o);
    for (unsigned i = 0; i < in->n_hole && o != COVER_ALL; i++) {
        uint64_t b = in->hole[i].base & ~PAGE_MASK;
        uint64_t e = (in->hole[i].base + in->hole[i].size + PAGE_MASK) & ~PAGE_MASK;
        o = cover1(b, e, p, size, o);
    }
    return o;
}

static bool leaf_level(const struct vtd_map_in *in, unsigned level)
{
    return level == 1 || (level == 2 && in->has_2m) || (level == 3 && in->has_1g);
}

static void *new_table(struct build *b, uint64_t *pa)
{
    void *t = b->ops->alloc_page(b->ops->ctx, pa);
    if (!t) {
        b->nomem = true;
        return NULL;
    }
    memset(t, 0, 4096);
    return t;
}

static void flush(struct build *b, const void *va)
{
    if (b->ops && b->ops->flush)
        b->ops->flush(b->ops->ctx, va, 4096);
}

/*
 * Fill the level-`level` table t (NULL: count only) mapping [base, base + 512 entries); true if
 * any entry is present.  A table below is made only for a block that maps something.
 */
static bool fill(struct build *b, uint64_t *t, unsigned level, uint64_t base)
{
    uint64_t size = VTD_LEVEL_SIZE(level);
    bool any = false;

    for (unsigned i = 0; i < VTD_TABLE_ENTRIES && !b->nomem; i++) {
        uint64_t c = base + i * size, pa;
        enum cover o;
        uint64_t *child;

        if (c >= b->top)
            break;
        o = excluded(b->in, c, size);
        if (o == COVER_ALL)
            continue;
        if (o == COVER_NONE && leaf_level(b->in, level)) {
            if (t) {
                t[i] = c | VTD_SL_R | VTD_SL_W | (level > 1 ? VTD_SL_PS : 0);
                b->leaves[level - 1]++;
            }
            any = true;
            continue;
        }
        /* level > 1 here: a 4 KiB page is never partly excluded (all ranges are aligned) */
        if (!t) { /* counting: the tables below too */
            if (fill(b, NULL, level - 1, c)) {
                any = true;
                b->pages++;
            }
            continue;
        }
        struct build dry = {.in = b->in, .top = b->top};
        if (!fill(&dry, NULL, level - 1, c))
            continue; /* all excluded, in pieces: no empty table */
        any = true;
        child = new_table(b, &pa);
        if (!child)
            break;
        fill(b, child, level - 1, c);
        flush(b, child);
        t[i] = pa | VTD_SL_R | VTD_SL_W;
        b->pages++;
    }
    return any;
}

static bool check(const struct vtd_map_in *in, uint64_t *top, char *err, size_t cap)
{
    uint64_t end = 4 * GIB;

    if (!in || (in->n && !in->mem) || (in->n_hole && !in->hole))
        return ptv_fail(err, cap, "no memory map");
    if (in->levels < 3 || in->levels > 5)
        return ptv_fail(err, cap, "a %u-level walk (3, 4 or 5)", in->levels);
    for (unsigned i = 0; i < in->n; i++) {
        const struct ptv_mem_range *r = &in->mem[i];
        if (r->size == 0 || ((r->base | r->size) & PAGE_MASK) || r->base + r->size < r->base ||
            r->type < PTV_MEM_RAM || r->type > PTV_MEM_VMM)
            return ptv_fail(err, cap, "memory range %u [%#llx, +%#llx) type %u is malformed", i,
                            (unsigned long long)r->base, (unsigned long long)r->size, r->type);
        if (r->base + r->size > end)
            end = r->base + r->size;
    }
    for (unsigned i = 0; i < in->n_hole; i++)
        if (in->hole[i].size == 0 ||
            in->hole[i].base + in->hole[i].size + PAGE_MASK < in->hole[i].base)
            return ptv_fail(err, cap, "hole %u [%#llx, +%#llx) is malformed", i,
                            (unsigned long long)in->hole[i].base,
                            (unsigned long long)in->hole[i].size);
    if (end > UINT64_MAX - GIB)
        return ptv_fail(err, cap, "memory ends at %#llx", (unsigned long long)end);
    *top = (end + GIB - 1) & ~(GIB - 1);
    if (in->levels < 5 && *top > VTD_LEVEL_SIZE(in->levels + 1))
        return ptv_fail(err, cap, "memory up to %#llx is beyond a %u-level walk's %u bits",
                        (unsigned long long)*top, in->levels, 12 + 9 * in->levels);
    if (in->levels == 5 && *top > (1ull << 57))
        return ptv_fail(err, cap, "memory up to %#llx is beyond 57 bits", (unsigned long long)*top);
    return true;
}

bool vtd_tables_span(const struct vtd_map_in *in, uint64_t *top, char *err, size_t cap)
{
    struct vtd_map_in any;
    if (err && cap)
        err[0] = 0;
    if (!in)
        return ptv_fail(err, cap, "no memory map");
    any = *in;
    any.levels = 5;
    return check(&any, top, err, cap);
}

unsigned long vtd_tables_pages(const struct vtd_map_in *in, uint64_t *top, char *err, size_t cap)
{
    struct build b = {.in = in};
    uint64_t t = 0;

    if (err && cap)
        err[0] = 0;
    if (top)
        *top = 0;
    if (!check(in, &t, err, cap))
        return 0;
    b.top = t;
    fill(&b, NULL, in->levels, 0);
    if (top)
        *top = t;
    return b.pages + 3; /* + the top-level table, the context table and the root table */
}

bool vtd_tables_build(const struct vtd_map_in *in, const struct vtd_page_ops *ops,
                      struct vtd_tables *out, char *err, size_t cap)
{
    struct build b = {.in = in, .ops = ops};
    uint64_t *slpt, *ctx, *root, slpt_pa, ctx_pa, root_pa;

    if (err && cap)
        err[0] = 0;
    memset(out, 0, sizeof(*out));
    if (!ops || !ops->alloc_page)
        return ptv_fail(err, cap, "no page allocator");
    if (!check(in, &b.top, err, cap))
        return false;
    if (!(slpt = new_table(&b, &slpt_pa)) || !(ctx = new_table(&b, &ctx_pa)) ||
        !(root = new_table(&b, &root_pa)))
        return ptv_fail(err, cap, "out of memory for the remapping tables");
    fill(&b, slpt, in->levels, 0);
    if (b.nomem)
        return ptv_fail(err, cap, "out of memory for the remapping tables (%lu pages taken)",
                        b.pages + 3);
    flush(&b, slpt);
    /* VT-d 9.3: context entry; AW 1/2/3 = a 3/4/5-level walk */
    for (unsigned i = 0; i < VTD_TABLE_ENTRIES / 2; i++) {
        ctx[2 * i] = slpt_pa | VTD_CE_P; /* FPD 0: faults recorded; TT 00 */
        ctx[2 * i + 1] = (uint64_t)(in->levels - 2) << VTD_CE_HI_AW_SHIFT |
                         (uint64_t)VTD_DOMAIN_ID << VTD_CE_HI_DID_SHIFT;
    }
    flush(&b, ctx);
    /* VT-d 9.1: root entry, one per bus, all to the one context table */
    for (unsigned i = 0; i < VTD_ROOT_ENTRIES; i++) {
        root[2 * i] = ctx_pa | VTD_RE_P;
        root[2 * i + 1] = 0;
    }
    flush(&b, root);
    out->root_pa = root_pa;
    out->top = b.top;
    out->levels = in->levels;
    out->pages = b.pages + 3;
    memcpy(out->leaves, b.leaves, sizeof(out->leaves));
    return true;
}
