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

/* the vCPU as the stepping logic sees it */
void trace_observe(struct swtrace_cpu *c)
{
    uint32_t cs_ar = vmcs_read32(GUEST_CS_AR_BYTES);
    bool lma = vmcs_read32(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE;
    c->rip = vmcs_readl(GUEST_RIP);
    c->rsp = vmcs_readl(GUEST_RSP);
    c->cs_sel = vmcs_read16(GUEST_CS_SELECTOR);
    /* 64-bit code ignores the CS base (linear IP = RIP, as swtrace's lin_of) */
    c->cs_base = lma && (cs_ar & VMX_AR_L) ? 0 : vmcs_readl(GUEST_CS_BASE);
    c->ctx.cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    c->ctx.cr3 = vmcs_readl(GUEST_CR3);
    c->ctx.cs = lma && (cs_ar & VMX_AR_L) ? X86_CODE64
                : (cs_ar & VMX_AR_DB)     ? X86_CODE32
                                          : X86_CODE16;
    c->paging = (struct gw_paging){
        .cr0 = vmcs_readl(GUEST_CR0),
        .cr3 = c->ctx.cr3,
        .cr4 = vmcs_readl(GUEST_CR4),
        .efer = lma ? 1ull << 10 : 0,
    };
    c->tsc = rdtsc();
    c->rf = false;
}

/* --- how this CPU steps --- */

/* sw_trace = auto: whether this CPU delivers MTF exits, measured at the BSP's first entries
 * (-1: not measured, 0: it does not, 1: it does) */
int trace_mtf_delivered = -1;

bool trace_have_mtf(void)
{
    return vmx_caps.proc >> 32 & CPU_BASED_MONITOR_TRAP_FLAG;
}

bool trace_vmx_available(const char **why)
{
    if (vmm_cfg->trace_sw == PTV_SW_TRACE_OFF) {
        *why = "sw_trace = off in the configuration";
        return false;
    }
    if (!trace_vmx_tf() && !trace_have_mtf()) {
        *why = "the CPU has no monitor trap flag (VMX procbased control bit 27)";
        return false;
    }
    return true;
}

/*
 * sw_trace = tf (include/ptv/config.h): the step is the trap flag's #DB, caught by the
 * exception bitmap (vcpu_mtf_update).  TF is set before every entry (POPF / IRET may have
 * cleared it), and the single-step bit a VM exit may leave in the pending debug exceptions
 * (an emulated instruction retired with TF = 1; Bochs 2.7 saves it at every exit) is dropped:
 * the tracer counts an emulated instruction itself, a second #DB before the next instruction
 * would read as a step that did not move -- except where VM entry needs it (MOV SS blocking,
 * HLT), and an STI shadow the step's #DB ended is ended (tf_step_arm: SDM Vol. 3C 27.3.1.5).
 */
bool trace_vmx_tf(void)
{
    return vmm_cfg->trace_sw == PTV_SW_TRACE_TF ||
           (vmm_cfg->trace_sw == PTV_SW_TRACE_AUTO && trace_mtf_delivered == 0);
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
