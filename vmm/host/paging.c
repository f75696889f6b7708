/* SPDX-License-Identifier: MIT */
/*
 * Host page tables with W^X (see paging.h): a pure builder and walker.
 * Each 4-level block is mapped by one leaf when its pages share one class and
 * the level has leaves, else by a table one level down.
 */
#include "host/paging.h"

#define LEVEL_SHIFT(l) (12u + 9u * ((unsigned)(l)-1u))
#define LEVEL_SIZE(l)  (1ull << LEVEL_SHIFT(l))
#define INDEX(va, l)   ((unsigned)(((va) >> LEVEL_SHIFT(l)) & 511u))
#define ENOMEM_        (-12)
#define EINVAL_        (-22)

enum hpt_class { CLASS_RW, CLASS_TEXT, CLASS_RO, CLASS_MIXED };

static bool overlaps(uint64_t p, uint64_t size, uint64_t s, uint64_t e)
{
    return s < e && p < e && s < p + size;
}

static bool within(uint64_t p, uint64_t size, uint64_t s, uint64_t e)
{
    return s <= p && p + size <= e;
}

static enum hpt_class block_class(const struct hpt_layout *l, uint64_t p, uint64_t size)
{
    if (within(p, size, l->text_start, l->text_end))
        return CLASS_TEXT;
    if (within(p, size, l->ro_start, l->ro_end))
        return CLASS_RO;
    if (overlaps(p, size, l->text_start, l->text_end) || overlaps(p, size, l->ro_start, l->ro_end))
        return CLASS_MIXED;
    return CLASS_RW;
}

static uint64_t leaf(const struct hpt_layout *l, unsigned level, uint64_t p, enum hpt_class c)
{
    uint64_t v = p | PTE_P | (level > 1 ? PTE_PS : 0);

    if (c == CLASS_RW)
        v |= PTE_W;
    if (c != CLASS_TEXT && l->has_nx)
        v |= PTE_NX;
    return v;
}

static int build(const struct hpt_layout *l, const struct hpt_ops *ops, uint64_t *table,
                 unsigned level, uint64_t base)
{
    unsigned i;

    for (i = 0; i < 512; i++) {
        uint64_t p = base + (uint64_t)i * LEVEL_SIZE(level), pa;
        enum hpt_class c;
        uint64_t *t;
        int rc;

        if (p >= l->top)
            break;
        c = block_class(l, p, LEVEL_SIZE(level));
        if (c != CLASS_MIXED && (level == 1 || level == 2 || (level == 3 && l->has_1g))) {
            table[i] = leaf(l, level, p, c);
            continue;
        }
        /* a table: the leaves below decide, so the entry itself allows everything */
        t = ops->alloc_page(ops->ctx, &pa);
        if (!t)
            return ENOMEM_;
        rc = build(l, ops, t, level - 1, p);
        if (rc)
            return rc;
        table[i] = pa | PTE_P | PTE_W;
    }
    return 0;
}

int hpt_build(const struct hpt_layout *l, const struct hpt_ops *ops, uint64_t *cr3)
{
    struct hpt_layout lay = *l;
    uint64_t *pml4, pa;
    int rc;

    if (!ops || !ops->alloc_page || !ops->pa_to_va)
        return EINVAL_;
    if ((lay.text_start | lay.text_end | lay.ro_start | lay.ro_end) & 4095 ||
        lay.text_start > lay.text_end || lay.ro_start > lay.ro_end ||
        overlaps(lay.text_start, lay.text_end - lay.text_start, lay.ro_start, lay.ro_end))
        return EINVAL_;
    lay.top = (lay.top + LEVEL_SIZE(3) - 1) & ~(LEVEL_SIZE(3) - 1);
    if (lay.top == 0 || lay.top > LEVEL_SIZE(5) || lay.text_end > lay.top || lay.ro_end > lay.top)
        return EINVAL_;
    pml4 = ops->alloc_page(ops->ctx, &pa);
    if (!pml4)
        return ENOMEM_;
    rc = build(&lay, ops, pml4, 4, 0);
    if (rc)
        return rc;
    *cr3 = pa;
    return 0;
}

static bool is_leaf(uint64_t v, unsigned level)
{
    return level == 1 || ((level == 2 || level == 3) && (v & PTE_PS));
}

struct hpt_access hpt_lookup(const struct hpt_ops *ops, uint64_t cr3, uint64_t va, bool nxe,
                             bool wp)
{
    struct hpt_access a = {0};
    const uint64_t *t = ops->pa_to_va(ops->ctx, cr3 & PTE_ADDR);
    bool w = true, nx = false;
    unsigned level;

    for (level = 4; level >= 1; level--) {
        uint64_t v = t[INDEX(va, level)];

        if (!(v & PTE_P))
            return a;
        w = w && (v & PTE_W);
        nx = nx || (nxe && (v & PTE_NX));
        if (is_leaf(v, level)) {
            uint64_t mask = LEVEL_SIZE(level) - 1;

            a.present = true;
            a.write = w || !wp;
            a.exec = !nx;
            a.level = level;
            a.pa = (v & PTE_ADDR & ~mask) | (va & mask);
            return a;
        }
        t = ops->pa_to_va(ops->ctx, v & PTE_ADDR);
    }
    return a;
}

/* a leaf is W+X when every level on its path allows writes (or WP is off) and none sets NX */
static bool wx_free(const struct hpt_ops *ops, uint64_t table_pa, unsigned level, bool w, bool nx,
                    bool nxe, bool wp)
{
    const uint64_t *t = ops->pa_to_va(ops->ctx, table_pa);
    unsigned i;

    for (i = 0; i < 512; i++) {
        uint64_t v = t[i];
        bool ew = w && (v & PTE_W), enx = nx || (nxe && (v & PTE_NX));

        if (!(v & PTE_P))
            continue;
        if (is_leaf(v, level)) {
            if ((ew || !wp) && !enx)
                return false;
        } else if (!wx_free(ops, v & PTE_ADDR, level - 1, ew, enx, nxe, wp)) {
            return false;
        }
    }
    return true;
}

bool hpt_wx_free(const struct hpt_ops *ops, uint64_t cr3, bool nxe, bool wp)
{
    return wx_free(ops, cr3 & PTE_ADDR, 4, true, false, nxe, wp);
}
