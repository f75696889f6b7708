// SPDX-License-Identifier: MIT
/*
 * The LBR part of pt-selftest.efi (docs/lbr.md "On-box self-test"): with the guest's
 * LBR on, run the known branch sequence of lbr_seq.S (three VM exits inside it), turn LBR off,
 * read the stack and let lbrc_check() (lbr_check.c, host-tested on the LBR model) decide:
 * exactly the five branches in order, nothing recorded for the exits, no VMM address, LBR_TOS
 * moved by five.  Model-specific LBR and architectural LBR each where the guest is shown one;
 * SKIP with the reason where it is not (Bochs: LBR_FMT 0, no leaf 1CH), never PASS.
 *
 * Every MSR access outside the sequence goes through the trap catcher (x86.h); inside it only
 * MSRs that just read or wrote without a fault are touched.  The guest's DEBUGCTL, LBR_SELECT
 * and LBR_CTL are restored afterwards.
 */
#include <efi.h>

#include "ptv/vmcall.h"

#include "lbr_check.h"
#include "lbr_selftest.h"
#include "libtest.h"
#include "x86.h"

void ptv_lbr_seq(uint32_t msr, uint64_t on, uint64_t off, uint32_t exit_msr);
void ptv_lbr_seq_addrs(uint64_t a[13]);

#define MSR_IA32_TSC                                                                               \
    0x10 /* readable everywhere: the RDMSR of the sequence where PERF_CAPS is not */

struct ctx {
    struct lbrc_seq q;
    uint64_t vmm_base, vmm_size;
    uint32_t exit_msr;
};

static void seq_of(struct ctx *c)
{
    uint64_t a[13];
    ptv_lbr_seq_addrs(a);
    c->q.n = 5;
    for (unsigned i = 0; i < 5; i++) {
        c->q.from[i] = a[2 * i];
        c->q.to[i] = a[2 * i + 1];
    }
    static const char *const names[3] = {"CPUID", "VMCALL", "RDMSR"};
    c->q.nexits = 3;
    for (unsigned x = 0; x < 3; x++) {
        c->q.exit[x] = a[10 + x];
        c->q.exit_name[x] = names[x];
    }
}

/* zero n MSRs from base; false (with the MSR in *bad) if one faults */
static bool zero_msrs(uint32_t base, unsigned n, uint32_t *bad)
{
    for (unsigned i = 0; i < n; i++)
        if (wrmsr_trap(base + i, 0) != TRAP_NONE) {
            *bad = base + i;
            return false;
        }
    return true;
}

static bool read_msrs(uint32_t base, unsigned n, uint64_t *v, uint32_t *bad)
{
    for (unsigned i = 0; i < n; i++)
        if (rdmsr_trap(base + i, &v[i]) != TRAP_NONE) {
            *bad = base + i;
            return false;
        }
    return true;
}

static void legacy_run(const struct ctx *c, const struct lbrc_layout *l)
{
    static struct lbrc_stack s;
    uint64_t debugctl = 0, select = 0;
    uint32_t bad = 0;
    char why[96];
    s = (struct lbrc_stack){.arch = false, .nr = l->nr, .fmt = l->fmt};
    if (!report(rdmsr_trap(LBRC_MSR_DEBUGCTL, &debugctl) == TRAP_NONE &&
                    rdmsr_trap(LBRC_MSR_LBR_SELECT, &select) == TRAP_NONE,
                "lbr: legacy: read DEBUGCTL %#lx, LBR_SELECT %#lx", (unsigned long)debugctl,
                (unsigned long)select))
        return;
    /* record every branch type at every CPL (a set LBR_SELECT bit suppresses: SDM Vol. 3B
     * 17.9.2), start from an empty stack so any other record shows */
    bool ok = wrmsr_trap(LBRC_MSR_LBR_SELECT, 0) == TRAP_NONE && zero_msrs(l->from, l->nr, &bad) &&
              zero_msrs(l->to, l->nr, &bad) && (!l->info || zero_msrs(l->info, l->nr, &bad)) &&
              rdmsr_trap(LBRC_MSR_LBR_TOS, &s.tos_before) == TRAP_NONE;
    if (!report(ok, "lbr: legacy: clear the stack (MSR %#x)", bad))
        return;
    uint64_t off = debugctl & ~LBRC_DEBUGCTL_LBR;
    ptv_lbr_seq(LBRC_MSR_DEBUGCTL, off | LBRC_DEBUGCTL_LBR, off, c->exit_msr);
    ok = rdmsr_trap(LBRC_MSR_LBR_TOS, &s.tos) == TRAP_NONE &&
         read_msrs(l->from, l->nr, s.from, &bad) && read_msrs(l->to, l->nr, s.to, &bad);
    (void)wrmsr_trap(LBRC_MSR_LBR_SELECT, select);
    (void)wrmsr_trap(LBRC_MSR_DEBUGCTL, debugctl);
    if (!report(ok, "lbr: legacy: read the stack back (MSR %#x)", bad))
        return;
    bool pass = lbrc_check(&s, &c->q, c->vmm_base, c->vmm_size, why, sizeof(why));
    report(pass, "lbr: legacy: %s", why);
}

static void arch_run(const struct ctx *c, uint64_t ctl)
{
    static struct lbrc_stack s;
    uint64_t old = 0, depth = 0;
    uint32_t bad = 0;
    char why[96];
    if (!report(rdmsr_trap(LBRC_MSR_LBR_CTL, &old) == TRAP_NONE &&
                    rdmsr_trap(LBRC_MSR_LBR_DEPTH, &depth) == TRAP_NONE && depth > 5 &&
                    depth <= LBRC_MAX,
                "lbr: arch: read LBR_CTL %#lx, LBR_DEPTH %lu", (unsigned long)old,
                (unsigned long)depth))
        return;
    s = (struct lbrc_stack){.arch = true, .nr = (unsigned)depth};
    /* LBR off, then a write of IA32_LBR_DEPTH clears every entry (pt-facts F.2) */
    if (!report(wrmsr_trap(LBRC_MSR_LBR_CTL, 0) == TRAP_NONE &&
                    wrmsr_trap(LBRC_MSR_LBR_DEPTH, depth) == TRAP_NONE,
                "lbr: arch: clear the stack (LBR_DEPTH = %lu)", (unsigned long)depth))
        return;
    ptv_lbr_seq(LBRC_MSR_LBR_CTL, ctl, 0, c->exit_msr);
    bool ok = read_msrs(LBRC_MSR_ARCH_FROM_0, s.nr, s.from, &bad) &&
              read_msrs(LBRC_MSR_ARCH_TO_0, s.nr, s.to, &bad);
    (void)wrmsr_trap(LBRC_MSR_LBR_CTL, old);
    if (!report(ok, "lbr: arch: read the stack back (MSR %#x)", bad))
        return;
    bool pass = lbrc_check(&s, &c->q, c->vmm_base, c->vmm_size, why, sizeof(why));
    report(pass, "lbr: arch: %s", why);
}

void lbr_selftest(void)
{
    static struct ctx c;
    struct lbrc_view v = {0};
    char why[96];
    v.max_leaf = cpuid(0, 0).eax;
    struct cpuid_regs c1 = cpuid(1, 0);
    v.cpuid1_eax = c1.eax;
    v.cpuid1_ecx = c1.ecx;
    if (v.max_leaf >= 7)
        v.cpuid7_edx = cpuid(7, 0).edx;
    if (v.max_leaf >= 0x1c) {
        struct cpuid_regs l = cpuid(0x1c, 0);
        v.leaf1c[0] = l.eax, v.leaf1c[1] = l.ebx, v.leaf1c[2] = l.ecx;
    }
    v.perf_caps_ok = rdmsr_trap(LBRC_MSR_PERF_CAPS, &v.perf_caps) == TRAP_NONE;
    report_info("lbr: CPUID.1 %#x/%#x, 7:EDX %#x, 1CH %#x %#x %#x, PERF_CAPS %s%#lx", c1.eax,
                c1.ecx, v.cpuid7_edx, v.leaf1c[0], v.leaf1c[1], v.leaf1c[2],
                v.perf_caps_ok ? "" : "#GP ", (unsigned long)v.perf_caps);

    const struct lbrc_layout *lay;
    uint64_t ctl;
    char lwhy[96];
    enum lbrc_plan lp = lbrc_legacy_plan(&v, &lay, lwhy, sizeof(lwhy));
    enum lbrc_plan ap = lbrc_arch_plan(&v, &ctl, why, sizeof(why));
    if (lp == LBRC_SKIP)
        report_skip("lbr: legacy: %s", lwhy);
    else if (lp == LBRC_FAIL)
        report(false, "lbr: legacy: %s", lwhy);
    if (ap == LBRC_SKIP)
        report_skip("lbr: arch: %s", why);
    else if (ap == LBRC_FAIL)
        report(false, "lbr: arch: %s", why);
    if (lp != LBRC_RUN && ap != LBRC_RUN)
        return;

    struct vmcall_regs r = {.rax = PTV_VMCALL_VMM_RANGE};
    if (!report(vmcall_trap(&r) == TRAP_NONE && r.rax == PTV_VMCALL_OK && r.rcx,
                "lbr: VMM range %#lx +%#lx", (unsigned long)r.rbx, (unsigned long)r.rcx))
        return;
    c.vmm_base = r.rbx, c.vmm_size = r.rcx;
    /* an MSR exit inside the sequence: IA32_PERF_CAPABILITIES always exits under ptvisor */
    c.exit_msr = v.perf_caps_ok ? LBRC_MSR_PERF_CAPS : MSR_IA32_TSC;
    seq_of(&c);
    if (lp == LBRC_RUN) {
        report_info("lbr: legacy: %s", lwhy);
        legacy_run(&c, lay);
    }
    if (ap == LBRC_RUN) {
        report_info("lbr: %s", why);
        arch_run(&c, ctl);
    }
    struct vmcall_regs k = {.rax = PTV_VMCALL_CHECK_CANARY};
    report(vmcall_trap(&k) == TRAP_NONE && k.rbx == 1, "lbr: VMM canary intact");
}
