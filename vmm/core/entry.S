/* SPDX-License-Identifier: MIT */
/*
 * int ptv_vmm_entry(struct ptv_handoff *h, uint64_t cpu)   (System V ABI; handoff.h)
 *
 * Captures the caller's callee-saved registers, RFLAGS, return address and
 * stack pointer into a struct caller_state (base/vmm_state.h) on the caller's stack and
 * calls vmm_main().  On success vmm_main() never returns here: VMLAUNCH makes
 * the caller continue at its return address as the guest, with RAX = 0.
 */
    .text
    .code64
    .globl ptv_vmm_entry
ptv_vmm_entry:
    subq $72, %rsp
    movq %rbx, 0(%rsp)
    movq %rbp, 8(%rsp)
    movq %r12, 16(%rsp)
    movq %r13, 24(%rsp)
    movq %r14, 32(%rsp)
    movq %r15, 40(%rsp)
    pushfq
    popq %rax
    movq %rax, 48(%rsp)
    movq 72(%rsp), %rax         /* return address */
    movq %rax, 56(%rsp)
    leaq 80(%rsp), %rax         /* caller RSP after the return */
    movq %rax, 64(%rsp)
    movq %rsi, %rdx             /* cpu: 0 = BSP, else the AP's number */
    movq %rsp, %rsi
    call vmm_main
    addq $72, %rsp
    ret
    .section .note.GNU-stack,"",@progbits
