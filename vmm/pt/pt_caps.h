/* SPDX-License-Identifier: MIT */
/*
 * Intel PT capabilities and the engine mode.
 *
 * The VMM fills a struct pt_caps with raw register values (CPUID, VMX capability MSRs) and
 * calls pt_decide() once at boot.  The decision says which mode the engine runs in, why, which
 * PT-related VMX controls to set, and which CPUID leaf 0x14 the guest is shown.  Nothing here
 * touches hardware; the same file runs in host unit tests.
 *
 * Sources: docs/pt-facts.md A.2-A.4 (VMX controls, VMX_MISC[14], KVM predicates) and C (CPUID).
 */
#ifndef PTV_PT_CAPS_H
#define PTV_PT_CAPS_H

#include <stdbool.h>
#include <stdint.h>

#include "ptv/config.h"
#include "pt/rtit.h"

#define PT_REASON_MAX 192

/* Raw inputs, exactly as read from the CPU. */
struct pt_caps {
    uint32_t cpuid7_ebx;         /* CPUID.(EAX=7,ECX=0):EBX */
    uint32_t leaf14[2][4];       /* CPUID.(EAX=0x14,ECX=0/1): EAX, EBX, ECX, EDX */
    uint64_t vmx_misc;           /* IA32_VMX_MISC (0x485) */
    uint32_t secondary_allowed1; /* IA32_VMX_PROCBASED_CTLS2 bits 63:32 */
    uint32_t exit_allowed1;      /* IA32_VMX_(TRUE_)EXIT_CTLS bits 63:32 */
    uint32_t entry_allowed1;     /* IA32_VMX_(TRUE_)ENTRY_CTLS bits 63:32 */
    uint8_t maxphyaddr;          /* CPUID.80000008H:EAX[7:0] */
    uint8_t vaddr_bits;          /* CPUID.80000008H:EAX[15:8]; 0 is taken as 48 */
};

/* CPUID register indices inside leaf14[subleaf][]. */
enum { PT_EAX = 0, PT_EBX = 1, PT_ECX = 2, PT_EDX = 3 };

enum pt_engine_mode {
    PT_ENGINE_OFF = 0,           /* nobody traces; the guest sees no PT */
    PT_ENGINE_SYSTEM,            /* the VMM traces the guest; the guest sees no PT */
    PT_ENGINE_HOST_GUEST_HW,     /* guest owns PT; PT_USE_GPA + load/clear IA32_RTIT_CTL */
    PT_ENGINE_HOST_GUEST_SHADOW, /* guest owns PT; the VMM shadows the guest ToPA */
};

/*
 * What the guest is shown (CPUID 0x14) and what its RTIT MSR writes are checked against.
 * present == false: the guest has no PT at all (every RTIT MSR access #GPs).
 */
struct pt_gcaps {
    bool present;
    uint8_t maxphyaddr;    /* OUTPUT_BASE must fit below it */
    uint8_t vaddr_bits;    /* ADDRn_A/B must be canonical for this width */
    uint32_t leaf14[2][4]; /* the guest-visible CPUID 0x14 subleaves 0 and 1 */
};

struct pt_decision {
    enum pt_engine_mode mode;
    uint32_t requested;         /* enum ptv_pt_mode (include/ptv/config.h) */
    bool refused;               /* an explicit request could not be met; mode fell back to OFF */
    char reason[PT_REASON_MAX]; /* one printable line: why this mode, or why not the request */
    bool load_clear; /* VM_ENTRY_LOAD_IA32_RTIT_CTL + VM_EXIT_CLEAR_IA32_RTIT_CTL in use */
    /* PT-related control bits the VMCS must set (the VMM ORs them into its controls). */
    uint32_t secondary_ctls;
    uint32_t exit_ctls;
    uint32_t entry_ctls;
    struct pt_gcaps guest; /* zero (present == false) unless the guest owns PT */
};

/* Field extraction from a leaf-0x14 copy (host or guest view). */
static inline bool pt_cap(const uint32_t l14[2][4], int reg, uint64_t bit)
{
    return (l14[0][reg] & bit) != 0;
}
static inline unsigned pt_cap_num_ranges(const uint32_t l14[2][4])
{
    return l14[1][PT_EAX] & 0x7;
}
static inline uint32_t pt_cap_mtc_periods(const uint32_t l14[2][4])
{
    return l14[1][PT_EAX] >> 16;
}
static inline uint32_t pt_cap_cyc_thresholds(const uint32_t l14[2][4])
{
    return l14[1][PT_EBX] & 0xffff;
}
static inline uint32_t pt_cap_psb_periods(const uint32_t l14[2][4])
{
    return l14[1][PT_EBX] >> 16;
}

static inline bool pt_mode_guest_owns(enum pt_engine_mode m)
{
    return m == PT_ENGINE_HOST_GUEST_HW || m == PT_ENGINE_HOST_GUEST_SHADOW;
}

/*
 * Choose the engine mode for `requested` (an enum ptv_pt_mode from include/ptv/config.h).
 * Always fills *out completely, including a reason.  Returns out->mode.
 */
enum pt_engine_mode pt_decide(const struct pt_caps *caps, uint32_t requested,
                              struct pt_decision *out);

/* Printable mode name ("off", "system", "host-guest/hw", "host-guest/shadow"). */
const char *pt_mode_name(enum pt_engine_mode m);

/*
 * Filter one CPUID leaf for the guest: hides CPUID.7.0:EBX[25] and zeroes leaf 0x14 unless the
 * guest owns PT; when it does, replaces leaf 0x14 subleaves 0/1 by the engine's view and zeroes
 * higher subleaves.  regs = {EAX, EBX, ECX, EDX} as the host returned them; other leaves untouched.
 */
void pt_cpuid_filter(const struct pt_decision *d, uint32_t leaf, uint32_t subleaf,
                     uint32_t regs[4]);

#endif
