/* SPDX-License-Identifier: MIT */
/* Per-vCPU state and the decoded exit handed to exit handlers. */
#ifndef PTV_VMX_VCPU_H
#define PTV_VMX_VCPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <ptv/handoff.h>
#include "hw/vmx.h"
#include "hw/cpu.h"
#include "ept/ept.h"
#include "ept/ept_ondemand.h"
#include "ept/ept_window.h"
#include "pt/pt_caps.h"
#include "pt/pt_ctrl.h"
#include "emul/emul_policy.h"
#include "hw/spinlock.h"
#include "hw/gpr.h"
#include "emul/vcpu_reset.h"

struct guest_regs {
    uint64_t gpr[NR_GPRS];
    /* the HOST_RSP vmx_enter last wrote to the VMCS: it writes the field only when its frame
     * moved (never, in vmx_loop), 0 = unknown (vmcs_setup wrote it) */
    uint64_t host_rsp;
};
_Static_assert(sizeof(struct guest_regs) == 136, "guest_regs layout is used by vmx_entry.S");

struct vmexit {
    uint32_t reason; /* basic exit reason (bits 15:0) */
    uint32_t raw_reason;
    uint64_t qual;
    uint64_t gpa;
    uint64_t rip;
    uint32_t insn_len;
    uint32_t intr_info, intr_error;
    uint32_t idt_vec_info, idt_vec_error;
};

enum exit_action {
    EXIT_RESUME,           /* re-enter at the same RIP */
    EXIT_RESUME_SKIP_INSN, /* advance RIP past the exiting instruction */
    EXIT_INJECT,           /* re-enter delivering vcpu->inject (RIP unchanged) */
    EXIT_STOP_GUEST,       /* the guest is dead: crash dump, then the configured action */
};

struct pending_event {
    bool valid;
    uint32_t info; /* VM-entry interruption-information format */
    uint32_t error;
    uint32_t insn_len;
};

#define EXIT_RING_SIZE 32
struct exit_record {
    uint32_t reason;
    uint64_t qual, rip, tsc;
};

struct vcpu {
    struct guest_regs regs; /* first: vmx_entry.S addresses it directly */
    unsigned id;
    bool launched;
    uint64_t vmcs_pa, vmxon_pa, msr_bitmap_pa;
    uint8_t *msr_bitmap;
    uint64_t io_bitmap_pa[2]; /* I/O bitmaps A and B (exit_io.c): the UART's trapped ports */
    uint8_t *io_bitmap[2];
    unsigned io_trap_mask; /* UART offsets trapped now (bit i = base + i) */
    struct pending_event inject;
    bool nmi_stepping;        /* MTF armed to deliver an NMI owed from root, where the CPU has
                               * no NMI-window exiting (vcpu_loop.c) */
    bool nmi_window;          /* NMI-window exiting armed for an NMI owed from root */
    bool trace_stepping;      /* MTF armed by the software tracer (trace_step.c) */
    bool trace_mtf_seen;      /* an MTF exit came since the tracer's last look */
    bool trace_tf_used;       /* sw_trace = tf stepping ran (the single-step fast path) */
    bool trace_tf_step;       /* the last entry ran one instruction under the tracer's TF */
    bool trace_gtf;           /* the guest's own TF while the tracer's is set (trace_step.c) */
    uint64_t tf_frames_gen;   /* trace_step.c's frame table as this vCPU's #DB intercept knows it */
    bool trace_btf;           /* the guest's DEBUGCTL.BTF, held off while the trap flag steps */
    bool trace_blk;           /* a block is out: DR0 is the tracer's, events exit (trace_step.c) */
    bool trace_free;          /* runs unstepped outside its window's CR3 (trace_step.c) */
    bool cr3_exiting;         /* CR3-load exiting on (trace_step.c: while a window may run free) */
    bool trace_free_cpl;      /* ... at CPL 0 in a user-only window: every user-mode fetch exits */
    bool trace_cpl_hold;      /* stepped once before running free at CPL 0 again (trace_step.c) */
    bool trace_cpl_fetch;     /* this exit is the user-mode fetch that ended a free span */
    bool mbec;                /* EPT's mode-based execute control on (vcpu_mbec) */
    struct trace_vcpu *trace; /* this vCPU's trace ring and tracer (NULL until used) */
    bool dumping;             /* a paced serial dump runs on this CPU (trace_dump.c) */
    bool mtf_probe;           /* MTF armed to learn whether this CPU delivers it (trace_step.c) */
    bool boot_pending;        /* the loader handed off during the probe: trace_boot opens after */
    unsigned probe_tries;
    uint64_t probe_rip;
    /* CR0/CR4 bits the VMM owns (fixed by VMX): guest sees the read shadows */
    uint64_t cr0_fixed0, cr0_fixed1, cr4_fixed0, cr4_fixed1;
    uint64_t cr0_mask, cr4_mask;
    struct ept *ept;       /* = &vm.ept: one EPT for every vCPU */
    struct ept_od *ept_od; /* = &vm.ept_od */
    uint64_t ept_blocked;
    uint64_t ept_stale, ept_stale_run, ept_stale_last; /* violations EPT allows (exit_ept.c) */
    /* of those, accesses that met another CPU's break-before-make window (ept.h), and the
     * EPT's break count when this vCPU last looked */
    uint64_t ept_bbm_retries;
    unsigned long ept_breaks_seen;
    uint64_t ept_unmappable; /* accesses beyond the EPT walk, answered with #GP */
    uint64_t exits_total;
    uint64_t inits;                      /* INIT signals this (AP) vCPU took */
    struct vreset_sipi_start sipi_start; /* emul/vcpu_reset.h: INIT re-delivery */
    uint64_t sipi_start_exit;            /* exits_total at the SIPI / the last ignored INIT */
    bool init_broken;                    /* the CPU re-delivers INIT forever (exit_fault.c) */
    uint64_t spurious_inits;
    bool smi_block_quirk; /* the CPU saves blocking-by-SMI outside SMM (vcpu_loop.c) */
    uint64_t exits_by_reason[EXIT_REASON_MAX + 1];
    struct exit_record ring[EXIT_RING_SIZE];
    unsigned ring_next;
    const struct ptv_handoff *handoff;
    uint64_t canary_pa;
    struct desc_ptr guest_idtr; /* the caller's IDTR, saved before the VMM loads its own */
    /* IA32_APIC_BASE as the guest sees it; the real APIC never moves (exit_msr.c) */
    uint64_t apic_base, apic_base_real;
    struct ept_window apic_window; /* the guest's xAPIC window where it moved it (exit_msr.c) */
    uint64_t mtrr_cap, mtrr[MTRR_SLOTS]; /* the guest's MTRRs (emul/emul_policy.h) */
    uint64_t perf_global_virt;           /* IA32_PERF_GLOBAL_CTRL where the VMCS cannot switch it */
    /* GUEST_IA32_PERF_GLOBAL_CTRL as the VMM last wrote it (pmu_vmx_set_guest_global): only the
     * VMM writes that field, so the exit path's PMU hook reads this copy, not the VMCS; SELFCHECK
     * compares the two (PTV_SELFCHECK_VMCS_COPY) */
    uint64_t guest_perf_global;
    struct pt_ctrl pt; /* the guest's PT: RTIT MSRs, shadow ToPA, switching (vmm/pt/pt_ctrl.h) */
};

/*
 * What every vCPU shares: one guest, one EPT (docs/ARCHITECTURE.md, SMP).  EPT
 * changes happen under ept_lock (vm_ept_lock()); a change that narrows a
 * translation is made visible to every CPU by vmx_ept_sync() (an EPT
 * shootdown, vmm/smp/) before the VMM relies on it.
 */
struct vm {
    struct ept ept;
    struct ept_od ept_od; /* on-demand maps above the identity map (bounded) */
    uint64_t sink_pa;     /* where blocked guest accesses to VMM memory land */
    uint64_t eptp;
    struct spinlock ept_lock;
};
extern struct vm vm;
/* take / release vm.ept_lock; a waiter keeps answering EPT shootdowns */
void vm_ept_lock(void);
void vm_ept_unlock(void);

extern bool vmm_init_redelivery;       /* exit_fault.c */
extern struct pt_decision pt_decision; /* chosen once at boot (pt/shim/pt_probe.c) */
extern struct pt_caps pt_host_caps;    /* what the CPU offers */

/* event injection helpers (vcpu_ops.c) */
void vcpu_inject_exception(struct vcpu *v, unsigned vector, bool has_error, uint32_t error);
static inline void vcpu_inject_gp(struct vcpu *v)
{
    vcpu_inject_exception(v, GP_VECTOR, true, 0);
}
static inline void vcpu_inject_ud(struct vcpu *v)
{
    vcpu_inject_exception(v, UD_VECTOR, false, 0);
}

/* CR0/CR4 as the guest sees them: its own bits from the real register, the
 * VMM-owned (masked) bits from the read shadow (SDM Vol. 3C 25.6.6) */
uint64_t vcpu_guest_cr0(const struct vcpu *v);
uint64_t vcpu_guest_cr4(const struct vcpu *v);
/* the guest runs 64-bit code: IA-32e mode and CS.L (RIP is 64 bits wide) */
bool vcpu_code64(void);
/* the monitor trap flag on while the NMI delivery or the software tracer needs it */
void vcpu_mtf_update(struct vcpu *v);
/* NMI-window exiting on or off for an NMI owed from root (vcpu_ops.c) */
void vcpu_nmi_window(struct vcpu *v, bool on);
/* CR3-load exiting on or off (every MOV to CR3 exits: exit_cr.c completes it) */
void vcpu_cr3_exiting(struct vcpu *v, bool on);
/* EPT's mode-based execute control on or off; this CPU's cached EPT translations are dropped
 * (INVEPT): one made with the other setting could let a fetch through that this one refuses */
void vcpu_mbec(struct vcpu *v, bool on);

/* the exit loop (vcpu_loop.c): returns only when the first VMLAUNCH fails */
int vmx_loop(struct vcpu *v, void (*first_exit)(struct vcpu *, const struct vmexit *));
void vcpu_dump(struct vcpu *v);
/* the crash report of v (registers, VMCS, recent exits, statistics) as text: bytes written */
size_t crash_report(struct vcpu *v, const char *why, char *buf, size_t cap);
__attribute__((noreturn)) void vcpu_stop_guest(struct vcpu *v, const char *why);
/* the guest printed Linux's panic line: the crash report and dump once, the guest goes on */
void vcpu_guest_panicked(struct vcpu *v);

#endif
