/* SPDX-License-Identifier: MIT */
/* Control adjustment against capability MSRs (pure; host-tested). */
#include "hw/vmx.h"

/* SDM Vol. 3D A.3-A.5 / pt-facts G.3: bits 31:0 of a capability MSR are the
 * allowed-0 settings (1 = must be 1), bits 63:32 the allowed-1 settings
 * (0 = must be 0). */
int vmx_adjust_controls(uint64_t cap_msr, uint32_t required, uint32_t optional, uint32_t *out,
                        uint32_t *missing)
{
    uint32_t must1 = (uint32_t)cap_msr;
    uint32_t may1 = (uint32_t)(cap_msr >> 32);
    uint32_t lacking = (required & ~may1) | (must1 & ~may1); /* the latter: a broken MSR */
    if (missing)
        *missing = lacking;
    if (lacking)
        return -1;
    *out = (required | (optional & may1) | must1) & may1;
    return 0;
}
