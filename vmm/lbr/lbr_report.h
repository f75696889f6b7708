/* SPDX-License-Identifier: MIT */
/*
 * The guest's LBR state as text for the crash report.  Pure logic: the
 * decision lbr_decide() took for this CPU says which stack the guest was shown (model-specific
 * with its layout, architectural, or none), an MSR-read callback reads it, and the lines go
 * into a caller's buffer.  The shim lbr_vmx_crash_text() (vmm/lbr/shim/lbr_vmx.c) passes RDMSR and
 * the VMCS guest fields; tests/unit/lbr/test_lbr_report.c and fuzz_lbr pass the LBR model.
 */
#ifndef PTV_LBR_REPORT_H
#define PTV_LBR_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lbr_decision;

/* RDMSR as the CPU answers it: false where it faulted (#GP) */
typedef bool (*lbr_rdmsr_fn)(void *ctx, uint32_t msr, uint64_t *val);

struct lbr_crash_view {
    bool debugctl_ok; /* the VMREAD of GUEST_IA32_DEBUGCTL succeeded */
    uint64_t debugctl;
    bool lbr_ctl_ok; /* the VMREAD of GUEST_IA32_LBR_CTL succeeded (arch LBR shown only) */
    uint64_t lbr_ctl;
    lbr_rdmsr_fn rdmsr;
    void *ctx;
};

/*
 * Writes whole lines into buf (at most cap bytes, the NUL included) and returns the bytes
 * written, the NUL not counted (0 when cap is 0).  d NULL: the VMM stopped before it decided.
 * A stack the guest was not shown gives the one line "guest LBR: none on this CPU (reason)";
 * a shown one a header, the control MSRs and the records newest first, empty entries left out
 * and counted.  When a line does not fit, it and everything after it are left out and
 * LBR_REPORT_CUT ends the text if it fits.
 */
#define LBR_REPORT_CUT "  (guest LBR cut: buffer full)\n"
size_t lbr_crash_text(const struct lbr_decision *d, const struct lbr_crash_view *v, char *buf,
                      size_t cap);

#endif
