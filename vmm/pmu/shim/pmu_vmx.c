/* SPDX-License-Identifier: MIT */
/*
 * The PMU shim: reads what the CPU offers (CPUID.0AH, IA32_PERF_CAPABILITIES, the VMX controls
 * chosen) and lets vmm/pmu/pmu_policy.c decide.  It decides nothing itself.
 */
#include "pmu/shim/pmu_vmx.h"
#include "pmu/pmu_policy.h"
#include "hw/vmx.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "hw/lapic.h"
#include "base/log.h"
#include "hw/percpu.h"

#define CPUID_1_ECX_PDCM (1u << 15) /* IA32_PERF_CAPABILITIES exists */

/* per CPU, decided at its first use (each CPU reads its own CPUID) */
static struct pmu_decision pmu_dec[PTV_MAX_CPUS];
static bool pmu_decided[PTV_MAX_CPUS];
static bool pmu_pebs[PTV_MAX_CPUS]; /* IA32_PEBS_ENABLE exists (probed once, with the decision) */
static struct pmu_nmi_state pmu_nmi[PTV_MAX_CPUS];
uint64_t pmu_vmx_retire_mask[PTV_MAX_CPUS] = {[0 ... PTV_MAX_CPUS - 1] = PMU_RETIRE_UNDECIDED};

void pmu_vmx_set_guest_global(struct vcpu *v, uint64_t val)
{
    vmcs_write64(GUEST_IA32_PERF_GLOBAL_CTRL, val);
    v->guest_perf_global = val;
}

/* the first use on this CPU: out of line, so that decision() is two loads on every exit */
static __attribute__((noinline, cold)) const struct pmu_decision *decide(unsigned id)
{
    uint32_t max = cpuid_count(0, 0).eax, a[4] = {0};
    if (max >= 0xa) {
        struct cpuid_regs r = cpuid_count(0xa, 0);
        a[0] = r.eax, a[1] = r.ebx, a[2] = r.ecx, a[3] = r.edx;
    }
    uint64_t caps = 0;
    bool caps_ok =
        (cpuid_count(1, 0).ecx & CPUID_1_ECX_PDCM) && !rdmsr_safe(MSR_PMU_PERF_CAPABILITIES, &caps);
    struct pmu_caps c;
    pmu_caps_from_cpuid(max, a, caps_ok, caps, &c);
    pmu_decide(&c, vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL,
               vmx_ctls.entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, &pmu_dec[id]);
    uint64_t pebs;
    pmu_pebs[id] = !rdmsr_safe(MSR_PMU_PEBS_ENABLE, &pebs);
    pmu_decided[id] = true;
    const struct pmu_decision *d = &pmu_dec[id];
    pmu_vmx_retire_mask[id] =
        d->mode == PMU_SWITCHED ? ((1ull << d->caps.n_gp) - 1) | 1ull << GLOBAL_FIXED_SHIFT : 0;
    return d;
}

static inline const struct pmu_decision *decision(void)
{
    unsigned id = this_cpu_id();
    if (__builtin_expect(pmu_decided[id], 1))
        return &pmu_dec[id];
    return decide(id);
}

bool pmu_vmx_global_ctrl_ok(uint64_t val)
{
    const struct pmu_decision *d = decision();
    bool ok = pmu_global_ctrl_write_ok(d, val);
    /* a PMI handler re-enabling its counters has acknowledged its overflows (pmu_observe) */
    if (ok && d->mode == PMU_SWITCHED)
        pmu_observe(&pmu_nmi[this_cpu_id()], rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
    return ok;
}

void pmu_vmx_cpuid_0a(uint32_t r[4])
{
    pmu_cpuid_filter(decision(), 0xa, r);
}

/* the guest's LVT performance-counter entry, read from the real APIC (the guest's) */
static uint32_t lvt_pmc(void)
{
    uint32_t lvt;
    return lapic_read(LAPIC_LVT_PMC, &lvt) ? lvt : LVT_MASKED;
}

/* the local APIC masks the LVT performance-counter entry when it handles a PMI (SDM Vol. 3A
 * "Local Vector Table", mask flag); an emulated PMI does what the APIC would */
static void lvt_pmc_mask(uint32_t lvt)
{
    if (!(lvt & LVT_MASKED))
        (void)lapic_write(LAPIC_LVT_PMC, lvt | LVT_MASKED);
}

bool pmu_vmx_nmi(bool vmm_ours)
{
    const struct pmu_decision *d = decision();
    struct pmu_nmi_verdict out;
    if (d->mode != PMU_SWITCHED)
        return !vmm_ours; /* nothing to read: the guest is owed exactly the NMIs not the VMM's */
    uint64_t evtsel[PMU_MAX_GP];
    for (unsigned i = 0; i < d->caps.n_gp; i++)
        evtsel[i] = rdmsr(MSR_ARCH_PERFMON_EVENTSEL0 + i);
    struct pmu_nmi_view view = {
        .vmm_ours = vmm_ours,
        .status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS),
        .pmi_bits = pmu_pmi_bits(&d->caps, evtsel, rdmsr(MSR_CORE_PERF_FIXED_CTR_CTRL)),
        .lvtpc = lvt_pmc(),
        .guest_debugctl /* root runs with 0: the guest's is the VMCS's (or the VMM's copy) */ =
            vmx_guest_debugctl(),
    };
    pmu_on_nmi(d, &pmu_nmi[this_cpu_id()], &view, &out);
    if (out.clear_global_ctrl)
        pmu_vmx_set_guest_global(this_cpu()->vcpu, 0);
    return out.owe_guest;
}

/* a counter update the CPU refuses loses one count, never the guest */
static void put(uint32_t msr, uint64_t val)
{
    if (wrmsr_safe(msr, val))
        pr_warn_rl("pmu", "WRMSR %#x = %#lx refused: one emulated instruction not counted", msr,
                   val);
}

static uint64_t width_mask(unsigned w)
{
    return w >= 64 ? ~0ull : (1ull << w) - 1;
}

/* the guest's PMI with a fixed vector, from the VMM: a self-IPI through the guest's own
 * (pass-through) APIC, so its IRR/ISR order is the APIC's, as for a PMI of the hardware */
static void self_ipi(uint8_t vector)
{
    uint64_t base = rdmsr(MSR_IA32_APICBASE);
    if (!(base & LAPIC_BASE_EN))
        return;
    if (base & LAPIC_BASE_EXTD) {
        wrmsr(X2APIC_SELF_IPI, vector);
        return;
    }
    volatile uint32_t *apic = lapic_xapic(base);
    for (unsigned i = 0; i < 100000u && (apic[LAPIC_ICR_LO / 4] & ICR_DELIVERY_BUSY); i++)
        pause();
    apic[LAPIC_ICR_LO / 4] =
        ICR_SELF | ICR_LEVEL_ASSERT | vector; /* fixed, self: ICR-high unused */
}

/* the guest counts instructions (emulated_retire below): the state, the policy, the writes */
static __attribute__((noinline)) bool emulated_retire_counting(const struct pmu_decision *d,
                                                               uint64_t global_ctrl)
{
    const struct pmu_caps *c = &d->caps;
    struct pmu_state g = {.global_ctrl = global_ctrl};
    g.status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
    g.fixed_ctrl = rdmsr(MSR_CORE_PERF_FIXED_CTR_CTRL);
    g.debugctl = vmx_guest_debugctl(); /* the VMCS field, or the VMM's copy of it */
    if (pmu_pebs[this_cpu_id()])
        g.pebs_enable = rdmsr(MSR_PMU_PEBS_ENABLE);
    for (unsigned i = 0; i < c->n_gp; i++) {
        g.evtsel[i] = rdmsr(MSR_ARCH_PERFMON_EVENTSEL0 + i);
        g.pmc[i] = rdmsr(MSR_IA32_PERFCTR0 + i);
    }
    if (c->fixed_mask & 1)
        g.fixed[0] = rdmsr(MSR_CORE_PERF_FIXED_CTR0);
    g.lvtpc = lvt_pmc();
    struct pmu_retire out;
    unsigned cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    pmu_emulated_retire(d, &pmu_nmi[this_cpu_id()], &g, cpl, &out);
    for (unsigned i = 0; i < 64; i++) {
        if (!(out.inc & (1ull << i)))
            continue;
        /* the counter's width wraps it (its overflow is in status_set) */
        if (i < c->n_gp) /* full-width where the CPU has it, else bits 31:0 sign-extended */
            put((c->full_width ? MSR_IA32_PMC0 : MSR_IA32_PERFCTR0) + i,
                (g.pmc[i] + 1) & width_mask(c->gp_width));
        else if (i == GLOBAL_FIXED_SHIFT)
            put(MSR_CORE_PERF_FIXED_CTR0, (g.fixed[0] + 1) & width_mask(c->fixed_width));
    }
    if (out.status_set) {
        put(MSR_CORE_PERF_GLOBAL_STATUS_SET, out.status_set);
        /* a root NMI between the policy's record and the write may have overwritten it */
        pmu_nmi[this_cpu_id()].seen |= out.status_set;
    }
    if (out.deliver == 1)
        self_ipi((uint8_t)LVT_VECTOR(g.lvtpc));
    if (out.deliver)
        lvt_pmc_mask(g.lvtpc);
    return out.deliver == 2; /* an NMI: the caller owes it to the guest */
}

/* runs at every exit that completes a guest instruction: with no counter of the guest enabled
 * (the common case) one VMREAD and no more -- the state above (~0.7 KiB zeroed) is built only
 * when a counter counts */
bool pmu_vmx_emulated_retire(void)
{
    const struct pmu_decision *d = decision();
    if (d->mode != PMU_SWITCHED)
        return false;
    const struct pmu_caps *c = &d->caps;
    uint64_t global_ctrl = vmcs_read64(GUEST_IA32_PERF_GLOBAL_CTRL);
    /* only the counters that can count instructions: general ones, IA32_FIXED_CTR0 */
    if (!(global_ctrl & (((1ull << c->n_gp) - 1) | 1ull << GLOBAL_FIXED_SHIFT)))
        return false;
    return emulated_retire_counting(d, global_ctrl);
}
