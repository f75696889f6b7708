/* SPDX-License-Identifier: MIT */
#ifndef PTV_PAGING_H
#define PTV_PAGING_H

#include <stdbool.h>
#include <stdint.h>

/* Build the VMM's own identity-mapped page tables for [0, top): 1 GiB pages
 * where the CPU has them, else 2 MiB.  Returns the CR3 value, 0 on failure. */
uint64_t host_paging_build(uint64_t top);

/* PTV_VMCALL_SELFCHECK: the live host page tables (CR3) map no page both
 * writable and executable.  checkable() is false where the walk cannot run. */
bool host_paging_checkable(void);
bool host_paging_wx_free(void);

#endif
