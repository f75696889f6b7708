/* SPDX-License-Identifier: MIT */
/*
 * EPT exits (the EPT itself, its lock and its shootdowns: vm_ept.c).  The guest gets an identity
 * map of everything but the VMM's own memory (vmm/ept/ept_identity.c).  A guest access to VMM
 * memory is logged, counted and then lands on a per-guest sink page: reads see the sink (never VMM
 * data), writes go to the sink; the guest continues (the defined outcome of ARCHITECTURE §2).  An
 * instruction fetch there gets #GP(0).
 *
 * Above the identity map, addresses are identity mapped on their first access
 * (vmm/ept/ept_ondemand.c) in bounded memory: device memory (64-bit BARs) works,
 * and where nothing answers the bus gives what bare metal gives (reads all
 * ones, writes dropped).  No guest access stops the guest for want of memory.
 */
#include "vmx/vmx_cpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "base/vmm_state.h"
#include "base/log.h"
#include "ept/ept_ondemand.h"
#include "pt/pt_eptv.h"
#include "pt/shim/pt_vmx.h"
#include "trace/shim/trace_vmx.h"
#include "hw/percpu.h"
#include "smp/smp.h"
#include "iommu/shim/iommu_vmm.h"

/* consecutive exits that are EPT violations on pages EPT already allows */
#define EPT_STALE_MAX 8u

static bool in_vmm(uint64_t gpa)
{
    return gpa - vmm_span.base < vmm_span.size;
}

/* map the sink at page; a short pool first gives back the on-demand tables */
static int map_sink(struct vcpu *v, uint64_t page)
{
    int rc = ept_map(v->ept, page, vm.sink_pa, 4096, EPT_R | EPT_W, EPT_MT_WB | EPT_MT_IPAT);

    if (rc == EPT_ENOMEM && v->ept_od->limit && !ept_od_drop_all(v->ept_od, v->ept))
        rc = ept_map(v->ept, page, vm.sink_pa, 4096, EPT_R | EPT_W, EPT_MT_WB | EPT_MT_IPAT);
    return rc;
}

static enum exit_action vmm_memory_access(struct vcpu *v, const struct vmexit *e)
{
    const char *what = (e->qual & EPT_VIOLATION_ACC_WRITE)   ? "write"
                       : (e->qual & EPT_VIOLATION_ACC_INSTR) ? "fetch"
                                                             : "read";

    v->ept_blocked++;
    pr_warn_rl("ept", "guest %s of VMM memory at GPA %#lx (RIP %#lx) blocked", what, e->gpa,
               e->rip);
    if (e->qual & EPT_VIOLATION_ACC_INSTR) {
        /* nothing the guest may run lives there: the fetch faults, as a jump to a
         * non-executable address would (the sink page is never executable) */
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    if (map_sink(v, e->gpa & ~0xfffull)) {
        /* the pool is dry even without the on-demand tables: the access cannot
         * be retried anywhere, so it faults as the fetch does (documented) */
        pr_err_rl("ept", "no memory for the sink page at GPA %#lx: #GP(0)", e->gpa);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    vmx_ept_sync(v->ept);
    /* no pt_ctrl_mem_changed(): VMM memory is never in a shadow (only guest RAM is) */
    return EXIT_RESUME;
}

/* the EPT rights an access needs (exit qualification bits 2:0, SDM Vol. 3C 27.2.1) */
static unsigned access_perms(uint64_t qual)
{
    return ((qual & EPT_VIOLATION_ACC_READ) ? EPT_R : 0) |
           ((qual & EPT_VIOLATION_ACC_WRITE) ? EPT_W : 0) |
           ((qual & EPT_VIOLATION_ACC_INSTR) ? EPT_X : 0);
}

/*
 * A violation on a page whose EPT rights allow the access: another CPU mapped
 * it between this CPU's fault and its exit handler taking the EPT lock, or a
 * translation this CPU cached before the VMM widened it (the VMM shoots down
 * every narrowing, so anything else is a VMM bug).  INVEPT here and retry, at
 * most EPT_STALE_MAX exits in a row.
 *
 * One such case is expected and common on SMP: a split or merge on another CPU
 * (the guest's APIC window moved, a ToPA page write-protected or released)
 * makes the entry not present for one shootdown before writing it with its new
 * page size (break-before-make, ept.h).  A guest access there in that window
 * exits; the handler waits for the EPT lock, which that CPU holds across the
 * change, answering its shootdown meanwhile, and then finds the new entry:
 * retrying is all it takes.  Guest RAM never looks unmapped to the guest, and
 * an event being delivered when the access faulted is delivered again
 * (vmx_reinject_idt_vectoring()).  So when a break happened since this vCPU
 * last came here, the retry is counted apart, logs nothing and does not count
 * towards the EPT_STALE_MAX a VMM bug would reach.
 */
static enum exit_action stale_violation(struct vcpu *v, const struct vmexit *e)
{
    bool window = v->ept->nr_breaks != v->ept_breaks_seen;

    v->ept_breaks_seen = v->ept->nr_breaks;
    v->ept_stale++;
    if (window) {
        v->ept_bbm_retries++;
        v->ept_stale_run = 0;
    } else {
        v->ept_stale_run = v->ept_stale_last + 1 == v->exits_total ? v->ept_stale_run + 1 : 1;
        v->ept_stale_last = v->exits_total;
        pr_warn_rl("ept", "EPT violation at GPA %#lx (qualification %#lx) that EPT allows: INVEPT",
                   e->gpa, e->qual);
        if (v->ept_stale_run > EPT_STALE_MAX) {
            pr_err("ept", "%u EPT violations in a row that INVEPT does not clear: VMM bug",
                   EPT_STALE_MAX);
            return EXIT_STOP_GUEST;
        }
    }
    vmx_invept_all();     /* this CPU's view; */
    vmx_ept_sync(v->ept); /* a pending narrowing goes to every CPU */
    return EXIT_RESUME;
}

static enum exit_action ept_violation_locked(struct vcpu *v, const struct vmexit *e);

enum exit_action handle_ept_violation(struct vcpu *v, const struct vmexit *e)
{
    /* the violation interrupted an IRET that had unblocked NMIs: block them again
     * before the IRET restarts (virtual NMIs; SDM Vol. 3C, EPT-violation exit
     * qualification bit 12, "NMI unblocking due to IRET") */
    if ((e->qual & EPT_VIOLATION_NMI_UNBLOCK) && !(e->idt_vec_info & INTR_INFO_VALID) &&
        (vmcs_read32(PIN_BASED_VM_EXEC_CONTROL) & PIN_BASED_VIRTUAL_NMIS))
        vmcs_write32(GUEST_INTERRUPTIBILITY_INFO,
                     vmcs_read32(GUEST_INTERRUPTIBILITY_INFO) | GUEST_INTR_STATE_NMI);
    /* the tracer's: a user-mode fetch that ended a span run free at CPL 0 (trace_step.c) */
    if (trace_vmx_free_fetch(v))
        return EXIT_RESUME;
    /* guest ToPA edit (shadow), PT output (hardware-GPA mode); takes the lock itself */
    if (pt_ctrl_ept_violation(&v->pt, e->gpa, e->qual) == PT_CTRL_EPTV_RESUME) {
        pt_vmx_log(v);
        return EXIT_RESUME;
    }
    vm_ept_lock();
    enum exit_action a = ept_violation_locked(v, e);
    vm_ept_unlock();
    return a;
}

static enum exit_action ept_violation_locked(struct vcpu *v, const struct vmexit *e)
{
    uint64_t hpa;
    unsigned perms;
    int rc;
    if (in_vmm(e->gpa))
        return vmm_memory_access(v, e);
    if (e->qual & EPT_VIOLATION_ASYNC)
        pr_warn_rl("ept", "asynchronous (PT) EPT violation at GPA %#lx with PT off", e->gpa);
    rc = ept_translate(v->ept, e->gpa, &hpa, &perms, NULL, NULL);
    if (rc == 0 && (perms & access_perms(e->qual)) == access_perms(e->qual))
        return stale_violation(v, e);
    if (rc == EPT_ENOENT && v->ept_od->limit) {
        /* beyond the identity map: device memory above RAM (64-bit BARs), or nothing */
        struct ept_od_map m;
        rc = ept_od_fault(v->ept_od, v->ept, e->gpa, &m);
        if (!rc) {
            vmx_ept_sync(v->ept);
            /* a new device mapping: no guest RAM changed, no shadow is affected */
            pr_info_rl("ept", "mapped [%#lx, %#lx) on demand (memory type %u)%s", m.base,
                       m.base + m.size, m.type, m.dropped ? "; older on-demand maps dropped" : "");
            return EXIT_RESUME;
        }
        if (rc == EPT_ENOMEM) {
            /* not one map's worth of pages left, even after dropping ours */
            pr_err_rl("ept", "no memory to map GPA %#lx on demand: #GP(0)", e->gpa);
            vcpu_inject_gp(v);
            return EXIT_INJECT;
        }
    }
    if (rc == EPT_EINVAL && e->gpa >= ept_gpa_limit(v->ept)) {
        /* beyond what the walk can translate (GPA >= 2^48 on a 4-level walk,
         * MAXPHYADDR > 48 without 5-level EPT): no map can make the access
         * work, so it faults instead of stopping the guest (documented) */
        v->ept_unmappable++;
        pr_warn_rl("ept", "guest access at GPA %#lx beyond the %u-level EPT walk: #GP(0)", e->gpa,
                   v->ept->levels);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    /* Shadow PT write-protects guest ToPA pages in the one EPT, but each vCPU's
     * engine knows only its own: a write from another vCPU to such a page (Linux
     * reusing a freed ToPA page elsewhere) is not a fault on bare metal.  Lift the
     * protection (a widening: no shootdown); the owner's shadow may then miss
     * edits of that page -- inexact trace, never output outside guest RAM
     * (documented; a shared protect table is the fix). */
    if (pt_decision.mode == PT_ENGINE_HOST_GUEST_SHADOW && rc == 0 &&
        (e->qual & EPT_VIOLATION_ACC_WRITE) && perms == (EPT_R | EPT_X) && hpa == e->gpa &&
        !ept_protect(v->ept, e->gpa & ~0xfffull, 4096, EPT_RWX, NULL)) {
        pr_warn_rl("pt",
                   "write to GPA %#lx, a page another vCPU's PT shadow write-protects: "
                   "protection lifted",
                   e->gpa);
        return EXIT_RESUME;
    }
    /* a DMA-remapping unit's registers (read-only: the unit is the VMM's, vmm/iommu/) */
    if (iommu_owns(e->gpa)) {
        v->ept_blocked++;
        pr_warn_rl("iommu",
                   "guest write to the DMA-remapping registers at GPA %#lx (RIP %#lx) "
                   "blocked: #GP(0)",
                   e->gpa, e->rip);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    /* a page the VMM maps with fewer rights than the access needs and nobody
     * claimed (e.g. a fetch from a device window): it faults, as a fetch from
     * VMM memory does; the guest goes on */
    pr_err_rl("ept",
              "EPT violation at GPA %#lx (qualification %#lx, RIP %#lx) not resolvable: "
              "#GP(0)",
              e->gpa, e->qual, e->rip);
    vcpu_inject_gp(v);
    return EXIT_INJECT;
}

enum exit_action handle_ept_misconfig(struct vcpu *v, const struct vmexit *e)
{
    pr_err("ept", "EPT misconfiguration at GPA %#lx: a VMM bug", e->gpa);
    return EXIT_STOP_GUEST;
}
