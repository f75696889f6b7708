// SPDX-License-Identifier: MIT
/*
 * exitcost.efi: what one VM exit costs, per exit kind ("every VM exit got dearer"),
 * in the style of kvm-unit-tests' vmexit test.  Run by the loader in place of Linux in Bochs
 * (tests/guest/exitcost.cfg, tests/system/bochs-exitcost.sh, `make bench-exits`), where the
 * guest's RDTSC counts instructions retired (root and non-root alike).
 *
 * Each kind is an assembly loop of N iterations with interrupts off:
 *   nop      the loop with a NOP in place of the exiting instruction (the bare loop)
 *   cpuid    CPUID leaf 0
 *   vmcall   VMCALL VERSION (CPL 0)
 *   rdmsr    RDMSR IA32_APIC_BASE (intercepted: the VMM shows the guest its own view)
 *   io       IN AL from the UART's LCR (trapped: the VMM shares the UART with the guest)
 * The smallest of R rounds is kept.  The bench lines give ticks per iteration and the VMM's
 * share: (ticks(kind) - ticks(nop)) / N, i.e. the instructions between the exit and the
 * guest's next instruction, VM exit and VMRESUME included.
 *
 * The checks (PASS/FAIL): each exiting instruction gave its architectural answer (VERSION's
 * ABI and signature, CPUID's vendor, RDMSR a value with the APIC enabled), so a VMM that
 * answered nothing cannot look fast.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "libtest.h"
#include "x86.h"

#define N_ITER   2000u
#define N_ROUNDS 5u
#define UART_LCR 0x3fbu

enum kind { K_NOP, K_CPUID, K_VMCALL, K_RDMSR, K_IO, K_NR };
static const char *const kind_name[K_NR] = {"nop", "cpuid", "vmcall", "rdmsr", "io"};

struct out {
    uint64_t a, b, c, d; /* the last iteration's RAX, RBX, RCX, RDX */
};

/* every loop: set-up, the instruction, DEC, JNZ -- the same count around each instruction */
static uint64_t run_loop(enum kind k, uint64_t n, struct out *o)
{
    uint64_t a = 0, b = 0, c = 0, d = 0, t0, t1;
    __asm__ volatile("cli" ::: "memory");
    t0 = rdtsc();
    switch (k) {
    case K_NOP:
        __asm__ volatile("1: mov $0, %%eax\n\t"
                         "xor %%ecx, %%ecx\n\t"
                         "nop\n\t"
                         "dec %%rsi\n\t"
                         "jnz 1b"
                         : "+S"(n), "=a"(a), "=c"(c)
                         :
                         : "memory");
        break;
    case K_CPUID:
        __asm__ volatile("1: mov $0, %%eax\n\t"
                         "xor %%ecx, %%ecx\n\t"
                         "cpuid\n\t"
                         "dec %%rsi\n\t"
                         "jnz 1b"
                         : "+S"(n), "=a"(a), "=b"(b), "=c"(c), "=d"(d)
                         :
                         : "memory");
        break;
    case K_VMCALL:
        __asm__ volatile("1: mov %[fn], %%eax\n\t"
                         "xor %%ecx, %%ecx\n\t"
                         "vmcall\n\t"
                         "dec %%rsi\n\t"
                         "jnz 1b"
                         : "+S"(n), "=a"(a), "=b"(b), "=c"(c), "=d"(d)
                         : [fn] "i"(PTV_VMCALL_VERSION)
                         : "memory");
        break;
    case K_RDMSR:
        __asm__ volatile("1: mov $0x1b, %%ecx\n\t"
                         "xor %%eax, %%eax\n\t"
                         "rdmsr\n\t"
                         "dec %%rsi\n\t"
                         "jnz 1b"
                         : "+S"(n), "=a"(a), "=c"(c), "=d"(d)
                         :
                         : "memory");
        break;
    case K_IO:
        __asm__ volatile("1: mov %[port], %%edx\n\t"
                         "xor %%eax, %%eax\n\t"
                         "inb %%dx, %%al\n\t"
                         "dec %%rsi\n\t"
                         "jnz 1b"
                         : "+S"(n), "=a"(a), "=d"(d)
                         : [port] "i"(UART_LCR)
                         : "memory");
        break;
    default:
        break;
    }
    t1 = rdtsc();
    __asm__ volatile("sti" ::: "memory");
    *o = (struct out){a, b, c, d};
    return t1 - t0;
}

static bool answer_ok(enum kind k, const struct out *o)
{
    switch (k) {
    case K_CPUID: /* leaf 0: the vendor string is never all zero */
        return o->a != 0 && (o->b | o->c | o->d) != 0;
    case K_VMCALL:
        return o->a == PTV_VMCALL_OK && o->b == PTV_VMCALL_ABI_VERSION &&
               o->c == 0x00726f7369767470ull /* "ptvisor" */;
    case K_RDMSR: /* IA32_APIC_BASE: the global enable bit, a page-aligned base */
        return (o->a & (1u << 11)) != 0;
    default:
        return true;
    }
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    test_printf("exitcost: VM exit cost per exit kind (guest RDTSC)\n");
#ifdef EXITCOST_TRACE
    /* tools/exit-profile.sh: a magic breakpoint (Bochs' debugger traces from here), then one
     * exit of each kind, interrupts off */
    __asm__ volatile("cli; xchg %%bx, %%bx\n\t"
                     "mov $0, %%eax; xor %%ecx, %%ecx; cpuid\n\t"
                     "mov %[fn], %%eax; vmcall\n\t"
                     "mov $0x1b, %%ecx; rdmsr\n\t"
                     "mov %[port], %%edx; inb %%dx, %%al\n\t"
                     "nop; sti"
                     :
                     : [fn] "i"(PTV_VMCALL_VERSION), [port] "i"(UART_LCR)
                     : "rax", "rbx", "rcx", "rdx", "memory");
#endif
    uint64_t best[K_NR];
    struct out o[K_NR];
    for (unsigned k = 0; k < K_NR; k++) {
        best[k] = ~0ull;
        for (unsigned r = 0; r < N_ROUNDS; r++) {
            uint64_t t = run_loop((enum kind)k, N_ITER, &o[k]);
            if (t < best[k])
                best[k] = t;
        }
        if (k != K_NOP && k != K_IO)
            report(answer_ok((enum kind)k, &o[k]), "%s: its answer (%lx %lx %lx)", kind_name[k],
                   o[k].a, o[k].b, o[k].c);
    }
    report(best[K_NOP] < best[K_CPUID], "the bare loop is cheaper than the CPUID loop");
    /* one line each, under the library's 72 characters: ticks per iteration (the bare loop's
     * alongside) and the VMM's share, one decimal */
    uint64_t bare10 = best[K_NOP] * 10 / N_ITER;
    for (unsigned k = 1; k < K_NR; k++) {
        uint64_t per10 = best[k] * 10 / N_ITER, vmm10 = (best[k] - best[K_NOP]) * 10 / N_ITER;
        report_info("bench exit=%s per_iter=%lu.%lu bare=%lu.%lu vmm=%lu.%lu", kind_name[k],
                    per10 / 10, per10 % 10, bare10 / 10, bare10 % 10, vmm10 / 10, vmm10 % 10);
    }
    unsigned failed = report_summary();
    return failed ? EFI_ABORTED : EFI_SUCCESS;
}
