/* SPDX-License-Identifier: MIT */
/*
 * Capability profiles: what the VMM's set-up code reads on a given vehicle (VMX capability MSRs,
 * CPUID facts, the PT leaves), as test data for the VMX control decision (vmx_caps_policy.c), the
 * PT mode decision (vmm/pt/pt_caps.c) and the AP decision.  Each value says where it comes from:
 * [M] measured, [K] derived from KVM's source, [S] from the SDM / public dumps, [A] assumed.
 *
 * Control MSRs are the TRUE_* ones where VMX_BASIC[55] = 1 (all profiles here), as
 * vmx_read_caps_cpu() reads them.
 */
#ifndef PTV_TESTS_VMX_PROFILES_H
#define PTV_TESTS_VMX_PROFILES_H

#include <stdint.h>
#include "vmx/vmx_caps_policy.h"
#include "pt/pt_caps.h"

struct cpu_profile {
    const char *name;
    struct vmx_cpu_profile vmx;
    uint32_t cpuid7_ebx;   /* CPUID.(7,0):EBX as the VMM sees it */
    uint32_t leaf14[2][4]; /* CPUID.(0x14,0/1), zero when PT is hidden */
    uint8_t vaddr_bits;    /* CPUID.80000008H:EAX[15:8] */
};

/* The same mapping as vmm/pt/shim/pt_probe.c: the PT decision's inputs from a profile. */
static inline struct pt_caps profile_pt_caps(const struct cpu_profile *p)
{
    struct pt_caps c = {0};
    c.cpuid7_ebx = p->cpuid7_ebx;
    if (p->cpuid7_ebx & CPUID_7_EBX_INTEL_PT)
        for (unsigned s = 0; s < 2; s++)
            for (unsigned r = 0; r < 4; r++)
                c.leaf14[s][r] = p->leaf14[s][r];
    c.vmx_misc = p->vmx.caps.misc;
    c.secondary_allowed1 = (uint32_t)(p->vmx.caps.proc2 >> 32);
    c.exit_allowed1 = (uint32_t)(p->vmx.caps.exit >> 32);
    c.entry_allowed1 = (uint32_t)(p->vmx.caps.entry >> 32);
    c.maxphyaddr = (uint8_t)p->vmx.caps.maxphyaddr;
    c.vaddr_bits = p->vaddr_bits;
    return c;
}

enum {
    PROFILE_KVM_5_10,  /* nested KVM before wait-for-SIPI emulation */
    PROFILE_KVM_6_X,   /* nested KVM from 5.11 on (wait-for-SIPI), 6.1+ PERF_GLOBAL */
    PROFILE_KVM_BOCHS, /* nested KVM 6.1 on a Bochs 3.0 L0 (the nested-kvm vehicle), measured */
    PROFILE_BOCHS_SKX, /* Bochs 2.7 corei7_skylake_x, measured */
    PROFILE_SKYLAKE,   /* bare-metal Skylake client (i7-6700 class) */
    PROFILE_COUNT
};

/*
 * Skylake PT leaves [S]: CPUID.14.0 EAX=1 (max subleaf), EBX=0xf (CR3 filter, PSB/CYC, IP filter,
 * MTC), ECX=0x7 (ToPA, multi-entry ToPA, single range); CPUID.14.1 EAX=0x02490002 (2 address
 * ranges, MTC period bitmap 0x249), EBX=0x003f3fff (CYC thresholds, PSB periods) - the values
 * public cpuid dumps of i7-6700/6700K show.  Linux perf's pt driver reads the same leaves.
 */
#define SKL_LEAF14                                                                                 \
    {                                                                                              \
        {1, 0xf, 0x7, 0},                                                                          \
        {                                                                                          \
            0x02490002, 0x003f3fff, 0, 0                                                           \
        }                                                                                          \
    }

/*
 * Nested KVM, as an L1 (the VMM run by QEMU -cpu host on an Intel L0) reads it.  Source [K]:
 * torvalds/linux arch/x86/kvm/vmx/nested.c, nested_vmx_setup_ctls_msrs() and (in newer trees) its
 * helpers nested_vmx_setup_{pinbased,exit,entry,cpubased,secondary}_ctls(),
 * nested_vmx_setup_misc_data(), nested_vmx_setup_basic(); the values L1 reads are assembled by
 * vmx_get_vmx_msr().  The L0 is taken as the Skylake client below [A].  What KVM does:
 *  - BASIC: VMCS12_REVISION 0x11e57ed0, TRUE_CTLS, size 4096 (VMCS12_SIZE), WB, INS/OUTS info
 *    when L0 has it.
 *  - pin: L0's bits & (ext-intr, NMI exiting, virtual NMIs, posted intr with APICv) | default1 |
 *    preemption timer (emulated).  Skylake client has no APICv: 0x7f [A].
 *  - primary: a fixed list (incl. HLT/INVLPG/MWAIT/RDPMC/RDTSC/CR3/CR8/MOV-DR exiting, I/O and
 *    MSR bitmaps - MSR bitmaps even without L0 support -, MTF, TPR shadow, secondary) | default1;
 *    allowed-0 = default1 without CR3-load/store exiting.
 *  - secondary: L0's bits & (descriptor exiting, RDTSCP, virtualize x2APIC, WBINVD exiting, APIC
 *    register virt, virtual intr delivery, RDRAND/RDSEED exiting, INVPCID, VMFUNC, XSAVES and,
 *    newer, TSC scaling and user wait/pause) | shadow VMCS | EPT + PML (EPT A/D) | VPID |
 *    unrestricted guest | virtualize APIC accesses.  Never PT_USE_GPA (24) nor conceal VMX from
 *    PT (19): no PT in VMX for L1.  RDTSCP/INVPCID/XSAVES follow the guest CPUID (present with
 *    -cpu host on Skylake).
 *  - exit: L0's (host address space size, load/save PAT, clear BNDCFGS) | default1 | load/save
 *    EFER | save preemption timer | ack interrupt | load PERF_GLOBAL_CTRL.  Never conceal PIP (24)
 *    nor clear RTIT_CTL (25).  allowed-0 = default1 without save debug controls.
 *  - entry: L0's (IA-32e mode, load PAT, load BNDCFGS) | default1 | load EFER | load
 *    PERF_GLOBAL_CTRL.  Never conceal PIP (17) nor load RTIT_CTL (18).  allowed-0 = default1
 *    without load debug controls.  BNDCFGS left out here (MPX gone from newer KVM) [A].
 *  - load PERF_GLOBAL_CTRL: up to 6.0, added per vCPU when the guest PMU has PERF_GLOBAL_CTRL
 *    (vmx.c nested_vmx_pmu_entry_exit_ctls_update(), since 5.5); from 6.1 always advertised
 *    ("KVM: nVMX: Always emulate PERF_GLOBAL_CTRL VM-Entry/VM-Exit controls").  QEMU -cpu host
 *    has pmu=on: both profiles have them, with a PMU of version 2 (KVM caps the guest's
 *    architectural PMU version at 2, pmu.c kvm_init_pmu_capability()).
 *  - EPT_VPID_CAP: L0's (4-level walk, 5-level walk, WB, INVEPT, execute-only) | single + all
 *    context INVEPT | 2M | 1G | A/D; VPID: INVVPID + all four extents.  No UC EPTP (bit 8).
 *  - MISC: L0's "store EFER.LMA" (bit 5) | VMWRITE to exit-info fields (29) | preemption timer
 *    rate 5 | activity HLT, and since commit bf0cd88ce363 "KVM: x86: emulate wait-for-SIPI and
 *    SIPI-VMExit" (queued Dec 2020, in Linux 5.11) activity wait-for-SIPI (bit 8).  Never bit 14
 *    (PT in VMX), shutdown activity (7) or CR3-target values (24:16 = 0).
 *  - CR0_FIXED0 = PE|NE|PG, CR4_FIXED0 = VMXE; the FIXED1 MSRs are L0's.
 *  - QEMU (target/i386/cpu.c feature_word_info[FEAT_VMX_*], since 5.0) passes these through for
 *    -cpu host, "vmx-activity-wait-sipi" included.
 *  - PT: KVM offers CPUID.7:EBX[25] only with kvm_intel.pt_mode=1 (host-guest), which is off by
 *    default and since Linux 6.13 (aa0d42cacf09, pt-facts KVM-BURY) behind CONFIG_BROKEN, so
 *    L1 sees no PT: CPUID.7:EBX[25]=0, leaf 0x14 zero.  Even with pt_mode=1 the nested MSRs have
 *    no VMX_MISC[14] and none of the PT controls (see the test's pt_mode=1 variant).
 *  - Known SIPI/INIT behaviour (nested.c vmx_check_nested_events()): INIT to L1 in VMX root is
 *    latched (blocked, as on hardware) and exits to L1 as reason 3 while L2 runs; a SIPI exits to
 *    L1 (reason 4) only while L2 is in wait-for-SIPI, otherwise it is dropped (fixed to fall
 *    through in 2022).  Before 5.11 L1 cannot use wait-for-SIPI at all.
 */
#define KVM_L1_BASIC    0x00d8100011e57ed0ull
#define KVM_L1_PIN      0x0000007f00000016ull
#define KVM_L1_PROC     0xfff9fffe04006172ull
#define KVM_L1_EXIT     0x007fffff00036dfbull
#define KVM_L1_ENTRY    0x0000f3ff000011fbull
#define KVM_L1_EPT_VPID 0x00000f0106334041ull

static const struct cpu_profile vmx_profiles[PROFILE_COUNT] = {
    [PROFILE_KVM_5_10] =
        {
            .name = "nested KVM 5.10 (QEMU -cpu host, Skylake L0)",
            .vmx =
                {
                    .caps =
                        {
                            .basic = KVM_L1_BASIC,
                            /* MISC: LMA | HLT | VMWRITE-any | rate 5; no wait-for-SIPI */
                            .misc = 0x20000065ull,
                            .ept_vpid = KVM_L1_EPT_VPID,
                            .pin = KVM_L1_PIN,
                            .proc = KVM_L1_PROC,
                            /* no TSC scaling (bit 25) in the 5.10 mask */
                            .proc2 = 0x001378ff00000000ull,
                            .exit = KVM_L1_EXIT,
                            .entry = KVM_L1_ENTRY,
                            .cr0_fixed0 = 0x80000021ull,
                            .cr0_fixed1 = 0xffffffffull,
                            .cr4_fixed0 = 0x2000ull,
                            .cr4_fixed1 = 0x003727ffull,
                            .maxphyaddr = 39, /* QEMU -cpu host: host-phys-bits */
                        },
                    .pmu_version = 2,
                },
            .cpuid7_ebx = 0x009c6fbbu, /* Skylake's EBX (0x029c6fbf) without PT (25) and SGX [A] */
            .vaddr_bits = 48,
        },
    [PROFILE_KVM_6_X] =
        {
            .name = "nested KVM >= 5.11 (QEMU -cpu host, Skylake L0)",
            .vmx =
                {
                    .caps =
                        {
                            .basic = KVM_L1_BASIC,
                            .misc = 0x20000165ull, /* + wait-for-SIPI (bit 8) */
                            .ept_vpid = KVM_L1_EPT_VPID,
                            .pin = KVM_L1_PIN,
                            .proc = KVM_L1_PROC,
                            .proc2 = 0x021378ff00000000ull, /* + TSC scaling */
                            .exit = KVM_L1_EXIT,
                            .entry = KVM_L1_ENTRY,
                            .cr0_fixed0 = 0x80000021ull,
                            .cr0_fixed1 = 0xffffffffull,
                            .cr4_fixed0 = 0x2000ull,
                            .cr4_fixed1 = 0x003727ffull,
                            .maxphyaddr = 39,
                        },
                    .pmu_version = 2,
                },
            .cpuid7_ebx = 0x009c6fbbu,
            .vaddr_bits = 48,
        },
    /*
     * Nested KVM as ptvisor really read it [M]: tests/system/nested-kvm.sh (Debian 12's Linux
     * 6.1 kvm_intel, nested=Y enable_apicv=N, QEMU 7.2 -cpu host, on Bochs 3.0
     * corei7_skylake_x), the VMM's "[cpu0 vmx] hypervisor below: KVMKVMKVM" and "controls
     * allowed" lines.  Against PROFILE_KVM_6_X (derived from KVM's source on a Skylake L0):
     * the same but for secondary bits 8 and 9 (APIC-register virtualization, virtual-interrupt
     * delivery: Bochs' L0 has them, a Skylake client not).  On a Bochs 2.7 L0 KVM offered
     * less: primary without MTF (27: KVM offers L1 the monitor trap flag only where L0 has
     * it) and secondary without XSAVES (20).  CR fixed MSRs, MAXPHYADDR and CPUID.7 as the
     * Bochs L0 [A].
     */
    [PROFILE_KVM_BOCHS] =
        {
            .name = "nested KVM 6.1 (QEMU -cpu host, Bochs 3.0 L0), measured",
            .vmx =
                {
                    .caps =
                        {
                            .basic = KVM_L1_BASIC,
                            .misc = 0x20000165ull,
                            .ept_vpid = KVM_L1_EPT_VPID,
                            .pin = KVM_L1_PIN,
                            .proc = KVM_L1_PROC,
                            .proc2 = 0x02137bff00000000ull,
                            .exit = KVM_L1_EXIT,
                            .entry = KVM_L1_ENTRY,
                            .cr0_fixed0 = 0x80000021ull,
                            .cr0_fixed1 = 0xffffffffull,
                            .cr4_fixed0 = 0x2000ull,
                            .cr4_fixed1 = 0x003727ffull,
                            .maxphyaddr = 40,
                        },
                    .pmu_version = 2,
                },
            .cpuid7_ebx = 0x001c0fbbu,
            .vaddr_bits = 48,
        },
    /*
     * Bochs 2.7 (Debian), cpu: model=corei7_skylake_x.  [M] ../shared/docs/TEST-VEHICLES.md:
     * BASIC, MISC, PROCBASED_CTLS2, EPT_VPID_CAP, TRUE_EXIT, TRUE_ENTRY; MAXPHYADDR 40; no PT
     * (CPUID.7:EBX[25]=0, VMX_MISC[14]=0, as every Bochs serial log's "[cpu0 pt]" line shows).
     * [M] build/test/bochs-conformance: the VMCS the VMM wrote there (PIN 0x16, SECONDARY
     * 0x1010aa, EXIT 0x3f7fff, ENTRY 0xf3ff with IA-32e mode) says the PMU is v2+ (load
     * PERF_GLOBAL_CTRL on).  TRUE_PIN/TRUE_PROC allowed-0 [S] Bochs cpu/vmx.h (0x16, 0x04006172);
     * their allowed-1 halves [A].  CR fixed MSRs [A] (not read by the decision).
     */
    [PROFILE_BOCHS_SKX] =
        {
            .name = "Bochs 2.7 corei7_skylake_x",
            .vmx =
                {
                    .caps =
                        {
                            .basic = 0x00d810000000002bull,
                            .misc = 0x600401e0ull,
                            .ept_vpid = 0x00000f0106334141ull,
                            .pin = 0x0000007f00000016ull,
                            .proc = 0xfff9fffe04006172ull,
                            .proc2 = 0x02177fff00000000ull,
                            .exit = 0x007fffff00036dfbull,
                            .entry = 0x0000ffff000011fbull,
                            .cr0_fixed0 = 0x80000021ull,
                            .cr0_fixed1 = 0xffffffffull,
                            .cr4_fixed0 = 0x2000ull,
                            .cr4_fixed1 = 0x007727ffull,
                            .maxphyaddr = 40,
                        },
                    .pmu_version = 2,
                },
            .cpuid7_ebx = 0x001c0fbbu, /* [A] bits other than 25 do not matter here */
            .vaddr_bits = 48,
        },
    /*
     * Bare-metal Skylake client (Core i7-6700 class) [S][A]: BASIC revision 4, region 0x400,
     * dual-monitor, WB, INS/OUTS, TRUE ctls; EPT_VPID_CAP 0xf0106334141 (execute-only, 4-level,
     * UC+WB, 2M/1G, INVEPT single/all, A/D, INVVPID all extents) as dumps of Haswell..Skylake
     * show.  Secondary allowed-1 from the feature list (no APIC-register virt / virtual intr
     * delivery on client parts, conceal VMX from PT yes, PT_USE_GPA no - PT virtualization
     * arrived with Ice Lake -, TSC scaling yes) [A].  Exit/entry: everything up to conceal PIP
     * (exit 24, entry 17), no clear/load RTIT_CTL (exit 25, entry 18) [A].  MISC: rate 5, LMA,
     * HLT/shutdown/wait-for-SIPI, PT in VMX (14), RDMSR SMBASE (15), 4 CR3 targets, SMM VMXOFF
     * (28), VMWRITE any (29) [A].  PMU v4, MAXPHYADDR 39 [S].
     */
    [PROFILE_SKYLAKE] =
        {
            .name = "bare-metal Skylake client",
            .vmx =
                {
                    .caps =
                        {
                            .basic = 0x00da040000000004ull,
                            .misc = 0x3004c1e5ull,
                            .ept_vpid = 0x00000f0106334141ull,
                            .pin = 0x0000007f00000016ull,
                            .proc = 0xfff9fffe04006172ull,
                            .proc2 = 0x021ffcff00000000ull,
                            .exit = 0x01ffffff00036dfbull,
                            .entry = 0x0003ffff000011fbull,
                            .cr0_fixed0 = 0x80000021ull,
                            .cr0_fixed1 = 0xffffffffull,
                            .cr4_fixed0 = 0x2000ull,
                            .cr4_fixed1 = 0x003727ffull,
                            .maxphyaddr = 39,
                        },
                    .pmu_version = 4,
                },
            .cpuid7_ebx = 0x029c6fbfu, /* PT (25) set [S] */
            .leaf14 = SKL_LEAF14,
            .vaddr_bits = 48,
        },
};

#endif
