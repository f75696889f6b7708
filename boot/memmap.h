/* SPDX-License-Identifier: MIT */
/*
 * The memory map handed to the VMM: the firmware's map, already classified
 * into PTV_MEM_* types by the caller, turned into sorted, merged,
 * non-overlapping ranges with the VMM's own span carved out as PTV_MEM_VMM.
 * Pure code (host-tested in tests/unit/boot/test_handoff.c).
 */
#ifndef PTV_BOOT_MEMMAP_H
#define PTV_BOOT_MEMMAP_H

#include <stddef.h>
#include "ptv/handoff.h"

#define PTV_MEMMAP_ERR_MAX 128

/*
 * in[0..n_in) in any order (sorted in place; size-0 entries ignored).
 * Returns 0 and *n_out, or -1 with err when the input is not 4 KiB aligned,
 * overlaps itself, or needs more than max_out ranges after merging.
 */
int ptv_memmap_build(struct ptv_mem_range *in, unsigned n_in, uint64_t vmm_base, uint64_t vmm_size,
                     struct ptv_mem_range *out, unsigned max_out, unsigned *n_out, char *err,
                     size_t errcap) __attribute__((warn_unused_result));

#endif
