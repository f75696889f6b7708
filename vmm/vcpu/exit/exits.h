/* SPDX-License-Identifier: MIT */
/* The exit handlers, one file per exit class (exit_*.c), dispatched by vcpu_loop.c. */
#ifndef PTV_VMX_EXITS_H
#define PTV_VMX_EXITS_H

#include "vmx/vcpu.h"

enum exit_action handle_exception_nmi(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_triple_fault(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_init(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_sipi(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_entry_failure(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_cpuid(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_invd_wbinvd(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_ud(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_xsetbv(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_vmcall(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_cr_access(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_msr_read(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_msr_write(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_ept_violation(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_ept_misconfig(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_io_instruction(struct vcpu *v, const struct vmexit *e);
/* exit_io.c: I/O bitmaps trapping the UART's ports, before the controls are written */
int vmx_io_bitmap_setup(struct vcpu *v) __attribute__((warn_unused_result));
enum exit_action handle_task_switch(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_mtf(struct vcpu *v, const struct vmexit *e);
enum exit_action handle_nmi_window(struct vcpu *v, const struct vmexit *e);
/* exit_misc.c: the exit the preemption timer makes while a dump goes out */
enum exit_action handle_preemption_timer(struct vcpu *v, const struct vmexit *e);

/* vcpu_loop.c: re-deliver an event whose delivery the exit interrupted */
void vmx_reinject_idt_vectoring(struct vcpu *v, const struct vmexit *e);

#endif
