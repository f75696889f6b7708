/* SPDX-License-Identifier: MIT */
/*
 * The PT controller: everything the VMM *decides* about a guest that owns Intel PT, as plain C
 * that compiles into vmm.elf and, unchanged, into the host tests (the CPU twin and the
 * bare-metal differential, tests/model/).  It owns the guest's virtual RTIT MSR file, the
 * shadow ToPA, and the switching of the RTIT MSRs around VM entry and exit; it touches the CPU
 * only through struct pt_cpu_ops, which vmm/pt/shim/pt_vmx.c (the shim) implements with
 * RDMSR/WRMSR/VMWRITE and the tests implement with the CPU twin.
 *
 * What the guest sees is what bare metal shows (ARCHITECTURE §3):
 *  - RDMSR/WRMSR of the RTIT MSRs follow the SDM rules against the guest's CPUID 0x14 view
 *    (pt_msr.c / pt_ctl_policy.c); a write is validated before anything changes.
 *  - The output position survives VM exits: at an exit the hardware's OUTPUT_BASE /
 *    OUTPUT_MASK_PTRS / STATUS are read back and the next entry continues from exactly there
 *    (shadow mode: the host position in the shadow ToPA; the guest reads its own view of it).
 *  - RTIT_STATUS.TriggerEn reads 1 while the guest's trace runs (hardware clears it at the VM
 *    exit that stops TraceEn; the guest never sees that exit).
 *  - A set-up the VMM cannot give the CPU (illegal ToPA, out of VMM memory, a WRMSR the CPU
 *    refused while switching) becomes an operational error for the guest (STATUS.Error,
 *    TriggerEn = 0, TraceEn stays 1), never a #GP it did not earn and never a failed VM entry.
 * Between the guest's trace and the VMM, hardware holds only guest values: in host-guest mode
 * the VMM never traces, so the RTIT MSRs other than RTIT_CTL keep the guest's values across
 * exits; the controller remembers what the CPU holds and writes only what changed.  At an exit
 * only STATUS, OUTPUT_BASE and OUTPUT_MASK_PTRS can have moved, and only they are read.
 */
#ifndef PTV_PT_CTRL_H
#define PTV_PT_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_caps.h"
#include "pt/pt_msr.h"
#include "pt/pt_shadow.h"
#include "pt/pt_switch.h"
#include "pt/pt_sys.h"

/* Guest output regions one shadow build may name (VMM bound; 16 bytes each). */
#define PT_CTRL_MAX_REGIONS 16384

/* The CPU, as the controller uses it.  vmm/pt/shim/pt_vmx.c: real instructions; tests: the twin. */
struct pt_cpu_ops {
    void *ctx;
    uint64_t (*rdmsr)(void *ctx, uint32_t msr);
    /* 0, or nonzero when the CPU refused the write (the #GP was fixed up) */
    int (*wrmsr)(void *ctx, uint32_t msr, uint64_t val);
    void (*vmwrite_rtit_ctl)(void *ctx, uint64_t val); /* GUEST_IA32_RTIT_CTL */
    /* VM-entry / VM-exit MSR-load lists: contents and counts for the next entry/exit */
    void (*set_msr_lists)(void *ctx, const struct vmx_msr_entry *entry, unsigned n_entry,
                          const struct vmx_msr_entry *exit, unsigned n_exit);
};

/* Memory the shim hands over (the controller never allocates its own bookkeeping). */
struct pt_ctrl_mem {
    struct pt_shadow *sh;           /* shadow mode only */
    struct pt_shadow_scratch *scr;  /* shadow mode only */
    struct pt_topa_region *regions; /* shadow mode only: max_regions entries */
    uint32_t max_regions;
};

struct pt_ctrl_stats {
    uint64_t traced_exits; /* exits taken while the guest's trace ran */
    uint64_t builds;       /* shadow (re)builds or reuses at TraceEn 0->1 */
    uint64_t refusals;     /* set-ups answered with an operational error */
    uint64_t rebuilds;     /* shadows rebuilt because the memory map changed */
    uint64_t wrmsr_faults; /* guest-derived WRMSRs the CPU refused while switching */
    uint64_t msr_writes;   /* RTIT MSR WRMSRs executed while switching */
};

/*
 * System mode (pt_sys.h): the VMM's own trace of the guest.  To the switching plan it is a PT
 * owner of non-root execution with direct (host-physical) output addresses, like a guest in
 * hardware mode: its RTIT MSRs are loaded at entry (RTIT_CTL by the VMCS "load IA32_RTIT_CTL"
 * control or the VM-entry MSR-load list), RTIT_CTL is cleared at exit, and the output position
 * is read back at exits and never rewritten.  sd is that switching decision; the guest's own
 * decision (c->d: no PT, every RTIT MSR #GPs) is unchanged.
 */
struct pt_ctrl_sys {
    struct pt_decision sd;   /* what pt_switch plans with in system mode */
    struct pt_gcaps view;    /* the host's CPUID 0x14: the VMM's trace is checked against it */
    struct pt_sys_cfg cfg;   /* what is traced (validated) */
    struct pt_sys_ring ring; /* the VMM-owned ToPA ring of this CPU */
    struct pt_msr_file f;    /* the VMM's trace: RTIT MSRs loaded at entries, progress kept */
    struct pt_sys_acct acct; /* position, wraps, runs */
    const struct pt_page_alloc *alloc;
    bool ready; /* the ring exists */
    bool on;    /* tracing wanted (start / stop) */
};

struct pt_ctrl {
    const struct pt_decision *d;
    const struct pt_decision *swd; /* the decision pt_switch plans with: d, or sys.sd */
    struct pt_cpu_ops cpu;
    bool active;              /* RTIT MSRs are switched: the guest owns PT, or system mode */
    bool system;              /* PT_ENGINE_SYSTEM: the VMM's trace (sys.f) is switched */
    bool shadow_mode;         /* PT_ENGINE_HOST_GUEST_SHADOW */
    bool launched;            /* an entry happened: the host's RTIT_CTL is known to be 0 */
    bool hw_ok;               /* the guest's trace may run on the CPU (else: operational error) */
    bool traced;              /* the last entry loaded TraceEn = 1 */
    bool steady;              /* ... from a full plan, with nothing changed since (fast path) */
    struct pt_msr_file guest; /* what the guest reads (authoritative while the VMM runs) */
    /* What the CPU holds in the RTIT MSRs other than RTIT_CTL (valid when hw_known). */
    struct pt_msr_file hw;
    bool hw_known;
    bool dirty; /* the guest (or a build) changed a non-volatile RTIT MSR since the last load */
    struct pt_msr_file want;       /* the hardware view the next entry loads */
    uint64_t hpos_base, hpos_mask; /* shadow: where the CPU's output goes on */
    struct pt_switch sw;
    struct pt_plan plan;
    uint64_t host_area[PT_SWITCH_MAX_MSRS];
    unsigned lists_entry, lists_exit; /* MSR-load list counts last given to the CPU */
    uint64_t lists_ctl;
    /* shadow mode */
    struct pt_shadow *sh;
    struct pt_shadow_scratch *scr;
    struct pt_shadow_env env;
    struct pt_topa_err err;   /* why the last set-up was refused */
    const char *last_refusal; /* printable, for the log (NULL: none since the last read) */
    struct pt_ctrl_stats stats;
    struct pt_ctrl_sys sys;
};

/*
 * Set up the controller for decision d (any mode: with the guest not owning PT it only answers
 * RTIT MSR accesses with #GP).  mem and alloc are used in shadow mode.  Returns 0, or -1 if a
 * shadow-mode buffer is missing.
 */
int pt_ctrl_init(struct pt_ctrl *c, const struct pt_decision *d, const struct pt_caps *host,
                 const struct pt_cpu_ops *cpu, const struct pt_mem_ops *mem,
                 const struct pt_page_alloc *alloc, const struct pt_ctrl_mem *m)
    __attribute__((warn_unused_result));

/* Guest RDMSR / WRMSR of an RTIT MSR.  PT_MSR_GP: inject #GP(0); nothing changed. */
enum pt_msr_status pt_ctrl_rdmsr(struct pt_ctrl *c, uint32_t msr, uint64_t *val,
                                 struct pt_msr_result *res) __attribute__((warn_unused_result));
enum pt_msr_status pt_ctrl_wrmsr(struct pt_ctrl *c, uint32_t msr, uint64_t val,
                                 struct pt_msr_result *res) __attribute__((warn_unused_result));

/* Right before every VM entry / right after every VM exit. */
void pt_ctrl_before_entry(struct pt_ctrl *c);
void pt_ctrl_after_exit(struct pt_ctrl *c);

enum pt_ctrl_eptv {
    PT_CTRL_EPTV_NOT_PT = 0, /* not PT's: the ordinary EPT-violation path */
    PT_CTRL_EPTV_RESUME,     /* handled (table edit let through, PT output mapped, or the
                                guest's trace ended with an operational error): resume */
};
enum pt_ctrl_eptv pt_ctrl_ept_violation(struct pt_ctrl *c, uint64_t gpa, uint64_t qual);

/*
 * The EPT mapping of guest memory changed (remap, unmap, kind change; not the controller's own
 * write-protection).  Shadow mode: a shadow the CPU is tracing through is rebuilt now (or the
 * guest's trace ends with an operational error), any other shadow at the next TraceEn 0->1.
 */
void pt_ctrl_mem_changed(struct pt_ctrl *c, uint64_t gpa, uint64_t len);

/*
 * System mode (d->mode == PT_ENGINE_SYSTEM), the API of the VMCALL layer.  Everything happens
 * while the VMM runs (between an exit and the next entry) and takes effect at the next entry.
 *
 * pt_ctrl_sys_setup: build this CPU's ring (cfg->ring_size bytes of alloc's pages), program the
 * trace from cfg (pt_sys_program: every value through the SDM rules), offer RTIT_CTL to the CPU
 * with TraceEn clear (a value it refuses is reported, never a failed VM entry) and turn tracing
 * on from the next entry.  -1 + *why: nothing kept, tracing off, the controller inactive.
 */
int pt_ctrl_sys_setup(struct pt_ctrl *c, const struct pt_sys_cfg *cfg,
                      const struct pt_page_alloc *alloc, const char **why)
    __attribute__((warn_unused_result));
/* Give the ring back (the controller is inactive afterwards). */
void pt_ctrl_sys_teardown(struct pt_ctrl *c);
/* Tracing on from the next entry; rewind: empty the ring and clear Stopped/Error/counters
 * first (else go on from the current position; a full stop-on-full ring stays stopped). */
int pt_ctrl_sys_start(struct pt_ctrl *c, bool rewind, const char **why)
    __attribute__((warn_unused_result));
/* Tracing off from the next entry (the ring and its position are kept). */
void pt_ctrl_sys_stop(struct pt_ctrl *c);
/* New filters / wrap mode / PSB period (ring_size must stay): validated first (-1 + *why:
 * nothing changed), in force from the next entry. */
int pt_ctrl_sys_set_filter(struct pt_ctrl *c, const struct pt_sys_cfg *cfg, const char **why)
    __attribute__((warn_unused_result));
/* The same checks, nothing changed: whether set_filter would take cfg (0), or -1 + *why. */
int pt_ctrl_sys_check_filter(const struct pt_ctrl *c, const struct pt_sys_cfg *cfg,
                             const char **why) __attribute__((warn_unused_result));
void pt_ctrl_sys_status(const struct pt_ctrl *c, struct pt_sys_status *st);
/* Copy up to len bytes of the ring in stream order (off 0 = the oldest byte kept); returns the
 * bytes copied (0 at or past the end: status.avail). */
uint64_t pt_ctrl_sys_read(const struct pt_ctrl *c, uint64_t off, void *buf, uint64_t len);

#endif
