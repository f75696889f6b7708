/* SPDX-License-Identifier: MIT */
/*
 * atk_try(fn, arg) (attack.h): call fn(arg) under a private IDT whose 32
 * exception gates all unwind to atk_try's caller with the vector.  The stubs
 * push a dummy error code where the CPU pushes none (SDM Vol. 3A 6.13: 8, 10-14,
 * 17, 21, 29, 30 have one), then the common path saves the frame in atk_fault
 * and restores the callee-saved registers and RSP atk_try saved.
 */
    .text

    .globl atk_try_asm
    .hidden atk_try_asm
/* int atk_try_asm(fn, arg): the C wrapper (attack.c) loads the IDT around it */
atk_try_asm:
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, atk_saved_rsp(%rip)
    movq %rdi, %rax
    movq %rsi, %rdi
    call *%rax
    movl $-1, %eax
atk_out:
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    ret

    .macro STUB n, err
atk_stub_\n:
    .if \err == 0
    pushq $0
    .endif
    pushq $\n
    jmp atk_common
    .endm

    .irp n, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,22,23,24,25,26,27,28,31
    STUB \n, 0
    .endr
    .irp n, 8,10,11,12,13,14,17,21,29,30
    STUB \n, 1
    .endr

atk_common:
    /* stack: vector, error, RIP, CS, RFLAGS, RSP, SS */
    popq %rax
    movl %eax, atk_fault+0(%rip)
    popq atk_fault+8(%rip)
    popq atk_fault+16(%rip)
    popq atk_fault+24(%rip)
    popq atk_fault+32(%rip)
    popq atk_fault+40(%rip)
    popq atk_fault+48(%rip)
    movq atk_saved_rsp(%rip), %rsp
    jmp atk_out

    .section .data
    .balign 8
    .globl atk_stubs
    .hidden atk_stubs
atk_stubs:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .quad atk_stub_\n
    .endr
atk_saved_rsp:
    .quad 0
    .section .note.GNU-stack,"",@progbits
