/* SPDX-License-Identifier: MIT */
/*
 * RTIT switching plans (vmm/pt/pt_switch.c), executed against a small fake CPU that enforces
 * the rules hardware enforces: WRMSR to RTIT MSRs other than clearing TraceEn faults while
 * TraceEn=1 (pt-facts B.3), and a VM entry that loads RTIT_CTL fails while the host's TraceEn
 * is 1 (pt-facts A.5, the CVE-2024-53135 condition).  Every combination of engine mode,
 * load/clear controls, host tracing (off / on / unknown) and guest tracing runs three
 * entry/exit rounds, checking what the guest runs with and what the host gets back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pt/pt_switch.h"

#define NMSR    0x600
#define TRACING (RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS)

struct fake_cpu {
    uint64_t msr[NMSR];
    uint64_t vmcs_guest_ctl;
    uint64_t host_area[NMSR];
    unsigned faults;
    bool entry_failed;
    unsigned vmwrites;
};

static const struct pt_gcaps g_skl = {
    .present = true,
    .maxphyaddr = 39,
    .vaddr_bits = 48,
    .leaf14 = {{1, 0xf, 0x7, 0}, {(0x249u << 16) | 2, (0x3fu << 16) | 0x1fff, 0, 0}}};
static const struct pt_gcaps g_bare = {
    .present = true, .maxphyaddr = 39, .vaddr_bits = 48, .leaf14 = {{1, 0, 0x1, 0}, {0}}};

static void wrmsr(struct fake_cpu *c, uint32_t m, uint64_t v)
{
    uint64_t ctl = c->msr[MSR_IA32_RTIT_CTL];

    /* SDM-p1703: while TraceEn=1, an RTIT_CTL write must clear TraceEn or keep the value;
     * the other RTIT MSRs are locked (pt-facts B.3) */
    if ((ctl & RTIT_CTL_TRACEEN) &&
        (m != MSR_IA32_RTIT_CTL || ((v & RTIT_CTL_TRACEEN) && v != ctl))) {
        c->faults++; /* #GP in the VMM */
        return;
    }
    c->msr[m] = v;
}

static void run_plan(struct fake_cpu *c, const struct pt_plan *p, struct pt_msr_file *f)
{
    assert_true(p->nsteps <= PT_PLAN_MAX_STEPS);
    for (unsigned i = 0; i < p->nsteps; i++) {
        const struct pt_step *s = &p->steps[i];
        for (unsigned k = 0;
             k < (s->op == PT_OP_SAVE_MSRS || s->op == PT_OP_LOAD_MSRS ? p->nmsrs : 0); k++) {
            uint32_t m = p->msrs[k];
            if (s->op == PT_OP_SAVE_MSRS && s->area == PT_AREA_HOST)
                c->host_area[m] = c->msr[m];
            else if (s->op == PT_OP_SAVE_MSRS)
                pt_msr_file_set(f, m, c->msr[m]);
            else if (s->area == PT_AREA_HOST)
                wrmsr(c, m, c->host_area[m]);
            else /* shadow mode would substitute BASE/MASK here; identity for this test */
                wrmsr(c, m, pt_msr_file_get(f, m));
        }
        if (s->op == PT_OP_WRMSR)
            wrmsr(c, s->msr, s->value);
        if (s->op == PT_OP_VMWRITE_RTIT_CTL) {
            c->vmcs_guest_ctl = s->value;
            c->vmwrites++;
        }
    }
}

static void vm_entry(struct fake_cpu *c, const struct pt_decision *d, const struct pt_plan *p)
{
    if (d->entry_ctls & VM_ENTRY_LOAD_IA32_RTIT_CTL) {
        if (c->msr[MSR_IA32_RTIT_CTL] & RTIT_CTL_TRACEEN) {
            c->entry_failed = true; /* pt-facts A.5 */
            return;
        }
        c->msr[MSR_IA32_RTIT_CTL] = c->vmcs_guest_ctl;
    }
    for (unsigned i = 0; i < p->n_entry_load; i++) {
        unsigned before = c->faults;
        assert_int_equal(p->entry_load[i].reserved, 0);
        wrmsr(c, p->entry_load[i].index, p->entry_load[i].value);
        if (c->faults != before) {
            c->faults = before;
            c->entry_failed = true; /* VM-entry failure: MSR loading */
        }
    }
}

/* The guest runs: if tracing, its output advances (the hardware's doing). */
static void guest_runs(struct fake_cpu *c)
{
    if (c->msr[MSR_IA32_RTIT_CTL] & RTIT_CTL_TRACEEN) {
        c->msr[MSR_IA32_RTIT_OUTPUT_MASK_PTRS] += 0x100ull << 32;
        c->msr[MSR_IA32_RTIT_STATUS] ^= RTIT_STATUS_CONTEXTEN;
    }
}

static void vm_exit(struct fake_cpu *c, const struct pt_decision *d, const struct pt_plan *entry)
{
    if (d->exit_ctls & VM_EXIT_CLEAR_IA32_RTIT_CTL)
        c->msr[MSR_IA32_RTIT_CTL] = 0; /* pt-facts G.9 */
    for (unsigned i = 0; i < entry->n_exit_load; i++)
        wrmsr(c, entry->exit_load[i].index, entry->exit_load[i].value);
}

enum host_state { HOST_IDLE, HOST_TRACING, HOST_UNKNOWN };

static void make_decision(struct pt_decision *d, enum pt_engine_mode m, bool load_clear,
                          const struct pt_gcaps *g)
{
    memset(d, 0, sizeof(*d));
    d->mode = m;
    if (!pt_mode_guest_owns(m))
        return;
    d->guest = *g;
    d->load_clear = load_clear;
    if (load_clear) {
        d->entry_ctls = VM_ENTRY_LOAD_IA32_RTIT_CTL;
        d->exit_ctls = VM_EXIT_CLEAR_IA32_RTIT_CTL;
    }
    if (m == PT_ENGINE_HOST_GUEST_HW)
        d->secondary_ctls = SECONDARY_EXEC_PT_USE_GPA;
}

static void guest_file(struct pt_msr_file *f, const struct pt_gcaps *g, bool traces)
{
    struct pt_msr_result r;

    pt_msr_file_init(f);
    assert_int_equal(pt_msr_write(g, f, MSR_IA32_RTIT_OUTPUT_BASE, 0x7000000, &r), PT_MSR_OK);
    assert_int_equal(pt_msr_write(g, f, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x180, &r), PT_MSR_OK);
    assert_int_equal(pt_msr_write(g, f, MSR_IA32_RTIT_STATUS, RTIT_STATUS_TRIGGEREN, &r),
                     PT_MSR_OK);
    if (pt_msr_present(g, MSR_IA32_RTIT_CR3_MATCH))
        assert_int_equal(pt_msr_write(g, f, MSR_IA32_RTIT_CR3_MATCH, 0xabc000, &r), PT_MSR_OK);
    if (pt_msr_present(g, MSR_IA32_RTIT_ADDR_B(1)))
        assert_int_equal(pt_msr_write(g, f, MSR_IA32_RTIT_ADDR_B(1), 0xffffffff81000000ull, &r),
                         PT_MSR_OK);
    assert_int_equal(
        pt_msr_write(g, f, MSR_IA32_RTIT_CTL, traces ? TRACING : TRACING & ~RTIT_CTL_TRACEEN, &r),
        PT_MSR_OK);
}

static void one_combination(enum pt_engine_mode mode, bool load_clear, enum host_state hs,
                            bool guest_traces, const struct pt_gcaps *g)
{
    struct pt_decision d;
    struct pt_switch sw;
    struct pt_msr_file f, f0;
    struct fake_cpu c;
    const uint64_t host_ctl = hs == HOST_IDLE ? RTIT_CTL_TOPA : TRACING | RTIT_CTL_USR;
    uint64_t host_before[NMSR];

    make_decision(&d, mode, load_clear, g);
    guest_file(&f, g, guest_traces);
    f0 = f;
    memset(&c, 0, sizeof(c));
    c.msr[MSR_IA32_RTIT_CTL] = host_ctl;
    c.msr[MSR_IA32_RTIT_OUTPUT_BASE] = 0x99000000;
    c.msr[MSR_IA32_RTIT_OUTPUT_MASK_PTRS] = 0x7f | (0x40ull << 32);
    c.msr[MSR_IA32_RTIT_STATUS] = RTIT_STATUS_TRIGGEREN | RTIT_STATUS_FILTEREN;
    c.msr[MSR_IA32_RTIT_CR3_MATCH] = 0x5000;
    memcpy(host_before, c.msr, sizeof(host_before));
    pt_switch_init(&sw);

    for (int round = 0; round < 3; round++) {
        struct pt_plan in, out;
        uint64_t hw_ctl = c.msr[MSR_IA32_RTIT_CTL];

        assert_true(
            pt_switch_entry(&sw, &d, &f, hs == HOST_UNKNOWN ? PT_HOST_CTL_UNKNOWN : hw_ctl, &in));
        assert_true(pt_plan_check(&d, hs == HOST_UNKNOWN ? PT_HOST_CTL_UNKNOWN : hw_ctl, &in));
        run_plan(&c, &in, &f);
        vm_entry(&c, &d, &in);
        assert_int_equal(c.faults, 0);
        assert_false(c.entry_failed);

        /* what the guest runs with */
        if (!pt_mode_guest_owns(mode)) {
            assert_int_equal(in.nsteps + in.n_entry_load + in.n_exit_load, 0);
            assert_int_equal(c.msr[MSR_IA32_RTIT_CTL], hw_ctl); /* system: host trace runs */
        } else {
            assert_int_equal(c.msr[MSR_IA32_RTIT_CTL] & RTIT_CTL_TRACEEN, f.ctl & RTIT_CTL_TRACEEN);
            if (guest_traces) {
                assert_int_equal(c.msr[MSR_IA32_RTIT_CTL], f.ctl);
                for (unsigned k = 0; k < in.nmsrs; k++)
                    assert_int_equal(c.msr[in.msrs[k]], pt_msr_file_get(&f, in.msrs[k]));
            }
            assert_int_equal(in.output_via_shadow, mode == PT_ENGINE_HOST_GUEST_SHADOW);
            /* the VMCS field is written once, not on every entry */
            if (load_clear)
                assert_int_equal(c.vmwrites, 1);
            else
                assert_int_equal(c.vmwrites, 0);
        }

        guest_runs(&c);
        vm_exit(&c, &d, &in);
        pt_switch_exit(&sw, &d, &out);
        run_plan(&c, &out, &f);
        assert_int_equal(c.faults, 0);

        /* what the host gets back */
        if (!pt_mode_guest_owns(mode)) {
            assert_int_equal(out.nsteps, 0);
            assert_memory_equal(&f, &f0, sizeof(f)); /* system/off: guest state untouched */
            assert_int_equal(c.msr[MSR_IA32_RTIT_CTL], host_ctl);
            continue;
        }
        if (hs == HOST_TRACING) {
            assert_memory_equal(c.msr, host_before, sizeof(host_before));
        } else if (hs == HOST_UNKNOWN) {
            assert_int_equal(c.msr[MSR_IA32_RTIT_CTL], 0); /* stopped, cannot be restored */
        } else {
            assert_int_equal(c.msr[MSR_IA32_RTIT_CTL] & RTIT_CTL_TRACEEN, 0);
        }
        /* the guest's trace progress is in its file */
        if (guest_traces) {
            assert_int_equal(f.output_mask >> 32, 0x100ull * (unsigned)(round + 1));
            assert_int_equal(f.ctl, f0.ctl);
        } else {
            assert_memory_equal(&f, &f0, sizeof(f));
        }
    }
}

static void every_combination(void **state)
{
    static const enum pt_engine_mode modes[] = {
        PT_ENGINE_OFF, PT_ENGINE_SYSTEM, PT_ENGINE_HOST_GUEST_HW, PT_ENGINE_HOST_GUEST_SHADOW};
    static const struct pt_gcaps *views[] = {&g_skl, &g_bare};
    unsigned n = 0;

    for (size_t m = 0; m < 4; m++)
        for (int lc = 0; lc < 2; lc++) {
            if (modes[m] == PT_ENGINE_HOST_GUEST_HW && !lc)
                continue; /* hardware mode requires the controls (pt-facts A.4) */
            for (int hs = HOST_IDLE; hs <= HOST_UNKNOWN; hs++)
                for (int gt = 0; gt < 2; gt++)
                    for (size_t v = 0; v < 2; v++) {
                        print_message("mode %s load/clear %d host %d guest %d view %zu\n",
                                      pt_mode_name(modes[m]), lc, hs, gt, v);
                        one_combination(modes[m], lc, (enum host_state)hs, gt, views[v]);
                        n++;
                    }
        }
    assert_int_equal(n, (3 * 2 + 1) * 3 * 2 * 2);
}

/* The exact step order when the host traces and the guest too (load/clear controls). */
static void stop_host_first(void **state)
{
    struct pt_decision d;
    struct pt_switch sw;
    struct pt_msr_file f;
    struct pt_plan p;

    make_decision(&d, PT_ENGINE_HOST_GUEST_HW, true, &g_skl);
    guest_file(&f, &g_skl, true);
    pt_switch_init(&sw);
    assert_true(pt_switch_entry(&sw, &d, &f, TRACING, &p));
    assert_int_equal(p.nsteps, 4);
    assert_int_equal(p.steps[0].op, PT_OP_WRMSR);
    assert_int_equal(p.steps[0].msr, MSR_IA32_RTIT_CTL);
    assert_int_equal(p.steps[0].value, 0);
    assert_int_equal(p.steps[1].op, PT_OP_SAVE_MSRS);
    assert_int_equal(p.steps[1].area, PT_AREA_HOST);
    assert_int_equal(p.steps[2].op, PT_OP_LOAD_MSRS);
    assert_int_equal(p.steps[2].area, PT_AREA_GUEST);
    assert_int_equal(p.steps[3].op, PT_OP_VMWRITE_RTIT_CTL);
    assert_int_equal(p.steps[3].value, f.ctl);
    /* host traces, guest does not: still stop first (the case KVM missed, pt-facts A.6) */
    guest_file(&f, &g_skl, false);
    assert_true(pt_switch_entry(&sw, &d, &f, TRACING, &p));
    assert_true(p.nsteps >= 1);
    assert_int_equal(p.steps[0].op, PT_OP_WRMSR);
    assert_int_equal(p.steps[0].value, 0);
}

/* The invariant check and the fake CPU both catch a plan that forgets to stop the host. */
static void broken_plan_is_caught(void **state)
{
    struct pt_decision d;
    struct pt_plan p;
    struct fake_cpu c;
    struct pt_msr_file f;

    make_decision(&d, PT_ENGINE_HOST_GUEST_HW, true, &g_skl);
    guest_file(&f, &g_skl, true);
    memset(&p, 0, sizeof(p));
    p.nsteps = 1;
    p.steps[0] = (struct pt_step){.op = PT_OP_VMWRITE_RTIT_CTL, .value = f.ctl};
    assert_false(pt_plan_check(&d, TRACING, &p));
    assert_false(pt_plan_check(&d, PT_HOST_CTL_UNKNOWN, &p));
    assert_true(pt_plan_check(&d, 0, &p));
    memset(&c, 0, sizeof(c));
    c.msr[MSR_IA32_RTIT_CTL] = TRACING;
    run_plan(&c, &p, &f);
    vm_entry(&c, &d, &p);
    assert_true(c.entry_failed);

    /* MSR-load-list variant */
    make_decision(&d, PT_ENGINE_HOST_GUEST_SHADOW, false, &g_skl);
    memset(&p, 0, sizeof(p));
    p.n_entry_load = 1;
    p.entry_load[0] = (struct vmx_msr_entry){.index = MSR_IA32_RTIT_CTL, .value = f.ctl};
    assert_false(pt_plan_check(&d, TRACING, &p));
    /* system mode must not set the PT controls or do anything */
    make_decision(&d, PT_ENGINE_SYSTEM, false, &g_skl);
    d.entry_ctls = VM_ENTRY_LOAD_IA32_RTIT_CTL;
    memset(&p, 0, sizeof(p));
    assert_false(pt_plan_check(&d, 0, &p));
}

static void msr_sets(void **state)
{
    uint32_t m[PT_SWITCH_MAX_MSRS];
    static const uint32_t skl[] = {MSR_IA32_RTIT_STATUS,           MSR_IA32_RTIT_OUTPUT_BASE,
                                   MSR_IA32_RTIT_OUTPUT_MASK_PTRS, MSR_IA32_RTIT_CR3_MATCH,
                                   MSR_IA32_RTIT_ADDR_A(0),        MSR_IA32_RTIT_ADDR_B(0),
                                   MSR_IA32_RTIT_ADDR_A(1),        MSR_IA32_RTIT_ADDR_B(1)};
    struct pt_gcaps four = g_skl;

    assert_int_equal(pt_switch_msr_set(&g_skl, m), 8);
    assert_memory_equal(m, skl, sizeof(skl));
    assert_int_equal(pt_switch_msr_set(&g_bare, m), 3);
    four.leaf14[1][0] = 4;
    assert_int_equal(pt_switch_msr_set(&four, m), PT_SWITCH_MAX_MSRS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_combination),
        cmocka_unit_test(stop_host_first),
        cmocka_unit_test(broken_plan_is_caught),
        cmocka_unit_test(msr_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
