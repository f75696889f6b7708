/* SPDX-License-Identifier: MIT */
/*
 * int vmx_enter(struct guest_regs *regs, int launched)
 *   Loads the guest GPRs, VMLAUNCH (launched == 0) or VMRESUME, and returns
 *   0 when the guest exits (guest GPRs saved into *regs), 1 on VMfailValid,
 *   2 on VMfailInvalid.  HOST_RSP is this very frame, so the exit lands on it: written here
 *   when it differs from regs->host_rsp (the value last written; 0 after vmcs_setup), which
 *   in vmx_loop is only the first entry.
 */
#define HOST_RSP_ENC 0x6c14
#define R(n) (n * 8)

    .text
    .code64
    .globl vmx_enter
vmx_enter:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    pushq %rdi                  /* regs pointer, found at 0(%rsp) on exit */
    cmpq %rsp, R(16)(%rdi)      /* regs->host_rsp: HOST_RSP as last written */
    je 3f
    movq $HOST_RSP_ENC, %rax
    vmwrite %rsp, %rax
    jbe .Lfail_early
    movq %rsp, R(16)(%rdi)
3:  testl %esi, %esi
    movq R(1)(%rdi), %rcx
    movq R(2)(%rdi), %rdx
    movq R(3)(%rdi), %rbx
    movq R(5)(%rdi), %rbp
    movq R(6)(%rdi), %rsi
    movq R(8)(%rdi), %r8
    movq R(9)(%rdi), %r9
    movq R(10)(%rdi), %r10
    movq R(11)(%rdi), %r11
    movq R(12)(%rdi), %r12
    movq R(13)(%rdi), %r13
    movq R(14)(%rdi), %r14
    movq R(15)(%rdi), %r15
    movq R(0)(%rdi), %rax       /* mov does not touch flags: ZF still from testl */
    movq R(7)(%rdi), %rdi
    jnz 1f
    vmlaunch
    jmp .Lfail
1:  vmresume
.Lfail:
.Lfail_early:
    /* CF=1: VMfailInvalid, ZF=1: VMfailValid.  pop/mov keep the flags. */
    popq %rdi
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    movl $1, %eax
    jnc 2f
    movl $2, %eax
2:  ret

    .globl vmx_exit_stub
vmx_exit_stub:
    /* VM exit: RSP = HOST_RSP, pointing at the saved regs pointer */
    pushq %rdi
    movq 8(%rsp), %rdi
    movq %rax, R(0)(%rdi)
    movq %rcx, R(1)(%rdi)
    movq %rdx, R(2)(%rdi)
    movq %rbx, R(3)(%rdi)
    movq %rbp, R(5)(%rdi)
    movq %rsi, R(6)(%rdi)
    movq %r8, R(8)(%rdi)
    movq %r9, R(9)(%rdi)
    movq %r10, R(10)(%rdi)
    movq %r11, R(11)(%rdi)
    movq %r12, R(12)(%rdi)
    movq %r13, R(13)(%rdi)
    movq %r14, R(14)(%rdi)
    movq %r15, R(15)(%rdi)
    popq %rax
    movq %rax, R(7)(%rdi)
    popq %rdi
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    xorl %eax, %eax
    ret

/*
 * uint64_t run_on_stack(uint64_t stack_top, uint64_t (*fn)(void *), void *arg)
 *   Calls fn(arg) on another stack and returns its result on the original one.
 */
    .globl run_on_stack
run_on_stack:
    pushq %rbp
    movq %rsp, %rbp
    movq %rdi, %rsp
    andq $-16, %rsp
    movq %rdx, %rdi
    call *%rsi
    movq %rbp, %rsp
    popq %rbp
    ret
    .section .note.GNU-stack,"",@progbits
