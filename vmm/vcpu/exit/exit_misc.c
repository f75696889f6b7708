/* SPDX-License-Identifier: MIT */
/* XSETBV, INVD, WBINVD, GETSEC and guest VMX instructions (pt-facts G.5); the exits that end a
 * wait: the VMX-preemption timer, the NMI window, the monitor trap flag. */
#include "vmx/vcpu.h"
#include "hw/percpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "emul/guest_policy.h"
#include "trace/shim/trace_dump.h"

/* SDM Vol. 1 13.3 / XSETBV: checks in guest_policy.c; XCR0 is not switched by
 * VMX, so executing XSETBV here sets the guest's XCR0 */
enum exit_action handle_xsetbv(struct vcpu *v, const struct vmexit *e)
{
    uint32_t index = (uint32_t)v->regs.gpr[GPR_RCX];
    uint64_t val = (v->regs.gpr[GPR_RDX] << 32) | (uint32_t)v->regs.gpr[GPR_RAX];
    struct cpuid_regs d = cpuid_count(0xd, 0);
    switch (xsetbv_policy(index, val, ((uint64_t)d.edx << 32) | d.eax, vcpu_guest_cr4(v))) {
    case XSETBV_UD:
        vcpu_inject_ud(v);
        return EXIT_INJECT;
    case XSETBV_GP:
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    case XSETBV_OK:
        break;
    }
    if (xsetbv_safe(index, val)) {
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    return EXIT_RESUME_SKIP_INSN;
}

/* INVD would discard the VMM's dirty lines too: emulate it as WBINVD (as Xen does) */
enum exit_action handle_invd_wbinvd(struct vcpu *v, const struct vmexit *e)
{
    wbinvd();
    return EXIT_RESUME_SKIP_INSN;
}

/* VMX instructions and GETSEC: the guest was told there is no VMX / SMX */
enum exit_action handle_ud(struct vcpu *v, const struct vmexit *e)
{
    vcpu_inject_ud(v);
    return EXIT_INJECT;
}

/* the VMX-preemption timer paces a trace dump's slices (trace_dump.c) */
enum exit_action handle_preemption_timer(struct vcpu *v, const struct vmexit *e)
{
    (void)e;
    trace_dump_timer_exit(v);
    return EXIT_RESUME;
}

/* NMI window: the blocking of an NMI owed from root ended (vcpu_loop.c armed it); the next
 * entry injects it */
enum exit_action handle_nmi_window(struct vcpu *v, const struct vmexit *e)
{
    (void)e;
    vcpu_nmi_window(v, false);
    return EXIT_RESUME;
}

/* monitor trap flag: armed to deliver an NMI owed from root where the CPU has no NMI
 * window (vcpu_loop.c), or the software tracer's step; the next entry decides again */
enum exit_action handle_mtf(struct vcpu *v, const struct vmexit *e)
{
    v->trace_mtf_seen = true; /* one instruction or event ran (trace_step.c) */
    return EXIT_RESUME;
}
