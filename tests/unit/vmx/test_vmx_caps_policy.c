/* SPDX-License-Identifier: MIT */
/*
 * The VMX set-up decision, the PT mode decision and the AP decision on the capability profiles of
 * real vehicles (vmx_profiles.h: nested KVM old and new, Bochs measured, bare-metal Skylake) and
 * on hostile or broken ones.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <ptv/handoff.h>
#include "vmx/vmx_caps_policy.h"
#include "emul/guest_policy.h"
#include "fakes/vmx_profiles.h"

/* The controls every profile that the VMM accepts gets (none has user wait/pause). */
#define PIN_WANT   0x00000016u /* default1 only: no pin-based control is requested */
#define PROC_WANT  (0x04006172u | CPU_BASED_USE_MSR_BITMAPS | CPU_BASED_ACTIVATE_SECONDARY_CONTROLS)
#define PROC2_WANT 0x001010aau /* EPT, RDTSCP, VPID, unrestricted guest, INVPCID, XSAVES */
#define EXIT_WANT  0x003f7fffu /* default1 + host 64-bit, PAT/EFER save+load, debug, PERF_GLOBAL */
#define ENTRY_WANT 0x0000f1ffu /* default1 + PAT/EFER/debug/PERF_GLOBAL; IA-32e is vmcs_setup's */

static struct vmx_cpu_profile vmx_of(int id)
{
    return vmx_profiles[id].vmx;
}

static void assert_within(uint64_t cap, uint32_t v)
{
    assert_int_equal(v & (uint32_t)cap, (uint32_t)cap); /* allowed-0: must-be-1 bits set */
    assert_int_equal(v & ~(uint32_t)(cap >> 32), 0);    /* allowed-1: nothing else */
}

static void assert_accepted(const struct vmx_cpu_profile *p, struct vmx_ctl_decision *d)
{
    assert_int_equal(vmx_decide_controls(p, d), 0);
    assert_string_equal(d->reason, "");
    assert_within(p->caps.pin, d->ctls.pin);
    assert_within(p->caps.proc, d->ctls.proc);
    assert_within(p->caps.proc2, d->ctls.proc2);
    assert_within(p->caps.exit, d->ctls.exit);
    assert_within(p->caps.entry, d->ctls.entry);
}

static void assert_refused(const struct vmx_cpu_profile *p, const char *reason)
{
    struct vmx_ctl_decision d;
    assert_int_equal(vmx_decide_controls(p, &d), PTV_ENTRY_MISSING_CONTROL);
    assert_string_equal(d.reason, reason);
}

static void assert_common_controls(const struct vmx_ctl_decision *d)
{
    assert_int_equal(d->ctls.pin, PIN_WANT);
    assert_int_equal(d->ctls.proc, PROC_WANT);
    assert_int_equal(d->ctls.proc2, PROC2_WANT);
    assert_int_equal(d->ctls.exit, EXIT_WANT);
    assert_int_equal(d->ctls.entry, ENTRY_WANT);
    assert_int_equal(d->ctls.guest_features,
                     GUEST_FEAT_RDTSCP | GUEST_FEAT_INVPCID | GUEST_FEAT_XSAVES);
    assert_false(d->perf_global_unswitched);
}

static void assert_pt(const struct cpu_profile *p, uint32_t requested, enum pt_engine_mode mode,
                      const char *reason)
{
    struct pt_caps c = profile_pt_caps(p);
    struct pt_decision d;
    assert_int_equal(pt_decide(&c, requested, &d), mode);
    assert_string_equal(d.reason, reason);
}

/* ---- nested KVM ---- */

static void test_kvm_controls(void **state)
{
    for (int id = PROFILE_KVM_5_10; id <= PROFILE_KVM_6_X; id++) {
        struct vmx_cpu_profile p = vmx_of(id);
        struct vmx_ctl_decision d;
        assert_accepted(&p, &d);
        assert_common_controls(&d);
        /* KVM's VPID caps have INVVPID: VPID stays on; PERF_GLOBAL switched at every exit */
        assert_true(d.ctls.proc2 & SECONDARY_EXEC_ENABLE_VPID);
        assert_true(d.ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL);
        assert_true(d.ctls.entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL);
    }
}

static void test_kvm_pmu_variants(void **state)
{
    struct vmx_ctl_decision d;
    /* QEMU -cpu host,pmu=off: no PERF_GLOBAL_CTRL MSR, nothing to switch, no warning */
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_6_X);
    p.pmu_version = 0;
    assert_accepted(&p, &d);
    assert_int_equal(d.ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL, 0);
    assert_int_equal(d.ctls.entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, 0);
    assert_false(d.perf_global_unswitched);
    /* KVM before 5.5 never offered L1 the load-PERF_GLOBAL_CTRL controls: PMU v2 without
     * them -> accepted, both dropped, and the caller's warning is due */
    p = vmx_of(PROFILE_KVM_5_10);
    p.caps.exit &= ~((uint64_t)VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL << 32);
    p.caps.entry &= ~((uint64_t)VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL << 32);
    assert_accepted(&p, &d);
    assert_int_equal(d.ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL, 0);
    assert_int_equal(d.ctls.entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, 0);
    assert_true(d.perf_global_unswitched);
    /* only one of the pair: both off (a half-switched MSR is worse than none) */
    p = vmx_of(PROFILE_KVM_6_X);
    p.caps.entry &= ~((uint64_t)VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL << 32);
    assert_accepted(&p, &d);
    assert_int_equal(d.ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL, 0);
    assert_true(d.perf_global_unswitched);
}

static void test_kvm_pt(void **state)
{
    for (int id = PROFILE_KVM_5_10; id <= PROFILE_KVM_6_X; id++) {
        const struct cpu_profile *p = &vmx_profiles[id];
        assert_pt(p, PTV_PT_AUTO, PT_ENGINE_OFF,
                  "pt_mode=auto: CPUID.7:EBX[25]=0: no Intel PT; PT off");
        assert_pt(p, PTV_PT_HOST_GUEST, PT_ENGINE_OFF,
                  "pt_mode=host-guest refused: CPUID.7:EBX[25]=0: no Intel PT; PT off");
        assert_pt(p, PTV_PT_SYSTEM, PT_ENGINE_OFF,
                  "pt_mode=system refused: CPUID.7:EBX[25]=0: no Intel PT; PT off");
        assert_pt(p, PTV_PT_OFF, PT_ENGINE_OFF, "pt_mode=off requested");
    }
    /* L0 with kvm_intel.pt_mode=1 (before 6.13): L1 sees PT in CPUID, but KVM's nested VMX MSRs
     * have no VMX_MISC[14] and no PT controls */
    struct cpu_profile p = vmx_profiles[PROFILE_KVM_6_X];
    const struct cpu_profile *skl = &vmx_profiles[PROFILE_SKYLAKE];
    p.cpuid7_ebx |= CPUID_7_EBX_INTEL_PT;
    memcpy(p.leaf14, skl->leaf14, sizeof(p.leaf14));
    assert_pt(&p, PTV_PT_HOST_GUEST, PT_ENGINE_OFF,
              "pt_mode=host-guest refused: IA32_VMX_MISC[14]=0: PT not usable in VMX operation; "
              "PT off");
    assert_pt(&p, PTV_PT_SYSTEM, PT_ENGINE_OFF,
              "pt_mode=system refused: IA32_VMX_MISC[14]=0: PT not usable in VMX operation; "
              "PT off");
    struct pt_caps c = profile_pt_caps(&p);
    struct pt_decision d;
    pt_decide(&c, PTV_PT_AUTO, &d);
    assert_int_equal(d.secondary_ctls | d.exit_ctls | d.entry_ctls, 0);
    assert_false(d.guest.present);
}

static void test_kvm_aps(void **state)
{
    const char *why = NULL;
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_6_X);
    assert_true(vmx_can_virtualize_aps(&p, &why));
    p = vmx_of(PROFILE_KVM_5_10);
    assert_false(vmx_can_virtualize_aps(&p, &why));
    assert_string_equal(why, "IA32_VMX_MISC[8]=0: no wait-for-SIPI activity state, a guest's "
                             "SIPI would never reach the VMM");
    /* the EPT shootdown IPI is an NMI: without NMI exiting + virtual NMIs it would
     * reach the guest, so APs stay out (either bit missing is enough) */
    const uint64_t bits[] = {(uint64_t)PIN_BASED_NMI_EXITING << 32,
                             (uint64_t)PIN_BASED_VIRTUAL_NMIS << 32};
    for (unsigned i = 0; i < 2; i++) {
        p = vmx_of(PROFILE_KVM_6_X);
        p.caps.pin &= ~bits[i];
        assert_false(vmx_can_virtualize_aps(&p, &why));
        assert_string_equal(why, "no NMI exiting / virtual NMIs: the VMM's EPT shootdown NMIs "
                                 "would reach the guest");
    }
}

/* nested KVM as the VMM really read it under tests/system/nested-kvm.sh: the controls of the
 * source-derived profile, MTF offered; on a Bochs 2.7 L0 KVM offered no MTF (the VMM's probe
 * then steps with the trap flag) and no XSAVES (the guest goes without); APs, PT as there */
static void test_kvm_measured(void **state)
{
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_BOCHS);
    struct vmx_ctl_decision d;
    const char *why = NULL;
    assert_accepted(&p, &d);
    assert_common_controls(&d);
    assert_false(d.perf_global_unswitched);
    assert_true(p.caps.proc >> 32 & CPU_BASED_MONITOR_TRAP_FLAG);
    assert_true(vmx_can_virtualize_aps(&p, &why));
    assert_pt(&vmx_profiles[PROFILE_KVM_BOCHS], PTV_PT_AUTO, PT_ENGINE_OFF,
              "pt_mode=auto: CPUID.7:EBX[25]=0: no Intel PT; PT off");
    /* the Bochs 2.7 L0's offer */
    p.caps.proc = 0xf7f9fffe04006172ull;
    p.caps.proc2 = 0x02037bff00000000ull;
    assert_accepted(&p, &d);
    assert_int_equal(d.ctls.proc, PROC_WANT);
    assert_int_equal(d.ctls.proc2, PROC2_WANT & ~SECONDARY_EXEC_XSAVES);
    assert_int_equal(d.ctls.guest_features, GUEST_FEAT_RDTSCP | GUEST_FEAT_INVPCID);
}

/* ---- Bochs: what the VMM wrote into the VMCS there (build/test/bochs-conformance) ---- */

static void test_bochs_matches_measured_vmcs(void **state)
{
    struct vmx_cpu_profile p = vmx_of(PROFILE_BOCHS_SKX);
    struct vmx_ctl_decision d;
    assert_accepted(&p, &d);
    assert_common_controls(&d);
    /* the dump: PIN 0x16, PROC 0x96006172 (exit_io.c adds I/O bitmaps), SECONDARY 0x1010aa,
     * EXIT 0x3f7fff, ENTRY 0xf3ff (vcpu_setup.c adds IA-32e mode) */
    assert_int_equal(d.ctls.pin, 0x16);
    assert_int_equal(d.ctls.proc | CPU_BASED_USE_IO_BITMAPS, 0x96006172);
    assert_int_equal(d.ctls.proc2, 0x001010aa);
    assert_int_equal(d.ctls.exit, 0x003f7fff);
    assert_int_equal(d.ctls.entry | VM_ENTRY_IA32E_MODE, 0x0000f3ff);
}

static void test_bochs_pt_and_aps(void **state)
{
    const struct cpu_profile *p = &vmx_profiles[PROFILE_BOCHS_SKX];
    /* the "[cpu0 pt] mode off: ..." lines of build/test/bochs-linux and bochs-pt-selftest */
    assert_pt(p, PTV_PT_AUTO, PT_ENGINE_OFF,
              "pt_mode=auto: CPUID.7:EBX[25]=0: no Intel PT; PT off");
    assert_pt(p, PTV_PT_HOST_GUEST, PT_ENGINE_OFF,
              "pt_mode=host-guest refused: CPUID.7:EBX[25]=0: no Intel PT; PT off");
    assert_pt(p, PTV_PT_OFF, PT_ENGINE_OFF, "pt_mode=off requested");
    const char *why = NULL;
    assert_true(vmx_can_virtualize_aps(&p->vmx, &why)); /* TEST-VEHICLES: MISC[8] = 1 */
}

/* ---- bare-metal Skylake ---- */

static void test_skylake(void **state)
{
    const struct cpu_profile *p = &vmx_profiles[PROFILE_SKYLAKE];
    struct vmx_ctl_decision d;
    assert_accepted(&p->vmx, &d);
    assert_common_controls(&d);
    /* the decision never turns the PT controls on; the PT engine adds them */
    assert_int_equal(d.ctls.proc2 & (SECONDARY_EXEC_PT_CONCEAL_VMX | SECONDARY_EXEC_PT_USE_GPA), 0);
    const char *why = NULL;
    assert_true(vmx_can_virtualize_aps(&p->vmx, &why));

    /* PT in VMX but no PT_USE_GPA / RTIT_CTL load+clear: the guest gets PT through shadow ToPA */
    struct pt_caps c = profile_pt_caps(p);
    struct pt_decision pd;
    assert_int_equal(pt_decide(&c, PTV_PT_AUTO, &pd), PT_ENGINE_HOST_GUEST_SHADOW);
    assert_string_equal(pd.reason, "pt_mode=auto: secondary control PT_USE_GPA (bit 24) not "
                                   "allowed-1: guest owns PT through shadow ToPA");
    assert_int_equal(pd.secondary_ctls, SECONDARY_EXEC_PT_CONCEAL_VMX);
    assert_int_equal(pd.exit_ctls, VM_EXIT_PT_CONCEAL_PIP);
    assert_int_equal(pd.entry_ctls, VM_ENTRY_PT_CONCEAL_PIP);
    assert_false(pd.load_clear);
    assert_true(pd.guest.present);
    /* the PT engine's controls fit this CPU's MSRs on top of the decision's */
    assert_within(p->vmx.caps.proc2, d.ctls.proc2 | pd.secondary_ctls);
    assert_within(p->vmx.caps.exit, d.ctls.exit | pd.exit_ctls);
    assert_within(p->vmx.caps.entry, d.ctls.entry | pd.entry_ctls);
    assert_int_equal(pt_decide(&c, PTV_PT_SYSTEM, &pd), PT_ENGINE_SYSTEM);
}

/* ---- hostile and broken profiles ---- */

static void test_missing_ept_or_unrestricted_guest(void **state)
{
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_6_X);
    p.caps.proc2 &= ~((uint64_t)SECONDARY_EXEC_ENABLE_EPT << 32);
    assert_refused(&p, "required secondary processor-based (EPT, unrestricted guest) control(s) "
                       "0x2 not supported");
    p = vmx_of(PROFILE_KVM_6_X); /* KVM with kvm_intel.unrestricted_guest=0 */
    p.caps.proc2 &= ~((uint64_t)SECONDARY_EXEC_UNRESTRICTED_GUEST << 32);
    assert_refused(&p, "required secondary processor-based (EPT, unrestricted guest) control(s) "
                       "0x80 not supported");
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.proc &= ~((uint64_t)CPU_BASED_ACTIVATE_SECONDARY_CONTROLS << 32);
    p.caps.proc2 = 0; /* as vmx_read_caps_cpu() leaves it then */
    assert_refused(&p, "required primary processor-based control(s) 0x80000000 not supported");
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.exit &= ~((uint64_t)VM_EXIT_LOAD_IA32_EFER << 32);
    assert_refused(&p, "required VM-exit control(s) 0x200000 not supported");
}

static void test_inconsistent_msrs(void **state)
{
    /* allowed-0 says "must be 1", allowed-1 says "may not be 1" */
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_6_X);
    p.caps.pin = 0x0000007700000008ull | 0x16;
    assert_refused(&p, "inconsistent pin-based capability MSR: bit(s) 0x8 must be 1 (allowed-0) "
                       "but may not be 1 (allowed-1)");
    p = vmx_of(PROFILE_SKYLAKE);
    p.caps.entry = 0x0000000000000200ull;
    assert_refused(&p, "inconsistent VM-entry capability MSR: bit(s) 0x200 must be 1 (allowed-0) "
                       "but may not be 1 (allowed-1)");
    /* a must-be-1 bit the VMM has to keep clear (PT control only the PT engine may own) */
    p = vmx_of(PROFILE_SKYLAKE);
    p.caps.proc2 |= SECONDARY_EXEC_PT_CONCEAL_VMX;
    assert_refused(&p, "secondary processor-based (EPT, unrestricted guest) capability MSR "
                       "forces control(s) 0x80000 that the VMM must keep clear");
    /* PERF_GLOBAL load forced on a CPU without the MSR */
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.exit |= VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL;
    p.pmu_version = 1;
    assert_refused(&p, "VM-exit capability MSR forces control(s) 0x1000 that the VMM must keep "
                       "clear");
}

static void test_bad_basic_ept_maxphyaddr(void **state)
{
    const char *basic = "IA32_VMX_BASIC: unsupported region size, 32-bit addresses or non-WB "
                        "VMCS type";
    struct vmx_cpu_profile p = vmx_of(PROFILE_KVM_6_X);
    p.caps.basic &= ~(0xfull << 50); /* VMCS memory type UC */
    assert_refused(&p, basic);
    p = vmx_of(PROFILE_KVM_6_X);
    p.caps.basic |= VMX_BASIC_32BIT_PHYS;
    assert_refused(&p, basic);
    p = vmx_of(PROFILE_KVM_6_X);
    p.caps.basic = (p.caps.basic & ~(0x1fffull << 32)) | (0x1001ull << 32);
    assert_refused(&p, basic);
    assert_null(vmx_basic_unusable(vmx_profiles[PROFILE_SKYLAKE].vmx.caps.basic));

    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.ept_vpid &= ~VMX_EPTP_WB_BIT;
    assert_refused(&p, "EPT lacks 4-level walks or write-back paging structures");
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.ept_vpid &= ~VMX_EPT_PAGE_WALK_4_BIT;
    assert_refused(&p, "EPT lacks 4-level walks or write-back paging structures");
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.ept_vpid &= ~(VMX_EPT_EXTENT_GLOBAL_BIT | VMX_EPT_EXTENT_SINGLE_CONTEXT_BIT);
    assert_refused(&p, "INVEPT not supported");
    p = vmx_of(PROFILE_KVM_6_X);
    p.caps.maxphyaddr = 0;
    assert_refused(&p, "MAXPHYADDR 0 outside 32..52");
    p.caps.maxphyaddr = 64;
    assert_refused(&p, "MAXPHYADDR 64 outside 32..52");

    /* VPID without INVVPID: accepted, VPID off (the VMM could not flush its tags) */
    struct vmx_ctl_decision d;
    p = vmx_of(PROFILE_BOCHS_SKX);
    p.caps.ept_vpid &= ~VMX_VPID_INVVPID_BIT;
    assert_accepted(&p, &d);
    assert_int_equal(d.ctls.proc2 & SECONDARY_EXEC_ENABLE_VPID, 0);
}

/* ---- an AP must report the BSP's capabilities to share its controls ---- */

static void test_caps_same(void **state)
{
    const char *why = NULL;
    struct vmx_caps bsp = vmx_profiles[PROFILE_KVM_6_X].vmx.caps, ap = bsp;
    assert_int_equal(vmx_caps_same(&bsp, &ap, &why), 1);
    assert_int_equal(vmx_caps_same(&vmx_profiles[PROFILE_KVM_6_X].vmx.caps,
                                   &vmx_profiles[PROFILE_KVM_5_10].vmx.caps, &why),
                     0);
    assert_string_equal(why, "IA32_VMX_PROCBASED_CTLS2 differs from the BSP's");

    /* every field counts: flip one bit of each in turn */
    struct {
        uint64_t *f;
        const char *why;
    } fields[] = {
        {&ap.basic, "IA32_VMX_BASIC differs from the BSP's"},
        {&ap.pin, "IA32_VMX_(TRUE_)PINBASED_CTLS differs from the BSP's"},
        {&ap.proc, "IA32_VMX_(TRUE_)PROCBASED_CTLS differs from the BSP's"},
        {&ap.proc2, "IA32_VMX_PROCBASED_CTLS2 differs from the BSP's"},
        {&ap.exit, "IA32_VMX_(TRUE_)EXIT_CTLS differs from the BSP's"},
        {&ap.entry, "IA32_VMX_(TRUE_)ENTRY_CTLS differs from the BSP's"},
        {&ap.misc, "IA32_VMX_MISC differs from the BSP's"},
        {&ap.ept_vpid, "IA32_VMX_EPT_VPID_CAP differs from the BSP's"},
        {&ap.cr0_fixed0, "IA32_VMX_CR0_FIXED0 differs from the BSP's"},
        {&ap.cr0_fixed1, "IA32_VMX_CR0_FIXED1 differs from the BSP's"},
        {&ap.cr4_fixed0, "IA32_VMX_CR4_FIXED0 differs from the BSP's"},
        {&ap.cr4_fixed1, "IA32_VMX_CR4_FIXED1 differs from the BSP's"},
    };
    for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        ap = bsp;
        *fields[i].f ^= 1ull << (i * 5 % 64);
        why = NULL;
        assert_int_equal(vmx_caps_same(&bsp, &ap, &why), 0);
        assert_string_equal(why, fields[i].why);
    }
    ap = bsp;
    ap.maxphyaddr = 46;
    assert_int_equal(vmx_caps_same(&bsp, &ap, &why), 0);
    assert_string_equal(why, "MAXPHYADDR (CPUID.80000008H) differs from the BSP's");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kvm_controls),
        cmocka_unit_test(test_kvm_pmu_variants),
        cmocka_unit_test(test_kvm_pt),
        cmocka_unit_test(test_kvm_aps),
        cmocka_unit_test(test_kvm_measured),
        cmocka_unit_test(test_bochs_matches_measured_vmcs),
        cmocka_unit_test(test_bochs_pt_and_aps),
        cmocka_unit_test(test_skylake),
        cmocka_unit_test(test_missing_ept_or_unrestricted_guest),
        cmocka_unit_test(test_inconsistent_msrs),
        cmocka_unit_test(test_bad_basic_ept_maxphyaddr),
        cmocka_unit_test(test_caps_same),
    };
    return cmocka_run_group_tests_name("vmx_caps_policy", tests, NULL, NULL);
}
