/* SPDX-License-Identifier: MIT */
/*
 * One trip to CPL 3 for a single VMCALL (user.c sets up GDT, TSS.RSP0 and the
 * U bits; see there).
 *
 *   uint64_t ptv_user_vmcall(uint64_t fn, uint64_t user_rsp, uint64_t sel)
 *     rdi = VMCALL function (RAX in ring 3), rsi = ring-3 stack top,
 *     rdx = user code selector (the user data selector is rdx + 8), both RPL 3.
 *
 * Ring 3 runs `vmcall; ud2`.  The #UD (or any #GP/#PF on the way: user.c
 * hooks the three ptv_user_* entries) comes back to CPL 0 on TSS.RSP0 (SDM
 * Vol. 3A 6.14.2, 7.7); the entry records vector, RIP and CS of the fault,
 * restores the caller's stack and segments and returns RAX as it was in
 * ring 3.  Interrupts stay off.
 */
#include "user.h"

    .text
    .globl ptv_user_vmcall, ptv_user_code, ptv_user_ud2
    .hidden ptv_user_vmcall, ptv_user_code, ptv_user_ud2
ptv_user_vmcall:
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, saved_rsp(%rip)
    movl $-1, ptv_user_vector(%rip)
    movw %ds, saved_ds(%rip)
    movw %es, saved_es(%rip)
    movw %ss, saved_ss(%rip)
    movw %fs, saved_fs(%rip)
    movw %gs, saved_gs(%rip)
    movq %rdi, %rax
    leaq 8(%rdx), %rcx
    pushq %rcx                  /* SS  = user data | 3 */
    pushq %rsi                  /* RSP */
    pushq $0x2                  /* RFLAGS: IF = 0 */
    pushq %rdx                  /* CS  = user code | 3 */
    leaq ptv_user_code(%rip), %rcx
    pushq %rcx                  /* RIP */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    iretq

    .balign 64
ptv_user_code:
    movq $USER_RBX_MARK, %rbx   /* VMCALL VERSION would overwrite it */
    vmcall
ptv_user_ud2:
    ud2

/* the CPU pushed [error code,] RIP, CS, RFLAGS, RSP, SS on the RSP0 stack */
    .globl ptv_user_ud, ptv_user_gp, ptv_user_pf
    .hidden ptv_user_ud, ptv_user_gp, ptv_user_pf
ptv_user_ud:
    movl $6, ptv_user_vector(%rip)
    jmp 1f
ptv_user_gp:
    movl $13, ptv_user_vector(%rip)
    addq $8, %rsp
    jmp 1f
ptv_user_pf:
    movl $14, ptv_user_vector(%rip)
    addq $8, %rsp
1:  movq %rax, user_rax(%rip)
    movq %rbx, ptv_user_rbx(%rip)
    movq (%rsp), %rax
    movq %rax, ptv_user_rip(%rip)
    movq 8(%rsp), %rax
    movq %rax, ptv_user_cs(%rip)
ptv_user_return:
    movq saved_rsp(%rip), %rsp
    movw saved_ss(%rip), %ss
    movw saved_ds(%rip), %ds
    movw saved_es(%rip), %es
    movw saved_fs(%rip), %fs
    movw saved_gs(%rip), %gs
    movq user_rax(%rip), %rax
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    ret

    .data
    .balign 8
    .globl ptv_user_rip, ptv_user_cs, ptv_user_rbx, ptv_user_vector
    .hidden ptv_user_rip, ptv_user_cs, ptv_user_rbx, ptv_user_vector
ptv_user_rbx: .quad 0
ptv_user_rip: .quad 0
ptv_user_cs:  .quad 0
ptv_user_vector: .long 0
    .balign 8
saved_rsp:  .quad 0
user_rax:   .quad 0
saved_ds:   .word 0
saved_es:   .word 0
saved_ss:   .word 0
saved_fs:   .word 0
saved_gs:   .word 0

    .section .note.GNU-stack, "", @progbits
