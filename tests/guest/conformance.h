/* SPDX-License-Identifier: MIT */
/* The groups of checks conformance.efi runs, one file each. */
#ifndef PTV_GUEST_CONFORMANCE_H
#define PTV_GUEST_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "x86.h"

/* VMCALL fn with RBX/RCX/RDX = 0; false (and a FAIL line naming what) if it faulted or failed. */
bool ptv_call(uint64_t fn, struct vmcall_regs *r, const char *what);

void check_vmm_memory(void); /* conf_memory.c */

#endif
