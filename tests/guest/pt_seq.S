/* SPDX-License-Identifier: MIT */
/*
 * The known code sequence of the on-box self-test of the VMM's own trace (
 * tests/guest/vmm_trace_selftest.c).  Traced through an IP range that covers exactly
 * [ptv_pt_seq, ptv_pt_seq_end), it must decode to (tests/guest/pt_seq_check.h):
 *   TIP.PGE ptv_pt_seq
 *   TNT  T T T T N     the counted loop (jnz, 5 rounds)
 *        (CPUID: a VM exit; system-mode PT may write TIP.PGD / TIP.PGE around it)
 *   TNT  T             jz, taken
 *   TNT  N             je, not taken
 *   TIP  ptv_pt_seq_t4 jmp *%rdx
 *   TIP.PGD            ret, out of the range
 * Interrupts are off from the first instruction after PUSHF to POPF.
 */
    .text
    .globl ptv_pt_seq, ptv_pt_seq_t4, ptv_pt_seq_end
    .hidden ptv_pt_seq, ptv_pt_seq_t4, ptv_pt_seq_end
/* uint64_t ptv_pt_seq(void): returns 0 */
ptv_pt_seq:
    pushq %rbx
    pushfq
    cli
    movl $5, %ecx
1:  decl %ecx
    jnz 1b
    xorl %eax, %eax
    cpuid
    xorl %eax, %eax
    testl %eax, %eax
    jz 2f
    ud2
2:  cmpl $1, %eax
    je 3f
    leaq ptv_pt_seq_t4(%rip), %rdx
    jmp *%rdx
3:  ud2
ptv_pt_seq_t4:
    popfq
    popq %rbx
    xorl %eax, %eax
    ret
ptv_pt_seq_end:
    .section .note.GNU-stack,"",@progbits
