/* SPDX-License-Identifier: MIT */
/*
 * EPT table builder (see ept.h for the rules every call follows).
 *
 * Each mutating call runs one walker twice over the same request: a plan pass
 * that validates the tree (ept_protect needs every page mapped) and counts the
 * table pages the change needs, reading "virtual" tables synthesised from the
 * entry they would replace; then, once those pages are reserved, a commit pass
 * that makes exactly the same decisions on real tables and can no longer fail,
 * and a merge pass over the same range that folds tables left uniform back into
 * leaves.  Splits and merges change page sizes with break-before-make (ept.h).
 */
#include "ept/ept.h"
#include "ept/ept_entry.h"
#include "lib/ptv_string.h"

/* an invariant broken by ept.c itself: stop rather than build a bad tree */
#define EPT_BUG_ON(c)                                                                              \
    do {                                                                                           \
        if (__builtin_expect(!!(c), 0))                                                            \
            __builtin_trap();                                                                      \
    } while (0)

#define EPT_ATTR_MASK (VMX_EPT_RWX_MASK | VMX_EPT_MT_MASK | VMX_EPT_IPAT_BIT)

enum ept_op { EPT_OP_MAP, EPT_OP_UNMAP, EPT_OP_PROTECT };

#define EPT_LEVEL_MAX 5u

struct ept_req {
    enum ept_op op;
    bool commit;    /* false: plan pass, nothing is written */
    uint64_t start; /* [start, end): 4 KiB aligned */
    uint64_t end;
    uint64_t hpa;       /* MAP: host address of start */
    uint64_t attrs;     /* MAP: RWX | memory type | IPAT; PROTECT: RWX */
    unsigned long need; /* plan: table pages the commit will take */
    bool narrowed;      /* a permission was removed */
    bool prune;         /* UNMAP: unlink tables left empty (ept_unmap_prune) */
    int err;
};

enum ept_step { STEP_KEEP, STEP_WRITE, STEP_DESCEND, STEP_SPLIT, STEP_HOLE };

static uint64_t entry_read(const uint64_t *slot)
{
    return __atomic_load_n(slot, __ATOMIC_RELAXED);
}

/* the one place a table word is written: a single 8-byte store */
static void word_store(struct ept *e, uint64_t *slot, uint64_t val)
{
    if (e->ops.store)
        e->ops.store(e->ops.ctx, slot, val);
    else
        __atomic_store_n(slot, val, __ATOMIC_RELEASE);
}

static uint64_t *table_va(const struct ept *e, uint64_t pa)
{
    return e->ops.pa_to_va(e->ops.ctx, pa);
}

static bool entry_used(uint64_t v)
{
    return (v & EPT_SW_USED) != 0;
}

/* a leaf maps memory: every PTE, a PDE/PDPTE with bit 7; a PML4E/PML5E never is one */
static bool entry_is_leaf(uint64_t v, unsigned level)
{
    if (!entry_used(v) || level >= 4)
        return false;
    return level == 1 || (v & VMX_EPT_PAGE_SIZE_MASK);
}

static bool entry_is_table(uint64_t v, unsigned level)
{
    return entry_used(v) && level > 1 && !entry_is_leaf(v, level);
}

static uint64_t leaf_addr(uint64_t v, unsigned level)
{
    return v & EPT_ADDR_MASK & ~(EPT_LEVEL_SIZE(level) - 1);
}

static bool perms_valid(unsigned perms)
{
    /* SDM Vol. 3C 28.2.3.1 "EPT Misconfigurations": W without R is a misconfiguration, and so is X
     * without R unless the CPU has execute-only pages; ptvisor never uses them. */
    return (perms & ~EPT_RWX) == 0 && (perms == 0 || (perms & EPT_R));
}

static bool level_has_leaves(const struct ept *e, unsigned level)
{
    return level == 1 || (level == 2 && e->has_2m) || (level == 3 && e->has_1g);
}

static uint64_t phys_limit(const struct ept *e)
{
    return 1ull << e->maxphyaddr;
}

/* Build a leaf.  Every leaf the builder writes comes from here. */
static uint64_t make_leaf(const struct ept *e, unsigned level, uint64_t hpa, uint64_t attrs)
{
    unsigned mt = (unsigned)((attrs & VMX_EPT_MT_MASK) >> VMX_EPT_MT_EPTE_SHIFT);

    EPT_BUG_ON(!level_has_leaves(e, level));
    EPT_BUG_ON(hpa & (EPT_LEVEL_SIZE(level) - 1));
    EPT_BUG_ON(hpa + EPT_LEVEL_SIZE(level) > phys_limit(e));
    EPT_BUG_ON(attrs & ~EPT_ATTR_MASK);
    EPT_BUG_ON(!perms_valid((unsigned)(attrs & VMX_EPT_RWX_MASK)) || !ept_memtype_valid(mt));
    return hpa | attrs | EPT_SW_USED | (level > 1 ? VMX_EPT_PAGE_SIZE_MASK : 0);
}

/* Non-leaf entries are RWX: the leaves alone decide (SDM Vol. 3C 28.2.2). */
static uint64_t make_table_entry(const struct ept *e, uint64_t pa)
{
    EPT_BUG_ON(pa & (EPT_PAGE_SIZE - 1) || pa >= phys_limit(e));
    return pa | VMX_EPT_RWX_MASK | EPT_SW_USED;
}

/* Entry i of the table that would replace the entry 'parent' at level+1. */
static uint64_t virtual_child(const struct ept *e, uint64_t parent, unsigned level, unsigned i)
{
    if (!entry_is_leaf(parent, level + 1))
        return 0;
    return make_leaf(e, level, leaf_addr(parent, level + 1) + (uint64_t)i * EPT_LEVEL_SIZE(level),
                     parent & EPT_ATTR_MASK);
}

static void entry_write(struct ept *e, unsigned level, uint64_t *slot, uint64_t old, uint64_t val)
{
    if (entry_is_leaf(old, level))
        e->nr_leaves[level - 1]--;
    if (entry_is_leaf(val, level))
        e->nr_leaves[level - 1]++;
    word_store(e, slot, val);
}

int ept_reserve(struct ept *e, unsigned long n)
{
    while (e->nr_spare < n) {
        uint64_t pa = 0;
        uint64_t *va = e->ops.alloc_page(e->ops.ctx, &pa);

        if (!va)
            return EPT_ENOMEM;
        /* a page the CPU could not reach as a table would be a silent leak,
         * not a misconfiguration: refuse the allocator's answer loudly */
        if ((pa & (EPT_PAGE_SIZE - 1)) || pa >= phys_limit(e) || table_va(e, pa) != va)
            return EPT_EINVAL;
        word_store(e, &va[0], e->spare_pa);
        e->spare_pa = pa;
        e->nr_spare++;
    }
    return 0;
}

static uint64_t *take_spare(struct ept *e, uint64_t *pa)
{
    uint64_t *va;

    EPT_BUG_ON(e->nr_spare == 0);
    *pa = e->spare_pa;
    va = table_va(e, *pa);
    e->spare_pa = entry_read(&va[0]);
    e->nr_spare--;
    word_store(e, &va[0], 0); /* the page is all zero again */
    return va;
}

static bool table_empty(const uint64_t *t)
{
    unsigned i;

    for (i = 0; i < EPT_ENTRIES; i++)
        if (entry_used(entry_read(&t[i])))
            return false;
    return true;
}

/*
 * Unlink the empty table that entry 'cur' at 'level' points to: one store
 * makes it unreachable, then the page waits on the retired list until the
 * caller's INVEPT (ept_flush_done()) before it can be reused.  Its word 0 holds
 * the list link: a 4 KiB aligned address has bits 2:0 (and bit 10) clear, so
 * to a CPU that still walks the page through a stale paging-structure cache
 * entry 0 is as not present as the other 511 (SDM Vol. 3C 28.2.2).
 */
static void push_retired(struct ept *e, uint64_t pa)
{
    e->nr_tables--;
    word_store(e, &table_va(e, pa)[0], e->retired_pa);
    e->retired_pa = pa;
    e->nr_retired++;
}

static void retire(struct ept *e, unsigned level, uint64_t *slot, uint64_t cur)
{
    entry_write(e, level, slot, cur, 0);
    e->flush_needed = true; /* a present table entry went away */
    push_retired(e, cur & EPT_ADDR_MASK);
}

/*
 * Break-before-make, the invalidation: every CPU forgets what it cached from this EPT before an
 * entry is given another page size (ept.h).  Nothing to do when nothing is owed: then no CPU
 * can hold a translation the entry gave before (not-present entries are never cached, SDM
 * Vol. 3C 28.4.2).  The caller's hook ends in ept_flush_done() when every CPU answered, which
 * also makes the tables retired so far reusable, in this very call.
 */
static void bbm_flush(struct ept *e)
{
    if (!e->flush_needed)
        return;
    e->nr_breaks++;
    e->ops.flush(e->ops.ctx, e);
}

/*
 * Break-before-make, the break: entry 'cur' at 'slot' is about to get another page size (a
 * table where a leaf was, or a leaf where a table was).  If present, it is made not present
 * first; then the invalidation.  Returns what the entry holds now (0, or a not-present 'cur').
 */
static uint64_t bbm_break(struct ept *e, unsigned level, uint64_t *slot, uint64_t cur)
{
    if (cur & VMX_EPT_RWX_MASK) {
        entry_write(e, level, slot, cur, 0);
        e->flush_needed = true;
        cur = 0;
    }
    bbm_flush(e);
    return cur;
}

static uint64_t collapse(const struct ept *e, unsigned level, const uint64_t *t);

/* entry v at 'level' as one leaf: itself if it is a leaf as make_leaf() builds it, the leaf
 * its table collapses to, else 0 */
static uint64_t as_leaf(const struct ept *e, unsigned level, uint64_t v)
{
    if (entry_is_table(v, level))
        return collapse(e, level, table_va(e, v & EPT_ADDR_MASK));
    if (!entry_is_leaf(v, level) ||
        v != make_leaf(e, level, leaf_addr(v, level), v & EPT_ATTR_MASK))
        return 0;
    return v;
}

/*
 * The leaf at 'level' that the table t below an entry at 'level' adds up to, or 0: its 512
 * entries are leaves -- or tables that add up to one themselves -- with one set of attributes
 * mapping one contiguous run of host memory aligned to the larger page, so the larger leaf
 * translates every GPA exactly as they do.  Counting uniform child tables as their leaf lets a
 * split two levels deep (1 GiB -> 2 MiB -> 4 KiB) come back with one break-before-make.
 */
static uint64_t collapse(const struct ept *e, unsigned level, const uint64_t *t)
{
    const uint64_t step = EPT_LEVEL_SIZE(level - 1);
    uint64_t first, base;
    unsigned j;

    if (!level_has_leaves(e, level))
        return 0;
    first = as_leaf(e, level - 1, entry_read(&t[0]));
    base = leaf_addr(first, level - 1);
    if (!first || (base & (EPT_LEVEL_SIZE(level) - 1)))
        return 0;
    for (j = 1; j < EPT_ENTRIES; j++) {
        uint64_t v = entry_read(&t[j]);

        if (entry_is_table(v, level - 1))
            v = as_leaf(e, level - 1, v);
        if (v != first + j * step)
            return 0;
    }
    return make_leaf(e, level, base, first & EPT_ATTR_MASK);
}

/* the table at pa (entries at 'level') and every table below it leave the tree: retired */
static void retire_tree(struct ept *e, unsigned level, uint64_t pa)
{
    const uint64_t *t = table_va(e, pa);
    unsigned j;

    for (j = 0; j < EPT_ENTRIES; j++) {
        uint64_t v = entry_read(&t[j]);

        if (entry_is_table(v, level))
            retire_tree(e, level - 1, v & EPT_ADDR_MASK);
        else if (entry_is_leaf(v, level))
            e->nr_leaves[level - 1]--;
    }
    push_retired(e, pa);
}

/*
 * Merge a split back: the table below entry 'cur' adds up to 'leaf'
 * (collapse()).  Break-before-make: the entry is made not present (the tables below become
 * unreachable and are retired as ept_unmap_prune() retires an empty one: never written but
 * for word 0, the list link, not present to a CPU that still walks them), every CPU
 * invalidates, and only then is the one larger leaf written.  So a split a later call undoes
 * gives its pages back, and guest-driven splits (a moved APIC window, a write-protected ToPA
 * page) cannot drain the pool.
 */
static void merge(struct ept *e, unsigned level, uint64_t *slot, uint64_t cur, uint64_t leaf)
{
    entry_write(e, level, slot, cur, 0);
    e->flush_needed = true; /* a present table entry went away */
    retire_tree(e, level - 1, cur & EPT_ADDR_MASK);
    bbm_flush(e);
    entry_write(e, level, slot, 0, leaf);
}

/*
 * After the commit walk: every table in [r->start, r->end) that now adds up to one leaf is
 * merged, the largest first (top-down), so one break-before-make undoes a split of any depth.
 */
static void merge_walk(struct ept *e, const struct ept_req *r, unsigned level, uint64_t *table,
                       uint64_t base)
{
    const uint64_t size = EPT_LEVEL_SIZE(level);
    uint64_t lo = r->start > base ? r->start : base;
    unsigned i;

    for (i = EPT_INDEX(lo, level); i < EPT_ENTRIES && level > 1; i++) {
        uint64_t eb = base + (uint64_t)i * size, cur = entry_read(&table[i]), leaf;
        uint64_t *t;

        if (eb >= r->end)
            break;
        if (!entry_is_table(cur, level))
            continue;
        t = table_va(e, cur & EPT_ADDR_MASK);
        leaf = collapse(e, level, t);
        if (leaf)
            merge(e, level, &table[i], cur, leaf);
        else
            merge_walk(e, r, level - 1, t, eb);
    }
}

/* What to do with entry 'cur' (covering [eb, eb + size)) for request r. */
static enum ept_step decide(const struct ept *e, const struct ept_req *r, unsigned level,
                            uint64_t cur, uint64_t eb, uint64_t *want)
{
    uint64_t size = EPT_LEVEL_SIZE(level);
    bool full = r->start <= eb && eb + size <= r->end;

    if (entry_is_table(cur, level))
        return STEP_DESCEND;
    switch (r->op) {
    case EPT_OP_MAP: {
        uint64_t s = eb > r->start ? eb : r->start;

        if (full && level_has_leaves(e, level) && !((r->hpa + (eb - r->start)) & (size - 1))) {
            *want = make_leaf(e, level, r->hpa + (eb - r->start), r->attrs);
            return *want == cur ? STEP_KEEP : STEP_WRITE;
        }
        EPT_BUG_ON(level == 1);
        /* a huge leaf that already maps the sub-range exactly so stays whole */
        if (entry_is_leaf(cur, level) && (cur & EPT_ATTR_MASK) == r->attrs &&
            leaf_addr(cur, level) + (s - eb) == r->hpa + (s - r->start))
            return STEP_KEEP;
        return STEP_SPLIT;
    }
    case EPT_OP_UNMAP:
        if (!entry_used(cur))
            return STEP_KEEP;
        *want = 0;
        return full ? STEP_WRITE : STEP_SPLIT;
    case EPT_OP_PROTECT:
        if (!entry_used(cur))
            return STEP_HOLE;
        *want = (cur & ~VMX_EPT_RWX_MASK) | r->attrs;
        if (*want == cur)
            return STEP_KEEP;
        return full ? STEP_WRITE : STEP_SPLIT;
    }
    EPT_BUG_ON(1);
    return STEP_KEEP;
}

/*
 * Apply r to the table at 'level' mapping GPAs from 'base'.  'table' is NULL in
 * the plan pass for a table that does not exist yet; its entries are then
 * virtual_child(parent).  'live': the table is reachable from the root (the CPU
 * may walk it); a new table being filled is not, and needs no invalidation.
 */
static void walk(struct ept *e, struct ept_req *r, unsigned level, uint64_t *table, uint64_t parent,
                 uint64_t base, bool live)
{
    uint64_t size = EPT_LEVEL_SIZE(level);
    uint64_t lo = r->start > base ? r->start : base;
    unsigned i;

    for (i = EPT_INDEX(lo, level); i < EPT_ENTRIES && !r->err; i++) {
        uint64_t eb = base + (uint64_t)i * size;
        uint64_t cur = table ? entry_read(&table[i]) : virtual_child(e, parent, level, i);
        uint64_t want = 0;

        if (eb >= r->end)
            break;
        switch (decide(e, r, level, cur, eb, &want)) {
        case STEP_KEEP:
            break;
        case STEP_HOLE:
            r->err = EPT_ENOENT;
            break;
        case STEP_WRITE:
            if (cur & ~want & VMX_EPT_RWX_MASK)
                r->narrowed = true;
            if (!r->commit)
                break;
            if (live && (cur & VMX_EPT_RWX_MASK))
                e->flush_needed = true; /* a present translation changed */
            /* a large leaf into an entry not present: it may have been a table (or a leaf of
             * another size) a moment ago, cached still if an invalidation is owed */
            if (live && level > 1 && !(cur & VMX_EPT_RWX_MASK) && (want & VMX_EPT_RWX_MASK))
                bbm_flush(e);
            entry_write(e, level, &table[i], cur, want);
            break;
        case STEP_DESCEND: {
            uint64_t *t = table_va(e, cur & EPT_ADDR_MASK);

            walk(e, r, level - 1, t, 0, eb, live);
            if (r->commit && r->prune && table_empty(t))
                retire(e, level, &table[i], cur);
            break;
        }
        case STEP_SPLIT:
            if (!r->commit) {
                r->need++;
                walk(e, r, level - 1, NULL, cur, eb, false);
            } else {
                uint64_t pa;
                uint64_t *t = take_spare(e, &pa);
                unsigned j;

                /* fill the new table while nothing can reach it ... */
                for (j = 0; j < EPT_ENTRIES && entry_is_leaf(cur, level); j++)
                    entry_write(e, level - 1, &t[j], 0, virtual_child(e, cur, level - 1, j));
                walk(e, r, level - 1, t, 0, eb, false);
                /* ... then break the parent (a leaf, or a hole that may have been one) and
                 * link the table with one store */
                if (live)
                    cur = bbm_break(e, level, &table[i], cur);
                entry_write(e, level, &table[i], cur, make_table_entry(e, pa));
                e->nr_tables++;
            }
            break;
        }
    }
}

/* plan, reserve, commit */
static int run(struct ept *e, struct ept_req *r)
{
    int rc;

    r->commit = false;
    walk(e, r, e->levels, e->root, 0, 0, true);
    if (r->err)
        return r->err;
    rc = ept_reserve(e, r->need);
    if (rc)
        return rc;
    r->commit = true;
    r->narrowed = false;
    walk(e, r, e->levels, e->root, 0, 0, true);
    EPT_BUG_ON(r->err);
    merge_walk(e, r, e->levels, e->root, 0);
    return 0;
}

static int check_gpa_range(const struct ept *e, uint64_t gpa, uint64_t size)
{
    const uint64_t gpa_limit = ept_gpa_limit(e);

    if (!e->root || size == 0 || ((gpa | size) & (EPT_PAGE_SIZE - 1)))
        return EPT_EINVAL;
    if (gpa >= gpa_limit || size > gpa_limit - gpa)
        return EPT_EINVAL;
    return 0;
}

int ept_init(struct ept *e, const struct ept_ops *ops, bool has_1g, bool has_2m)
{
    int rc;

    memset(e, 0, sizeof(*e));
    if (!ops || !ops->alloc_page || !ops->pa_to_va || !ops->flush)
        return EPT_EINVAL;
    e->ops = *ops;
    /* 1 GiB pages only with 2 MiB pages (every such CPU has both): a split
     * then always yields leaves one level down */
    e->has_1g = has_1g && has_2m;
    e->has_2m = has_2m;
    e->maxphyaddr = 52;
    e->levels = EPT_LEVELS;
    rc = ept_reserve(e, 1);
    if (rc)
        return rc;
    e->root = take_spare(e, &e->root_pa);
    e->nr_tables = 1;
    return 0;
}

int ept_set_maxphyaddr(struct ept *e, unsigned bits)
{
    uint64_t pa = e->spare_pa;
    unsigned i;

    if (!e->root || bits < 32 || bits > 52)
        return EPT_EINVAL;
    if (e->nr_tables != 1 || e->nr_leaves[0] || e->nr_leaves[1] || e->nr_leaves[2])
        return EPT_EINVAL;
    if (e->root_pa >= (1ull << bits))
        return EPT_EINVAL;
    for (i = 0; i < e->nr_spare; i++) {
        if (pa >= (1ull << bits))
            return EPT_EINVAL;
        pa = entry_read(&table_va(e, pa)[0]);
    }
    e->maxphyaddr = bits;
    return 0;
}

int ept_set_levels(struct ept *e, unsigned levels)
{
    if (!e->root || (levels != 4 && levels != EPT_LEVEL_MAX))
        return EPT_EINVAL;
    if (e->nr_tables != 1 || e->nr_leaves[0] || e->nr_leaves[1] || e->nr_leaves[2])
        return EPT_EINVAL;
    e->levels = levels; /* the empty root is now a PML5 (or a PML4 again) */
    return 0;
}

int ept_map(struct ept *e, uint64_t gpa, uint64_t hpa, uint64_t size, unsigned perms,
            unsigned memtype)
{
    struct ept_req r = {.op = EPT_OP_MAP, .start = gpa, .end = gpa + size, .hpa = hpa};
    int rc = check_gpa_range(e, gpa, size);

    if (rc)
        return rc;
    if ((hpa & (EPT_PAGE_SIZE - 1)) || hpa >= phys_limit(e) || size > phys_limit(e) - hpa)
        return EPT_EINVAL;
    if (perms == 0 || !perms_valid(perms))
        return EPT_EINVAL;
    if ((memtype & ~(7u | EPT_MT_IPAT)) || !ept_memtype_valid(memtype & 7u))
        return EPT_EINVAL;
    r.attrs = perms | ((uint64_t)(memtype & 7u) << VMX_EPT_MT_EPTE_SHIFT) |
              ((memtype & EPT_MT_IPAT) ? VMX_EPT_IPAT_BIT : 0);
    return run(e, &r);
}

int ept_unmap(struct ept *e, uint64_t gpa, uint64_t size)
{
    struct ept_req r = {.op = EPT_OP_UNMAP, .start = gpa, .end = gpa + size};
    int rc = check_gpa_range(e, gpa, size);

    return rc ? rc : run(e, &r);
}

int ept_unmap_prune(struct ept *e, uint64_t gpa, uint64_t size)
{
    struct ept_req r = {.op = EPT_OP_UNMAP, .start = gpa, .end = gpa + size, .prune = true};
    int rc = check_gpa_range(e, gpa, size);

    return rc ? rc : run(e, &r);
}

void ept_flush_done(struct ept *e)
{
    e->flush_needed = false;
    /* the CPU has forgotten every unlinked table: they may be reused */
    while (e->nr_retired) {
        uint64_t pa = e->retired_pa;
        uint64_t *va = table_va(e, pa);
        unsigned j;

        e->retired_pa = entry_read(&va[0]);
        for (j = 1; j < EPT_ENTRIES; j++) /* a merged table's leaves: zero it for take_spare */
            if (entry_read(&va[j]))
                word_store(e, &va[j], 0);
        e->nr_retired--;
        word_store(e, &va[0], e->spare_pa);
        e->spare_pa = pa;
        e->nr_spare++;
    }
}

int ept_protect(struct ept *e, uint64_t gpa, uint64_t size, unsigned perms, bool *narrowed)
{
    struct ept_req r = {.op = EPT_OP_PROTECT, .start = gpa, .end = gpa + size, .attrs = perms};
    int rc = check_gpa_range(e, gpa, size);

    if (!rc && !perms_valid(perms))
        rc = EPT_EINVAL;
    if (!rc)
        rc = run(e, &r);
    if (narrowed)
        *narrowed = !rc && r.narrowed;
    return rc;
}

int ept_translate(const struct ept *e, uint64_t gpa, uint64_t *hpa, unsigned *perms,
                  unsigned *memtype, unsigned *page_level)
{
    const uint64_t *t = e->root;
    unsigned level;

    if (!t || gpa >= ept_gpa_limit(e))
        return EPT_EINVAL;
    for (level = e->levels; level >= 1; level--) {
        uint64_t v = entry_read(&t[EPT_INDEX(gpa, level)]);

        if (!entry_used(v))
            return EPT_ENOENT;
        if (!entry_is_leaf(v, level)) {
            t = table_va(e, v & EPT_ADDR_MASK);
            continue;
        }
        if (hpa)
            *hpa = leaf_addr(v, level) | (gpa & (EPT_LEVEL_SIZE(level) - 1));
        if (perms)
            *perms = (unsigned)(v & VMX_EPT_RWX_MASK);
        if (memtype)
            *memtype = (unsigned)((v & VMX_EPT_MT_MASK) >> VMX_EPT_MT_EPTE_SHIFT) |
                       ((v & VMX_EPT_IPAT_BIT) ? EPT_MT_IPAT : 0);
        if (page_level)
            *page_level = level;
        return 0;
    }
    return EPT_ENOENT; /* not reached: level 1 entries are leaves */
}

uint64_t ept_eptp(const struct ept *e)
{
    return e->root_pa | (e->levels == EPT_LEVEL_MAX ? VMX_EPTP_PWL_5 : VMX_EPTP_PWL_4) |
           VMX_EPTP_MT_WB;
}
