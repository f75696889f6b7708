/* SPDX-License-Identifier: MIT */
/*
 * ToPA PMI routing (see pt_pmi.h).  Sources: pt-facts A.8 (Linux handle_pmi_common, KVM
 * vmx_handle_intel_pt_intr / intel_pmu_refresh), D.3 (INT regions), G.8 (NMI exits).
 */
#include "pt/pt_pmi.h"

#include "lib/ptv_string.h"

void pt_vpmi_init(struct pt_vpmi *v)
{
    memset(v, 0, sizeof(*v));
}

static enum pt_pmi_action done(struct pt_pmi_result *res, enum pt_pmi_action a, bool ack,
                               const char *why)
{
    if (res) {
        res->action = a;
        res->ack_host = ack;
        res->reason = why;
    }
    return a;
}

enum pt_pmi_action pt_pmi_host(enum pt_engine_mode mode, uint64_t host_status, struct pt_vpmi *v,
                               struct pt_pmi_result *res)
{
    if (!(host_status & GLOBAL_STATUS_TRACE_TOPAPMI))
        return done(res, PT_PMI_NOT_PT, false, "GLOBAL_STATUS[55]=0: not a ToPA PMI");
    if (pt_mode_guest_owns(mode)) {
        /*
         * In host-guest mode only the guest traces on this CPU (the VMM does not), so every
         * ToPA PMI is the guest's, including one that arrives just after a VM exit or after the
         * guest cleared TraceEn: the PMI is imprecise (pt-facts A.8).  KVM claims it only when
         * the NMI hit in guest mode and loses the others; here none is lost.
         */
        v->global_status |= GLOBAL_STATUS_TRACE_TOPAPMI;
        v->injected++;
        return done(res, PT_PMI_INJECT_GUEST, true, "guest owns PT: virtual GLOBAL_STATUS[55]");
    }
    if (mode == PT_ENGINE_SYSTEM) {
        v->consumed++;
        return done(res, PT_PMI_CONSUME_VMM, true, "system mode: the VMM's ToPA ring");
    }
    return done(res, PT_PMI_SPURIOUS, true, "GLOBAL_STATUS[55]=1 with PT off");
}

uint64_t pt_pmi_guest_status(const struct pt_vpmi *v)
{
    return v->global_status & GLOBAL_STATUS_TRACE_TOPAPMI;
}

enum pt_msr_status pt_pmi_ovf_ctrl_write(enum pt_engine_mode mode, struct pt_vpmi *v,
                                         uint64_t value, uint64_t *rest)
{
    if ((value & GLOBAL_STATUS_TRACE_TOPAPMI) && !pt_mode_guest_owns(mode)) {
        *rest = 0;
        return PT_MSR_GP; /* nothing changed */
    }
    v->global_status &= ~(value & GLOBAL_STATUS_TRACE_TOPAPMI);
    *rest = value & ~GLOBAL_STATUS_TRACE_TOPAPMI;
    return PT_MSR_OK;
}
