/* SPDX-License-Identifier: MIT */
/*
 * The PMU differential.  One random guest program -- it reads CPUID.0AH first
 * and programs what it finds: PERFEVTSELs (instructions / cycles / other events, OS/USR, INT),
 * FIXED_CTR_CTRL, counters set close to overflow through IA32_PMCx, IA32_A_PMCx and
 * IA32_FIXED_CTRx, IA32_PERF_GLOBAL_CTRL (valid and reserved bits), STATUS_RESET, STATUS_SET,
 * reads of every PMU MSR, the LVT performance entry (NMI, fixed vector, masked), DEBUGCTL with
 * LBR / FREEZE_LBRS_ON_PMI / FREEZE_PERFMON_ON_PMI, a Linux-like PMI handler, instruction and
 * cycle streams at CPL 0 and 3, taken branches, CPUID, and VM exits of every kind the VMM runs
 * instructions for (EPT violation, emulated I/O, MOV CR, XSETBV, the VMM's own shootdown NMIs,
 * alone or merged with a pending PMI) -- runs twice:
 *   (a) bare metal: the PMU + LBR models (tests/model/pmu_model.c, lbr_model.c) of the CPU the
 *       guest must see;
 *   (b) under the VMM: the same models as the real CPU, plus what the VMM and the VMX
 *       transitions do: the real policy (vmm/pmu/pmu_policy.c) decides which MSRs exit, checks
 *       the GLOBAL_CTRL writes, filters CPUID, classifies every NMI and completes emulated
 *       instructions; at every exit DEBUGCTL is saved and cleared and GLOBAL_CTRL loaded with 0
 *       (SDM Vol. 3C 28.3.1, 28.5.1), the VMM runs instructions and branches at CPL 0, and at
 *       every entry DEBUGCTL and GLOBAL_CTRL are loaded (27.3.2.1) and owed events injected.
 * At every step the guest-visible counters, GLOBAL_CTRL, STATUS, FIXED_CTR_CTRL, DEBUGCTL and
 * LBR_TOS must be identical, as must every RDMSR value, #GP, CPUID answer and PMI (kind, vector,
 * order), and the LBR stack at the end; the VMM's root instructions must never change a counter.
 * A documented residual (docs/lbr.md "PMU") ends a stream's comparison where it occurs and is
 * counted.  Each planted defect (mutant) of the VMM side must be caught.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/lbr_model.h"
#include "model/pmu_model.h"
#include "pmu/pmu_policy.h"

#define BIT(n)      (1ull << (n))
#define VMM_BASE    0x7f000000ull
#define VMM_SIZE    0x00200000ull
#define USER_BASE   0x0000000000400000ull
#define KERN_BASE   0xffffffff81000000ull
#define GP_HANDLER  0xffffffff81e00d00ull
#define NMI_HANDLER 0xffffffff81e01500ull
#define IRQ_HANDLER 0xffffffff81e02000ull
#define PMI_VECTOR  0xfe

static unsigned n_streams = 100, n_ops = 800; /* PMU_DIFF_STREAMS overrides */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t ones(unsigned w)
{
    return w >= 64 ? ~0ull : BIT(w) - 1;
}

/* --- configurations --- */

struct config {
    const char *name;
    struct pmum_cpu host;
    bool exit_load, entry_load;
    bool gap; /* the guest may combine legacy freeze with a non-NMI LVT entry (known gap) */
};

enum cfg_id {
    CFG_V5_8,
    CFG_V4_4,
    CFG_V4_8,
    CFG_V3_4,
    CFG_V2_2,
    CFG_V5_NOCTL,
    CFG_V4_EXIT_ONLY,
    CFG_V1,
    CFG_NONE,
    CFG_N,
    CFG_GAP_V3 = CFG_N, /* run apart: the known gap must show */
    CFG_ALL
};

static struct config config(enum cfg_id id)
{
    struct config c = {.exit_load = true, .entry_load = true};
    struct pmum_cpu v4 = {
        .version = 4, .n_gp = 4, .gp_width = 48, .n_fixed = 3, .fixed_width = 48, .fw_write = true};
    switch (id) {
    case CFG_V5_8:
        c.name = "PMU v5, 8 x 48-bit, fixed 0-2 + ECX bit 3, full-width writes";
        c.host = v4, c.host.version = 5, c.host.n_gp = 8, c.host.fixed_ecx = 0x8;
        break;
    case CFG_V4_4:
        c.name = "PMU v4 (Skylake), 4 x 48-bit, 3 fixed";
        c.host = v4;
        break;
    case CFG_V4_8:
        c.name = "PMU v4, 8 x 48-bit (no SMT), 3 fixed";
        c.host = v4, c.host.n_gp = 8;
        break;
    case CFG_V3_4:
        c.name = "PMU v3 (Haswell), 4 x 48-bit, legacy freeze";
        c.host = v4, c.host.version = 3;
        break;
    case CFG_V2_2:
        c.name = "PMU v2 (Core 2), 2 x 40-bit, 3 fixed, no full-width writes";
        c.host = (struct pmum_cpu){
            .version = 2, .n_gp = 2, .gp_width = 40, .n_fixed = 3, .fixed_width = 40};
        break;
    case CFG_V5_NOCTL:
        c.name = "PMU v5, no load-PERF_GLOBAL_CTRL controls (hidden)";
        c.host = v4, c.host.version = 5, c.host.n_gp = 8;
        c.exit_load = c.entry_load = false;
        break;
    case CFG_V4_EXIT_ONLY:
        c.name = "PMU v4, exit control only (hidden)";
        c.host = v4;
        c.entry_load = false;
        break;
    case CFG_V1:
        c.name = "PMU v1 (no GLOBAL_CTRL: hidden)";
        c.host = (struct pmum_cpu){.version = 1, .n_gp = 2, .gp_width = 40};
        break;
    case CFG_NONE:
        c.name = "no architectural PMU (Bochs)";
        c.host = (struct pmum_cpu){0};
        break;
    case CFG_GAP_V3:
    default:
        c.name = "PMU v3, legacy freeze with a fixed/masked LVT entry (known gap)";
        c.host = v4, c.host.version = 3;
        c.gap = true;
        break;
    }
    return c;
}

static struct pmu_decision decide(const struct config *c)
{
    struct pmum m;
    struct lbrm l;
    pmum_init(&m, &c->host, &l);
    uint32_t a[4];
    pmum_cpuid(&m, a);
    struct pmu_caps caps;
    pmu_caps_from_cpuid(0x20, a, true, c->host.fw_write ? PERF_CAP_FW_WRITE : 0, &caps);
    struct pmu_decision d;
    pmu_decide(&caps, c->exit_load, c->entry_load, &d);
    return d;
}

static struct lbrm_cpu lbr_cpu(unsigned pmu_version)
{
    return (struct lbrm_cpu){.has_debugctl = true,
                             .pdcm = true,
                             .pmu_version = (uint8_t)pmu_version,
                             .legacy = true,
                             .nr = 16,
                             .fmt = 4,
                             .from = 0x680,
                             .to = 0x6c0,
                             .call_stack = true,
                             .perf_caps_ok = true,
                             .perf_caps = 0x2c4};
}

/* --- the guest program --- */

enum opk {
    O_RETIRE,
    O_CYCLES,
    O_BRANCH,
    O_PROGRAM_GP,
    O_PROGRAM_FIXED,
    O_SET_COUNTER,
    O_GCTL,
    O_RDMSR,
    O_WRMSR_RAW,
    O_RESET,
    O_SET,
    O_LVTPC,
    O_DEBUGCTL,
    O_HANDLER,
    O_CPUID,
    O_EXIT,
    O_SHOOTDOWN,
    O_N
};

struct op {
    uint8_t k, cpl, a, b;
    uint32_t n;
    uint64_t v;
};

static void gen(struct op *p, unsigned n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;
    /* weights: events and programming often, exits and NMIs often enough to meet each */
    static const uint8_t w[O_N] = {14, 8, 8, 6, 4, 8, 8, 6, 4, 3, 2, 3, 3, 5, 3, 8, 6};
    unsigned total = 0;
    for (unsigned i = 0; i < O_N; i++)
        total += w[i];
    p[0] = (struct op){.k = O_CPUID, .v = 0xa};
    for (unsigned i = 1; i < n; i++) {
        unsigned r = (unsigned)(rng(&s) % total), k = 0;
        while (r >= w[k])
            r -= w[k++];
        uint64_t x = rng(&s);
        p[i] = (struct op){.k = (uint8_t)k,
                           .cpl = (x & 3) == 0 ? 3 : 0,
                           .a = (uint8_t)(x >> 8),
                           .b = (uint8_t)(x >> 16),
                           .n = (uint32_t)(x >> 24),
                           .v = rng(&s)};
    }
}

/* --- one side: bare metal, or the VMM's twin --- */

enum mutant {
    MUT_NONE,
    MUT_NO_EXIT_LOAD,   /* VM exit does not load GLOBAL_CTRL = 0 */
    MUT_NO_ENTRY_LOAD,  /* VM entry does not load the guest's GLOBAL_CTRL */
    MUT_ROOT_PROBE,     /* the GLOBAL_CTRL write tried on the CPU in root (exit_msr.c before) */
    MUT_GCTL_NO_CHECK,  /* GLOBAL_CTRL writes accepted with reserved bits */
    MUT_PMI_LOST,       /* a PMI merged into a VMM NMI is not given to the guest */
    MUT_PMI_TWICE,      /* no record of overflow bits already seen: stale ones owe again */
    MUT_FREEZE_IGNORED, /* legacy freeze: the VMCS copy of GLOBAL_CTRL not cleared at the PMI */
    MUT_NO_RETIRE,      /* emulated instructions not counted (the VMM as wired today) */
    MUT_CPUID_LEAK,     /* hidden PMU: CPUID.0AH not filtered */
    MUT_NO_LBR_FREEZE,  /* an emulated instruction's PMI does not freeze the LBRs */
    MUT_N
};

static const char *const mut_name[MUT_N] = {
    "none",
    "no GLOBAL_CTRL load at exit",
    "no GLOBAL_CTRL load at entry",
    "GLOBAL_CTRL write tried in root",
    "GLOBAL_CTRL reserved bits accepted",
    "PMI merged into a VMM NMI lost",
    "PMI delivered twice (no seen bits)",
    "legacy freeze ignored",
    "emulated instructions not counted",
    "CPUID.0AH not hidden",
    "emulated PMI without LBR freeze",
};

struct rec {
    uint32_t step, tag;
    uint64_t val;
};

struct run {
    struct rec *r;
    unsigned n, cap;
    uint64_t pmis;
};

static void logv(struct run *r, uint32_t step, uint32_t tag, uint64_t val)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 4096;
        r->r = realloc(r->r, r->cap * sizeof(*r->r));
        assert_non_null(r->r);
    }
    r->r[r->n++] = (struct rec){step, tag, val};
}

enum tag {
    T_RD = 1,
    T_RD_GP,
    T_WR,
    T_WR_GP,
    T_CPUID,
    T_NMI,
    T_IRQ,
    T_SNAP,
};

struct twin {
    struct pmu_decision d;
    struct pmu_nmi_state ns;
    uint64_t vmcs_gctl, vmcs_dbg, virt_gctl;
    bool nmi_owed, gp_owed;
    unsigned irq_owed;
    enum mutant mut;
    uint64_t vrng;
    uint64_t exits, root_changed, nmis_merged;
    const char *cut; /* a documented residual met: compare up to here */
};

struct side {
    struct pmum pmu;
    struct lbrm lbr;
    struct twin *t; /* NULL: bare metal */
    struct run *run;
    const struct config *cfg;
    uint32_t step;
    uint32_t cut_step;
    bool merge_pending, merged; /* the next op is a VMM NMI that may merge with a PMI's */
    uint64_t observed;          /* harness: GLOBAL_STATUS at the VMM's last look */
    uint64_t not_nmi;           /* harness: counters whose last PMI did not go out as an NMI */
    /* what the guest learnt from CPUID.0AH */
    unsigned ver, n_gp, gp_w, fixed_w;
    uint32_t fixed_mask;
};

static uint64_t guest_rip(const struct side *S, unsigned cpl)
{
    return (cpl ? USER_BASE : KERN_BASE) + (uint64_t)S->step * 16;
}

static void deliver(struct side *S, unsigned what, unsigned cpl)
{
    if (!what)
        return;
    S->run->pmis++;
    if (what == 2) {
        logv(S->run, S->step, T_NMI, 2);
        lbrm_branch(&S->lbr, guest_rip(S, cpl), NMI_HANDLER, LBRM_EVENT, 0, false);
    } else {
        logv(S->run, S->step, T_IRQ, what);
        lbrm_branch(&S->lbr, guest_rip(S, cpl), IRQ_HANDLER, LBRM_EVENT, 0, false);
    }
}

static void deliver_gp(struct side *S, unsigned cpl)
{
    lbrm_branch(&S->lbr, guest_rip(S, cpl), GP_HANDLER, LBRM_EVENT, 0, false);
}

/* the real CPU's RDMSR / WRMSR in non-root (what passes through), or on bare metal */
static int cpu_rdmsr(struct side *S, uint32_t msr, uint64_t *v)
{
    int r = pmum_rdmsr(&S->pmu, msr, v);
    return r == 1 ? lbrm_rdmsr(&S->lbr, msr, v) : r;
}

static int cpu_wrmsr(struct side *S, uint32_t msr, uint64_t v)
{
    int r = pmum_wrmsr(&S->pmu, msr, v);
    return r == 1 ? lbrm_wrmsr(&S->lbr, msr, v) : r;
}

static uint64_t status_now(const struct side *S)
{
    return S->pmu.status | (S->lbr.global_status & LBRM_LBR_FRZ);
}

static uint64_t pmi_bits_now(const struct side *S)
{
    return pmu_pmi_bits(&S->t->d.caps, S->pmu.evtsel, S->pmu.fixed_ctrl);
}

/* --- the VMM: exits, root, entries --- */

static void root_work(struct side *S)
{
    struct twin *t = S->t;
    uint64_t before[PMUM_GP + PMUM_FIXED];
    memcpy(before, S->pmu.pmc, sizeof(S->pmu.pmc));
    memcpy(before + PMUM_GP, S->pmu.fixed, sizeof(S->pmu.fixed));
    uint64_t k = 20 + rng(&t->vrng) % 300;
    pmum_retire(&S->pmu, k, 0);
    pmum_cycles(&S->pmu, 2 * k, 0);
    for (unsigned i = 0; i < 3; i++)
        lbrm_branch(&S->lbr, VMM_BASE + rng(&t->vrng) % VMM_SIZE,
                    VMM_BASE + rng(&t->vrng) % VMM_SIZE, LBRM_REL_CALL, 0, false);
    if (memcmp(before, S->pmu.pmc, sizeof(S->pmu.pmc)) ||
        memcmp(before + PMUM_GP, S->pmu.fixed, sizeof(S->pmu.fixed)))
        t->root_changed++;
}

static void vmm_nmi(struct side *S, bool ours);

static void vmm_exit(struct side *S)
{
    struct twin *t = S->t;
    t->exits++;
    /* 28.3.1 "save debug controls", 28.5.1: DEBUGCTL cleared; "load IA32_PERF_GLOBAL_CTRL" */
    t->vmcs_dbg = S->lbr.debugctl;
    S->lbr.debugctl = 0;
    if (t->d.mode == PMU_SWITCHED && t->mut != MUT_NO_EXIT_LOAD)
        S->pmu.global_ctrl = 0;
    root_work(S);
    /* a PMI the root work requested (only when counters run in root): an NMI in root, or an
     * interrupt the APIC holds until the guest runs (IF = 0 in root) */
    unsigned p = pmum_boundary(&S->pmu);
    if (p == 2)
        vmm_nmi(S, false);
    else if (p)
        t->irq_owed = p;
}

static void vmm_entry(struct side *S, unsigned cpl)
{
    struct twin *t = S->t;
    S->lbr.debugctl = t->vmcs_dbg; /* 27.3.2.1 "load debug controls" */
    if (t->d.mode == PMU_SWITCHED && t->mut != MUT_NO_ENTRY_LOAD)
        S->pmu.global_ctrl = t->vmcs_gctl;
    if (t->gp_owed) {
        t->gp_owed = false;
        deliver_gp(S, cpl);
    }
    if (t->nmi_owed) {
        t->nmi_owed = false;
        deliver(S, 2, cpl);
    }
    if (t->irq_owed) {
        unsigned v = t->irq_owed;
        t->irq_owed = 0;
        deliver(S, v, cpl);
    }
}

static void vmm_nmi(struct side *S, bool ours)
{
    struct twin *t = S->t;
    if (t->mut == MUT_PMI_TWICE)
        t->ns.seen = 0;
    struct pmu_nmi_view v = {
        .vmm_ours = ours,
        .status = status_now(S),
        .pmi_bits = pmi_bits_now(S),
        .lvtpc = S->pmu.lvtpc,
        .guest_debugctl = t->vmcs_dbg,
    };
    S->observed = v.status;
    struct pmu_nmi_verdict out;
    pmu_on_nmi(&t->d, &t->ns, &v, &out);
    if (t->mut == MUT_PMI_LOST && ours)
        out.owe_guest = false;
    if (t->mut == MUT_FREEZE_IGNORED)
        out.clear_global_ctrl = false;
    if (out.owe_guest)
        t->nmi_owed = true;
    if (out.clear_global_ctrl)
        t->vmcs_gctl = 0;
}

/* an instruction the VMM completes: count it as the CPU would have */
static void vmm_retire(struct side *S, unsigned cpl)
{
    struct twin *t = S->t;
    if (t->mut == MUT_NO_RETIRE)
        return;
    struct pmu_state g = {.global_ctrl = t->vmcs_gctl,
                          .status = status_now(S),
                          .fixed_ctrl = S->pmu.fixed_ctrl,
                          .debugctl = t->vmcs_dbg,
                          .lvtpc = S->pmu.lvtpc};
    memcpy(g.evtsel, S->pmu.evtsel, sizeof(S->pmu.evtsel));
    memcpy(g.pmc, S->pmu.pmc, sizeof(S->pmu.pmc));
    memcpy(g.fixed, S->pmu.fixed, sizeof(S->pmu.fixed));
    struct pmu_retire o;
    pmu_emulated_retire(&t->d, &t->ns, &g, cpl, &o);
    S->observed |= o.status_set;
    if (!o.exact && !t->cut) {
        t->cut = "emulated instruction: overflow without STATUS_SET (v2/v3) or a value IA32_PMCx "
                 "cannot take";
        S->cut_step = S->step;
    }
    const struct pmu_caps *c = &t->d.caps;
    for (unsigned i = 0; i < 64; i++) {
        if (!(o.inc & BIT(i)))
            continue;
        if (i < GLOBAL_FIXED_SHIFT) {
            uint64_t nv = (S->pmu.pmc[i] + 1) & ones(c->gp_width);
            int r = c->full_width ? pmum_wrmsr(&S->pmu, MSR_IA32_PMC0 + i, nv)
                                  : pmum_wrmsr(&S->pmu, MSR_IA32_PERFCTR0 + i, (uint32_t)nv);
            assert_int_equal(r, 0);
        } else {
            unsigned f = i - GLOBAL_FIXED_SHIFT;
            uint64_t nv = (S->pmu.fixed[f] + 1) & ones(c->fixed_width);
            assert_int_equal(pmum_wrmsr(&S->pmu, MSR_CORE_PERF_FIXED_CTR0 + f, nv), 0);
        }
    }
    if (t->mut == MUT_NO_LBR_FREEZE)
        o.status_set &= ~GLOBAL_STATUS_LBR_FRZ;
    if (o.status_set)
        assert_int_equal(pmum_wrmsr(&S->pmu, MSR_CORE_PERF_GLOBAL_STATUS_SET, o.status_set), 0);
    if (o.deliver == 2)
        t->nmi_owed = true;
    else if (o.deliver == 1)
        t->irq_owed = 0x100 | LVT_VECTOR(S->pmu.lvtpc);
}

/*
 * The instruction boundary after a guest instruction (or an event stream): the PMI it
 * requested goes out.  Under the VMM an NMI exits (NMI exiting), and a VMM NMI arriving with it
 * merges into it (one NMI, claimed by the shootdown protocol).
 */
static void insn_end(struct side *S, unsigned cpl)
{
    if (!S->t) {
        deliver(S, pmum_boundary(&S->pmu), cpl);
        return;
    }
    struct twin *t = S->t;
    uint64_t src = S->pmu.pmi_src;
    unsigned p = pmum_boundary(&S->pmu);
    if (p != 2)
        S->not_nmi |= src; /* dropped (masked entry) or a fixed interrupt */
    else
        S->not_nmi &= ~src;
    if (p == 2) {
        bool merged = S->merge_pending;
        if (merged) {
            S->merge_pending = false;
            S->merged = true;
            t->nmis_merged++;
        }
        uint64_t observed = S->observed;
        vmm_exit(S);
        bool owed_before = t->nmi_owed;
        vmm_nmi(S, merged);
        if (merged && !t->nmi_owed && !owed_before && !t->cut && !(src & ~observed)) {
            /* the residual (docs/lbr.md): every counter behind this PMI had its overflow bit
             * set when the VMM last looked, so nothing in GLOBAL_STATUS is new */
            t->cut = "a PMI whose overflow bits the VMM had seen, merged into a VMM NMI";
            S->cut_step = S->step;
        }
        vmm_entry(S, cpl);
    } else if (p) {
        deliver(S, p, cpl); /* a fixed interrupt: the guest's APIC, no exit */
    }
}

/* --- guest instructions, on either side --- */

static void retire(struct side *S, unsigned cpl)
{
    pmum_retire(&S->pmu, 1, cpl);
}

static int g_rdmsr(struct side *S, uint32_t msr, uint64_t *val, unsigned cpl)
{
    int r;
    struct twin *t = S->t;
    if (t && pmu_intercepts(&t->d, msr)) {
        vmm_exit(S);
        r = 0;
        *val = t->d.mode == PMU_SWITCHED ? t->vmcs_gctl : t->virt_gctl;
        logv(S->run, S->step, T_RD, *val);
        vmm_retire(S, cpl);
        vmm_entry(S, cpl);
    } else {
        r = cpu_rdmsr(S, msr, val);
        logv(S->run, S->step, r ? T_RD_GP : T_RD, r ? msr : *val);
        if (r)
            deliver_gp(S, cpl);
        else
            retire(S, cpl);
    }
    insn_end(S, cpl);
    return r;
}

static int g_wrmsr(struct side *S, uint32_t msr, uint64_t val, unsigned cpl)
{
    int r;
    struct twin *t = S->t;
    if (t && pmu_intercepts(&t->d, msr)) {
        vmm_exit(S);
        bool ok = pmu_global_ctrl_write_ok(&t->d, val) || t->mut == MUT_GCTL_NO_CHECK;
        if (t->mut == MUT_ROOT_PROBE && t->d.mode == PMU_SWITCHED) {
            /* let the CPU judge the value, then put 0 back: instructions in root between */
            if (!pmum_wrmsr(&S->pmu, msr, val)) {
                uint64_t before = S->pmu.fixed[0] + S->pmu.fixed[1] + S->pmu.pmc[0];
                pmum_retire(&S->pmu, 2, 0);
                pmum_cycles(&S->pmu, 40, 0);
                if (before != S->pmu.fixed[0] + S->pmu.fixed[1] + S->pmu.pmc[0])
                    t->root_changed++;
            }
            pmum_wrmsr(&S->pmu, msr, 0);
        }
        r = ok ? 0 : -1;
        logv(S->run, S->step, r ? T_WR_GP : T_WR, msr);
        if (ok) {
            if (t->d.mode == PMU_SWITCHED)
                t->vmcs_gctl = val;
            else
                t->virt_gctl = val;
            /* the shim reads GLOBAL_STATUS here: a PMI handler re-enabling its counters has
             * acknowledged its overflows (pmu_observe) */
            pmu_observe(&t->ns, status_now(S));
            S->observed = status_now(S);
            vmm_retire(S, cpl);
        } else {
            t->gp_owed = true;
        }
        vmm_entry(S, cpl);
    } else {
        r = cpu_wrmsr(S, msr, val);
        logv(S->run, S->step, r ? T_WR_GP : T_WR, msr);
        if (r)
            deliver_gp(S, cpl);
        else
            retire(S, cpl);
    }
    insn_end(S, cpl);
    return r;
}

static void g_cpuid(struct side *S, uint32_t leaf, uint32_t r[4], unsigned cpl)
{
    struct twin *t = S->t;
    if (leaf == 0xa)
        pmum_cpuid(&S->pmu, r);
    else
        r[0] = r[1] = r[2] = r[3] = leaf * 0x01010101u; /* any other leaf: as the CPU says */
    if (t) {
        vmm_exit(S);
        if (t->mut != MUT_CPUID_LEAK)
            pmu_cpuid_filter(&t->d, leaf, r);
    }
    for (unsigned i = 0; i < 4; i++)
        logv(S->run, S->step, T_CPUID, r[i]);
    if (t) {
        vmm_retire(S, cpl);
        vmm_entry(S, cpl);
    } else {
        retire(S, cpl);
    }
    insn_end(S, cpl);
}

/* an instruction that exits for another reason: emulated (completed by the VMM: I/O, MOV CR,
 * XSETBV) or not (EPT violation: the VMM maps, the instruction runs again and retires) */
static void g_exit_insn(struct side *S, bool emulated, unsigned cpl)
{
    if (S->t) {
        vmm_exit(S);
        if (emulated)
            vmm_retire(S, cpl);
        vmm_entry(S, cpl);
        if (!emulated)
            retire(S, cpl);
    } else {
        retire(S, cpl);
    }
    insn_end(S, cpl);
}

static void learn(struct side *S, const uint32_t r[4])
{
    S->ver = r[0] & 0xff;
    S->n_gp = (r[0] >> 8) & 0xff;
    if (S->n_gp > PMUM_GP)
        S->n_gp = PMUM_GP;
    S->gp_w = (r[0] >> 16) & 0xff;
    S->fixed_w = S->ver >= 2 ? (r[3] >> 5) & 0xff : 0;
    S->fixed_mask = S->ver >= 2 ? (uint32_t)ones(r[3] & 0x1f) : 0;
    if (S->ver >= 5)
        S->fixed_mask |= r[2];
    S->fixed_mask &= 0xf;
}

static uint64_t counter_bits(const struct side *S)
{
    return ones(S->n_gp) | (uint64_t)S->fixed_mask << 32;
}

static uint64_t read_or0(struct side *S, uint32_t msr, unsigned cpl)
{
    uint64_t v = 0;
    if (g_rdmsr(S, msr, &v, cpl))
        v = 0;
    return v;
}

static bool lvt_nmi(uint32_t lvt)
{
    return !(lvt & LVT_MASKED) && (lvt & LVT_DM_MASK) == LVT_DM_NMI;
}

/* the guest never unmasks / changes its LVT entry over an unhandled overflow (it clears the
 * status first), and never combines legacy freeze with a non-NMI entry unless the
 * configuration studies that gap */
static void g_lvtpc(struct side *S, uint32_t lvt, unsigned cpl)
{
    if (S->ver >= 2) {
        uint64_t st = read_or0(S, MSR_CORE_PERF_GLOBAL_STATUS, cpl) & counter_bits(S);
        if (st)
            g_wrmsr(S, MSR_CORE_PERF_GLOBAL_OVF_CTRL, st, cpl);
        uint64_t dbg = 0;
        if (S->ver < 4 && !S->cfg->gap && !lvt_nmi(lvt) && !g_rdmsr(S, 0x1d9, &dbg, cpl) &&
            (dbg & PMU_DEBUGCTL_FREEZE_PERFMON))
            g_wrmsr(S, 0x1d9, dbg & ~PMU_DEBUGCTL_FREEZE_PERFMON, cpl);
    }
    S->pmu.lvtpc = lvt; /* the guest's APIC (passes through) */
    retire(S, cpl);
    insn_end(S, cpl);
}

/* the guest turns on a counter's PMI only over a clear overflow bit (it acknowledges a stale
 * one first): a set PMI-enabled bit then always stands for a PMI (docs/lbr.md, the invariant
 * the VMM's NMI rule rests on) */
static void ack_before_pmi(struct side *S, uint64_t bits)
{
    uint64_t st = read_or0(S, MSR_CORE_PERF_GLOBAL_STATUS, 0) & bits;
    if (st)
        g_wrmsr(S, MSR_CORE_PERF_GLOBAL_OVF_CTRL, st, 0);
}

static const uint32_t rd_msrs[] = {
    0xc1,  0xc2,  0xc3,  0xc8,  0x186, 0x187, 0x188, 0x18d, 0x309, 0x30a, 0x30b, 0x30c, 0x38d,
    0x38e, 0x38f, 0x390, 0x391, 0x392, 0x4c1, 0x4c2, 0x4c4, 0x4c8, 0x1d9, 0x1c9, 0x393, 0x30d,
};
#define N_RD_MSRS (sizeof(rd_msrs) / sizeof(rd_msrs[0]))

static void guest_op(struct side *S, const struct op *o)
{
    unsigned cpl = o->cpl;
    bool pmu = S->ver >= 1;
    switch (o->k) {
    case O_RETIRE:
        pmum_retire(&S->pmu, 1 + o->n % 3000, cpl);
        insn_end(S, cpl);
        break;
    case O_CYCLES:
        pmum_cycles(&S->pmu, 1 + o->n % 5000, cpl);
        insn_end(S, cpl);
        break;
    case O_BRANCH: {
        uint64_t base = cpl ? USER_BASE : KERN_BASE;
        lbrm_branch(&S->lbr, base + (o->v & 0xffff), base + (o->v >> 16 & 0xffff),
                    (enum lbrm_br)(o->a % LBRM_FAR), cpl, false);
        retire(S, cpl);
        insn_end(S, cpl);
        break;
    }
    case O_PROGRAM_GP: {
        if (!pmu || !S->n_gp)
            break;
        static const uint64_t ev[] = {0x00c0, 0x003c, 0x00c4, 0x00c0 | 1ull << 24};
        uint64_t v = ev[o->b % 4] | (o->v & (EVTSEL_USR | EVTSEL_OS | EVTSEL_INT)) |
                     (o->a & 0x80 ? 0 : EVTSEL_EN);
        if ((v & EVTSEL_INT) && S->ver >= 2)
            ack_before_pmi(S, BIT(o->a % S->n_gp));
        g_wrmsr(S, MSR_ARCH_PERFMON_EVENTSEL0 + o->a % S->n_gp, v, 0);
        break;
    }
    case O_PROGRAM_FIXED: {
        if (S->ver < 2)
            break;
        uint64_t v = 0;
        for (unsigned i = 0; i < 4; i++)
            if (S->fixed_mask & BIT(i))
                v |= (o->v >> (4 * i) & 0xb) << (4 * i);
        uint64_t pmi = 0;
        for (unsigned i = 0; i < 4; i++)
            if (v & FIXED_CTRL_PMI(i))
                pmi |= BIT(32 + i);
        ack_before_pmi(S, pmi);
        g_wrmsr(S, MSR_CORE_PERF_FIXED_CTR_CTRL, v, 0);
        break;
    }
    case O_SET_COUNTER: {
        if (!pmu)
            break;
        uint64_t k = (o->b & 6) ? 1 + o->n % 2500 : 1 + o->n % 3; /* often the next event */
        if ((o->a & 1) && S->fixed_mask) {
            unsigned f = o->a >> 1 & 3;
            while (!(S->fixed_mask & BIT(f)))
                f = (f + 1) & 3;
            g_wrmsr(S, MSR_CORE_PERF_FIXED_CTR0 + f, ones(S->fixed_w) - k + 1, 0);
        } else if (S->n_gp) {
            unsigned i = (o->a >> 1 & 7) % S->n_gp;
            if (o->b & 1) /* legacy write: -k sign-extended */
                g_wrmsr(S, MSR_IA32_PERFCTR0 + i, (uint32_t)-k, 0);
            else
                g_wrmsr(S, MSR_IA32_PMC0 + i, ones(S->gp_w) - k + 1, 0);
        }
        break;
    }
    case O_GCTL: {
        if (S->ver < 2)
            break;
        uint64_t v = o->v & counter_bits(S);
        if ((o->b & 7) == 0) /* a reserved bit */
            v |= BIT(o->a % 64);
        g_wrmsr(S, 0x38f, v, 0);
        break;
    }
    case O_RDMSR: {
        uint64_t v;
        if (pmu)
            g_rdmsr(S, rd_msrs[o->a % N_RD_MSRS], &v, 0);
        break;
    }
    case O_WRMSR_RAW: {
        uint32_t msr = rd_msrs[o->a % N_RD_MSRS];
        /* LBR MSRs are test_lbr_diff's; STATUS_SET / RESET follow the guest's rules below */
        if (!pmu || msr == 0x1d9 || msr == 0x1c9 || msr == 0x391 || msr == 0x390)
            break;
        g_wrmsr(S, msr, o->b & 1 ? o->v : o->v & 0xffffffffull, 0);
        break;
    }
    case O_RESET: {
        if (S->ver < 2)
            break;
        uint64_t st = read_or0(S, MSR_CORE_PERF_GLOBAL_STATUS, 0);
        uint64_t v = o->b & 1 ? st : st & o->v;
        if ((o->b & 6) == 0)
            v |= o->v & (BIT(58) | BIT(59) | BIT(62) | BIT(61)); /* some reserved */
        g_wrmsr(S, MSR_CORE_PERF_GLOBAL_OVF_CTRL, v, 0);
        break;
    }
    case O_SET: {
        if (S->ver < 2)
            break;
        uint64_t v = o->v & (counter_bits(S) | BIT(58) | BIT(59) | BIT(62) | BIT(63));
        /* a guest sets overflow bits only with its LVT entry masked (a state restore): with
         * it unmasked they would stand for overflows no PMI was raised for */
        if (!(S->pmu.lvtpc & LVT_MASKED))
            v &= ~counter_bits(S);
        g_wrmsr(S, MSR_CORE_PERF_GLOBAL_STATUS_SET, v, 0);
        break;
    }
    case O_LVTPC: {
        static const uint32_t lvts[] = {LVT_DM_NMI, LVT_DM_FIXED | PMI_VECTOR,
                                        LVT_MASKED | LVT_DM_NMI, LVT_MASKED | PMI_VECTOR};
        g_lvtpc(S, lvts[o->a % 4], 0);
        break;
    }
    case O_DEBUGCTL: {
        uint64_t v = (o->a & 1 ? BIT(0) : 0) | (o->a & 2 ? BIT(11) : 0) | (o->a & 4 ? BIT(12) : 0);
        if (S->ver < 2)
            v &= BIT(0);
        if (S->ver < 4 && !S->cfg->gap && !lvt_nmi(S->pmu.lvtpc))
            v &= ~BIT(12);
        g_wrmsr(S, 0x1d9, v, 0);
        break;
    }
    case O_HANDLER: {
        /* a Linux-like PMI handler (intel_pmu_handle_irq): stop all, ack, restart, unmask */
        if (S->ver < 2)
            break;
        uint64_t g = read_or0(S, 0x38f, 0);
        g_wrmsr(S, 0x38f, 0, 0);
        uint64_t st = read_or0(S, MSR_CORE_PERF_GLOBAL_STATUS, 0);
        uint64_t ack =
            st & (counter_bits(S) | BIT(62) | BIT(63) | (S->ver >= 4 ? BIT(58) | BIT(59) : 0));
        if (ack)
            g_wrmsr(S, MSR_CORE_PERF_GLOBAL_OVF_CTRL, ack, 0);
        g_wrmsr(S, 0x38f, g & counter_bits(S), 0);
        g_lvtpc(S, S->pmu.lvtpc & ~LVT_MASKED, 0);
        break;
    }
    case O_CPUID: {
        uint32_t r[4];
        bool first = S->step == 0;
        g_cpuid(S, first || (o->a & 1) ? 0xa : 1, r, cpl);
        if (first)
            learn(S, r);
        break;
    }
    case O_EXIT:
        g_exit_insn(S, o->a % 4 != 0, cpl);
        break;
    case O_SHOOTDOWN:
        if (S->t) { /* the VMM's NMI alone: it exits, the VMM answers it, nothing for the guest */
            struct twin *t = S->t;
            uint64_t fresh = status_now(S) & pmi_bits_now(S) & ~S->observed;
            vmm_exit(S);
            bool owed_before = t->nmi_owed;
            vmm_nmi(S, true);
            if (t->nmi_owed && !owed_before && !t->cut && fresh && !(fresh & ~S->not_nmi)) {
                /* the residual (docs/lbr.md): the overflow bits the VMM takes for a merged
                 * PMI's had their PMI dropped (masked entry) or sent as a fixed interrupt */
                t->cut = "an overflow whose PMI was not an NMI, taken for a merged PMI";
                S->cut_step = S->step;
            }
            vmm_entry(S, cpl);
        }
        break;
    }
}

/* guest-visible state at the end of a step */
static void snap(struct side *S)
{
    struct run *r = S->run;
    for (unsigned i = 0; i < PMUM_GP; i++)
        logv(r, S->step, T_SNAP, S->pmu.pmc[i]);
    for (unsigned i = 0; i < PMUM_FIXED; i++)
        logv(r, S->step, T_SNAP, S->pmu.fixed[i]);
    uint64_t gctl = S->pmu.global_ctrl;
    if (S->t && S->t->d.mode == PMU_HIDDEN)
        gctl = S->t->virt_gctl; /* what the guest reads */
    logv(r, S->step, T_SNAP, gctl);
    logv(r, S->step, T_SNAP, status_now(S));
    logv(r, S->step, T_SNAP, S->pmu.fixed_ctrl);
    logv(r, S->step, T_SNAP, S->lbr.debugctl);
    logv(r, S->step, T_SNAP, S->lbr.tos);
    logv(r, S->step, T_SNAP, S->pmu.lvtpc);
    for (unsigned i = 0; i < PMUM_GP; i++)
        logv(r, S->step, T_SNAP, S->pmu.evtsel[i]);
}

static void side_init(struct side *S, const struct config *c, const struct pmum_cpu *pc,
                      struct twin *t, struct run *r)
{
    memset(S, 0, sizeof(*S));
    struct lbrm_cpu lc = lbr_cpu(pc->version);
    lbrm_init(&S->lbr, &lc);
    pmum_init(&S->pmu, pc, &S->lbr);
    S->t = t;
    S->run = r;
    S->cfg = c;
    S->cut_step = ~0u;
}

static void run_side(struct side *S, const struct op *prog, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        S->step = i;
        S->merge_pending = S->t && i + 1 < n && prog[i + 1].k == O_SHOOTDOWN && (prog[i + 1].b & 1);
        S->merged = false;
        guest_op(S, &prog[i]);
        snap(S);
        if (S->merged) { /* the VMM NMI of the next op merged into a PMI's: it has happened */
            S->step = ++i;
            snap(S);
        }
    }
}

/* first difference, or -1 */
static long compare(const struct run *a, const struct run *b, uint32_t cut, char *why, size_t n)
{
    unsigned i = 0;
    for (; i < a->n && i < b->n; i++) {
        if (a->r[i].step >= cut || b->r[i].step >= cut)
            return -1;
        if (a->r[i].step != b->r[i].step || a->r[i].tag != b->r[i].tag ||
            a->r[i].val != b->r[i].val) {
            snprintf(why, n, "step %u: bare tag %u = %#llx, VMM step %u tag %u = %#llx",
                     a->r[i].step, a->r[i].tag, (unsigned long long)a->r[i].val, b->r[i].step,
                     b->r[i].tag, (unsigned long long)b->r[i].val);
            return i;
        }
    }
    if (a->n != b->n) {
        snprintf(why, n, "record counts %u vs %u", a->n, b->n);
        return i;
    }
    return -1;
}

static bool stacks_equal(const struct lbrm *a, const struct lbrm *b)
{
    return a->tos == b->tos && !memcmp(a->from, b->from, sizeof(a->from)) &&
           !memcmp(a->to, b->to, sizeof(a->to));
}

struct outcome {
    unsigned streams, diverged, cut;
    uint64_t compared; /* steps compared (up to a residual's cut) */
    uint64_t exits, root_changed, pmis, merged, overflows;
    char first[300], cut_why[120];
};

static struct outcome run_config(enum cfg_id id, enum mutant mut, unsigned streams)
{
    struct config c = config(id);
    struct pmu_decision d = decide(&c);
    struct pmum_cpu ref = c.host;
    if (d.mode == PMU_HIDDEN)
        ref = (struct pmum_cpu){0}; /* the guest must see a CPU without a PMU */
    struct outcome out = {0};
    struct op *prog = calloc(n_ops, sizeof(*prog));
    assert_non_null(prog);
    for (unsigned s = 1; s <= streams; s++) {
        gen(prog, n_ops, s * 7919 + id);
        struct run ra = {0}, rb = {0};
        struct side bare, vm;
        side_init(&bare, &c, &ref, NULL, &ra);
        run_side(&bare, prog, n_ops);
        struct twin t = {.d = d, .mut = mut, .vrng = s * 31 + 1};
        side_init(&vm, &c, &c.host, &t, &rb);
        t.vmcs_gctl = vm.pmu.global_ctrl; /* vcpu_setup.c: the caller's value */
        run_side(&vm, prog, n_ops);
        char why[240] = "";
        long at = compare(&ra, &rb, vm.cut_step, why, sizeof(why));
        bool lbr_ok = vm.cut_step != ~0u || stacks_equal(&bare.lbr, &vm.lbr);
        if (at < 0 && !lbr_ok)
            snprintf(why, sizeof(why), "final LBR stacks differ");
        out.streams++;
        out.exits += t.exits;
        out.root_changed += t.root_changed;
        out.pmis += ra.pmis;
        out.merged += t.nmis_merged;
        out.overflows += bare.pmu.overflows;
        out.compared += vm.cut_step < n_ops ? vm.cut_step : n_ops;
        if (t.cut) {
            out.cut++;
            snprintf(out.cut_why, sizeof(out.cut_why), "%s", t.cut);
        }
        if (at >= 0 && getenv("PMU_DIFF_DEBUG") && !out.diverged) { /* the program near it */
            uint32_t st = ra.r[at].step;
            for (uint32_t i = st > 6 ? st - 6 : 0; i <= st && i < n_ops; i++)
                fprintf(stderr, "  step %u: op %u cpl %u a %#x b %#x n %u v %#llx\n", i, prog[i].k,
                        prog[i].cpl, prog[i].a, prog[i].b, prog[i].n,
                        (unsigned long long)prog[i].v);
            for (long i = at > 30 ? at - 30 : 0; i <= at + 3 && i < (long)ra.n && i < (long)rb.n;
                 i++)
                fprintf(stderr, "  %5ld bare %u/%u %#llx  vmm %u/%u %#llx\n", i, ra.r[i].step,
                        ra.r[i].tag, (unsigned long long)ra.r[i].val, rb.r[i].step, rb.r[i].tag,
                        (unsigned long long)rb.r[i].val);
        }
        if (at >= 0 || !lbr_ok || t.root_changed) {
            if (!out.diverged)
                snprintf(out.first, sizeof(out.first), "stream %u: %s%s", s, why,
                         t.root_changed ? " (root instructions counted)" : "");
            out.diverged++;
        }
        free(ra.r);
        free(rb.r);
    }
    free(prog);
    return out;
}

/* --- the tests --- */

static void test_configs_decide(void **state)
{
    (void)state;
    static const enum pmu_mode want[CFG_ALL] = {
        PMU_SWITCHED, PMU_SWITCHED, PMU_SWITCHED, PMU_SWITCHED, PMU_SWITCHED,
        PMU_HIDDEN,   PMU_HIDDEN,   PMU_HIDDEN,   PMU_ABSENT,   PMU_SWITCHED,
    };
    for (enum cfg_id id = 0; id < CFG_ALL; id++) {
        struct config c = config(id);
        struct pmu_decision d = decide(&c);
        print_message("%-62s -> %s\n", c.name, d.reason);
        assert_int_equal(d.mode, want[id]);
        assert_int_equal(d.legacy_freeze, d.mode == PMU_SWITCHED && c.host.version < 4);
        /* only IA32_PERF_GLOBAL_CTRL exits, and only where there is a PMU */
        for (uint32_t m = 0; m < 0x2000; m++)
            assert_int_equal(pmu_intercepts(&d, m), m == 0x38f && d.mode != PMU_ABSENT);
    }
}

static void test_configs_identical(void **state)
{
    (void)state;
    for (enum cfg_id id = 0; id < CFG_N; id++) {
        struct outcome o = run_config(id, MUT_NONE, n_streams);
        unsigned pct = (unsigned)(o.compared * 100 / ((uint64_t)o.streams * n_ops));
        print_message("%-62s %u x %u ops: %llu exits, %llu overflows, %llu PMIs, %llu VMM NMIs "
                      "merged with a PMI, root counted %llu, differences %u, residual cuts %u "
                      "(%u%% of steps compared)%s%s\n",
                      config(id).name, o.streams, n_ops, (unsigned long long)o.exits,
                      (unsigned long long)o.overflows, (unsigned long long)o.pmis,
                      (unsigned long long)o.merged, (unsigned long long)o.root_changed, o.diverged,
                      o.cut, pct, o.cut ? " -- last: " : "", o.cut ? o.cut_why : "");
        if (o.diverged)
            fail_msg("%s: %s", config(id).name, o.first);
        /* a residual must stay rare, or the proof says little: on v4+ (STATUS_SET) at most 1
         * stream in 20 cut; on v2/v3 (emulated overflows are not exact) 60% of steps compared */
        if (config(id).host.version >= 4 ? o.cut * 20 > o.streams : pct < 60)
            fail_msg("%s: %u of %u streams cut, %u%% compared (%s)", config(id).name, o.cut,
                     o.streams, pct, o.cut_why);
    }
}

/* the gap the design documents must be real: legacy freeze with a fixed / masked LVT entry */
static void test_known_gap_shows(void **state)
{
    (void)state;
    struct outcome o = run_config(CFG_GAP_V3, MUT_NONE, n_streams);
    print_message("%-62s known gap: %u of %u streams differ; %s\n", config(CFG_GAP_V3).name,
                  o.diverged, o.streams, o.first);
    assert_true(o.diverged > 0);
    assert_int_equal(o.root_changed, 0);
}

static void test_mutants_caught(void **state)
{
    (void)state;
    static const struct {
        enum mutant m;
        enum cfg_id id;
    } plant[] = {
        {MUT_NO_EXIT_LOAD, CFG_V4_4},   {MUT_NO_EXIT_LOAD, CFG_V2_2},
        {MUT_NO_ENTRY_LOAD, CFG_V5_8},  {MUT_ROOT_PROBE, CFG_V4_4},
        {MUT_ROOT_PROBE, CFG_V3_4},     {MUT_GCTL_NO_CHECK, CFG_V5_8},
        {MUT_GCTL_NO_CHECK, CFG_V2_2},  {MUT_PMI_LOST, CFG_V4_8},
        {MUT_PMI_LOST, CFG_V3_4},       {MUT_PMI_TWICE, CFG_V4_4},
        {MUT_PMI_TWICE, CFG_V5_8},      {MUT_FREEZE_IGNORED, CFG_V3_4},
        {MUT_FREEZE_IGNORED, CFG_V2_2}, {MUT_NO_RETIRE, CFG_V4_4},
        {MUT_NO_RETIRE, CFG_V5_8},      {MUT_CPUID_LEAK, CFG_V5_NOCTL},
        {MUT_CPUID_LEAK, CFG_V1},       {MUT_NO_LBR_FREEZE, CFG_V4_4},
        {MUT_NO_LBR_FREEZE, CFG_V5_8},
    };
    for (unsigned i = 0; i < sizeof(plant) / sizeof(plant[0]); i++) {
        unsigned streams = n_streams < 30 ? n_streams : 30;
        struct outcome o = run_config(plant[i].id, plant[i].m, streams);
        print_message("mutant %-36s on %-24.24s: %u of %u streams differ; %s\n",
                      mut_name[plant[i].m], config(plant[i].id).name, o.diverged, o.streams,
                      o.first);
        if (!o.diverged)
            fail_msg("mutant '%s' not caught", mut_name[plant[i].m]);
    }
}

int main(void)
{
    if (getenv("PMU_DIFF_STREAMS"))
        n_streams = (unsigned)strtoul(getenv("PMU_DIFF_STREAMS"), NULL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs_decide),
        cmocka_unit_test(test_configs_identical),
        cmocka_unit_test(test_known_gap_shows),
        cmocka_unit_test(test_mutants_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
