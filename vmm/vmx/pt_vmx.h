/* SPDX-License-Identifier: MIT */
/* The PT engine's hooks into VMX (vmm/vmx/pt_vmx.c). All are no-ops unless the guest owns PT. */
#ifndef PTV_VMX_PT_VMX_H
#define PTV_VMX_PT_VMX_H

#include "vmx/vcpu.h"
#include "pt/pt_msr.h"

bool pt_guest_owns(void);
/* true once pt_vmx_setup() gave the guest PT: the entry/exit hooks have work */
extern bool pt_vmx_active;
/* at VMCS set-up: controls, MSR-load lists, shadow state */
int pt_vmx_setup(struct vcpu *v) __attribute__((warn_unused_result));
/* around every VM entry / after every VM exit */
void pt_vmx_before_entry(struct vcpu *v);
void pt_vmx_after_exit(struct vcpu *v);
/* after an accepted guest WRMSR to an RTIT MSR */
void pt_vmx_msr_written(struct vcpu *v, uint32_t msr, const struct pt_msr_result *res);
/* EPT violation: true if the PT engine resolved it (resume the guest) */
bool pt_vmx_ept_violation(struct vcpu *v, uint64_t gpa, uint64_t qual);

#endif
