/* SPDX-License-Identifier: MIT */
/*
 * trace.efi's runners (tests/guest/trace.c).  Everything between trace_rt_lo and
 * trace_rt_hi is wrapper code: the host checker leaves those IPs out of both the
 * decoded trace and the single-step reference, so both name exactly the
 * instructions of the workload.
 */
    .text
    .globl trace_rt_lo, trace_rt_hi
    .globl trace_tf_run, trace_mtf_run, trace_db_handler, trace_ev_run
    .globl trace_ev_lo, trace_ev_ud, trace_ev_after, trace_ev_hi
    .globl trace_tf_ips, trace_tf_n, trace_tf_max

trace_rt_lo:

/* uint64_t trace_tf_run(int (*fn)(int), int arg): fn(arg) single-stepped with TF;
 * trace_db_handler records each saved RIP in trace_tf_ips */
trace_tf_run:
    push %rbx
    mov %rdi, %rax
    mov %esi, %edi
    pushfq
    orq $0x100, (%rsp)
    popfq
    call *%rax          /* #DB after it: the first recorded IP is fn's first */
    pushfq
    andq $~0x100, (%rsp)
    popfq
    pop %rbx
    ret

/* int trace_mtf_run(int (*fn)(int), int arg, uint64_t flags, uint64_t budget, int64_t *rc):
 * TRACE_START (flags, budget), fn(arg), TRACE_STOP; *rc = START's RAX */
trace_mtf_run:
    push %rbx
    push %r12
    push %r13
    mov %rdi, %r12
    mov %r8, %r13
    mov %rdx, %rbx       /* RBX = flags */
    mov %rcx, %r8        /* R8 = budget */
    xor %ecx, %ecx
    xor %edx, %edx
    mov %esi, %edi
    push %rdi
    mov $10, %eax        /* PTV_VMCALL_TRACE_START */
    xor %esi, %esi
    vmcall
    pop %rdi
    mov %rax, (%r13)
    call *%r12
    mov %eax, %r12d
    mov $11, %eax        /* PTV_VMCALL_TRACE_STOP */
    vmcall
    mov %r12d, %eax
    pop %r13
    pop %r12
    pop %rbx
    ret

/* #DB (vector 1): record the saved RIP, keep TF, return */
trace_db_handler:
    push %rax
    push %rcx
    push %r11
    mov trace_tf_n(%rip), %rax
    cmp trace_tf_max(%rip), %rax
    jae 1f
    lea trace_tf_ips(%rip), %rcx
    mov 24(%rsp), %r11   /* saved RIP: above the three pushes */
    mov %r11, (%rcx,%rax,8)
    incq trace_tf_n(%rip)
1:  pop %r11
    pop %rcx
    pop %rax
    iretq

/* int64_t trace_ev_run(int64_t *rc): a window with the IP range [trace_ev_lo,
 * trace_ev_hi]; a #UD inside it, caught by the trap library (the handler is
 * outside the range: FUP + TIP.PGD, then TIP.PGE after the UD2).  The range is
 * entered and left by a JMP: PT generates TIP.PGE / TIP.PGD for a branch, a
 * control-flow transfer or MOV CR3 (SDM Vol. 3C 33.4.2.4-5), and libipt binds a
 * TIP.PGD with an IP only at a branch, so a range crossed by straight-line code is
 * not what this check is about (docs/ARCHITECTURE.md, the tracer's known limits) */
trace_ev_run:
    push %rbx
    push %r12
    mov %rdi, %r12
    mov $10, %eax                  /* TRACE_START */
    mov $(1 | 8), %ebx             /* kernel, range */
    xor %ecx, %ecx
    lea trace_ev_lo(%rip), %rdx
    lea trace_ev_hi(%rip), %rsi
    xor %r8d, %r8d
    vmcall
    mov %rax, (%r12)
    jmp trace_ev_lo                /* into the range: TIP.PGE */
trace_ev_lo:
    nop
    movq $2, ptv_trap_skip(%rip)   /* the trap library resumes past the UD2 */
trace_ev_ud:
    ud2
trace_ev_after:
    nop
    nop
trace_ev_hi:
    jmp 1f                         /* out of the range: TIP.PGD */
1:  mov $11, %eax                  /* TRACE_STOP */
    vmcall
    pop %r12
    pop %rbx
    ret

trace_rt_hi:

    .data
    .balign 8
trace_tf_n:   .quad 0
trace_tf_max: .quad 0
    .bss
    .balign 8
trace_tf_ips: .skip 8 * 16384
    .section .note.GNU-stack,"",@progbits
