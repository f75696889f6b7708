/* SPDX-License-Identifier: MIT */
/*
 * The shim that binds the PT controller (vmm/pt/pt_ctrl.h, v->pt) to this CPU.  Exit handlers
 * and vmx_run() call the controller directly; this file only sets it up and logs for it.
 */
#ifndef PTV_VMX_PT_VMX_H
#define PTV_VMX_PT_VMX_H

#include "vmx/vcpu.h"

/* at VMCS set-up: the controller, its memory, the PT controls and the MSR-load lists */
int pt_vmx_setup(struct vcpu *v) __attribute__((warn_unused_result));
/* one rate-limited line for the controller's last operational error, if any */
void pt_vmx_log(struct vcpu *v);

#endif
