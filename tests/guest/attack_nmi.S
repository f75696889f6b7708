/* SPDX-License-Identifier: MIT */
/*
 * The NMI handler of the nested-NMI check (attack_nmi.c): the first NMI sends this CPU a second
 * one from inside the handler and waits there, where virtual-NMI blocking must hold it; the
 * second must arrive at the first one's IRET.
 */
    .text
    .globl atk_nmi_handler
    .hidden atk_nmi_handler
atk_nmi_handler:
    pushq %rax
    pushq %rcx
    lock incq atk_nmi_count(%rip)
    cmpq $1, atk_nmi_count(%rip)
    jne 2f
    movq atk_nmi_icr(%rip), %rax   /* the xAPIC's ICR low: NMI, assert (to this CPU's ID) */
    movl $0x4400, (%rax)
    movl $200000, %ecx             /* held meanwhile: no VM exit in this loop */
1:  pause
    decl %ecx
    jnz 1b
    movq atk_nmi_count(%rip), %rax
    movq %rax, atk_nmi_inside(%rip)
2:  popq %rcx
    popq %rax
    iretq

    .data
    .balign 8
    .globl atk_nmi_count, atk_nmi_icr, atk_nmi_inside
    .hidden atk_nmi_count, atk_nmi_icr, atk_nmi_inside
atk_nmi_count:  .quad 0
atk_nmi_icr:    .quad 0
atk_nmi_inside: .quad 0
    .section .note.GNU-stack,"",@progbits
