/* SPDX-License-Identifier: MIT */
/* The guest's EPT: an identity map of everything but the VMM (see ept_identity.c). */
#ifndef PTV_EPT_IDENTITY_H
#define PTV_EPT_IDENTITY_H

#include <stdint.h>
#include "ptv/handoff.h"
#include "ept/ept.h"
#include "ept/mtrr.h"

/*
 * Identity-map [0, top), top = max(4 GiB, end of the highest range) rounded up
 * to 1 GiB: RAM, MMIO and holes alike, RWX, memory type from the MTRRs.  Bytes
 * in PTV_MEM_VMM ranges stay not present.  1 GiB / 2 MiB pages wherever the
 * page has one MTRR type and no VMM byte, else smaller.  e must be empty
 * (EPT_EEXIST otherwise).  On error the EPT is unchanged.  *mapped_top = top.
 */
int ept_build_identity(struct ept *e, const struct ptv_mem_range *mem, unsigned n,
                       const struct mtrr_state *mtrr, uint64_t *mapped_top)
    __attribute__((warn_unused_result));

#endif
