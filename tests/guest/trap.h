/* SPDX-License-Identifier: MIT */
/*
 * Catch #UD, #GP and #PF raised by one instruction inside an in-guest check.
 *
 *   trap_arm();                      interrupts off, stubs hooked into the firmware IDT
 *   asm volatile(TRAP_INSN("rdmsr") : ...);
 *   int vector = trap_disarm();      gates and RFLAGS.IF restored; TRAP_NONE or 6/13/14
 *
 * TRAP_INSN tells the stub (trap.S) the instruction's length, computed by the
 * assembler, so the stub resumes right after the instruction that faulted.
 */
#ifndef PTV_GUEST_TRAP_H
#define PTV_GUEST_TRAP_H

#include <stdint.h>

#define TRAP_NONE (-1)
#define TRAP_UD   6
#define TRAP_GP   13
#define TRAP_PF   14

/* Inline-asm text for one trapping instruction: arm the skip length, run it. */
#define TRAP_INSN(insn) "movq $(7772f - 7771f), ptv_trap_skip(%%rip)\n7771:\t" insn "\n7772:\n"

/*
 * Inline-asm text for a jump to an address whose fetch should fault: a fault
 * resumes at the local label after the jump.  %[scratch] is clobbered.
 */
#define TRAP_JUMP(target)                                                                          \
    "leaq 7774f(%%rip), %[scratch]\n\tmovq %[scratch], ptv_trap_resume(%%rip)\n\tjmp *" target     \
    "\n7774:\n"

void trap_arm(void);
int trap_disarm(void);
/* like trap_arm, but #UD/#GP/#PF go to the caller's stubs (user.S) */
void trap_arm_handlers(char *ud, char *gp, char *pf);
uint64_t trap_error_code(void);
/* point IDT vector at handler (64-bit interrupt gate, DPL 0, this CS), the old gate in old */
void trap_gate_swap(int vector, void *handler, uint64_t old[2]);
void trap_gate_restore(int vector,
                       const uint64_t saved[2]); /* error code of the last #GP/#PF caught */

#endif
