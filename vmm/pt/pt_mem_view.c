/* SPDX-License-Identifier: MIT */
/* The PT engine's view of a GPA from the VMM's facts about it (pt_mem_view.h). */
#include "pt/pt_mem_view.h"

#include "ptv/handoff.h"

void pt_mem_view(uint64_t gpa, const struct pt_mem_facts *f, struct pt_mem_xlate *out)
{
    uint64_t page_end4k = (gpa & PT_PAGE_MASK) + PT_PAGE_SIZE;
    out->hpa = 0;
    out->len = page_end4k - gpa;
    if (f->in_vmm) {
        out->kind = PT_MEM_VMM;
        return;
    }
    if (!f->ept_ok || gpa >> 52) { /* no EPT maps a GPA at or above 2^52 (MAXPHYADDR <= 52) */
        out->kind = PT_MEM_UNMAPPED;
        return;
    }
    out->kind = f->map_type == PTV_MEM_RAM   ? PT_MEM_GUEST_RAM
                : f->map_type == PTV_MEM_VMM ? PT_MEM_VMM
                                             : PT_MEM_MMIO;
    if (f->hpa != gpa) /* not the identity: the sink page, never a place for guest output */
        out->kind = PT_MEM_VMM;
    if (f->map_end <= gpa || (f->page_shift != 12 && f->page_shift != 21 && f->page_shift != 30)) {
        /* facts that cannot be: trust nothing beyond this 4 KiB page, and not as RAM */
        if (out->kind == PT_MEM_GUEST_RAM)
            out->kind = PT_MEM_MMIO;
        return;
    }
    uint64_t page = 1ull << f->page_shift, page_end = (gpa & ~(page - 1)) + page;
    out->len = (f->map_end < page_end ? f->map_end : page_end) - gpa;
    out->hpa = f->hpa;
}
