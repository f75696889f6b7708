/* SPDX-License-Identifier: MIT */
/*
 * The shim between the PT controller (vmm/pt/pt_ctrl.c, host-tested on the CPU twin) and this
 * CPU: RDMSR / WRMSR (with the exception fix-up) / VMWRITE / the VMCS MSR-load lists, the
 * engine's view of guest memory over the real EPT, and pages from the VMM pool.  Nothing here
 * decides anything about PT: the decisions are the controller's.
 */
#include "pt/shim/pt_vmx.h"
#include "pt/pt_mem_view.h"
#include "ept/ept_entry.h"
#include "base/handoff.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "base/vmm_state.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "base/palloc.h"

/* --- the CPU --- */

static uint64_t cpu_rdmsr(void *ctx, uint32_t msr)
{
    return rdmsr(msr);
}

static int cpu_wrmsr(void *ctx, uint32_t msr, uint64_t val)
{
    return wrmsr_safe(msr, val); /* guest-derived values: a fault is fixed up, never fatal */
}

static void cpu_vmwrite_rtit_ctl(void *ctx, uint64_t val)
{
    vmcs_write64(GUEST_IA32_RTIT_CTL, val);
}

struct pt_lists {
    struct vmx_msr_entry *entry, *exit;
};

static void cpu_set_msr_lists(void *ctx, const struct vmx_msr_entry *entry, unsigned n_entry,
                              const struct vmx_msr_entry *exit, unsigned n_exit)
{
    struct pt_lists *l = ctx;
    for (unsigned i = 0; i < n_entry; i++)
        l->entry[i] = entry[i];
    for (unsigned i = 0; i < n_exit; i++)
        l->exit[i] = exit[i];
    vmcs_write32(VM_ENTRY_MSR_LOAD_COUNT, n_entry);
    vmcs_write32(VM_EXIT_MSR_LOAD_COUNT, n_exit);
}

/* --- guest memory (pt_mem.h) over the real EPT --- */

/* the facts only; pt_mem_view() (host-tested) decides what PT may do there */
static void mem_translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    struct vcpu *v = ctx;
    struct pt_mem_facts f = {.in_vmm = gpa - vmm_span.base < vmm_span.size};
    unsigned level = EPT_LEVEL_4K;
    if (!f.in_vmm) {
        vm_ept_lock(); /* another CPU may be pruning EPT tables */
        f.ept_ok = !ept_translate(v->ept, gpa, &f.hpa, NULL, NULL, &level);
        vm_ept_unlock();
        f.page_shift = EPT_LEVEL_SHIFT(level);
        f.map_type = ptv_mem_type_at(v->handoff, gpa, &f.map_end);
    }
    pt_mem_view(gpa, &f, out);
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

/* a ToPA entry by host address, inside a guest-RAM page the same walk translated (pt_mem.h):
 * no EPT walk per entry.  The same race window as mem_read64; an EPT change marks the shadow
 * for a rebuild anyway */
static bool mem_read_hpa64(void *ctx, uint64_t hpa, uint64_t *val)
{
    (void)ctx;
    if (hpa & 7)
        return false;
    *val = *(volatile uint64_t *)(uintptr_t)hpa;
    return true;
}

static bool mem_set_wp(void *ctx, uint64_t gpa_page, bool protect)
{
    struct vcpu *v = ctx;
    bool narrowed = false;
    vm_ept_lock();
    int rc =
        ept_protect(v->ept, gpa_page, PT_PAGE_SIZE, protect ? EPT_R | EPT_X : EPT_RWX, &narrowed);
    /* a write-protected ToPA page counts only once every CPU has dropped its
     * writable translation: a shootdown nobody completed is a failure here */
    if (!rc && vmx_ept_sync(v->ept)) {
        /* not in force everywhere: give the page its rights back (a widening) */
        if (protect && ept_protect(v->ept, gpa_page, PT_PAGE_SIZE, EPT_RWX, NULL))
            pr_err_rl("pt", "ToPA page %#lx: cannot undo its write protection", gpa_page);
        rc = -1;
    }
    vm_ept_unlock();
    return !rc;
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

#define PAGES_OF(sz) (((sz) + PAGE_SIZE - 1) / PAGE_SIZE)

int pt_vmx_setup(struct vcpu *v)
{
    static const struct pt_page_alloc alloc = {.alloc = pt_alloc, .free = pt_free};
    /* per vCPU: the engine keeps pointers to both */
    struct {
        struct pt_mem_ops mem;
        struct pt_lists lists;
    } *own = palloc_page(NULL);
    if (!own)
        return -1;
    struct pt_lists *lists = &own->lists;
    struct pt_cpu_ops cpu = {.ctx = lists,
                             .rdmsr = cpu_rdmsr,
                             .wrmsr = cpu_wrmsr,
                             .vmwrite_rtit_ctl = cpu_vmwrite_rtit_ctl,
                             .set_msr_lists = cpu_set_msr_lists};
    struct pt_ctrl_mem m = {0};
    uint64_t entry_pa, exit_pa;

    own->mem = (struct pt_mem_ops){.ctx = v,
                                   .translate = mem_translate,
                                   .read64 = mem_read64,
                                   .set_wp = mem_set_wp,
                                   .read_hpa64 = mem_read_hpa64};
    if (pt_decision.mode == PT_ENGINE_HOST_GUEST_SHADOW) {
        m.sh = palloc_pages(PAGES_OF(sizeof(struct pt_shadow)), NULL);
        m.scr = palloc_pages(PAGES_OF(sizeof(struct pt_shadow_scratch)), NULL);
        m.regions =
            palloc_pages(PAGES_OF(PT_CTRL_MAX_REGIONS * sizeof(struct pt_topa_region)), NULL);
        m.max_regions = PT_CTRL_MAX_REGIONS;
    }
    if (pt_ctrl_init(&v->pt, &pt_decision, &pt_host_caps, &cpu, &own->mem, &alloc, &m)) {
        pr_err("pt", "out of VMM memory for the shadow ToPA state: vmm_pool too small");
        return -1;
    }
    if (v->pt.system) {
        struct pt_sys_cfg cfg;
        const char *why;
        pt_sys_cfg_from_config(vmm_cfg, &cfg);
        if (pt_ctrl_sys_setup(&v->pt, &cfg, &alloc, &why)) {
            pr_warn("pt", "system mode: the VMM does not trace this CPU's guest: %s", why);
            return 0; /* the guest runs untraced; it never sees PT either way */
        }
    }
    if (!v->pt.active)
        return 0;
    if (!(lists->entry = palloc_page(&entry_pa)) || !(lists->exit = palloc_page(&exit_pa)))
        return -1;
    /* the switching decision: the guest's own, or system mode's (pt_ctrl.h, struct pt_ctrl_sys) */
    vmx_ctls.proc2 |= v->pt.swd->secondary_ctls;
    vmx_ctls.exit |= v->pt.swd->exit_ctls;
    vmx_ctls.entry |= v->pt.swd->entry_ctls;
    vmcs_write64(VM_ENTRY_MSR_LOAD_ADDR, entry_pa);
    vmcs_write64(VM_EXIT_MSR_LOAD_ADDR, exit_pa);
    if (v->pt.system)
        pr_info("pt",
                "system mode: the VMM traces its guest into a %lu KiB %s ToPA ring, "
                "RTIT_CTL %#lx through %s",
                v->pt.sys.ring.size >> 10, v->pt.sys.ring.wrap ? "circular" : "stop-on-full",
                v->pt.sys.f.ctl,
                v->pt.swd->load_clear ? "the load/clear controls" : "the MSR-load lists");
    else
        pr_info("pt", "guest owns PT (%s); RTIT MSRs virtualized, switched on every entry/exit",
                pt_mode_name(pt_decision.mode));
    return 0;
}

void pt_vmx_log(struct vcpu *v)
{
    if (!v->pt.last_refusal)
        return;
    if (v->pt.system)
        pr_warn_rl("pt", "the VMM's trace is off: %s", v->pt.last_refusal);
    else
        pr_warn_rl("pt", "guest trace stopped with an operational error: %s", v->pt.last_refusal);
    v->pt.last_refusal = NULL;
}
