/* SPDX-License-Identifier: MIT */
/*
 * The LBR differential.  One random guest program -- taken branches of every class
 * at CPL 0 and 3, PMIs, #DBs, WRMSR/RDMSR of every LBR MSR with valid and reserved values,
 * CPUID, VM exits for unrelated reasons -- runs twice:
 *   (a) bare metal: the LBR model (tests/model/lbr_model.c) of the CPU the guest must see;
 *   (b) under the VMM: the LBR model of the real CPU, plus what the VMM and the VMX transitions
 *       do -- the policy's decision (vmm/lbr/lbr_policy.c, the real file), its MSR bitmap bits
 *       and answers, exit_msr.c's order (LBR hook, then IA32_XSS through xss_policy), CPUID
 *       through cpuid_policy + the LBR filter, and at every exit / entry the SDM's transitions:
 *       DEBUGCTL saved ("save debug controls") and cleared (Vol. 3C 28.5.1), IA32_LBR_CTL saved
 *       and cleared ("clear IA32_LBR_CTL"), the VMM's own branches at CPL 0, DEBUGCTL and
 *       LBR_CTL loaded at entry, an injected event recorded like a delivered one (Vol. 3C
 *       27.6.1: "the transition causes a last-branch record to be logged if the LBR bit is set").
 * Every RDMSR value and #GP verdict, every CPUID answer and the final stack must be identical,
 * except LBR_INFO cycle counts, which may only be larger under the VMM (its time between two
 * guest branches); no FROM/TO the guest reads may be a VMM address.  Each planted defect
 * (mutant) of the VMM side must be caught.
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
#include "lbr/lbr_policy.h"
#include "emul/guest_policy.h"
#include "emul/msr_owner.h"

#define BIT(n)      (1ull << (n))
#define VMM_BASE    0x7f000000ull /* where the VMM's code is (identity-mapped, CPL 0) */
#define VMM_SIZE    0x00200000ull
#define USER_BASE   0x0000000000400000ull
#define KERN_BASE   0xffffffff81000000ull
#define GP_HANDLER  0xffffffff81e00d00ull
#define NMI_HANDLER 0xffffffff81e01500ull
#define SAVE_DBG    (1u << 2)
#define LOAD_DBG    (1u << 2)

static unsigned n_streams = 200, n_ops = 1500; /* LBR_DIFF_STREAMS overrides */

/* --- configurations: the real CPU, and the CPU the guest must see --- */

struct config {
    const char *name;
    uint32_t family, model;
    struct lbrm_cpu host; /* the real CPU */
    struct lbrm_cpu ref;  /* what the guest must see: bare metal of the reference */
    uint32_t exit_ctls, entry_ctls, exit_allowed1, entry_allowed1;
};

static struct lbr_host host_of(const struct config *c)
{
    const struct lbrm_cpu *h = &c->host;
    struct lbr_host x = {
        .max_leaf = 0x20,
        .family = c->family,
        .model = c->model,
        .cpuid1_ecx = (h->ds_cpl ? CPUID_1_ECX_DS_CPL : 0) | (h->pdcm ? CPUID_1_ECX_PDCM : 0),
        .cpuid1_edx = h->ds ? CPUID_1_EDX_DS : 0,
        .cpuid7_ebx = h->rtm ? CPUID_7_EBX_RTM : 0,
        .cpuid7_ecx = h->bus_lock ? CPUID_7_ECX_BUS_LOCK_DETECT : 0,
        .cpuid7_edx = h->arch ? CPUID_7_EDX_ARCH_LBR : 0,
        .pmu_version = h->pmu_version,
        .leaf1c = {h->arch ? h->leaf1c[0] : 0, h->arch ? h->leaf1c[1] : 0,
                   h->arch ? h->leaf1c[2] : 0},
        .xss_supported = h->xss_supported,
        .perf_caps_ok = h->perf_caps_ok,
        .perf_caps = h->perf_caps_ok ? h->perf_caps : 0,
        .misc_enable_ok = true,
        .misc_enable = h->bts_unavail ? MISC_ENABLE_BTS_UNAVAIL : 0,
        .exit_ctls = c->exit_ctls,
        .entry_ctls = c->entry_ctls,
        .exit_allowed1 = c->exit_allowed1,
        .entry_allowed1 = c->entry_allowed1,
    };
    return x;
}

static struct lbrm_cpu skl(void)
{
    return (struct lbrm_cpu){
        .has_debugctl = true,
        .ds = true,
        .ds_cpl = true,
        .pdcm = true,
        .rtm = true,
        .freeze_smm = true,
        .pmu_version = 4,
        .legacy = true,
        .nr = 32,
        .fmt = 5,
        .from = 0x680,
        .to = 0x6c0,
        .info = 0xdc0,
        .call_stack = true,
        .perf_caps_ok = true,
        .perf_caps = 0x33c5, /* LBR_FMT 5, PEBS trap/arch regs/format 3, SMM freeze, FW write */
        .xss_supported = BIT(8),
    };
}

static void without_pt_xss(struct config *c)
{
    c->ref.xss_supported &= ~BIT(8); /* the guest never gets IA32_XSS[8] (guest_policy.h) */
}

enum cfg_id {
    CFG_SKX,
    CFG_HSW,
    CFG_IVB,
    CFG_ARCH,
    CFG_ARCH_NO_VMX,
    CFG_NESTED,
    CFG_NO_DEBUG_CTLS,
    CFG_BOCHS,
    CFG_UNKNOWN,
    CFG_N
};

static struct config config(enum cfg_id id)
{
    struct config c = {.family = 6,
                       .exit_ctls = SAVE_DBG,
                       .entry_ctls = LOAD_DBG,
                       .exit_allowed1 = SAVE_DBG,
                       .entry_allowed1 = LOAD_DBG};
    switch (id) {
    case CFG_SKX:
        c.name = "Skylake-SP 06_55H, LBR_FMT 5, PMU v4";
        c.model = 0x55;
        c.host = skl();
        c.ref = c.host;
        break;
    case CFG_HSW:
        c.name = "Haswell 06_3CH, LBR_FMT 4, PMU v3 (legacy freeze)";
        c.model = 0x3c;
        c.host = skl();
        c.host.pmu_version = 3, c.host.nr = 16, c.host.fmt = 4, c.host.info = 0;
        c.host.perf_caps = 0x2c4, c.host.freeze_smm = false;
        c.ref = c.host;
        break;
    case CFG_IVB:
        c.name = "Ivy Bridge 06_3AH, LBR_FMT 3, no call-stack mode";
        c.model = 0x3a;
        c.host = skl();
        c.host.pmu_version = 3, c.host.nr = 16, c.host.fmt = 3, c.host.info = 0;
        c.host.call_stack = false, c.host.rtm = false;
        c.host.perf_caps = 0x1c3, c.host.freeze_smm = false;
        c.ref = c.host;
        break;
    case CFG_ARCH:
    case CFG_ARCH_NO_VMX:
        c.name = id == CFG_ARCH ? "arch LBR only (06_8FH), load/clear IA32_LBR_CTL"
                                : "arch LBR only, no load/clear IA32_LBR_CTL: hidden";
        c.model = 0x8f;
        c.host = skl();
        c.host.legacy = false, c.host.pmu_version = 5, c.host.bus_lock = true;
        c.host.perf_caps = 0x3f | 0x4000, c.host.arch = true;
        c.host.leaf1c[0] = 0x4000000f, c.host.leaf1c[1] = 7, c.host.leaf1c[2] = 7;
        c.host.xss_supported = BIT(8) | BIT(15);
        c.ref = c.host;
        if (id == CFG_ARCH) {
            c.exit_allowed1 |= VM_EXIT_CLEAR_IA32_LBR_CTL;
            c.entry_allowed1 |= VM_ENTRY_LOAD_IA32_LBR_CTL;
        } else {
            c.ref.arch = false;
            c.ref.xss_supported &= ~BIT(15);
            c.ref.perf_caps &= ~0x3full;
        }
        break;
    case CFG_NESTED:
        c.name = "nested KVM, Skylake model, LBR_FMT 0, LBR MSRs #GP";
        c.model = 0x55;
        c.host = skl();
        c.host.legacy = false, c.host.perf_caps = 0x2000;
        c.ref = c.host;
        break;
    case CFG_NO_DEBUG_CTLS:
        c.name = "Skylake without save/load debug controls: LBR hidden, DEBUGCTL virtual";
        c.model = 0x5e;
        c.exit_ctls = c.entry_ctls = 0;
        c.host = skl();
        c.ref = c.host;
        c.ref.legacy = false;
        c.ref.debugctl_inert = true; /* documented: kept, not in effect (docs/lbr.md) */
        c.ref.perf_caps &= ~0x3full;
        break;
    case CFG_BOCHS:
        c.name = "Bochs 2.7 corei7_skylake_x (ignore_bad_msrs=0)";
        c.model = 0x55;
        c.host = (struct lbrm_cpu){.pdcm = true, .ds = true, .xss_supported = BIT(8)};
        c.ref = c.host;
        break;
    case CFG_UNKNOWN:
        c.name = "unknown model 06_97H with a Skylake-like stack: LBR_FMT 0, MSRs the CPU's";
        c.model = 0x97;
        c.host = skl();
        c.ref = c.host;
        c.ref.perf_caps &= ~0x3full; /* documented: the stack passes, the format is not shown */
        break;
    case CFG_N:
        break;
    }
    without_pt_xss(&c);
    return c;
}

/* --- the guest program --- */

enum op_kind { OP_BRANCH, OP_WRMSR, OP_RDMSR, OP_CPUID, OP_EXIT, OP_PMI, OP_DB };

struct op {
    enum op_kind k;
    uint64_t clocks; /* before the op */
    uint64_t from, to, val;
    uint32_t msr, leaf, sub;
    enum lbrm_br t;
    unsigned cpl;
    bool mispred;
};

static uint64_t rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t guest_addr(uint64_t *s, unsigned *cpl)
{
    bool kern = rng(s) & 1;
    *cpl = kern ? 0 : 3;
    return (kern ? KERN_BASE : USER_BASE) + (rng(s) % 0x100000);
}

static const uint32_t msr_pool[] = {0x1d9,  0x1c8,  0x1c9,  0x345, 0x14ce, 0x14cf,
                                    0x38e,  0x390,  0xda0,  0x680, 0x6c0,  0xdc0,
                                    0x1500, 0x1600, 0x1200, 0x6a0, 0x40};

static uint64_t msr_value(uint64_t *s, uint32_t msr)
{
    uint64_t r = rng(s);
    bool wild = (r & 15) == 0; /* sometimes any 64-bit value: reserved bits #GP */
    if (wild)
        return rng(s);
    switch (msr) {
    case 0x1d9: { /* mostly LBR (+ freeze), some other valid bits */
        uint64_t v = (r >> 8) & 3 ? DEBUGCTLMSR_LBR : 0;
        if ((r >> 10) & 1)
            v |= DEBUGCTLMSR_FREEZE_LBRS_ON_PMI;
        if (((r >> 11) & 7) == 0)
            v |= DEBUGCTLMSR_BTF | DEBUGCTLMSR_RTM_DEBUG | DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI;
        if (((r >> 14) & 15) == 0) { /* one reserved bit */
            static const unsigned rsv[] = {3, 4, 5, 13, 16, 31, 63};
            v |= BIT(rsv[(r >> 18) % 7]);
        }
        return v;
    }
    case 0x1c8: /* half the time no filter, else random classes (bit 10: reserved) */
        return (r >> 20) & 1 ? 0 : (r >> 8) & (((r >> 21) & 7) ? 0x3ff : 0x7ff);
    case 0x1c9:
        return (r >> 8) % 40;
    case 0x14ce: {
        uint64_t v = ARCH_LBR_CTL_LBREN | ARCH_LBR_CTL_OS | ARCH_LBR_CTL_USR;
        v |= (r >> 8) & (ARCH_LBR_CTL_FILTER | ARCH_LBR_CTL_CALL_STACK);
        if (((r >> 30) & 7) == 0)
            v = (r >> 8) & 0xff00ffull; /* reserved bits likely */
        return v;
    }
    case 0x14cf: {
        static const uint64_t d[] = {8, 16, 24, 32, 40, 64, 0, 7, 100};
        return d[(r >> 8) % 9];
    }
    case 0x390:
        return (r >> 8) & 1 ? BIT(58) : 0;
    case 0xda0: {
        static const uint64_t x[] = {0, BIT(15), BIT(8), BIT(15) | BIT(8), BIT(11)};
        return x[(r >> 8) % 5];
    }
    }
    return rng(s);
}

static uint32_t pick_msr(uint64_t *s)
{
    uint32_t m = msr_pool[rng(s) % (sizeof(msr_pool) / sizeof(msr_pool[0]))];
    if (m == 0x680 || m == 0x6c0 || m == 0xdc0)
        m += rng(s) % 40; /* in and past a 32- / 16-entry stack */
    if (m == 0x1500 || m == 0x1600 || m == 0x1200)
        m += rng(s) % 70;
    return m;
}

static void gen(struct op *p, unsigned n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;
    for (unsigned i = 0; i < n; i++) {
        struct op o = {.clocks = 1 + rng(&s) % 300};
        unsigned r = rng(&s) % 100, cpl;
        if (r < 60) {
            o.k = OP_BRANCH;
            o.from = guest_addr(&s, &cpl);
            o.to = guest_addr(&s, &o.cpl);
            o.t = (enum lbrm_br)(rng(&s) % (LBRM_EVENT + 1));
            o.mispred = (rng(&s) & 7) == 0;
        } else if (r < 71) {
            o.k = OP_WRMSR;
            o.msr = pick_msr(&s);
            o.val = msr_value(&s, o.msr);
        } else if (r < 84) {
            o.k = OP_RDMSR;
            o.msr = pick_msr(&s);
        } else if (r < 87) {
            static const uint32_t lv[][2] = {{7, 0}, {0x1c, 0}, {0xd, 1}, {0xd, 15}};
            unsigned j = rng(&s) % 4;
            o.k = OP_CPUID;
            o.leaf = lv[j][0];
            o.sub = lv[j][1];
        } else if (r < 95) {
            o.k = OP_EXIT;
        } else if (r < 98) {
            o.k = OP_PMI;
            if (i + 1 < n && (rng(&s) & 3)) { /* its handler unfreezes, as perf does */
                p[i] = o;
                o = (struct op){.k = OP_WRMSR, .clocks = 1, .msr = 0x390, .val = BIT(58)};
                if (rng(&s) & 1)
                    o.msr = 0x1d9, o.val = DEBUGCTLMSR_LBR | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI;
                i++;
            }
        } else {
            o.k = OP_DB;
        }
        o.from = o.from ? o.from : guest_addr(&s, &cpl); /* the RIP of a non-branch op */
        p[i] = o;
    }
}

/* --- what the guest sees: one record per result --- */

struct obs {
    uint32_t what; /* msr or leaf */
    int gp;
    uint64_t v[4];
};

struct run {
    struct obs *o;
    unsigned n, cap;
    unsigned vmm_addr_seen; /* FROM/TO values inside the VMM */
    uint64_t exits, vmm_records;
    uint64_t msr_ops;   /* guest RDMSR / WRMSR, exiting or not */
    uint64_t lbr_exits; /* exits the LBR policy's MSR bitmap bits caused, PERF_CAPABILITIES aside */
};

static void see(struct run *r, uint32_t what, int gp, const uint64_t *v, unsigned nv)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 4096;
        r->o = realloc(r->o, r->cap * sizeof(*r->o));
        assert_non_null(r->o);
    }
    struct obs *x = &r->o[r->n++];
    memset(x, 0, sizeof(*x));
    x->what = what;
    x->gp = gp;
    for (unsigned i = 0; i < nv; i++)
        x->v[i] = v[i];
}

static bool is_from_to(uint32_t msr)
{
    return (msr >= 0x680 && msr < 0x6e0) || (msr >= 0x1500 && msr < 0x1540) ||
           (msr >= 0x1600 && msr < 0x1640);
}

static bool is_info(uint32_t msr)
{
    return (msr >= 0xdc0 && msr < 0xde0) || (msr >= 0x1200 && msr < 0x1240);
}

/* --- (a) bare metal --- */

static void bare_gp(struct lbrm *m, uint64_t rip)
{
    lbrm_branch(m, rip, GP_HANDLER, LBRM_EVENT, 0, false); /* the #GP is delivered */
}

static void bare_op(struct lbrm *m, const struct op *o, struct run *r)
{
    lbrm_tick(m, o->clocks);
    uint64_t v = o->val;
    int gp;
    uint32_t q[4];
    uint64_t w[4];
    switch (o->k) {
    case OP_BRANCH:
        lbrm_branch(m, o->from, o->to, o->t, o->cpl, o->mispred);
        break;
    case OP_WRMSR:
        gp = lbrm_wrmsr(m, o->msr, v);
        see(r, o->msr, gp, NULL, 0);
        if (gp)
            bare_gp(m, o->from);
        break;
    case OP_RDMSR:
        gp = lbrm_rdmsr(m, o->msr, &v);
        see(r, o->msr, gp, gp ? NULL : &v, gp ? 0 : 1);
        if (gp)
            bare_gp(m, o->from);
        break;
    case OP_CPUID:
        lbrm_cpuid(m, o->leaf, o->sub, q);
        for (unsigned i = 0; i < 4; i++)
            w[i] = q[i];
        see(r, o->leaf << 8 | o->sub, 0, w, 4);
        break;
    case OP_EXIT:
        break;
    case OP_PMI:
        lbrm_pmi(m);
        lbrm_branch(m, o->from, NMI_HANDLER, LBRM_EVENT, 0, false); /* the PMI's NMI */
        break;
    case OP_DB:
        lbrm_db(m);
        break;
    }
}

/* --- (b) the VMM: policy + VMX transitions on the real CPU's model --- */

enum mutant {
    MUT_NONE,
    MUT_ROOT_DEBUGCTL,   /* the VMM puts the guest's DEBUGCTL back in root after an exit */
    MUT_NO_LOAD_DEBUG,   /* VM entry does not load DEBUGCTL */
    MUT_NO_CLEAR_LBRCTL, /* VM exit does not clear IA32_LBR_CTL */
    MUT_FMT_HIDDEN,      /* PERF_CAPABILITIES.LBR_FMT not shown although supported */
    MUT_XSS_LEAK,        /* IA32_XSS[15] allowed while arch LBR is hidden */
    MUT_LEAF1C_LEAK,     /* CPUID 0x1C not filtered while arch LBR is hidden */
    MUT_NO_HIDE,         /* a hidden stack's MSRs not intercepted */
    MUT_SETUP_CALLER,    /* the VMM's set-up runs with the caller's DEBUGCTL / LBR_CTL */
    MUT_N
};

static const char *const mut_name[MUT_N] = {
    "none",
    "DEBUGCTL restored in root",
    "no DEBUGCTL load at entry",
    "no IA32_LBR_CTL clear at exit",
    "LBR_FMT not shown",
    "XSS[15] leaks",
    "CPUID 0x1C leaks",
    "hidden stack passes through",
    "set-up with the caller's DEBUGCTL",
};

struct twin {
    struct lbrm cpu;
    struct lbr_decision d;
    uint32_t exit_ctls, entry_ctls, exit_allowed1, entry_allowed1;
    uint64_t vmcs_debugctl, vmcs_lbr_ctl;
    uint64_t host_xss;
    enum mutant mut;
    uint64_t vrng;
    struct run *r;
};

static void twin_init(struct twin *t, const struct config *c, enum mutant mut, uint64_t seed)
{
    struct lbr_host h = host_of(c);
    memset(t, 0, sizeof(*t));
    lbrm_init(&t->cpu, &c->host);
    lbr_decide(&h, &t->d);
    t->mut = mut;
    t->exit_ctls = c->exit_ctls | t->d.exit_ctls;
    t->entry_ctls = c->entry_ctls | t->d.entry_ctls;
    t->exit_allowed1 = c->exit_allowed1;
    t->entry_allowed1 = c->entry_allowed1;
    t->host_xss = lbr_xss_filter(&t->d, c->host.xss_supported); /* exit_msr.c's host_xss */
    t->vrng = seed | 1;
    switch (mut) {
    case MUT_NO_LOAD_DEBUG:
        t->entry_ctls &= ~LOAD_DBG;
        break;
    case MUT_NO_CLEAR_LBRCTL:
        t->exit_ctls &= ~VM_EXIT_CLEAR_IA32_LBR_CTL;
        break;
    case MUT_FMT_HIDDEN:
        t->d.perf_caps &= ~PERF_CAP_LBR_FMT;
        break;
    case MUT_XSS_LEAK:
        t->d.xss_hidden = 0;
        t->host_xss = lbr_xss_filter(&t->d, c->host.xss_supported);
        break;
    case MUT_LEAF1C_LEAK:
        memcpy(t->d.leaf1c, c->host.leaf1c, sizeof(t->d.leaf1c));
        break;
    case MUT_NO_HIDE:
        t->d.lay = NULL;
        break;
    default:
        break;
    }
}

static void vm_exit(struct twin *t)
{
    struct lbrm *m = &t->cpu;
    t->r->exits++;
    if (t->exit_ctls & SAVE_DBG)
        t->vmcs_debugctl = m->debugctl;
    m->debugctl = 0; /* SDM Vol. 3C 28.5.1: every VM exit clears IA32_DEBUGCTL */
    /* IA32_LBR_CTL is saved where the CPU has either control [I: as IA32_BNDCFGS, RTIT_CTL] */
    if ((t->exit_allowed1 & VM_EXIT_CLEAR_IA32_LBR_CTL) ||
        (t->entry_allowed1 & VM_ENTRY_LOAD_IA32_LBR_CTL))
        t->vmcs_lbr_ctl = m->ctl;
    if (t->exit_ctls & VM_EXIT_CLEAR_IA32_LBR_CTL)
        m->ctl = 0;
    if (t->mut == MUT_ROOT_DEBUGCTL)
        m->debugctl = t->vmcs_debugctl;
    /* the VMM runs: its own branches at CPL 0, and its time */
    unsigned n = 5 + rng(&t->vrng) % 40;
    uint64_t before = m->records;
    for (unsigned i = 0; i < n; i++) {
        lbrm_tick(m, 1 + rng(&t->vrng) % 50);
        lbrm_branch(m, VMM_BASE + rng(&t->vrng) % VMM_SIZE, VMM_BASE + rng(&t->vrng) % VMM_SIZE,
                    (enum lbrm_br)(rng(&t->vrng) % LBRM_FAR), 0, rng(&t->vrng) & 1);
    }
    t->r->vmm_records += m->records - before;
}

static void vm_entry(struct twin *t, uint64_t inject_from, uint64_t inject_to)
{
    struct lbrm *m = &t->cpu;
    if (t->entry_ctls & LOAD_DBG)
        m->debugctl = t->vmcs_debugctl;
    if (t->entry_ctls & VM_ENTRY_LOAD_IA32_LBR_CTL)
        m->ctl = t->vmcs_lbr_ctl;
    if (inject_to) /* SDM Vol. 3C 27.6.1: event injection logs a record like a delivery */
        lbrm_branch(m, inject_from, inject_to, LBRM_EVENT, 0, false);
}

/*
 * The VMM starts under a caller (firmware, loader) that left LBR on: lbr_vmx_root_enter() keeps
 * the caller's IA32_DEBUGCTL / IA32_LBR_CTL as the guest's and clears them before the set-up
 * runs (hundreds of VMM branches in root), lbr_vmx_setup() puts them into the VMCS, VMLAUNCH
 * loads them.  MUT_SETUP_CALLER is the set-up run with the caller's values in effect.
 */
static void vmm_start(struct twin *t)
{
    struct lbrm *m = &t->cpu;
    t->vmcs_debugctl = m->debugctl;
    t->vmcs_lbr_ctl = m->ctl;
    if (t->mut != MUT_SETUP_CALLER)
        m->debugctl = m->ctl = 0;
    uint64_t before = m->records;
    for (unsigned i = 0; i < 300; i++) {
        lbrm_tick(m, 1 + rng(&t->vrng) % 50);
        lbrm_branch(m, VMM_BASE + rng(&t->vrng) % VMM_SIZE, VMM_BASE + rng(&t->vrng) % VMM_SIZE,
                    (enum lbrm_br)(rng(&t->vrng) % LBRM_FAR), 0, rng(&t->vrng) & 1);
    }
    t->r->vmm_records += m->records - before;
    if (!t->d.arch) /* hidden arch LBR: nothing loads IA32_LBR_CTL, it stays 0 */
        m->ctl = 0;
    vm_entry(t, 0, 0);
}

/* the caller's LBR enables, set natively before the VMM (or the bare guest) runs */
static void caller_lbr_on(struct lbrm *m)
{
    lbrm_wrmsr(m, 0x1d9, DEBUGCTLMSR_LBR);
    lbrm_wrmsr(m, 0x14ce,
               ARCH_LBR_CTL_LBREN | ARCH_LBR_CTL_OS | ARCH_LBR_CTL_USR | ARCH_LBR_CTL_FILTER);
}

/* The VMM's LBR work at an MSR exit and at a CPUID exit (lbr_vmx.c's hooks), each its own
 * function so that bench-lbr's callgrind counts exactly them (no other exit runs LBR code) */
__attribute__((noinline)) static enum lbr_verdict lbr_hook_msr(struct twin *t, uint32_t msr,
                                                               bool write, uint64_t *val)
{
    const char *why;
    return lbr_msr_access(&t->d, &t->vmcs_debugctl, msr, write, val, &why);
}

__attribute__((noinline)) static void lbr_hook_cpuid(struct twin *t, uint32_t leaf, uint32_t sub,
                                                     uint32_t q[4])
{
    lbr_cpuid_filter(&t->d, leaf, sub, q);
}

static bool lbr_claims(enum msr_owner owner, uint32_t msr, const void *ctx)
{
    return owner == MSR_OWNER_LBR && lbr_msr_intercepted(ctx, msr);
}

/* exit_msr.c: the owner table, then the owner's hook (the LBR hook; IA32_XSS or the real MSR) */
static int vmm_msr(struct twin *t, uint32_t msr, bool write, uint64_t *val)
{
    enum msr_owner o = msr_owner(msr);
    if (o == MSR_OWNER_LBR) {
        enum lbr_verdict r = lbr_hook_msr(t, msr, write, val);
        if (r != LBR_NOT_MINE)
            return r == LBR_GP ? -1 : 0;
    } else if (o == MSR_OWNER_XSS && write && !xss_policy(*val, t->host_xss)) {
        return -1;
    } else {
        assert_true(o == MSR_OWNER_XSS || o == MSR_OWNER_NONE);
    }
    return write ? lbrm_wrmsr(&t->cpu, msr, *val) : lbrm_rdmsr(&t->cpu, msr, val);
}

static bool exits(const struct twin *t, uint32_t msr) /* the MSR bitmap (msr_owner.c) */
{
    return msr_intercepted(msr, lbr_claims, &t->d);
}

static int guest_msr(struct twin *t, uint64_t rip, uint32_t msr, bool write, uint64_t *val)
{
    int gp;
    t->r->msr_ops++;
    if (exits(t, msr) && lbr_msr_intercepted(&t->d, msr) && msr != MSR_IA32_PERF_CAPABILITIES)
        t->r->lbr_exits++;
    if (!exits(t, msr)) { /* runs in non-root on the CPU; a #GP is delivered there */
        gp = write ? lbrm_wrmsr(&t->cpu, msr, *val) : lbrm_rdmsr(&t->cpu, msr, val);
        if (gp)
            bare_gp(&t->cpu, rip);
        return gp;
    }
    vm_exit(t);
    gp = vmm_msr(t, msr, write, val);
    vm_entry(t, rip, gp ? GP_HANDLER : 0);
    return gp;
}

static void vmm_op(struct twin *t, const struct op *o)
{
    struct lbrm *m = &t->cpu;
    lbrm_tick(m, o->clocks);
    uint64_t v = o->val;
    int gp;
    uint32_t q[4];
    uint64_t w[4];
    struct pt_decision pt_off = {.mode = PT_ENGINE_OFF};
    switch (o->k) {
    case OP_BRANCH:
        lbrm_branch(m, o->from, o->to, o->t, o->cpl, o->mispred);
        break;
    case OP_WRMSR:
        gp = guest_msr(t, o->from, o->msr, true, &v);
        see(t->r, o->msr, gp, NULL, 0);
        break;
    case OP_RDMSR:
        gp = guest_msr(t, o->from, o->msr, false, &v);
        see(t->r, o->msr, gp, gp ? NULL : &v, gp ? 0 : 1);
        break;
    case OP_CPUID: /* always exits (exit_cpuid.c): the CPU's answer, then the policies */
        vm_exit(t);
        lbrm_cpuid(m, o->leaf, o->sub, q);
        cpuid_policy(&pt_off, GUEST_FEAT_XSAVES, o->leaf, o->sub, 0, q);
        lbr_hook_cpuid(t, o->leaf, o->sub, q);
        vm_entry(t, 0, 0);
        for (unsigned i = 0; i < 4; i++)
            w[i] = q[i];
        see(t->r, o->leaf << 8 | o->sub, 0, w, 4);
        break;
    case OP_EXIT:
        vm_exit(t);
        vm_entry(t, 0, 0);
        break;
    case OP_PMI: /* the freeze happens in non-root; its NMI exits and is injected */
        lbrm_pmi(m);
        vm_exit(t);
        vm_entry(t, o->from, NMI_HANDLER);
        break;
    case OP_DB: /* not intercepted (exception bitmap 0) */
        lbrm_db(m);
        break;
    }
}

/* the guest stops recording and reads every LBR MSR (a #GP is delivered as any other) */
static void final_dump_bare(struct lbrm *m, struct run *r)
{
    struct op off = {.k = OP_WRMSR, .msr = 0x1d9, .from = KERN_BASE};
    bare_op(m, &off, r);
    off.msr = 0x14ce;
    bare_op(m, &off, r);
    for (uint32_t msr = 0; msr < 0x1700; msr++) {
        if (!(msr == 0x1c8 || msr == 0x1c9 || msr == 0x345 || msr == 0x14ce || msr == 0x14cf ||
              msr == 0x38e || msr == 0xda0 || is_from_to(msr) || is_info(msr)))
            continue;
        struct op rd = {.k = OP_RDMSR, .msr = msr, .from = KERN_BASE};
        bare_op(m, &rd, r);
    }
}

static void final_dump_vmm(struct twin *t)
{
    struct op off = {.k = OP_WRMSR, .msr = 0x1d9, .from = KERN_BASE};
    vmm_op(t, &off);
    off.msr = 0x14ce;
    vmm_op(t, &off);
    for (uint32_t msr = 0; msr < 0x1700; msr++) {
        if (!(msr == 0x1c8 || msr == 0x1c9 || msr == 0x345 || msr == 0x14ce || msr == 0x14cf ||
              msr == 0x38e || msr == 0xda0 || is_from_to(msr) || is_info(msr)))
            continue;
        struct op rd = {.k = OP_RDMSR, .msr = msr, .from = KERN_BASE};
        vmm_op(t, &rd);
    }
}

/* first difference, or -1; INFO cycle counts may only grow under the VMM (*longer counts
 * the reads where they did: the VMM's time inside a timed-LBR interval) */
static long compare(const struct run *a, const struct run *b, char *why, size_t n, unsigned *longer)
{
    if (a->n != b->n) {
        snprintf(why, n, "%u vs %u observations", a->n, b->n);
        return a->n < b->n ? a->n : b->n;
    }
    for (unsigned i = 0; i < a->n; i++) {
        const struct obs *x = &a->o[i], *y = &b->o[i];
        bool same = x->what == y->what && x->gp == y->gp;
        for (unsigned k = 0; k < 4 && same; k++) {
            uint64_t p = x->v[k], q = y->v[k];
            if (k == 0 && is_info(x->what) && x->gp == 0) {
                same = (p & ~LBR_INFO_CYC_CNT) == (q & ~LBR_INFO_CYC_CNT) &&
                       (q & LBR_INFO_CYC_CNT) >= (p & LBR_INFO_CYC_CNT);
                *longer += (q & LBR_INFO_CYC_CNT) > (p & LBR_INFO_CYC_CNT);
            } else {
                same = p == q;
            }
        }
        if (!same) {
            snprintf(why, n, "obs %u (%#x): bare gp=%d %#lx, vmm gp=%d %#lx", i, x->what, x->gp,
                     (unsigned long)x->v[0], y->gp, (unsigned long)y->v[0]);
            return i;
        }
    }
    return -1;
}

static unsigned vmm_addrs(const struct run *b)
{
    unsigned n = 0;
    for (unsigned i = 0; i < b->n; i++) {
        const struct obs *y = &b->o[i];
        uint64_t a = y->v[0] & ((1ull << 48) - 1); /* flags of formats 3/4 off */
        if (!y->gp && is_from_to(y->what) && a - VMM_BASE < VMM_SIZE)
            n++;
    }
    return n;
}

struct outcome {
    unsigned streams, diverged, vmm_seen, cyc_longer;
    uint64_t exits, vmm_records, guest_records, msr_ops, lbr_exits;
    bool shown; /* the decision shows the guest LBR (legacy or arch) */
    char first[200];
};

static struct outcome run_config(enum cfg_id id, enum mutant mut, unsigned streams)
{
    struct config c = config(id);
    struct outcome out = {0};
    struct op *prog = calloc(n_ops, sizeof(*prog));
    assert_non_null(prog);
    for (unsigned s = 1; s <= streams; s++) {
        gen(prog, n_ops, s * 7919 + id);
        struct run ra = {0}, rb = {0};
        struct lbrm bare;
        lbrm_init(&bare, &c.ref);
        caller_lbr_on(&bare);
        for (unsigned i = 0; i < n_ops; i++)
            bare_op(&bare, &prog[i], &ra);
        final_dump_bare(&bare, &ra);
        struct twin t;
        twin_init(&t, &c, mut, s);
        t.r = &rb;
        caller_lbr_on(&t.cpu);
        vmm_start(&t);
        for (unsigned i = 0; i < n_ops; i++)
            vmm_op(&t, &prog[i]);
        final_dump_vmm(&t);
        char why[160];
        long at = compare(&ra, &rb, why, sizeof(why), &out.cyc_longer);
        unsigned seen = vmm_addrs(&rb);
        out.streams++;
        out.exits += rb.exits;
        out.msr_ops += rb.msr_ops;
        out.lbr_exits += rb.lbr_exits;
        out.shown = t.d.legacy || t.d.arch;
        out.vmm_records += rb.vmm_records;
        out.guest_records += bare.records;
        out.vmm_seen += seen;
        if (at >= 0 || seen) {
            if (!out.diverged)
                snprintf(out.first, sizeof(out.first), "stream %u: %s%s", s, at >= 0 ? why : "",
                         seen ? " (VMM address in the stack)" : "");
            out.diverged++;
        }
        free(ra.o);
        free(rb.o);
    }
    free(prog);
    return out;
}

/* --- the tests --- */

static void test_configs_identical(void **state)
{
    for (enum cfg_id id = 0; id < CFG_N; id++) {
        struct outcome o = run_config(id, MUT_NONE, n_streams);
        struct config c = config(id);
        print_message("%-72s %u streams x %u ops: %lu exits, %lu guest records, VMM branches "
                      "recorded %lu, differences %u, INFO cycle counts longer by VMM time %u; "
                      "LBR %s, %lu of %lu guest RDMSR/WRMSR exited for LBR\n",
                      c.name, o.streams, n_ops, (unsigned long)o.exits,
                      (unsigned long)o.guest_records, (unsigned long)o.vmm_records, o.diverged,
                      o.cyc_longer, o.shown ? "shown" : "hidden", (unsigned long)o.lbr_exits,
                      (unsigned long)o.msr_ops);
        if (o.diverged)
            fail_msg("%s: %s", c.name, o.first);
        /* where the guest has LBR, using it costs no exit (only a PERF_CAPABILITIES read) */
        if (o.shown && o.lbr_exits)
            fail_msg("%s: %lu LBR MSR accesses exited", c.name, (unsigned long)o.lbr_exits);
        if (o.vmm_records) /* root never records, whatever the guest set */
            fail_msg("%s: %lu VMM branches recorded", c.name, (unsigned long)o.vmm_records);
    }
}

/* the decision each configuration is expected to reach */
static void test_configs_decide(void **state)
{
    static const struct {
        enum cfg_id id;
        bool legacy, arch, virt;
    } want[] = {
        {CFG_SKX, true, false, false},           {CFG_HSW, true, false, false},
        {CFG_IVB, true, false, false},           {CFG_ARCH, false, true, false},
        {CFG_ARCH_NO_VMX, false, false, false},  {CFG_NESTED, false, false, false},
        {CFG_NO_DEBUG_CTLS, false, false, true}, {CFG_BOCHS, false, false, false},
        {CFG_UNKNOWN, false, false, false},
    };
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct config c = config(want[i].id);
        struct lbr_host h = host_of(&c);
        struct lbr_decision d;
        lbr_decide(&h, &d);
        print_message("%-60s -> %s\n", c.name, d.reason);
        assert_int_equal(d.legacy, want[i].legacy);
        assert_int_equal(d.arch, want[i].arch);
        assert_int_equal(d.debugctl_virtual, want[i].virt);
    }
}

/* every planted defect of the VMM side must make the two runs differ or record a VMM branch */
static void test_mutants_caught(void **state)
{
    static const struct {
        enum mutant m;
        enum cfg_id id;
    } plant[] = {
        {MUT_ROOT_DEBUGCTL, CFG_SKX},       {MUT_ROOT_DEBUGCTL, CFG_HSW},
        {MUT_NO_LOAD_DEBUG, CFG_SKX},       {MUT_NO_LOAD_DEBUG, CFG_IVB},
        {MUT_NO_CLEAR_LBRCTL, CFG_ARCH},    {MUT_FMT_HIDDEN, CFG_SKX},
        {MUT_FMT_HIDDEN, CFG_ARCH},         {MUT_XSS_LEAK, CFG_ARCH_NO_VMX},
        {MUT_LEAF1C_LEAK, CFG_ARCH_NO_VMX}, {MUT_NO_HIDE, CFG_NO_DEBUG_CTLS},
        {MUT_SETUP_CALLER, CFG_SKX},        {MUT_SETUP_CALLER, CFG_ARCH},
    };
    for (unsigned i = 0; i < sizeof(plant) / sizeof(plant[0]); i++) {
        unsigned streams = n_streams < 20 ? n_streams : 20;
        struct outcome o = run_config(plant[i].id, plant[i].m, streams);
        print_message("mutant %-32s on %-10.10s: %u of %u streams differ, %lu VMM branches "
                      "recorded; %s\n",
                      mut_name[plant[i].m], config(plant[i].id).name, o.diverged, o.streams,
                      (unsigned long)o.vmm_records, o.first);
        /* caught: the guest saw a difference, or a VMM branch was recorded (a record the
         * guest's later branches overwrote before it looked is still one too many) */
        if (!o.diverged && !o.vmm_records)
            fail_msg("mutant '%s' not caught", mut_name[plant[i].m]);
    }
}

/* bench-lbr (tests/model/bench_lbr.sh, under callgrind): the exits of a guest using LBR on a
 * legacy and an arch-LBR CPU, and how many of its LBR MSR accesses exited */
static int bench(void)
{
    static const enum cfg_id ids[] = {CFG_SKX, CFG_ARCH};
    for (unsigned i = 0; i < 2; i++) {
        struct outcome o = run_config(ids[i], MUT_NONE, 20);
        printf("BENCH|%s|%lu|%lu|%lu|%u\n", config(ids[i]).name, (unsigned long)o.exits,
               (unsigned long)o.lbr_exits, (unsigned long)o.msr_ops, o.diverged);
    }
    return 0;
}

int main(void)
{
    if (getenv("LBR_DIFF_BENCH"))
        return bench();
    if (getenv("LBR_DIFF_STREAMS"))
        n_streams = (unsigned)strtoul(getenv("LBR_DIFF_STREAMS"), NULL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs_decide),
        cmocka_unit_test(test_configs_identical),
        cmocka_unit_test(test_mutants_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
