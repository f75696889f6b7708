/* SPDX-License-Identifier: MIT */
/*
 * Instruction sequences of tests/guest/attack_cpu.c that C cannot express:
 * a trip to a 32-bit compatibility-mode code segment, TF and RF set around an
 * exiting instruction.  All run inside atk_try (private IDT, IF = 0).
 */
    .text

/*
 * void atk_compat_cpuid(uint64_t sel32, void *farptr)
 * CPUID(0) at EIP 0xfffffffe of the code segment sel32, whose base puts that
 * EIP on atk_compat_code; the next instruction is at EIP 0 (base + 0 =
 * atk_compat_code + 2) and jumps back through farptr (m16:32, below 4 GiB) to
 * atk_compat_back.  Results in atk_compat_regs (EAX, EBX, ECX, EDX).
 */
    .globl atk_compat_cpuid
    .hidden atk_compat_cpuid
atk_compat_cpuid:
    pushq %rbx
    movq %rsi, %rsi            /* ESI = farptr: survives the trip */
    xorl %eax, %eax
    xorl %ecx, %ecx
    pushq %rdi
    movl $0xfffffffe, %r9d
    pushq %r9
    lretq
    .globl atk_compat_back
    .hidden atk_compat_back
atk_compat_back:
    movl %eax, atk_compat_regs+0(%rip)
    movl %ebx, atk_compat_regs+4(%rip)
    movl %ecx, atk_compat_regs+8(%rip)
    movl %edx, atk_compat_regs+12(%rip)
    popq %rbx
    ret

    .code32
    .globl atk_compat_code
    .hidden atk_compat_code
atk_compat_code:
    cpuid                      /* EIP 0xfffffffe, 0xffffffff */
    ljmpl *(%esi)              /* EIP 0 */
    .code64

/*
 * void atk_tf_cpuid(void): TF set by POPF, then CPUID (which exits): the
 * single-step #DB must arrive after CPUID, at atk_tf_after.
 */
    .globl atk_tf_cpuid
    .hidden atk_tf_cpuid
    .globl atk_tf_after
    .hidden atk_tf_after
atk_tf_cpuid:
    pushq %rbx
    xorl %eax, %eax
    xorl %ecx, %ecx
    pushfq
    orq $0x100, (%rsp)
    popfq
    cpuid
atk_tf_after:
    nop
    pushfq
    andq $~0x100, (%rsp)
    popfq
    popq %rbx
    ret

/*
 * void atk_rf_cpuid(void): IRETQ onto CPUID with RFLAGS.RF = 1; an execute
 * breakpoint (DR0) sits on the instruction after it.  The emulated CPUID
 * completes, so RF must be clear again there and the breakpoint hit.
 */
    .globl atk_rf_cpuid
    .hidden atk_rf_cpuid
    .globl atk_rf_after
    .hidden atk_rf_after
atk_rf_cpuid:
    pushq %rbx
    xorl %eax, %eax
    xorl %ecx, %ecx
    movq %rsp, %r10
    movq %ss, %r11
    pushq %r11
    pushq %r10
    pushfq
    orq $0x10000, (%rsp)
    movq %cs, %r11
    pushq %r11
    leaq 1f(%rip), %r11
    pushq %r11
    iretq
1:  cpuid
atk_rf_after:
    nop
    popq %rbx
    ret

/* void atk_bp_nop(void): a NOP at atk_bp_target, for the breakpoint control check */
    .globl atk_bp_nop
    .hidden atk_bp_nop
    .globl atk_bp_target
    .hidden atk_bp_target
atk_bp_nop:
    nop
atk_bp_target:
    nop
    ret

/*
 * void atk_cr3_run(uint64_t cr3_in, uint64_t cr3_back, uint64_t n): with IF = 0, MOV CR3 cr3_in,
 * then 1 + 2n instructions there (MOV, then n times DEC / JNZ), then MOV CR3 cr3_back (the last
 * instruction under cr3_in): 2n + 3 instructions a window on cr3_in alone sees, with the first
 * MOV
 */
    .globl atk_cr3_run
    .hidden atk_cr3_run
atk_cr3_run:
    pushfq
    cli
    movq %rdi, %cr3
    movq %rdx, %rcx
1:  decq %rcx
    jnz 1b
    movq %rsi, %cr3
    popfq
    ret

    .section .data
    .balign 8
    .globl atk_compat_regs
    .hidden atk_compat_regs
atk_compat_regs:
    .long 0, 0, 0, 0

    .section .note.GNU-stack, "", @progbits
