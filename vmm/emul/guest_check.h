/* SPDX-License-Identifier: MIT */
/*
 * A software subset of the VM-entry checks on guest state (SDM Vol. 3C 27.3.1),
 * run on the blue pill's guest state before VMLAUNCH.  A state the CPU would
 * refuse is reported by name and the launch is not attempted: the loader then
 * boots natively instead of meeting a failed VM entry after the VMM has taken
 * the CPU's host state.  Pure: host-tested.
 */
#ifndef PTV_VMX_GUEST_CHECK_H
#define PTV_VMX_GUEST_CHECK_H

#include <stdbool.h>
#include <stdint.h>

struct vmx_seg {
    uint16_t sel;
    uint64_t base;
    uint32_t limit, ar; /* access rights in VMCS format (bit 16 = unusable) */
};

enum { VSEG_ES, VSEG_CS, VSEG_SS, VSEG_DS, VSEG_FS, VSEG_GS, VSEG_LDTR, VSEG_TR, NR_VSEGS };

struct vmx_guest_state {
    struct vmx_seg seg[NR_VSEGS];
    uint64_t cr0, cr4, efer, rflags;
    bool ia32e;        /* the "IA-32e mode guest" entry control */
    bool unrestricted; /* the "unrestricted guest" secondary control */
    uint64_t cr0_fixed0, cr0_fixed1, cr4_fixed0, cr4_fixed1;
};

/* NULL if the state passes, else what is wrong (a static string) */
const char *vmx_guest_state_check(const struct vmx_guest_state *g);

#endif
