/* SPDX-License-Identifier: MIT */
#ifndef PTV_GUEST_VMM_TRACE_SELFTEST_H
#define PTV_GUEST_VMM_TRACE_SELFTEST_H

#include <efi.h>

/* The VMM's own trace of a known sequence; needs BootServices for a buffer. */
void vmm_trace_selftest(EFI_SYSTEM_TABLE *st);

#endif
