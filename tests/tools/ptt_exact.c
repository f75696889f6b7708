/* SPDX-License-Identifier: MIT */
/*
 * The workload of `ptvisor-ctl trace`'s differential (bochs:linux): a program whose every
 * instruction, from its ELF entry point to its exit, is the same on any x86-64 Linux and any
 * CPU, so the guest's trace of the whole process can be compared instruction by instruction
 * with the same file single-stepped natively on the host (tests/tools/native_steps.c -e).
 * No libc (glibc's start-up asks CPUID and picks string functions by the answer), no data-
 * dependent branch on anything the kernel or the CPU answers (syscall results are stored, not
 * tested), static and without PIE (the same addresses everywhere).  It yields the CPU at
 * every round so that another process runs inside the window.
 *
 *   ptt-exact          the work, a line on stdout, exit 0
 *   ptt-exact hog      the same code forever (the other process of the differential)
 */
#include <stdint.h>

#define N 48

static long sys3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return r;
}

#define SYS_write       1
#define SYS_sched_yield 24
#define SYS_exit_group  231

/* global: their names show in the decoded trace */
uint32_t mix(uint32_t h, uint32_t v);
void sort_rec(uint32_t *a, int lo, int hi);
unsigned fib(unsigned n);
uint32_t op_add(uint32_t a, uint32_t b);
uint32_t op_rot(uint32_t a, uint32_t b);
uint32_t op_sub(uint32_t a, uint32_t b);
uint32_t apply(const uint32_t *a, int n);
uint32_t work(void);
void ptt_exact_main(long argc, char **argv) __attribute__((noreturn));

uint32_t data[N];
volatile long sink;

__attribute__((noinline)) uint32_t mix(uint32_t h, uint32_t v)
{
    h ^= v;
    h *= 0x9e3779b1u;
    return h ^ (h >> 15);
}

__attribute__((noinline)) void sort_rec(uint32_t *a, int lo, int hi)
{
    if (lo >= hi)
        return;
    uint32_t p = a[hi];
    int i = lo;
    for (int j = lo; j < hi; j++)
        if (a[j] < p) {
            uint32_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
        }
    uint32_t t = a[i];
    a[i] = a[hi];
    a[hi] = t;
    sort_rec(a, lo, i - 1);
    sort_rec(a, i + 1, hi);
}

__attribute__((noinline)) unsigned fib(unsigned n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) uint32_t op_add(uint32_t a, uint32_t b)
{
    return a + b;
}
__attribute__((noinline)) uint32_t op_rot(uint32_t a, uint32_t b)
{
    return (a << 7 | a >> 25) ^ b;
}
__attribute__((noinline)) uint32_t op_sub(uint32_t a, uint32_t b)
{
    return a - b;
}

/* indirect calls through a table and a switch the compiler may make a jump table */
__attribute__((noinline)) uint32_t apply(const uint32_t *a, int n)
{
    static uint32_t (*const ops[3])(uint32_t, uint32_t) = {op_add, op_rot, op_sub};
    uint32_t h = 0;
    for (int i = 0; i < n; i++) {
        switch (a[i] % 7) {
        case 0:
            h += 3;
            break;
        case 1:
            h ^= 0x55;
            break;
        case 2:
            h = mix(h, 2);
            break;
        case 3:
            h -= a[i];
            break;
        case 4:
            h = h * 5 + 1;
            break;
        default:
            h = ops[a[i] % 3](h, a[i]);
            break;
        }
    }
    return h;
}

__attribute__((noinline)) uint32_t work(void)
{
    uint32_t h = 1;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++)
            data[i] = mix((uint32_t)(i + round * N), 0x1234567u);
        sort_rec(data, 0, N - 1);
        h = mix(h, apply(data, N)) ^ fib(10 + round);
        sink = sys3(SYS_sched_yield, 0, 0, 0); /* another process may run here */
    }
    return h;
}

static unsigned put_hex(char *out, uint32_t v)
{
    for (unsigned i = 0; i < 8; i++)
        out[i] = "0123456789abcdef"[(v >> (4 * (7 - i))) & 15];
    return 8;
}

__attribute__((used)) void ptt_exact_main(long argc, char **argv)
{
    if (argc > 1 && argv[1][0] == 'h') /* hog */
        for (;;)
            sink = work();
    char out[16] = "ptt-exact ";
    unsigned n = 10;
    n += put_hex(out + n, work());
    out[n++] = '\n';
    sink = sys3(SYS_write, 1, (long)out, n);
    for (;;)
        sys3(SYS_exit_group, 0, 0, 0);
}

/* the ELF entry: RSP holds argc, then argv[] (x86-64 psABI 3.4.1) */
__asm__(".globl _start\n"
        "_start:\n"
        "    mov (%rsp), %rdi\n"
        "    lea 8(%rsp), %rsi\n"
        "    and $-16, %rsp\n"
        "    call ptt_exact_main\n"
        "    hlt\n");
