/* SPDX-License-Identifier: MIT */
/*
 * What must happen to the RTIT MSRs around each VM entry and VM exit: a pure function of the
 * engine mode, the vCPU's virtual RTIT MSRs and the host's RTIT_CTL, returning a small ordered
 * plan that vmm/vmx executes step by step (WRMSR, save/load an MSR set, VMWRITE) plus the
 * entries for the VM-entry/VM-exit MSR-load lists.
 *
 * The rule behind CVE-2024-53135 (pt-facts A.5, A.6): VM entry fails if it loads IA32_RTIT_CTL
 * while the host's TraceEn is 1.  Every plan whose entry loads RTIT_CTL (through the VMCS
 * control or an MSR-load list) starts with "WRMSR IA32_RTIT_CTL = 0" whenever the host's TraceEn
 * may be 1; pt_plan_check() verifies that on any plan, and the entry planner calls it.
 *
 * Who owns what:
 *   off, system      nothing of the guest is switched; the plan is empty (in system mode the
 *                    VMM's own trace runs through entries and exits untouched).
 *   host-guest       the guest's RTIT_CTL is loaded at every entry (VMCS field with the
 *                    load/clear controls, else the MSR-load lists while guest TraceEn=1); the
 *                    other RTIT MSRs are loaded/saved only while guest TraceEn=1.
 */
#ifndef PTV_PT_SWITCH_H
#define PTV_PT_SWITCH_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_caps.h"
#include "pt/pt_msr.h"

/* One VM-entry / VM-exit MSR-load (or -store) list entry, 16 bytes (SDM 3C 25.7.2, 25.8.2). */
struct vmx_msr_entry {
    uint32_t index;
    uint32_t reserved; /* must be 0 */
    uint64_t value;
};
_Static_assert(sizeof(struct vmx_msr_entry) == 16, "VMX MSR-load entry is 16 bytes");

enum pt_op {
    PT_OP_WRMSR,            /* WRMSR step.msr = step.value */
    PT_OP_SAVE_MSRS,        /* RDMSR each of plan.msrs[] into the area step.area */
    PT_OP_LOAD_MSRS,        /* WRMSR each of plan.msrs[] from the area step.area */
    PT_OP_VMWRITE_RTIT_CTL, /* VMWRITE GUEST_IA32_RTIT_CTL = step.value */
};

enum pt_area {
    PT_AREA_HOST,  /* the VMM's save area for the host's RTIT MSRs */
    PT_AREA_GUEST, /* the vCPU's struct pt_msr_file (pt_msr_file_get/set) */
};

struct pt_step {
    enum pt_op op;
    enum pt_area area;
    uint32_t msr;
    uint64_t value;
};

#define PT_SWITCH_MAX_MSRS                                                                         \
    12 /* STATUS, OUTPUT_BASE, OUTPUT_MASK_PTRS, CR3_MATCH, 4 x ADDRn_A/B                          \
        */
#define PT_PLAN_MAX_STEPS   4
#define PT_HOST_CTL_UNKNOWN (~0ull) /* the VMM cannot vouch for the host's RTIT_CTL */

struct pt_plan {
    unsigned nsteps;
    struct pt_step steps[PT_PLAN_MAX_STEPS];
    unsigned nmsrs;
    uint32_t msrs[PT_SWITCH_MAX_MSRS]; /* the set SAVE/LOAD move, in this order */
    /* MSR-load lists: used only without the load/clear controls; empty otherwise. */
    unsigned n_entry_load, n_exit_load;
    struct vmx_msr_entry entry_load[1], exit_load[1];
    /*
     * Shadow mode: for OUTPUT_BASE and OUTPUT_MASK_PTRS, LOAD takes the shadow ToPA's values
     * (vmm/pt/pt_topa*) and SAVE hands the hardware's values to it for translation back,
     * instead of the guest's file.
     */
    bool output_via_shadow;
};

/* Per-vCPU memory between an entry plan and the next exit plan. */
struct pt_switch {
    uint64_t host_ctl;   /* host RTIT_CTL before entry; restored after exit */
    bool guest_loaded;   /* the guest's RTIT MSRs are in hardware (guest TraceEn was 1) */
    bool vmcs_ctl_valid; /* GUEST_IA32_RTIT_CTL holds vmcs_ctl */
    uint64_t vmcs_ctl;
    /* the SAVE/LOAD set of the guest view (pt_switch_msr_set), computed once */
    bool set_valid;
    unsigned nmsrs;
    uint32_t msrs[PT_SWITCH_MAX_MSRS];
};

void pt_switch_init(struct pt_switch *sw);

/*
 * Plan for the coming VM entry.  host_ctl: RDMSR IA32_RTIT_CTL, or PT_HOST_CTL_UNKNOWN.
 * Returns pt_plan_check() of the plan (false = a bug here: do not enter, panic).
 */
__attribute__((warn_unused_result)) bool pt_switch_entry(struct pt_switch *sw,
                                                         const struct pt_decision *d,
                                                         const struct pt_msr_file *f,
                                                         uint64_t host_ctl, struct pt_plan *p);

/* Plan for right after the VM exit that follows the last entry plan. */
void pt_switch_exit(struct pt_switch *sw, const struct pt_decision *d, struct pt_plan *p);

/* The RTIT MSRs other than RTIT_CTL that exist for the guest view g (SAVE/LOAD set). */
unsigned pt_switch_msr_set(const struct pt_gcaps *g, uint32_t msrs[PT_SWITCH_MAX_MSRS]);

/*
 * The safety invariant of an entry plan: if the entry loads RTIT_CTL (d's load control, or an
 * RTIT_CTL entry in the VM-entry MSR-load list) and the host's TraceEn may be 1, the first
 * step writes RTIT_CTL = 0; off/system plans do nothing at all.
 */
__attribute__((warn_unused_result)) bool pt_plan_check(const struct pt_decision *d,
                                                       uint64_t host_ctl, const struct pt_plan *p);

#endif
