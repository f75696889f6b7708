/* SPDX-License-Identifier: MIT */
/*
 * Wiring of the PT engine (vmm/pt/) into VMX, for the modes where the guest
 * owns PT.  The guest's struct pt_msr_file is authoritative while the VMM
 * runs; around each VM entry/exit the switching plan (pt_switch.c) moves the
 * *hardware view* of that file in and out of the CPU:
 *   - hardware-GPA mode: the hardware view is the guest file itself;
 *   - shadow mode: OUTPUT_BASE / OUTPUT_MASK_PTRS point into the shadow ToPA
 *     (pt_shadow.c) built from the guest's tables, RTIT_CTL.ToPA follows the
 *     shadow, and an illegal guest setup never reaches the CPU (TraceEn stays
 *     0 in hardware, the guest sees STATUS.Error as after an operational error).
 * ToPA PMIs need no VMM help here: the guest owns the local APIC and the
 * PERF_GLOBAL MSRs (pass-through), so LVTPC delivers them to the guest and it
 * reads IA32_PERF_GLOBAL_STATUS[55] from the hardware, as on bare metal.
 */
#include "vmx/pt_vmx.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "vmm.h"
#include "cpu.h"
#include "log.h"
#include "palloc.h"
#include "panic.h"
#include "pt/pt_eptv.h"
#include "pt/pt_shadow.h"
#include "pt/pt_switch.h"

struct pt_vcpu {
    struct pt_switch sw;
    struct pt_plan plan;
    struct pt_msr_file hw; /* what the CPU holds while the guest runs */
    uint64_t host_area[PT_SWITCH_MAX_MSRS];
    struct vmx_msr_entry *entry_list, *exit_list;
    uint64_t entry_list_pa, exit_list_pa;
    bool shadow_mode;
    bool hw_ok; /* the guest's trace set-up may reach the CPU (else: operational error) */
    struct pt_shadow *sh;
    struct pt_shadow_scratch *scr;
    struct pt_shadow_env env;
    struct pt_mem_ops mem; /* the engine's view of guest memory (below) */
};

static struct pt_vcpu *bsp_pt;
bool pt_vmx_active;
static struct vcpu *bsp_vcpu_ptr;

bool pt_guest_owns(void)
{
    return pt_mode_guest_owns(pt_decision.mode);
}

/* --- the engine's view of guest memory (pt_mem.h) over the real EPT --- */

static enum pt_mem_kind handoff_kind(const struct ptv_handoff *h, uint64_t pa, uint64_t *end)
{
    for (unsigned i = 0; i < h->nr_mem; i++) {
        const struct ptv_mem_range *r = &h->mem[i];
        if (pa - r->base < r->size) {
            *end = r->base + r->size;
            return r->type == PTV_MEM_RAM   ? PT_MEM_GUEST_RAM
                   : r->type == PTV_MEM_VMM ? PT_MEM_VMM
                                            : PT_MEM_MMIO;
        }
    }
    *end = (pa | 0xfff) + 1;
    return PT_MEM_MMIO; /* holes and device memory */
}

static void mem_translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    struct vcpu *v = ctx;
    uint64_t hpa, end;
    unsigned level;
    out->hpa = 0;
    out->len = PT_PAGE_SIZE - (gpa & (PT_PAGE_SIZE - 1));
    if (gpa - vmm_span.base < vmm_span.size) {
        out->kind = PT_MEM_VMM;
        return;
    }
    if (ept_translate(&v->ept, gpa, &hpa, NULL, NULL, &level)) {
        out->kind = PT_MEM_UNMAPPED;
        return;
    }
    out->kind = handoff_kind(v->handoff, gpa, &end);
    if (hpa != gpa) /* only the sink page is not identity: VMM memory as far as PT goes */
        out->kind = PT_MEM_VMM;
    uint64_t page = level == EPT_LEVEL_1G ? 1ull << 30 : level == EPT_LEVEL_2M ? 1ull << 21 : 4096;
    uint64_t page_end = (gpa & ~(page - 1)) + page;
    out->len = (end < page_end ? end : page_end) - gpa;
    out->hpa = hpa;
}

static bool mem_read64(void *ctx, uint64_t gpa, uint64_t *val)
{
    struct pt_mem_xlate x;
    mem_translate(ctx, gpa, &x);
    if (x.kind != PT_MEM_GUEST_RAM || (gpa & 7))
        return false;
    *val = *(volatile uint64_t *)(uintptr_t)x.hpa;
    return true;
}

static bool mem_set_wp(void *ctx, uint64_t gpa_page, bool protect)
{
    struct vcpu *v = ctx;
    bool narrowed = false;
    if (ept_protect(&v->ept, gpa_page, PT_PAGE_SIZE, protect ? EPT_R | EPT_X : EPT_RWX, &narrowed))
        return false;
    vmx_ept_sync(&v->ept);
    return true;
}

static void *pt_alloc(void *ctx, uint64_t *hpa)
{
    return palloc_page(hpa);
}

static void pt_free(void *ctx, void *va, uint64_t hpa)
{
    palloc_free_page(hpa);
}

/* --- set-up --- */

int pt_vmx_setup(struct vcpu *v)
{
    static const struct pt_page_alloc alloc = {.alloc = pt_alloc, .free = pt_free};
    if (!pt_guest_owns())
        return 0;
    _Static_assert(sizeof(struct pt_vcpu) <= 2 * PAGE_SIZE, "pt_vcpu fits its pages");
    struct pt_vcpu *p = palloc_pages(2, NULL);
    if (!p || !(p->entry_list = palloc_page(&p->entry_list_pa)) ||
        !(p->exit_list = palloc_page(&p->exit_list_pa)))
        return -1;
    p->mem = (struct pt_mem_ops){
        .ctx = v, .translate = mem_translate, .read64 = mem_read64, .set_wp = mem_set_wp};
    p->shadow_mode = pt_decision.mode == PT_ENGINE_HOST_GUEST_SHADOW;
    if (p->shadow_mode) {
        size_t shp = (sizeof(struct pt_shadow) + PAGE_SIZE - 1) / PAGE_SIZE;
        size_t scp = (sizeof(struct pt_shadow_scratch) + PAGE_SIZE - 1) / PAGE_SIZE;
        p->sh = palloc_pages(shp, NULL);
        p->scr = palloc_pages(scp, NULL);
        if (!p->sh || !p->scr)
            return -1;
        pt_shadow_init(p->sh);
        uint32_t ecx = pt_host_caps.leaf14[0][PT_ECX];
        p->env = (struct pt_shadow_env){
            .mem = &p->mem,
            .alloc = &alloc,
            .host_topa = ecx & PT_CAP_ECX_TOPA,
            .host_topa_multi = ecx & PT_CAP_ECX_TOPA_MULTI,
            .host_single_range = ecx & PT_CAP_ECX_SINGLE_RANGE,
        };
    }
    pt_switch_init(&p->sw);
    vmx_ctls.proc2 |= pt_decision.secondary_ctls;
    vmx_ctls.exit |= pt_decision.exit_ctls;
    vmx_ctls.entry |= pt_decision.entry_ctls;
    vmcs_write64(VM_ENTRY_MSR_LOAD_ADDR, p->entry_list_pa);
    vmcs_write64(VM_EXIT_MSR_LOAD_ADDR, p->exit_list_pa);
    bsp_pt = p;
    pt_vmx_active = true;
    bsp_vcpu_ptr = v;
    pr_info("pt", "guest owns PT (%s); RTIT MSRs virtualized, switched on every entry/exit",
            pt_mode_name(pt_decision.mode));
    return 0;
}

/* --- switching --- */

static void run_plan(struct pt_vcpu *p)
{
    const struct pt_plan *pl = &p->plan;
    for (unsigned i = 0; i < pl->nsteps; i++) {
        const struct pt_step *s = &pl->steps[i];
        switch (s->op) {
        case PT_OP_WRMSR:
            wrmsr(s->msr, s->value);
            break;
        case PT_OP_SAVE_MSRS:
            for (unsigned k = 0; k < pl->nmsrs; k++) {
                uint64_t val = rdmsr(pl->msrs[k]);
                if (s->area == PT_AREA_HOST)
                    p->host_area[k] = val;
                else
                    pt_msr_file_set(&p->hw, pl->msrs[k], val);
            }
            break;
        case PT_OP_LOAD_MSRS:
            for (unsigned k = 0; k < pl->nmsrs; k++)
                wrmsr(pl->msrs[k], s->area == PT_AREA_HOST ? p->host_area[k]
                                                           : pt_msr_file_get(&p->hw, pl->msrs[k]));
            break;
        case PT_OP_VMWRITE_RTIT_CTL:
            vmcs_write64(GUEST_IA32_RTIT_CTL, s->value);
            break;
        }
    }
    for (unsigned i = 0; i < pl->n_entry_load; i++)
        p->entry_list[i] = pl->entry_load[i];
    for (unsigned i = 0; i < pl->n_exit_load; i++)
        p->exit_list[i] = pl->exit_load[i];
}

void pt_vmx_before_entry(struct vcpu *v)
{
    struct pt_vcpu *p = bsp_pt;
    if (!p)
        return;
    p->hw = v->pt_msrs;
    if (!p->hw_ok) {
        p->hw.ctl &= ~RTIT_CTL_TRACEEN; /* illegal set-up or error: the CPU never sees it */
    } else if (p->shadow_mode && (p->hw.ctl & RTIT_CTL_TRACEEN)) {
        {
            p->hw.output_base = p->sh->h_base;
            p->hw.output_mask = p->sh->h_mask;
            p->hw.ctl = p->sh->h_topa ? p->hw.ctl | RTIT_CTL_TOPA : p->hw.ctl & ~RTIT_CTL_TOPA;
        }
    }
    /* the VMM itself never traces: after an exit the host's RTIT_CTL is 0 (cleared by
     * the exit); before the first entry nobody vouches for what the firmware left */
    uint64_t host_ctl = v->launched ? 0 : PT_HOST_CTL_UNKNOWN;
    if (!pt_switch_entry(&p->sw, &pt_decision, &p->hw, host_ctl, &p->plan))
        panic("PT switching plan refused for this entry");
    run_plan(p);
    vmcs_write32(VM_ENTRY_MSR_LOAD_COUNT, p->plan.n_entry_load);
    vmcs_write32(VM_EXIT_MSR_LOAD_COUNT, p->plan.n_exit_load);
}

void pt_vmx_after_exit(struct vcpu *v)
{
    struct pt_vcpu *p = bsp_pt;
    if (!p)
        return;
    bool was_tracing = p->hw.ctl & RTIT_CTL_TRACEEN;
    pt_switch_exit(&p->sw, &pt_decision, &p->plan);
    run_plan(p);
    if (!was_tracing)
        return;
    /* hand the hardware's progress back to the guest's registers */
    v->pt_msrs.status = p->hw.status;
    if (!p->shadow_mode) {
        v->pt_msrs.output_base = p->hw.output_base;
        v->pt_msrs.output_mask = p->hw.output_mask;
    } else if (!pt_shadow_guest_view(p->sh, p->hw.output_base, p->hw.output_mask,
                                     &v->pt_msrs.output_base, &v->pt_msrs.output_mask)) {
        pr_err("pt",
               "hardware output position %#lx/%#lx is not in the shadow: stopping the "
               "guest's trace with an operational error",
               p->hw.output_base, p->hw.output_mask);
        v->pt_msrs.status = pt_status_operr(v->pt_msrs.status);
        p->hw_ok = false;
    }
}

void pt_vmx_msr_written(struct vcpu *v, uint32_t msr, const struct pt_msr_result *res)
{
    struct pt_vcpu *p = bsp_pt;
    if (!p || msr != MSR_IA32_RTIT_CTL || !res->trace_start)
        return;
    p->hw_ok = true;
    if (!p->shadow_mode)
        return; /* hardware-GPA mode: the CPU translates; violations come as EPT exits */
    const struct pt_msr_file *f = &v->pt_msrs;
    struct pt_out_cfg cfg = {
        .ctl = f->ctl,
        .status = f->status,
        .output_base = f->output_base,
        .output_mask_ptrs = f->output_mask,
        .topa_multi = pt_decision.guest.leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA_MULTI,
        .maxphyaddr = pt_decision.guest.maxphyaddr,
    };
    struct pt_topa_err err = {0};
    enum pt_shadow_status st = pt_shadow_prepare(p->sh, p->scr, &p->env, &cfg, &err);
    p->hw_ok = st == PT_SHADOW_OK;
    if (!p->hw_ok) {
        pr_warn("pt", "guest trace set-up refused (%s): operational error for the guest",
                st == PT_SHADOW_NOMEM ? "VMM out of memory"
                : err.reason          ? err.reason
                                      : "illegal");
        v->pt_msrs.status = pt_status_operr(v->pt_msrs.status);
    }
}

bool pt_vmx_ept_violation(struct vcpu *v, uint64_t gpa, uint64_t qual)
{
    struct pt_vcpu *p = bsp_pt;
    if (!p)
        return false;
    if (p->shadow_mode)
        return pt_shadow_table_write(p->sh, &p->env, gpa) == PT_SHADOW_WP_RETRY;
    struct pt_eptv_decision d;
    pt_eptv_decide(qual, gpa, v->pt_msrs.ctl & RTIT_CTL_TRACEEN, v->pt_msrs.status, &p->mem, &d);
    switch (d.action) {
    case PT_EPTV_MAP_RESUME:
        return mem_set_wp(v, gpa & PT_PAGE_MASK, false);
    case PT_EPTV_OPERR_RESUME:
        pr_warn("pt", "PT output to GPA %#lx: %s", gpa, d.reason);
        v->pt_msrs.status = d.guest_status; /* TraceEn stays 1 for the guest, as on hardware */
        if (d.stop_hw_trace)
            p->hw_ok = false;
        return true;
    default:
        return false;
    }
}
