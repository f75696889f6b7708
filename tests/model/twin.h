/* SPDX-License-Identifier: MIT */
/*
 * The CPU twin (test code): the VMX side of Intel PT, written from the SDM, driving the PT
 * output model (ptm.h) as the CPU's trace unit and the bare-metal RTIT MSR rules (ptm_cpu.h)
 * as its RDMSR/WRMSR.  The real controller (vmm/pt/pt_ctrl.c) runs on it through
 * struct pt_cpu_ops exactly as it runs on a CPU through vmm/pt/shim/pt_vmx.c.
 *
 * Modelled (SDM Vol. 3C; pt-facts A, G):
 *  - VMX root: RDMSR/WRMSR of the RTIT MSRs with the CPU's own #GP rules (a refused WRMSR is
 *    reported to the caller, as the VMM's exception fix-up does).
 *  - VM entry (26.3.2.1, 26.4): "load IA32_RTIT_CTL" loads GUEST_IA32_RTIT_CTL; the VM-entry
 *    MSR-load list is processed in order.  A load the CPU would refuse (WRMSR #GP) fails the
 *    entry ("VM-entry failure due to MSR loading" / invalid guest state); so does loading
 *    RTIT_CTL while the host's TraceEn is 1 (pt-facts A.5, the CVE-2024-53135 condition).
 *  - VM exit (27.3.1, 27.6): "clear IA32_RTIT_CTL" writes 0 (the trace stops and is flushed);
 *    the VM-exit MSR-load list is processed; a refused load is a VMX abort.
 *  - "Intel PT uses guest physical addresses": output and ToPA reads go through the model EPT;
 *    a missing translation is a PT-caused EPT violation (exit qualification bit 16, 28.2.1).
 *  - PMIs from ToPA INT regions (the output model raises them; the guest owns LVTPC and
 *    IA32_PERF_GLOBAL_STATUS, which pass through).
 *  - XSAVES/XRSTORS of the PT state component (IA32_XSS bit 8, SDM Vol. 1 13.5.6): allowed only
 *    with IA32_XSS[8] = 1 (else #GP); XRSTORS loads the RTIT MSRs behind the VMM's back.
 * Checked on every transition: the VMM never runs with TraceEn = 1 (its own code is never
 * traced) and no entry fails.
 */
#ifndef PTV_TESTS_TWIN_H
#define PTV_TESTS_TWIN_H

#include <stdbool.h>
#include <stdint.h>

#include "model/fake_world.h"
#include "model/ptm.h"
#include "model/ptm_cpu.h"
#include "pt/pt_ctrl.h"

#define TWIN_MAX_LIST 8
#define XSS_PT        (1ull << 8)

struct twin {
    struct ptm pt;      /* the CPU's trace unit, over host-physical memory */
    struct ptm_cpu cpu; /* its RTIT MSR rules, with the host's CPUID 0x14 */
    struct fake_world *fw;
    bool load_clear; /* VM_ENTRY_LOAD_IA32_RTIT_CTL + VM_EXIT_CLEAR_IA32_RTIT_CTL */
    bool use_gpa;    /* SECONDARY_EXEC_PT_USE_GPA */
    uint64_t vmcs_rtit_ctl;
    struct vmx_msr_entry entry_list[TWIN_MAX_LIST], exit_list[TWIN_MAX_LIST];
    unsigned n_entry, n_exit;
    uint64_t xss;              /* IA32_XSS as the CPU holds it */
    uint32_t inject_fault_msr; /* test hook: the VMM's WRMSR of this MSR faults (0: none) */
    bool in_guest;
    /* what went wrong (all must stay 0) */
    unsigned entry_failures, vmx_aborts, root_tracing, list_overflows;
    const char *why;
    /* counters */
    uint64_t entries, vmm_wrmsrs, vmm_rdmsrs, vmm_wrmsr_faults;
    struct pt_cpu_ops ops;
};

void twin_init(struct twin *t, struct fake_world *fw, const struct ptm_cpu_caps *host,
               bool load_clear, bool use_gpa);
/* VM entry / VM exit around the guest's run. */
void twin_entry(struct twin *t);
void twin_exit(struct twin *t);
/* Guest XSAVES/XRSTORS of component 8 (in non-root): -1 = #GP. */
int twin_xrstors_pt(struct twin *t, const uint64_t area[5]);

#endif
