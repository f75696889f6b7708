/* SPDX-License-Identifier: MIT */
/*
 * RDMSR/WRMSR exits and the MSR bitmap (pt-facts G.7).  Everything passes
 * through except: the RTIT MSRs (virtualized by the PT engine; #GP when the
 * guest has no PT), IA32_XSS (never the PT state component: guest_policy.h) and
 * the VMX capability MSRs (VMX is hidden: #GP).  MSRs
 * outside the bitmap ranges always exit: they are tried on the real CPU and
 * a fault becomes the guest's #GP.
 */
#include "vmx/vcpu.h"
#include "vmx/exits.h"
#include "vmx/vmx_cpu.h"
#include "cpu.h"
#include "log.h"
#include "palloc.h"
#include "pt/pt_msr.h"
#include "pt/rtit.h"
#include "vmx/pt_vmx.h"
#include "vmx/guest_policy.h"
#include "vmx/vmcs.h"

static void intercept(uint8_t *bm, uint32_t msr)
{
    unsigned off = msr >= 0xc0000000u ? 0x400 : 0;
    msr &= 0x1fff;
    bm[off + msr / 8] |= 1u << (msr % 8);         /* read */
    bm[0x800 + off + msr / 8] |= 1u << (msr % 8); /* write */
}

static uint64_t host_xss; /* CPUID.(0xD,1):EDX:ECX: the IA32_XSS bits this CPU supports */

int vmx_msr_bitmap_setup(struct vcpu *v)
{
    struct cpuid_regs r = cpuid_count(0xd, 1);
    host_xss = (uint64_t)r.edx << 32 | r.ecx;
    v->msr_bitmap = palloc_page(&v->msr_bitmap_pa);
    if (!v->msr_bitmap)
        return -1;
    /* every MSR the policy does not pass through exits (the bitmap covers 0-0x1fff) */
    for (uint32_t m = 0; m < 0x2000; m++)
        if (msr_policy(m) != MSR_PASS_THROUGH)
            intercept(v->msr_bitmap, m);
    return 0;
}

static enum exit_action msr_access(struct vcpu *v, bool write)
{
    uint32_t msr = (uint32_t)v->regs.gpr[GPR_RCX];
    uint64_t val = (v->regs.gpr[GPR_RDX] << 32) | (uint32_t)v->regs.gpr[GPR_RAX];
    enum msr_verdict verdict = msr_policy(msr);
    if (verdict == MSR_XSS && write && !xss_policy(val, host_xss)) {
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    switch (verdict) {
    case MSR_PT_ENGINE: {
        struct pt_msr_result res;
        enum pt_msr_status st =
            write ? pt_ctrl_wrmsr(&v->pt, msr, val, &res) : pt_ctrl_rdmsr(&v->pt, msr, &val, &res);
        pt_vmx_log(v);
        if (st != PT_MSR_OK) {
            pr_debug("pt", "guest %s MSR %#x: #GP (%s)", write ? "WRMSR" : "RDMSR", msr,
                     res.reason);
            vcpu_inject_gp(v);
            return EXIT_INJECT;
        }
        break;
    }
    case MSR_GP:
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    case MSR_PERF_GLOBAL:
        if (vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) {
            if (!write) {
                val = vmcs_read64(GUEST_IA32_PERF_GLOBAL_CTRL);
                break;
            }
            /* let the CPU judge the value, then keep it for the next entry */
            int bad = wrmsr_safe(msr, val);
            wrmsr(msr, 0);
            if (bad) {
                vcpu_inject_gp(v);
                return EXIT_INJECT;
            }
            vmcs_write64(GUEST_IA32_PERF_GLOBAL_CTRL, val);
            break;
        }
        /* no load controls: the guest owns the real MSR */
        __attribute__((fallthrough));
    case MSR_XSS: /* checked above: an allowed value goes to the real MSR */
    case MSR_PASS_THROUGH:
        if (write ? wrmsr_safe(msr, val) : rdmsr_safe(msr, &val)) {
            vcpu_inject_gp(v);
            return EXIT_INJECT;
        }
        break;
    }
    if (!write) {
        v->regs.gpr[GPR_RAX] = (uint32_t)val;
        v->regs.gpr[GPR_RDX] = val >> 32;
    }
    return EXIT_RESUME_SKIP_INSN;
}

enum exit_action handle_msr_read(struct vcpu *v, const struct vmexit *e)
{
    return msr_access(v, false);
}

enum exit_action handle_msr_write(struct vcpu *v, const struct vmexit *e)
{
    return msr_access(v, true);
}
