/* SPDX-License-Identifier: MIT */
/*
 * IA-32e activation the 64-bit mode consistency checks refuse (attack_mode.c
 * has the block and the checks).  atk_mode_code..atk_mode_end is copied to BLOCK + MB_CODE in a
 * block below 4 GiB (identity-mapped by the firmware) and called with RDI = the block.  It
 * goes to compatibility mode, clears CR0.PG (IA-32e mode off; EFER.LME stays 1: IA-32e mode
 * enabled, not active -- SDM Vol. 3A 10.8.5), loads a 32-bit IDT whose only gate is #GP's,
 * and tries to activate IA-32e mode again with MOV CR0 (PG = 1) six times:
 *   0, 1  with a 16-bit TSS in TR;
 *   2, 3  from a CS with L = 1 and D = 1 (32-bit code outside IA-32e mode);
 *   4, 5  from a CS with L = 1 and D = 0 (16-bit code outside IA-32e mode);
 * the even attempts write CR0 as the guest reads it (no VM exit: the CPU's own verdict), the
 * odd ones with CR0.NE flipped, which the VMM owns: the MOV exits and the VMM emulates it.
 * Each must raise #GP(0) at the MOV and leave CR0.PG and EFER.LMA clear; the #GP handler
 * records the error code and saved EIP / CS and resumes at the attempt's continuation (a
 * MOV that does not fault runs into UD2, whose missing gate ends up in the #GP handler too,
 * with a non-zero error code).  Then TR gets a 32-bit TSS, CR0 its old value (IA-32e mode
 * activated by the CPU, from a CS with L = 0), and the code returns to long mode and to the
 * caller's GDT, IDT, segments, TR and stack.  Interrupts are off (the caller restores IF).
 */
#include "attack_mode.h"

#define CODE(sym) (MB_CODE + (sym) - atk_mode_code)

    .text
    .globl atk_mode_code, atk_mode_end, atk_mode_mov0, atk_mode_mov1, atk_mode_mov2
    .globl atk_mode_mov3, atk_mode_mov4, atk_mode_mov5, atk_mode_gp
    .hidden atk_mode_code, atk_mode_end, atk_mode_mov0, atk_mode_mov1, atk_mode_mov2
    .hidden atk_mode_mov3, atk_mode_mov4, atk_mode_mov5, atk_mode_gp

/* the attempt's continuation and #GP bookkeeping; EAX = the CR0 to write (NE flipped if flip) */
.macro PREP i, flip
    leal CODE(atk_mode_cont\i)(%ebx), %eax
    movl %eax, MB_RESUME(%ebx)
    movl $-1, MB_ERR(%ebx)
    movl $-1, MB_EIP(%ebx)
    movl MB_SAVE_CR0(%ebx), %eax
    .if \flip
    xorl $0x20, %eax
    .endif
.endm

/* a far JMP to sym's copy in segment sel, keeping EAX: flat 1, a segment at 0 (the offset is
 * the linear address); flat 0, the segment whose base is the block */
.macro FARJMP sel, sym, flat
    leal CODE(\sym)(%ebx), %ecx
    .if \flat == 0
    subl %ebx, %ecx
    .endif
    movl %ecx, MB_FAR(%ebx)
    movw $\sel, MB_FAR + 4(%ebx)
    ljmp *MB_FAR(%ebx)
.endm

/* after attempt i: the #GP's error code and EIP, CR0, EFER[31:0] */
.macro RECORD i
    movl MB_ERR(%ebx), %eax
    movl %eax, MB_RES(\i) + MB_RES_ERR(%ebx)
    movl MB_EIP(%ebx), %eax
    movl %eax, MB_RES(\i) + MB_RES_EIP(%ebx)
    movl %cr0, %eax
    movl %eax, MB_RES(\i) + MB_RES_CR0(%ebx)
    movl $0xc0000080, %ecx
    rdmsr
    movl %eax, MB_RES(\i) + MB_RES_EFL(%ebx)
.endm

    .code64
atk_mode_code:
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rdi, %rbx
    sgdt MB_SAVE_GDTR(%rbx)
    sidt MB_SAVE_IDTR(%rbx)
    movq %rsp, MB_SAVE_RSP(%rbx)
    movq %cr0, %rax
    movq %rax, MB_SAVE_CR0(%rbx)
    movw %cs, MB_SAVE_CS(%rbx)
    movw %ss, MB_SAVE_SS(%rbx)
    movw %ds, MB_SAVE_DS(%rbx)
    movw %es, MB_SAVE_ES(%rbx)
    movw %fs, MB_SAVE_FS(%rbx)
    movw %gs, MB_SAVE_GS(%rbx)
    str MB_SAVE_TR(%rbx)
    leaq CODE(atk_mode_lm64)(%rbx), %rax
    movl %eax, MB_FAR_LM64(%rbx)
    movw $MS_SEL_CODE64, MB_FAR_LM64 + 4(%rbx)
    lgdt MB_GDTR(%rbx)
    pushq $MS_SEL_CODE32                /* to compatibility mode */
    leaq CODE(atk_mode_pm32)(%rbx), %rax
    pushq %rax
    lretq

    .code32
atk_mode_pm32:
    movw $MS_SEL_DATA, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    leal MB_STACK(%ebx), %esp
    movl %cr0, %eax
    andl $0x7fffffff, %eax              /* CR0.PG = 0: IA-32e mode off, EFER.LME stays 1 */
    movl %eax, %cr0
    lidt MB_IDTR(%ebx)

    movw $MS_SEL_TSS16, %ax             /* attempts 0, 1: a 16-bit TSS in TR */
    ltr %ax
    PREP 0, 0
atk_mode_mov0:
    movl %eax, %cr0
    ud2
atk_mode_cont0:
    RECORD 0
    PREP 1, 1
atk_mode_mov1:
    movl %eax, %cr0
    ud2
atk_mode_cont1:
    RECORD 1
    movw $MS_SEL_TSS32, %ax             /* a 32-bit TSS from here on */
    ltr %ax

    PREP 2, 0                           /* attempts 2, 3: CS.L = 1, CS.D = 1 */
    FARJMP MS_SEL_CODE32L, atk_mode_l2, 1
atk_mode_l2:
atk_mode_mov2:
    movl %eax, %cr0
    ud2
atk_mode_cont2:
    RECORD 2
    PREP 3, 1
    FARJMP MS_SEL_CODE32L, atk_mode_l3, 1
atk_mode_l3:
atk_mode_mov3:
    movl %eax, %cr0
    ud2
atk_mode_cont3:
    RECORD 3

    PREP 4, 0                           /* attempts 4, 5: CS.L = 1, CS.D = 0, base = block */
    FARJMP MS_SEL_CODE16L, atk_mode_l4, 0
atk_mode_cont4:
    RECORD 4
    PREP 5, 1
    FARJMP MS_SEL_CODE16L, atk_mode_l5, 0
atk_mode_cont5:
    RECORD 5

    /* back to long mode: TR a 32-bit TSS, CS.L = 0, CR4.PAE and CR3 never changed */
    movl MB_SAVE_CR0(%ebx), %eax
    movl %eax, %cr0
    ljmp *MB_FAR_LM64(%ebx)

/* #GP (32-bit interrupt gate): record, resume at MB_RESUME in MS_SEL_CODE32 */
atk_mode_gp:
    popl MB_ERR(%ebx)
    movl (%esp), %eax
    movl %eax, MB_EIP(%ebx)
    movl 4(%esp), %eax
    movl %eax, MB_CS(%ebx)
    movl MB_RESUME(%ebx), %eax
    movl %eax, (%esp)
    movl $MS_SEL_CODE32, 4(%esp)
    iretl

    .code16
atk_mode_l4:
atk_mode_mov4:
    movl %eax, %cr0
    ud2
atk_mode_l5:
atk_mode_mov5:
    movl %eax, %cr0
    ud2

    .code64
atk_mode_lm64:
    lgdt MB_SAVE_GDTR(%rbx)
    lidt MB_SAVE_IDTR(%rbx)
    movw MB_SAVE_SS(%rbx), %ss
    movw MB_SAVE_DS(%rbx), %ds
    movw MB_SAVE_ES(%rbx), %es
    movw MB_SAVE_FS(%rbx), %fs
    movw MB_SAVE_GS(%rbx), %gs
    movq MB_SAVE_RSP(%rbx), %rsp
    /* the caller's TR back where it had one: its descriptor is busy, make it available */
    movzwl MB_SAVE_TR(%rbx), %eax
    andl $0xfff8, %eax
    jz 1f
    addq MB_SAVE_GDTR + 2(%rbx), %rax
    andb $0xfd, 5(%rax)
    ltr MB_SAVE_TR(%rbx)
1:  movzwq MB_SAVE_CS(%rbx), %rax
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
atk_mode_end:

    .section .note.GNU-stack, "", @progbits
