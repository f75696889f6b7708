/* SPDX-License-Identifier: MIT */
/*
 * The architectural rules the VMM applies when it emulates guest CPU state:
 * retiring an instruction it ran on the guest's behalf, MOV to CR0/CR4,
 * exception injection, IA32_APIC_BASE, the MTRRs and NMIs that hit VMX root.
 * Pure functions of guest-controlled values: the exit handlers (exit_*.c) feed
 * them decoded state; host tests (tests/unit/emul/test_emul_policy.c) and a fuzzer
 * (tests/fuzz/fuzz_emul_policy.c) call them directly.  A "check" returns NULL
 * when the hardware would accept the value, else the reason for the #GP(0).
 */
#ifndef PTV_VMX_EMUL_POLICY_H
#define PTV_VMX_EMUL_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include "hw/vmx.h" /* GUEST_INTR_STATE_*, GUEST_ACTIVITY_* */

/* ---- retiring an emulated instruction (SDM Vol. 3C 27.3.1.5/25.4.2, Vol. 3A 17.3.1.1) ---- */
#define RFLAGS_TF      (1ull << 8)
#define RFLAGS_IF      (1ull << 9)
#define RFLAGS_RF      (1ull << 16)
#define PENDING_DBG_BS (1ull << 14)
#define DEBUGCTL_BTF   (1ull << 1) /* IA32_DEBUGCTL: single-step on branches */

struct retire_state {
    uint64_t rip, rflags, pending_dbg;
    uint64_t debugctl; /* IA32_DEBUGCTL in effect for the guest (only BTF is read) */
    uint32_t intr;     /* guest interruptibility state (GUEST_INTR_STATE_*) */
};
/*
 * The instruction at s->rip (len bytes) completed: RIP moves past it and wraps
 * at 4 GiB outside 64-bit mode (code64 = IA-32e mode and CS.L), RF is cleared,
 * a single-step trap is pending if TF was set and DEBUGCTL.BTF was not (the #DB
 * the instruction owes), and STI / MOV SS blocking ends.  The instruction is
 * one the VMM emulates (CPUID, RDMSR, WRMSR, VMCALL, XSETBV, I/O, MOV CR...):
 * never a branch, so with BTF = 1 it owes no single-step trap (SDM Vol. 3B
 * 18.4.3 / 17.4.3 by edition, "Single-Stepping on Branches": with BTF and TF
 * set, the #DB comes only after instructions that cause a branch).
 */
/* inline: it runs on every exit that completes an instruction (vcpu_loop.c) */
static inline void insn_retire(struct retire_state *s, unsigned len, bool code64)
{
    uint64_t rip = s->rip + len;
    /* outside 64-bit mode EIP is 32 bits wide: bits 63:32 of RIP are 0 (SDM Vol. 3C
     * 27.3.1.5, "RIP" guest-state check); the instruction after one that ends at
     * 4 GiB - 1 starts at EIP 0 */
    s->rip = code64 ? rip : (uint32_t)rip;
    /* a completed instruction clears RF (SDM Vol. 3A 17.3.1.1) ... */
    /* ... and owes the single-step trap if TF was set when it began (17.3.1.4), unless
     * DEBUGCTL.BTF turns single-step into step-on-branch: it is no branch (18.4.3) */
    if ((s->rflags & RFLAGS_TF) && !(s->debugctl & DEBUGCTL_BTF))
        s->pending_dbg |= PENDING_DBG_BS;
    s->rflags &= ~RFLAGS_RF;
    /* the STI / MOV SS shadow covered exactly this instruction (Vol. 3C 25.4.2) */
    s->intr &= ~(GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS);
}
/*
 * Whether insn_retire's RIP for an instruction at rip (len bytes) depends on code64 at all:
 * only where it ends at or past 4 GiB from below (the 4 GiB wrap).  Elsewhere the mode follows
 * from RIP: bits 63:32 are 0 outside 64-bit mode (SDM Vol. 3C 27.3.1.5; a VM exit saves RIP as
 * it was), so insn_retire_code64(rip) gives the same answer as the VMCS's IA-32e mode and CS.L.
 * The exit path asks the VMCS (two VMREADs) only when this is true.
 */
static inline bool insn_retire_mode_matters(uint64_t rip, unsigned len)
{
    return rip <= 0xffffffffull && rip + len > 0xffffffffull;
}
static inline bool insn_retire_code64(uint64_t rip)
{
    return rip > 0xffffffffull;
}

/* fault-class exceptions push RFLAGS.RF = 1 (SDM Vol. 3A 17.3.1.1, table 6-1) */
bool exception_is_fault(unsigned vector);

/* ---- MOV to CR0 / CR4 (SDM Vol. 3A 2.5, Vol. 2B "MOV--Move to/from Control Registers") ---- */
#define CR0_PE (1ull << 0)
#define CR0_ET (1ull << 4)
#define CR0_NE (1ull << 5)
#define CR0_WP (1ull << 16)
#define CR0_NW (1ull << 29)
#define CR0_CD (1ull << 30)
#define CR0_PG (1ull << 31)
/* the bits of CR0[31:0] the architecture defines; the rest are ignored on write */
#define CR0_DEFINED 0xe005003full
#define CR4_PSE     (1ull << 4)
#define CR4_PAE     (1ull << 5)
#define CR4_PGE     (1ull << 7)
#define CR4_VMXE    (1ull << 13)
#define CR4_PCIDE   (1ull << 17)
#define CR4_SMEP    (1ull << 20)
#define CR4_CET     (1ull << 23)
#define CR4_LA57    (1ull << 12)
#define EFER_LME_   (1ull << 8)
#define EFER_LMA_   (1ull << 10)

/* TR's type, access rights bits 3:0: 1 / 3 a 16-bit TSS, 9 / 11 a 32-bit or 64-bit one (SDM
 * Vol. 3A table 3-2); types below 8 are no TSS IA-32e mode can use */
#define AR_TYPE_TSS32 (1u << 3)

struct cr_ctx {
    uint64_t cr0, cr3, cr4, efer; /* as the guest sees them before the write */
    bool code64;                  /* IA-32e mode and CS.L */
    uint64_t cr4_supported;       /* CR4 bits this CPU has for the guest (VMXE excluded) */
    uint32_t cs_ar, tr_ar;        /* CS and TR access rights, VMCS format (VMX_AR_L: CS.L) */
    bool lam; /* CPUID.(7,1):EAX[26] as the guest sees it: CR3 bits 61-62 (LAM_U57, LAM_U48) */
};
/* *val: in, the value written; out, as CR0 then reads (ET set, undefined low bits clear) */
const char *cr0_write_check(const struct cr_ctx *c, uint64_t *val);
const char *cr4_write_check(const struct cr_ctx *c, uint64_t val);
/* after the write (new cr0/cr4), PAE paging outside IA-32e mode needs its four PDPTEs
 * loaded from CR3 (SDM Vol. 3A 4.4.1: MOV to CR0/CR4 changing PG, CD, NW, PAE, PGE, PSE,
 * SMEP) */
bool cr_write_loads_pdptes(const struct cr_ctx *c, uint64_t new_cr0, uint64_t new_cr4);
/*
 * MOV to CR3 (SDM Vol. 2B "MOV--Move to/from Control Registers", Vol. 3A 4.5, 4.10.4.1), as the
 * VMM completes it while CR3-load exiting is on (the software tracer's free running, vmx/
 * trace_step.c): the operand is 64 bits in 64-bit mode, else 32 (compatibility mode clears
 * CR3[63:32]); with CR4.PCIDE bit 63 asks not to flush and is not stored; bits from MAXPHYADDR
 * up are reserved (#GP), but for LAM_U57 and LAM_U48 (bits 61, 62) where the CPU has LAM.  *out:
 * the new CR3, whether the TLBs of the new PCID (of all, without PCIDs) lose their non-global
 * entries, and whether PAE paging outside IA-32e mode loads the four PDPTEs from it (which
 * pdptes_check then judges).  NULL, or why the MOV #GPs.
 */
struct cr3_write {
    uint64_t cr3;
    bool flush;
    bool pdptes;
};
const char *cr3_write_check(const struct cr_ctx *c, uint64_t val, unsigned maxphyaddr,
                            struct cr3_write *out);
/* present PDPTEs with reserved bits #GP the MOV (SDM Vol. 3A 4.4.1, table 4-8) */
const char *pdptes_check(const uint64_t pdpte[4], unsigned maxphyaddr);

/* ---- IA32_APIC_BASE (SDM Vol. 3A 11.4.4, 11.12.5 state transitions) ---- */
#define APIC_BASE_BSP  (1ull << 8)
#define APIC_BASE_EXTD (1ull << 10)
#define APIC_BASE_EN   (1ull << 11)
const char *apic_base_check(uint64_t old, uint64_t val, unsigned maxphyaddr, bool has_x2apic);
static inline uint64_t apic_base_addr(uint64_t v)
{
    return v & ~0xfffull & ((1ull << 52) - 1);
}
/*
 * What a guest RDMSR of IA32_APIC_BASE returns: the CPU's value, read after the guest's last
 * write (BSP, EN, EXTD as the CPU holds them: where it ignored part of a write -- a CPU may
 * keep an APIC disabled until reset, SDM Vol. 3A 11.4.3, as Bochs does -- the guest sees that),
 * with the base address of the guest's own window: the real APIC never moves (exit_msr.c).
 */
static inline uint64_t apic_base_guest_view(uint64_t cpu, uint64_t window)
{
    return (cpu & ~apic_base_addr(~0ull)) | apic_base_addr(window);
}

/* ---- MTRRs (SDM Vol. 3A 12.11) ---- */
#define MSR_MTRR_CAP       0xfe
#define MSR_MTRR_DEF_TYPE  0x2ff
#define MSR_MTRR_PHYS_BASE 0x200 /* + 2n; PHYS_MASK = + 2n + 1 */
bool mtrr_is_msr(uint32_t msr);
/* the guest's MTRR copy (everything but MTRRCAP): one slot per MSR */
#define MTRR_SLOTS (1 + 11 + 32) /* DEF_TYPE, the fixed ranges, 16 variable pairs */
/* msr is an MTRR this CPU has (mtrrcap as the guest sees it), other than MTRRCAP; its
 * slot in the copy in *slot */
bool mtrr_exists(uint32_t msr, uint64_t mtrrcap, unsigned *slot);
/* msr in mtrr_is_msr(); mtrrcap = IA32_MTRRCAP as the guest sees it */
const char *mtrr_write_check(uint32_t msr, uint64_t val, uint64_t mtrrcap, unsigned maxphyaddr);

/* ---- the software tracer's trap-flag steps (trace/shim/trace_step.c) ---- */
/* a #DB exit's qualification (DR6 format, SDM Vol. 3C 28.2.1 table 28-1) says a single step
 * alone: BS set, no B0-B3 or BD (a breakpoint in the same exit is the guest's to see) */
bool db_qual_single_step(uint64_t qual);
/* the step the exit loop may trace without the exit handler: interruption info exactly a
 * hardware #DB (no NMI-unblocking bit to act on), a single step alone, and no event being
 * delivered (IDT-vectoring info invalid: nothing to deliver again) */
bool db_exit_plain_step(uint32_t intr_info, uint64_t qual, uint32_t idt_vec_info);
/* a #DB exit with the single-step bit while the trap flag is the tracer's (it steps with TF, or
 * a TF it left in a frame came back): BS is the tracer's own; B0-B3 and BD with it are the
 * guest's breakpoints, which the same instruction hit and one #DB reports together (SDM Vol. 3B
 * 18.2.3).  The qualification left for the guest: BS dropped, or 0 when nothing is its */
uint64_t db_qual_guest_part(uint64_t qual);
/* DR6 as the guest must see it when a #DB that VM-exited is delivered to it: a #DB exit leaves
 * DR6 unchanged and puts the bits the CPU would have set into the exit qualification (SDM Vol.
 * 3C 27.1 and 28.2.1 table 28-1); delivering the #DB sets them as the CPU does (B0-B3 replaced,
 * BD and BS set, the rest kept, SDM Vol. 3B 18.2.3) */
uint64_t db_dr6_deliver(uint64_t dr6, uint64_t qual);
/* A #PF that VM-exited (exception bitmap) has not written CR2 (SDM Vol. 3C 27.1): the one the
 * VMM reflects must find the faulting linear address there, which the exit qualification holds
 * (SDM Vol. 3C 28.2.1).  true with *cr2 to write for a hardware #PF exit; false otherwise. */
bool pf_reflect_cr2(uint32_t intr_info, uint64_t qual, uint64_t *cr2);

/*
 * Block stepping (vmm/trace/swtrace.h): while a block is out, every exception is intercepted and
 * every external interrupt exits, so the vCPU ran exactly the block's instructions before the
 * exit's RIP.  What an exit then is:
 *   BLK_BREAKPOINT  the block's own instruction breakpoint (a hardware #DB fault with B0, no BD
 *                   or BS, no event being delivered): the tracer goes on from there;
 *   BLK_REENTER     an external interrupt, or a fault the VMM does not otherwise intercept
 *                   (not in `own_exc`, the exception bitmap without blocks) with no event being
 *                   delivered: nothing to handle -- entered again without the block, the
 *                   interrupt is taken or the instruction faults again, as without the VMM;
 *   BLK_DISPATCH    anything else: the exit handler's, as without blocks.
 */
enum blk_action { BLK_BREAKPOINT, BLK_REENTER, BLK_DISPATCH };
/* may a block go out in this guest state: interruptible (an interrupt then exits and the next
 * entry delivers it), in no STI / MOV SS shadow, active, and its own breakpoints off (the
 * block takes DR0; MOV DR ends blocks, so the guest cannot turn them on inside one) */
bool blk_entry_allowed(uint64_t rflags, uint32_t interruptibility, uint32_t activity, uint64_t dr7);
/* the DR7 a block enters with: the guest's, with an instruction breakpoint at DR0 (L0, R/W0
 * and LEN0 = 00, SDM Vol. 3B 18.2.4) */
uint64_t blk_dr7(uint64_t guest_dr7);
enum blk_action blk_exit_action(uint32_t reason, uint32_t intr_info, uint64_t qual,
                                uint32_t idt_vec_info, uint32_t own_exc);
/* a block whose lead is its own breakpoint went out with RFLAGS.RF set (swtrace_block.lead_rf):
 * at an exit that is not that breakpoint, with RIP on the lead, RF still set says the lead did
 * not complete (SDM Vol. 3B 17.3.1.1: the CPU clears RF as the lead starts; a fault in it and
 * an event before it save RF set, Vol. 3C 27.3.3) */
bool blk_lead_pending(bool breakpoint, uint64_t rip, uint64_t lead_ip, uint64_t rflags);

/*
 * The state a trap-flag step enters with (sw_trace = tf; the caller has cleared DEBUGCTL.BTF):
 * TF set, and the single-step trap an exit left pending dropped -- the tracer counts that step
 * itself (an emulated instruction; a #DB exit it took).  Where VM entry needs the trap pending
 * (SDM Vol. 3C 27.3.1.5: with blocking by STI or MOV SS, or HLT, BS = 1 exactly when TF = 1
 * and BTF = 0), it is kept for MOV SS blocking and HLT: the CPU delivers it after the
 * next instruction, or when the halt ends, as it would without the VMM.  Blocking by STI is
 * ended instead: it can only be left by the step's #DB (STI ran with TF = 1), which the tracer
 * took -- a #DB delivered to the guest ends the shadow too -- and a pending trap would be
 * delivered at once, before any instruction, step after step (XSA-308 is this entry failure).
 */
struct tf_step_state {
    uint64_t rflags, pending_dbg;
    uint32_t intr, activity;
};
/* inline: it runs at every step */
static inline void tf_step_arm(struct tf_step_state *s)
{
    s->rflags |= RFLAGS_TF;
    s->intr &= ~GUEST_INTR_STATE_STI;
    if (s->intr & GUEST_INTR_STATE_MOV_SS || s->activity == GUEST_ACTIVITY_HLT)
        s->pending_dbg |= PENDING_DBG_BS;
    else
        s->pending_dbg &= ~PENDING_DBG_BS;
}

/* stepping ends (or a TF the guest never set is cleared): TF off, and no single-step trap left
 * pending -- it could only be that TF's (an exit can save it: an emulated or exiting instruction
 * retired with TF = 1), and with #DB no longer intercepted it would reach the guest; VM entry
 * allows BS = 0 with TF = 0 in every state (27.3.1.5, above) */
static inline void tf_step_disarm(struct tf_step_state *s)
{
    s->rflags &= ~RFLAGS_TF;
    s->pending_dbg &= ~PENDING_DBG_BS;
}

/* a window closes with the guest's own TF set (trace_step.c keeps it apart while the tracer
 * steps): TF back on, with the single-step trap VM entry wants pending where blocking by STI or
 * MOV SS or HLT is saved and DEBUGCTL.BTF is 0 (27.3.1.5, above) -- the trap the guest's TF
 * owes comes then, as it would have on bare metal after the blocking instruction */
static inline void tf_guest_restore(struct tf_step_state *s, bool btf)
{
    s->rflags |= RFLAGS_TF;
    /* with DEBUGCTL.BTF the trap flag steps on branches: entry then wants BS = 0 */
    if (!btf && (s->intr & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS) ||
                 s->activity == GUEST_ACTIVITY_HLT))
        s->pending_dbg |= PENDING_DBG_BS;
}

/* ---- an NMI that hit VMX root, owed to the guest ---- */
enum nmi_action {
    NMI_NONE,      /* nothing pending */
    NMI_INJECT,    /* inject it at this entry */
    NMI_WAIT,      /* blocked now: come back when the NMI window opens (NMI-window exiting), or
                    * without it after the next guest instruction (MTF) */
    NMI_LATER,     /* held (wait-for-SIPI, shutdown), or behind another event without an NMI
                    * window: decide at the next entry */
    NMI_WAIT_STEP, /* blocked by STI alone: come back after the next instruction (MTF; the
                    * NMI window where the CPU has no MTF) */
};
/* window: the VMM can arm NMI-window exiting (primary control 22, with virtual NMIs) */
enum nmi_action nmi_owed_action(bool pending, bool event_queued, uint32_t activity, uint32_t intr,
                                bool window);

#endif
