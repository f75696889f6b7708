/* SPDX-License-Identifier: MIT */
/* The PT controller (see pt_ctrl.h): guest RTIT MSRs, shadow ToPA and entry/exit switching. */
#include "pt/pt_ctrl.h"

#include <stddef.h>

#include "lib/ptv_string.h"
#include "pt/pt_eptv.h"
#include "pt/rtit.h"

/* The RTIT MSRs the CPU itself changes while tracing (SDM Vol. 3C 33.2.7): read at exits. */
static bool volatile_msr(uint32_t msr)
{
    return msr == MSR_IA32_RTIT_STATUS || msr == MSR_IA32_RTIT_OUTPUT_BASE ||
           msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS;
}

/* The RTIT MSR file the CPU runs for non-root execution: the guest's, or the VMM's trace. */
static struct pt_msr_file *tf(struct pt_ctrl *c)
{
    return c->system ? &c->sys.f : &c->guest;
}

/*
 * System mode's switching decision: the VMM's trace owns PT in non-root operation with direct
 * addresses (no PT_USE_GPA: the ring is host-physical), RTIT_CTL through the load/clear
 * controls where both exist, else the MSR-load lists.  The conceal controls stay clear: the
 * VMM's trace keeps the PIP.NR / VMCS packets that say it is a guest's (pt-facts A.2, E.1).
 */
static void sys_decision(struct pt_ctrl *c, const struct pt_caps *host)
{
    struct pt_decision *sd = &c->sys.sd;

    memset(sd, 0, sizeof(*sd));
    sd->mode = PT_ENGINE_HOST_GUEST_HW;
    sd->requested = c->d->requested;
    sd->load_clear = (host->entry_allowed1 & VM_ENTRY_LOAD_IA32_RTIT_CTL) &&
                     (host->exit_allowed1 & VM_EXIT_CLEAR_IA32_RTIT_CTL);
    if (sd->load_clear) {
        sd->entry_ctls = VM_ENTRY_LOAD_IA32_RTIT_CTL;
        sd->exit_ctls = VM_EXIT_CLEAR_IA32_RTIT_CTL;
    }
    pt_sys_view(host, &c->sys.view);
    sd->guest = c->sys.view;
    c->swd = sd;
    c->system = true;
}

int pt_ctrl_init(struct pt_ctrl *c, const struct pt_decision *d, const struct pt_caps *host,
                 const struct pt_cpu_ops *cpu, const struct pt_mem_ops *mem,
                 const struct pt_page_alloc *alloc, const struct pt_ctrl_mem *m)
{
    memset(c, 0, sizeof(*c));
    c->d = d;
    c->cpu = *cpu;
    c->swd = d;
    c->active = pt_mode_guest_owns(d->mode);
    c->shadow_mode = d->mode == PT_ENGINE_HOST_GUEST_SHADOW;
    c->env.mem = mem;
    pt_msr_file_init(&c->guest);
    pt_msr_file_init(&c->hw);
    pt_switch_init(&c->sw);
    if (d->mode == PT_ENGINE_SYSTEM)
        sys_decision(c, host);
    if (!c->shadow_mode)
        return 0;
    if (!m || !m->sh || !m->scr || !m->regions || !m->max_regions)
        return -1;
    c->sh = m->sh;
    c->scr = m->scr;
    pt_shadow_init(c->sh);
    memset(c->scr, 0, sizeof(*c->scr));
    /* the builder's region capacity comes from here, never from zeroed pages (defect 1) */
    c->scr->walk.regions = m->regions;
    c->scr->walk.max_regions = m->max_regions;
    c->env.alloc = alloc;
    c->env.host_topa = host->leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA;
    c->env.host_topa_multi = host->leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA_MULTI;
    c->env.host_single_range = host->leaf14[0][PT_ECX] & PT_CAP_ECX_SINGLE_RANGE;
    return 0;
}

/* The guest's trace ends as after an operational error (pt-facts D.4); TraceEn stays 1. */
static void guest_operr(struct pt_ctrl *c, const char *why)
{
    struct pt_msr_file *f = tf(c);

    f->status = pt_status_operr(f->status);
    c->hw_ok = false;
    c->last_refusal = why;
    c->stats.refusals++;
}

static struct pt_out_cfg out_cfg(const struct pt_ctrl *c)
{
    return (struct pt_out_cfg){
        .ctl = c->guest.ctl,
        .status = c->guest.status,
        .output_base = c->guest.output_base,
        .output_mask_ptrs = c->guest.output_mask,
        .topa_multi = c->d->guest.leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA_MULTI,
        .maxphyaddr = c->d->guest.maxphyaddr,
    };
}

/* RTIT_CTL as the CPU must run it for the guest: shadow mode picks the host output scheme. */
static uint64_t hw_ctl(struct pt_ctrl *c)
{
    uint64_t ctl = tf(c)->ctl;

    if (c->shadow_mode)
        ctl = c->sh->h_topa ? ctl | RTIT_CTL_TOPA : ctl & ~RTIT_CTL_TOPA;
    return ctl;
}

/* The CPU holds these values in the three MSRs that move while tracing, and all the others
 * as the controller last wrote them. */
static bool cpu_holds(const struct pt_ctrl *c, uint64_t status, uint64_t base, uint64_t mask)
{
    return c->hw_known && !c->dirty && c->hw.status == status && c->hw.output_base == base &&
           c->hw.output_mask == mask;
}

/* After an exit that stopped the guest's trace: only these can have moved (SDM 33.2.7). */
static inline __attribute__((always_inline)) void read_progress(struct pt_ctrl *c)
{
    c->hw.status = c->cpu.rdmsr(c->cpu.ctx, MSR_IA32_RTIT_STATUS);
    c->hw.output_base = c->cpu.rdmsr(c->cpu.ctx, MSR_IA32_RTIT_OUTPUT_BASE);
    c->hw.output_mask = c->cpu.rdmsr(c->cpu.ctx, MSR_IA32_RTIT_OUTPUT_MASK_PTRS);
}

/* TraceEn 0->1 accepted by the MSR rules: make the set-up something the CPU can run.
 * Returns false when the CPU itself refuses the RTIT_CTL value (the guest gets #GP). */
static bool start_trace(struct pt_ctrl *c)
{
    c->hw_ok = true;
    c->last_refusal = NULL;
    if (c->shadow_mode) {
        struct pt_out_cfg cfg = out_cfg(c);
        enum pt_shadow_status st = pt_shadow_prepare(c->sh, c->scr, &c->env, &cfg, &c->err);
        c->stats.builds++;
        if (st != PT_SHADOW_OK) {
            guest_operr(c, st == PT_SHADOW_NOMEM ? "VMM out of memory for the shadow ToPA"
                           : c->err.reason       ? c->err.reason
                                                 : "illegal output set-up");
            return true;
        }
        c->hpos_base = c->sh->h_base;
        c->hpos_mask = c->sh->h_mask;
    }
    /*
     * The VM entry will load this RTIT_CTL; a value the CPU refuses would fail the entry (SDM
     * Vol. 3C 27.4 "VM-entry failures during or after loading guest state") and stop the
     * guest.  Ask the CPU now, with TraceEn clear (no trace starts in the VMM), so a value the
     * engine's rules let through by mistake is the guest's #GP, never a dead guest.
     */
    if (c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, hw_ctl(c) & ~RTIT_CTL_TRACEEN)) {
        (void)c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, 0);
        c->hw_ok = false;
        return false;
    }
    (void)c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, 0);
    return true;
}

enum pt_msr_status pt_ctrl_rdmsr(struct pt_ctrl *c, uint32_t msr, uint64_t *val,
                                 struct pt_msr_result *res)
{
    enum pt_msr_status st = pt_msr_read(&c->d->guest, &c->guest, msr, val, res);

    if (st == PT_MSR_OK && msr == MSR_IA32_RTIT_STATUS) {
        /* TriggerEn: set while TraceEn = 1 until an operational error or a ToPA STOP
         * (SDM Vol. 3C IA32_RTIT_STATUS); the exit that cleared the CPU's copy is invisible */
        *val &= ~RTIT_STATUS_TRIGGEREN;
        if ((c->guest.ctl & RTIT_CTL_TRACEEN) &&
            !(*val & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED)))
            *val |= RTIT_STATUS_TRIGGEREN;
    }
    return st;
}

enum pt_msr_status pt_ctrl_wrmsr(struct pt_ctrl *c, uint32_t msr, uint64_t val,
                                 struct pt_msr_result *res)
{
    uint64_t old_ctl = c->guest.ctl;
    enum pt_msr_status st = pt_msr_write(&c->d->guest, &c->guest, msr, val, res);

    if (st != PT_MSR_OK || !c->active || c->system)
        return st;
    c->dirty = true;
    if (msr != MSR_IA32_RTIT_CTL || !res->trace_start)
        return st;
    if (!start_trace(c)) {
        c->guest.ctl = old_ctl; /* nothing changed: the write #GPs */
        res->status = PT_MSR_GP;
        res->reason = "RTIT_CTL value refused by the CPU";
        res->trace_start = false;
        return PT_MSR_GP;
    }
    return PT_MSR_OK;
}

/* Execute a switching plan (pt_switch.h).  Returns nonzero when a guest-derived WRMSR faulted;
 * the CPU then holds an unknown mix and the caller re-plans without the guest's values. */
static int run_plan(struct pt_ctrl *c)
{
    const struct pt_plan *pl = &c->plan;

    for (unsigned i = 0; i < pl->nsteps; i++) {
        const struct pt_step *s = &pl->steps[i];
        switch (s->op) {
        case PT_OP_WRMSR:
            (void)c->cpu.wrmsr(c->cpu.ctx, s->msr, s->value); /* RTIT_CTL = 0 or host value */
            break;
        case PT_OP_SAVE_MSRS:
            if (s->area == PT_AREA_GUEST && c->hw_known) {
                read_progress(c);
                break;
            }
            for (unsigned k = 0; k < pl->nmsrs; k++) {
                uint32_t msr = pl->msrs[k];
                if (s->area == PT_AREA_HOST) {
                    c->host_area[k] = c->cpu.rdmsr(c->cpu.ctx, msr);
                    pt_msr_file_set(&c->hw, msr, c->host_area[k]);
                } else if (!c->hw_known || volatile_msr(msr)) {
                    pt_msr_file_set(&c->hw, msr, c->cpu.rdmsr(c->cpu.ctx, msr));
                }
            }
            if (s->area == PT_AREA_HOST)
                c->hw_known = true;
            break;
        case PT_OP_LOAD_MSRS:
            if (s->area == PT_AREA_GUEST &&
                cpu_holds(c, c->want.status, c->want.output_base, c->want.output_mask))
                break; /* the CPU holds exactly the guest's values already */
            for (unsigned k = 0; k < pl->nmsrs; k++) {
                uint32_t msr = pl->msrs[k];
                uint64_t v =
                    s->area == PT_AREA_HOST ? c->host_area[k] : pt_msr_file_get(&c->want, msr);
                if (c->hw_known && pt_msr_file_get(&c->hw, msr) == v)
                    continue;
                c->stats.msr_writes++;
                if (c->cpu.wrmsr(c->cpu.ctx, msr, v)) {
                    c->hw_known = false;
                    return -1;
                }
                pt_msr_file_set(&c->hw, msr, v);
            }
            /* every MSR of the set now holds a known value */
            c->hw_known = true;
            if (s->area == PT_AREA_GUEST)
                c->dirty = false;
            break;
        case PT_OP_VMWRITE_RTIT_CTL:
            c->cpu.vmwrite_rtit_ctl(c->cpu.ctx, s->value);
            break;
        }
    }
    return 0;
}

/* Everything but the steady state: plan the switch and run it (kept out of the fast path). */
static __attribute__((noinline)) void entry_plan(struct pt_ctrl *c)
{
    uint64_t host_ctl = c->launched ? 0 : PT_HOST_CTL_UNKNOWN;
    const struct pt_plan *pl = &c->plan;
    struct pt_msr_file *f = tf(c);

    c->steady = false;
    c->want = *f;
    if (!c->hw_ok || (f->status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED)))
        c->want.ctl &= ~RTIT_CTL_TRACEEN; /* nothing would be traced: keep the CPU out of it */
    if (c->want.ctl & RTIT_CTL_TRACEEN) {
        c->want.ctl = hw_ctl(c);
        if (c->shadow_mode) {
            c->want.output_base = c->hpos_base;
            c->want.output_mask = c->hpos_mask;
        }
    }
    for (;;) {
        /* the plan's own invariant (pt_plan_check) cannot fail for these inputs; if it ever
         * did, the safe reading is "the guest does not trace" */
        if (!pt_switch_entry(&c->sw, c->swd, &c->want, host_ctl, &c->plan) &&
            (c->want.ctl & RTIT_CTL_TRACEEN)) {
            guest_operr(c, "switching plan refused");
            c->want.ctl &= ~RTIT_CTL_TRACEEN;
            continue;
        }
        if (!run_plan(c))
            break;
        /* the CPU refused a guest-derived value (defect 8): operational error, re-plan */
        c->stats.wrmsr_faults++;
        guest_operr(c, c->system
                           ? "the CPU refused an RTIT MSR value of the VMM's trace"
                           : "the CPU refused an RTIT MSR value while loading the guest's trace");
        c->want.ctl &= ~RTIT_CTL_TRACEEN;
    }
    if (pl->n_entry_load != c->lists_entry || pl->n_exit_load != c->lists_exit ||
        (pl->n_entry_load && pl->entry_load[0].value != c->lists_ctl)) {
        c->cpu.set_msr_lists(c->cpu.ctx, pl->entry_load, pl->n_entry_load, pl->exit_load,
                             pl->n_exit_load);
        c->lists_entry = pl->n_entry_load;
        c->lists_exit = pl->n_exit_load;
        c->lists_ctl = pl->n_entry_load ? pl->entry_load[0].value : 0;
    }
    c->traced = c->sw.guest_loaded;
    c->steady = c->traced && c->sw.host_ctl == 0 && !c->dirty;
    if (c->system && c->sys.on && !c->traced)
        c->sys.acct.untraced++; /* a full stop-on-full ring, or tracing off after an error */
}

void pt_ctrl_before_entry(struct pt_ctrl *c)
{
    const struct pt_msr_file *f;

    if (!c->active)
        return;
    f = tf(c);
    /*
     * Steady state: the last entry loaded the guest's trace, the exit read its progress back,
     * and nothing changed since (no guest WRMSR, no rebuild, no error).  The CPU holds exactly
     * what this entry needs (the plan would be empty): enter as is.
     */
    if (c->steady && c->hw_ok && !(f->status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED)) &&
        cpu_holds(c, f->status, c->shadow_mode ? c->hpos_base : f->output_base,
                  c->shadow_mode ? c->hpos_mask : f->output_mask)) {
        c->sw.guest_loaded = true;
        c->traced = true;
        return;
    }
    entry_plan(c);
}

/* System mode, after a traced run: where the CPU's output went on to (never rewritten). */
static void sys_progress(struct pt_ctrl *c)
{
    struct pt_ctrl_sys *s = &c->sys;
    uint64_t pos;

    s->acct.runs++;
    if (!pt_sys_ring_pos(&s->ring, s->f.output_base, s->f.output_mask, &pos)) {
        guest_operr(c, "the CPU's output position is outside the VMM's ring");
        return;
    }
    if (pos < s->acct.pos)
        s->acct.wraps++; /* behind where the run started: it went round (at least once) */
    s->acct.pos = pos;
    if (s->f.status & RTIT_STATUS_ERROR) {
        c->hw_ok = false;
        c->last_refusal = "the CPU reported a PT operational error (STATUS.Error)";
    }
}

static __attribute__((noinline)) void exit_plan(struct pt_ctrl *c)
{
    pt_switch_exit(&c->sw, c->swd, &c->plan);
    (void)run_plan(c); /* saves and host restores only: no guest-derived WRMSR */
}

void pt_ctrl_after_exit(struct pt_ctrl *c)
{
    if (!c->active)
        return;
    c->launched = true;
    if (c->steady && c->traced) {
        read_progress(c); /* steady state: the exit's plan would be exactly this */
        c->sw.guest_loaded = false;
    } else {
        exit_plan(c);
    }
    if (!c->traced)
        return;
    c->traced = false;
    c->stats.traced_exits++;
    /* the hardware's progress becomes the guest's registers (defect 2: kept across exits) */
    tf(c)->status = c->hw.status;
    if (!c->shadow_mode) {
        tf(c)->output_base = c->hw.output_base;
        tf(c)->output_mask = c->hw.output_mask;
        if (c->system)
            sys_progress(c);
        return;
    }
    c->hpos_base = c->hw.output_base;
    c->hpos_mask = c->hw.output_mask;
    if (!pt_shadow_guest_view(c->sh, c->hpos_base, c->hpos_mask, &c->guest.output_base,
                              &c->guest.output_mask))
        guest_operr(c, "hardware output position is not in the shadow ToPA");
}

enum pt_ctrl_eptv pt_ctrl_ept_violation(struct pt_ctrl *c, uint64_t gpa, uint64_t qual)
{
    struct pt_eptv_decision dd;

    if (!c->active || c->system)
        return PT_CTRL_EPTV_NOT_PT; /* system mode: the ring is host-physical, outside EPT */
    if (c->shadow_mode)
        return pt_shadow_table_write(c->sh, &c->env, gpa) == PT_SHADOW_WP_RETRY
                   ? PT_CTRL_EPTV_RESUME
                   : PT_CTRL_EPTV_NOT_PT;
    pt_eptv_decide(qual, gpa, c->guest.ctl & RTIT_CTL_TRACEEN, c->guest.status, c->env.mem, &dd);
    switch (dd.action) {
    case PT_EPTV_MAP_RESUME:
        return c->env.mem->set_wp(c->env.mem->ctx, gpa & PT_PAGE_MASK, false) ? PT_CTRL_EPTV_RESUME
                                                                              : PT_CTRL_EPTV_NOT_PT;
    case PT_EPTV_OPERR_RESUME:
        c->guest.status = dd.guest_status; /* TraceEn stays 1 for the guest, as on hardware */
        if (dd.stop_hw_trace)
            c->hw_ok = false;
        c->last_refusal = dd.reason;
        c->stats.refusals++;
        return PT_CTRL_EPTV_RESUME;
    default:
        return PT_CTRL_EPTV_NOT_PT;
    }
}

void pt_ctrl_mem_changed(struct pt_ctrl *c, uint64_t gpa, uint64_t len)
{
    struct pt_out_cfg cfg;
    enum pt_shadow_status st;

    (void)gpa;
    (void)len; /* conservative: any change invalidates (changes are rare) */
    if (!c->active || !c->shadow_mode)
        return; /* hardware-GPA mode: the CPU translates through EPT itself */
    pt_shadow_mem_changed(c->sh);
    if (!(c->guest.ctl & RTIT_CTL_TRACEEN) || !c->hw_ok)
        return; /* rebuilt at the next TraceEn 0->1 */
    /* the CPU goes on from the guest's current position, through a shadow of the new map */
    cfg = out_cfg(c);
    st = pt_shadow_build(c->sh, c->scr, &c->env, &cfg, &c->err);
    c->stats.rebuilds++;
    if (st != PT_SHADOW_OK) {
        guest_operr(c, st == PT_SHADOW_NOMEM ? "VMM out of memory for the shadow ToPA"
                                             : c->err.reason);
        return;
    }
    c->hpos_base = c->sh->h_base;
    c->hpos_mask = c->sh->h_mask;
}

/* --- system mode (pt_sys.h) --- */

/* Program the VMM's trace from cfg at the output position (base, mask); the CPU is asked
 * first (RTIT_CTL with TraceEn clear), so a value it refuses never reaches a VM entry. */
static const char *sys_program(struct pt_ctrl *c, const struct pt_sys_cfg *cfg, uint64_t base,
                               uint64_t mask, uint64_t status)
{
    struct pt_ctrl_sys *s = &c->sys;
    struct pt_msr_file f;
    const char *why = pt_sys_program(&s->view, cfg, base, mask, &f);

    if (why)
        return why;
    if (c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, f.ctl & ~RTIT_CTL_TRACEEN)) {
        (void)c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, 0);
        return "RTIT_CTL of the VMM's trace refused by the CPU";
    }
    (void)c->cpu.wrmsr(c->cpu.ctx, MSR_IA32_RTIT_CTL, 0);
    f.status = status;
    if (!s->on)
        f.ctl &= ~RTIT_CTL_TRACEEN;
    s->f = f;
    s->cfg = *cfg;
    c->dirty = true;
    c->steady = false;
    return NULL;
}

int pt_ctrl_sys_setup(struct pt_ctrl *c, const struct pt_sys_cfg *cfg,
                      const struct pt_page_alloc *alloc, const char **why)
{
    struct pt_ctrl_sys *s = &c->sys;

    if (!c->system) {
        *why = "not in system mode";
        return -1;
    }
    *why = pt_sys_check(&s->view, cfg);
    if (*why || pt_sys_ring_build(&s->ring, cfg->ring_size, cfg->wrap, alloc, why)) {
        c->active = false;
        return -1;
    }
    s->alloc = alloc;
    s->ready = true;
    c->active = true;
    s->cfg = *cfg;
    if (pt_ctrl_sys_start(c, true, why)) {
        pt_ctrl_sys_teardown(c);
        return -1;
    }
    return 0;
}

void pt_ctrl_sys_teardown(struct pt_ctrl *c)
{
    struct pt_ctrl_sys *s = &c->sys;

    if (s->ready)
        pt_sys_ring_free(&s->ring, s->alloc);
    s->ready = false;
    s->on = false;
    c->active = false;
}

int pt_ctrl_sys_start(struct pt_ctrl *c, bool rewind, const char **why)
{
    struct pt_ctrl_sys *s = &c->sys;
    uint64_t base = s->f.output_base, mask = s->f.output_mask;
    uint64_t status = s->f.status & ~RTIT_STATUS_ERROR;

    if (!c->system || !s->ready) {
        *why = "no system-mode ring";
        return -1;
    }
    if (rewind) {
        base = pt_sys_ring_base(&s->ring);
        mask = PT_SYS_RING_MASK0;
        status = 0;
        memset(&s->acct, 0, sizeof(s->acct));
        s->ring.hint = 0;
    }
    s->on = true;
    if ((*why = sys_program(c, &s->cfg, base, mask, status))) {
        s->on = false;
        s->f.ctl &= ~RTIT_CTL_TRACEEN;
        c->last_refusal = *why;
        return -1;
    }
    c->hw_ok = true;
    c->last_refusal = NULL;
    return 0;
}

void pt_ctrl_sys_stop(struct pt_ctrl *c)
{
    if (!c->system)
        return;
    c->sys.on = false;
    c->sys.f.ctl &= ~RTIT_CTL_TRACEEN;
    c->dirty = true;
    c->steady = false;
}

int pt_ctrl_sys_check_filter(const struct pt_ctrl *c, const struct pt_sys_cfg *cfg,
                             const char **why)
{
    const struct pt_ctrl_sys *s = &c->sys;
    struct pt_msr_file f;

    if (!c->system || !s->ready)
        *why = "no system-mode ring";
    else if (cfg->ring_size != s->ring.size)
        *why = "pt_buffer cannot change while the VMM runs";
    else
        *why = pt_sys_program(&s->view, cfg, s->f.output_base, s->f.output_mask, &f);
    return *why ? -1 : 0;
}

int pt_ctrl_sys_set_filter(struct pt_ctrl *c, const struct pt_sys_cfg *cfg, const char **why)
{
    struct pt_ctrl_sys *s = &c->sys;

    if (pt_ctrl_sys_check_filter(c, cfg, why))
        return -1;
    if ((*why = sys_program(c, cfg, s->f.output_base, s->f.output_mask, s->f.status)))
        return -1; /* nothing changed */
    if (cfg->wrap != s->ring.wrap)
        pt_sys_ring_set_wrap(&s->ring, cfg->wrap); /* TraceEn is 0 in VMX root */
    s->acct.filter_id++;
    return 0;
}

void pt_ctrl_sys_status(const struct pt_ctrl *c, struct pt_sys_status *st)
{
    const struct pt_ctrl_sys *s = &c->sys;

    memset(st, 0, sizeof(*st));
    if (!c->system || !s->ready) {
        st->reason = c->last_refusal ? c->last_refusal : "no system-mode ring";
        st->error = true;
        return;
    }
    st->stopped = (s->f.status & RTIT_STATUS_STOPPED) != 0;
    st->error = !c->hw_ok || (s->f.status & RTIT_STATUS_ERROR);
    st->on = s->on && !st->stopped && !st->error;
    st->wrap = s->ring.wrap;
    st->ring_size = s->ring.size;
    st->offset = s->acct.pos;
    st->wraps = s->acct.wraps;
    st->wrapped = s->acct.wraps != 0;
    st->bytes = s->acct.wraps * s->ring.size + s->acct.pos;
    st->avail = st->wrapped ? s->ring.size : s->acct.pos;
    st->lost = st->wrapped ? st->bytes - s->ring.size : 0;
    st->untraced = s->acct.untraced;
    st->runs = s->acct.runs;
    st->ctl = s->f.ctl;
    st->reason = st->error ? (c->last_refusal ? c->last_refusal : "STATUS.Error") : NULL;
}

uint64_t pt_ctrl_sys_read(const struct pt_ctrl *c, uint64_t off, void *buf, uint64_t len)
{
    const struct pt_ctrl_sys *s = &c->sys;
    bool wrapped = s->acct.wraps != 0;
    uint64_t avail = wrapped ? s->ring.size : s->acct.pos;

    if (!c->system || !s->ready || off >= avail)
        return 0;
    if (len > avail - off)
        len = avail - off;
    pt_sys_ring_copy(&s->ring, wrapped ? s->acct.pos + off : off, buf, len);
    return len;
}
