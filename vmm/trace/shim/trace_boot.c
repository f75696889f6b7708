/* SPDX-License-Identifier: MIT */
/*
 * How the software tracer starts, at the top of its shim: the MTF probe at the BSP's first
 * entries (sw_trace = auto), the loader's hand-off, and the boot window (trace_boot = N) it
 * opens, with the dump its close sends (dump_on = boot).
 */
#include "trace/shim/trace_vmx.h"
#include "trace/shim/trace_vcpu.h"
#include "trace/shim/trace_dump.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "hw/vmx.h"
#include "vmx/vmx_cpu.h"
#include "base/log.h"
#include "base/vmm_state.h"
#include "trace/treq.h"
#include <ptv/vmcall.h>

/* the boot window closed at its budget: dump it where the configuration asks */
static void boot_window_closed(struct vcpu *v)
{
    if (vmm_cfg->dump_on & PTV_DUMP_BOOT)
        trace_dump_start(v, FRAME_REASON_BOOT);
}

void trace_vmx_boot(struct vcpu *v)
{
    uint32_t src;
    if (!vmm_cfg->trace_boot)
        return;
    const struct trace_req rq = {0}; /* the configured filters */
    int rc = trace_vmx_start(v, &rq, trace_vmx_hw_source(v) ? 0 : vmm_cfg->trace_boot, &src);
    if (rc)
        pr_warn("trace", "trace_boot = %lu: no boot trace (error %d)", vmm_cfg->trace_boot, rc);
    else if (src == PTV_TRACE_SRC_SOFTWARE)
        v->trace->closed_hook = boot_window_closed;
    if (!rc)
        pr_info("trace",
                "trace_boot: tracing the guest OS's first %lu instructions from the "
                "loader's hand-off (%s)",
                vmm_cfg->trace_boot,
                src == PTV_TRACE_SRC_HARDWARE ? "Intel PT"
                : trace_vmx_tf()              ? "software tracer, trap-flag steps"
                                              : "software tracer, MTF steps");
}

/*
 * The MTF probe (sw_trace = auto).  Some CPUs offer the monitor trap flag and never deliver
 * it (Bochs 2.7: cpu/todo "MTF is not implemented yet"); the tracer then steps with the trap
 * flag, as sw_trace = tf (what that costs the guest: include/ptv/config.h).  Measured, never
 * assumed: MTF is armed for the BSP's first entries; an MTF exit proves it works, an exit at
 * another RIP than the entry's (an instruction completed without an MTF exit) proves it does
 * not.  An exit at the entry's RIP (the first instruction exited itself) tries again.
 */
#define PROBE_TRIES 64

void trace_vmx_probe_start(struct vcpu *v)
{
    if (vmm_cfg->trace_sw != PTV_SW_TRACE_AUTO || !vmx_have_mtf()) {
        if (vmm_cfg->trace_sw == PTV_SW_TRACE_AUTO) {
            trace_mtf_delivered = 0; /* no MTF at all: the trap flag is the only way */
            pr_info("trace", "this CPU has no monitor trap flag: the software tracer steps with "
                             "the trap flag (sw_trace = auto)");
        }
        return;
    }
    v->mtf_probe = true;
    v->probe_rip = vmcs_readl(GUEST_RIP);
    vcpu_mtf_update(v);
}

void trace_vmx_probe(struct vcpu *v, uint32_t reason, uint64_t exit_rip)
{
    if (reason == EXIT_REASON_MONITOR_TRAP_FLAG)
        trace_mtf_delivered = 1;
    else if (exit_rip != v->probe_rip)
        trace_mtf_delivered = 0;
    else if (++v->probe_tries < PROBE_TRIES) {
        v->probe_rip = vmcs_readl(GUEST_RIP); /* where the next entry resumes */
        return;
    }
    v->mtf_probe = false;
    vcpu_mtf_update(v);
    if (trace_mtf_delivered == 0)
        pr_info("trace",
                "this CPU offers the monitor trap flag but delivered no MTF exit (%s at "
                "%#lx): the software tracer steps with the trap flag (sw_trace = auto)",
                vmx_exit_reason_name(reason), exit_rip);
    if (v->boot_pending) { /* the loader handed off while the probe ran */
        v->boot_pending = false;
        trace_vmx_boot(v);
    }
}

/* BOOT_HANDOFF: the loader starts the guest OS next; trace_boot = N opens its window here */
int trace_vmx_handoff(struct vcpu *v)
{
    static bool done;
    if (__atomic_exchange_n(&done, true, __ATOMIC_SEQ_CST))
        return PTV_VMCALL_EBUSY;
    if (v->mtf_probe)
        v->boot_pending = true; /* opens when the probe has decided how to step */
    else
        trace_vmx_boot(v);
    return 0;
}
