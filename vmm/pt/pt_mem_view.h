/* SPDX-License-Identifier: MIT */
/*
 * The PT engine's view of one guest-physical address (pt_mem.h, struct pt_mem_xlate) as the VMM
 * decides it.  The shim (vmm/pt/shim/pt_vmx.c) only gathers the facts — is the GPA in the VMM's own
 * span, what the EPT walk gave, what the boot memory map says — and this pure function, host-
 * tested (tests/unit/pt/test_pt_mem_view.c), decides what PT output may do there:
 *  - the VMM's span, and any GPA whose EPT translation is not the identity (today only the sink
 *    page that absorbs accesses above RAM, ARCHITECTURE 2.1), are VMM memory;
 *  - no EPT translation, or a GPA no EPT can map (at or above 2^52): unmapped;
 *  - otherwise the memory map's type: RAM is guest RAM, the VMM's ranges are VMM memory,
 *    everything else (holes included) is MMIO;
 *  - the length runs to the nearer of the end of that map range and the end of the EPT page,
 *    so a region never crosses into memory of another kind unseen.
 */
#ifndef PTV_PT_MEM_VIEW_H
#define PTV_PT_MEM_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_mem.h"

struct pt_mem_facts {
    bool in_vmm;         /* gpa lies in the VMM's image / pool span */
    bool ept_ok;         /* the EPT walk translated gpa */
    uint64_t hpa;        /* to where (ept_ok) */
    unsigned page_shift; /* of the EPT leaf that maps it: 12, 21 or 30 */
    uint32_t map_type;   /* the boot memory map's PTV_MEM_* type at gpa */
    uint64_t map_end;    /* where that map range ends (exclusive) */
};

void pt_mem_view(uint64_t gpa, const struct pt_mem_facts *f, struct pt_mem_xlate *out);

#endif
