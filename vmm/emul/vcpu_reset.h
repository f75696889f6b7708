/* SPDX-License-Identifier: MIT */
/*
 * The architectural INIT / SIPI state of a vCPU and what the VMM does with an
 * INIT or SIPI exit.  Pure: no VMCS, no MSR, no globals; the same file
 * runs in vmm.elf and in tests/unit/emul/test_vcpu_reset.c.  vmm/vcpu/exit/exit_fault.c
 * writes a struct vreset_state into the VMCS (the field list is in the comment
 * of vreset_state() below).
 *
 * Decisions, with their sources:
 *  - INIT to the BSP restarts it at the reset vector, active; INIT to an AP puts
 *    it in wait-for-SIPI with the same register state (SDM Vol. 3A "Local APIC
 *    State After an INIT Reset ('Wait-for-SIPI' State)" (10.4.7.3 / 11.4.7.3 by
 *    edition); KVM kvm_apic_accept_events(): the BSP never waits for SIPI).
 *  - INIT is blocked in wait-for-SIPI: "If a logical processor is in the
 *    wait-for-SIPI state, INIT signals are blocked. They do not cause VM exits"
 *    (Vol. 3C 26.2 "Other Causes of VM Exits", 25.2 in older editions; the
 *    activity-state blocking list of "Special Features of VM Entry": wait-for-
 *    SIPI blocks external interrupts, NMIs, INIT signals and SMIs).  Such an exit cannot happen; if
 * one is ever seen the VMM does nothing (the vCPU already holds the post-INIT state and waits), as
 * KVM's vmx_check_nested_events() drops an INIT in INIT_RECEIVED. INIT in the HLT or shutdown state
 * does cause the exit and is performed.
 *  - A SIPI exit happens only in wait-for-SIPI: "If a logical processor is not in
 *    the wait-for-SIPI activity state when a SIPI arrives, no VM exit occurs and
 *    the SIPI is discarded" (same section).  An exit seen in any other state is
 *    discarded likewise; so is a second SIPI to a running AP (it never exits).
 *  - SIPI vectors A0h-BFh are "reserved; do not use" (MP Spec 1.4 B.4.2, SDM
 *    Vol. 3A MP initialization).  Nothing says what the CPU does with one, and
 *    the APIC delivers it: the vCPU starts at vector << 12 like any other (KVM
 *    does the same).  EPT decides what is mapped there, not the vector.
 */
#ifndef PTV_VMX_VCPU_RESET_H
#define PTV_VMX_VCPU_RESET_H

#include <stdbool.h>
#include <stdint.h>
#include "hw/vmx.h"           /* GUEST_ACTIVITY_* */
#include "emul/guest_check.h" /* struct vmx_seg */

struct vreset_state {
    uint64_t gpr[16]; /* encoding order RAX..R15 as vmm/vmx/vcpu.h enum GPR_*; RSP slot = rsp */
    uint64_t rip, rflags, cr0, cr3, cr4, efer, dr7;
    struct vmx_seg es, cs, ss, ds, fs, gs, ldtr, tr;
    uint64_t gdtr_base, idtr_base;
    uint32_t gdtr_limit, idtr_limit;
    uint32_t activity; /* GUEST_ACTIVITY_* from vmm/hw/vmx.h */
    /* VMCS non-register state INIT clears (always 0 here; written so that no
     * blocking or debug trap survives the INIT) */
    uint32_t interruptibility; /* GUEST_INTERRUPTIBILITY_INFO */
    uint64_t pending_dbg;      /* GUEST_PENDING_DBG_EXCEPTIONS */
    /* Table 9-1 registers that are not VMCS fields: the VMM loads them with MOV
     * on the vCPU's own CPU before VM entry (nothing else uses them there) */
    uint64_t cr2, dr[4], dr6;
};

enum vreset_kind { VRESET_INIT_BSP, VRESET_INIT_AP, VRESET_SIPI };

#define VRESET_CR0_ET   (1ull << 4)
#define VRESET_CR0_NW   (1ull << 29)
#define VRESET_CR0_CD   (1ull << 30)
#define VRESET_CR0_INIT (VRESET_CR0_CD | VRESET_CR0_NW | VRESET_CR0_ET) /* 0x60000010 */

/*
 * The architectural state after INIT (SDM Vol. 3A 9.1.1, Table 9-1): for
 * VRESET_INIT_BSP at the reset vector (CS F000 / base FFFF0000, IP FFF0),
 * active; for VRESET_INIT_AP the same registers in wait-for-SIPI (Vol. 3C 25.4.2
 * activity states, 24.4.2 in older editions); for VRESET_SIPI the INIT state with CS.sel = vector
 * << 8, CS.base = vector << 12, IP = 0, active (Vol. 3A MP initialization; MP Spec B.4.2 "the
 * effect is to set CS:IP to VV00:0000h").  sipi_vector is used only for VRESET_SIPI.
 *
 * cpuid1_eax: the processor signature the guest reads in CPUID.1:EAX; INIT puts
 * it in EDX (Table 9-1, "EDX 000n06xxH": family/model/stepping).
 * old_cr0: the guest's CR0 before the INIT (as the guest reads it: GUEST_CR0
 * outside the guest/host mask, the read shadow inside).  INIT keeps CD and NW
 * (Table 9-1 note 2: CD and NW unchanged, ET set, all other bits clear; KVM
 * kvm_vcpu_reset(): "CR0.CD/NW are set on RESET, preserved on INIT"); 0x60000010 is
 * the power-up value, not the INIT one.  For VRESET_SIPI pass the CR0 of the
 * waiting vCPU (its INIT CR0): the result is then equal to patching CS, RIP and
 * activity onto the wait-for-SIPI state, which is all a SIPI changes.
 *
 * The result is in guest terms: cr0/cr4 are what the guest reads.  Applying it
 * (vmm/vcpu/exit/exit_fault.c):
 *   GPRs into vcpu->regs (RSP slot ignored), GUEST_RSP = gpr[GPR_RSP];
 *   GUEST_RIP, GUEST_RFLAGS, GUEST_DR7 (VM_ENTRY_LOAD_DEBUG_CONTROLS is on);
 *   CR0_READ_SHADOW = cr0, GUEST_CR0 = (cr0 | fixed0 without PE/PG) & fixed1
 *   (v->cr0_fixed0 / v->cr0_fixed1); CR4_READ_SHADOW = cr4, GUEST_CR4 =
 *   (cr4 | cr4_fixed0) & cr4_fixed1; GUEST_CR3; GUEST_IA32_EFER = efer and
 *   VM_ENTRY_CONTROLS without VM_ENTRY_IA32E_MODE (the entry check demands
 *   "IA-32e mode guest" = EFER.LMA = 0);
 *   the eight segments (selector, base, limit, AR bytes), GDTR/IDTR base+limit;
 *   GUEST_ACTIVITY_STATE = activity, GUEST_INTERRUPTIBILITY_INFO =
 *   interruptibility, GUEST_PENDING_DBG_EXCEPTIONS = pending_dbg;
 *   VM_ENTRY_INTR_INFO_FIELD = 0 (no event may be injected into wait-for-SIPI,
 *   Vol. 3C 27.3.1.5, and INIT discards a pending one);
 *   CR2, DR0-DR3, DR6 by MOV; INVEPT/INVVPID for the guest TLB (INIT flushes
 *   the TLBs, Vol. 3A 9.1).
 * Not part of this state and kept by INIT (Vol. 3A 9.1: "the internal caches,
 * MSRs, MTRRs, and x87 FPU state are left unchanged"): x87/SSE/AVX state, XCR0,
 * PAT, MTRRs, APIC base (BSP flag included).  EFER is the exception: 0 here as
 * KVM and Xen do (real mode forces LMA = 0; LME/SCE/NXE cleared with it).
 * IA32_DEBUGCTL and the LBR state (IA32_LBR_CTL, IA32_LBR_DEPTH, LBR_SELECT, the
 * stack) are MSRs too: Table 9-1, "All Other MSRs": INIT "Unchanged".  The arch-LBR
 * chapter clears IA32_LBR_CTL.LBREn on a warm reset (RESET# with power on) and
 * resets every LBR MSR on a warm reset taken in C6 ("warm init"); neither is an
 * INIT, so GUEST_IA32_LBR_CTL is left as it is (a KVM review reached the same
 * reading: LBR_CTL behaves as DEBUGCTL, which INIT preserves).  Deviation:
 * vmm/vcpu/exit/exit_fault.c vcpu_init_event() clears GUEST_IA32_DEBUGCTL on INIT
 * (KVM clears it on RESET only).
 */
void vreset_state(struct vreset_state *s, enum vreset_kind kind, uint8_t sipi_vector,
                  uint32_t cpuid1_eax, uint64_t old_cr0);

/* What the VMM does with an INIT / SIPI exit given the vCPU's activity state
 * (GUEST_ACTIVITY_STATE as saved by the exit) and role. */
enum vreset_action {
    VRESET_DO_NOTHING,   /* resume unchanged: the event is blocked / discarded here */
    VRESET_RESET_VECTOR, /* vreset_state(VRESET_INIT_BSP): restart at the reset vector */
    VRESET_WAIT_SIPI,    /* vreset_state(VRESET_INIT_AP): INIT state, wait-for-SIPI */
    VRESET_START,        /* vreset_state(VRESET_SIPI, vector): real mode at vector << 12 */
};

/* INIT: blocked in wait-for-SIPI (nothing to do); otherwise (active, HLT,
 * shutdown) the BSP restarts at the reset vector and an AP waits for SIPI. */
enum vreset_action vreset_on_init(bool is_bsp, uint32_t activity);
/* SIPI: starts a vCPU in wait-for-SIPI at any vector (reserved ones included);
 * discarded in every other state. */
enum vreset_action vreset_on_sipi(uint32_t activity, uint8_t vector);

/*
 * An INIT exit on a vCPU that a SIPI started and that has not exited for
 * anything else since, at the start point itself (RIP 0, CS.base = vector << 12:
 * not one instruction retired), is an INIT the vCPU did not act on while it
 * waited for that SIPI: INIT is blocked in the wait-for-SIPI activity state (SDM
 * Vol. 3C 26.2), so a second INIT sent before the SIPI (an INIT storm, INIT-SIPI-
 * SIPI sent twice) is held and taken as a VM exit right after the SIPI exit
 * (Bochs 3.0 does that; the same holds for an INIT that arrived while the VMM
 * handled the INIT exit before).  A CPU outside VMX in wait-for-SIPI would have
 * gone on waiting, and no INIT a guest sends after the SIPI can land before the
 * AP's first instruction: such an INIT is ignored.  Bochs 2.7 also never clears
 * an INIT it VM-exits for and delivers it again at every entry: after
 * VRESET_REDELIVERY_MAX of them in a row the CPU is known to re-deliver forever
 * and the vCPU is given up (it stays in wait-for-SIPI, never outside VMX).
 */
#define VRESET_REDELIVERY_MAX 16
struct vreset_sipi_start {
    bool fresh;       /* started by a SIPI, no other exit since */
    uint64_t cs_base; /* vector << 12 */
    unsigned redelivered;
};
enum vreset_redelivery { VRESET_INIT_REAL, VRESET_INIT_IGNORE, VRESET_INIT_GIVE_UP };
enum vreset_redelivery vreset_init_redelivery(struct vreset_sipi_start *st, uint64_t rip,
                                              uint64_t cs_base);

#endif
