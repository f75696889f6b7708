/* SPDX-License-Identifier: MIT */
/*
 * Hardware task switches seen from the guest (attack_task.c has the block layout and the
 * checks).  atk_task_code..atk_task_end is copied to BLOCK + TB_CODE in a block below 4 GiB
 * (identity-mapped by the firmware) and called with RDI = the block.  It leaves long mode
 * for 32-bit protected mode without paging (SDM Vol. 3A 10.8.5.4: from compatibility mode,
 * clear CR0.PG, then EFER.LME), loads TR with task A and then:
 *   JMP  to task B; B records what it sees and JMPs back to A;
 *   CALL to task C; C records what it sees and IRETs (NT) back to A;
 *   #GP (a selector beyond the GDT) through an IDT task gate to task D, which takes the error
 *   code from its stack, moves A's saved EIP past the fault and IRETs back;
 * then returns to long mode and to the caller's GDT, IDT, segments and stack.  Interrupts
 * are off (the caller's RFLAGS.IF is restored by the caller); there is no 32-bit IDT: a
 * fault in the 32-bit part ends the boot (the attack's INFO line names it).  Every register
 * the task switches load comes from the TSSes attack_task.c wrote; EBX = the block in every
 * task.
 */
#include "attack_task.h"

    .text
    .globl atk_task_code, atk_task_end, atk_task_b, atk_task_c, atk_task_after_jmp
    .globl atk_task_after_call, atk_task_pm32, atk_task_lm64, atk_task_d, atk_task_fault
    .globl atk_task_after_fault
    .hidden atk_task_code, atk_task_end, atk_task_b, atk_task_c, atk_task_after_jmp
    .hidden atk_task_after_call, atk_task_pm32, atk_task_lm64, atk_task_d, atk_task_fault
    .hidden atk_task_after_fault

    .code64
atk_task_code:
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rdi, %rbx
    sgdt TB_SAVE_GDTR(%rbx)
    sidt TB_SAVE_IDTR(%rbx)
    movq %rsp, TB_SAVE_RSP(%rbx)
    movq %cr0, %rax
    movq %rax, TB_SAVE_CR0(%rbx)
    movw %cs, TB_SAVE_CS(%rbx)
    movw %ss, TB_SAVE_SS(%rbx)
    movw %ds, TB_SAVE_DS(%rbx)
    movw %es, TB_SAVE_ES(%rbx)
    movw %fs, TB_SAVE_FS(%rbx)
    movw %gs, TB_SAVE_GS(%rbx)
    str TB_SAVE_TR(%rbx)
    lgdt TB_GDTR(%rbx)
    pushq $TS_SEL_CODE32                /* to compatibility mode */
    movl TB_PM32(%rbx), %eax
    pushq %rax
    lretq

    .code32
atk_task_pm32:
    movw $TS_SEL_DATA, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    leal TB_STACK_A(%ebx), %esp
    movl %cr0, %eax
    andl $0x7fffffff, %eax              /* CR0.PG = 0: IA-32e mode off */
    movl %eax, %cr0
    movl $0xc0000080, %ecx              /* IA32_EFER.LME = 0 */
    rdmsr
    andl $~0x100, %eax
    wrmsr
    movw $TS_SEL_A, %ax
    ltr %ax
    movl $0x11111111, %eax
    ljmp *TB_FAR_B(%ebx)                /* task switch: JMP to B */
atk_task_after_jmp:
    movl %eax, TB_R_A_EAX(%ebx)
    str TB_R_A_TR(%ebx)
    lcall *TB_FAR_C(%ebx)               /* task switch: CALL to C */
atk_task_after_call:
    pushfl
    popl %eax
    movl %eax, TB_R_A_EFLAGS(%ebx)
    str TB_R_A_TR2(%ebx)
    movl %cr0, %eax
    movl %eax, TB_R_A_CR0(%ebx)
    lidt TB_IDTR(%ebx)                  /* #GP -> task gate -> task D */
    movw $0x1238, %ax                   /* beyond the GDT limit: #GP(0x1238) */
atk_task_fault:
    movw %ax, %ds
atk_task_after_fault:
    movw $TS_SEL_DATA, %ax
    movw %ax, %ds
    /* back to long mode: CR4.PAE and CR3 never changed (paging off: no CR3 load) */
    movl $0xc0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl TB_SAVE_CR0(%ebx), %eax        /* PG again, TS as it was */
    movl %eax, %cr0
    ljmp *TB_FAR_LM64(%ebx)

    .code64
atk_task_lm64:
    lgdt TB_SAVE_GDTR(%rbx)
    lidt TB_SAVE_IDTR(%rbx)
    movw TB_SAVE_SS(%rbx), %ss
    movw TB_SAVE_DS(%rbx), %ds
    movw TB_SAVE_ES(%rbx), %es
    movw TB_SAVE_FS(%rbx), %fs
    movw TB_SAVE_GS(%rbx), %gs
    movq TB_SAVE_RSP(%rbx), %rsp
    /* the caller's TR back where it had one: its descriptor is busy, make it available */
    movzwl TB_SAVE_TR(%rbx), %eax
    andl $0xfff8, %eax
    jz 1f
    addq TB_SAVE_GDTR + 2(%rbx), %rax
    andb $0xfd, 5(%rax)
    ltr TB_SAVE_TR(%rbx)
1:  movzwq TB_SAVE_CS(%rbx), %rax
    pushq %rax
    leaq 2f(%rip), %rax
    pushq %rax
    lretq
2:  popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    ret

    .code32
/* task B: entered by the JMP; records, then JMPs back to A (available again) */
atk_task_b:
    movl %eax, TB_R_B_EAX(%ebx)
    str TB_R_B_TR(%ebx)
    pushfl
    popl %eax
    movl %eax, TB_R_B_EFLAGS(%ebx)
    movl %cr0, %eax
    movl %eax, TB_R_B_CR0(%ebx)
    movb TB_GDT + TS_SEL_A + 5(%ebx), %al
    movb %al, TB_R_B_TYPE_A(%ebx)
    movb TB_GDT + TS_SEL_B + 5(%ebx), %al
    movb %al, TB_R_B_TYPE_B(%ebx)
    movl %esp, TB_R_B_ESP(%ebx)
    movw %ss, TB_R_B_SS(%ebx)
    ljmp *TB_FAR_A(%ebx)
    ud2                                 /* never resumed */

/* task C: entered by the CALL (NT set, back link = A); records, then IRETs to A */
atk_task_c:
    pushfl
    popl %eax
    movl %eax, TB_R_C_EFLAGS(%ebx)
    movw TB_TSS_C(%ebx), %ax
    movw %ax, TB_R_C_LINK(%ebx)
    movb TB_GDT + TS_SEL_A + 5(%ebx), %al
    movb %al, TB_R_C_TYPE_A(%ebx)
    movl %ecx, TB_R_C_ECX(%ebx)
    iretl
    ud2

/* task D: entered through the IDT task gate of #GP, the error code on its stack; records,
 * points A past the faulting instruction and IRETs (NT) back to A */
atk_task_d:
    popl %eax
    movl %eax, TB_R_D_ERR(%ebx)
    movl %esp, TB_R_D_ESP(%ebx)
    movl TB_TSS_A + 0x20(%ebx), %eax
    movl %eax, TB_R_D_SAVED(%ebx)
    str TB_R_D_TR(%ebx)
    pushfl
    popl %eax
    movl %eax, TB_R_D_EFLAGS(%ebx)
    movw TB_TSS_D(%ebx), %ax
    movw %ax, TB_R_D_LINK(%ebx)
    movl TB_AFTER_FAULT(%ebx), %eax
    movl %eax, TB_TSS_A + 0x20(%ebx)
    iretl
    ud2
atk_task_end:

    .section .note.GNU-stack, "", @progbits
