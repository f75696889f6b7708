/* SPDX-License-Identifier: MIT */
/*
 * EPT set-up and EPT exits.  The guest gets an identity map of everything but
 * the VMM's own memory (vmm/ept/ept_identity.c).  A guest access to VMM memory
 * is logged, counted and then lands on a per-guest sink page: reads see the
 * sink (never VMM data), writes go to the sink; the guest continues (the
 * defined outcome of ARCHITECTURE §2).  An instruction fetch there gets #GP(0).
 */
#include "vmx/vmx_cpu.h"
#include "vmx/exits.h"
#include "vmx/vmcs.h"
#include "vmm.h"
#include "cpu.h"
#include "log.h"
#include "palloc.h"
#include "ept/ept_identity.h"
#include "ept/mtrr.h"
#include "pt/pt_eptv.h"
#include "lib/ptv_string.h"
#include "vmx/pt_vmx.h"

static void *ept_alloc(void *ctx, uint64_t *pa)
{
    return palloc_page(pa);
}

static void *ept_pa_to_va(void *ctx, uint64_t pa)
{
    return (void *)(uintptr_t)pa; /* the VMM runs identity mapped */
}

static struct mtrr_state host_mtrrs; /* read once at set-up */

static void read_mtrrs(struct mtrr_state *m)
{
    *m = (struct mtrr_state){.maxphyaddr = vmx_caps.maxphyaddr};
    if (!(cpuid_count(1, 0).edx & (1u << 12))) /* no MTRRs: UC everywhere (def_type 0) */
        return;
    m->cap = rdmsr(MSR_MTRRcap);
    m->def_type = rdmsr(MSR_MTRRdefType);
    if (m->cap & MTRR_CAP_FIX)
        for (unsigned i = 0; i < MTRR_NUM_FIXED; i++)
            m->fixed[i] = rdmsr(mtrr_fixed_msr(i));
    m->nvar = m->cap & MTRR_CAP_VCNT;
    if (m->nvar > MTRR_MAX_VAR)
        m->nvar = MTRR_MAX_VAR;
    for (unsigned i = 0; i < m->nvar; i++) {
        m->var_base[i] = rdmsr(MTRRphysBase_MSR(i));
        m->var_mask[i] = rdmsr(MTRRphysMask_MSR(i));
    }
}

bool vmx_host_mtrrs_unchanged(void)
{
    struct mtrr_state now;
    read_mtrrs(&now);
    return !memcmp(&now, &host_mtrrs, sizeof(now));
}

int vmx_ept_setup(struct vcpu *v)
{
    static const struct ept_ops ops = {.alloc_page = ept_alloc, .pa_to_va = ept_pa_to_va};
    const struct ptv_handoff *h = v->handoff;
    uint64_t ev = vmx_caps.ept_vpid;
    struct mtrr_state *mtrr = &host_mtrrs;
    uint64_t top;
    read_mtrrs(mtrr);
    if (ept_init(&v->ept, &ops, ev & VMX_EPT_1GB_PAGE_BIT, ev & VMX_EPT_2MB_PAGE_BIT) ||
        ept_set_maxphyaddr(&v->ept, vmx_caps.maxphyaddr) ||
        ept_build_identity(&v->ept, h->mem, h->nr_mem, mtrr, &top)) {
        pr_err("ept", "building the guest EPT failed (pool exhausted?)");
        return -1;
    }
    if (!palloc_page(&v->sink_pa))
        return -1;
    pr_info("ept",
            "identity map [0, %#lx) minus VMM [%#lx, %#lx): %lu tables, %lu x 1G, %lu x 2M, "
            "%lu x 4K",
            top, vmm_span.base, vmm_span.base + vmm_span.size, v->ept.nr_tables,
            v->ept.nr_leaves[2], v->ept.nr_leaves[1], v->ept.nr_leaves[0]);
    return 0;
}

void vmx_invept_all(void)
{
    struct {
        uint64_t eptp, rsvd;
    } desc = {vmcs_read64(EPT_POINTER), 0};
    /* all-context where the CPU has it, else single-context for our one EPTP */
    uint64_t type = vmx_caps.ept_vpid & VMX_EPT_EXTENT_GLOBAL_BIT ? 2 : 1;
    uint8_t fail;
    asm volatile("invept %2, %1; setna %0" : "=r"(fail) : "r"(type), "m"(desc) : "cc", "memory");
    if (fail)
        pr_err("ept", "INVEPT failed");
}

void vmx_ept_sync(struct ept *e)
{
    if (ept_flush_needed(e)) {
        vmx_invept_all();
        ept_flush_done(e);
    }
}

static bool in_vmm(uint64_t gpa)
{
    return gpa - vmm_span.base < vmm_span.size;
}

enum exit_action handle_ept_violation(struct vcpu *v, const struct vmexit *e)
{
    uint64_t page = e->gpa & ~0xfffull;
    /* guest ToPA edit (shadow), PT output (hardware-GPA mode) */
    if (pt_ctrl_ept_violation(&v->pt, e->gpa, e->qual) == PT_CTRL_EPTV_RESUME) {
        pt_vmx_log(v);
        return EXIT_RESUME;
    }
    if (in_vmm(e->gpa)) {
        v->ept_blocked++;
        if (v->ept_blocked <= 16 || !(v->ept_blocked & (v->ept_blocked - 1)))
            pr_warn("ept", "guest %s of VMM memory at GPA %#lx (RIP %#lx) blocked (%lu so far)",
                    (e->qual & EPT_VIOLATION_ACC_WRITE)   ? "write"
                    : (e->qual & EPT_VIOLATION_ACC_INSTR) ? "fetch"
                                                          : "read",
                    e->gpa, e->rip, v->ept_blocked);
        if (e->qual & EPT_VIOLATION_ACC_INSTR) {
            /* nothing the guest may run lives there: the fetch faults, as a jump to a
             * non-executable address would (the sink page is never executable) */
            vcpu_inject_gp(v);
            return EXIT_INJECT;
        }
        if (ept_map(&v->ept, page, v->sink_pa, 4096, EPT_R | EPT_W, EPT_MT_WB | EPT_MT_IPAT)) {
            pr_err("ept", "cannot map the sink page");
            return EXIT_STOP_GUEST;
        }
        vmx_ept_sync(&v->ept);
        /* no pt_ctrl_mem_changed(): VMM memory is never in a shadow (only guest RAM is) */
        return EXIT_RESUME;
    }
    if (e->qual & EPT_VIOLATION_ASYNC)
        pr_warn("ept", "asynchronous (PT) EPT violation at GPA %#lx with PT off", e->gpa);
    /* beyond the identity map: device memory above RAM (64-bit BARs) */
    uint64_t hpa;
    if (ept_translate(&v->ept, e->gpa, &hpa, NULL, NULL, NULL) == EPT_ENOENT &&
        e->gpa < (1ull << vmx_caps.maxphyaddr)) {
        uint64_t size = 1ull << 21, base = e->gpa & ~(size - 1);
        unsigned type;
        if (mtrr_range_type(&host_mtrrs, base, size, &type)) { /* mixed: map 4 KiB only */
            size = 4096;
            base = e->gpa & ~(size - 1);
            if (mtrr_range_type(&host_mtrrs, base, size, &type))
                type = EPT_MT_UC;
        }
        if (!ept_map(&v->ept, base, base, size, EPT_RWX, type)) {
            /* a new device mapping: no guest RAM changed, no shadow is affected */
            pr_info("ept", "mapped device memory [%#lx, %#lx) on demand (memory type %u)", base,
                    base + size, type);
            return EXIT_RESUME;
        }
    }
    pr_err("ept",
           "EPT violation at GPA %#lx (qualification %#lx, RIP %#lx) the VMM cannot "
           "resolve",
           e->gpa, e->qual, e->rip);
    return EXIT_STOP_GUEST;
}

enum exit_action handle_ept_misconfig(struct vcpu *v, const struct vmexit *e)
{
    pr_err("ept", "EPT misconfiguration at GPA %#lx: a VMM bug", e->gpa);
    return EXIT_STOP_GUEST;
}
