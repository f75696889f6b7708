/* SPDX-License-Identifier: MIT */
/*
 * Can this CPU run the VMM?  The decision and its one-line message, from
 * values the caller read (CPUID, MSRs): pure, host-tested (test_vmx_verdict).
 */
#ifndef PTV_BOOT_VMX_VERDICT_H
#define PTV_BOOT_VMX_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define X86_FEATURE_VMX_ECX              (1u << 5) /* CPUID.1:ECX[5] */
#define MSR_IA32_FEATURE_CONTROL         0x0000003a
#define FEAT_CTL_LOCKED                  (1ull << 0)
#define FEAT_CTL_VMX_ENABLED_INSIDE_SMX  (1ull << 1)
#define FEAT_CTL_VMX_ENABLED_OUTSIDE_SMX (1ull << 2)
/* SDM Vol. 3D A.3.2 / A.3.3: allowed-1 settings are bits 63:32 of these MSRs */
#define MSR_IA32_VMX_PROCBASED_CTLS           0x00000482
#define MSR_IA32_VMX_PROCBASED_CTLS2          0x0000048b
#define CPU_BASED_ACTIVATE_SECONDARY_CONTROLS 0x80000000u
#define SECONDARY_EXEC_ENABLE_EPT             0x00000002u
#define SECONDARY_EXEC_UNRESTRICTED_GUEST     0x00000080u

struct ptv_vmx_caps {
    uint32_t cpuid1_ecx;
    uint64_t feature_control;     /* read only when CPUID says VMX */
    uint32_t procbased_allowed1;  /* IA32_VMX_PROCBASED_CTLS[63:32] */
    uint32_t procbased2_allowed1; /* IA32_VMX_PROCBASED_CTLS2[63:32], 0 without secondary */
};

/* true if the VMM can start; msg gets the one line to print ("ptvisor: " not included) */
bool ptv_vmx_verdict(const struct ptv_vmx_caps *c, uint32_t on_no_vmx, char *msg, size_t cap);

#endif
