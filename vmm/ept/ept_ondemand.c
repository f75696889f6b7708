/* SPDX-License-Identifier: MIT */
/* On-demand maps above the identity map in bounded memory (see ept_ondemand.h). */
#include "ept/ept_ondemand.h"
#include "ept/ept_entry.h"

#define GIB EPT_LEVEL_SIZE(3)

int ept_od_init(struct ept_od *od, const struct ept *e, const struct mtrr_state *mtrr,
                uint64_t floor, uint64_t limit, unsigned long max_tables,
                void (*flush)(void *ctx, struct ept *e), void *ctx)
{
    *od = (struct ept_od){0};
    if (!e || !e->root || !mtrr || !flush || mtrr_check(mtrr))
        return EPT_EINVAL;
    if ((floor | limit) & (GIB - 1) || floor >= limit || limit > ept_gpa_limit(e) ||
        limit > (1ull << mtrr->maxphyaddr))
        return EPT_EINVAL;
    if (max_tables < e->levels - 1u)
        return EPT_EINVAL;
    *od = (struct ept_od){.floor = floor,
                          .limit = limit,
                          .max_tables = max_tables,
                          .mtrr = mtrr,
                          .flush = flush,
                          .ctx = ctx};
    return 0;
}

/* a pinned page in [base, base + size): mapping that block would overwrite it */
static bool holds_pin(const struct ept_od *od, uint64_t base, uint64_t size)
{
    unsigned i;

    for (i = 0; i < od->nr_pins; i++)
        if (od->pin[i] - base < size)
            return true;
    return false;
}

/* the largest block around gpa with one memory type that the CPU can map as one leaf and
 * that holds no pinned page (a relocated APIC window stays where its owner put it) */
static void choose_block(const struct ept_od *od, const struct ept *e, uint64_t gpa,
                         struct ept_od_map *m)
{
    static const unsigned levels[] = {3, 2};
    unsigned i;

    for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        uint64_t size = EPT_LEVEL_SIZE(levels[i]);

        if ((levels[i] == 3 && !e->has_1g) || (levels[i] == 2 && !e->has_2m))
            continue;
        /* floor and limit are 1 GiB aligned: the block lies inside [floor, limit) */
        m->base = gpa & ~(size - 1);
        m->size = size;
        if (!holds_pin(od, m->base, size) &&
            mtrr_range_type(od->mtrr, m->base, size, &m->type) == 0)
            return;
    }
    m->base = gpa & ~(EPT_PAGE_SIZE - 1);
    m->size = EPT_PAGE_SIZE;
    if (mtrr_range_type(od->mtrr, m->base, m->size, &m->type))
        m->type = EPT_MT_UC; /* not expected: a 4 KiB page has one type */
}

int ept_od_pin(struct ept_od *od, uint64_t gpa)
{
    unsigned i;

    gpa &= ~(EPT_PAGE_SIZE - 1);
    if (gpa < od->floor || gpa >= od->limit)
        return 0;
    for (i = 0; i < od->nr_pins; i++)
        if (od->pin[i] == gpa)
            return 0;
    if (od->nr_pins == EPT_OD_MAX_PINS)
        return EPT_ENOMEM;
    for (i = od->nr_pins++; i > 0 && od->pin[i - 1] > gpa; i--)
        od->pin[i] = od->pin[i - 1];
    od->pin[i] = gpa;
    return 0;
}

void ept_od_unpin(struct ept_od *od, uint64_t gpa)
{
    unsigned i, j;

    gpa &= ~(EPT_PAGE_SIZE - 1);
    for (i = j = 0; i < od->nr_pins; i++)
        if (od->pin[i] != gpa)
            od->pin[j++] = od->pin[i];
    od->nr_pins = j;
}

int ept_od_drop_all(struct ept_od *od, struct ept *e)
{
    uint64_t from = od->floor;
    unsigned i;
    int rc = 0;

    /* the gaps between pinned pages: their ends are 1 GiB aligned or next to a
     * pinned page, which is a 4 KiB leaf, so nothing splits and nothing is
     * allocated */
    for (i = 0; i <= od->nr_pins && !rc; i++) {
        uint64_t to = i < od->nr_pins ? od->pin[i] : od->limit;

        if (to > from)
            rc = ept_unmap_prune(e, from, to - from);
        from = to + EPT_PAGE_SIZE;
    }
    if (rc)
        return rc;
    /* every table wholly above floor is an on-demand one or holds a pinned
     * page (the invariant in ept_ondemand.h): the prune unlinked all ours */
    od->tables = 0;
    od->drops++;
    if (ept_flush_needed(e))
        od->flush(od->ctx, e); /* INVEPT: the retired tables become spare pages */
    return 0;
}

static int map_block(struct ept_od *od, struct ept *e, const struct ept_od_map *m)
{
    unsigned long before = e->nr_tables;
    int rc = ept_map(e, m->base, m->base, m->size, EPT_RWX, m->type);

    /* what the map linked; a map can also merge tables back into a leaf (ept.h), which the
     * count loses, never below 0 */
    if (!rc && e->nr_tables >= before)
        od->tables += e->nr_tables - before;
    else if (!rc)
        od->tables -= before - e->nr_tables < od->tables ? before - e->nr_tables : od->tables;
    return rc;
}

int ept_od_fault(struct ept_od *od, struct ept *e, uint64_t gpa, struct ept_od_map *m)
{
    const unsigned long worst = e->levels - 1u; /* tables below the root one map may link */
    int rc;

    *m = (struct ept_od_map){0};
    if (gpa < od->floor || gpa >= od->limit)
        return EPT_ENOENT;
    choose_block(od, e, gpa, m);
    if (od->tables + worst > od->max_tables) {
        rc = ept_od_drop_all(od, e);
        if (rc)
            return rc;
        m->dropped = true;
    }
    rc = map_block(od, e, m);
    if (rc == EPT_ENOMEM && !m->dropped) {
        /* the pool is short: our own tables are the pages we can reuse */
        rc = ept_od_drop_all(od, e);
        if (rc)
            return rc;
        m->dropped = true;
        rc = map_block(od, e, m);
    }
    if (!rc)
        od->maps++;
    return rc;
}
