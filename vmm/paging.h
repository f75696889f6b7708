/* SPDX-License-Identifier: MIT */
#ifndef PTV_PAGING_H
#define PTV_PAGING_H

#include <stdint.h>

/* Build the VMM's own identity-mapped page tables for [0, top): 1 GiB pages
 * where the CPU has them, else 2 MiB.  Returns the CR3 value, 0 on failure. */
uint64_t host_paging_build(uint64_t top);

#endif
