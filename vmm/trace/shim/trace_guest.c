/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's view of the vCPU, below everything else of its shim: guest memory over
 * EPT, the vCPU's state from the VMCS as the stepping logic sees it, the bytes a window's code
 * ran as, and how this CPU steps (the monitor trap flag or the trap flag) with the one VMCS bit
 * the MTF's three users share.  trace_tf.c, trace_step.c, trace_vmx.c, trace_dump.c and
 * trace_boot.c build on it; it calls none of them.
 */
#include "trace/shim/trace_vmx.h"
#include "trace/shim/trace_vcpu.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "hw/vmx.h"
#include "hw/cpu.h"
#include "base/vmm_state.h"
#include "lib/ptv_string.h"
#include <ptv/config.h>

/* --- guest memory over EPT --- */

/* the host address of guest-physical [gpa, gpa + len) inside one 4 KiB page, or 0 */
uint64_t trace_guest_page(struct vcpu *v, uint64_t gpa, uint64_t len, bool write)
{
    uint64_t hpa;
    unsigned level, perms;
    uint32_t type = vm_mem_type(v->handoff, gpa, len);
    /* code may run from firmware-reserved memory; the VMM reads no device and
     * writes only guest RAM, and only where EPT lets the guest write (a ToPA table page the PT
     * engine write-protects is not written behind its back) */
    if (type != PTV_MEM_RAM && (write || (type != PTV_MEM_RESERVED && type != PTV_MEM_ACPI)))
        return 0;
    vm_ept_lock();
    int rc = ept_translate(v->ept, gpa, &hpa, &perms, NULL, &level);
    vm_ept_unlock();
    if (rc || hpa != gpa) /* guest memory is identity-mapped; the sink page is not */
        return 0;
    if (write && !(perms & EPT_W))
        return 0;
    return hpa;
}

bool trace_read_gpa(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    uint64_t hpa = trace_guest_page(ctx, gpa, len, false);
    if (!hpa)
        return false;
    memcpy(buf, (const void *)(uintptr_t)hpa, len);
    return true;
}

bool trace_vmx_code_read(struct vcpu *v, uint64_t cr3, uint64_t va, void *buf, unsigned len)
{
    const struct trace_vcpu *t = v->trace;
    struct gw_mem m = {.ctx = v, .read = trace_read_gpa};
    unsigned got;
    uint64_t kcr3, kva;
    if (!t)
        return false;
    cp_key(cr3 == CP_CR3_ANY ? t->paging.cr3 : cr3, va, &kcr3, &kva);
    unsigned ncopies = t->code ? __atomic_load_n(&t->code->n, __ATOMIC_ACQUIRE) : 0;
    for (unsigned i = 0; i < ncopies; i++) /* the bytes as they ran */
        if (t->code->key[i].va == kva && t->code->key[i].cr3 == kcr3 &&
            (va & (CP_PAGE - 1)) + len <= CP_PAGE) {
            memcpy(buf, t->code->page[i] + (va & (CP_PAGE - 1)), len);
            return true;
        }
    struct gw_paging p = t->paging;
    if (cr3 != CP_CR3_ANY)
        p.cr3 = cr3;
    return gw_read(&m, &p, va, buf, len, &got) == 0 && got == len;
}

/* --- the vCPU's registers --- */

/* --- how this CPU steps --- */

/* sw_trace = auto: whether this CPU delivers MTF exits, measured at the BSP's first entries
 * (-1: not measured, 0: it does not, 1: it does) */
int trace_mtf_delivered = -1;

bool trace_vmx_available(const char **why)
{
    if (vmm_cfg->trace_sw == PTV_SW_TRACE_OFF) {
        *why = "sw_trace = off in the configuration";
        return false;
    }
    if (!trace_vmx_tf() && !vmx_have_mtf()) {
        *why = "the CPU has no monitor trap flag (VMX procbased control bit 27)";
        return false;
    }
    return true;
}

/* the monitor trap flag has three users: the NMI owed from root (v->nmi_stepping, vcpu_loop.c),
 * the tracer's steps where they are MTF steps, and the MTF probe; one VMCS bit for all */
void vcpu_mtf_update(struct vcpu *v)
{
    /* sw_trace = tf steps with #DB exits instead, and a block runs unstepped to its
     * breakpoint (trace_step.c) */
    bool on = v->nmi_stepping ||
              (v->trace_stepping && !trace_vmx_tf() && !v->trace_blk && !v->trace_free) ||
              v->mtf_probe;
    uint32_t proc = vmcs_read32(CPU_BASED_VM_EXEC_CONTROL);
    uint32_t want = on ? proc | CPU_BASED_MONITOR_TRAP_FLAG : proc & ~CPU_BASED_MONITOR_TRAP_FLAG;
    if (want != proc)
        vmcs_write32(CPU_BASED_VM_EXEC_CONTROL, want);
}
