/* SPDX-License-Identifier: MIT */
/* Guest-visible policy for CPUID, XSETBV and IA32_XSS (pure; see guest_policy.h). */
#include "emul/guest_policy.h"

#define CPUID_1_ECX_VMX           (1u << 5)
#define CPUID_1_ECX_OSXSAVE       (1u << 27)
#define CPUID_1_ECX_TSC_DEADLINE  (1u << 24)
#define CPUID_1_ECX_HYPERVISOR    (1u << 31)
#define CPUID_7_ECX_OSPKE         (1u << 4)
#define CPUID_7_EBX_INVPCID       (1u << 10)
#define CPUID_7_ECX_WAITPKG       (1u << 5)
#define CPUID_7_ECX_RDPID         (1u << 22)
#define CPUID_D_1_EAX_XSAVES      (1u << 3)
#define CPUID_80000001_EDX_RDTSCP (1u << 27)
#define CR4_OSXSAVE               (1ull << 18)
#define CR4_PKE                   (1ull << 22)
#define XFEATURE_FP               (1ull << 0)
#define XFEATURE_SSE              (1ull << 1)
#define XFEATURE_YMM              (1ull << 2)

void cpuid_policy(const struct pt_decision *d, uint32_t features, uint32_t leaf, uint32_t sub,
                  uint64_t guest_cr4, uint32_t r[4])
{
    if (cpuid_is_hypervisor_leaf(leaf)) {
        r[0] = r[1] = r[2] = r[3] = 0;
        if (leaf == PTV_CPUID_BASE) {
            r[0] = PTV_CPUID_MAX;
            r[1] = 0x69767470; /* "ptvi" */
            r[2] = 0x00726f73; /* "sor\0" */
        } else if (leaf == PTV_CPUID_MAX) {
            r[0] = 1; /* VMCALL ABI version (include/ptv/vmcall.h) */
        }
        return;
    }
    /* CPUID ran with the VMM's CR4: the OS-enable bits must mirror the guest's */
    if (leaf == 1) {
        r[2] |= CPUID_1_ECX_HYPERVISOR;
        r[2] &= ~(CPUID_1_ECX_VMX | CPUID_1_ECX_OSXSAVE); /* no nested VMX */
        if (guest_cr4 & CR4_OSXSAVE)
            r[2] |= CPUID_1_ECX_OSXSAVE;
        if (features & GUEST_FEAT_NO_TSC_DEADLINE)
            r[2] &= ~CPUID_1_ECX_TSC_DEADLINE;
    } else if (leaf == 7 && sub == 0) {
        r[2] &= ~CPUID_7_ECX_OSPKE;
        if (guest_cr4 & CR4_PKE)
            r[2] |= CPUID_7_ECX_OSPKE;
        if (!(features & GUEST_FEAT_INVPCID))
            r[1] &= ~CPUID_7_EBX_INVPCID;
        if (!(features & GUEST_FEAT_RDTSCP))
            r[2] &= ~CPUID_7_ECX_RDPID;
        if (!(features & GUEST_FEAT_WAITPKG))
            r[2] &= ~CPUID_7_ECX_WAITPKG;
    } else if (leaf == 0xd && sub == 1) {
        if (!(features & GUEST_FEAT_XSAVES))
            r[0] &= ~CPUID_D_1_EAX_XSAVES;
        r[2] &= ~(uint32_t)GUEST_XSS_HIDDEN; /* IA32_XSS[8] (PT state) is never the guest's */
        r[3] &= ~(uint32_t)(GUEST_XSS_HIDDEN >> 32);
    } else if (leaf == 0xd && sub < 64 && ((1ull << sub) & GUEST_XSS_HIDDEN)) {
        r[0] = r[1] = r[2] = r[3] = 0; /* the hidden component's size/offset leaf */
    } else if (leaf == 0x80000001) {
        if (!(features & GUEST_FEAT_RDTSCP))
            r[3] &= ~CPUID_80000001_EDX_RDTSCP;
    }
    pt_cpuid_filter(d, leaf, sub, r); /* CPUID.7:EBX[25], leaf 0x14 */
}

/* Linux 6.1's deadline_match[]: model, steppings (0-15 = all), first good microcode revision */
static const struct {
    uint8_t model, step_lo, step_hi;
    uint32_t rev;
} tsc_deadline_fixes[] = {
    {0x3f, 2, 2, 0x3a},        /* Haswell-X (EP) */
    {0x3f, 4, 4, 0x0f},        /* Haswell-X (EX) */
    {0x4f, 0, 15, 0x0b000020}, /* Broadwell-X */
    {0x56, 2, 2, 0x00000011},  /* Broadwell-D */
    {0x56, 3, 3, 0x0700000e},  /* Broadwell-D */
    {0x56, 4, 4, 0x0f00000c},  /* Broadwell-D */
    {0x56, 5, 5, 0x0e000003},  /* Broadwell-D */
    {0x55, 3, 3, 0x01000136},  /* Skylake-X */
    {0x55, 4, 4, 0x02000014},  /* Skylake-X (Bochs' corei7_skylake_x) */
    {0x55, 5, 15, 0},          /* Cascade / Cooper Lake: never */
    {0x3c, 0, 15, 0x22},       /* Haswell */
    {0x45, 0, 15, 0x20},       /* Haswell-L */
    {0x46, 0, 15, 0x17},       /* Haswell-G */
    {0x3d, 0, 15, 0x25},       /* Broadwell */
    {0x47, 0, 15, 0x17},       /* Broadwell-G */
    {0x4e, 0, 15, 0xb2},       /* Skylake-L */
    {0x5e, 0, 15, 0xb2},       /* Skylake */
    {0x8e, 0, 15, 0x52},       /* Kaby Lake-L */
    {0x9e, 0, 15, 0x52},       /* Kaby Lake */
};

bool tsc_deadline_erratum(const struct tsc_deadline_cpu *c, uint32_t *fixed_in)
{
    uint32_t family = (c->sig >> 8) & 0xf, model = (c->sig >> 4) & 0xf, step = c->sig & 0xf;

    *fixed_in = 0;
    if (!c->intel || c->hypervisor || !c->has_timer || family != 6)
        return false;
    model |= (c->sig >> 12) & 0xf0; /* extended model (families 6 and 15) */
    for (unsigned i = 0; i < sizeof(tsc_deadline_fixes) / sizeof(tsc_deadline_fixes[0]); i++) {
        if (tsc_deadline_fixes[i].model != model || step < tsc_deadline_fixes[i].step_lo ||
            step > tsc_deadline_fixes[i].step_hi)
            continue;
        /* the first entry that matches decides, as x86_match_cpu() does */
        if (c->ucode >= tsc_deadline_fixes[i].rev)
            return false;
        *fixed_in = tsc_deadline_fixes[i].rev;
        return true;
    }
    return false;
}

enum xsetbv_verdict xsetbv_policy(uint32_t index, uint64_t val, uint64_t supported,
                                  uint64_t guest_cr4)
{
    if (!(guest_cr4 & CR4_OSXSAVE))
        return XSETBV_UD;
    if (index != 0 || !(val & XFEATURE_FP) || ((val & XFEATURE_YMM) && !(val & XFEATURE_SSE)) ||
        (val & ~supported))
        return XSETBV_GP;
    return XSETBV_OK;
}

bool xss_policy(uint64_t value, uint64_t host_supported)
{
    return !(value & ~(host_supported & ~GUEST_XSS_HIDDEN));
}
