/* SPDX-License-Identifier: MIT */
/*
 * The guest's EPT: identity map of all physical memory except the VMM's.
 *
 * Memory types.  Once EPT is on the CPU ignores the MTRRs for guest accesses
 * (pt-facts.md G.6), and with IPAT = 0 it combines the EPT type with the guest
 * PAT exactly as it would combine the MTRR type with the PAT (SDM Vol. 3C
 * 28.2.6.2 "Memory Type Used for Translated Guest-Physical Addresses": the EPT
 * memory type takes the MTRR's place in Table 11-7).  So every leaf gets the
 * MTRR type of its range and IPAT = 0: the blue-pilled firmware and Linux see
 * the caching they programmed, RAM, MMIO and holes alike.  KVM instead uses WB
 * | IPAT for RAM and UC for MMIO because its guests' MTRRs are virtual; ours are
 * the real ones.  (Guest writes to the MTRRs after launch are not reflected:
 * the VMM would have to intercept them and rebuild.)
 *
 * Two passes over the same recursion: the first validates and counts the
 * table pages the map needs and reserves them (the only step that can run out
 * of memory), the second calls ept_map(), which then finds every page it
 * needs on the spare list.
 */
#include "ept/ept_identity.h"
#include "ept/ept_entry.h"

enum vmm_overlap { VMM_NONE, VMM_PART, VMM_ALL };

struct ident {
    struct ept *e;
    const struct ptv_mem_range *mem;
    unsigned n;
    const struct mtrr_state *mtrr;
    uint64_t top;
    bool commit;
    unsigned long tables; /* first pass: table pages needed */
    int err;
};

static enum vmm_overlap vmm_overlap(const struct ident *id, uint64_t p, uint64_t size)
{
    enum vmm_overlap o = VMM_NONE;
    unsigned i;

    for (i = 0; i < id->n; i++) {
        const struct ptv_mem_range *r = &id->mem[i];

        if (r->type != PTV_MEM_VMM || r->base >= p + size || r->base + r->size <= p)
            continue;
        if (r->base <= p && r->base + r->size >= p + size)
            return VMM_ALL;
        o = VMM_PART;
    }
    return o;
}

static bool leaf_level(const struct ept *e, unsigned level)
{
    return level == 1 || (level == 2 && e->has_2m) || (level == 3 && e->has_1g);
}

/* Map the block [p, p + EPT_LEVEL_SIZE(level)); true if any of it is mapped. */
static bool build(struct ident *id, uint64_t p, unsigned level)
{
    uint64_t size = EPT_LEVEL_SIZE(level);
    enum vmm_overlap o = vmm_overlap(id, p, size);
    bool any = false;
    unsigned type, i;
    int rc;

    if (o == VMM_ALL || id->err)
        return false;
    if (o == VMM_NONE && leaf_level(id->e, level)) {
        rc = mtrr_range_type(id->mtrr, p, size, &type);
        if (rc == 0) {
            if (id->commit)
                id->err = ept_map(id->e, p, p, size, EPT_RWX, type);
            return true;
        }
        if (rc != MTRR_MIXED || level == 1) {
            id->err = EPT_EINVAL; /* a 4 KiB page always has one type */
            return false;
        }
    }
    for (i = 0; i < EPT_ENTRIES; i++) {
        uint64_t c = p + (uint64_t)i * EPT_LEVEL_SIZE(level - 1);

        if (c >= id->top)
            break;
        any |= build(id, c, level - 1);
    }
    if (any)
        id->tables++; /* the table holding this block's entries */
    return any;
}

static int check_ranges(const struct ptv_mem_range *mem, unsigned n, uint64_t *end)
{
    unsigned i;

    *end = 0;
    if (n && !mem)
        return EPT_EINVAL;
    for (i = 0; i < n; i++) {
        const struct ptv_mem_range *r = &mem[i];

        if (r->size == 0 || ((r->base | r->size) & (EPT_PAGE_SIZE - 1)))
            return EPT_EINVAL;
        if (r->size > (1ull << EPT_GPA_BITS) || r->base > (1ull << EPT_GPA_BITS) - r->size)
            return EPT_EINVAL;
        if (r->type < PTV_MEM_RAM || r->type > PTV_MEM_VMM)
            return EPT_EINVAL;
        if (r->base + r->size > *end)
            *end = r->base + r->size;
    }
    return 0;
}

static void pass(struct ident *id, bool commit)
{
    uint64_t p;
    bool any = false;

    id->commit = commit;
    id->tables = 0;
    id->err = 0;
    for (p = 0; p < id->top && !id->err; p += EPT_LEVEL_SIZE(EPT_LEVELS))
        any |= build(id, p, EPT_LEVELS);
    /* a 5-level walk: the PML4 below PML5 entry 0 (top <= 2^48) */
    if (any && id->e->levels > EPT_LEVELS)
        id->tables++;
}

int ept_build_identity(struct ept *e, const struct ptv_mem_range *mem, unsigned n,
                       const struct mtrr_state *mtrr, uint64_t *mapped_top)
{
    const uint64_t gib = EPT_LEVEL_SIZE(3);
    struct ident id = {.e = e, .mem = mem, .n = n, .mtrr = mtrr};
    uint64_t end;
    int rc;

    if (!e || !e->root || !mtrr || mtrr_check(mtrr) || check_ranges(mem, n, &end))
        return EPT_EINVAL;
    if (e->nr_leaves[0] || e->nr_leaves[1] || e->nr_leaves[2])
        return EPT_EEXIST;
    if (end < 4 * gib)
        end = 4 * gib;
    id.top = (end + gib - 1) & ~(gib - 1);
    if (id.top > (1ull << e->maxphyaddr) || id.top > (1ull << mtrr->maxphyaddr) ||
        id.top > (1ull << EPT_GPA_BITS))
        return EPT_EINVAL;

    pass(&id, false);
    if (id.err)
        return id.err;
    /* every table below the root the map needs, now */
    rc = ept_reserve(e, id.tables);
    if (rc)
        return rc;
    pass(&id, true);
    if (id.err) {
        /* not expected: every page was reserved.  Unmapping whole 1 GiB
         * blocks never splits, so this cannot fail; the empty tables stay. */
        rc = ept_unmap(e, 0, id.top);
        (void)rc;
        return id.err;
    }
    if (mapped_top)
        *mapped_top = id.top;
    return 0;
}
