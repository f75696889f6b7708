/* SPDX-License-Identifier: MIT */
/*
 * The known branch sequence of the on-box LBR self-test (tests/guest/lbr_selftest.c): five
 * taken branches at fixed labels, with three VM exits (CPUID, VMCALL, RDMSR) between them,
 * recorded with interrupts off between the WRMSR that turns LBR on and the one that turns it
 * off.  Nothing else branches in that window.
 *
 *   branch 0  jmp  .Lb0 -> .Lt0      near relative jump
 *   branch 1  call .Lb1 -> .Lfn      near relative call
 *             .Lfn: CPUID, VMCALL(VERSION), RDMSR exit_msr: exits, not branches
 *   branch 2  ret  .Lb2 -> .Lt2      near return
 *   branch 3  jz   .Lb3 -> .Lt3      conditional, taken
 *   branch 4  jmp  *%rax .Lb4 -> .Lt4  near indirect jump
 */
    .text

/* void ptv_lbr_seq(uint32_t msr, uint64_t on, uint64_t off, uint32_t exit_msr)
 * WRMSR msr = on, the branches, WRMSR msr = off.  RDMSR exit_msr must not fault. */
    .globl ptv_lbr_seq
    .hidden ptv_lbr_seq
ptv_lbr_seq:
    pushq %rbx
    pushfq
    cli
    movl %edi, %r8d            /* msr */
    movq %rdx, %r9             /* off */
    movl %ecx, %r10d           /* exit_msr */
    movl %edi, %ecx
    movl %esi, %eax
    movq %rsi, %rdx
    shrq $32, %rdx
    wrmsr                      /* LBR on */
.Lb0:
    jmp .Lt0
    ud2
.Lt0:
.Lb1:
    call .Lfn
.Lt2:
    xorl %eax, %eax            /* ZF = 1 */
.Lb3:
    jz .Lt3
    ud2
.Lt3:
    leaq .Lt4(%rip), %rax
.Lb4:
    jmp *%rax
    ud2
.Lt4:
    movl %r8d, %ecx
    movl %r9d, %eax
    movq %r9, %rdx
    shrq $32, %rdx
    wrmsr                      /* LBR off */
    popfq
    popq %rbx
    ret

.Lfn:
    pushq %r8
    pushq %r9
    pushq %r10
    xorl %eax, %eax
    xorl %ecx, %ecx
.Lx_cpuid:
    cpuid
    xorl %eax, %eax            /* PTV_VMCALL_VERSION */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
.Lx_vmcall:
    vmcall
    popq %r10
    popq %r9
    popq %r8
    movl %r10d, %ecx
.Lx_rdmsr:
    rdmsr
.Lb2:
    ret

/* void ptv_lbr_seq_addrs(uint64_t a[13]): from/to of branches 0-4 (a[0..9]), then the
 * CPUID, VMCALL and RDMSR addresses (a[10..12]) as this image is loaded */
    .globl ptv_lbr_seq_addrs
    .hidden ptv_lbr_seq_addrs
ptv_lbr_seq_addrs:
    leaq .Lb0(%rip), %rax
    movq %rax, 0(%rdi)
    leaq .Lt0(%rip), %rax
    movq %rax, 8(%rdi)
    leaq .Lb1(%rip), %rax
    movq %rax, 16(%rdi)
    leaq .Lfn(%rip), %rax
    movq %rax, 24(%rdi)
    leaq .Lb2(%rip), %rax
    movq %rax, 32(%rdi)
    leaq .Lt2(%rip), %rax
    movq %rax, 40(%rdi)
    leaq .Lb3(%rip), %rax
    movq %rax, 48(%rdi)
    leaq .Lt3(%rip), %rax
    movq %rax, 56(%rdi)
    leaq .Lb4(%rip), %rax
    movq %rax, 64(%rdi)
    leaq .Lt4(%rip), %rax
    movq %rax, 72(%rdi)
    leaq .Lx_cpuid(%rip), %rax
    movq %rax, 80(%rdi)
    leaq .Lx_vmcall(%rip), %rax
    movq %rax, 88(%rdi)
    leaq .Lx_rdmsr(%rip), %rax
    movq %rax, 96(%rdi)
    ret

    .section .note.GNU-stack, "", @progbits
