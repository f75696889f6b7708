/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's trap-flag side (sw_trace = tf, or auto where MTF is not delivered):
 * TF armed for each step with the VM-entry rules it needs, the guest's own TF kept apart from
 * the tracer's (trace_gtf), the frames an event pushed with the tracer's TF recorded in one
 * table for all vCPUs (vmm/trace/tfleak.c, pure) so that only the single steps they bring back
 * are the tracer's, the RFLAGS images a step wrote given the guest's TF, and #DB intercepted
 * only while any of that is needed.  The stepping itself is trace/shim/trace_step.c.
 */
#include "trace/shim/trace_vmx.h"
#include "trace/shim/trace_vcpu.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "hw/vmx.h"
#include "vmx/vmx_cpu.h"
#include "emul/emul_policy.h"
#include "trace/tfleak.h"
#include "hw/spinlock.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "hw/percpu.h"

/* TF on for the next step, or off, with the pending single-step trap and the interruptibility
 * state as VM entry needs them (emul_policy.c tf_step_arm / tf_step_disarm); writes only what
 * changed */
void trace_tf_write(struct vcpu *v, bool on)
{
    struct tf_step_state s = {
        .rflags = vmcs_readl(GUEST_RFLAGS),
        .pending_dbg = vmcs_readl(GUEST_PENDING_DBG_EXCEPTIONS),
        .intr = vmcs_read32(GUEST_INTERRUPTIBILITY_INFO),
        .activity = vmcs_read32(GUEST_ACTIVITY_STATE),
    };
    struct tf_step_state was = s;
    if (on)
        tf_step_arm(&s);
    else
        tf_step_disarm(&s);
    if (s.rflags != was.rflags)
        vmcs_writel(GUEST_RFLAGS, s.rflags);
    if (s.pending_dbg != was.pending_dbg)
        vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, s.pending_dbg);
    if (s.intr != was.intr)
        vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, s.intr);
}

/* the guest's own TF back on, entry-consistent (emul_policy.c tf_guest_restore) */
void trace_tf_guest_write(struct vcpu *v, bool btf)
{
    struct tf_step_state s = {
        .rflags = vmcs_readl(GUEST_RFLAGS),
        .pending_dbg = vmcs_readl(GUEST_PENDING_DBG_EXCEPTIONS),
        .intr = vmcs_read32(GUEST_INTERRUPTIBILITY_INFO),
        .activity = vmcs_read32(GUEST_ACTIVITY_STATE),
    };
    tf_guest_restore(&s, btf);
    vmcs_writel(GUEST_RFLAGS, s.rflags);
    vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, s.pending_dbg);
}

void trace_tf_arm(struct vcpu *v)
{
    if (!trace_vmx_tf())
        return;
    /* with DEBUGCTL.BTF the trap flag single-steps on branches only (SDM Vol. 3B 18.4.3):
     * off while the window steps, the guest's value back at its end (trace_stepping_off) */
    uint64_t dc = vmcs_read64(GUEST_IA32_DEBUGCTL);
    if (dc & DEBUGCTL_BTF) {
        v->trace_btf = true;
        vmcs_write64(GUEST_IA32_DEBUGCTL, dc & ~DEBUGCTL_BTF);
    }
    trace_tf_write(v, true);
    v->trace_tf_step = true; /* the next entry runs one instruction under the tracer's TF */
}

/* --- the tracer's trap flag in frames the guest keeps (trace/tfleak.h) --- */

/* one table for every vCPU: a context interrupted on one CPU may resume on another */
static struct tfl tf_frames;
static struct spinlock tf_frames_lock;
/* moves when the table turns empty or not: every vCPU then sets its #DB intercept again */
uint64_t tf_frames_gen; /* trace_vmx.h: trace_vmx_db_stale reads it before every entry */
static bool tf_frames_live;

static void frames_changed(bool live)
{
    if (live == tf_frames_live)
        return;
    tf_frames_live = live;
    __atomic_add_fetch(&tf_frames_gen, 1, __ATOMIC_RELEASE);
}

static void frame_record(struct trace_vcpu *t)
{
    const struct tfl_frame f = {.cr3 = t->sw.pushed.cr3,
                                .ret = t->sw.pushed.ret,
                                .rsp = t->sw.pushed.rsp,
                                .cs = t->sw.pushed.cs_sel};
    t->sw.pushed.on = false;
    spin_lock(&tf_frames_lock);
    uint64_t dropped = tf_frames.dropped;
    tfl_record(&tf_frames, &f);
    frames_changed(true);
    spin_unlock(&tf_frames_lock);
    static bool said; /* once: the guest decides how many frames it keeps */
    if (tf_frames.dropped != dropped && !said) {
        said = true;
        pr_warn("trace",
                "more than %u frames hold the tracer's trap flag: the oldest goes (its "
                "single step, should it come back, reaches the guest)",
                TFL_MAX);
    }
}

struct reach_ctx {
    struct vcpu *v;
    const struct swtrace_cpu *c;
};

/* tfl_reach_fn: one instruction at the frame's return IP goes to `to` (read under the paging
 * of the step, which is the frame's context: same CR3) */
static bool frame_reach(void *ctx, const struct tfl_frame *f, uint64_t to)
{
    const struct reach_ctx *r = ctx;
    const struct gw_mem m = {.ctx = r->v, .read = trace_read_gpa};
    uint8_t b[X86_MAX_INSN];
    unsigned got = 0;
    uint64_t lin = r->c->ctx.cs == X86_CODE64 ? f->ret : (r->c->cs_base + f->ret) & 0xffffffffu;
    size_t avail = gw_read(&m, &r->c->paging, lin, b, sizeof(b), &got) ? got : sizeof(b);
    struct x86_insn in;
    return !x86_classify(b, avail, r->c->ctx.cs, &in) &&
           tfl_insn_reaches(&in, f->ret, r->c->ctx.cs, to);
}

/* a frame the tracer's TF went into came back at c: its record goes */
static bool frame_take(struct vcpu *v, const struct swtrace_cpu *c)
{
    if (!__atomic_load_n(&tf_frames_live, __ATOMIC_RELAXED))
        return false;
    struct reach_ctx r = {.v = v, .c = c};
    spin_lock(&tf_frames_lock);
    bool took = tfl_take(&tf_frames, c->ctx.cr3, c->cs_sel, c->rip, c->rsp, frame_reach, &r);
    frames_changed(!tfl_empty(&tf_frames));
    spin_unlock(&tf_frames_lock);
    return took;
}

/*
 * Outside the window's CR3 the guest's TF was its own all along.  Back from CPL 0 (c: the first
 * user-mode instruction, not run yet) a TF was loaded by the kernel's return, which with TF set
 * is an IRET (Linux returns by SYSRET only with TF and RF clear), from a frame that may hold the
 * tracer's TF: pushed by an event (frame_record: its record goes) or by an INT n / INT3 the
 * tracer stepped (never recorded).  As where the tracer steps the IRET (trace_tf_after_step: the
 * guest's TF comes from POPF and SYSRET only), it is the tracer's: a guest's own single step
 * across a kernel return is not kept (ARCHITECTURE section 5).
 */
bool trace_tf_after_free(struct vcpu *v, const struct swtrace_cpu *c, bool from_cpl0)
{
    bool tf = vmcs_readl(GUEST_RFLAGS) & RFLAGS_TF;
    if (!from_cpl0)
        return tf;
    if (tf)
        frame_take(v, c);
    return false;
}

/* #DB is intercepted while this vCPU steps with the trap flag, and while any frame holds the
 * tracer's TF; else not at all (a guest's own single steps and breakpoints exit nowhere) */
void trace_vmx_db_update(struct vcpu *v)
{
    v->tf_frames_gen = __atomic_load_n(&tf_frames_gen, __ATOMIC_ACQUIRE);
    bool want =
        (v->trace_stepping && trace_vmx_tf()) || __atomic_load_n(&tf_frames_live, __ATOMIC_RELAXED);
    if (v->trace_blk) { /* every exception exits while a block is out: its end restores */
        uint32_t *b = &v->trace->blk_exc;
        *b = want ? *b | 1u << DB_VECTOR : *b & ~(1u << DB_VECTOR);
        return;
    }
    uint32_t b = vmcs_read32(EXCEPTION_BITMAP);
    uint32_t w = want ? b | 1u << DB_VECTOR : b & ~(1u << DB_VECTOR);
    if (w != b)
        vmcs_write32(EXCEPTION_BITMAP, w);
}

/* a linear address of the stack (SS:RSP outside 64-bit code) */
static uint64_t stack_lin(const struct swtrace_cpu *c, uint64_t rsp)
{
    if (c->ctx.cs == X86_CODE64)
        return rsp;
    uint64_t sp = vmcs_read32(GUEST_SS_AR_BYTES) & VMX_AR_DB ? rsp & 0xffffffffu : rsp & 0xffffu;
    return (vmcs_readl(GUEST_SS_BASE) + sp) & 0xffffffffu;
}

/* the guest's own single step, due after an instruction it began with TF = 1: a #DB with BS,
 * delivered at this entry unless another event is (that one then comes first, as it would) */
static void guest_step_deliver(struct trace_vcpu *t)
{
    /* the handler must not run inside a block (its DR7 and DR0 would be the tracer's): the
     * next entry steps */
    t->blk_cool = true;
    if (vmcs_read32(VM_ENTRY_INTR_INFO_FIELD) & INTR_INFO_VALID)
        return;
    write_dr6(db_dr6_deliver(read_dr6(), PENDING_DBG_BS));
    vmcs_write32(VM_ENTRY_INTR_INFO_FIELD, INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | DB_VECTOR);
}

/*
 * After a step under the tracer's TF (c: the vCPU now, prev: the instruction that ran from ip;
 * gtf: the guest's own TF when it began, v->trace_gtf).  The guest's TF goes on as the
 * instruction left it: loaded from an image (POPF, IRET, SYSRET: RFLAGS.TF now, except an IRET
 * of a frame the tracer's TF went into), cleared where RFLAGS.TF is 0 now (an event, SYSCALL's
 * mask), else kept; a single step it owes is delivered.  An RFLAGS image the instruction wrote
 * gets the guest's TF instead of the tracer's -- PUSHF's at the new stack top (TF is bit 0 of
 * its second byte, whatever the operand size), SYSCALL's in R11 -- so it never brings the
 * tracer's back; a frame an event pushed while the guest's TF was 0 is recorded (the tracer's
 * TF in it is how stepping comes back after its handler).
 */
/* the image a PUSHF just stored at the stack top gets the guest's TF: only if RSP went down by
 * an operand size (2, 4 or 8) from where it was, and only where the guest could write at its CPL
 * (page rights, SMAP, EPT), one byte: TF is bit 0 of the image's second byte */
static void pushf_fix(struct vcpu *v, const struct swtrace_cpu *c, uint64_t rsp_before, bool gtf)
{
    uint64_t mask = c->ctx.cs == X86_CODE64                      ? ~0ull
                    : vmcs_read32(GUEST_SS_AR_BYTES) & VMX_AR_DB ? 0xffffffffull
                                                                 : 0xffffull;
    uint64_t down = (rsp_before - c->rsp) & mask;
    if (down != 2 && down != 4 && down != 8)
        return;
    const struct gw_mem m = {.ctx = v, .read = trace_read_gpa};
    uint64_t gpa, host;
    if (gw_translate_write(&m, &c->paging, stack_lin(c, c->rsp) + 1, c->ctx.cpl,
                           vmcs_readl(GUEST_RFLAGS), &gpa) ||
        !(host = trace_guest_page(v, gpa, 1, true)))
        return;
    volatile uint8_t *b = (volatile uint8_t *)(uintptr_t)host;
    *b = gtf ? *b | RFLAGS_TF >> 8 : *b & ~(RFLAGS_TF >> 8);
}

void trace_tf_after_step(struct vcpu *v, struct trace_vcpu *t, const struct x86_insn *prev,
                         bool prev_valid, uint64_t ip, uint64_t rsp_before, unsigned cpl_before,
                         uint64_t cr3_before, uint16_t cs_before, const struct swtrace_cpu *c,
                         bool ran)
{
    const bool gtf = v->trace_gtf;
    const bool event = t->sw.pushed.on;
    if (event && !gtf)
        frame_record(t);
    t->sw.pushed.on = false;
    /* an IRET's image may hold the tracer's TF from a frame not recorded (an event whose handler
     * the tracer first saw where the step looked like the interrupted instruction's own flow):
     * the guest's TF is taken from POPF and SYSRET only (ARCHITECTURE section 5) */
    bool loads = prev_valid && (prev->branch == X86_BR_SYSRET || (prev->flags & X86_F_POPF));
    bool tf_now = vmcs_readl(GUEST_RFLAGS) & RFLAGS_TF;
    if (prev_valid && prev->branch == X86_BR_IRET && tf_now)
        frame_take(v, c);
    if (event)
        v->trace_gtf = false; /* its handler, or what it switched to, runs with TF = 0 */
    else if (loads)
        v->trace_gtf = tf_now;
    else if (!tf_now)
        v->trace_gtf = false;
    /* with the guest's DEBUGCTL.BTF (held off while the tracer steps) its TF steps on taken
     * branches only (SDM Vol. 3B 18.4.3) */
    bool branch_taken =
        prev_valid && prev->branch != X86_BR_NONE && prev->branch != X86_BR_VMX &&
        !(prev->branch == X86_BR_JCC && c->rip == x86_ip_wrap(ip + prev->len, c->ctx.cs));
    if (gtf && ran && !event && (!v->trace_btf || branch_taken))
        guest_step_deliver(t);
    if (!prev_valid || !ran)
        return;
    /* what was decoded may not be what ran (another vCPU can rewrite the code in between):
     * each fix-up checks that the vCPU's state is the one that instruction leaves, and writes
     * only what the guest could write itself */
    if (event || ((c->ctx.cr3 ^ cr3_before) & ~0xfffull))
        return; /* the step ran more than the one instruction, or another context is here */
    if (prev->branch == X86_BR_SYSCALL && c->ctx.cpl == 0 && c->ctx.cs == X86_CODE64 &&
        v->regs.gpr[GPR_RCX] == ip + prev->len) /* SYSCALL put its return address in RCX */
        v->regs.gpr[GPR_R11] = (v->regs.gpr[GPR_R11] & ~RFLAGS_TF) | (gtf ? RFLAGS_TF : 0);
    else if ((prev->flags & X86_F_PUSHF) && tfl_insn_reaches(prev, ip, c->ctx.cs, c->rip) &&
             c->ctx.cpl == cpl_before && c->cs_sel == cs_before)
        pushf_fix(v, c, rsp_before, gtf);
}

bool trace_vmx_db_exit(struct vcpu *v, uint64_t qual, uint64_t *guest_qual)
{
    *guest_qual = qual;
    if (!(qual & PENDING_DBG_BS))
        return false; /* no single step: the guest's breakpoint */
    if (v->trace_stepping && trace_vmx_tf() && !v->trace_free) {
        v->trace_mtf_seen = true; /* one instruction ran: as an MTF exit */
    } else {
        /* outside a window: a TF a frame of the tracer's brought back (tfleak.h), else the
         * guest's own single step, delivered as the CPU would */
        struct swtrace_cpu c;
        trace_observe(&c);
        if (!frame_take(v, &c))
            return false;
        trace_tf_write(v, false); /* the guest never set it: cleared, and on */
    }
    /* the step is the tracer's; a breakpoint the same instruction hit is the guest's, told
     * without the BS it never asked for */
    *guest_qual = db_qual_guest_part(qual);
    return !*guest_qual;
}

/* the window closes at an exit the tracer has not looked at yet: if code ran unstepped since
 * the last step (an event's handler, then what it switched to), the frame the stepped context
 * left still holds the tracer's TF */
void trace_vmx_stop_observe(struct vcpu *v)
{
    struct trace_vcpu *t = v->trace;
    if (!v->trace_tf_step || !t->sw.on)
        return;
    v->trace_tf_step = false;
    if (v->trace_gtf)
        return; /* the guest's own TF: its frames carry its TF, not the tracer's */
    struct swtrace_cpu c;
    trace_observe(&c);
    if (c.rip == t->sw.ip && c.cs_sel == t->sw.cs_sel && c.ctx.cr3 == t->sw.ctx.cr3 &&
        c.rsp == t->sw.rsp)
        return; /* the exit is at the instruction the tracer stepped last: nothing unseen */
    bool after = t->sw.valid && t->sw.insn.branch == X86_BR_INT;
    t->sw.pushed.on = true;
    t->sw.pushed.ret = after ? t->sw.ip + t->sw.insn.len : t->sw.ip;
    t->sw.pushed.rsp = t->sw.rsp;
    t->sw.pushed.cr3 = t->sw.ctx.cr3;
    t->sw.pushed.cs_sel = t->sw.cs_sel;
    frame_record(t);
}
