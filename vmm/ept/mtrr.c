/* SPDX-License-Identifier: MIT */
/*
 * MTRR memory types over ranges (SDM Vol. 3A 11.11; 12.11 in recent editions).
 *
 * A range is cut into naturally aligned power-of-two blocks.  For one block
 * every valid variable range either covers all of it, none of it, or part of
 * it; only the last case needs a closer look, and then the block is halved.
 * With contiguous masks (what firmware programs) a range is itself an aligned
 * block, so halving follows at most one path per range boundary.
 */
#include "ept/mtrr.h"

#define MTRR_PAGE_MASK 0xfffull
#define MTRR_NONE      0xffu /* no variable range matched (not a memory type) */

static uint64_t addr_bits(const struct mtrr_state *m)
{
    return ((1ull << m->maxphyaddr) - 1) & ~MTRR_PAGE_MASK;
}

static bool fixed_active(const struct mtrr_state *m)
{
    /* 11.11.2.1: FE enables the fixed ranges, when the CPU has them (MTRRcap.FIX) */
    return (m->cap & MTRR_CAP_FIX) && (m->def_type & MTRR_DEF_TYPE_FE);
}

static bool var_valid(const struct mtrr_state *m, unsigned n)
{
    return (m->var_mask[n] & MTRR_PHYSMASK_V) != 0;
}

int mtrr_check(const struct mtrr_state *m)
{
    unsigned n, b;

    if (!m || m->nvar > MTRR_MAX_VAR || m->nvar > (m->cap & MTRR_CAP_VCNT))
        return -22;
    if (m->maxphyaddr < 32 || m->maxphyaddr > 52)
        return -22;
    if (!(m->def_type & MTRR_DEF_TYPE_E))
        return 0; /* nothing else is consulted */
    if (!ept_memtype_valid((unsigned)(m->def_type & MTRR_DEF_TYPE_TYPE)))
        return -22;
    for (n = 0; fixed_active(m) && n < MTRR_NUM_FIXED; n++)
        for (b = 0; b < 8; b++)
            if (!ept_memtype_valid((unsigned)(m->fixed[n] >> (8 * b)) & 0xffu))
                return -22;
    for (n = 0; n < m->nvar; n++)
        if (var_valid(m, n) && !ept_memtype_valid((unsigned)(m->var_base[n] & MTRR_PHYSBASE_TYPE)))
            return -22;
    return 0;
}

/*
 * 11.11.4.1 "MTRR Precedences", for addresses matched by several variable
 * ranges: one type if all agree, UC if any is UC, WT for WT with WB.  Every
 * other overlap is undefined by the SDM; ptvisor picks UC, the safe type.
 */
static unsigned combine(unsigned acc, unsigned t)
{
    if (acc == MTRR_NONE || acc == t)
        return t;
    if ((acc == EPT_MT_WT && t == EPT_MT_WB) || (acc == EPT_MT_WB && t == EPT_MT_WT))
        return EPT_MT_WT;
    return EPT_MT_UC;
}

/* [p, p + size) within the fixed ranges: fixed[n] holds 8 sub-ranges of 'step' bytes */
static int fixed_type(const struct mtrr_state *m, uint64_t p, uint64_t size)
{
    int type = -1;
    unsigned n, b;

    for (n = 0; n < MTRR_NUM_FIXED; n++) {
        uint64_t step = n == 0 ? 0x10000 : n < 3 ? 0x4000 : 0x1000;
        uint64_t first = n == 0  ? 0
                         : n < 3 ? 0x80000 + (n - 1) * 0x20000
                                 : 0xc0000 + (n - 3) * 0x8000;

        for (b = 0; b < 8; b++) {
            uint64_t lo = first + b * step;
            int t = (int)((m->fixed[n] >> (8 * b)) & 0xff);

            if (lo + step <= p || lo >= p + size)
                continue;
            if (type >= 0 && t != type)
                return MTRR_MIXED;
            type = t;
        }
    }
    return type;
}

static int block_type(const struct mtrr_state *m, uint64_t p, unsigned k);

static int halves(const struct mtrr_state *m, uint64_t p, unsigned k)
{
    int a = block_type(m, p, k - 1);
    int b;

    if (a < 0)
        return a;
    b = block_type(m, p + (1ull << (k - 1)), k - 1);
    if (b < 0)
        return b;
    return a == b ? a : MTRR_MIXED;
}

/* the type of the aligned block [p, p + 2^k), k >= 12, or MTRR_MIXED */
static int block_type(const struct mtrr_state *m, uint64_t p, unsigned k)
{
    uint64_t size = 1ull << k, bits = addr_bits(m);
    unsigned acc = MTRR_NONE, n;

    if (fixed_active(m) && p < MTRR_FIXED_END)
        return p + size <= MTRR_FIXED_END ? fixed_type(m, p, size) : halves(m, p, k);

    /* 11.11.3: an address matches range n when (addr & mask) == (base & mask) */
    for (n = 0; n < m->nvar; n++) {
        uint64_t mask = m->var_mask[n] & bits;

        if (!var_valid(m, n) || ((p ^ m->var_base[n]) & mask & ~(size - 1)))
            continue; /* matches nothing in the block */
        if (mask & (size - 1))
            return halves(m, p, k); /* matches part of it */
        acc = combine(acc, (unsigned)(m->var_base[n] & MTRR_PHYSBASE_TYPE));
    }
    return acc == MTRR_NONE ? (int)(m->def_type & MTRR_DEF_TYPE_TYPE) : (int)acc;
}

int mtrr_range_type(const struct mtrr_state *m, uint64_t base, uint64_t size, unsigned *type)
{
    uint64_t end = base + size, p;
    int t = -1;

    if (mtrr_check(m) || !type || size == 0 || ((base | size) & MTRR_PAGE_MASK))
        return -22;
    if (base >= (1ull << m->maxphyaddr) || size > (1ull << m->maxphyaddr) - base)
        return -22;
    if (!(m->def_type & MTRR_DEF_TYPE_E)) {
        *type = EPT_MT_UC; /* 11.11.2.1: MTRRs disabled: UC everywhere */
        return 0;
    }
    for (p = base; p < end;) {
        unsigned k = 12;
        int bt;

        /* the largest aligned block at p that ends within the range */
        while (k < m->maxphyaddr && !(p & ((2ull << k) - 1)) && (2ull << k) <= end - p)
            k++;
        bt = block_type(m, p, k);
        if (bt < 0 || (t >= 0 && bt != t))
            return MTRR_MIXED;
        t = bt;
        p += 1ull << k;
    }
    *type = (unsigned)t;
    return 0;
}
