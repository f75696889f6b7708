/* SPDX-License-Identifier: MIT */
/*
 * The workload of test_ptt: a small program with known hot functions and real call depth,
 * single-stepped by tests/unit/mkdump.c into a dump.  Built static and without PIE (its
 * link addresses are where it runs, and its ELF is the -e file of the decode).
 *   sort_rec -> sort_rec -> ... -> partition   recursion, calls and returns
 *   checksum -> hot_mix                       the hottest function (most instructions)
 *   fib -> fib -> ...                         deep recursion
 *   apply -> op_add / op_xor                  indirect calls through a table
 *
 * Built with -DPTT_SELF_TRACE (the guest's copy, mk/40-guest.mk) it opens and closes a trace
 * window of the ptvisor VMM around its work (TRACE_START / TRACE_STOP at CPL 3: needs
 * vmcall_user = trace), so its own user-space run is traced even where the software tracer
 * steps with the trap flag, which an exec() clears (docs/ARCHITECTURE.md section 5).
 */
#include <stdint.h>
#include <unistd.h>

#ifdef PTT_SELF_TRACE
#include <string.h>
#include "ptv/vmcall.h"
static uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}
static void self_trace(uint64_t fn) /* no filter but CPL 3, no range, no budget */
{
    uint64_t rax = fn, rbx = PTV_TRACE_F_USER, rcx = 0, rdx = 0, rsi = 0, rdi = 0;
    register uint64_t r8 __asm__("r8") = 0;
    register uint64_t r9 __asm__("r9") = 0;
    __asm__ volatile("vmcall"
                     : "+a"(rax), "+b"(rbx), "+c"(rcx), "+d"(rdx), "+S"(rsi), "+D"(rdi), "+r"(r8),
                       "+r"(r9)
                     :
                     : "memory");
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
    char out[64];
    unsigned n = 0;

#ifdef PTT_SELF_TRACE
    /* the same work untraced, then in a window: the tracer's cost per instruction (in Bochs
     * the guest's TSC counts instructions) */
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
#else
    n += put_hex(out, work(), 8);
#endif
    out[n++] = '\n';
    return write(1, out, n) == (ssize_t)n ? 0 : 1;
}
