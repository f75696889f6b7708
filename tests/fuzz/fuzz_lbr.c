/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: a random CPU (family/model, CPUID feature bits, CPUID 0x1C, IA32_PERF_CAPABILITIES,
 * the VMX controls chosen and allowed) through lbr_decide(), then arbitrary MSR index / value /
 * read-or-write sequences through lbr_msr_access() and CPUID leaves through lbr_cpuid_filter().
 * Invariants:
 *   - every hardware rule of the policy answers as the LBR model's independent rule
 *     (tests/model/lbr_model.c) on the same CPU: DEBUGCTL bits, LBR_SELECT, TOS, LBR_CTL, DEPTH;
 *   - an intercepted MSR is answered as the CPU the guest is shown would: PERF_CAPABILITIES
 *     read-only with LBR_FMT exactly when shown, a hidden stack #GPs, a virtual DEBUGCTL
 *     accepts a value iff the model does -- never a reserved bit;
 *   - a refused access changes nothing, the decision never changes, a non-LBR MSR is never
 *     claimed;
 *   - the decision is coherent: LBR shown only with its VMX switching, arch LBR's CPUID, XSS
 *     and controls only when shown, a printable NUL-terminated reason;
 *   - the crash report's LBR text (lbr_crash_text) of a stack filled with random values, into a
 *     buffer of random size: printable whole lines, NUL-terminated inside cap, nothing written
 *     past it, the length returned, a prefix of the uncut text (plus the cut line), a bounded
 *     number of lines, and only the MSRs of the stack the guest was shown read.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lbr/lbr_policy.h"
#include "lbr/lbr_report.h"
#include "model/lbr_model.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)
#define BIT(n)       (1ull << (n))
#define SDM_DEBUGCTL 0xdfc7ull /* every IA32_DEBUGCTL bit the SDM defines (bit 13 excluded) */

struct in_host {
    uint8_t model_pick, f1, f2, pmu;
    uint32_t l1c[3];
    uint64_t perf_caps;
    uint32_t exit_ctls, entry_ctls, exit_a1, entry_a1, max_leaf;
    uint64_t xss;
};

struct in_op {
    uint16_t pick;
    uint8_t write, pad;
    uint32_t raw;
    uint64_t val;
};

static const uint8_t models[] = {0x55, 0x4e, 0x3c, 0x3a, 0x1a, 0x8f, 0x97, 0x5c, 0x9e, 0x6a};

/* the same CPU as the model describes it */
static struct lbrm_cpu model_cpu(const struct lbr_host *h, const struct lbr_layout *l)
{
    struct lbrm_cpu c = {
        .has_debugctl = true,
        .ds = h->cpuid1_edx & CPUID_1_EDX_DS,
        .ds_cpl = h->cpuid1_ecx & CPUID_1_ECX_DS_CPL,
        .bts_unavail = h->misc_enable_ok && (h->misc_enable & MISC_ENABLE_BTS_UNAVAIL),
        .pdcm = h->cpuid1_ecx & CPUID_1_ECX_PDCM,
        .rtm = h->cpuid7_ebx & CPUID_7_EBX_RTM,
        .bus_lock = h->cpuid7_ecx & CPUID_7_ECX_BUS_LOCK_DETECT,
        .freeze_smm = h->perf_caps_ok && (h->perf_caps & PERF_CAP_FREEZE_WHILE_SMM),
        .pmu_version = h->pmu_version,
        .arch = true,
        .leaf1c = {h->leaf1c[0], h->leaf1c[1], h->leaf1c[2]},
    };
    if (l) {
        c.legacy = true;
        c.nr = l->nr, c.fmt = l->fmt, c.from = l->from, c.to = l->to, c.info = l->info;
        c.call_stack = l->call_stack;
    }
    return c;
}

static uint32_t pick_msr(const struct in_op *o)
{
    static const uint32_t base[] = {0x1d9,  0x345,  0x1c8,  0x1c9,  0x680,  0x6c0, 0xdc0,
                                    0x14ce, 0x14cf, 0x1500, 0x1600, 0x1200, 0x40,  0x60};
    unsigned k = o->pick % 16;
    if (k >= sizeof(base) / sizeof(base[0]))
        return o->raw; /* any MSR at all */
    uint32_t m = base[k];
    if (m == 0x680 || m == 0x6c0 || m == 0xdc0 || m >= 0x1200)
        m += (o->pick >> 4) % 80; /* inside, at the edge of, and past each range */
    return m;
}

/* --- the crash report's text --- */

struct rd_ctx {
    struct lbrm *m;
    const struct lbr_decision *d;
    unsigned reads;
};

/* only the control / stack MSRs of what the guest was shown, and GLOBAL_STATUS */
static bool report_msr_ok(const struct lbr_decision *d, uint32_t msr)
{
    if (msr == LBRM_MSR_GLOBAL_STATUS)
        return d->legacy || d->arch;
    const struct lbr_layout *l = d->lay;
    if (d->legacy && (msr == MSR_LBR_SELECT || msr == MSR_LBR_TOS || msr - l->from < l->nr ||
                      msr - l->to < l->nr || (l->info && msr - l->info < l->nr)))
        return true;
    return d->arch && (msr == MSR_ARCH_LBR_DEPTH || msr - MSR_ARCH_LBR_FROM_0 < 64 ||
                       msr - MSR_ARCH_LBR_TO_0 < 64 || msr - MSR_ARCH_LBR_INFO_0 < 64);
}

static bool report_rd(void *ctx, uint32_t msr, uint64_t *val)
{
    struct rd_ctx *c = ctx;
    CHECK(report_msr_ok(c->d, msr));
    c->reads++;
    return lbrm_rdmsr(c->m, msr, val) == 0;
}

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void check_report(const struct lbr_decision *d, const struct lbrm_cpu *mc, uint64_t seed,
                         unsigned cap_pick)
{
    static struct lbrm m;
    static char full[16384], buf[16384 + 64];
    uint64_t s = seed | 1;
    lbrm_init(&m, mc);
    if (d->arch && (d->leaf1c[0] & 0xff)) { /* a depth CPUID allows, then random entries */
        unsigned b;
        do
            b = xs(&s) % 8;
        while (!(d->leaf1c[0] & (1u << b)));
        CHECK(lbrm_wrmsr(&m, MSR_ARCH_LBR_DEPTH, 8 * (b + 1)) == 0);
    }
    for (unsigned i = 0; i < 64; i++) { /* some entries 0 (empty), some random */
        uint64_t r = xs(&s), z = r & 3 ? xs(&s) : 0;
        if (mc->legacy && i < mc->nr) {
            lbrm_wrmsr(&m, mc->from + i, z);
            lbrm_wrmsr(&m, mc->to + i, z ? xs(&s) : 0);
            if (mc->info)
                lbrm_wrmsr(&m, mc->info + i, z ? xs(&s) : 0);
        }
        lbrm_wrmsr(&m, MSR_ARCH_LBR_FROM_0 + i, z);
        lbrm_wrmsr(&m, MSR_ARCH_LBR_TO_0 + i, xs(&s) & (z ? ~0ull : 0));
        lbrm_wrmsr(&m, MSR_ARCH_LBR_INFO_0 + i, xs(&s));
    }
    if (mc->legacy)
        lbrm_wrmsr(&m, MSR_LBR_TOS, xs(&s) % mc->nr);
    struct rd_ctx c = {.m = &m, .d = d};
    struct lbr_crash_view v = {.debugctl_ok = seed & 1,
                               .debugctl = xs(&s),
                               .lbr_ctl_ok = seed & 2,
                               .lbr_ctl = xs(&s),
                               .rdmsr = report_rd,
                               .ctx = &c};
    size_t n = lbr_crash_text(d, &v, full, sizeof(full));
    CHECK(n < sizeof(full) && full[n] == 0 && strlen(full) == n);
    if (!d->legacy && !d->arch)
        CHECK(c.reads == 0 && strchr(full, '\n') == full + n - 1);
    unsigned lines = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(full[i] == '\n' || (full[i] >= 0x20 && full[i] < 0x7f));
        lines += full[i] == '\n';
    }
    CHECK(n && full[n - 1] == '\n');
    CHECK(lines <= (d->legacy ? 6u + d->lay->nr : 0) + (d->arch ? 6u + 64 : 0) + 1);

    /* the same into a small buffer */
    size_t cap = cap_pick % (n + 2);
    memset(buf, 0xa5, cap + 64);
    size_t k = lbr_crash_text(d, &v, buf, cap);
    for (size_t i = cap; i < cap + 64; i++)
        CHECK((unsigned char)buf[i] == 0xa5);
    if (!cap) {
        CHECK(k == 0);
        return;
    }
    CHECK(k < cap && buf[k] == 0 && strlen(buf) == k);
    if (cap > n) {
        CHECK(k == n && memcmp(buf, full, n) == 0);
        return;
    }
    size_t cut = strlen(LBR_REPORT_CUT), p = k;
    if (k >= cut && memcmp(buf + k - cut, LBR_REPORT_CUT, cut) == 0)
        p = k - cut;
    CHECK(memcmp(buf, full, p) == 0 && (p == 0 || buf[p - 1] == '\n'));
    const char *next = strchr(full + p, '\n'); /* the first line left out did not fit */
    CHECK(next && (size_t)(next - full) + 2 > cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in_host ih;
    if (size < sizeof(ih))
        return 0;
    memcpy(&ih, data, sizeof(ih));
    data += sizeof(ih), size -= sizeof(ih);

    struct lbr_host h = {
        .max_leaf = ih.max_leaf & 0x3f,
        .family = ih.f2 & 0x80 ? 15 : 6,
        .model = models[ih.model_pick % sizeof(models)],
        .cpuid1_ecx = (ih.f1 & 1 ? CPUID_1_ECX_DS_CPL : 0) | (ih.f1 & 2 ? CPUID_1_ECX_PDCM : 0),
        .cpuid1_edx = ih.f1 & 4 ? CPUID_1_EDX_DS : 0,
        .cpuid7_ebx = ih.f1 & 8 ? CPUID_7_EBX_RTM : 0,
        .cpuid7_ecx = ih.f1 & 16 ? CPUID_7_ECX_BUS_LOCK_DETECT : 0,
        .cpuid7_edx = ih.f1 & 32 ? CPUID_7_EDX_ARCH_LBR : 0,
        .pmu_version = ih.pmu % 6,
        .leaf1c = {ih.l1c[0], ih.l1c[1], ih.l1c[2]},
        .xss_supported = ih.xss,
        .perf_caps_ok = ih.f1 & 64,
        .perf_caps = ih.f1 & 64 ? ih.perf_caps : 0,
        .misc_enable_ok = ih.f2 & 1,
        .misc_enable = ih.f2 & 2 ? MISC_ENABLE_BTS_UNAVAIL : 0,
        .exit_ctls = ih.exit_ctls,
        .entry_ctls = ih.entry_ctls,
        .exit_allowed1 = ih.exit_a1,
        .entry_allowed1 = ih.entry_a1,
    };
    if (ih.f2 & 4) { /* mostly a well-formed PERF_CAPABILITIES format for the model */
        const struct lbr_layout *l = lbr_layout_of(h.family, h.model);
        h.perf_caps = (h.perf_caps & ~PERF_CAP_LBR_FMT) | (l ? l->fmt : LBR_FORMAT_ARCH);
    }
    struct lbr_decision d, d0;
    lbr_decide(&h, &d);
    memcpy(&d0, &d, sizeof(d));

    /* --- the decision is coherent --- */
    CHECK(memchr(d.reason, 0, sizeof(d.reason)));
    for (const char *p = d.reason; *p; p++)
        CHECK(*p >= 0x20 && *p < 0x7f);
    bool dbg_ok =
        (h.exit_ctls & LBR_VMX_EXIT_SAVE_DEBUG) && (h.entry_ctls & LBR_VMX_ENTRY_LOAD_DEBUG);
    CHECK(d.debugctl_virtual == !dbg_ok);
    if (d.legacy)
        CHECK(d.lay && dbg_ok && h.perf_caps_ok && (h.perf_caps & PERF_CAP_LBR_FMT) == d.lay->fmt &&
              d.lay->nr <= LBR_MAX_ENTRIES);
    CHECK(d.lay == lbr_layout_of(h.family, h.model));
    CHECK(lbr_msr_intercepted(&d, MSR_IA32_PERF_CAPABILITIES)); /* LBR_FMT is always filtered */
    if (d.arch)
        CHECK(h.max_leaf >= 0x1c && (h.cpuid7_edx & CPUID_7_EDX_ARCH_LBR) &&
              (h.exit_allowed1 & VM_EXIT_CLEAR_IA32_LBR_CTL) &&
              (h.entry_allowed1 & VM_ENTRY_LOAD_IA32_LBR_CTL) && (h.leaf1c[0] & 0xff));
    CHECK(d.exit_ctls == (d.arch ? VM_EXIT_CLEAR_IA32_LBR_CTL : 0u));
    CHECK(d.entry_ctls == (d.arch ? VM_ENTRY_LOAD_IA32_LBR_CTL : 0u));
    uint64_t fmt = h.perf_caps & PERF_CAP_LBR_FMT, shown = d.perf_caps & PERF_CAP_LBR_FMT;
    CHECK((d.perf_caps & ~PERF_CAP_LBR_FMT) == (h.perf_caps & ~PERF_CAP_LBR_FMT));
    CHECK(shown == 0 || shown == fmt);
    CHECK((shown != 0) == (fmt != 0 && (fmt == LBR_FORMAT_ARCH ? d.arch : d.legacy)));
    uint64_t xss = lbr_xss_filter(&d, h.xss_supported);
    CHECK(!(xss & ~h.xss_supported));
    CHECK(!!(xss & XFEATURE_ARCH_LBR) == (d.arch && (h.xss_supported & XFEATURE_ARCH_LBR)));

    /* --- the rules: policy == model on the same CPU --- */
    const struct lbr_layout *lay = d.lay;
    struct lbrm_cpu mc = model_cpu(&h, lay);
    uint64_t dv = lbr_debugctl_valid(&h);
    CHECK(dv == lbrm_debugctl_writable(&mc));
    CHECK(!(dv & ~SDM_DEBUGCTL));

    /* --- CPUID: what the guest sees of arch LBR --- */
    uint32_t r[4];
    memset(r, 0xff, sizeof(r));
    lbr_cpuid_filter(&d, 7, 0, r);
    if (h.max_leaf >= 7)
        CHECK(!!(r[3] & CPUID_7_EDX_ARCH_LBR) == d.arch);
    memset(r, 0xff, sizeof(r));
    lbr_cpuid_filter(&d, 0x1c, ih.f2 >> 3, r);
    if (h.max_leaf >= 0x1c && !d.arch)
        CHECK((r[0] | r[1] | r[2] | r[3]) == 0);
    memset(r, 0xff, sizeof(r));
    lbr_cpuid_filter(&d, 0xd, 1, r);
    if (h.max_leaf >= 0xd && !d.arch)
        CHECK(!(r[2] & XFEATURE_ARCH_LBR));

    /* --- MSR sequences --- */
    uint64_t debugctl = 0;
    while (size >= sizeof(struct in_op)) {
        struct in_op o;
        memcpy(&o, data, sizeof(o));
        data += sizeof(o), size -= sizeof(o);
        uint32_t msr = pick_msr(&o);
        bool write = o.write & 1;
        uint64_t val = o.val, before = debugctl;
        const char *why = NULL;
        enum lbr_verdict v = lbr_msr_access(&d, &debugctl, msr, write, &val, &why);
        CHECK(v == LBR_NOT_MINE || v == LBR_OK || v == LBR_GP);
        CHECK((v != LBR_NOT_MINE) == lbr_msr_intercepted(&d, msr));
        CHECK((v == LBR_GP) == (why != NULL));
        if (v != LBR_OK || msr != MSR_IA32_DEBUGCTLMSR || !write)
            CHECK(debugctl == before); /* only an accepted DEBUGCTL write changes state */
        if (write)
            CHECK(val == o.val);
        if (v == LBR_NOT_MINE) { /* never an MSR outside the LBR / PERF_CAPABILITIES set */
            continue;
        }
        /* the answer of the CPU the guest is shown, from the model's rules */
        if (msr == MSR_IA32_PERF_CAPABILITIES) {
            CHECK(v == (write || !h.perf_caps_ok ? LBR_GP : LBR_OK));
            if (v == LBR_OK)
                CHECK(val == d.perf_caps);
        } else if (msr == MSR_IA32_DEBUGCTLMSR) {
            CHECK(d.debugctl_virtual);
            if (write) {
                bool model_ok = !(o.val & ~lbrm_debugctl_writable(&mc));
                CHECK((v == LBR_OK) == model_ok);
                CHECK(!(debugctl & ~SDM_DEBUGCTL)); /* never a reserved bit kept */
            } else {
                CHECK(v == LBR_OK && val == debugctl);
            }
        } else {
            /* a hidden stack: the model of a CPU without it #GPs; with it, the model knows
             * the MSR (the policy never claims one that is not in the layout / arch ranges) */
            CHECK(v == LBR_GP);
            struct lbrm with;
            lbrm_init(&with, &mc);
            uint64_t x;
            if (msr >= 0x1200) {
                CHECK(d.arch_present && !d.arch);
                with.depth = ARCH_LBR_MAX_ENTRIES; /* every index up to 64 exists somewhere */
                with.c.leaf1c[0] = 0x80;
            } else {
                CHECK(lay && !d.legacy);
            }
            CHECK(lbrm_rdmsr(&with, msr, &x) == 0);
            struct lbrm_cpu none = mc;
            none.legacy = none.arch = false;
            struct lbrm without;
            lbrm_init(&without, &none);
            CHECK(lbrm_rdmsr(&without, msr, &x) != 0);
        }
    }
    CHECK(memcmp(&d, &d0, sizeof(d)) == 0);

    /* the crash report's text of this decision over a random stack */
    struct lbrm_cpu rc = mc;
    rc.arch = d.arch_present;
    rc.has_debugctl = true;
    rc.pmu_version = h.pmu_version;
    check_report(&d, &rc, ih.perf_caps ^ ih.xss ^ (uint64_t)ih.l1c[2] << 32,
                 ih.exit_ctls ^ ih.entry_a1);

    /* the value rules, on the last operand */
    if (lay) {
        for (uint64_t t = 0; t < 3; t++) {
            uint64_t x = t == 0 ? ih.perf_caps : t == 1 ? ih.perf_caps & 0x7ff : ih.perf_caps % 40;
            CHECK(lbr_select_ok(lay, x) == lbrm_select_ok(&mc, x));
            CHECK(lbr_tos_ok(lay, x) == lbrm_tos_ok(&mc, x));
        }
    }
    for (uint64_t t = 0; t < 3; t++) {
        uint64_t x = t == 0   ? ih.perf_caps
                     : t == 1 ? ih.perf_caps & 0x7f000full
                              : ih.perf_caps & 0x7f;
        CHECK(arch_lbr_ctl_ok(h.leaf1c, x) == lbrm_ctl_ok(&mc, x));
        CHECK(arch_lbr_depth_ok(h.leaf1c, x) == lbrm_depth_ok(&mc, x));
    }
    return 0;
}
