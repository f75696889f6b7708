/* SPDX-License-Identifier: MIT */
/*
 * The crash report's guest LBR text (vmm/lbr/lbr_report.c), read from the LBR model
 * (tests/model/lbr_model.c) after a known branch sequence, against the text this test builds
 * from the branches it took (newest first, fields as each format tells): Ivy Bridge (LBR_FMT 3),
 * Haswell (4), Skylake-SP (5) and arch LBR at two depths; hidden stacks; every buffer size.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "lbr/lbr_policy.h"
#include "lbr/lbr_report.h"
#include "model/lbr_model.h"

#define BIT(n) (1ull << (n))

struct cfg {
    const char *name;
    uint32_t model;
    uint64_t perf_caps;
    bool arch;
};

static const struct cfg ivb = {"Ivy Bridge", 0x3a, 0x31c3, false};
static const struct cfg hsw = {"Haswell", 0x3c, 0x31c4, false};
static const struct cfg skx = {"Skylake-SP", 0x55, 0x33c5, false};
static const struct cfg arch = {"arch LBR", 0x8f, 0x403f, true};

static struct lbr_host host_of(const struct cfg *c)
{
    struct lbr_host h = {
        .max_leaf = c->arch ? 0x20 : 0x16,
        .family = 6,
        .model = c->model,
        .cpuid1_ecx = CPUID_1_ECX_DS_CPL | CPUID_1_ECX_PDCM,
        .cpuid1_edx = CPUID_1_EDX_DS,
        .pmu_version = 4,
        .perf_caps_ok = true,
        .perf_caps = c->perf_caps,
        .misc_enable_ok = true,
        .exit_ctls = LBR_VMX_EXIT_SAVE_DEBUG,
        .entry_ctls = LBR_VMX_ENTRY_LOAD_DEBUG,
        .exit_allowed1 = LBR_VMX_EXIT_SAVE_DEBUG,
        .entry_allowed1 = LBR_VMX_ENTRY_LOAD_DEBUG,
    };
    if (c->arch) {
        h.cpuid7_edx = CPUID_7_EDX_ARCH_LBR;
        h.leaf1c[0] = 0x4000000f, h.leaf1c[1] = 7, h.leaf1c[2] = 7; /* depths 8..32 */
        h.xss_supported = XFEATURE_ARCH_LBR;
        h.exit_allowed1 |= VM_EXIT_CLEAR_IA32_LBR_CTL;
        h.entry_allowed1 |= VM_ENTRY_LOAD_IA32_LBR_CTL;
    }
    return h;
}

/* the CPU of the host, as the model is told it */
static struct lbrm_cpu model_of(const struct lbr_host *h, const struct lbr_decision *d)
{
    struct lbrm_cpu c = {
        .has_debugctl = true,
        .ds = true,
        .ds_cpl = true,
        .pdcm = true,
        .pmu_version = h->pmu_version,
        .arch = d->arch_present,
        .leaf1c = {h->leaf1c[0], h->leaf1c[1], h->leaf1c[2]},
        .perf_caps_ok = h->perf_caps_ok,
        .perf_caps = h->perf_caps,
    };
    if (d->lay) {
        c.legacy = true;
        c.nr = d->lay->nr, c.fmt = d->lay->fmt, c.from = d->lay->from, c.to = d->lay->to;
        c.info = d->lay->info, c.call_stack = d->lay->call_stack;
    }
    return c;
}

static unsigned reads; /* MSR reads the report made */
static bool model_rd(void *ctx, uint32_t msr, uint64_t *val)
{
    reads++;
    return lbrm_rdmsr(ctx, msr, val) == 0;
}

/* the known branch sequence: branch k, alternately in the kernel and in user space */
struct br {
    uint64_t from, to, tick;
    enum lbrm_br t;
    unsigned cpl;
    bool mis;
};

static struct br branch(unsigned k)
{
    static const enum lbrm_br types[] = {LBRM_JCC,     LBRM_REL_CALL, LBRM_IND_JMP,
                                         LBRM_REL_JMP, LBRM_IND_CALL, LBRM_FAR};
    bool user = k & 1;
    uint64_t base = user ? 0x401000 + 0x40ull * k : 0xffffffff81000000ull + 0x1000ull * k;
    return (struct br){.from = base,
                       .to = base + 0x20 + k,
                       .tick = 3 + 7ull * k,
                       .t = types[k % 6],
                       .cpl = user ? 3 : 0,
                       .mis = k % 3 == 0};
}

static void run_branches(struct lbrm *m, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        struct br b = branch(k);
        lbrm_tick(m, b.tick);
        lbrm_branch(m, b.from, b.to, b.t, b.cpl, b.mis);
    }
}

/* what the report must say: built from the branches taken, not from the model's MSRs */
static const char *type_name(enum lbrm_br t)
{
    switch (t) {
    case LBRM_JCC:
        return "jcc";
    case LBRM_REL_CALL:
        return "call";
    case LBRM_IND_CALL:
        return "call ind";
    case LBRM_IND_JMP:
        return "jmp ind";
    case LBRM_REL_JMP:
        return "jmp";
    default:
        return "other";
    }
}

struct text {
    char s[16384];
    size_t len;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t->len += (size_t)vsnprintf(t->s + t->len, sizeof(t->s) - t->len, fmt, ap);
    va_end(ap);
    assert_true(t->len < sizeof(t->s));
}

static void expect_legacy(struct text *t, const struct lbr_decision *d, uint64_t debugctl,
                          unsigned n)
{
    const struct lbr_layout *l = d->lay;
    unsigned nr = l->nr, listed = n < nr ? n : nr;
    add(t, "---- guest LBR: model-specific, %s, %u entries, LBR_FMT %u ----\n", l->name, nr,
        l->fmt);
    add(t, "  DEBUGCTL       0x%lx LBR FREEZE_LBRS_ON_PMI\n", (unsigned long)debugctl);
    add(t, "  GLOBAL_STATUS  LBR_Frz 0\n");
    add(t, "  LBR_SELECT     0x0\n");
    add(t, "  LBR_TOS        %u\n", n % nr);
    for (unsigned i = 0; i < listed; i++) {
        struct br b = branch(n - 1 - i); /* lbr[0] = the last branch taken */
        if (l->fmt == LBR_FORMAT_INFO)
            add(t, "  lbr[%2u] from 0x%016lx to 0x%016lx info 0x%016lx (%scycles %u)\n", i,
                (unsigned long)b.from, (unsigned long)b.to,
                (unsigned long)((b.mis ? BIT(63) : 0) | b.tick), b.mis ? "mispred, " : "",
                (unsigned)b.tick);
        else
            add(t, "  lbr[%2u] from 0x%016lx to 0x%016lx%s\n", i, (unsigned long)b.from,
                (unsigned long)b.to, b.mis ? " (mispred)" : "");
    }
    add(t, "  (%u records, %u empty entries not listed)\n", listed, nr - listed);
}

static void expect_arch(struct text *t, const struct lbr_decision *d, uint64_t ctl, unsigned depth,
                        unsigned n)
{
    unsigned listed = n < depth ? n : depth;
    add(t, "---- guest LBR: architectural (CPUID.1CH 0x%x 0x%x 0x%x) ----\n", d->leaf1c[0],
        d->leaf1c[1], d->leaf1c[2]);
    add(t, "  DEBUGCTL       0x0\n");
    add(t, "  GLOBAL_STATUS  LBR_Frz 0\n");
    add(t, "  LBR_CTL        0x%lx LBREn OS USR branch-filter\n", (unsigned long)ctl);
    add(t, "  LBR_DEPTH      %u\n", depth);
    for (unsigned i = 0; i < listed; i++) {
        struct br b = branch(n - 1 - i);
        uint64_t type = b.t == LBRM_JCC        ? 0
                        : b.t == LBRM_IND_JMP  ? 1
                        : b.t == LBRM_REL_JMP  ? 2
                        : b.t == LBRM_IND_CALL ? 3
                        : b.t == LBRM_REL_CALL ? 4
                                               : 8;
        uint64_t info = (b.mis ? BIT(63) : 0) | BIT(60) | type << 56 | b.tick;
        add(t, "  lbr[%2u] from 0x%016lx to 0x%016lx info 0x%016lx (%scycles %u, %s)\n", i,
            (unsigned long)b.from, (unsigned long)b.to, (unsigned long)info,
            b.mis ? "mispred, " : "", (unsigned)b.tick, type_name(b.t));
    }
    add(t, "  (%u records, %u empty entries not listed)\n", listed, depth - listed);
}

struct world {
    struct lbr_host h;
    struct lbr_decision d;
    struct lbrm m;
    struct lbr_crash_view v;
};

/* the guest enables LBR, takes n branches; the VM exit clears the enables (the VMCS keeps
 * the guest's values: view.debugctl / view.lbr_ctl) */
static void setup(struct world *w, const struct cfg *c, unsigned depth, unsigned n)
{
    w->h = host_of(c);
    lbr_decide(&w->h, &w->d);
    assert_true(c->arch ? w->d.arch : w->d.legacy);
    struct lbrm_cpu mc = model_of(&w->h, &w->d);
    lbrm_init(&w->m, &mc);
    w->v = (struct lbr_crash_view){.rdmsr = model_rd, .ctx = &w->m, .debugctl_ok = true};
    if (c->arch) {
        uint64_t ctl = ARCH_LBR_CTL_LBREN | ARCH_LBR_CTL_CPLS | ARCH_LBR_CTL_FILTER;
        assert_int_equal(lbrm_wrmsr(&w->m, MSR_ARCH_LBR_DEPTH, depth), 0);
        assert_int_equal(lbrm_wrmsr(&w->m, MSR_ARCH_LBR_CTL, ctl), 0);
        run_branches(&w->m, n);
        w->v.lbr_ctl_ok = true, w->v.lbr_ctl = ctl;
        assert_int_equal(lbrm_wrmsr(&w->m, MSR_ARCH_LBR_CTL, 0), 0); /* exit: clear control */
    } else {
        uint64_t dbg = DEBUGCTLMSR_LBR | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI;
        assert_int_equal(lbrm_wrmsr(&w->m, MSR_IA32_DEBUGCTLMSR, dbg), 0);
        run_branches(&w->m, n);
        w->v.debugctl = dbg;
        assert_int_equal(lbrm_wrmsr(&w->m, MSR_IA32_DEBUGCTLMSR, 0), 0); /* exit clears */
    }
    lbrm_branch(&w->m, 0xfffff00000001000ull, 0xfffff00000002000ull, LBRM_JCC, 0, false);
    /* ^ a VMM branch in root after the exit: LBR is off, it must not appear */
}

static size_t report(const struct world *w, char *buf, size_t cap)
{
    return lbr_crash_text(&w->d, &w->v, buf, cap);
}

static void check_legacy(const struct cfg *c)
{
    unsigned nr = lbr_layout_of(6, c->model)->nr;
    const unsigned counts[] = {0, 1, 5, nr - 1, nr, nr + 7, 3 * nr + 2};
    for (unsigned j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
        static struct world w;
        static struct text want;
        static char got[16384];
        setup(&w, c, 0, counts[j]);
        want.len = 0;
        expect_legacy(&want, &w.d, w.v.debugctl, counts[j]);
        size_t n = report(&w, got, sizeof(got));
        if (strcmp(got, want.s)) {
            print_error("%s, %u branches:\n--- got\n%s--- want\n%s", c->name, counts[j], got,
                        want.s);
            fail();
        }
        assert_int_equal(n, want.len);
    }
}

static void test_legacy_fmt3(void **state)
{
    (void)state;
    check_legacy(&ivb);
}

static void test_legacy_fmt4(void **state)
{
    (void)state;
    check_legacy(&hsw);
}

static void test_legacy_fmt5(void **state)
{
    (void)state;
    check_legacy(&skx);
}

static void test_arch(void **state)
{
    (void)state;
    const unsigned depths[] = {8, 32};
    for (unsigned di = 0; di < 2; di++) {
        unsigned depth = depths[di];
        const unsigned counts[] = {0, 1, 5, depth, depth + 3, 70};
        for (unsigned j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
            static struct world w;
            static struct text want;
            static char got[16384];
            setup(&w, &arch, depth, counts[j]);
            want.len = 0;
            expect_arch(&want, &w.d, w.v.lbr_ctl, depth, counts[j]);
            size_t n = report(&w, got, sizeof(got));
            if (strcmp(got, want.s)) {
                print_error("depth %u, %u branches:\n--- got\n%s--- want\n%s", depth, counts[j],
                            got, want.s);
                fail();
            }
            assert_int_equal(n, want.len);
        }
    }
}

/* the format, written out once (Skylake-SP, two branches) */
static void test_golden(void **state)
{
    (void)state;
    static struct world w;
    char got[4096];
    setup(&w, &skx, 0, 2);
    report(&w, got, sizeof(got));
    assert_string_equal(
        got, "---- guest LBR: model-specific, Skylake..Tiger Lake, 32 entries, LBR_FMT 5 ----\n"
             "  DEBUGCTL       0x801 LBR FREEZE_LBRS_ON_PMI\n"
             "  GLOBAL_STATUS  LBR_Frz 0\n"
             "  LBR_SELECT     0x0\n"
             "  LBR_TOS        2\n"
             "  lbr[ 0] from 0x0000000000401040 to 0x0000000000401061 info 0x000000000000000a "
             "(cycles 10)\n"
             "  lbr[ 1] from 0xffffffff81000000 to 0xffffffff81000020 info 0x8000000000000003 "
             "(mispred, cycles 3)\n"
             "  (2 records, 30 empty entries not listed)\n");
}

/* arch INFO fields only as CPUID.1CH:ECX and the entry say: a cycle count without
 * CYC_CNT_VALID, and a CPU without mispredict / timed LBR / branch type bits */
static void test_arch_fields(void **state)
{
    (void)state;
    static struct world w;
    static char got[16384];
    setup(&w, &arch, 8, 2);
    assert_int_equal(lbrm_wrmsr(&w.m, MSR_ARCH_LBR_INFO_0, LBR_INFO_MISPRED | 0x1234), 0);
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "  lbr[ 0] from 0x0000000000401040 to 0x0000000000401061 info "
                                "0x8000000000001234 (mispred, jcc)\n"));
    w.d.leaf1c[2] = 0; /* the CPU fills none of them: the raw INFO only */
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "info 0x8000000000001234\n"));
    assert_non_null(strstr(got, "info 0x9000000000000003\n"));
}

/* freeze on PMI (PMU v4: LBR_Frz): the branches after it are not in the stack, the report says
 * LBR_Frz 1 */
static void test_frozen(void **state)
{
    (void)state;
    static struct world w;
    static char got[16384];
    setup(&w, &skx, 0, 0);
    assert_int_equal(lbrm_wrmsr(&w.m, MSR_IA32_DEBUGCTLMSR, w.v.debugctl), 0);
    run_branches(&w.m, 6);
    lbrm_pmi(&w.m);
    lbrm_branch(&w.m, 0x1000, 0x2000, LBRM_JCC, 3, false); /* frozen: not recorded */
    assert_int_equal(lbrm_wrmsr(&w.m, MSR_IA32_DEBUGCTLMSR, 0), 0);
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "  GLOBAL_STATUS  LBR_Frz 1\n"));
    assert_non_null(strstr(got, "  LBR_TOS        6\n"));
    assert_null(strstr(got, "from 0x0000000000001000"));
    assert_non_null(strstr(got, "(6 records, 26 empty entries not listed)\n"));
}

/* a stack the guest was not shown: one line with the decision's reason, no MSR read */
static void test_hidden(void **state)
{
    (void)state;
    char got[512], want[512];
    struct lbrm m;
    struct lbr_crash_view v = {.rdmsr = model_rd, .ctx = &m, .debugctl_ok = true};
    struct lbr_host hs[4] = {host_of(&skx), host_of(&skx), host_of(&skx), host_of(&arch)};
    hs[0].perf_caps_ok = false;                    /* Bochs */
    hs[1].perf_caps &= ~0x3full;                   /* nested KVM: LBR_FMT 0 */
    hs[2].model = 0x97;                            /* not in the table */
    hs[3].exit_allowed1 = LBR_VMX_EXIT_SAVE_DEBUG; /* arch LBR without the VMX controls */
    hs[3].perf_caps = 0x4000;
    for (unsigned i = 0; i < 4; i++) {
        struct lbr_decision d;
        lbr_decide(&hs[i], &d);
        assert_false(d.legacy || d.arch);
        struct lbrm_cpu mc = model_of(&hs[i], &d);
        lbrm_init(&m, &mc);
        reads = 0;
        size_t n = lbr_crash_text(&d, &v, got, sizeof(got));
        snprintf(want, sizeof(want), "guest LBR: none on this CPU (%s)\n", d.reason);
        assert_string_equal(got, want);
        assert_int_equal(n, strlen(want));
        assert_int_equal(reads, 0);
    }
    reads = 0;
    size_t n = lbr_crash_text(NULL, &v, got, sizeof(got));
    assert_string_equal(got,
                        "guest LBR: none on this CPU (the VMM stopped before its LBR set-up)\n");
    assert_int_equal(n, strlen(got));
    assert_int_equal(reads, 0);
}

/* unreadable state says so and goes on (or stops where the order is unknown) */
static bool no_tos(void *ctx, uint32_t msr, uint64_t *val)
{
    return msr != MSR_LBR_TOS && model_rd(ctx, msr, val);
}

static bool bad_entry(void *ctx, uint32_t msr, uint64_t *val)
{
    return msr != MSR_LBR_NHM_TO + 3 && model_rd(ctx, msr, val);
}

static void test_faults(void **state)
{
    (void)state;
    static struct world w;
    static char got[16384];
    setup(&w, &skx, 0, 40);
    w.v.rdmsr = no_tos;
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "  LBR_TOS        #GP: the stack cannot be ordered, not listed\n"));
    assert_null(strstr(got, "lbr["));
    w.v.rdmsr = bad_entry; /* TOS 40 % 32 = 8: slot 3 is lbr[5] */
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "  lbr[ 4] from"));
    assert_non_null(strstr(got, "  lbr[ 5] #GP reading entry 3\n  lbr[ 6] from"));
    assert_non_null(strstr(got, "  (31 records, 0 empty entries not listed)\n"));
    w.v.debugctl_ok = false;
    report(&w, got, sizeof(got));
    assert_non_null(strstr(got, "  DEBUGCTL       n/a (VMREAD failed)\n"));
}

/* every buffer size: whole lines that fit, then the cut line if it fits; NUL-terminated,
 * never a byte past cap, the return value is the length */
static void check_cuts(const struct world *w)
{
    static char full[16384], buf[16384 + 64];
    size_t n = report(w, full, sizeof(full));
    assert_int_equal(n, strlen(full));
    size_t cutlen = strlen(LBR_REPORT_CUT);
    for (size_t cap = 0; cap <= n + 2; cap++) {
        memset(buf, 0xa5, cap + 64);
        size_t k = report(w, buf, cap);
        for (size_t i = cap; i < cap + 64; i++)
            assert_int_equal((unsigned char)buf[i], 0xa5);
        if (cap == 0) {
            assert_int_equal(k, 0);
            continue;
        }
        assert_true(k < cap);
        assert_int_equal(buf[k], '\0');
        assert_int_equal(strlen(buf), k);
        if (cap > n) {
            assert_string_equal(buf, full);
            continue;
        }
        /* the largest prefix of whole lines with its NUL in cap */
        size_t p = 0;
        for (size_t i = 0; i < n && i + 1 < cap; i++)
            if (full[i] == '\n' && i + 2 <= cap)
                p = i + 1;
        assert_memory_equal(buf, full, p);
        if (cap - p > cutlen) {
            assert_int_equal(k, p + cutlen);
            assert_string_equal(buf + p, LBR_REPORT_CUT);
        } else {
            assert_int_equal(k, p);
        }
    }
}

static void test_cut(void **state)
{
    (void)state;
    static struct world w;
    setup(&w, &skx, 0, 9);
    check_cuts(&w);
    setup(&w, &arch, 32, 40);
    check_cuts(&w);
    w.d.legacy = w.d.arch = false; /* the one line */
    check_cuts(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),      cmocka_unit_test(test_legacy_fmt3),
        cmocka_unit_test(test_legacy_fmt4), cmocka_unit_test(test_legacy_fmt5),
        cmocka_unit_test(test_arch),        cmocka_unit_test(test_arch_fields),
        cmocka_unit_test(test_frozen),      cmocka_unit_test(test_hidden),
        cmocka_unit_test(test_faults),      cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
