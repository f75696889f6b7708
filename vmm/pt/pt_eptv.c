/* SPDX-License-Identifier: MIT */
/* PT-triggered EPT violations (hardware-GPA mode).  See pt_eptv.h. */
#include "pt/pt_eptv.h"
#include "pt/pt_topa.h"

void pt_eptv_decide(uint64_t exit_qual, uint64_t gpa, bool guest_trace_en, uint64_t guest_status,
                    const struct pt_mem_ops *mem, struct pt_eptv_decision *out)
{
    struct pt_mem_xlate x = {.kind = PT_MEM_UNMAPPED};

    out->action = PT_EPTV_NOT_PT;
    out->guest_status = guest_status;
    out->stop_hw_trace = false;
    out->reason = "synchronous access";
    if (!(exit_qual & EPT_VIOLATION_ASYNC))
        return;
    if (!guest_trace_en) {
        out->reason = "asynchronous access while the guest does not trace";
        return;
    }
    mem->translate(mem->ctx, gpa, &x);
    switch (x.kind) {
    case PT_MEM_GUEST_RAM:
        out->action = PT_EPTV_MAP_RESUME;
        out->reason = "PT access to guest RAM";
        return;
    case PT_MEM_VMM:
        out->reason = "PT access to VMM memory";
        break;
    case PT_MEM_MMIO:
        out->reason = "PT access to MMIO";
        break;
    case PT_MEM_PROTECTED:
        out->reason = "PT access to a VMM-protected page";
        break;
    case PT_MEM_UNMAPPED:
    default:
        out->reason = "PT access to unmapped memory";
        break;
    }
    out->action = PT_EPTV_OPERR_RESUME;
    out->guest_status = pt_status_operr(guest_status);
    out->stop_hw_trace = true;
}
