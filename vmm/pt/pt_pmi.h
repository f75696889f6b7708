/* SPDX-License-Identifier: MIT */
/*
 * ToPA PMI routing and the guest's view of IA32_PERF_GLOBAL_STATUS bit 55 (Trace_ToPA_PMI).
 *
 * When a ToPA region with INT=1 fills, the CPU sets IA32_PERF_GLOBAL_STATUS bit 55 and raises a
 * PMI through the LVT performance-counter entry (pt-facts A.8, D.3); the host programs it as an
 * NMI, so the VMM sees it as an NMI exit or on its own NMI path (pt-facts G.8).  The VMM reads
 * the host's GLOBAL_STATUS there and asks pt_pmi_host() who the PMI belongs to.
 *
 * The engine owns only bit 55 of the guest's virtual GLOBAL_STATUS; whoever emulates the rest
 * of the PMU ORs pt_pmi_guest_status() into guest reads of MSR 0x38e and passes guest writes of
 * IA32_PERF_GLOBAL_OVF_CTRL (0x390) through pt_pmi_ovf_ctrl_write() first.
 */
#ifndef PTV_PT_PMI_H
#define PTV_PT_PMI_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_caps.h"
#include "pt/pt_msr.h"

struct pt_vpmi {
    uint64_t global_status; /* guest-visible PT bits of IA32_PERF_GLOBAL_STATUS (bit 55) */
    uint64_t injected;      /* PMIs injected into the guest (statistics) */
    uint64_t consumed;      /* PMIs the VMM kept (system mode) */
};

enum pt_pmi_action {
    PT_PMI_NOT_PT = 0,   /* host GLOBAL_STATUS[55] clear: not a ToPA PMI; not the engine's */
    PT_PMI_INJECT_GUEST, /* the guest owns PT: bit 55 is now set in its view; inject its PMI */
    PT_PMI_CONSUME_VMM,  /* system mode: the VMM's own ToPA ring filled; do not inject */
    PT_PMI_SPURIOUS,     /* bit 55 set but nobody traces (mode off): acknowledge and drop */
};

struct pt_pmi_result {
    enum pt_pmi_action action;
    bool ack_host;      /* write GLOBAL_STATUS_TRACE_TOPAPMI to the host's 0x390 to clear it */
    const char *reason; /* printable */
};

void pt_vpmi_init(struct pt_vpmi *v);

/*
 * A PMI/NMI arrived with the host's IA32_PERF_GLOBAL_STATUS = host_status.  Decides whether it
 * is a ToPA PMI and whose; for PT_PMI_INJECT_GUEST it has already set bit 55 in *v (the VMM then
 * delivers the PMI through the guest's LVTPC).
 */
enum pt_pmi_action pt_pmi_host(enum pt_engine_mode mode, uint64_t host_status, struct pt_vpmi *v,
                               struct pt_pmi_result *res);

/* Bits to OR into the guest's RDMSR of IA32_PERF_GLOBAL_STATUS. */
uint64_t pt_pmi_guest_status(const struct pt_vpmi *v);

/*
 * Guest WRMSR of IA32_PERF_GLOBAL_OVF_CTRL (a.k.a. GLOBAL_STATUS_RESET).  If bit 55 is set:
 * with guest-owned PT it clears bit 55 of the virtual status (OK), otherwise #GP, as KVM does
 * outside host-guest mode (pt-facts A.8, intel_pmu_refresh).  *rest = the other bits, for the
 * PMU emulation; the engine does not judge them.
 */
__attribute__((warn_unused_result)) enum pt_msr_status
pt_pmi_ovf_ctrl_write(enum pt_engine_mode mode, struct pt_vpmi *v, uint64_t value, uint64_t *rest);

#endif
