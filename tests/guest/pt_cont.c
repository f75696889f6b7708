/* SPDX-License-Identifier: MIT */
/* The on-box self-test's continuity verdict (pt_cont.h): pure, shared with the host test. */
#include "pt_cont.h"

#include "lib/fmt.h"

#define PSB_LEN 16

static bool psb_at(const uint8_t *b, uint64_t avail)
{
    if (avail < PSB_LEN)
        return false;
    for (unsigned i = 0; i < PSB_LEN; i++)
        if (b[i] != (i & 1 ? 0x82 : 0x02))
            return false;
    return true;
}

/* (table offset, output offset) of a MASK_PTRS value, ordered as the pointer moves */
static uint64_t position(uint64_t mask_ptrs)
{
    return ((mask_ptrs >> 7) & 0x1ffffff) << 32 | (mask_ptrs >> 32);
}

bool pt_cont_check(const struct pt_cont_in *in, struct pt_cont_out *o)
{
    o->psbs = o->max_gap = 0;
    o->why[0] = 0;
    for (unsigned i = 1; i < in->n_samples; i++) {
        if (position(in->samples[i]) < position(in->samples[i - 1])) {
            ptv_snprintf(o->why, sizeof(o->why),
                         "output pointer went backwards after exit %u: MASK_PTRS %#lx -> %#lx", i,
                         (unsigned long)in->samples[i - 1], (unsigned long)in->samples[i]);
            return false;
        }
    }
    if (in->end == 0 || in->end > in->size) {
        ptv_snprintf(o->why, sizeof(o->why), "final output offset %#lx outside (0, %#lx]",
                     (unsigned long)in->end, (unsigned long)in->size);
        return false;
    }
    if (in->n_samples && (in->samples[in->n_samples - 1] >> 32) > in->end) {
        ptv_snprintf(o->why, sizeof(o->why), "last sample %#lx beyond the final offset %#lx",
                     (unsigned long)in->samples[in->n_samples - 1], (unsigned long)in->end);
        return false;
    }
    if (!psb_at(in->out, in->end)) {
        ptv_snprintf(o->why, sizeof(o->why), "no PSB at the region's first byte");
        return false;
    }
    for (uint64_t i = in->end; i < in->size; i++) {
        if (in->out[i] != in->fill) {
            ptv_snprintf(o->why, sizeof(o->why),
                         "byte %#lx past the final offset %#lx was written (%#x, not %#x)",
                         (unsigned long)i, (unsigned long)in->end, in->out[i], in->fill);
            return false;
        }
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < in->end; i++) {
        if (in->out[i] != 0x02 || !psb_at(in->out + i, in->end - i))
            continue;
        if (i - last > o->max_gap)
            o->max_gap = i - last;
        last = i;
        o->psbs++;
        i += PSB_LEN - 1;
    }
    if (in->end - last > o->max_gap)
        o->max_gap = in->end - last;
    if (in->psb_period && o->max_gap > 2 * in->psb_period) {
        ptv_snprintf(o->why, sizeof(o->why),
                     "%lu bytes without a PSB (PSBFreq period %lu): a stretch of the trace lost",
                     (unsigned long)o->max_gap, (unsigned long)in->psb_period);
        return false;
    }
    ptv_snprintf(
        o->why, sizeof(o->why), "%lu bytes, %u samples in order, %lu PSBs (largest gap %lu)",
        (unsigned long)in->end, in->n_samples, (unsigned long)o->psbs, (unsigned long)o->max_gap);
    return true;
}
