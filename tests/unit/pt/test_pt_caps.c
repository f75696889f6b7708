/* SPDX-License-Identifier: MIT */
/*
 * Engine mode decision, guest CPUID 0x14 view and CPUID filtering (vmm/pt/pt_caps.c).
 * Fixtures are register values of real CPU classes (Bochs, Broadwell/nested KVM, Skylake,
 * Ice Lake) plus a CPU that enumerates every PT feature, to prove the guest view filters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pt/pt_caps.h"

#define CONCEAL_SEC   SECONDARY_EXEC_PT_CONCEAL_VMX
#define CONCEAL_EXIT  VM_EXIT_PT_CONCEAL_PIP
#define CONCEAL_ENTRY VM_ENTRY_PT_CONCEAL_PIP

/* Bochs 2.7: VMX + EPT, no PT. */
static const struct pt_caps bochs = {.cpuid7_ebx = 0x00000281,
                                     .vmx_misc = 0x0,
                                     .secondary_allowed1 = 0x000000ff,
                                     .exit_allowed1 = 0x003fefff,
                                     .entry_allowed1 = 0x0000f3ff,
                                     .maxphyaddr = 40};
/* Broadwell, or nested KVM: PT enumerated, VMX_MISC[14] = 0. */
static const struct pt_caps broadwell = {.cpuid7_ebx = CPUID_7_EBX_INTEL_PT | 0x1c2fbb,
                                         .leaf14 = {{0, 0x1, 0x7, 0}},
                                         .vmx_misc = 0x300481e5,
                                         .secondary_allowed1 = 0x000ffbff,
                                         .exit_allowed1 = 0x007fffff,
                                         .entry_allowed1 = 0x0000ffff,
                                         .maxphyaddr = 39};
/* Skylake client: VMX_MISC[14], conceal controls, no PT_USE_GPA, no load/clear RTIT_CTL. */
static const struct pt_caps skylake = {.cpuid7_ebx = CPUID_7_EBX_INTEL_PT | 0x029c6fbf,
                                       .leaf14 = {{1, 0xf, 0x7, 0}, {0x02490002, 0x003f3fff, 0, 0}},
                                       .vmx_misc = 0x7004c1e7,
                                       .secondary_allowed1 = 0x004ffbff | CONCEAL_SEC,
                                       .exit_allowed1 = 0x01ffffff,
                                       .entry_allowed1 = 0x0003ffff,
                                       .maxphyaddr = 39};
/* Ice Lake server: everything hardware host-guest mode needs. */
static const struct pt_caps icelake = {
    .cpuid7_ebx = CPUID_7_EBX_INTEL_PT | 0xd39ffffb,
    .leaf14 = {{1, 0x3f, 0x7, 0}, {0x02490002, 0x003f3fff, 0, 0}},
    .vmx_misc = 0x7004c1e7 | VMX_MISC_INTEL_PT,
    .secondary_allowed1 = 0x035ffbff,
    .exit_allowed1 = 0x03ffffff,
    .entry_allowed1 = 0x0007ffff,
    .maxphyaddr = 46,
    .vaddr_bits = 57};
/* Everything enumerated: max subleaf 2, all EBX/ECX bits, 7 ranges. */
static const struct pt_caps everything = {
    .cpuid7_ebx = CPUID_7_EBX_INTEL_PT,
    .leaf14 = {{2, 0x1ff, 0x8000000f, 0}, {0xffff0007, 0xffffffff, 0, 0}},
    .vmx_misc = VMX_MISC_INTEL_PT,
    .secondary_allowed1 = 0xffffffff,
    .exit_allowed1 = 0xffffffff,
    .entry_allowed1 = 0xffffffff,
    .maxphyaddr = 52};

static const struct pt_caps *const fixtures[] = {&bochs, &broadwell, &skylake, &icelake,
                                                 &everything};
static const uint32_t requests[] = {PTV_PT_AUTO, PTV_PT_OFF, PTV_PT_SYSTEM, PTV_PT_HOST_GUEST};

static void assert_reason(const struct pt_decision *d, const char *want)
{
    if (!strstr(d->reason, want))
        fail_msg("reason \"%s\" does not mention \"%s\"", d->reason, want);
}

static void no_pt_bochs(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&bochs, PTV_PT_AUTO, &d), PT_ENGINE_OFF);
    assert_false(d.refused);
    assert_reason(&d, "CPUID.7:EBX[25]=0");
    assert_false(d.guest.present);
    assert_int_equal(pt_decide(&bochs, PTV_PT_SYSTEM, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
    assert_reason(&d, "CPUID.7:EBX[25]=0");
    assert_reason(&d, "pt_mode=system");
    assert_int_equal(pt_decide(&bochs, PTV_PT_HOST_GUEST, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
}

static void no_vmx_pt_broadwell(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&broadwell, PTV_PT_AUTO, &d), PT_ENGINE_OFF);
    assert_reason(&d, "IA32_VMX_MISC[14]=0: PT not usable in VMX operation");
    assert_int_equal(pt_decide(&broadwell, PTV_PT_HOST_GUEST, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
    assert_reason(&d, "IA32_VMX_MISC[14]=0");
    assert_int_equal(pt_decide(&broadwell, PTV_PT_SYSTEM, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
    assert_int_equal(d.entry_ctls | d.exit_ctls | d.secondary_ctls, 0);
}

static void skylake_shadow(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&skylake, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_SHADOW);
    assert_false(d.refused);
    assert_reason(&d, "PT_USE_GPA");
    assert_false(d.load_clear); /* switching uses the MSR-load lists */
    assert_int_equal(d.secondary_ctls, CONCEAL_SEC);
    assert_int_equal(d.exit_ctls, CONCEAL_EXIT);
    assert_int_equal(d.entry_ctls, CONCEAL_ENTRY);
    assert_true(d.guest.present);
    /* shadow mode: ToPA only (single-range would bypass the shadow tables) */
    assert_int_equal(d.guest.leaf14[0][PT_ECX], PT_CAP_ECX_TOPA | PT_CAP_ECX_TOPA_MULTI);
    assert_int_equal(d.guest.leaf14[0][PT_EBX], 0xf);
    assert_int_equal(d.guest.leaf14[1][PT_EAX], 0x02490002);
    assert_int_equal(d.guest.leaf14[1][PT_EBX], 0x003f3fff);
    assert_int_equal(d.guest.maxphyaddr, 39);
    assert_int_equal(d.guest.vaddr_bits, 48);

    assert_int_equal(pt_decide(&skylake, PTV_PT_SYSTEM, &d), PT_ENGINE_SYSTEM);
    assert_false(d.guest.present);
    /* system mode: no PT controls at all, the VMM's trace shows VMX transitions */
    assert_int_equal(d.entry_ctls | d.exit_ctls | d.secondary_ctls, 0);
    assert_false(d.load_clear);
}

static void icelake_hw(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&icelake, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_HW);
    assert_true(d.load_clear);
    assert_int_equal(d.secondary_ctls, SECONDARY_EXEC_PT_USE_GPA | CONCEAL_SEC);
    assert_int_equal(d.exit_ctls, VM_EXIT_CLEAR_IA32_RTIT_CTL | CONCEAL_EXIT);
    assert_int_equal(d.entry_ctls, VM_ENTRY_LOAD_IA32_RTIT_CTL | CONCEAL_ENTRY);
    assert_int_equal(d.guest.leaf14[0][PT_EBX], 0x3f);
    assert_int_equal(d.guest.leaf14[0][PT_ECX], 0x7);
    assert_int_equal(d.guest.vaddr_bits, 57);
    assert_int_equal(pt_decide(&icelake, PTV_PT_HOST_GUEST, &d), PT_ENGINE_HOST_GUEST_HW);
    assert_int_equal(pt_decide(&icelake, PTV_PT_OFF, &d), PT_ENGINE_OFF);
    assert_false(d.refused);
    assert_reason(&d, "off");
    assert_int_equal(d.entry_ctls | d.exit_ctls | d.secondary_ctls, 0);
}

/* Load/clear are used as a pair; each missing piece of hardware mode is named. */
static void partial_controls(void **state)
{
    struct pt_decision d;
    struct pt_caps c = icelake;

    c.entry_allowed1 &= ~VM_ENTRY_LOAD_IA32_RTIT_CTL;
    assert_int_equal(pt_decide(&c, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_SHADOW);
    assert_reason(&d, "load IA32_RTIT_CTL");
    assert_false(d.load_clear);
    assert_int_equal(d.exit_ctls & VM_EXIT_CLEAR_IA32_RTIT_CTL, 0);

    c = icelake;
    c.exit_allowed1 &= ~VM_EXIT_CLEAR_IA32_RTIT_CTL;
    assert_int_equal(pt_decide(&c, PTV_PT_HOST_GUEST, &d), PT_ENGINE_HOST_GUEST_SHADOW);
    assert_reason(&d, "clear IA32_RTIT_CTL");
    assert_false(d.load_clear);
    assert_int_equal(d.entry_ctls & VM_ENTRY_LOAD_IA32_RTIT_CTL, 0);

    c = icelake;
    c.secondary_allowed1 &= ~SECONDARY_EXEC_PT_USE_GPA;
    assert_int_equal(pt_decide(&c, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_SHADOW);
    assert_reason(&d, "PT_USE_GPA");
    assert_true(d.load_clear); /* shadow mode still uses the controls it has */
    assert_int_equal(d.secondary_ctls & SECONDARY_EXEC_PT_USE_GPA, 0);

    /* single-range only, no hardware mode: nothing can shadow it -> refused */
    c = skylake;
    c.leaf14[0][PT_ECX] = PT_CAP_ECX_SINGLE_RANGE;
    assert_int_equal(pt_decide(&c, PTV_PT_HOST_GUEST, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
    assert_reason(&d, "no ToPA output");
    assert_int_equal(pt_decide(&c, PTV_PT_AUTO, &d), PT_ENGINE_OFF);
    assert_false(d.refused);
    /* hardware mode handles single-range output itself */
    c = icelake;
    c.leaf14[0][PT_ECX] = PT_CAP_ECX_SINGLE_RANGE;
    assert_int_equal(pt_decide(&c, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_HW);
    assert_int_equal(d.guest.leaf14[0][PT_ECX], PT_CAP_ECX_SINGLE_RANGE);
}

static void guest_view_filters(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&everything, PTV_PT_AUTO, &d), PT_ENGINE_HOST_GUEST_HW);
    /* no PSB/PMI preservation, event trace, TNT disable */
    assert_int_equal(d.guest.leaf14[0][PT_EBX], 0x3f);
    /* no trace transport; LIP mirrored (it describes the packets, see pt_caps.c) */
    assert_int_equal(d.guest.leaf14[0][PT_ECX], 0x80000007);
    assert_int_equal(d.guest.leaf14[0][PT_EAX], 1);
    assert_int_equal(pt_cap_num_ranges(d.guest.leaf14), 4);
    assert_int_equal(d.guest.leaf14[1][PT_EAX], 0xffff0004);
    assert_int_equal(d.guest.leaf14[0][PT_EDX] | d.guest.leaf14[1][PT_ECX], 0);
}

/* Whatever the CPU and the request, the guest view is a subset of the host. */
static void guest_view_subset(void **state)
{
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        for (size_t r = 0; r < sizeof(requests) / sizeof(requests[0]); r++) {
            const struct pt_caps *c = fixtures[i];
            struct pt_decision d;
            enum pt_engine_mode m = pt_decide(c, requests[r], &d);
            const struct pt_gcaps *g = &d.guest;

            assert_int_equal(m, d.mode);
            assert_true(strlen(d.reason) > 0);
            assert_int_equal(g->present, pt_mode_guest_owns(m));
            assert_true(d.refused ? m == PT_ENGINE_OFF : true);
            /* every control the engine asks for is allowed-1 */
            assert_int_equal(d.secondary_ctls & ~c->secondary_allowed1, 0);
            assert_int_equal(d.exit_ctls & ~c->exit_allowed1, 0);
            assert_int_equal(d.entry_ctls & ~c->entry_allowed1, 0);
            if (!g->present)
                continue;
            assert_int_equal(g->leaf14[0][PT_EBX] & ~c->leaf14[0][PT_EBX], 0);
            assert_int_equal(g->leaf14[0][PT_ECX] & ~c->leaf14[0][PT_ECX], 0);
            assert_true(pt_cap_num_ranges(g->leaf14) <= pt_cap_num_ranges(c->leaf14));
            assert_int_equal(pt_cap_mtc_periods(g->leaf14) & ~pt_cap_mtc_periods(c->leaf14), 0);
            assert_int_equal(g->leaf14[1][PT_EBX] & ~c->leaf14[1][PT_EBX], 0);
        }
    }
}

static void unknown_request(void **state)
{
    struct pt_decision d;

    assert_int_equal(pt_decide(&icelake, 99, &d), PT_ENGINE_OFF);
    assert_true(d.refused);
}

static void cpuid_filter(void **state)
{
    struct pt_decision d;
    uint32_t r[4];

    pt_decide(&skylake, PTV_PT_SYSTEM, &d);
    r[0] = 0;
    r[1] = skylake.cpuid7_ebx;
    r[2] = 0x1234;
    r[3] = 0x5678;
    pt_cpuid_filter(&d, 7, 0, r);
    assert_int_equal(r[1], skylake.cpuid7_ebx & ~CPUID_7_EBX_INTEL_PT);
    assert_int_equal(r[2], 0x1234); /* only bit 25 of EBX changes */
    for (uint32_t sub = 0; sub < 3; sub++) {
        uint32_t l[4] = {1, 2, 3, 4};
        pt_cpuid_filter(&d, 0x14, sub, l);
        assert_int_equal(l[0] | l[1] | l[2] | l[3], 0);
    }

    pt_decide(&everything, PTV_PT_HOST_GUEST, &d);
    r[1] = 0xffffffff;
    pt_cpuid_filter(&d, 7, 0, r);
    assert_int_equal(r[1], 0xffffffff);
    r[1] = 0xffffffff; /* subleaf 1 of leaf 7 is not the PT bit */
    pt_decide(&skylake, PTV_PT_OFF, &d);
    pt_cpuid_filter(&d, 7, 1, r);
    assert_int_equal(r[1], 0xffffffff);

    pt_decide(&everything, PTV_PT_HOST_GUEST, &d);
    for (uint32_t sub = 0; sub < 3; sub++) {
        uint32_t l[4] = {~0u, ~0u, ~0u, ~0u};
        pt_cpuid_filter(&d, 0x14, sub, l);
        if (sub < 2)
            assert_memory_equal(l, d.guest.leaf14[sub], sizeof(l));
        else
            assert_int_equal(l[0] | l[1] | l[2] | l[3], 0);
    }
    /* other leaves untouched */
    uint32_t o[4] = {1, 2, 3, 4};
    pt_cpuid_filter(&d, 0x13, 0, o);
    assert_int_equal(o[0] + o[1] + o[2] + o[3], 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_pt_bochs),       cmocka_unit_test(no_vmx_pt_broadwell),
        cmocka_unit_test(skylake_shadow),    cmocka_unit_test(icelake_hw),
        cmocka_unit_test(partial_controls),  cmocka_unit_test(guest_view_filters),
        cmocka_unit_test(guest_view_subset), cmocka_unit_test(unknown_request),
        cmocka_unit_test(cpuid_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
