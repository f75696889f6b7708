/* SPDX-License-Identifier: MIT */
/*
 * The software tracer in the VMM, its stepping side: a thin shim.  It keeps the monitor trap
 * flag or the trap flag on while a window is open, lets blocks run to a breakpoint, runs the
 * vCPU free outside the window's CR3, and traces each step -- before the next entry, or at the
 * single-step #DB exit itself (the fast path).  What ran and which packets that makes is
 * decided in vmm/trace/swtrace.c; guest memory, the vCPU's registers and how this CPU steps are
 * trace_guest.c; the trap flag's side (the guest's TF kept apart, frames holding the tracer's
 * TF, #DB) trace_tf.c; the VMCALLs that open and close windows trace_vmx.c.
 */
#include "trace/shim/trace_vmx.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "hw/vmx.h"
#include "emul/emul_policy.h"
#include "trace/frame.h"
#include "hw/cpu.h"
#include "vmx/vmx_cpu.h"
#include "base/log.h"
#include "base/vmm_state.h"
#include "lib/ptv_string.h"
#include "lib/range.h"
#include "smp/smp.h"
#include <ptv/vmcall.h>
#include "trace/shim/trace_vcpu.h"

/* --- guest memory as the stepping vCPU reads it: cached per page and EPT generation --- */

/* trace_read_gpa for the stepping vCPU's own CPU (it owns t->ok_*): the tracer reads the code of
 * every step, so the memory map's search and the EPT walk run once per page, not once per
 * instruction */
static bool read_gpa_step(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    struct vcpu *v = ctx;
    struct trace_vcpu *t = v->trace;
    uint64_t page = gpa & ~0xfffull, gen = __atomic_load_n(&vmm_sd.gen, __ATOMIC_ACQUIRE);
    if ((gpa & 0xfff) + len > 0x1000)
        return trace_read_gpa(ctx, gpa, buf, len);
    if (!(t->ok_valid && t->ok_page == page && t->ok_gen == gen)) {
        if (!trace_guest_page(v, gpa, len, false))
            return false;
        t->ok_valid = vm_mem_type(v->handoff, page, 0x1000) == PTV_MEM_RAM;
        t->ok_page = page;
        t->ok_gen = gen;
    }
    memcpy(buf, (const void *)(uintptr_t)gpa, len); /* guest RAM is identity-mapped */
    return true;
}

/* gw_mem.map for the stepping vCPU: a guest RAM page read in place (identity-mapped), good
 * until vmm_sd.gen moves (every EPT narrowing is a shootdown: the caller's gw_mem.gen) */
static const uint8_t *map_step(void *ctx, uint64_t gpa)
{
    struct vcpu *v = ctx;
    if (!trace_guest_page(v, gpa, 0x1000, false) ||
        vm_mem_type(v->handoff, gpa, 0x1000) != PTV_MEM_RAM)
        return NULL;
    return (const uint8_t *)(uintptr_t)gpa;
}

/* guest memory as the stepping vCPU reads it: in place, checked per page and EPT generation */
static struct gw_mem step_mem(struct vcpu *v)
{
    return (struct gw_mem){.ctx = v,
                           .read = read_gpa_step,
                           .map = map_step,
                           .gen = __atomic_load_n(&vmm_sd.gen, __ATOMIC_ACQUIRE)};
}

/* --- block stepping (vmm/trace/swtrace.h): one exit per straight-line block --- */

/*
 * Blocks need DR7 loaded and saved with the guest (the debug controls: else DR0's breakpoint
 * would stay the VMM's) and NMI exiting (else an NMI's handler could run unseen inside one);
 * the guest's state is emul_policy.c's blk_entry_allowed.  Events this entry delivers or owes
 * cancel a block in one place, vmx_run, after every writer of the entry's event has run.
 * After an event exit one instruction is stepped first (blk_cool), so the event is taken.
 */
static bool block_entry_ok(struct vcpu *v, struct trace_vcpu *t)
{
    if (t->blk_cool) {
        t->blk_cool = false;
        return false;
    }
    uint64_t fl = vmcs_readl(GUEST_RFLAGS);
    /* the guest's own TF (stepping with MTF: RFLAGS.TF; with the trap flag: kept apart) wants
     * a #DB after every instruction: a block would run it as an event exit; stepped instead */
    return (trace_vmx_tf() ? !v->trace_gtf : !(fl & RFLAGS_TF)) &&
           (vmx_ctls.entry & VM_ENTRY_LOAD_DEBUG_CONTROLS) &&
           (vmx_ctls.exit & VM_EXIT_SAVE_DEBUG_CONTROLS) &&
           (vmx_ctls.pin & PIN_BASED_NMI_EXITING) && !v->mtf_probe &&
           blk_entry_allowed(fl, vmcs_read32(GUEST_INTERRUPTIBILITY_INFO),
                             vmcs_read32(GUEST_ACTIVITY_STATE), vmcs_readl(GUEST_DR7));
}

/* the block t->blk goes out: DR0 at its end; the first time, TF off and every event an exit */
static void block_arm(struct vcpu *v, struct trace_vcpu *t)
{
    if (!v->trace_blk) {
        t->blk_dr7 = vmcs_readl(GUEST_DR7);
        t->blk_dr0 = read_dr0();
        t->blk_exc = vmcs_read32(EXCEPTION_BITMAP);
        /* every exception (the page-fault error-code mask and match stay 0: every #PF) and
         * every external interrupt exit */
        vmcs_write32(EXCEPTION_BITMAP, ~0u);
        vmcs_write32(PIN_BASED_VM_EXEC_CONTROL,
                     vmcs_read32(PIN_BASED_VM_EXEC_CONTROL) | PIN_BASED_EXT_INTR_MASK);
        if (trace_vmx_tf()) {
            trace_tf_write(v, false);
            /* a single step an emulated instruction left pending (TF was on) would be a #DB
             * before the block's first instruction; no shadow and no HLT here, so entry takes
             * BS = 0 (SDM Vol. 3C 27.3.1.5) */
            uint64_t pd = vmcs_readl(GUEST_PENDING_DBG_EXCEPTIONS);
            if (pd & PENDING_DBG_BS)
                vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, pd & ~PENDING_DBG_BS);
        }
        vmcs_writel(GUEST_DR7, blk_dr7(t->blk_dr7));
        v->trace_blk = true;
        vcpu_mtf_update(v); /* stepping with MTF: off while the block runs */
    }
    write_dr0(t->blk.end_lin);
    if (t->blk.lead_rf) { /* the breakpoint is on the lead: RF lets it run once */
        uint64_t fl = vmcs_readl(GUEST_RFLAGS);
        t->blk_rf = true;
        t->blk_rf_guest = fl & RFLAGS_RF;
        vmcs_writel(GUEST_RFLAGS, fl | RFLAGS_RF);
    }
}

/* the block set RF for its lead and it is not needed any more: the guest's own RF back (not
 * a trace of ours in an event frame) */
static void block_rf_put_back(struct trace_vcpu *t, uint64_t fl)
{
    t->blk_rf = false;
    if (!t->blk_rf_guest && (fl & RFLAGS_RF))
        vmcs_writel(GUEST_RFLAGS, fl & ~RFLAGS_RF);
}

/* the exit after a block that went out with RF set for its lead: whether the lead did not
 * complete (blk_lead_pending), the guest's own RF then back */
static bool block_rf_exit(struct trace_vcpu *t, uint64_t rip, bool breakpoint)
{
    if (!t->blk_rf)
        return false;
    t->blk_rf = false;
    /* at the breakpoint or off the lead it ran and the CPU cleared RF: no VMREAD */
    uint64_t fl = breakpoint || rip != t->blk.lead_ip ? 0 : vmcs_readl(GUEST_RFLAGS);
    if (!blk_lead_pending(breakpoint, rip, t->blk.lead_ip, fl))
        return false;
    block_rf_put_back(t, fl);
    return true;
}

/* no block out any more: the guest's DR0, DR7, exception bitmap and pin controls back */
static void block_disarm(struct vcpu *v, struct trace_vcpu *t)
{
    if (!v->trace_blk)
        return;
    v->trace_blk = false;
    if (t->blk_rf) /* went out with RF set and never ran (an event cancelled it) */
        block_rf_put_back(t, vmcs_readl(GUEST_RFLAGS));
    write_dr0(t->blk_dr0);
    vmcs_writel(GUEST_DR7, t->blk_dr7);
    vmcs_write32(EXCEPTION_BITMAP, t->blk_exc);
    vmcs_write32(PIN_BASED_VM_EXEC_CONTROL,
                 vmcs_read32(PIN_BASED_VM_EXEC_CONTROL) & ~PIN_BASED_EXT_INTR_MASK);
    vcpu_mtf_update(v); /* stepping with MTF: on again for the next step */
}

/*
 * While free at CPL 0 the one way back has a second form: the kernel's return lands on a user
 * page that is not present (demand paging), and the #PF comes before any EPT check.  Hardware PT
 * shows it as TIP.PGE at the user IP, then the fault (FUP + TIP.PGD); stepping the kernel would
 * too.  So a #PF whose error code says user-mode instruction fetch exits meanwhile (exception
 * bitmap bit 14 with the error-code mask and match: SDM Vol. 3C 26.2), is caught as the way
 * back (trace_vmx_free_exit) and reflected as ever (exit_fault.c); mask and match go back to 0
 * (every #PF or none, as blocks and the guest's set-up expect) when the span ends.
 */
#define PFEC_USER_FETCH ((1u << 2) | (1u << 4)) /* U/S and I/D of a #PF error code */

/* the controls of running free at CPL 0: the mode-based control (vcpu_mbec) and this #PF exit,
 * on or off together */
static void free_cpl_controls(struct vcpu *v, bool on)
{
    if (v->mbec == on)
        return;
    vcpu_mbec(v, on);
    uint32_t b = vmcs_read32(EXCEPTION_BITMAP);
    vmcs_write32(EXCEPTION_BITMAP, on ? b | 1u << PF_VECTOR : b & ~(1u << PF_VECTOR));
    vmcs_write32(PAGE_FAULT_ERROR_CODE_MASK, on ? PFEC_USER_FETCH : 0);
    vmcs_write32(PAGE_FAULT_ERROR_CODE_MATCH, on ? PFEC_USER_FETCH : 0);
}

/* no free running any more: the vCPU is stepped, or the window is over */
static void free_off(struct vcpu *v)
{
    v->trace_free = v->trace_free_cpl = false;
    free_cpl_controls(v, false);
}

void trace_stepping_off(struct vcpu *v)
{
    block_disarm(v, v->trace);
    free_off(v);
    v->trace_cpl_hold = v->trace_cpl_fetch = false;
    vcpu_cr3_exiting(v, false);
    v->trace_stepping = false;
    v->trace_tf_step = false;
    bool btf = v->trace_btf;
    if (btf) {
        v->trace_btf = false;
        vmcs_write64(GUEST_IA32_DEBUGCTL, vmcs_read64(GUEST_IA32_DEBUGCTL) | DEBUGCTL_BTF);
    }
    if (trace_vmx_tf()) {
        trace_tf_write(v, false);
        if (v->trace_gtf) /* the guest's own TF, as it left it */
            trace_tf_guest_write(v, btf);
        v->trace_gtf = false;
    }
    trace_vmx_db_update(v); /* #DB exits no more, unless a frame holds the tracer's TF */
    vcpu_mtf_update(v);
}

/* the instruction at linear lin (all 16 bytes of it on one page) is on a code page of the last
 * notes (the one the last note hit first), under the same CR3: noted already */
static bool on_noted_page(struct trace_vcpu *t, uint64_t cr3, uint64_t lin)
{
    const uint64_t page1 = (lin & ~(CP_PAGE - 1)) + 1;
    if ((lin & (CP_PAGE - 1)) > CP_PAGE - 16)
        return false;
    if (t->noted[t->noted_hit].page1 == page1 && t->noted[t->noted_hit].cr3 == cr3)
        return true;
    for (unsigned i = 0; i < 4; i++)
        if (t->noted[i].page1 == page1 && t->noted[i].cr3 == cr3) {
            t->noted_hit = i;
            return true;
        }
    return false;
}

/* the page of the instruction at linear lin about to run (and the next one, for an instruction
 * that may cross into it: across the top of the linear space, `space`, that is page 0) joins
 * the window's code pages, with the CRC of its bytes now */
static void note_lin(struct vcpu *v, struct trace_vcpu *t, uint64_t cr3, uint64_t lin,
                     uint64_t space, const struct gw_paging *paging)
{
    bool one_page = (lin & (CP_PAGE - 1)) <= CP_PAGE - 16;
    uint64_t page1 = (lin & ~(CP_PAGE - 1)) + 1;
    t->paging = *paging;
    if (on_noted_page(t, cr3, lin))
        return; /* a page of the last steps, in the set already */
    struct range_walk w;
    range_for_each(&w, lin, 16, CP_PAGE, space) /* lib/range.h: never `va <= lin + 15` */
    {
        uint64_t va = w.addr;
        int in_set = cp_note(&t->cp, cr3, va);
        if (in_set >= 0 && one_page) {
            t->noted[t->noted_next].page1 = page1;
            t->noted[t->noted_next].cr3 = cr3;
            t->noted_hit = t->noted_next;
            t->noted_next = (t->noted_next + 1) % 4;
        }
        if (in_set == 1) {
            struct code_store *cs = t->code;
            uint8_t *page = cs->n < CODE_COPIES ? cs->page[cs->n] : cs->scratch;
            uint64_t kcr3, kva;
            cp_key(cr3, va, &kcr3, &kva);
            if (!trace_vmx_code_read(v, cr3, kva, page, CP_PAGE))
                continue;
            cp_set_crc(&t->cp, cr3, va, frame_crc32(0, page, CP_PAGE));
            if (page != cs->scratch) { /* published after its bytes: a dump on another CPU
                                        * reads only whole copies */
                cs->key[cs->n].cr3 = kcr3;
                cs->key[cs->n].va = kva;
                __atomic_store_n(&cs->n, cs->n + 1, __ATOMIC_RELEASE);
            }
        }
    }
}

/* the linear address space code runs in: 32 bits outside 64-bit mode (lib/range.h) */
static uint64_t code_space(const struct swtrace_cpu *c)
{
    return c->ctx.cs == X86_CODE64 ? RANGE_SPACE64 : RANGE_SPACE32;
}

static void note_code(struct vcpu *v, struct trace_vcpu *t, const struct swtrace_cpu *c)
{
    uint64_t space = code_space(c);
    note_lin(v, t, c->ctx.cr3, (c->cs_base + c->rip) & space, space, &c->paging);
}

/* the pages a block runs: those of each straight run's first and last instruction (a run's IPs
 * are the same linear bytes, under 1 KiB: swblock.c) and of its end */
static void note_block(struct vcpu *v, struct trace_vcpu *t, const struct swtrace_cpu *c)
{
    const struct swtrace_block *b = &t->blk;
    const uint64_t space = code_space(c);
    for (unsigned s = 0; s < b->nseg; s++) {
        uint64_t lo = (c->cs_base + b->seg[s].ip) & space,
                 hi = (c->cs_base + (s + 1 < b->nseg ? b->seg[s].jmp : b->end)) & space;
        /* hi on lo's page, 16 bytes from its end, is on it */
        bool hi_on_lo = !((lo ^ hi) & ~(CP_PAGE - 1)) && (hi & (CP_PAGE - 1)) <= CP_PAGE - 16;
        if (!on_noted_page(t, c->ctx.cr3, lo) || (!hi_on_lo && !on_noted_page(t, c->ctx.cr3, hi))) {
            note_lin(v, t, c->ctx.cr3, lo, space, &c->paging);
            note_lin(v, t, c->ctx.cr3, hi, space, &c->paging);
        }
    }
}

/* the window closed at its budget */
static void budget_closed(struct vcpu *v, struct trace_vcpu *t)
{
    trace_stepping_off(v);
    if (!t->budget_logged && ++t->windows <= 8)
        pr_info("trace", "window closed at its budget: %lu instructions, %lu bytes", t->sw.st.steps,
                t->ring.head);
    t->budget_logged = true;
    void (*closed)(struct vcpu *) = t->closed_hook;
    t->closed_hook = NULL;
    if (closed) /* set by whoever opened the window (the boot window: trace_boot.c) */
        closed(v);
}

/* --- free running: no step and no exit outside the window --- */

/*
 * A window with a CR3 filter traces nothing while another CR3 is loaded, at any CPL, and CR3
 * changes only by MOV to CR3 (a task switch, INIT and SIPI exit anyway).  So where the vCPU is
 * about to run under a CR3 the filter leaves out, it runs unstepped -- no MTF, no TF, no block,
 * no exit -- with CR3-load exiting on; at whichever exit comes next the tracer is put where the
 * vCPU is (swtrace_resync: nothing it ran was in the window) and the exit is handled as ever; a
 * MOV to CR3 the VMM completes (exit_cr.c) is then traced as the step it is, and stepping goes
 * on from the first state under the window's CR3.  Not with an instruction budget (it counts
 * every instruction), the guest's own TF kept apart (trap-flag stepping keeps it in the
 * tracer's books), the MTF probe, the guest's own hardware trace on (its PIP at a MOV to CR3
 * the VMM completed would be missing), or trace_free = off.
 */
static bool free_window(const struct vcpu *v, const struct trace_vcpu *t)
{
    return vmm_cfg->trace_free && t->sw.on && !t->sw.budget && !v->mtf_probe && !v->pt.active;
}

static bool free_cr3_window(const struct vcpu *v, const struct trace_vcpu *t)
{
    return free_window(v, t) && t->sw.pt.cfg.filter.cr3_match &&
           (vmx_caps.proc >> 32 & CPU_BASED_CR3_LOAD_EXITING);
}

/*
 * A user-only window (every ptvisor-ctl trace -u window) traces nothing at CPL 0, under any CR3,
 * and the way back to CPL 3 is a fetch of a user-mode page (a page the guest's paging makes
 * user-accessible at every level: CPL 3 cannot fetch any other).  With EPT's mode-based execute
 * control on, the guest's EPT -- X in bit 2, never bit 10 -- lets every supervisor-mode fetch
 * run and makes every user-mode one an EPT violation.  So at CPL 0 the vCPU runs unstepped with
 * the control on: the kernel's work for the traced process (the whole kernel where no KPTI
 * splits the CR3s; the KPTI trampolines where it does), until the return to user mode is caught
 * fetching its first instruction, before it runs: swtrace_resync enters the window there
 * (TIP.PGE), as stepping the kernel's return would.  A user-mode page the kernel itself runs
 * (no SMEP) ends a span too: that instruction is stepped, then the vCPU goes free again.
 * Not where the CPU lacks the control (Skylake client, nested KVM) -- there the kernel is
 * stepped or blocked under the traced CR3 as before.  Code at CPL 1 or 2 is user code to PT's
 * filter but supervisor-mode to EPT: a guest kernel that runs such code while free runs it
 * unseen (Linux never does; ARCHITECTURE section 5).
 */
static bool free_cpl_window(const struct vcpu *v, const struct trace_vcpu *t)
{
    return free_window(v, t) && vmm_cfg->trace_free == PTV_TRACE_FREE_ON &&
           t->sw.pt.cfg.filter.user && !t->sw.pt.cfg.filter.kernel && vmx_have_mbec();
}

bool trace_vmx_free_cpl(const struct vcpu *v)
{
    return v->trace && free_cpl_window(v, v->trace);
}

enum free_kind { FREE_NO, FREE_CR3, FREE_CPL };

static enum free_kind free_kind(const struct vcpu *v, const struct trace_vcpu *t,
                                const struct swtrace_cpu *c)
{
    if (trace_vmx_tf() && v->trace_gtf)
        return FREE_NO;
    if (free_cr3_window(v, t) && swpt_cr3_off(&t->sw.pt, c->ctx.cr3))
        return FREE_CR3;
    /* paging on: with it off every linear address is a user-mode one to the control (SDM Vol. 3C
     * 28.2.1: the exit qualification's bit 9), so every fetch would exit */
    if (c->ctx.cpl == 0 && (c->paging.cr0 & X86_CR0_PG) && !v->trace_cpl_hold &&
        free_cpl_window(v, t))
        return FREE_CPL;
    return FREE_NO;
}

/*
 * In a window with a CR3 filter CR3-load exiting stays on while the vCPU steps too: the way out
 * of the traced process is a MOV to CR3 as well (under KPTI, the kernel's entry switches to its
 * own CR3 first thing), so an interrupt or fault whose handler the trap flag does not step is
 * seen at that exit -- FUP + TIP.PGD where traced code was left, as hardware PT writes them for
 * the event -- and the handler's return at the MOV back, not only at the next VM exit of any
 * kind (ARCHITECTURE section 5).
 */
static void free_exiting(struct vcpu *v, const struct trace_vcpu *t)
{
    vcpu_cr3_exiting(v, free_cr3_window(v, t));
}

/* free, or from one kind of free running to the other */
static void free_enter(struct vcpu *v, struct trace_vcpu *t, enum free_kind k)
{
    if (!v->trace_free) {
        block_disarm(v, t);
        if (trace_vmx_tf())
            trace_tf_write(v, false);
        v->trace_free = true;
        vcpu_mtf_update(v);
    }
    v->trace_free_cpl = k == FREE_CPL;
    free_cpl_controls(v, v->trace_free_cpl);
}

/* stepping again: the guest's TF as running free left it (trace_tf_after_free) */
static void free_leave(struct vcpu *v, const struct swtrace_cpu *c)
{
    bool from_cpl0 = v->trace_free_cpl;
    free_off(v);
    if (trace_vmx_tf())
        v->trace_gtf = trace_tf_after_free(v, c, from_cpl0);
    vcpu_mtf_update(v);
}

void trace_vmx_free_exit(struct vcpu *v, uint32_t reason)
{
    struct trace_vcpu *t = v->trace;
    struct gw_mem m = step_mem(v);
    struct swtrace_cpu c;
    trace_observe(&c);
    /* a user-mode fetch refused by the mode-based control alone (executable for supervisor-mode
     * addresses, not for user-mode ones): the guest retries it once stepping (an instruction the
     * kernel runs from a user-mode page: stepped once, then free again); or the #PF of a user
     * fetch (free_cpl_controls).  Either is the way back into the window, caught before its first
     * instruction there, at CPL 3: a fetch at CPL 1 or 2 may follow code that ran unseen
     * (supervisor-mode fetches), judged as an unexplained step instead */
    bool fetch = false, fault = false;
    if (v->trace_free_cpl && reason == EXIT_REASON_EPT_VIOLATION) {
        uint64_t q = vmcs_readl(EXIT_QUALIFICATION);
        fetch = (q & (EPT_VIOLATION_ACC_INSTR | EPT_VIOLATION_X_SUPER | EPT_VIOLATION_X_USER)) ==
                (EPT_VIOLATION_ACC_INSTR | EPT_VIOLATION_X_SUPER);
    } else if (v->trace_free_cpl && reason == EXIT_REASON_EXCEPTION_NMI) {
        uint32_t info = vmcs_read32(VM_EXIT_INTR_INFO);
        fault = (info & (INTR_INFO_VALID | INTR_INFO_INTR_TYPE_MASK | 0xff)) ==
                    (INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | PF_VECTOR) &&
                (vmcs_read32(VM_EXIT_INTR_ERROR_CODE) & PFEC_USER_FETCH) == PFEC_USER_FETCH;
    }
    swtrace_resync(&t->sw, &m, &c, (fetch || fault) && c.ctx.cpl == 3);
    if (fetch) {
        v->trace_cpl_fetch = true;
        v->trace_cpl_hold = c.ctx.cpl == 0;
    }
}

bool trace_vmx_free_fetch(struct vcpu *v)
{
    bool mine = v->trace_cpl_fetch;
    v->trace_cpl_fetch = false;
    return mine;
}

/* what ran since the last look goes into the trace; the vCPU is then armed for the next step */
static void step(struct vcpu *v, struct trace_vcpu *t, bool mtf)
{
    struct gw_mem m = step_mem(v);
    struct swtrace_cpu c;

    trace_observe(&c);
    bool tf_step = v->trace_tf_step;
    v->trace_tf_step = false;
    if (v->trace_free)
        mtf = false; /* an MTF exit while free is an owed NMI's (vcpu_loop.c), no step of ours */
    if (t->pending_start) {
        t->pending_start = false;
        swtrace_start(&t->sw, &t->cfg, &t->ring, &m, &c, t->budget);
        note_code(v, t, &c); /* the page the window opens on, traced or not */
        if (trace_vmx_tf())  /* the guest's own TF, kept apart from the tracer's */
            v->trace_gtf = vmcs_readl(GUEST_RFLAGS) & RFLAGS_TF;
        free_exiting(v, t);
        enum free_kind k = free_kind(v, t, &c);
        if (k != FREE_NO)
            free_enter(v, t, k);
        else
            trace_tf_arm(v);
        return;
    }
    const struct x86_insn prev = t->sw.insn;
    const bool prev_valid = t->sw.valid;
    const uint64_t prev_ip = t->sw.ip, prev_rsp = t->sw.rsp;
    const unsigned prev_cpl = t->sw.ctx.cpl;
    const uint64_t prev_cr3 = t->sw.ctx.cr3;
    const uint16_t prev_cs = t->sw.cs_sel;
    const uint64_t done = t->sw.st.steps + t->sw.st.rep_iters;
    bool on = swtrace_observe(&t->sw, &m, &c, mtf);
    if (tf_step) /* did an instruction (or a REP iteration) complete: the steps moved */
        trace_tf_after_step(v, t, &prev, prev_valid, prev_ip, prev_rsp, prev_cpl, prev_cr3, prev_cs,
                            &c, t->sw.st.steps + t->sw.st.rep_iters != done);
    if (!on) {
        budget_closed(v, t);
        return;
    }
    free_exiting(v, t); /* the guest's own PT may have come or gone */
    enum free_kind k = free_kind(v, t, &c);
    v->trace_cpl_hold = false; /* its one step is this one */
    if (k != FREE_NO) {
        free_enter(v, t, k);
        return;
    }
    if (v->trace_free)
        free_leave(v, &c);
    if (t->sw.pt.pkt_en) /* only pages the trace will need to be decoded */
        note_code(v, t, &c);
    if (block_entry_ok(v, t) && swtrace_block_plan(&t->sw, &m, &c, &t->blk)) {
        if (t->sw.pt.pkt_en)
            note_block(v, t, &c);
        t->blk_cpu = c;
        block_arm(v, t);
        return;
    }
    block_disarm(v, t);
    trace_tf_arm(v);
}

void trace_vmx_before_entry(struct vcpu *v)
{
    bool mtf = v->trace_mtf_seen;
    v->trace_mtf_seen = false;
    step(v, v->trace, mtf);
}

/*
 * The single-step fast path (sw_trace = tf): vmx_run calls it at an exception exit while the
 * tracer steps (the caller checks v->trace_stepping), before decoding the exit any further.  A
 * single step of the tracer's own trap flag (trace_vmx_db_exit's test, no NMI-unblocking bit, no
 * event being delivered: db_exit_plain_step) is traced here at once, as trace_vmx_before_entry
 * would have traced it after the exit handler noted it -- that handler does nothing else with it --
 * and the exit needs nothing more: true.  false: nothing was changed, the exit goes the whole way.
 */
bool trace_vmx_step_exit(struct vcpu *v, uint32_t intr_info)
{
    struct trace_vcpu *t = v->trace;
    if (!v->trace_tf_used || v->trace_free || v->mtf_probe || v->trace_mtf_seen ||
        t->pending_start || !trace_vmx_tf() ||
        !db_exit_plain_step(intr_info, vmcs_readl(EXIT_QUALIFICATION),
                            vmcs_read32(IDT_VECTORING_INFO_FIELD)))
        return false;
    step(v, t, true);
    return true;
}

/*
 * The MTF fast path (stepping with the monitor trap flag): vmx_run calls it at an MTF exit while
 * the tracer steps.  The step is traced here at once, as trace_vmx_before_entry would trace it
 * after handle_mtf noted it -- that handler does nothing else -- and the exit needs nothing more:
 * true.  false: nothing was changed, the exit goes the whole way (the MTF probe, a window about to
 * open, trap-flag stepping).  An NMI owed meanwhile is decided at the entry as after any exit.
 */
bool trace_vmx_mtf_exit(struct vcpu *v)
{
    struct trace_vcpu *t = v->trace;
    if (v->trace_free || v->mtf_probe || v->trace_mtf_seen || t->pending_start || trace_vmx_tf())
        return false;
    step(v, t, true);
    return true;
}

/*
 * An exit while a block is out (vmx_run, before the exit is decoded further): what the vCPU ran
 * of it goes into the trace (swtrace_block_settle), then blk_exit_action (emul_policy.c) says
 * what the exit is.  At the block's breakpoint the next block goes out at once, led by the
 * branch there where swtrace_block_next can predict it, else the branch is stepped with TF.
 */
int trace_vmx_block_exit(struct vcpu *v, uint32_t reason, uint32_t intr_info)
{
    struct trace_vcpu *t = v->trace;
    struct gw_mem m = step_mem(v);
    struct swtrace_cpu c;
    uint32_t idt = reason == EXIT_REASON_EXCEPTION_NMI ? vmcs_read32(IDT_VECTORING_INFO_FIELD) : 0;
    enum blk_action a = blk_exit_action(
        reason, intr_info, reason == EXIT_REASON_EXCEPTION_NMI ? vmcs_readl(EXIT_QUALIFICATION) : 0,
        idt, t->blk_exc);
    if (a == BLK_BREAKPOINT && vmcs_read16(GUEST_CS_SELECTOR) == t->blk_cpu.cs_sel &&
        vmcs_readl(GUEST_CR3) == t->blk_cpu.ctx.cr3 &&
        ((vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3) == t->blk_cpu.ctx.cpl) {
        /* the vCPU ran plain instructions and direct jumps only since the block went out (no
         * MOV CR, no event: swtrace.h): beyond RIP and RSP it is where it was then, unless code
         * changed under the block took it elsewhere -- the selector, CR3 and CPL say so, and
         * then it is observed in full (settle finds it off the block) */
        c = t->blk_cpu;
        c.rip = vmcs_readl(GUEST_RIP);
        c.rsp = vmcs_readl(GUEST_RSP);
        c.tsc = rdtsc();
    } else
        trace_observe(&c);
    c.rf = block_rf_exit(t, c.rip, a == BLK_BREAKPOINT);
    int s = swtrace_block_settle(&t->sw, &m, &c, &t->blk);
    if (a == BLK_BREAKPOINT && s == SWTRACE_SETTLED && c.rip == t->blk.end) {
        struct swtrace_regs r = {.rflags = vmcs_readl(GUEST_RFLAGS), .gpr = v->regs.gpr};
        if ((r.rflags & RFLAGS_IF) && swtrace_block_next(&t->sw, &m, &c, &r, &t->blk)) {
            if (t->sw.pt.pkt_en && !t->blk.noted) {
                note_block(v, t, &c);
                swtrace_block_noted(&t->sw, c.ctx.cr3);
            }
            block_arm(v, t); /* out already: DR0 moves to the new end */
            return 1;
        }
        block_disarm(v, t);
        trace_tf_arm(v); /* the branch at the end is stepped */
        return 1;
    }
    block_disarm(v, t);
    if (s == SWTRACE_CLOSED)
        budget_closed(v, t);
    if (a == BLK_DISPATCH)
        return -1;
    /* the breakpoint where the vCPU was not on the block (never seen), an interrupt, a fault:
     * the next entry steps one instruction, the tracer judges it */
    t->blk_cool = true;
    return 0;
}

void trace_vmx_block_cancel(struct vcpu *v)
{
    block_disarm(v, v->trace);
    trace_tf_arm(v);
}
