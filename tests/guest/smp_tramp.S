/* SPDX-License-Identifier: MIT */
/*
 * The AP's trampoline for smp.efi's own INIT-SIPI-SIPI (smp.h has the layout).
 * The BSP copies smp_tramp_start..smp_tramp_end to a page below 1 MiB and
 * sends SIPI with that page number; the AP starts here in real mode at
 * CS:IP = vector<<8:0 (SDM Vol. 3A 9.4.4.2).  The path is the one Linux's
 * trampoline takes (real mode -> 32-bit protected mode -> long mode):
 *
 *   real mode    boots++, stage 1; GDT and far pointers fixed up from CS
 *   32-bit flat  stage 2; CPUID leaf 1 and 0x40000000, 8 bytes of the VMM
 *                canary page (MB_CANARY_PA): what a CPU outside VMX would see
 *   long mode    stage 3; the BSP's page tables (PML4 at +SMP_OFF_PML4);
 *                a loop that counts, reads SMP_TOUCH_PA in SMP_MODE_TOUCH and
 *                answers MB_REQ with VMCALL SMP_STATS, EXIT_STATS(48),
 *                SELFCHECK and VERSION
 *
 * No IDT (limit 0): any exception is a triple fault.  VMCALL runs only where
 * CPUID showed the hypervisor bit and "ptvisor" (MB_HV_OK): outside VMX it
 * would raise #UD and kill the AP.  Interrupts stay off; no stack is used.
 */
#include "smp.h"

#define SEL_CODE32 0x08
#define SEL_DATA   0x10
#define SEL_CODE64 0x18
#define OFF(x)     ((x) - smp_tramp_start)

    .text
    .globl smp_tramp_start, smp_tramp_end
    .hidden smp_tramp_start, smp_tramp_end

    .code16
smp_tramp_start:
    cli
    cld
    movw %cs, %ax
    movw %ax, %ds
    xorl %ebx, %ebx
    movw %ax, %bx
    shll $4, %ebx                       /* EBX = linear base of the block */
    lock incl SMP_OFF_MBOX + MB_BOOTS
    movl $SMP_STAGE_REAL, SMP_OFF_MBOX + MB_STAGE
    leal OFF(gdt)(%ebx), %eax
    movl %eax, OFF(gdtr) + 2
    leal OFF(pm32)(%ebx), %eax
    movl %eax, OFF(pm32_ptr)
    leal OFF(lm64)(%ebx), %eax
    movl %eax, OFF(lm64_ptr)
    lgdtl OFF(gdtr)
    lidtl OFF(idtr_null)
    movl %cr0, %eax
    orl $1, %eax                        /* CR0.PE */
    movl %eax, %cr0
    ljmpl *OFF(pm32_ptr)

    .code32
pm32:
    movw $SEL_DATA, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movl %ebx, %edi                     /* EDI = base (CPUID clobbers EBX) */
    leal SMP_OFF_MBOX(%edi), %esi       /* ESI = mailbox */
    movl $SMP_STAGE_PM32, MB_STAGE(%esi)
    movl $1, %eax
    xorl %ecx, %ecx
    cpuid
    movl %ecx, MB_CPUID1_ECX(%esi)
    movl $0x40000000, %eax
    xorl %ecx, %ecx
    cpuid
    movl %eax, MB_HV_EAX(%esi)
    movl %ebx, MB_HV_EBX(%esi)
    movl %ecx, MB_HV_ECX(%esi)
    movl %edx, MB_HV_EDX(%esi)
    movl $0, MB_HV_OK(%esi)
    testl $0x80000000, MB_CPUID1_ECX(%esi)  /* CPUID.1:ECX[31] */
    jz 1f
    cmpl $0x69767470, MB_HV_EBX(%esi)   /* "ptvi" */
    jne 1f
    cmpl $0x00726f73, MB_HV_ECX(%esi)   /* "sor\0" */
    jne 1f
    movl $1, MB_HV_OK(%esi)
1:  movl MB_CANARY_PA(%esi), %ebx
    testl %ebx, %ebx
    jz 2f
    movl (%ebx), %eax
    movl %eax, MB_CANARY_VAL(%esi)
    movl 4(%ebx), %eax
    movl %eax, MB_CANARY_VAL + 4(%esi)
2:  /* long mode (SDM Vol. 3A 10.8.5): PAE, CR3, EFER.LME, CR0.PG */
    movl %cr4, %eax
    orl $0x20, %eax                     /* CR4.PAE */
    movl %eax, %cr4
    leal SMP_OFF_PML4(%edi), %eax
    movl %eax, %cr3
    movl $0xc0000080, %ecx              /* IA32_EFER */
    rdmsr
    orl $0x100, %eax                    /* LME */
    wrmsr
    movl %cr0, %eax
    orl $0x80000000, %eax               /* CR0.PG */
    movl %eax, %cr0
    ljmpl *OFF(lm64_ptr)(%edi)

    .code64
lm64:
    movl %esi, %r12d                    /* R12 = mailbox (VMCALL leaves it alone) */
    movq $SMP_STAGE_LOOP, MB_STAGE(%r12)
loop:
    incq MB_COUNTER(%r12)
    cmpq $SMP_MODE_TOUCH, MB_MODE(%r12)
    jne 1f
    movabsq $SMP_TOUCH_PA, %rax
    movq (%rax), %rax
    movq %rax, MB_TOUCH_VAL(%r12)
    incq MB_TOUCHES(%r12)
1:  movq MB_REQ(%r12), %r13
    cmpq MB_ACK(%r12), %r13
    je 3f
    cmpq $1, MB_HV_OK(%r12)
    jne 2f
    movl $8, %eax                       /* PTV_VMCALL_SMP_STATS */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    xorl %esi, %esi
    xorl %edi, %edi
    vmcall
    movq %rax, MB_SMP_RAX(%r12)
    movq %rbx, MB_SMP_RBX(%r12)
    movq %rcx, MB_SMP_RCX(%r12)
    movq %rdx, MB_SMP_RDX(%r12)
    movq %rsi, MB_SMP_RSI(%r12)
    movq %rdi, MB_SMP_RDI(%r12)
    movl $4, %eax                       /* PTV_VMCALL_EXIT_STATS */
    movl $EXIT_REASON_EPT_VIOLATION, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    vmcall
    movq %rax, MB_EXIT_RAX(%r12)
    movq %rbx, MB_EXIT_RBX(%r12)
    movq %rcx, MB_EXIT_RCX(%r12)
    movl $7, %eax                       /* PTV_VMCALL_SELFCHECK */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    vmcall
    movq %rax, MB_SC_RAX(%r12)
    movq %rbx, MB_SC_RBX(%r12)
    movq %rcx, MB_SC_RCX(%r12)
    xorl %eax, %eax                     /* PTV_VMCALL_VERSION */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    vmcall
    movq %rax, MB_VER_RAX(%r12)
    movq %rbx, MB_VER_RBX(%r12)
2:  movq %r13, MB_ACK(%r12)
3:  pause
    jmp loop

    .balign 8
gdt:
    .quad 0
    .quad 0x00cf9a000000ffff            /* SEL_CODE32: flat 4 GiB, 32-bit */
    .quad 0x00cf92000000ffff            /* SEL_DATA */
    .quad 0x00af9a000000ffff            /* SEL_CODE64: L = 1 */
gdt_end:
gdtr:
    .word gdt_end - gdt - 1
    .long 0                             /* base: fixed up in real mode */
idtr_null:
    .word 0
    .long 0
pm32_ptr:
    .long 0                             /* offset: fixed up in real mode */
    .word SEL_CODE32
lm64_ptr:
    .long 0
    .word SEL_CODE64
smp_tramp_end:

    .code64
    .section .note.GNU-stack, "", @progbits
