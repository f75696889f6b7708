/* SPDX-License-Identifier: MIT */
/*
 * The on-box LBR self-test's verdicts (tests/guest/lbr_check.c) against the LBR model
 * (tests/model/lbr_model.c): the model is driven as pt-selftest.efi drives the CPU (LBR_SELECT
 * 0, stack zeroed, LBR on, the five branches of lbr_seq.S with three VM exits between branches
 * 1 and 2, LBR off, stack read back) on Ivy Bridge (LBR_FMT 3), Haswell (4), Skylake-SP (5) and
 * arch LBR at depths 8 and 32, at user-range and kernel-range addresses, mispredicted or not.
 * The recorded stack must pass; each planted fault (a VMM branch recorded, a branch missing, a
 * branch the guest did not take, TOS rotated wrong, the VM exit recorded as a branch, LBR not
 * reloaded at VM entry, two records swapped, a record before the sequence) must fail with its
 * reason.  Plus the plans: LBR
 * shown -> RUN, hidden/absent (Bochs, nested KVM, no PDCM) -> SKIP, inconsistent -> FAIL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "guest/lbr_check.h"
#include "model/lbr_model.h"

#define BIT(n)   (1ull << (n))
#define VMM_BASE 0x7c000000ull
#define VMM_SIZE 0x01000000ull

struct cfg {
    const char *name;
    uint32_t cpuid1_eax; /* family 6 + model */
    uint8_t fmt, nr;
    uint32_t info;
    bool arch;
    uint32_t leaf1c0; /* arch: CPUID.1CH:EAX depths */
};

static const struct cfg ivb = {"Ivy Bridge", 0x306a9, 3, 16, 0, false, 0};
static const struct cfg hsw = {"Haswell", 0x306c3, 4, 16, 0, false, 0};
static const struct cfg skx = {"Skylake-SP", 0x50654, 5, 32, 0xdc0, false, 0};
static const struct cfg arch32 = {"arch LBR 32", 0x806f8, 0x3f, 0, 0, true, 0xf};
static const struct cfg arch8 = {"arch LBR 8", 0x806f8, 0x3f, 0, 0, true, 0x1};
static const struct cfg *const cfgs[] = {&ivb, &hsw, &skx, &arch32, &arch8};

static struct lbrc_view view_of(const struct cfg *c)
{
    struct lbrc_view v = {
        .max_leaf = c->arch ? 0x20 : 0x16,
        .cpuid1_eax = c->cpuid1_eax,
        .cpuid1_ecx = 1u << 15, /* PDCM */
        .perf_caps_ok = true,
        .perf_caps = 0x3000 | c->fmt,
    };
    if (c->arch) {
        v.cpuid7_edx = 1u << 19;
        v.leaf1c[0] = c->leaf1c0, v.leaf1c[1] = 7, v.leaf1c[2] = 7;
    }
    return v;
}

static struct lbrm_cpu model_of(const struct cfg *c)
{
    struct lbrm_cpu m = {.has_debugctl = true,
                         .ds = true,
                         .ds_cpl = true,
                         .pdcm = true,
                         .pmu_version = 4,
                         .perf_caps_ok = true,
                         .perf_caps = 0x3000 | c->fmt};
    if (c->arch) {
        m.arch = true;
        m.leaf1c[0] = c->leaf1c0, m.leaf1c[1] = 7, m.leaf1c[2] = 7;
    } else {
        const struct lbrc_layout *l = lbrc_layout_of(c->cpuid1_eax);
        assert_non_null(l);
        m.legacy = true;
        m.nr = l->nr, m.fmt = l->fmt, m.from = l->from, m.to = l->to, m.info = l->info;
        m.call_stack = c->fmt >= 4;
    }
    return m;
}

enum fault {
    F_NONE,
    F_VMM_BRANCH,    /* the exit leaves LBR on: the VMM's branches recorded */
    F_MISSING,       /* branch 3 not recorded */
    F_NOT_TAKEN,     /* a record the guest did not take (guest addresses) */
    F_TOS,           /* legacy: LBR_TOS one behind after the sequence; arch: two records swapped */
    F_EXIT_BRANCH,   /* the VM exit at CPUID recorded as a branch to the next instruction */
    F_NO_ENTRY_LOAD, /* VM entry does not reload DEBUGCTL / LBR_CTL: LBR off after the exit */
    F_EARLY,         /* a record before branch 0 (as if the enabling WRMSR's entry made one) */
    F_NFAULTS
};
static const char *const fault_word[F_NFAULTS] = {[F_NONE] = "in order",
                                                  [F_VMM_BRANCH] = "VMM address",
                                                  [F_MISSING] = "is branch 2, not 3",
                                                  [F_NOT_TAKEN] = "not taken",
                                                  [F_TOS] = "(order/TOS)",
                                                  [F_EXIT_BRANCH] = "from the CPUID",
                                                  [F_NO_ENTRY_LOAD] = "is branch 1, not 4",
                                                  [F_EARLY] = "an extra record"};

void ptv_lbr_seq_addrs(uint64_t a[13]); /* tests/guest/lbr_seq.S, assembled into this test */

/* the sequence of lbr_seq.S as the guest builds it (lbr_selftest.c), moved to base: the
 * labels' offsets are the assembler's own */
static void seq_at(uint64_t base, struct lbrc_seq *q)
{
    uint64_t a[13];
    ptv_lbr_seq_addrs(a);
    uint64_t home = a[0] & ~0xfffull;
    memset(q, 0, sizeof(*q));
    q->n = 5;
    for (unsigned i = 0; i < 5; i++)
        q->from[i] = base + a[2 * i] - home, q->to[i] = base + a[2 * i + 1] - home;
    static const char *const names[3] = {"CPUID", "VMCALL", "RDMSR"};
    q->nexits = 3;
    for (unsigned i = 0; i < 3; i++)
        q->exit[i] = base + a[10 + i] - home, q->exit_name[i] = names[i];
}

/* the label table against the bytes the assembler put there: each FROM is the branch its
 * type says, each exit address the exiting instruction, each TO where that branch goes */
static void test_seq_labels(void **state)
{
    (void)state;
    uint64_t a[13];
    ptv_lbr_seq_addrs(a);
    const uint8_t *p[13];
    for (unsigned i = 0; i < 13; i++)
        p[i] = (const uint8_t *)(uintptr_t)a[i];
    assert_int_equal(p[0][0], 0xeb);                    /* jmp rel8 */
    assert_int_equal(a[1], a[0] + 2 + (int8_t)p[0][1]); /* to .Lt0 */
    assert_int_equal(p[2][0], 0xe8);                    /* call rel32 */
    int32_t rel;
    memcpy(&rel, p[2] + 1, 4);
    assert_int_equal(a[3], a[2] + 5 + rel); /* to .Lfn */
    assert_int_equal(p[4][0], 0xc3);        /* ret */
    assert_int_equal(a[5], a[2] + 5);       /* back after the call */
    assert_int_equal(p[6][0], 0x74);        /* jz rel8 */
    assert_int_equal(a[7], a[6] + 2 + (int8_t)p[6][1]);
    assert_int_equal(p[8][0], 0xff); /* jmp *%rax */
    assert_int_equal(p[8][1], 0xe0);
    assert_int_equal(p[0xa][0] << 8 | p[0xa][1], 0x0fa2); /* cpuid */
    assert_memory_equal(p[0xb], "\x0f\x01\xc1", 3);       /* vmcall */
    assert_int_equal(p[0xc][0] << 8 | p[0xc][1], 0x0f32); /* rdmsr */
    assert_int_equal(a[1], a[2]);                         /* .Lt0 is the call */
    assert_true(a[3] < a[10] && a[10] < a[11] && a[11] < a[12] && a[12] < a[4]);
}

static const enum lbrm_br br_type[5] = {LBRM_REL_JMP, LBRM_REL_CALL, LBRM_RET, LBRM_JCC,
                                        LBRM_IND_JMP};

static void wr(struct lbrm *m, uint32_t msr, uint64_t v)
{
    assert_int_equal(lbrm_wrmsr(m, msr, v), 0);
}

static uint64_t rd(const struct lbrm *m, uint32_t msr)
{
    uint64_t v = 0;
    assert_int_equal(lbrm_rdmsr(m, msr, &v), 0);
    return v;
}

/* one VM exit: the exit clears DEBUGCTL (SDM Vol. 3C 28.5.1) / LBR_CTL (the clear control),
 * the VMM runs its branches, entry loads the guest's value back */
static void vm_exit(struct lbrm *m, const struct cfg *c, enum fault f, uint64_t at)
{
    uint32_t en = c->arch ? LBRC_MSR_LBR_CTL : LBRC_MSR_DEBUGCTL;
    uint64_t saved = rd(m, en);
    if (f == F_EXIT_BRANCH && at)
        lbrm_branch(m, at, at + 2, LBRM_FAR, 0, false);
    if (f != F_VMM_BRANCH)
        wr(m, en, 0);
    for (unsigned i = 0; i < 40; i++) /* the handler's branches in root */
        lbrm_branch(m, VMM_BASE + 0x1000 + 16 * i, VMM_BASE + 0x2000 + 8 * i, LBRM_JCC, 0, false);
    if (f != F_NO_ENTRY_LOAD)
        wr(m, en, saved);
}

/* what pt-selftest.efi does, on the model; returns lbrc_check's verdict */
static bool run(const struct cfg *c, uint64_t base, bool mispred, enum fault f, char *why,
                size_t cap)
{
    struct lbrc_view v = view_of(c);
    const struct lbrc_layout *lay = NULL;
    uint64_t ctl = 0;
    char pwhy[96];
    if (c->arch)
        assert_int_equal(lbrc_arch_plan(&v, &ctl, pwhy, sizeof(pwhy)), LBRC_RUN);
    else
        assert_int_equal(lbrc_legacy_plan(&v, &lay, pwhy, sizeof(pwhy)), LBRC_RUN);

    struct lbrm_cpu mc = model_of(c);
    static struct lbrm m;
    lbrm_init(&m, &mc);
    /* the guest's earlier life: records in the stack, TOS somewhere */
    wr(&m, c->arch ? LBRC_MSR_LBR_CTL : LBRC_MSR_DEBUGCTL, c->arch ? ctl : LBRC_DEBUGCTL_LBR);
    for (unsigned i = 0; i < 11; i++)
        lbrm_branch(&m, 0x401000 + 32 * i, 0x402000 + 32 * i, LBRM_JCC, 3, i & 1);
    wr(&m, c->arch ? LBRC_MSR_LBR_CTL : LBRC_MSR_DEBUGCTL, 0);

    struct lbrc_seq q;
    seq_at(base, &q);
    static struct lbrc_stack s;
    memset(&s, 0, sizeof(s));
    s.arch = c->arch;
    uint32_t en;
    uint64_t on;
    if (c->arch) {
        s.nr = (unsigned)rd(&m, LBRC_MSR_LBR_DEPTH);
        wr(&m, LBRC_MSR_LBR_DEPTH, s.nr); /* clears the entries */
        en = LBRC_MSR_LBR_CTL, on = ctl;
    } else {
        s.nr = lay->nr, s.fmt = lay->fmt;
        wr(&m, LBRC_MSR_LBR_SELECT, 0);
        for (unsigned i = 0; i < lay->nr; i++) {
            wr(&m, lay->from + i, 0);
            wr(&m, lay->to + i, 0);
            if (lay->info)
                wr(&m, lay->info + i, 0);
        }
        s.tos_before = rd(&m, LBRC_MSR_LBR_TOS);
        en = LBRC_MSR_DEBUGCTL, on = LBRC_DEBUGCTL_LBR;
    }
    wr(&m, en, on);
    if (f == F_EARLY)
        lbrm_branch(&m, q.from[0] - 2, q.from[0], LBRM_FAR, 0, false);
    for (unsigned i = 0; i < 5; i++) {
        if (i == 2) { /* inside the called function: CPUID, VMCALL, RDMSR exit */
            for (unsigned x = 0; x < 3; x++)
                vm_exit(&m, c, f, x == 0 ? q.exit[0] : 0);
        }
        if (f == F_MISSING && i == 3)
            continue;
        if (f == F_TOS && c->arch && i == 0)
            continue;
        if (f == F_TOS && c->arch && i == 1) { /* arch: branch 1 recorded before branch 0 */
            lbrm_branch(&m, q.from[1], q.to[1], br_type[1], 0, false);
            lbrm_branch(&m, q.from[0], q.to[0], br_type[0], 0, false);
            continue;
        }
        lbrm_branch(&m, q.from[i], q.to[i], br_type[i], 0, mispred && (i & 1));
        if (f == F_NOT_TAKEN && i == 3)
            lbrm_branch(&m, q.from[3] + 2, q.to[3] + 0x40, LBRM_JCC, 0, false);
    }
    wr(&m, en, 0);
    if (!c->arch) {
        s.tos = rd(&m, LBRC_MSR_LBR_TOS);
        if (f == F_TOS)
            s.tos = (s.tos + s.nr - 1) % s.nr;
        for (unsigned i = 0; i < s.nr; i++) {
            s.from[i] = rd(&m, lay->from + i);
            s.to[i] = rd(&m, lay->to + i);
        }
    } else {
        for (unsigned i = 0; i < s.nr; i++) {
            s.from[i] = rd(&m, LBRC_MSR_ARCH_FROM_0 + i);
            s.to[i] = rd(&m, LBRC_MSR_ARCH_TO_0 + i);
        }
    }
    return lbrc_check(&s, &q, VMM_BASE, VMM_SIZE, why, cap);
}

static const uint64_t bases[] = {0x7e5a4000ull, 0xffffffff81000000ull};

static void test_recorded_stack_passes(void **state)
{
    (void)state;
    char why[96];
    for (unsigned c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++)
        for (unsigned b = 0; b < 2; b++)
            for (unsigned mp = 0; mp < 2; mp++) {
                bool ok = run(cfgs[c], bases[b], mp, F_NONE, why, sizeof(why));
                if (!ok)
                    fail_msg("%s base %#llx mispred %u: %s", cfgs[c]->name,
                             (unsigned long long)bases[b], mp, why);
                assert_non_null(strstr(why, "5 branches in order, 3 exits"));
            }
}

static void test_planted_faults_fail(void **state)
{
    (void)state;
    char why[96];
    unsigned caught = 0;
    for (unsigned f = F_NONE + 1; f < F_NFAULTS; f++)
        for (unsigned c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++)
            for (unsigned b = 0; b < 2; b++) {
                if (run(cfgs[c], bases[b], true, (enum fault)f, why, sizeof(why)))
                    fail_msg("fault %u on %s base %#llx passed", f, cfgs[c]->name,
                             (unsigned long long)bases[b]);
                if (!strstr(why, fault_word[f]))
                    fail_msg("fault %u on %s: reason \"%s\" lacks \"%s\"", f, cfgs[c]->name, why,
                             fault_word[f]);
                if (b == 0 && c == 2)
                    printf("  fault %u (%s): %s\n", f, cfgs[c]->name, why);
                caught++;
            }
    printf("  %u planted faults caught (%d kinds x %zu CPUs x 2 address ranges)\n", caught,
           F_NFAULTS - 1, sizeof(cfgs) / sizeof(cfgs[0]));
}

/* the checker alone: a stack whose content is right but whose TOS did not move by n */
static void test_tos_must_advance(void **state)
{
    (void)state;
    struct lbrc_seq q;
    seq_at(bases[0], &q);
    static struct lbrc_stack s;
    memset(&s, 0, sizeof(s));
    s.nr = 16, s.fmt = 4, s.tos_before = 14, s.tos = (14 + 5) % 16;
    for (unsigned i = 0; i < 5; i++) {
        unsigned e = (s.tos + 16 - (4 - i)) % 16;
        s.from[e] = q.from[i] | (i & 1 ? BIT(63) : 0), s.to[e] = q.to[i];
    }
    char why[96];
    assert_true(lbrc_check(&s, &q, VMM_BASE, VMM_SIZE, why, sizeof(why)));
    s.tos_before = 13;
    assert_false(lbrc_check(&s, &q, VMM_BASE, VMM_SIZE, why, sizeof(why)));
    assert_non_null(strstr(why, "LBR_TOS"));
    s.tos = 16; /* out of range */
    assert_false(lbrc_check(&s, &q, VMM_BASE, VMM_SIZE, why, sizeof(why)));
}

/* the VMM range's edges: [base, base + size) is the VMM's, the bytes either side are not */
static void test_vmm_range_edges(void **state)
{
    (void)state;
    struct lbrc_seq q;
    seq_at(bases[0], &q);
    static struct lbrc_stack s;
    static const struct {
        uint64_t from, to;
        bool vmm;
    } e[] = {
        {VMM_BASE, 0x1000, true},
        {0x1000, VMM_BASE + VMM_SIZE - 1, true},
        {VMM_BASE - 1, 0x1000, false},
        {0x1000, VMM_BASE + VMM_SIZE, false},
        {VMM_BASE + VMM_SIZE / 2, VMM_BASE + VMM_SIZE / 2, true},
    };
    char why[96];
    for (unsigned k = 0; k < sizeof(e) / sizeof(e[0]); k++) {
        memset(&s, 0, sizeof(s));
        s.arch = true, s.nr = 8;
        for (unsigned i = 0; i < 5; i++)
            s.from[i] = q.from[4 - i], s.to[i] = q.to[4 - i];
        s.from[6] = e[k].from, s.to[6] = e[k].to;
        assert_false(lbrc_check(&s, &q, VMM_BASE, VMM_SIZE, why, sizeof(why)));
        assert_int_equal(strstr(why, "VMM address") != NULL, e[k].vmm);
        if (!e[k].vmm)
            assert_non_null(strstr(why, "lbr[6]"));
    }
}

static void test_plans(void **state)
{
    (void)state;
    const struct lbrc_layout *l;
    uint64_t ctl;
    char why[96];
    struct lbrc_view v = view_of(&skx);
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_RUN);
    assert_int_equal(l->nr, 32);
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_SKIP);
    assert_non_null(strstr(why, "EDX[19] = 0"));
    /* Bochs under ptvisor: PERF_CAPABILITIES reads 0 (or faults), no leaf 1CH */
    v.perf_caps = 0;
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_SKIP);
    assert_null(l);
    assert_non_null(strstr(why, "LBR_FMT 0"));
    v.perf_caps_ok = false;
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_SKIP);
    v.cpuid1_ecx = 0;
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_SKIP);
    assert_non_null(strstr(why, "PDCM"));
    /* shown but inconsistent: a FAIL, not a SKIP */
    v = view_of(&hsw);
    v.perf_caps = 5;
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_FAIL);
    v.cpuid1_eax = 0x906a0; /* family 6 model 0x9a: not in the table */
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_FAIL);
    v.cpuid1_eax = 0xf00; /* family 15 */
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_FAIL);
    /* arch */
    v = view_of(&arch32);
    assert_int_equal(lbrc_legacy_plan(&v, &l, why, sizeof(why)), LBRC_SKIP);
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_RUN);
    assert_int_equal(ctl, 1 | BIT(1) | (0x7full << 16));
    v.leaf1c[1] = 0; /* no CPL or branch filter: LBREn alone */
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_RUN);
    assert_int_equal(ctl, 1);
    v.leaf1c[0] = 0;
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_FAIL);
    v.max_leaf = 0x16;
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_FAIL);
    v.cpuid7_edx = 0;
    assert_int_equal(lbrc_arch_plan(&v, &ctl, why, sizeof(why)), LBRC_SKIP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq_labels),          cmocka_unit_test(test_recorded_stack_passes),
        cmocka_unit_test(test_planted_faults_fail), cmocka_unit_test(test_tos_must_advance),
        cmocka_unit_test(test_vmm_range_edges),     cmocka_unit_test(test_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
