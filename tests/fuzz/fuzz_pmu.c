/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: a random CPU (CPUID.0AH EAX/ECX/EDX, IA32_PERF_CAPABILITIES, the VMX controls) through
 * pmu_caps_from_cpuid() and pmu_decide(), then sequences of guest WRMSR values, NMIs and
 * emulated instructions through the policy.  Invariants:
 *   - a guest WRMSR IA32_PERF_GLOBAL_CTRL is accepted by the policy exactly when the PMU model
 *     (tests/model/pmu_model.c, the SDM's rule written independently) accepts it on the same
 *     CPU; a hidden or absent PMU never takes a reserved bit either;
 *   - pmu_msr_kind() names exactly the PMU MSRs the model has (within the model's 8 + 4
 *     counters); only IA32_PERF_GLOBAL_CTRL is ever intercepted, and only with a PMU;
 *   - the decision: switched only with v2+ and both controls, legacy freeze exactly before v4,
 *     CPUID.0AH zero exactly when hidden, a printable NUL-terminated reason;
 *   - pmu_on_nmi(): the guest's NMI is always owed; a VMM NMI is owed only for a new
 *     PMI-enabled overflow with an NMI-mode LVT entry; GLOBAL_CTRL cleared only under legacy
 *     freeze with FREEZE_PERFMON_ON_PMI; the state records the status it saw;
 *   - pmu_emulated_retire() equals the model retiring one instruction at that CPL from the same
 *     state: the same counters advance, the same overflow bits and freezes (v4+), the same PMI;
 *     exact = false only where the model's result cannot be written (v2/v3 overflow, or a
 *     value IA32_PMCx cannot take).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/lbr_model.h"
#include "model/pmu_model.h"
#include "pmu/pmu_policy.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)
#define BIT(n) (1ull << (n))

struct in_cpu {
    uint32_t eax, ecx, edx;
    uint8_t flags;
};

struct in_op {
    uint8_t kind, cpl, b;
    uint32_t lvt;
    uint64_t v, w;
};

static uint64_t ones(unsigned w)
{
    return w >= 64 ? ~0ull : BIT(w) - 1;
}

static bool printable(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap || !n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e)
            return false;
    return true;
}

/* the model's CPU for caps that fit it (8 general, 4 fixed counters) */
static bool model_cpu(const struct pmu_caps *c, const struct in_cpu *ic, struct pmum_cpu *m)
{
    if (c->n_gp > PMUM_GP || (c->fixed_mask & ~0xfu))
        return false;
    *m = (struct pmum_cpu){.version = c->version,
                           .n_gp = c->n_gp,
                           .gp_width = c->gp_width,
                           .n_fixed = (uint8_t)(ic->edx & 0x1f),
                           .fixed_width = c->fixed_width,
                           .fixed_ecx = ic->ecx,
                           .fw_write = c->full_width};
    return true;
}

static void check_retire(const struct pmu_decision *d, const struct pmum_cpu *mc,
                         const struct in_op *o, const uint8_t *extra, size_t n)
{
    const struct pmu_caps *c = &d->caps;
    struct lbrm lbr;
    struct lbrm_cpu lc = {.has_debugctl = true,
                          .pdcm = true,
                          .pmu_version = c->version,
                          .legacy = true,
                          .nr = 16,
                          .fmt = 4,
                          .from = 0x680,
                          .to = 0x6c0};
    lbrm_init(&lbr, &lc);
    struct pmum m;
    pmum_init(&m, mc, &lbr);
    /* a state from the input: counters near their top half the time */
    uint64_t seed = o->v ^ o->w * 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < PMUM_GP; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        m.evtsel[i] = (seed >> 7) & (0xff0000ull | (seed & 1 ? 0xc0 : 0x3c)) & 0xffffffffull;
        if (i < n)
            m.evtsel[i] |= (uint64_t)extra[i] << 24 & (seed & 2 ? 0 : 0xff000000ull);
        m.pmc[i] =
            (seed & 4 ? ones(c->gp_width) - (seed >> 40) % 3 : seed >> 20) & ones(c->gp_width);
    }
    for (unsigned i = 0; i < PMUM_FIXED; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        m.fixed[i] = (seed & 4 ? ones(c->fixed_width) - (seed >> 40) % 3 : seed >> 24) &
                     ones(c->fixed_width);
    }
    m.fixed_ctrl = o->w & 0xbbbb;
    for (unsigned i = 0; i < PMUM_FIXED; i++)
        if (!pmum_has_fixed(mc, i))
            m.fixed_ctrl &= ~(0xfull << (4 * i));
    m.global_ctrl = o->v & pmu_global_ctrl_bits(c);
    m.status = o->w >> 16 & (ones(c->n_gp) | 0xfull << 32 | (o->b & 1 ? BIT(59) : 0));
    lbr.debugctl = (o->b & 2 ? BIT(11) : 0) | (o->b & 4 ? BIT(12) : 0) | (o->b & 8 ? 1 : 0);
    m.lvtpc = o->lvt & (LVT_MASKED | LVT_DM_MASK | 0xff);

    struct pmu_state g = {.global_ctrl = m.global_ctrl,
                          .status = m.status,
                          .fixed_ctrl = m.fixed_ctrl,
                          .debugctl = lbr.debugctl,
                          .lvtpc = m.lvtpc};
    memcpy(g.evtsel, m.evtsel, sizeof(m.evtsel));
    memcpy(g.pmc, m.pmc, sizeof(m.pmc));
    memcpy(g.fixed, m.fixed, sizeof(m.fixed));
    struct pmu_nmi_state ns = {.seen = o->w};
    struct pmu_retire out;
    unsigned cpl = o->cpl & 1 ? 3 : 0;
    pmu_emulated_retire(d, &ns, &g, cpl, &out);

    struct pmum after = m;
    pmum_retire(&after, 1, cpl);
    uint64_t moved = 0;
    for (unsigned i = 0; i < PMUM_GP; i++)
        if (after.pmc[i] != m.pmc[i])
            moved |= BIT(i);
    for (unsigned i = 0; i < PMUM_FIXED; i++)
        if (after.fixed[i] != m.fixed[i])
            moved |= BIT(32 + i);
    uint64_t counters = ones(c->n_gp) | 0xfull << 32, wrapped = 0, unwritable = 0;
    for (unsigned i = 0; i < 64; i++)
        if ((moved & BIT(i)) && (i < 32 ? after.pmc[i] : after.fixed[i - 32]) == 0)
            wrapped |= BIT(i);
    for (unsigned i = 0; i < PMUM_GP; i++) {
        uint64_t up = after.pmc[i] >> 31 & (ones(c->gp_width) >> 31);
        if ((moved & BIT(i)) && !c->full_width && up && up != ones(c->gp_width) >> 31)
            unwritable |= BIT(i);
    }
    /* a counter whose result cannot be written as the model has it is left alone (one count
     * lost, never a corrupted counter); no PEBS here (pebs_enable = 0) */
    uint64_t dropped = unwritable | (c->version < 4 ? wrapped : 0);
    CHECK(out.inc == (moved & ~dropped));
    CHECK(out.exact == !dropped);
    bool model_pmi = after.pmi_req;
    if (!out.exact)
        return;
    if (c->version >= 4) {
        /* STATUS_SET: the wrapped counters, CTR_Frz and LBR_Frz as the model froze */
        uint64_t want =
            wrapped | (after.status & ~m.status & BIT(59)) | (lbr.global_status & BIT(58));
        CHECK(out.status_set == want);
        CHECK(ns.seen == (o->w | (out.status_set & counters)));
    } else {
        CHECK(!wrapped); /* an exact v2/v3 retirement never overflows */
    }
    CHECK(out.pmi == model_pmi);
    if (out.pmi) {
        unsigned want = (m.lvtpc & LVT_MASKED) ? 0 : (m.lvtpc & LVT_DM_MASK) == LVT_DM_NMI ? 2 : 1;
        CHECK(out.deliver == want);
    } else {
        CHECK(out.deliver == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in_cpu ic;
    if (size < sizeof(ic))
        return 0;
    memcpy(&ic, data, sizeof(ic));
    data += sizeof(ic), size -= sizeof(ic);
    /* keep widths real (the SDM's counters are 32..64 bits wide) half the time */
    if (!(ic.flags & 0x40)) {
        ic.eax = (ic.eax & 0xff00ffffu) | (uint32_t)(32 + (ic.eax >> 16) % 33) << 16;
        ic.edx = (ic.edx & ~0x1fe0u) | (uint32_t)(32 + (ic.edx >> 5) % 33) << 5;
        ic.eax = (ic.eax & 0xffff00ffu) | (((ic.eax >> 8) & 0xff) % 9) << 8;
        ic.edx = (ic.edx & ~0x1fu) | (ic.edx & 0x1f) % 5;
        ic.ecx &= 0xf;
        ic.eax = (ic.eax & ~0xffu) | (ic.eax & 0xff) % 7;
    }
    uint32_t leaf[4] = {ic.eax, 0, ic.ecx, ic.edx};
    bool perf_ok = ic.flags & 1;
    uint64_t perf_caps =
        (ic.flags & 2 ? PERF_CAP_FW_WRITE : 0) | (ic.flags & 4 ? PERF_CAP_METRICS : 0);
    struct pmu_caps c;
    pmu_caps_from_cpuid(ic.flags & 0x80 ? 9 : 0x20, leaf, perf_ok, perf_caps, &c);
    bool xl = ic.flags & 8, nl = ic.flags & 16;
    /* a counter of width 0 is no counter (CPUID.0AH:EAX[23:16], EDX[12:5]): the model would wrap
     * it at every event, the value never moving; no CPU reports one */
    if ((c.n_gp && !c.gp_width) || (c.fixed_mask && !c.fixed_width))
        return 0;
    struct pmu_decision d;
    pmu_decide(&c, xl, nl, &d);

    /* the decision */
    CHECK(printable(d.reason, sizeof(d.reason)));
    CHECK(c.n_gp <= PMU_MAX_GP && !(c.fixed_mask >> PMU_MAX_FIXED));
    CHECK((d.mode == PMU_ABSENT) == (c.version == 0));
    CHECK((d.mode == PMU_SWITCHED) == (c.version >= 2 && xl && nl));
    CHECK(d.legacy_freeze == (d.mode == PMU_SWITCHED && c.version < 4));
    uint32_t r[4] = {1, 2, 3, 4};
    pmu_cpuid_filter(&d, 0xa, r);
    CHECK((r[0] == 0) == (d.mode == PMU_HIDDEN));
    for (uint32_t m = 0xc0; m < 0x500; m++)
        CHECK(pmu_intercepts(&d, m) == (m == 0x38f && d.mode != PMU_ABSENT));

    struct pmum_cpu mc;
    bool fits = model_cpu(&c, &ic, &mc);
    struct pmum m;
    struct lbrm lbr;
    struct lbrm_cpu lc = {.has_debugctl = true, .pmu_version = c.version};
    lbrm_init(&lbr, &lc);
    if (fits)
        pmum_init(&m, &mc, &lbr);

    /* MSR kinds against the model's MSR file */
    if (fits)
        for (uint32_t msr = 0xc0; msr < 0x4d0; msr++) {
            uint64_t v;
            int rr = pmum_rdmsr(&m, msr, &v);
            enum pmu_msr_kind k = pmu_msr_kind(&c, msr);
            if (rr == 1)
                CHECK(k == PMU_MSR_NONE);
            else
                CHECK((k != PMU_MSR_NONE) == (rr == 0));
        }

    struct pmu_nmi_state ns = {0};
    struct in_op o;
    while (size >= sizeof(o)) {
        memcpy(&o, data, sizeof(o));
        data += sizeof(o), size -= sizeof(o);
        switch (o.kind % 4) {
        case 0: { /* WRMSR IA32_PERF_GLOBAL_CTRL */
            uint64_t v = o.b & 1 ? o.v : o.v & pmu_global_ctrl_bits(&c);
            bool ok = pmu_global_ctrl_write_ok(&d, v);
            if (ok)
                CHECK(!(v & ~pmu_global_ctrl_bits(&c)) && d.mode != PMU_ABSENT);
            if (fits && d.mode == PMU_SWITCHED && !c.perf_metrics) {
                struct pmum copy = m;
                CHECK(ok == (pmum_wrmsr(&copy, 0x38f, v) == 0));
            }
            break;
        }
        case 1: { /* an NMI */
            struct pmu_nmi_view v = {.vmm_ours = o.b & 1,
                                     .status = o.v,
                                     .pmi_bits = o.w,
                                     .lvtpc = o.lvt,
                                     .guest_debugctl = o.b & 2 ? BIT(12) : 0};
            uint64_t seen = ns.seen;
            struct pmu_nmi_verdict out;
            pmu_on_nmi(&d, &ns, &v, &out);
            if (!v.vmm_ours)
                CHECK(out.owe_guest);
            else
                CHECK(out.owe_guest ==
                      (d.mode == PMU_SWITCHED && pmu_lvtpc_nmi(o.lvt) && (o.v & o.w & ~seen)));
            if (out.clear_global_ctrl)
                CHECK(d.legacy_freeze && (o.b & 2) && pmu_lvtpc_nmi(o.lvt));
            CHECK(d.mode != PMU_SWITCHED || ns.seen == o.v);
            break;
        }
        case 2: /* the VMM looked at GLOBAL_STATUS */
            pmu_observe(&ns, o.v);
            CHECK(ns.seen == o.v);
            break;
        case 3: /* an emulated instruction */
            if (fits && d.mode == PMU_SWITCHED)
                check_retire(&d, &mc, &o, data, size);
            break;
        }
    }
    return 0;
}
