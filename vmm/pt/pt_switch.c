/* SPDX-License-Identifier: MIT */
/*
 * RTIT switching plan around VM entry/exit (see pt_switch.h).  Sources: pt-facts A.4-A.6 (the
 * KVM pt_guest_enter/exit design and its CVE-2024-53135 hole), D.6 (Xen: RTIT_CTL in the MSR
 * load lists while TraceEn is set), G.9 (exit with "clear IA32_RTIT_CTL" writes 0).
 */
#include "pt/pt_switch.h"

#include "lib/ptv_string.h"

void pt_switch_init(struct pt_switch *sw)
{
    memset(sw, 0, sizeof(*sw));
}

unsigned pt_switch_msr_set(const struct pt_gcaps *g, uint32_t msrs[PT_SWITCH_MAX_MSRS])
{
    static const uint32_t fixed[] = {MSR_IA32_RTIT_STATUS, MSR_IA32_RTIT_OUTPUT_BASE,
                                     MSR_IA32_RTIT_OUTPUT_MASK_PTRS, MSR_IA32_RTIT_CR3_MATCH};
    unsigned n = 0;

    /* Exactly the MSRs the guest view has (pt_msr_present): never one the host lacks. */
    for (unsigned i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (pt_msr_present(g, fixed[i]))
            msrs[n++] = fixed[i];
    for (uint32_t m = MSR_IA32_RTIT_ADDR0_A; m <= MSR_IA32_RTIT_ADDR3_B; m++)
        if (pt_msr_present(g, m))
            msrs[n++] = m;
    return n;
}

/* The guest view's SAVE/LOAD set into the plan; computed on first use (the view is fixed). */
static void msr_set(struct pt_switch *sw, const struct pt_decision *d, struct pt_plan *p)
{
    if (!sw->set_valid) {
        sw->nmsrs = pt_switch_msr_set(&d->guest, sw->msrs);
        sw->set_valid = true;
    }
    p->nmsrs = sw->nmsrs;
    memcpy(p->msrs, sw->msrs, sizeof(p->msrs));
}

static void step(struct pt_plan *p, enum pt_op op, enum pt_area area, uint32_t msr, uint64_t v)
{
    /* PT_PLAN_MAX_STEPS is the longest plan below; pt_plan_check() catches an overflow. */
    if (p->nsteps < PT_PLAN_MAX_STEPS)
        p->steps[p->nsteps] = (struct pt_step){.op = op, .area = area, .msr = msr, .value = v};
    p->nsteps++;
}

static bool host_may_trace(uint64_t host_ctl)
{
    return host_ctl == PT_HOST_CTL_UNKNOWN || (host_ctl & RTIT_CTL_TRACEEN);
}

bool pt_switch_entry(struct pt_switch *sw, const struct pt_decision *d, const struct pt_msr_file *f,
                     uint64_t host_ctl, struct pt_plan *p)
{
    bool guest_traces = (f->ctl & RTIT_CTL_TRACEEN) != 0;
    bool host_known = host_ctl != PT_HOST_CTL_UNKNOWN;
    bool host_traces = host_may_trace(host_ctl);

    memset(p, 0, sizeof(*p));
    sw->host_ctl = 0;
    sw->guest_loaded = false;
    if (!pt_mode_guest_owns(d->mode))
        return pt_plan_check(d, host_ctl, p); /* off/system: the guest's PT is not switched */

    p->output_via_shadow = d->mode == PT_ENGINE_HOST_GUEST_SHADOW;
    msr_set(sw, d, p);
    /*
     * 1. Stop host tracing before anything else (pt-facts A.5: entry loading RTIT_CTL with host
     *    TraceEn=1 fails; A.6: the KVM bug).  Clearing TraceEn also flushes the host's packets,
     *    so its output pointers are final and can be saved (pt-facts B.3).
     */
    if (host_traces) {
        step(p, PT_OP_WRMSR, PT_AREA_HOST, MSR_IA32_RTIT_CTL, 0);
        sw->host_ctl = host_known ? host_ctl : 0; /* unknown: cannot be restored */
    }
    /* 2. The guest's MSRs go into hardware only while it traces (pt-facts A.6). */
    if (guest_traces) {
        if (host_traces && host_known)
            step(p, PT_OP_SAVE_MSRS, PT_AREA_HOST, 0, 0);
        step(p, PT_OP_LOAD_MSRS, PT_AREA_GUEST, 0, 0);
        sw->guest_loaded = true;
    }
    /* 3. RTIT_CTL itself is loaded by the VM entry. */
    if (d->load_clear) {
        if (!sw->vmcs_ctl_valid || sw->vmcs_ctl != f->ctl)
            step(p, PT_OP_VMWRITE_RTIT_CTL, PT_AREA_GUEST, 0, f->ctl);
        sw->vmcs_ctl_valid = true;
        sw->vmcs_ctl = f->ctl;
    } else if (guest_traces) {
        /* pt-facts D.6 (Xen): guest value at entry, 0 at exit, only while TraceEn is set. */
        p->entry_load[0] = (struct vmx_msr_entry){.index = MSR_IA32_RTIT_CTL, .value = f->ctl};
        p->exit_load[0] = (struct vmx_msr_entry){.index = MSR_IA32_RTIT_CTL, .value = 0};
        p->n_entry_load = p->n_exit_load = 1;
    }
    return pt_plan_check(d, host_ctl, p);
}

void pt_switch_exit(struct pt_switch *sw, const struct pt_decision *d, struct pt_plan *p)
{
    memset(p, 0, sizeof(*p));
    if (!pt_mode_guest_owns(d->mode))
        return;
    p->output_via_shadow = d->mode == PT_ENGINE_HOST_GUEST_SHADOW;
    msr_set(sw, d, p);
    /*
     * RTIT_CTL is 0 here: "clear IA32_RTIT_CTL" (pt-facts G.9), the exit MSR-load list entry,
     * or, when the guest did not trace, the host's stop before entry.  So the guest's packets
     * are flushed and its output pointers final (pt-facts B.3).
     */
    if (sw->guest_loaded) {
        step(p, PT_OP_SAVE_MSRS, PT_AREA_GUEST, 0, 0);
        if (sw->host_ctl & RTIT_CTL_TRACEEN)
            step(p, PT_OP_LOAD_MSRS, PT_AREA_HOST, 0, 0);
    }
    if (sw->host_ctl & RTIT_CTL_TRACEEN)
        step(p, PT_OP_WRMSR, PT_AREA_HOST, MSR_IA32_RTIT_CTL, sw->host_ctl);
    sw->guest_loaded = false;
    sw->host_ctl = 0;
}

bool pt_plan_check(const struct pt_decision *d, uint64_t host_ctl, const struct pt_plan *p)
{
    bool loads_ctl = (d->entry_ctls & VM_ENTRY_LOAD_IA32_RTIT_CTL) != 0;

    if (p->nsteps > PT_PLAN_MAX_STEPS || p->n_entry_load > 1 || p->n_exit_load > 1)
        return false;
    if (!pt_mode_guest_owns(d->mode))
        return p->nsteps == 0 && p->n_entry_load == 0 && p->n_exit_load == 0 && !loads_ctl &&
               !(d->exit_ctls & VM_EXIT_CLEAR_IA32_RTIT_CTL);
    for (unsigned i = 0; i < p->n_entry_load; i++)
        if (p->entry_load[i].index == MSR_IA32_RTIT_CTL)
            loads_ctl = true;
    if (loads_ctl && host_may_trace(host_ctl))
        return p->nsteps > 0 && p->steps[0].op == PT_OP_WRMSR &&
               p->steps[0].msr == MSR_IA32_RTIT_CTL && p->steps[0].value == 0;
    return true;
}
