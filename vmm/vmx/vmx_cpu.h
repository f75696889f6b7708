/* SPDX-License-Identifier: MIT */
#ifndef PTV_VMX_CPU_H
#define PTV_VMX_CPU_H

#include <stdint.h>
#include <stdbool.h>
#include "vmx/vcpu.h"
#include "hw/vmx.h"

/* VMX capabilities read once at start-up */
struct vmx_caps {
    uint64_t basic, misc, ept_vpid;
    uint64_t pin, proc, proc2, exit, entry; /* TRUE_* where VMX_BASIC[55] */
    uint64_t cr0_fixed0, cr0_fixed1, cr4_fixed0, cr4_fixed1;
    unsigned maxphyaddr;
};
extern struct vmx_caps vmx_caps;

/* the controls chosen for every VMCS */
struct vmx_controls {
    uint32_t pin, proc, proc2, exit, entry;
    uint32_t guest_features; /* GUEST_FEAT_* these controls let run (emul/guest_policy.h) */
};
extern struct vmx_controls vmx_ctls;

int vmx_read_caps(const char **why) __attribute__((warn_unused_result));
int vmx_choose_controls(const char **why) __attribute__((warn_unused_result));
int vmx_on(struct vcpu *v, int *status) __attribute__((warn_unused_result));
void vmx_off(void);
/* the guest's IA32_DEBUGCTL in effect while it runs: the VMCS field, or 0 where the VMM keeps the
 * guest's value as a copy (no save + load debug controls) */
uint64_t vmx_guest_debugctl(void);
/* the CPU offers the monitor trap flag (the owed NMI's fallback, the tracer's MTF steps) */
static inline bool vmx_have_mtf(void)
{
    return vmx_caps.proc >> 32 & CPU_BASED_MONITOR_TRAP_FLAG;
}
/* the CPU offers EPT's mode-based execute control (bit 2 of an EPT entry then allows
 * supervisor-mode fetches only, bit 10 user-mode ones: SDM Vol. 3C 29.3.2; the tracer's free
 * running at CPL 0) */
static inline bool vmx_have_mbec(void)
{
    return vmx_caps.proc2 >> 32 & SECONDARY_EXEC_MODE_BASED_EPT_EXEC;
}
int vmcs_setup(struct vcpu *v, const void *caller_state) __attribute__((warn_unused_result));
int vmx_msr_bitmap_setup(struct vcpu *v) __attribute__((warn_unused_result));
/* the guest's APIC base and MTRR copy, from the real MSRs (exit_msr.c) */
void vmx_msr_state_setup(struct vcpu *v);
/* the guest's one EPT (struct vm, vcpu.h), built once by the BSP */
int vm_ept_setup(const struct ptv_handoff *h) __attribute__((warn_unused_result));
void vmx_invept_all(void);
/* the guest's TLB entries for its linear addresses (VPID-tagged), as a MOV to CR3 that flushes
 * drops them: the non-global ones, or more where the CPU cannot be that precise */
void vmx_flush_guest_linear(void);
/* INVEPT if an EPT change since the last sync requires it (ept_flush_needed) */
/* -1 when some CPU did not answer the shootdown: the narrowing is not in force there */
int vmx_ept_sync(struct ept *e);
struct ptv_handoff;
/* the handoff map's type of guest-physical [gpa, gpa + len) if one range holds it all, else
 * PTV_MEM_MMIO; the VMM's span is PTV_MEM_VMM (vm_ept.c) */
uint32_t vm_mem_type(const struct ptv_handoff *h, uint64_t gpa, uint64_t len);
/* read the PT capabilities and let the engine decide the mode (pt_probe.c) */
void pt_probe(uint32_t requested);
/* this vCPU's UART traps follow the multiplexer, which another vCPU may have
 * changed (exit_io.c); called before every entry */
void io_traps_update(struct vcpu *v);
void exit_stats_print(const struct vcpu *v);
/* the host MTRRs still hold what vm_ept_setup() read (exit_ept.c) */
bool vmx_host_mtrrs_unchanged(void);

/* PTV_VMCALL_SELFCHECK (selfcheck.c): PTV_SELFCHECK_* bits */
struct vmm_selfcheck {
    uint32_t failed, checked;
};
void vmm_selfcheck_boot(void); /* snapshot what must not change, once at set-up */
struct vmm_selfcheck vmm_selfcheck(const struct vcpu *v);

#endif
