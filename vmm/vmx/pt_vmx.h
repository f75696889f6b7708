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

/*
 * System mode (pt_mode = system): the VMM traces this CPU's guest into its own ToPA ring.  For
 * the VMCALL layer; call on the vCPU's own CPU, in VMX root (between an exit and the next
 * entry).  Changes take effect at the next VM entry.  Without system mode (or without a ring)
 * start/set_filter return -1 with *why, status reports error with a reason, read returns 0.
 * Semantics: vmm/pt/pt_ctrl.h (pt_ctrl_sys_*) and vmm/pt/pt_sys.h (struct pt_sys_status).
 */
int pt_vmx_sys_start(struct vcpu *v, bool rewind, const char **why)
    __attribute__((warn_unused_result));
void pt_vmx_sys_stop(struct vcpu *v);
/* cfg: e.g. pt_sys_cfg_from_config() of the boot config, then changed; ring_size must stay */
int pt_vmx_sys_set_filter(struct vcpu *v, const struct pt_sys_cfg *cfg, const char **why)
    __attribute__((warn_unused_result));
int pt_vmx_sys_check_filter(struct vcpu *v, const struct pt_sys_cfg *cfg, const char **why)
    __attribute__((warn_unused_result));
void pt_vmx_sys_status(struct vcpu *v, struct pt_sys_status *st);
/* the ring in stream order: off 0 = the oldest byte kept; returns the bytes copied */
uint64_t pt_vmx_sys_read(struct vcpu *v, uint64_t off, void *buf, uint64_t len);

#endif
