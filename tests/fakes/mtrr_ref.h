/* SPDX-License-Identifier: MIT */
/*
 * Reference MTRR memory type of one address, written straight from SDM Vol. 3A
 * 11.11.2-11.11.4 (one page at a time, no cleverness), for the host tests.
 */
#ifndef TEST_MTRR_REF_H
#define TEST_MTRR_REF_H

#include <stdbool.h>
#include <stdint.h>
#include "ept/mtrr.h"

/* MTRR-state builders shared by the MTRR and identity-map tests */
static inline uint64_t fixed8(unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
                              unsigned f, unsigned g, unsigned h)
{
    return (uint64_t)a | (uint64_t)b << 8 | (uint64_t)c << 16 | (uint64_t)d << 24 |
           (uint64_t)e << 32 | (uint64_t)f << 40 | (uint64_t)g << 48 | (uint64_t)h << 56;
}

static inline void set_var(struct mtrr_state *m, unsigned n, uint64_t base, uint64_t size,
                           unsigned type)
{
    m->var_base[n] = base | type;
    m->var_mask[n] = (~(size - 1) & ((1ull << m->maxphyaddr) - 1)) | MTRR_PHYSMASK_V;
    if (m->nvar <= n)
        m->nvar = n + 1;
}

/* the type of the byte at a, per 11.11.2-11.11.4 */
static inline unsigned ref_type(const struct mtrr_state *m, uint64_t a)
{
    uint64_t phys = ((1ull << m->maxphyaddr) - 1) & ~0xfffull;
    bool seen[8] = {false};
    unsigned n, kinds = 0, only = 0;

    if (!(m->def_type & MTRR_DEF_TYPE_E))
        return EPT_MT_UC;
    if ((m->cap & MTRR_CAP_FIX) && (m->def_type & MTRR_DEF_TYPE_FE) && a < 0x100000) {
        unsigned idx;
        if (a < 0x80000)
            return (m->fixed[0] >> (8 * (a >> 16))) & 0xff;
        if (a < 0xc0000) {
            idx = (unsigned)((a - 0x80000) >> 14);
            return (m->fixed[1 + idx / 8] >> (8 * (idx % 8))) & 0xff;
        }
        idx = (unsigned)((a - 0xc0000) >> 12);
        return (m->fixed[3 + idx / 8] >> (8 * (idx % 8))) & 0xff;
    }
    for (n = 0; n < m->nvar; n++) {
        uint64_t mask = m->var_mask[n] & phys;
        if ((m->var_mask[n] & MTRR_PHYSMASK_V) && (a & mask) == (m->var_base[n] & mask))
            seen[m->var_base[n] & 7] = true;
    }
    for (n = 0; n < 8; n++)
        if (seen[n]) {
            kinds++;
            only = n;
        }
    if (kinds == 0)
        return m->def_type & 0xff;
    if (kinds == 1)
        return only;
    if (seen[EPT_MT_UC])
        return EPT_MT_UC;
    if (kinds == 2 && seen[EPT_MT_WT] && seen[EPT_MT_WB])
        return EPT_MT_WT;
    return EPT_MT_UC; /* undefined by the SDM: ptvisor's choice */
}

#endif
