/* SPDX-License-Identifier: MIT */
/*
 * Engine mode decision and the guest's view of CPUID leaf 0x14.  Pure logic on raw register
 * values (see pt_caps.h); every decision carries a printable reason.
 */
#include "pt/pt_caps.h"

#include "lib/ptv_string.h"

/*
 * CPUID 0x14 features the engine fully virtualizes, i.e. may show the guest (if the host has
 * them).  Not shown, because no RTIT_CTL/STATUS handling exists for them here:
 * PSB/PMI preservation (EBX[6]), event trace (EBX[7]), TNT disable (EBX[8]), and output to the
 * trace transport subsystem (ECX[3], FabricEn: the guest would write to a platform device).
 * ECX[31] (IP payloads are LIP) is not a feature but a description of the packets the hardware
 * writes, so it is mirrored from the host: hiding it would make the guest decode LIPs as RIPs.
 */
#define PT_GUEST_EBX                                                                               \
    (PT_CAP_EBX_CR3_FILTER | PT_CAP_EBX_PSB_CYC | PT_CAP_EBX_IP_FILTER | PT_CAP_EBX_MTC |          \
     PT_CAP_EBX_PTWRITE | PT_CAP_EBX_POWER_EVENT)
#define PT_GUEST_ECX_HW (PT_CAP_ECX_TOPA | PT_CAP_ECX_TOPA_MULTI | PT_CAP_ECX_SINGLE_RANGE)
/*
 * Shadow mode translates the guest's ToPA tables (vmm/pt/pt_topa*); a single-range output
 * region would bypass that translation, so shadow mode offers ToPA output only.
 */
#define PT_GUEST_ECX_SHADOW (PT_CAP_ECX_TOPA | PT_CAP_ECX_TOPA_MULTI)

static void reason_add(struct pt_decision *d, const char *s)
{
    size_t have = strnlen(d->reason, sizeof(d->reason));
    size_t add = strlen(s);

    if (have + add >= sizeof(d->reason))
        add = sizeof(d->reason) - 1 - have;
    memcpy(d->reason + have, s, add);
    d->reason[have + add] = '\0';
}

const char *pt_mode_name(enum pt_engine_mode m)
{
    switch (m) {
    case PT_ENGINE_OFF:
        return "off";
    case PT_ENGINE_SYSTEM:
        return "system";
    case PT_ENGINE_HOST_GUEST_HW:
        return "host-guest/hw";
    case PT_ENGINE_HOST_GUEST_SHADOW:
        return "host-guest/shadow";
    }
    return "?";
}

/* Why the CPU cannot run PT at all inside VMX operation, or NULL if it can. */
static const char *pt_unusable(const struct pt_caps *c)
{
    if (!(c->cpuid7_ebx & CPUID_7_EBX_INTEL_PT))
        return "CPUID.7:EBX[25]=0: no Intel PT";
    /* pt-facts A.3: without VMX_MISC[14], VMXON clears TraceEn and RTIT_CTL writes fault. */
    if (!(c->vmx_misc & VMX_MISC_INTEL_PT))
        return "IA32_VMX_MISC[14]=0: PT not usable in VMX operation";
    return NULL;
}

/* Why hardware host-guest mode is impossible (pt-facts A.4, KVM cpu_has_vmx_intel_pt), or NULL. */
static const char *pt_hw_missing(const struct pt_caps *c)
{
    if (!(c->secondary_allowed1 & SECONDARY_EXEC_PT_USE_GPA))
        return "secondary control PT_USE_GPA (bit 24) not allowed-1";
    if (!(c->entry_allowed1 & VM_ENTRY_LOAD_IA32_RTIT_CTL))
        return "entry control load IA32_RTIT_CTL (bit 18) not allowed-1";
    if (!(c->exit_allowed1 & VM_EXIT_CLEAR_IA32_RTIT_CTL))
        return "exit control clear IA32_RTIT_CTL (bit 25) not allowed-1";
    if (!pt_cap(c->leaf14, PT_ECX, PT_CAP_ECX_TOPA | PT_CAP_ECX_SINGLE_RANGE))
        return "CPUID.14.0:ECX[0,2]=0: no output scheme";
    return NULL;
}

/* Shadow host-guest mode and system mode both write through ToPA tables (ARCHITECTURE 3). */
static const char *pt_topa_missing(const struct pt_caps *c)
{
    if (!pt_cap(c->leaf14, PT_ECX, PT_CAP_ECX_TOPA))
        return "CPUID.14.0:ECX[0]=0: no ToPA output";
    return NULL;
}

static void guest_view(const struct pt_caps *c, enum pt_engine_mode m, struct pt_gcaps *g)
{
    const uint32_t(*h)[4] = c->leaf14;
    uint32_t ebx = h[0][PT_EBX] & PT_GUEST_EBX;
    uint32_t ecx_ok = m == PT_ENGINE_HOST_GUEST_HW ? PT_GUEST_ECX_HW : PT_GUEST_ECX_SHADOW;
    unsigned ranges = pt_cap_num_ranges(h);

    memset(g, 0, sizeof(*g));
    g->present = true;
    g->maxphyaddr = c->maxphyaddr ? c->maxphyaddr : 36; /* SDM: 36 without CPUID.80000008H */
    g->vaddr_bits = c->vaddr_bits ? c->vaddr_bits : 48;
    g->leaf14[0][PT_EAX] = h[0][PT_EAX] ? 1 : 0; /* max subleaf: the engine shows 0 and 1 */
    g->leaf14[0][PT_EBX] = ebx;
    g->leaf14[0][PT_ECX] = (h[0][PT_ECX] & ecx_ok) | (h[0][PT_ECX] & PT_CAP_ECX_LIP);
    if (!(g->leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA))
        g->leaf14[0][PT_ECX] &= ~PT_CAP_ECX_TOPA_MULTI;
    if (!h[0][PT_EAX]) /* no subleaf 1 on the host: no ranges, no frequency bitmaps */
        return;
    /* RTIT_CTL has ADDR0..3_CFG only (pt-facts B.2); ranges need IP filtering (C, EBX[2]). */
    if (ranges > PT_MAX_ADDR_RANGES)
        ranges = PT_MAX_ADDR_RANGES;
    if (!(ebx & PT_CAP_EBX_IP_FILTER))
        ranges = 0;
    g->leaf14[1][PT_EAX] = ranges;
    if (ebx & PT_CAP_EBX_MTC)
        g->leaf14[1][PT_EAX] |= h[1][PT_EAX] & 0xffff0000u;
    if (ebx & PT_CAP_EBX_PSB_CYC)
        g->leaf14[1][PT_EBX] = h[1][PT_EBX];
}

static void controls(const struct pt_caps *c, struct pt_decision *d)
{
    /*
     * The guest's trace should look like bare metal: conceal VMX non-root operation, VM exits and
     * VM entries when the CPU allows it (pt-facts A.2, E.1).  System mode leaves them clear so the
     * VMM's trace shows the transitions; KVM does the same (A.4).
     */
    d->secondary_ctls = c->secondary_allowed1 & SECONDARY_EXEC_PT_CONCEAL_VMX;
    d->exit_ctls = c->exit_allowed1 & VM_EXIT_PT_CONCEAL_PIP;
    d->entry_ctls = c->entry_allowed1 & VM_ENTRY_PT_CONCEAL_PIP;
    /* The load/clear pair is used together or not at all (pt-facts A.4, setup_vmcs_config). */
    d->load_clear = (c->entry_allowed1 & VM_ENTRY_LOAD_IA32_RTIT_CTL) &&
                    (c->exit_allowed1 & VM_EXIT_CLEAR_IA32_RTIT_CTL);
    if (d->mode == PT_ENGINE_HOST_GUEST_HW)
        d->secondary_ctls |= SECONDARY_EXEC_PT_USE_GPA;
    if (d->load_clear) {
        d->entry_ctls |= VM_ENTRY_LOAD_IA32_RTIT_CTL;
        d->exit_ctls |= VM_EXIT_CLEAR_IA32_RTIT_CTL;
    }
}

static enum pt_engine_mode finish(const struct pt_caps *c, struct pt_decision *d,
                                  enum pt_engine_mode m)
{
    d->mode = m;
    if (pt_mode_guest_owns(m)) {
        controls(c, d);
        guest_view(c, m, &d->guest);
    }
    return m;
}

static enum pt_engine_mode refuse(struct pt_decision *d, const char *what, const char *why)
{
    d->refused = true;
    reason_add(d, what);
    reason_add(d, " refused: ");
    reason_add(d, why);
    reason_add(d, "; PT off");
    return PT_ENGINE_OFF;
}

enum pt_engine_mode pt_decide(const struct pt_caps *c, uint32_t requested, struct pt_decision *d)
{
    const char *unusable = pt_unusable(c);
    const char *hw = unusable ? unusable : pt_hw_missing(c);
    const char *topa = unusable ? unusable : pt_topa_missing(c);

    memset(d, 0, sizeof(*d));
    d->requested = requested;
    switch (requested) {
    case PTV_PT_OFF:
        reason_add(d, "pt_mode=off requested");
        return finish(c, d, PT_ENGINE_OFF);
    case PTV_PT_SYSTEM:
        if (topa)
            return refuse(d, "pt_mode=system", topa);
        reason_add(d, "pt_mode=system: the VMM traces the guest; guest sees no PT");
        return finish(c, d, PT_ENGINE_SYSTEM);
    case PTV_PT_HOST_GUEST:
    case PTV_PT_AUTO:
        /* auto prefers giving the guest PT, hardware GPA mode first (ARCHITECTURE 3). */
        reason_add(d, requested == PTV_PT_AUTO ? "pt_mode=auto: " : "pt_mode=host-guest: ");
        if (!hw) {
            reason_add(d, "PT_USE_GPA + load/clear IA32_RTIT_CTL: guest owns PT (hardware)");
            return finish(c, d, PT_ENGINE_HOST_GUEST_HW);
        }
        if (!topa) {
            reason_add(d, hw);
            reason_add(d, ": guest owns PT through shadow ToPA");
            return finish(c, d, PT_ENGINE_HOST_GUEST_SHADOW);
        }
        if (requested == PTV_PT_HOST_GUEST) {
            d->reason[0] = '\0';
            return refuse(d, "pt_mode=host-guest", topa);
        }
        reason_add(d, topa);
        reason_add(d, "; PT off");
        return finish(c, d, PT_ENGINE_OFF);
    default:
        return refuse(d, "pt_mode", "unknown value");
    }
}

void pt_cpuid_filter(const struct pt_decision *d, uint32_t leaf, uint32_t subleaf, uint32_t regs[4])
{
    const struct pt_gcaps *g = &d->guest;

    if (leaf == 7 && subleaf == 0) {
        /* SDM 3C 33.5.2.1 (pt-facts C): a VMM not giving PT to guests hides the PT bit. */
        if (!g->present)
            regs[PT_EBX] &= ~(uint32_t)CPUID_7_EBX_INTEL_PT;
        return;
    }
    if (leaf != PT_CPUID_LEAF)
        return;
    if (g->present && subleaf <= 1) {
        memcpy(regs, g->leaf14[subleaf], sizeof(g->leaf14[subleaf]));
        return;
    }
    memset(regs, 0, 4 * sizeof(regs[0]));
}
