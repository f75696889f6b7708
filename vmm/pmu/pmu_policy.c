/* SPDX-License-Identifier: MIT */
/* Guest PMU policy (see pmu_policy.h; docs/lbr.md "PMU"). */
#include "pmu/pmu_policy.h"
#include "lib/fmt.h"

#define BIT(n) (1ull << (n))

static uint64_t mask_bits(unsigned width)
{
    return width >= 64 ? ~0ull : BIT(width) - 1;
}

void pmu_caps_from_cpuid(uint32_t max_leaf, const uint32_t a[4], bool perf_caps_ok,
                         uint64_t perf_caps, struct pmu_caps *c)
{
    *c = (struct pmu_caps){0};
    if (max_leaf < 0xa)
        return;
    /* SDM Vol. 3B 20.2.1 / CPUID leaf 0AH: EAX[7:0] version, [15:8] counters, [23:16] width */
    c->version = (uint8_t)a[0];
    if (!c->version)
        return;
    unsigned n = (a[0] >> 8) & 0xff;
    c->n_gp = (uint8_t)(n > PMU_MAX_GP ? PMU_MAX_GP : n);
    c->gp_width = (uint8_t)(a[0] >> 16);
    if (c->version >= 2) {
        /* 20.2.2: EDX[4:0] contiguous fixed counters, EDX[12:5] their width (v2+) */
        unsigned nf = a[3] & 0x1f;
        c->fixed_width = (uint8_t)(a[3] >> 5);
        c->fixed_mask = (uint32_t)mask_bits(nf > PMU_MAX_FIXED ? PMU_MAX_FIXED : nf);
        /* 20.2.5 (v5): ECX is the supported-fixed-counter bit mask: counter i exists if
         * ECX[i] = 1 or EDX[4:0] > i */
        if (c->version >= 5)
            c->fixed_mask |= a[2] & (uint32_t)mask_bits(PMU_MAX_FIXED);
    }
    /* 20.2.6 full-width writes (IA32_A_PMCx): IA32_PERF_CAPABILITIES[13] */
    c->full_width = perf_caps_ok && (perf_caps & PERF_CAP_FW_WRITE);
    c->perf_metrics = perf_caps_ok && (perf_caps & PERF_CAP_METRICS);
}

uint64_t pmu_global_ctrl_bits(const struct pmu_caps *c)
{
    if (c->version < 2)
        return 0;
    /* SDM Vol. 3B 20.2.2 (figure 20-3): EN_PMCi for i < CPUID.0AH:EAX[15:8], EN_FIXED_CTRi at
     * 32 + i for each fixed counter; 20.3.9.3 (Ice Lake): bit 48 PERF_METRICS_EN with
     * PERF_CAPABILITIES[15]; every other bit is reserved (#GP) */
    return mask_bits(c->n_gp) | (uint64_t)c->fixed_mask << GLOBAL_FIXED_SHIFT |
           (c->perf_metrics ? GLOBAL_CTRL_METRICS_EN : 0);
}

uint64_t pmu_pmi_bits(const struct pmu_caps *c, const uint64_t *evtsel, uint64_t fixed_ctrl)
{
    uint64_t b = 0;
    for (unsigned i = 0; i < c->n_gp; i++)
        if (evtsel[i] & EVTSEL_INT)
            b |= BIT(i);
    for (unsigned i = 0; i < PMU_MAX_FIXED; i++)
        if ((c->fixed_mask & BIT(i)) && (fixed_ctrl & FIXED_CTRL_PMI(i)))
            b |= BIT(GLOBAL_FIXED_SHIFT + i);
    return b;
}

void pmu_decide(const struct pmu_caps *c, bool exit_load, bool entry_load, struct pmu_decision *d)
{
    *d = (struct pmu_decision){.caps = *c};
    if (!c->version) {
        d->mode = PMU_ABSENT;
        ptv_snprintf(d->reason, sizeof(d->reason), "no architectural PMU (CPUID.0AH:EAX = 0)");
        return;
    }
    /* v1 has no IA32_PERF_GLOBAL_CTRL: a counter enabled by its PERFEVTSEL.EN would count the
     * VMM's instructions and nothing could stop it at the exit (SDM Vol. 3B 20.2.1) */
    if (c->version < 2) {
        d->mode = PMU_HIDDEN;
        ptv_snprintf(d->reason, sizeof(d->reason),
                     "PMU v1 hidden: no IA32_PERF_GLOBAL_CTRL to stop its counters in root");
        return;
    }
    /* Vol. 3C 25.7.1 / 25.8.1 (VM-exit / VM-entry controls, bit 12 / 13): both loads are
     * needed, 0 at every exit (28.5.1) and the guest's value at every entry (27.3.2.1) */
    if (!exit_load || !entry_load) {
        d->mode = PMU_HIDDEN;
        ptv_snprintf(d->reason, sizeof(d->reason),
                     "PMU v%u hidden: no VM-%s control \"load IA32_PERF_GLOBAL_CTRL\"", c->version,
                     !exit_load ? "exit" : "entry");
        return;
    }
    d->mode = PMU_SWITCHED;
    /* Vol. 3B 20.2.4.1 / 18.4.7: before v4, FREEZE_PERFMON_ON_PMI clears GLOBAL_CTRL; v4 sets
     * GLOBAL_STATUS.CTR_Frz instead ("streamlined freeze") and leaves GLOBAL_CTRL alone */
    d->legacy_freeze = c->version < 4;
    ptv_snprintf(d->reason, sizeof(d->reason),
                 "PMU v%u shown: %u x %u-bit counters, fixed %#x x %u-bit%s; GLOBAL_CTRL "
                 "switched by the VMCS%s",
                 c->version, c->n_gp, c->gp_width, c->fixed_mask, c->fixed_width,
                 c->full_width ? ", full-width writes" : "",
                 d->legacy_freeze ? " (legacy freeze kept at NMIs)" : "");
}

enum pmu_msr_kind pmu_msr_kind(const struct pmu_caps *c, uint32_t msr)
{
    if (!c->version)
        return PMU_MSR_NONE;
    if (msr >= MSR_ARCH_PERFMON_EVENTSEL0 && msr < MSR_ARCH_PERFMON_EVENTSEL0 + c->n_gp)
        return PMU_MSR_EVTSEL;
    if (msr >= MSR_IA32_PERFCTR0 && msr < MSR_IA32_PERFCTR0 + c->n_gp)
        return PMU_MSR_PMC;
    if (c->full_width && msr >= MSR_IA32_PMC0 && msr < MSR_IA32_PMC0 + c->n_gp)
        return PMU_MSR_A_PMC;
    if (c->version < 2)
        return PMU_MSR_NONE;
    if (msr >= MSR_CORE_PERF_FIXED_CTR0 && msr < MSR_CORE_PERF_FIXED_CTR0 + PMU_MAX_FIXED &&
        (c->fixed_mask & BIT(msr - MSR_CORE_PERF_FIXED_CTR0)))
        return PMU_MSR_FIXED;
    switch (msr) {
    case MSR_CORE_PERF_FIXED_CTR_CTRL:
        return PMU_MSR_FIXED_CTRL;
    case MSR_CORE_PERF_GLOBAL_STATUS:
        return PMU_MSR_GLOBAL_STATUS;
    case MSR_PMU_GLOBAL_CTRL:
        return PMU_MSR_GLOBAL_CTRL;
    case MSR_CORE_PERF_GLOBAL_OVF_CTRL:
        return PMU_MSR_GLOBAL_OVF_CTRL;
    case MSR_CORE_PERF_GLOBAL_STATUS_SET:
        return c->version >= 4 ? PMU_MSR_GLOBAL_STATUS_SET : PMU_MSR_NONE;
    case MSR_CORE_PERF_GLOBAL_INUSE:
        return c->version >= 4 ? PMU_MSR_GLOBAL_INUSE : PMU_MSR_NONE;
    }
    return PMU_MSR_NONE;
}

/*
 * Only IA32_PERF_GLOBAL_CTRL exits.  The counters, PERFEVTSELs, FIXED_CTR_CTRL and the
 * STATUS / RESET / SET / INUSE MSRs hold the guest's values in root too and count nothing
 * there (GLOBAL_CTRL = 0), so they pass through: the guest's reads and writes are the CPU's
 * own, #GP rules included, and cost no exit.  GLOBAL_CTRL must exit because no VM exit saves
 * it (there is no "save IA32_PERF_GLOBAL_CTRL" control, Vol. 3C 25.7.1): the VMM keeps the
 * guest's value in the VMCS field the entry loads.
 */
bool pmu_intercepts(const struct pmu_decision *d, uint32_t msr)
{
    return d->mode != PMU_ABSENT && msr == MSR_PMU_GLOBAL_CTRL;
}

bool pmu_global_ctrl_write_ok(const struct pmu_decision *d, uint64_t val)
{
    if (d->mode == PMU_ABSENT)
        return false;
    /* hidden: the VMM answers as a CPU whose version it still is underneath, keeping the value
     * virtual (documented deviation: CPUID says no PMU, the MSR still exists) */
    return !(val & ~pmu_global_ctrl_bits(&d->caps));
}

void pmu_cpuid_filter(const struct pmu_decision *d, uint32_t leaf, uint32_t r[4])
{
    if (leaf == 0xa && d->mode == PMU_HIDDEN)
        r[0] = r[1] = r[2] = r[3] = 0;
}

/*
 * An NMI reached the VMM.  Not the VMM's (vmm/smp did not claim it): the guest's, owed.  The
 * VMM's: NMIs are not counted, they are latched one deep (SDM Vol. 3A 6.7.1, "Handling Multiple
 * NMIs": one NMI is held pending while NMIs are blocked, a further one is lost), so a guest PMI
 * raised while the VMM's NMI was pending or blocked (in root after an NMI exit, until IRET) merged
 * into it.  It is recognised by an overflow bit whose counter requests a PMI that was not set at
 * the previous NMI this CPU handled, with the LVT entry delivering NMIs [I]: the guest then still
 * gets exactly one NMI. Legacy freeze (v2/v3): the PMI cleared the real GLOBAL_CTRL in non-root,
 * which the exit did not save: the VMCS copy is cleared too, else the entry would unfreeze the
 * counters.
 */
void pmu_on_nmi(const struct pmu_decision *d, struct pmu_nmi_state *s, const struct pmu_nmi_view *v,
                struct pmu_nmi_verdict *out)
{
    *out = (struct pmu_nmi_verdict){.owe_guest = !v->vmm_ours};
    if (d->mode != PMU_SWITCHED)
        return;
    /* seen keeps every status bit: one set before its counter asked for PMIs is not new */
    uint64_t now = v->status & v->pmi_bits;
    uint64_t fresh = now & ~s->seen;
    s->seen = v->status;
    bool pmi = fresh && pmu_lvtpc_nmi(v->lvtpc);
    if (v->vmm_ours && pmi)
        out->owe_guest = true;
    /* the guest's own NMI with a PMI-enabled overflow bit set is taken as its PMI [I: ptvisor's
     * guests send themselves no other NMIs while a counter overflow is unhandled] */
    if (!v->vmm_ours && now && pmu_lvtpc_nmi(v->lvtpc))
        pmi = true;
    if (pmi && d->legacy_freeze && (v->guest_debugctl & PMU_DEBUGCTL_FREEZE_PERFMON))
        out->clear_global_ctrl = true;
}

void pmu_observe(struct pmu_nmi_state *s, uint64_t status)
{
    s->seen = status;
}

/* counter i (GLOBAL_CTRL layout) counts one retired instruction at cpl */
static bool counts_insn(const struct pmu_caps *c, const struct pmu_state *g, unsigned i,
                        unsigned cpl)
{
    if (!(g->global_ctrl & BIT(i)))
        return false;
    if (i < GLOBAL_FIXED_SHIFT) {
        uint64_t e = g->evtsel[i];
        /* Instructions Retired with no CMASK / INV / EDGE: one per instruction [I] */
        if (!(e & EVTSEL_EN) || (e & EVTSEL_EVENT_UMASK) != ARCH_EVENT_INSNS ||
            (e & (EVTSEL_CMASK | EVTSEL_INV | EVTSEL_EDGE)))
            return false;
        return cpl ? e & EVTSEL_USR : e & EVTSEL_OS;
    }
    unsigned f = i - GLOBAL_FIXED_SHIFT;
    if (f != 0) /* IA32_FIXED_CTR0 is INST_RETIRED.ANY (20.2.2, table 20-2) */
        return false;
    return cpl ? g->fixed_ctrl & FIXED_CTRL_USR(0) : g->fixed_ctrl & FIXED_CTRL_OS(0);
}

void pmu_emulated_retire(const struct pmu_decision *d, struct pmu_nmi_state *s,
                         const struct pmu_state *g, unsigned cpl, struct pmu_retire *out)
{
    *out = (struct pmu_retire){.exact = true};
    const struct pmu_caps *c = &d->caps;
    if (d->mode != PMU_SWITCHED)
        return;
    if (c->version >= 4 && (g->status & GLOBAL_STATUS_CTR_FRZ))
        return; /* streamlined freeze: nothing counts while CTR_Frz = 1 (20.2.4.1) */
    uint64_t pmi = pmu_pmi_bits(c, g->evtsel, g->fixed_ctrl), ovf = 0;
    for (unsigned i = 0; i < 64; i++) {
        bool gp = i < c->n_gp, fx = i >= GLOBAL_FIXED_SHIFT &&
                                    i < GLOBAL_FIXED_SHIFT + PMU_MAX_FIXED &&
                                    (c->fixed_mask & BIT(i - GLOBAL_FIXED_SHIFT));
        if ((!gp && !fx) || !counts_insn(c, g, i, cpl))
            continue;
        uint64_t v = gp ? g->pmc[i] : g->fixed[i - GLOBAL_FIXED_SHIFT];
        uint64_t m = mask_bits(gp ? c->gp_width : c->fixed_width);
        uint64_t next = (v + 1) & m;
        bool wraps = (v & m) == m; /* to 0: the overflow sets its status bit (20.2.2) */
        /* without full-width writes a general counter takes only a sign-extended bits 31:0
         * (20.2.6): a value whose bits above 31 are not all bit 31 cannot be written */
        uint64_t upper = next >> 31 & (m >> 31);
        bool unwritable = gp && !c->full_width && upper != 0 && upper != (m >> 31);
        /* nothing can set a status bit from software before v4; a PEBS counter's overflow is a
         * PEBS record and a reload, not emulated */
        if (unwritable || (wraps && (c->version < 4 || (g->pebs_enable & BIT(i))))) {
            out->exact = false; /* left alone: it overflows at its next real event */
            continue;
        }
        out->inc |= BIT(i);
        if (wraps)
            ovf |= BIT(i);
    }
    if (!ovf)
        return;
    out->status_set = ovf;
    s->seen |= ovf;
    if (!(ovf & pmi))
        return;
    out->pmi = true;
    if (g->debugctl & PMU_DEBUGCTL_FREEZE_PERFMON)
        out->status_set |= GLOBAL_STATUS_CTR_FRZ; /* v4: streamlined freeze */
    if (g->debugctl & PMU_DEBUGCTL_FREEZE_LBRS)
        out->status_set |= GLOBAL_STATUS_LBR_FRZ;
    if (!(g->lvtpc & LVT_MASKED))
        out->deliver = (g->lvtpc & LVT_DM_MASK) == LVT_DM_NMI ? 2 : 1;
}
