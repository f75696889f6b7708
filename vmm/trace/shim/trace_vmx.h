/* SPDX-License-Identifier: MIT */
/* The software tracer in the VMM: the shim between the VMCS and vmm/trace/swtrace.c. */
#ifndef PTV_TRACE_VMX_H
#define PTV_TRACE_VMX_H

#include <stdbool.h>
#include <stdint.h>

struct vcpu;

/* the MTF-stepping tracer can run here (the CPU has the monitor trap flag, sw_trace != off) */
bool trace_vmx_available(const char **why);

/*
 * TRACE_START / STOP / STATUS / READ of include/ptv/vmcall.h: 0 or a PTV_VMCALL_E*.  The
 * source is system-mode PT where this vCPU has it (pt_mode = system), else the software
 * tracer; *src says which (PTV_TRACE_SRC_*).
 */
struct trace_req;
int trace_vmx_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget, uint32_t *src);
int trace_vmx_stop(struct vcpu *v);
struct trace_status {
    uint32_t flags; /* PTV_TRACE_ST_* */
    uint64_t ring_size, written, insns, gaps, events, unreadable;
};
void trace_vmx_status(struct vcpu *v, struct trace_status *st);
/* what a CPL 3 owner is told of its window: only what its stream shows (include/ptv/vmcall.h,
 * the CPL 3 rule) */
void trace_vmx_status_own(struct vcpu *v, struct trace_status *st);
/* may a caller at cpl under cr3 stop, dump or read this vCPU's window (trace_owner_allows)?
 * TRACE_START checks the CPL 3 rule itself (trace_req_user_check: EACCES) */
bool trace_vmx_owned_by(const struct vcpu *v, unsigned cpl, uint64_t cr3);
/* stream bytes [off, off + len) into a VMM buffer (off >= the oldest kept): bytes copied */
uint64_t trace_vmx_bytes(struct vcpu *v, uint64_t off, void *buf, uint64_t len);
int trace_vmx_read(struct vcpu *v, uint64_t gpa, uint64_t len, uint64_t off, uint64_t *copied,
                   uint64_t *oldest, uint64_t *written);

/* a #DB exit (qualification = its DR6 bits): true when it was the tracer's own single step
 * (sw_trace = tf) alone and is consumed; false: deliver it to the guest with *guest_qual, the
 * conditions that are the guest's (its breakpoints, without the tracer's BS) */
bool trace_vmx_db_exit(struct vcpu *v, uint64_t qual, uint64_t *guest_qual);
/* #DB intercepted as the tracer needs it now: while this vCPU steps with the trap flag, and
 * while any frame holds the tracer's TF (trace/tfleak.h); trace_vmx_db_stale says when another
 * vCPU changed the latter (vmx_run asks before every entry) */
void trace_vmx_db_update(struct vcpu *v);
extern uint64_t tf_frames_gen; /* trace_tf.c; a macro: struct vcpu is not complete here */
#define trace_vmx_db_stale(v)                                                                      \
    (__atomic_load_n(&tf_frames_gen, __ATOMIC_RELAXED) != (v)->tf_frames_gen)
/* a window closes (TRACE_STOP): the frame its stepped context left since the last step */
void trace_vmx_stop_observe(struct vcpu *v);

/* trace_boot = N: start the boot window */
void trace_vmx_boot(struct vcpu *v);
/* BOOT_HANDOFF from the loader: 0, or PTV_VMCALL_EBUSY after the first */
int trace_vmx_handoff(struct vcpu *v);

/* sw_trace = auto: measure whether MTF exits come (the BSP, before its first entry), then at
 * each exit while v->mtf_probe (after its handler) */
void trace_vmx_probe_start(struct vcpu *v);
void trace_vmx_probe(struct vcpu *v, uint32_t reason, uint64_t exit_rip);

/* a vCPU's trace window as a dump describes it */
struct codepages;
struct trace_window {
    bool hardware;                       /* system-mode PT, else the software tracer */
    uint64_t ring_size, oldest, written; /* stream offsets: the ring holds [oldest, written) */
    bool wrapped;
    uint64_t gaps; /* the window's gaps: OVF packets in its stream (swtrace_gaps) */
    bool kernel, user, cr3_match;
    uint64_t cr3;
    unsigned nranges;
    struct {
        uint64_t lo, hi;
    } range[4];
    const struct codepages *code; /* pages the window ran (software tracer), else NULL */
    uint64_t last_cr3;            /* the CR3 of the last step */
};
/* false: this vCPU never traced (or its ring is empty) */
bool trace_vmx_window(struct vcpu *v, struct trace_window *w);
/* len bytes of guest code at linear va under CR3 cr3 (CP_CR3_ANY: the window's last CR3),
 * read through the paging the window last ran under and EPT (guest RAM only) */
bool trace_vmx_code_read(struct vcpu *v, uint64_t cr3, uint64_t va, void *buf, unsigned len);

/* block stepping (trace_step.c): at any exit while v->trace_blk, before the exit is decoded
 * further: 1 traced, enter again; 0 enter again without handling it (an interrupt the guest
 * takes then, a fault it meets again); -1 the exit goes the whole way */
int trace_vmx_block_exit(struct vcpu *v, uint32_t reason, uint32_t intr_info);
/* an event is delivered at this entry: no block, the vCPU steps with TF */
void trace_vmx_block_cancel(struct vcpu *v);

/* at every exit while the vCPU runs free outside its window (v->trace_free), before the exit is
 * handled: the tracer is put where the vCPU is (trace_step.c); reason: the exit's basic reason */
void trace_vmx_free_exit(struct vcpu *v, uint32_t reason);
/* an EPT violation: true where it is the user-mode fetch that ended a span run free at CPL 0
 * (the tracer steps from there: the guest retries it, EXIT_RESUME); false: not one */
bool trace_vmx_free_fetch(struct vcpu *v);
/* this vCPU's window runs CPL 0 free (trace_step.c: a user-only window, EPT's mode-based
 * execute control) */
bool trace_vmx_free_cpl(const struct vcpu *v);
/* right before each VM entry while the tracer steps this vCPU (vcpu_loop.c) */
void trace_vmx_before_entry(struct vcpu *v);

/* sw_trace = tf: the tracer's single-step #DB exit traced at once (vmx_run's fast path; only
 * while v->trace_stepping); false: not one, nothing changed */
bool trace_vmx_step_exit(struct vcpu *v, uint32_t intr_info);
/* the MTF step fast path: an MTF exit while the tracer steps traced at once (trace_step.c) */
bool trace_vmx_mtf_exit(struct vcpu *v);

#endif
