/* SPDX-License-Identifier: MIT */
/*
 * PT-triggered EPT violations in hardware-GPA mode ("Intel PT uses guest
 * physical addresses" = 1, Ice Lake-SP and later).  A pure decision; the VMM's
 * EPT-violation handler acts on it.
 *
 * pt-facts D.5: exit qualification bit 16 = 1 marks an access asynchronous to
 * instruction execution (PT output and ToPA reads, but also EPT-friendly PEBS
 * and user-interrupt delivery; this VMM exposes neither to the guest, so with
 * guest TraceEn = 1 such a violation is taken as PT's).  Bit 7 (linear address
 * valid) is 0 for them.  What hardware does with the faulting trace bytes is
 * not documented ([U] in pt-facts): the guest may see an OVF packet or lose
 * bytes, which the guest tolerates (D.5 recommended strategy).
 *
 *  - GPA is legal guest RAM: map it (read/write) and resume.
 *  - otherwise (VMM memory, MMIO, unmapped, VMM-protected): the guest's trace
 *    ends as an operational error would (D.4): guest STATUS.Error = 1,
 *    TriggerEn = 0, the VMM stops the hardware trace (guest RTIT_CTL keeps
 *    TraceEn = 1 as hardware does), and the guest resumes.  Never a crash.
 */
#ifndef PTV_PT_EPTV_H
#define PTV_PT_EPTV_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_mem.h"
#include "pt/rtit.h"

/* EPT-violation exit qualification bits (Linux vmx.h names) */
#define EPT_VIOLATION_GVA_IS_VALID PTV_BIT(7)
#define EPT_VIOLATION_ASYNC        PTV_BIT(16) /* pt-facts D.5 */

enum pt_eptv_action {
    PT_EPTV_NOT_PT = 0,  /* not PT's: the ordinary EPT-violation path handles it */
    PT_EPTV_MAP_RESUME,  /* map gpa's page read/write for the guest, then resume */
    PT_EPTV_OPERR_RESUME /* stop the guest's trace with an operational error, resume */
};

struct pt_eptv_decision {
    enum pt_eptv_action action;
    uint64_t guest_status; /* new guest IA32_RTIT_STATUS (unchanged unless OPERR) */
    bool stop_hw_trace;    /* clear the hardware TraceEn for this guest */
    const char *reason;
};

void pt_eptv_decide(uint64_t exit_qual, uint64_t gpa, bool guest_trace_en, uint64_t guest_status,
                    const struct pt_mem_ops *mem, struct pt_eptv_decision *out);

#endif
