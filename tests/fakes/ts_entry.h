/* SPDX-License-Identifier: MIT */
/*
 * Test helper (test_task_switch, fuzz_task_switch): would VM entry take the state a task switch
 * committed?  The guest-state checks of vmm/emul/guest_check.c on a CPU with unrestricted guest
 * and typical fixed CR0/CR4 bits; cr0 as the caller wants it judged.  NULL: entry would succeed.
 */
#ifndef PTV_TESTS_TS_ENTRY_H
#define PTV_TESTS_TS_ENTRY_H

#include <string.h>

#include "emul/guest_check.h"
#include "emul/task_switch.h"

static inline const char *ts_entry_check(const struct ts_state *s, uint64_t cr0)
{
    struct vmx_guest_state g = {
        .cr0 = cr0,
        .cr4 = 0x2000, /* VMXE: a VMX fixed bit */
        .rflags = s->eflags,
        .unrestricted = true,
        .cr0_fixed0 = 0x80000021ull,
        .cr0_fixed1 = 0xffffffffull,
        .cr4_fixed0 = 0x2000ull,
        .cr4_fixed1 = 0x3767ffull,
    };
    memcpy(g.seg, s->seg, sizeof(g.seg));
    return vmx_guest_state_check(&g);
}

#endif
