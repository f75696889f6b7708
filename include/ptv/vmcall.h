/* SPDX-License-Identifier: MIT */
/*
 * The VMCALL ABI ptvisor offers its guest.
 *
 *   in:  RAX = PTV_VMCALL_* function, RBX, RCX, RDX = arguments
 *   out: RAX = PTV_VMCALL_OK or a negative PTV_VMCALL_E*, RBX/RCX/RDX = results
 *
 * VMCALL from CPL > 0 is refused with PTV_VMCALL_EPERM, except the informational
 * functions VERSION and EXIT_STATS, which any CPL may call.  Unknown functions
 * return PTV_VMCALL_ENOSYS.  The guest RIP always advances past VMCALL.
 */
#ifndef PTV_VMCALL_H
#define PTV_VMCALL_H

#define PTV_VMCALL_OK     0
#define PTV_VMCALL_ENOSYS (-1)
#define PTV_VMCALL_EPERM  (-2)
#define PTV_VMCALL_EINVAL (-3)

/* RBX = ABI version (PTV_VMCALL_ABI_VERSION), RCX = "ptvisor" as 8 bytes, RDX = 0 */
#define PTV_VMCALL_VERSION     0
#define PTV_VMCALL_ABI_VERSION 1

/*
 * RBX = physical base, RCX = size of the VMM's own memory (image + pool, one
 * contiguous span as the guest must never reach it), RDX = physical address of a
 * 4 KiB canary page inside it, filled with PTV_CANARY_PATTERN repeated.
 * For conformance tests: the guest must never read the pattern there.
 */
#define PTV_VMCALL_VMM_RANGE 1
#define PTV_CANARY_PATTERN   "ptvisor-canary!" /* 16 bytes with the NUL */

/* RBX = 1 if the VMM's canary pages are intact, 0 otherwise */
#define PTV_VMCALL_CHECK_CANARY 2

/* RBX = number of EPT violations the VMM blocked so far */
#define PTV_VMCALL_EPT_BLOCKED 3

/* print the exit statistics (per reason) on the serial console; RBX = total exits */
#define PTV_VMCALL_EXIT_STATS 4

/* dump the VMM's PT trace window on the serial console (if tracing) */
#define PTV_VMCALL_TRACE_DUMP 5

#endif
