/* SPDX-License-Identifier: MIT */
/*
 * The workload of test_ptt: a small program with known hot functions and real call depth,
 * single-stepped by tests/tools/mkdump.c into a dump.  Built static and without PIE (its
 * link addresses are where it runs, and its ELF is the -e file of the decode).
 *   sort_rec -> sort_rec -> ... -> partition   recursion, calls and returns
 *   checksum -> hot_mix                       the hottest function (most instructions)
 *   fib -> fib -> ...                         deep recursion
 *   apply -> op_add / op_xor                  indirect calls through a table
 *
 * Built with -DPTT_SELF_TRACE (the guest's copy, mk/40-guest.mk) it opens and closes a trace
 * window of the ptvisor VMM around its work (TRACE_START / TRACE_STOP at CPL 3: needs
 * vmcall_user = trace), so its own user-space run is traced even where the software tracer
 * steps with the trap flag, which an exec() clears (docs/ARCHITECTURE.md section 5).  From CPL 3
 * a window is the caller's own process in user mode, and only its owner may dump it (the CPL 3
 * rule, include/ptv/vmcall.h): so the window names this process's CR3, and this program dumps
 * it itself (TRACE_DUMP, then TRACE_STATUS until the dump is out) and prints the dump's number.
 */
#ifdef PTT_SELF_TRACE
#define _GNU_SOURCE /* sched_setaffinity, sched_getcpu */
#endif
#include <stdint.h>
#include <unistd.h>

#ifdef PTT_SELF_TRACE
#include <sched.h>
#include <string.h>
#include <time.h>
#include "ptv/vmcall.h"
static uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}
/* a VMCALL with RBX in and out (the rest 0 in); RAX out */
static int64_t self_call(uint64_t fn, uint64_t *rbx_io, uint64_t r9_in)
{
    uint64_t rax = fn, rbx = *rbx_io, rcx = 0, rdx = 0, rsi = 0, rdi = 0;
    register uint64_t r8 __asm__("r8") = 0;
    register uint64_t r9 __asm__("r9") = r9_in;
    register uint64_t r10 __asm__("r10") = 0;
    __asm__ volatile("vmcall"
                     : "+a"(rax), "+b"(rbx), "+c"(rcx), "+d"(rdx), "+S"(rsi), "+D"(rdi), "+r"(r8),
                       "+r"(r9), "+r"(r10)
                     :
                     : "memory");
    *rbx_io = rbx;
    return (int64_t)rax;
}
/* this process in user mode (its CR3, PCID aside: the kernel may give it another), no range,
 * no budget; then TRACE_STOP */
static void self_trace(uint64_t fn)
{
    uint64_t rbx = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK;
    self_call(fn, &rbx, PTV_TRACE_CR3_PCID);
}
/* the window out on the serial console: its dump's number once the last line is out, 0 where
 * the VMM refused it */
static uint64_t self_dump(void)
{
    uint64_t id = 0;
    if (self_call(PTV_VMCALL_TRACE_DUMP, &id, 0) != PTV_VMCALL_OK)
        return 0;
    const struct timespec tick = {0, 20 * 1000 * 1000};
    for (unsigned i = 0; i < 30000; i++) { /* 10 minutes */
        uint64_t st = 0;
        if (self_call(PTV_VMCALL_TRACE_STATUS, &st, 0) != PTV_VMCALL_OK ||
            !(st & PTV_TRACE_ST_DUMPING))
            break;
        nanosleep(&tick, NULL);
    }
    return id;
}
#else
#define self_trace(fn) ((void)0)
#endif

#define N 400

/* global (not static): their names are what the test looks for */
uint32_t hot_mix(uint32_t h, uint32_t v);
uint32_t checksum(const uint32_t *a, int n);
int partition(uint32_t *a, int lo, int hi);
void sort_rec(uint32_t *a, int lo, int hi);
unsigned fib(unsigned n);
uint32_t op_add(uint32_t a, uint32_t b);
uint32_t op_xor(uint32_t a, uint32_t b);
uint32_t apply(const uint32_t *a, int n);
uint32_t work(void);

uint32_t data[N];

__attribute__((noinline)) uint32_t hot_mix(uint32_t h, uint32_t v)
{
    h ^= v;
    h *= 0x01000193u;
    h ^= h >> 13;
    h += v << 3;
    h ^= h >> 7;
    return h;
}

__attribute__((noinline)) uint32_t checksum(const uint32_t *a, int n)
{
    uint32_t h = 2166136261u;

    for (int i = 0; i < n; i++)
        h = hot_mix(h, a[i]);
    return h;
}

__attribute__((noinline)) int partition(uint32_t *a, int lo, int hi)
{
    uint32_t pivot = a[hi];
    int i = lo;

    for (int j = lo; j < hi; j++)
        if (a[j] < pivot) {
            uint32_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
        }
    uint32_t t = a[i];
    a[i] = a[hi];
    a[hi] = t;
    return i;
}

__attribute__((noinline)) void sort_rec(uint32_t *a, int lo, int hi)
{
    if (lo < hi) {
        int p = partition(a, lo, hi);
        sort_rec(a, lo, p - 1);
        sort_rec(a, p + 1, hi);
    }
}

__attribute__((noinline)) unsigned fib(unsigned n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) uint32_t op_add(uint32_t a, uint32_t b)
{
    return a + b;
}

__attribute__((noinline)) uint32_t op_xor(uint32_t a, uint32_t b)
{
    return a ^ b;
}

uint32_t (*const ops[2])(uint32_t, uint32_t) = {op_add, op_xor};

__attribute__((noinline)) uint32_t apply(const uint32_t *a, int n)
{
    uint32_t r = 0;

    for (int i = 0; i < n; i++)
        r = ops[a[i] & 1](r, a[i]);
    return r;
}

/* the work: data, sort, checksums (what a window traces) */
__attribute__((noinline)) uint32_t work(void)
{
    uint32_t x = 12345;

    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = x >> 8;
    }
    sort_rec(data, 0, N - 1);
    return checksum(data, N) ^ checksum(data, N / 2) ^ fib(13) ^ apply(data, N);
}

static unsigned put_hex(char *out, uint64_t v, unsigned digits)
{
    for (unsigned i = 0; i < digits; i++)
        out[i] = "0123456789abcdef"[(v >> (4 * (digits - 1 - i))) & 15];
    return digits;
}

int main(void)
{
    char out[96];
    unsigned n = 0;
    int rc = 0;

#ifdef PTT_SELF_TRACE
    /* the same work untraced, then in a window: the tracer's cost per instruction (in Bochs
     * the guest's TSC counts instructions) */
    /* a window belongs to the vCPU that opened it, and its dump goes out at that vCPU's
     * entries: stay on this CPU (with 2 CPUs the scheduler could move the process to the
     * other one, away from its window, and leave the window's vCPU idle) */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof(one), &one);
    uint64_t t0 = rdtsc();
    work();
    uint64_t t1 = rdtsc();
    self_trace(PTV_VMCALL_TRACE_START);
    uint32_t r = work();
    self_trace(PTV_VMCALL_TRACE_STOP);
    uint64_t t2 = rdtsc();
    n += put_hex(out, r, 8);
    memcpy(out + n, " ticks ", 7), n += 7;
    n += put_hex(out + n, t1 - t0, 16);
    out[n++] = ' ';
    n += put_hex(out + n, t2 - t1, 16);
    uint64_t id = self_dump();
    memcpy(out + n, " dump ", 6), n += 6;
    n += put_hex(out + n, id, 8);
    rc = id ? 0 : 2;
#else
    n += put_hex(out, work(), 8);
#endif
    out[n++] = '\n';
    return write(1, out, n) == (ssize_t)n ? rc : 1;
}
