/* SPDX-License-Identifier: MIT */
/* The VMX set-up decision on raw capability values (pure; host-tested, see vmx_caps_policy.h). */
#include "vmx/vmx_caps_policy.h"
#include "emul/guest_policy.h"
#include "pt/rtit.h"
#include "lib/fmt.h"
#include "base/palloc.h"
#include <ptv/handoff.h>

/* The controls the VMM cannot run without, and those it uses when the CPU has them. */
#define PROC_REQUIRED  (CPU_BASED_USE_MSR_BITMAPS | CPU_BASED_ACTIVATE_SECONDARY_CONTROLS)
#define PROC2_REQUIRED (SECONDARY_EXEC_ENABLE_EPT | SECONDARY_EXEC_UNRESTRICTED_GUEST)
#define PROC2_OPTIONAL                                                                             \
    (SECONDARY_EXEC_ENABLE_RDTSCP | SECONDARY_EXEC_ENABLE_INVPCID | SECONDARY_EXEC_XSAVES |        \
     SECONDARY_EXEC_ENABLE_VPID | SECONDARY_EXEC_ENABLE_USR_WAIT_PAUSE)
#define EXIT_REQUIRED                                                                              \
    (VM_EXIT_HOST_ADDR_SPACE_SIZE | VM_EXIT_SAVE_IA32_EFER | VM_EXIT_LOAD_IA32_EFER |              \
     VM_EXIT_SAVE_IA32_PAT | VM_EXIT_LOAD_IA32_PAT)
#define EXIT_OPTIONAL  (VM_EXIT_SAVE_DEBUG_CONTROLS | VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL)
#define ENTRY_REQUIRED (VM_ENTRY_LOAD_IA32_EFER | VM_ENTRY_LOAD_IA32_PAT)
#define ENTRY_OPTIONAL (VM_ENTRY_LOAD_DEBUG_CONTROLS | VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL)

/* One control word: its capability MSR and what the VMM wants from it. */
struct ctl_word {
    uint64_t cap;
    uint32_t required, optional;
    uint32_t *out;
    const char *what; /* as the refusal names it */
};

static int refuse(struct vmx_ctl_decision *d, const char *why)
{
    ptv_snprintf(d->reason, sizeof(d->reason), "%s", why);
    return PTV_ENTRY_MISSING_CONTROL;
}

static int adjust(const struct ctl_word *w, struct vmx_ctl_decision *d)
{
    uint32_t must1 = (uint32_t)w->cap, may1 = (uint32_t)(w->cap >> 32), missing;
    if (must1 & ~may1) { /* no real CPU reports this: a broken or hostile MSR */
        ptv_snprintf(d->reason, sizeof(d->reason),
                     "inconsistent %s capability MSR: bit(s) %#x must be 1 (allowed-0) but may "
                     "not be 1 (allowed-1)",
                     w->what, must1 & ~may1);
        return PTV_ENTRY_MISSING_CONTROL;
    }
    if (vmx_adjust_controls(w->cap, w->required, w->optional, w->out, &missing)) {
        ptv_snprintf(d->reason, sizeof(d->reason), "required %s control(s) %#x not supported",
                     w->what, missing);
        return PTV_ENTRY_MISSING_CONTROL;
    }
    return 0;
}

/* After the VMM turned optional controls back off: each word still inside its MSR's settings. */
static int still_allowed(const struct ctl_word *w, struct vmx_ctl_decision *d)
{
    uint32_t must1 = (uint32_t)w->cap, may1 = (uint32_t)(w->cap >> 32);
    uint32_t bad = (must1 & ~*w->out) | (*w->out & ~may1);
    if (!bad)
        return 0;
    ptv_snprintf(d->reason, sizeof(d->reason),
                 "%s capability MSR forces control(s) %#x that the VMM must keep clear", w->what,
                 bad);
    return PTV_ENTRY_MISSING_CONTROL;
}

const char *vmx_basic_unusable(uint64_t basic)
{
    if (VMX_BASIC_REGION_SIZE(basic) > PAGE_SIZE || (basic & VMX_BASIC_32BIT_PHYS) ||
        VMX_BASIC_MEM_TYPE(basic) != VMX_MEMTYPE_WB)
        return "IA32_VMX_BASIC: unsupported region size, 32-bit addresses or non-WB VMCS type";
    return NULL;
}

int vmx_decide_controls(const struct vmx_cpu_profile *p, struct vmx_ctl_decision *d)
{
    const struct vmx_caps *c = &p->caps;
    struct vmx_controls *k = &d->ctls;
    *d = (struct vmx_ctl_decision){0};

    const char *basic = vmx_basic_unusable(c->basic);
    if (basic)
        return refuse(d, basic);
    /* SDM Vol. 1 / CPUID.80000008H: MAXPHYADDR is at most 52; EPT and PT masks are built on it */
    if (c->maxphyaddr < 32 || c->maxphyaddr > 52) {
        ptv_snprintf(d->reason, sizeof(d->reason), "MAXPHYADDR %u outside 32..52", c->maxphyaddr);
        return PTV_ENTRY_MISSING_CONTROL;
    }
    const struct ctl_word words[] = {
        {c->pin, 0, 0, &k->pin, "pin-based"},
        {c->proc, PROC_REQUIRED, 0, &k->proc, "primary processor-based"},
        {c->proc2, PROC2_REQUIRED, PROC2_OPTIONAL, &k->proc2,
         "secondary processor-based (EPT, unrestricted guest)"},
        {c->exit, EXIT_REQUIRED, EXIT_OPTIONAL, &k->exit, "VM-exit"},
        {c->entry, ENTRY_REQUIRED, ENTRY_OPTIONAL, &k->entry, "VM-entry"},
    };
    for (unsigned i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (adjust(&words[i], d))
            return PTV_ENTRY_MISSING_CONTROL;

    /* Performance counters must not run in VMX root: a guest-programmed PEBS/DS area would be
     * written through the VMM's page tables, past EPT.  Load 0 into IA32_PERF_GLOBAL_CTRL at
     * every exit (and the guest's value at entry) when the CPU has the MSR (architectural PMU
     * v2+, SDM Vol. 3B 20.2.2) and both controls. */
    bool pmu2 = p->pmu_version >= 2;
    if (!pmu2 || !(k->exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) ||
        !(k->entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL)) {
        k->exit &= ~VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL;
        k->entry &= ~VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL;
        d->perf_global_unswitched = pmu2;
    }
    /* the PT controls are only turned on by the PT engine when it owns them */
    k->proc2 &= ~(SECONDARY_EXEC_PT_USE_GPA | SECONDARY_EXEC_PT_CONCEAL_VMX);
    uint64_t ev = c->ept_vpid;
    if (!(ev & VMX_EPT_PAGE_WALK_4_BIT) || !(ev & VMX_EPTP_WB_BIT))
        return refuse(d, "EPT lacks 4-level walks or write-back paging structures");
    if (!(ev & VMX_EPT_INVEPT_BIT) ||
        !(ev & (VMX_EPT_EXTENT_GLOBAL_BIT | VMX_EPT_EXTENT_SINGLE_CONTEXT_BIT)))
        return refuse(d, "INVEPT not supported");
    if ((k->proc2 & SECONDARY_EXEC_ENABLE_VPID) && !(ev & VMX_VPID_INVVPID_BIT))
        k->proc2 &= ~SECONDARY_EXEC_ENABLE_VPID;
    for (unsigned i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (still_allowed(&words[i], d))
            return PTV_ENTRY_MISSING_CONTROL;
    k->guest_features = (k->proc2 & SECONDARY_EXEC_ENABLE_RDTSCP ? GUEST_FEAT_RDTSCP : 0) |
                        (k->proc2 & SECONDARY_EXEC_ENABLE_INVPCID ? GUEST_FEAT_INVPCID : 0) |
                        (k->proc2 & SECONDARY_EXEC_XSAVES ? GUEST_FEAT_XSAVES : 0) |
                        (k->proc2 & SECONDARY_EXEC_ENABLE_USR_WAIT_PAUSE ? GUEST_FEAT_WAITPKG : 0);
    return 0;
}

bool vmx_can_virtualize_aps(const struct vmx_cpu_profile *p, const char **why)
{
    if (!(p->caps.misc & VMX_MISC_ACTIVITY_WAIT_SIPI)) {
        *why = "IA32_VMX_MISC[8]=0: no wait-for-SIPI activity state, a guest's SIPI would never "
               "reach the VMM";
        return false;
    }
    /* the EPT shootdown IPI is an NMI: it must exit, and the guest's own NMI blocking
     * must be tracked by the CPU (virtual NMIs) once NMIs exit (SDM Vol. 3C 25.3) */
    uint32_t nmi = PIN_BASED_NMI_EXITING | PIN_BASED_VIRTUAL_NMIS;
    if (((p->caps.pin >> 32) & nmi) != nmi) {
        *why = "no NMI exiting / virtual NMIs: the VMM's EPT shootdown NMIs would reach the guest";
        return false;
    }
    return true;
}

int vmx_caps_same(const struct vmx_caps *bsp, const struct vmx_caps *ap, const char **why)
{
    /* every field the decision or vmx_on() reads */
    const struct {
        uint64_t b, a;
        const char *why;
    } f[] = {
        {bsp->basic, ap->basic, "IA32_VMX_BASIC differs from the BSP's"},
        {bsp->pin, ap->pin, "IA32_VMX_(TRUE_)PINBASED_CTLS differs from the BSP's"},
        {bsp->proc, ap->proc, "IA32_VMX_(TRUE_)PROCBASED_CTLS differs from the BSP's"},
        {bsp->proc2, ap->proc2, "IA32_VMX_PROCBASED_CTLS2 differs from the BSP's"},
        {bsp->exit, ap->exit, "IA32_VMX_(TRUE_)EXIT_CTLS differs from the BSP's"},
        {bsp->entry, ap->entry, "IA32_VMX_(TRUE_)ENTRY_CTLS differs from the BSP's"},
        {bsp->misc, ap->misc, "IA32_VMX_MISC differs from the BSP's"},
        {bsp->ept_vpid, ap->ept_vpid, "IA32_VMX_EPT_VPID_CAP differs from the BSP's"},
        {bsp->cr0_fixed0, ap->cr0_fixed0, "IA32_VMX_CR0_FIXED0 differs from the BSP's"},
        {bsp->cr0_fixed1, ap->cr0_fixed1, "IA32_VMX_CR0_FIXED1 differs from the BSP's"},
        {bsp->cr4_fixed0, ap->cr4_fixed0, "IA32_VMX_CR4_FIXED0 differs from the BSP's"},
        {bsp->cr4_fixed1, ap->cr4_fixed1, "IA32_VMX_CR4_FIXED1 differs from the BSP's"},
        {bsp->maxphyaddr, ap->maxphyaddr, "MAXPHYADDR (CPUID.80000008H) differs from the BSP's"},
    };
    for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].b != f[i].a) {
            *why = f[i].why;
            return 0;
        }
    }
    return 1;
}
