/* SPDX-License-Identifier: MIT */
/*
 * The guest's one EPT (struct vm): built once on the BSP from the boot memory map and the host
 * MTRRs, its lock, INVEPT, and the shootdown that makes a narrowing change visible on every CPU
 * before the VMM relies on it.  The exit handlers (exit_ept.c), the PT shim (pt_vmx.c), the
 * tracer and the SMP code use it; it calls none of them.
 */
#include "vmx/vmx_cpu.h"
#include "vmx/vcpu.h"
#include "vmx/vmx_insn.h"
#include "base/vmm_state.h"
#include "base/handoff.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "base/palloc.h"
#include "ept/ept_identity.h"
#include "ept/ept_ondemand.h"
#include "ept/ept_entry.h"
#include "ept/mtrr.h"
#include "lib/ptv_string.h"
#include "smp/smp.h"

static void *ept_alloc(void *ctx, uint64_t *pa)
{
    return palloc_page(pa);
}

static void *ept_pa_to_va(void *ctx, uint64_t pa)
{
    return (void *)(uintptr_t)pa; /* the VMM runs identity mapped */
}

static struct mtrr_state host_mtrrs; /* read once at set-up */

/* IA32_VMX_EPT_VPID_CAP bit 7: page-walk length 5 (SDM Vol. 3D A.10) */
#define VMX_EPT_PAGE_WALK_5_BIT (1ull << 7)

/*
 * INVEPT on every CPU (an EPT shootdown), for the on-demand maps' drops and for ept.c's
 * break-before-make: a split or merge makes the entry not present, calls this, and writes the
 * entry with its new page size only afterwards, so no CPU holds translations of both sizes
 * (iTLB multihit, ept.h).  The caller holds vm.ept_lock, so a vCPU that faults on the
 * not-present entry meanwhile waits in its EPT-violation handler, answering the shootdown,
 * and finds the change complete when it gets the lock (exit_ept.c: it just retries).  A CPU
 * that does not answer is reported by vmx_ept_sync() and the invalidation stays owed.
 */
static void ept_flush_all(void *ctx, struct ept *e)
{
    (void)ctx;
    vmx_ept_sync(e);
}

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

struct vm vm;

void vm_ept_lock(void)
{
    spin_lock_relax(&vm.ept_lock, smp_relax, NULL);
}

void vm_ept_unlock(void)
{
    spin_unlock(&vm.ept_lock);
}

/* the one EPT of the guest, built once on the BSP (after its VMXON: INVEPT) */
int vm_ept_setup(const struct ptv_handoff *h)
{
    static const struct ept_ops ops = {
        .alloc_page = ept_alloc, .pa_to_va = ept_pa_to_va, .flush = ept_flush_all};
    struct vm *v = &vm;
    uint64_t ev = vmx_caps.ept_vpid;
    struct mtrr_state *mtrr = &host_mtrrs;
    uint64_t top, limit;
    /* a 5-level walk only where 4 levels cannot reach every physical address
     * (as KVM decides): GPAs >= 2^48 on a CPU with MAXPHYADDR > 48 */
    bool five = vmx_caps.maxphyaddr > EPT_GPA_BITS && (ev & VMX_EPT_PAGE_WALK_5_BIT);
    read_mtrrs(mtrr);
    if (ept_init(&v->ept, &ops, ev & VMX_EPT_1GB_PAGE_BIT, ev & VMX_EPT_2MB_PAGE_BIT) ||
        (five && ept_set_levels(&v->ept, 5))) {
        pr_err("ept", "setting up the guest EPT failed (pool exhausted?)");
        return -1;
    }
    /* before any map: a break-before-make invalidation (vmx_invept_all()) names this EPTP */
    v->eptp = ept_eptp(&v->ept);
    if (ept_set_maxphyaddr(&v->ept, vmx_caps.maxphyaddr) ||
        ept_build_identity(&v->ept, h->mem, h->nr_mem, mtrr, &top)) {
        pr_err("ept", "building the guest EPT failed (pool exhausted?)");
        return -1;
    }
    limit = 1ull << vmx_caps.maxphyaddr;
    if (limit > ept_gpa_limit(&v->ept))
        limit = ept_gpa_limit(&v->ept);
    /* the spare pages one on-demand map needs, so a short pool later still maps */
    if (!palloc_page(&v->sink_pa) || ept_reserve(&v->ept, v->ept.levels - 1u))
        return -1;
    if (top < limit && ept_od_init(&v->ept_od, &v->ept, mtrr, top, limit, EPT_OD_MAX_TABLES,
                                   ept_flush_all, NULL)) {
        pr_err("ept", "on-demand maps above %#lx: bad set-up", top);
        return -1;
    }
    if (vmx_caps.maxphyaddr > EPT_GPA_BITS && !five)
        pr_warn("ept",
                "MAXPHYADDR %u without 5-level EPT: guest accesses at or above 2^48 get "
                "#GP(0)",
                vmx_caps.maxphyaddr);
    pr_info("ept",
            "identity map [0, %#lx) minus VMM [%#lx, %#lx): %lu tables, %lu x 1G, %lu x 2M, "
            "%lu x 4K; %u-level walk; on demand [%#lx, %#lx) in at most %lu table pages",
            top, vmm_span.base, vmm_span.base + vmm_span.size, v->ept.nr_tables,
            v->ept.nr_leaves[2], v->ept.nr_leaves[1], v->ept.nr_leaves[0], v->ept.levels, top,
            limit, (unsigned long)EPT_OD_MAX_TABLES);
    return 0;
}

/* INVEPT on this CPU; no VMCS needed (the NMI path runs it anywhere in root) */
void vmx_flush_guest_linear(void)
{
    /* without VPIDs every VM entry and exit drops them already (SDM Vol. 3C, VPIDs and TLB
     * management) */
    if (!(vmx_ctls.proc2 & SECONDARY_EXEC_ENABLE_VPID))
        return;
    uint64_t cap = vmx_caps.ept_vpid, type;
    if (cap & VMX_VPID_EXTENT_SINGLE_NONGLOBAL)
        type = 3;
    else if (cap & VMX_VPID_EXTENT_SINGLE_BIT)
        type = 1;
    else if (cap & VMX_VPID_EXTENT_ALL_BIT)
        type = 2;
    else {
        vmx_invept_all(); /* combined mappings of every VPID */
        return;
    }
    struct invvpid_desc desc = {1, 0}; /* the guest's VPID (vcpu_setup.c) */
    if (__invvpid(type, &desc))
        vmx_invept_all();
}

void vmx_invept_all(void)
{
    struct invept_desc desc = {vm.eptp, 0};
    /* all-context where the CPU has it, else single-context for our one EPTP */
    uint64_t type = vmx_caps.ept_vpid & VMX_EPT_EXTENT_GLOBAL_BIT ? 2 : 1;
    if (__invept(type, &desc))
        pr_err("ept", "INVEPT failed");
}

/*
 * Make an EPT change visible everywhere before the VMM relies on it: INVEPT
 * here and on every other CPU that runs the guest (an EPT shootdown, with
 * vm.ept_lock held).  Only then are retired table pages reusable
 * (ept_flush_done).  A CPU that does not answer leaves the retired pages
 * retired: memory is lost, never reused under a stale translation.
 */
int vmx_ept_sync(struct ept *e)
{
    if (!ept_flush_needed(e))
        return 0;
    uint64_t missing = 0;
    if (smp_shootdown(&missing)) {
        pr_err_rl("ept", "EPT shootdown: CPUs %#lx did not answer; retired EPT pages kept",
                  missing);
        return -1;
    }
    ept_flush_done(e);
    return 0;
}

/* what the handoff map says guest-physical [gpa, gpa + len) is, if one range holds it all
 * (PTV_MEM_MMIO if not); the VMM's own span always reads PTV_MEM_VMM */
uint32_t vm_mem_type(const struct ptv_handoff *h, uint64_t gpa, uint64_t len)
{
    uint64_t end;
    if (gpa - vmm_span.base < vmm_span.size || gpa + len - 1 - vmm_span.base < vmm_span.size)
        return PTV_MEM_VMM;
    uint32_t type = ptv_mem_type_at(h, gpa, &end);
    return gpa + len <= end ? type : PTV_MEM_MMIO;
}
