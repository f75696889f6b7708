/* SPDX-License-Identifier: MIT */
/*
 * The LBR shim: reads what the CPU offers, lets vmm/lbr/lbr_policy.c decide, and executes the
 * decision (VMX controls, GUEST_IA32_LBR_CTL, MSR bitmap bits, the few MSR answers, CPUID).
 * It decides nothing itself and has no code on the VM-exit / VM-entry path.
 */
#include "lbr/shim/lbr_vmx.h"
#include "lbr/lbr_policy.h"
#include "lbr/lbr_report.h"
#include "vmx/vcpu.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "hw/percpu.h"

#define MSR_IA32_MISC_ENABLE 0x1a0

static struct lbr_decision lbr_dec; /* decided by the BSP before any guest code ran */
static bool lbr_decided;

/* The caller's IA32_DEBUGCTL / IA32_LBR_CTL, taken at VMM entry (lbr_vmx_root_enter): the
 * guest's first values.  *_ok: read (the MSR exists here). */
static struct lbr_caller {
    bool saved, dbg_ok, ctl_ok;
    uint64_t dbg, ctl;
} lbr_caller[PTV_MAX_CPUS];

static bool cpu_has_arch_lbr(void)
{
    return cpuid_count(0, 0).eax >= 7 && (cpuid_count(7, 0).edx & CPUID_7_EDX_ARCH_LBR);
}

void lbr_vmx_root_enter(void)
{
    struct lbr_caller *c = &lbr_caller[this_cpu_id()];
    *c = (struct lbr_caller){.saved = true};
    /* both are cleared as the VM exit and its "clear IA32_LBR_CTL" control would: from here
     * on the VMM's set-up records nothing into the stack (or BTS buffer) the guest owns */
    c->dbg_ok = !rdmsr_safe(MSR_IA32_DEBUGCTLMSR, &c->dbg); /* Bochs may #GP */
    if (c->dbg_ok && c->dbg && wrmsr_safe(MSR_IA32_DEBUGCTLMSR, 0))
        c->dbg_ok = false; /* cannot happen (0 is always valid): keep the old path */
    if (cpu_has_arch_lbr()) {
        c->ctl_ok = !rdmsr_safe(MSR_ARCH_LBR_CTL, &c->ctl);
        if (c->ctl_ok && c->ctl && wrmsr_safe(MSR_ARCH_LBR_CTL, 0))
            c->ctl_ok = false;
    }
}

void lbr_vmx_root_leave(void)
{
    struct lbr_caller *c = &lbr_caller[this_cpu_id()];
    if (!c->saved)
        return;
    /* the values were the CPU's own a moment ago: a refusal cannot happen, but is said */
    if (c->ctl_ok && c->ctl && wrmsr_safe(MSR_ARCH_LBR_CTL, c->ctl))
        pr_warn("lbr", "the caller's IA32_LBR_CTL %#lx could not be restored", c->ctl);
    if (c->dbg_ok && c->dbg && wrmsr_safe(MSR_IA32_DEBUGCTLMSR, c->dbg))
        pr_warn("lbr", "the caller's IA32_DEBUGCTL %#lx could not be restored", c->dbg);
    c->saved = false;
}

static void lbr_read_host(struct lbr_host *h)
{
    struct cpuid_regs r = cpuid_count(0, 0);
    h->max_leaf = r.eax;
    r = cpuid_count(1, 0);
    uint32_t fam = (r.eax >> 8) & 0xf, model = (r.eax >> 4) & 0xf;
    if (fam == 0xf)
        fam += (r.eax >> 20) & 0xff;
    if (fam == 6 || fam >= 0xf)
        model |= ((r.eax >> 16) & 0xf) << 4;
    h->family = fam;
    h->model = model;
    h->cpuid1_ecx = r.ecx;
    h->cpuid1_edx = r.edx;
    if (h->max_leaf >= 7) {
        r = cpuid_count(7, 0);
        h->cpuid7_ebx = r.ebx;
        h->cpuid7_ecx = r.ecx;
        h->cpuid7_edx = r.edx;
    }
    if (h->max_leaf >= 0xa)
        h->pmu_version = (uint8_t)cpuid_count(0xa, 0).eax;
    if (h->max_leaf >= 0xd) {
        r = cpuid_count(0xd, 1);
        h->xss_supported = (uint64_t)r.edx << 32 | r.ecx;
    }
    if (h->max_leaf >= 0x1c) {
        r = cpuid_count(0x1c, 0);
        h->leaf1c[0] = r.eax;
        h->leaf1c[1] = r.ebx;
        h->leaf1c[2] = r.ecx;
    }
    /* Bochs #GPs here (docs TEST-VEHICLES): a fault is an answer, "none" */
    h->perf_caps_ok = !rdmsr_safe(MSR_IA32_PERF_CAPABILITIES, &h->perf_caps);
    h->misc_enable_ok = !rdmsr_safe(MSR_IA32_MISC_ENABLE, &h->misc_enable);
    h->exit_ctls = vmx_ctls.exit;
    h->entry_ctls = vmx_ctls.entry;
    h->exit_allowed1 = (uint32_t)(vmx_caps.exit >> 32);
    h->entry_allowed1 = (uint32_t)(vmx_caps.entry >> 32);
}

void lbr_vmx_setup(struct vcpu *v)
{
    if (!lbr_decided) {
        struct lbr_host h = {0};
        lbr_read_host(&h);
        lbr_decide(&h, &lbr_dec);
        lbr_decided = true;
        pr_info("lbr", "%s; per VM exit: 0 VMM instructions, 0 LBR MSR accesses", lbr_dec.reason);
    }
    vmx_ctls.exit |= lbr_dec.exit_ctls;
    vmx_ctls.entry |= lbr_dec.entry_ctls;
    const struct lbr_caller *c = &lbr_caller[this_cpu_id()];
    if (c->saved && c->dbg_ok) /* the caller's DEBUGCTL, cleared in root since VMM entry */
        vmcs_write64(GUEST_IA32_DEBUGCTL, c->dbg);
    uint64_t ctl = 0;
    if (lbr_dec.arch) {
        /* the caller's IA32_LBR_CTL becomes the guest's; a value the CPU would refuse at VM
         * entry (it cannot be: the CPU holds it) is replaced by 0 */
        if (c->saved && c->ctl_ok)
            ctl = c->ctl;
        else if (rdmsr_safe(MSR_ARCH_LBR_CTL, &ctl))
            ctl = 0;
        if (!arch_lbr_ctl_ok(lbr_dec.leaf1c, ctl))
            ctl = 0;
        vmcs_write64(GUEST_IA32_LBR_CTL, ctl);
    } else if (lbr_dec.arch_present && !rdmsr_safe(MSR_ARCH_LBR_CTL, &ctl) && ctl &&
               wrmsr_safe(MSR_ARCH_LBR_CTL, 0)) {
        /* hidden: IA32_LBR_CTL is cleared once, here (no clear control at exits), so
         * nobody records any more, root included */
        pr_warn("lbr", "cpu%u: IA32_LBR_CTL %#lx could not be cleared", v->id, ctl);
    }
}

bool lbr_vmx_intercepts(uint32_t msr)
{
    return lbr_msr_intercepted(&lbr_dec, msr);
}

/* an MSR the policy answers (PERF_CAPABILITIES, a hidden stack, a virtual DEBUGCTL) */
static __attribute__((noinline)) int lbr_msr_exit(struct vcpu *v, uint32_t msr, bool write,
                                                  uint64_t val)
{
    const char *why;
    uint64_t debugctl = 0;
    bool dbg = msr == MSR_IA32_DEBUGCTLMSR; /* only intercepted without the debug controls */
    if (dbg)
        debugctl = vmcs_read64(GUEST_IA32_DEBUGCTL); /* the VMM's copy, never loaded */
    switch (lbr_msr_access(&lbr_dec, &debugctl, msr, write, &val, &why)) {
    case LBR_NOT_MINE:
        return -1;
    case LBR_GP:
        pr_debug("lbr", "guest %s MSR %#x: #GP (%s)", write ? "WRMSR" : "RDMSR", msr, why);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    case LBR_OK:
        break;
    }
    if (dbg && write)
        vmcs_write64(GUEST_IA32_DEBUGCTL, debugctl);
    if (!write) {
        v->regs.gpr[GPR_RAX] = (uint32_t)val;
        v->regs.gpr[GPR_RDX] = val >> 32;
    }
    return EXIT_RESUME_SKIP_INSN;
}

int lbr_vmx_msr(struct vcpu *v, uint32_t msr, bool write, uint64_t val)
{
    return lbr_msr_intercepted(&lbr_dec, msr) ? lbr_msr_exit(v, msr, write, val) : -1;
}

bool lbr_vmx_root_check(bool *holds)
{
    struct lbr_root_view r = {0};
    r.debugctl_ok = !rdmsr_safe(MSR_IA32_DEBUGCTLMSR, &r.debugctl); /* Bochs may #GP */
    if (lbr_dec.arch_present)
        r.lbr_ctl_ok = !rdmsr_safe(MSR_ARCH_LBR_CTL, &r.lbr_ctl);
    return lbr_root_check(&lbr_dec, &r, holds);
}

static bool crash_rdmsr(void *ctx, uint32_t msr, uint64_t *val)
{
    (void)ctx;
    return !rdmsr_safe(msr, val);
}

/* Read after the exit that stopped the guest: IA32_DEBUGCTL (and IA32_LBR_CTL where shown) are
 * 0 in root, so the stack MSRs still hold the guest's last records (lbr_report.c); the VMREADs
 * may fail (no current VMCS in a panic at set-up) and say so instead of panicking again. */
size_t lbr_vmx_crash_text(char *buf, size_t cap)
{
    struct lbr_crash_view v = {.rdmsr = crash_rdmsr};
    v.debugctl_ok = !__vmread(GUEST_IA32_DEBUGCTL, &v.debugctl);
    if (lbr_decided && lbr_dec.arch)
        v.lbr_ctl_ok = !__vmread(GUEST_IA32_LBR_CTL, &v.lbr_ctl);
    return lbr_crash_text(lbr_decided ? &lbr_dec : NULL, &v, buf, cap);
}

uint64_t lbr_vmx_xss(uint64_t host_xss)
{
    return lbr_xss_filter(&lbr_dec, host_xss);
}

void lbr_vmx_cpuid_leaf(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    lbr_cpuid_filter(&lbr_dec, leaf, sub, r);
}
