/* SPDX-License-Identifier: MIT */
/*
 * Exception stubs for in-guest checks (tests/guest/trap.c installs them).
 *
 * Each stub records the vector (and the error code where the CPU pushes one,
 * SDM Vol. 3A 6.13 "Error Code"), then resumes after the faulting instruction:
 * the test armed ptv_trap_skip with that instruction's length before running it
 * (the TRAP_INSN macro lets the assembler compute it).  A test that jumps
 * somewhere that faults on the fetch sets ptv_trap_resume instead: the stub
 * then resumes at that address.  No other state changes.
 *
 * Stack on entry in 64-bit mode (SDM Vol. 3A 6.14.2): [error code], RIP, CS,
 * RFLAGS, RSP, SS.
 */
    .text

    .globl ptv_trap_ud
    .hidden ptv_trap_ud
ptv_trap_ud:                    /* #UD: no error code */
    movl $6, ptv_trap_vector(%rip)
    movq $0, ptv_trap_error(%rip)
    jmp resume

    .globl ptv_trap_gp
    .hidden ptv_trap_gp
ptv_trap_gp:                    /* #GP: error code */
    movl $13, ptv_trap_vector(%rip)
    popq ptv_trap_error(%rip)
    jmp resume

    .globl ptv_trap_pf
    .hidden ptv_trap_pf
ptv_trap_pf:                    /* #PF: error code */
    movl $14, ptv_trap_vector(%rip)
    popq ptv_trap_error(%rip)

resume:
    incl ptv_trap_count(%rip)
    pushq %rax
    movq ptv_trap_resume(%rip), %rax
    testq %rax, %rax
    jz 1f
    movq %rax, 8(%rsp)          /* saved RIP = the armed resume address */
    jmp 2f
1:  movq ptv_trap_skip(%rip), %rax
    addq %rax, 8(%rsp)          /* saved RIP += length of the faulting instruction */
2:  popq %rax
    iretq

    .data
    .balign 8
    .globl ptv_trap_skip, ptv_trap_resume, ptv_trap_error, ptv_trap_vector, ptv_trap_count
    .hidden ptv_trap_skip, ptv_trap_resume, ptv_trap_error, ptv_trap_vector, ptv_trap_count
ptv_trap_skip:   .quad 0
ptv_trap_resume: .quad 0
ptv_trap_error:  .quad 0
ptv_trap_vector: .long 0
ptv_trap_count:  .long 0

    .section .note.GNU-stack, "", @progbits
