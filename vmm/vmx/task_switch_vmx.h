/* SPDX-License-Identifier: MIT */
/* The VMX side of an emulated task switch (vmm/vmx/task_switch_vmx.c). */
#ifndef PTV_VMX_TASK_SWITCH_VMX_H
#define PTV_VMX_TASK_SWITCH_VMX_H

#include "vmx/vcpu.h"

/* a task-switch exit (reason 9): emulated by vmx/task_switch.c, state written back */
enum exit_action vmx_task_switch(struct vcpu *v, const struct vmexit *e);

#endif
