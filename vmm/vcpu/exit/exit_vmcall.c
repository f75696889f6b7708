/* SPDX-License-Identifier: MIT */
/*
 * VMCALL: the small guest ABI of include/ptv/vmcall.h.  Results come back in
 * registers; nothing here prints on the guest's behalf.  Everything but VERSION
 * is CPL 0 only (EXIT_STATS also at CPL 3 where the operator configured
 * vmcall_user = stats; the trace calls but TRACE_READ with vmcall_user = trace,
 * under the CPL 3 rule: a process's own window only, trace/treq.h).
 */
#include "vmx/vcpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "base/vmm_state.h"
#include "base/log.h"
#include "base/palloc.h"
#include "lib/ptv_string.h"
#include <ptv/vmcall.h>
#include "hw/percpu.h"
#include "smp/smp.h"
#include "trace/shim/trace_vmx.h"
#include "trace/treq.h"
#include "trace/shim/trace_dump.h"
#include "iommu/shim/iommu_vmm.h"

/* vmcall_user (include/ptv/config.h): the operator's opt-ins for CPL 3; TRACE_READ never */
static bool allowed_at_cpl3(uint64_t fn)
{
    if (fn == PTV_VMCALL_VERSION)
        return true;
    if (fn == PTV_VMCALL_EXIT_STATS)
        return vmm_cfg->vmcall_user >= PTV_VMCALL_USER_STATS;
    return vmm_cfg->vmcall_user == PTV_VMCALL_USER_TRACE &&
           (fn == PTV_VMCALL_TRACE_START || fn == PTV_VMCALL_TRACE_STOP ||
            fn == PTV_VMCALL_TRACE_STATUS || fn == PTV_VMCALL_TRACE_DUMP);
}

enum exit_action handle_vmcall(struct vcpu *v, const struct vmexit *e)
{
    uint64_t *r = v->regs.gpr;
    /* VERSION answers every CPL (allowed_at_cpl3): no VMREAD of SS for it; "ptvisor" as the 8
     * bytes RCX holds, little endian */
    if (r[GPR_RAX] == PTV_VMCALL_VERSION) {
        r[GPR_RAX] = PTV_VMCALL_OK;
        r[GPR_RBX] = PTV_VMCALL_ABI_VERSION;
        r[GPR_RCX] = 0x00726f7369767470ull;
        r[GPR_RDX] = 0;
        return EXIT_RESUME_SKIP_INSN;
    }
    unsigned cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    int64_t ret = PTV_VMCALL_OK;
    if (cpl != 0 && !allowed_at_cpl3(r[GPR_RAX])) {
        r[GPR_RAX] = (uint64_t)(int64_t)PTV_VMCALL_EPERM;
        return EXIT_RESUME_SKIP_INSN;
    }
    switch (r[GPR_RAX]) {
    case PTV_VMCALL_VMM_RANGE:
        r[GPR_RBX] = vmm_span.base;
        r[GPR_RCX] = vmm_span.size;
        r[GPR_RDX] = v->canary_pa;
        break;
    case PTV_VMCALL_CHECK_CANARY:
        r[GPR_RBX] = vmm_canary_intact();
        break;
    case PTV_VMCALL_EPT_BLOCKED:
        r[GPR_RBX] = v->ept_blocked;
        break;
    case PTV_VMCALL_EXIT_STATS: {
        uint64_t reason = r[GPR_RBX];
        r[GPR_RBX] = v->exits_total;
        r[GPR_RCX] = reason < EXIT_REASON_MAX ? v->exits_by_reason[reason] : 0;
        r[GPR_RDX] = 0;
        break;
    }
    case PTV_VMCALL_VMM_STATS:
        r[GPR_RBX] = palloc_free_bytes() / PAGE_SIZE;
        r[GPR_RCX] = ept_pages_held(v->ept); /* tables incl. on-demand, spare, retired */
        r[GPR_RDX] = log_lines;
        break;
    case PTV_VMCALL_SMP_STATS: {
        const struct percpu *pc = this_cpu();
        uint64_t other = r[GPR_RBX]; /* in: a vCPU whose exit total goes to R10 */
        const struct vcpu *o = other < PTV_MAX_CPUS ? percpu_area[other].vcpu : NULL;
        r[GPR_R10] = o ? o->exits_total : 0;
        r[GPR_RBX] = pc->id;
        r[GPR_RCX] = smp_online();
        r[GPR_RDX] = vmm_sd.completed;
        r[GPR_RSI] = vmm_sd.last_ticks;
        r[GPR_RDI] = vmm_sd.cpu[pc->id].answered;
        r[GPR_R8] = 0;
        for (unsigned i = 0; i < PTV_MAX_CPUS; i++)
            r[GPR_R8] += vmm_sd.cpu[i].answered;
        r[GPR_R9] = vmm_init_redelivery ? PTV_SMP_INIT_REDELIVERED : 0;
        break;
    }
    case PTV_VMCALL_EPT_DROP: { /* give back the on-demand maps, on every CPU */
        vm_ept_lock();
        int rc = v->ept_od->limit ? ept_od_drop_all(v->ept_od, v->ept) : 0;
        if (vmx_ept_sync(v->ept) && !rc)
            rc = -1; /* some CPU did not answer: the drop is not in force there */
        vm_ept_unlock();
        r[GPR_RBX] = (uint64_t)(int64_t)rc;
        if (rc)
            ret = PTV_VMCALL_EINVAL;
        break;
    }
    case PTV_VMCALL_SELFCHECK: {
        struct vmm_selfcheck c = vmm_selfcheck(v);
        r[GPR_RBX] = c.failed;
        r[GPR_RCX] = c.checked;
        break;
    }
    case PTV_VMCALL_TRACE_START: {
        uint32_t src;
        const struct trace_req rq = {.flags = (uint32_t)r[GPR_RBX],
                                     .cr3 = r[GPR_RCX],
                                     .caller_cr3 = vmcs_readl(GUEST_CR3),
                                     .cr3_ignore = r[GPR_R9],
                                     .lo = r[GPR_RDX],
                                     .hi = r[GPR_RSI],
                                     .start_ip = r[GPR_RDI],
                                     .user = cpl != 0}; /* the CPL 3 rule: EACCES */
        ret = trace_vmx_start(v, &rq, r[GPR_R8], &src);
        if (ret == PTV_VMCALL_OK) {
            r[GPR_RBX] = src;
            r[GPR_RCX] = vmm_cfg->trace_buf_size;
        }
        break;
    }
    case PTV_VMCALL_TRACE_STOP: {
        if (cpl && !trace_vmx_owned_by(v, cpl, vmcs_readl(GUEST_CR3))) {
            ret = PTV_VMCALL_EACCES; /* not the caller's window: nothing of it either */
            break;
        }
        ret = trace_vmx_stop(v);
        struct trace_status st;
        if (cpl)
            trace_vmx_status_own(v, &st);
        else
            trace_vmx_status(v, &st);
        r[GPR_RBX] = st.written;
        r[GPR_RCX] = st.insns;
        r[GPR_RDX] = st.flags;
        r[GPR_RSI] = st.gaps;
        r[GPR_RDI] = st.events;
        break;
    }
    case PTV_VMCALL_TRACE_STATUS: {
        if (cpl && !trace_vmx_owned_by(v, cpl, vmcs_readl(GUEST_CR3))) {
            ret = PTV_VMCALL_EACCES;
            break;
        }
        struct trace_status st;
        if (cpl)
            trace_vmx_status_own(v, &st);
        else
            trace_vmx_status(v, &st);
        r[GPR_RBX] = st.flags;
        r[GPR_RCX] = st.ring_size;
        r[GPR_RDX] = st.written;
        r[GPR_RSI] = st.insns;
        r[GPR_RDI] = st.gaps;
        r[GPR_R8] = st.events;
        r[GPR_R9] = st.unreadable;
        r[GPR_R10] = cpl ? 0 : trace_dump_count(); /* every CPU's dumps: not the window's */
        break;
    }
    case PTV_VMCALL_TRACE_DUMP: /* out: RBX = the dump's number; it goes out after this call */
        if (cpl && !trace_vmx_owned_by(v, cpl, vmcs_readl(GUEST_CR3))) {
            ret = PTV_VMCALL_EACCES;
            break;
        }
        if (!(vmm_cfg->dump_on & PTV_DUMP_VMCALL)) {
            ret = PTV_VMCALL_EPERM;
            break;
        }
        {
            uint32_t id;
            ret = trace_dump_request(v, &id);
            r[GPR_RBX] = id;
        }
        break;
    case PTV_VMCALL_DMA_STATS: {
        uint64_t addr;
        uint16_t sid;
        bool write;
        if (this_cpu()->bsp) /* the BSP polls the units (iommu_poll_faults): no race with it */
            iommu_poll_faults();
        r[GPR_RBX] = iommu_units_on();
        r[GPR_RCX] = iommu_faults_seen();
        bool any = iommu_last_fault(&addr, &sid, &write);
        r[GPR_RDX] = any ? addr : 0;
        r[GPR_RSI] = any ? sid | (write ? PTV_DMA_FAULT_WRITE : 0) : 0;
        break;
    }
    case PTV_VMCALL_BOOT_HANDOFF:
        ret = trace_vmx_handoff(v);
        break;
    case PTV_VMCALL_TRACE_READ: /* out: copied, oldest offset kept, bytes written in all */
        ret = trace_vmx_read(v, r[GPR_RBX], r[GPR_RCX], r[GPR_RDX], &r[GPR_RBX], &r[GPR_RCX],
                             &r[GPR_RDX]);
        break;
    default:
        ret = PTV_VMCALL_ENOSYS;
    }
    r[GPR_RAX] = (uint64_t)ret;
    return EXIT_RESUME_SKIP_INSN;
}
