/* SPDX-License-Identifier: MIT */
/*
 * ptv-probe: what the Linux guest sees of ptvisor, printed as one line per
 * question on the console.  Runs in the guest's initramfs (guest/init), built
 * with `gcc -static`.
 *
 *   ptv-probe                  CPUID view: hypervisor bit, 0x40000000 signature, PT, VMX
 *   ptv-probe vmcall-version   PTV_VMCALL_VERSION       (only when ptvisor is present)
 *   ptv-probe exit-stats       PTV_VMCALL_EXIT_STATS    (total and per-reason counts; CPL 3 needs
 *                                                       vmcall_user = stats in ptvisor.cfg)
 *   ptv-probe tsc              RDTSC (Bochs: instructions retired since reset)
 *   ptv-probe rip-wrap         CPL 3 CPUID at EIP 0xfffffffe of a 32-bit segment: SIGSEGV at 0
 *   ptv-probe cpuid-loop N [R] N x CPUID(0), R rounds (default 5), smallest RDTSC delta
 *   ptv-probe pin CPU [N]      pinned to CPU (sched_setaffinity): N rounds of a small workload
 *                              (default 1000000), the CPU it ran on, that CPU's CPUID view
 *
 * VMCALL outside VMX non-root operation raises #UD, so the VMCALL subcommands
 * first check CPUID.1:ECX[31] and the 0x40000000 signature and refuse (exit 2)
 * when ptvisor is not there.
 */
#define _GNU_SOURCE /* REG_RIP, sched_setaffinity, sched_getcpu */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "ptv/vmcall.h"

/* CPUID bits: SDM Vol. 2A, CPUID instruction, tables 3-8 and 3-10 */
#define CPUID_1_ECX_VMX        (1u << 5)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_7_EBX_INTEL_PT   (1u << 25)
#define CPUID_HV_BASE          0x40000000u /* hypervisor leaves (Linux: arch/x86 hypervisor.c) */
#define PTV_SIGNATURE          "ptvisor"

struct cpuid_regs {
    uint32_t eax, ebx, ecx, edx;
};

static struct cpuid_regs cpuid(uint32_t leaf, uint32_t subleaf)
{
    struct cpuid_regs r;

    __asm__ volatile("cpuid"
                     : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx)
                     : "a"(leaf), "c"(subleaf));
    return r;
}

static uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

struct hv_view {
    int hypervisor;     /* CPUID.1:ECX[31] */
    int vmx;            /* CPUID.1:ECX[5] */
    int pt;             /* CPUID.(7,0):EBX[25] */
    uint32_t max_leaf;  /* CPUID.0x40000000:EAX */
    char signature[13]; /* CPUID.0x40000000:EBX,ECX,EDX, printable part */
};

static void copy_printable(char *dst, const char *src, size_t n)
{
    size_t i;

    for (i = 0; i < n && src[i] != '\0'; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f && src[i] != '"') ? src[i] : '?';
    dst[i] = '\0';
}

static struct hv_view read_view(void)
{
    struct hv_view v;
    struct cpuid_regs r = cpuid(1, 0);
    uint32_t max_basic = cpuid(0, 0).eax;
    char raw[12];

    memset(&v, 0, sizeof(v));
    v.hypervisor = !!(r.ecx & CPUID_1_ECX_HYPERVISOR);
    v.vmx = !!(r.ecx & CPUID_1_ECX_VMX);
    if (max_basic >= 7)
        v.pt = !!(cpuid(7, 0).ebx & CPUID_7_EBX_INTEL_PT);
    /* Leaves 0x40000000+ are only meaningful when the hypervisor bit is set. */
    if (v.hypervisor) {
        r = cpuid(CPUID_HV_BASE, 0);
        v.max_leaf = r.eax;
        memcpy(raw + 0, &r.ebx, 4);
        memcpy(raw + 4, &r.ecx, 4);
        memcpy(raw + 8, &r.edx, 4);
        copy_printable(v.signature, raw, sizeof(raw));
    }
    return v;
}

static int is_ptvisor(const struct hv_view *v)
{
    return v->hypervisor && strcmp(v->signature, PTV_SIGNATURE) == 0;
}

struct vmcall_regs {
    int64_t rax;
    uint64_t rbx, rcx, rdx;
};

static struct vmcall_regs vmcall(uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3)
{
    struct vmcall_regs r;
    uint64_t rax = fn;

    __asm__ volatile("vmcall"
                     : "+a"(rax), "=b"(r.rbx), "=c"(r.rcx), "=d"(r.rdx)
                     : "b"(a1), "c"(a2), "d"(a3)
                     : "memory");
    r.rax = (int64_t)rax;
    return r;
}

static const char *vmcall_status(int64_t rax)
{
    switch (rax) {
    case PTV_VMCALL_OK:
        return "ok";
    case PTV_VMCALL_ENOSYS:
        return "ENOSYS";
    case PTV_VMCALL_EPERM:
        return "EPERM";
    case PTV_VMCALL_EINVAL:
        return "EINVAL";
    default:
        return "unknown";
    }
}

static int print_view(void)
{
    struct hv_view v = read_view();

    printf("ptvisor-guest: hypervisor=%d signature=\"%s\" max_leaf=0x%x pt=%d vmx=%d\n",
           v.hypervisor, v.signature, v.max_leaf, v.pt, v.vmx);
    return 0;
}

static int require_ptvisor(const char *what)
{
    struct hv_view v = read_view();

    if (is_ptvisor(&v))
        return 1;
    printf("ptvisor-guest: %s: not run, no ptvisor (hypervisor=%d signature=\"%s\")\n", what,
           v.hypervisor, v.signature);
    return 0;
}

static int do_vmcall_version(void)
{
    struct vmcall_regs r;
    char sig[9];

    if (!require_ptvisor("vmcall-version"))
        return 2;
    r = vmcall(PTV_VMCALL_VERSION, 0, 0, 0);
    memcpy(sig, &r.rcx, 8);
    sig[8] = '\0';
    copy_printable(sig, sig, 8);
    printf("ptvisor-guest: vmcall-version status=%s(%lld) abi=%llu name=\"%s\" expected_abi=%d\n",
           vmcall_status(r.rax), (long long)r.rax, (unsigned long long)r.rbx, sig,
           PTV_VMCALL_ABI_VERSION);
    return r.rax == PTV_VMCALL_OK ? 0 : 1;
}

static int do_exit_stats(void)
{
    struct vmcall_regs r;

    if (!require_ptvisor("exit-stats"))
        return 2;
    fflush(stdout);
    r = vmcall(PTV_VMCALL_EXIT_STATS, 0, 0, 0);
    printf("ptvisor-guest: exit-stats status=%s(%lld) total_exits=%llu\n", vmcall_status(r.rax),
           (long long)r.rax, (unsigned long long)r.rbx);
    if (r.rax != PTV_VMCALL_OK)
        return 1;
    /* per basic exit reason (SDM Vol. 3C appendix C numbers them below 80) */
    for (uint64_t reason = 0; reason < 80; reason++) {
        struct vmcall_regs q = vmcall(PTV_VMCALL_EXIT_STATS, reason, 0, 0);
        if (q.rax == PTV_VMCALL_OK && q.rcx)
            printf("ptvisor-guest: exit-stats reason=%llu count=%llu\n", (unsigned long long)reason,
                   (unsigned long long)q.rcx);
    }
    return 0;
}

static int parse_count(const char *s, unsigned long *out)
{
    char *end;
    unsigned long n;

    if (s == NULL || *s < '0' || *s > '9')
        return 0;
    n = strtoul(s, &end, 0);
    if (*end != '\0' || n == 0 || n > 100000000ul)
        return 0;
    *out = n;
    return 1;
}

/*
 * N x CPUID(0) between two RDTSC, repeated; the smallest delta is the one
 * least disturbed by timer interrupts (user space cannot mask them).
 */
static int do_cpuid_loop(const char *count, const char *rounds)
{
    unsigned long n, nr = 5, i, k;
    uint64_t best = UINT64_MAX, t0, t1;

    if (!parse_count(count, &n) || (rounds != NULL && !parse_count(rounds, &nr))) {
        fprintf(stderr, "usage: ptv-probe cpuid-loop N [ROUNDS]\n");
        return 2;
    }
    for (k = 0; k < nr; k++) {
        t0 = rdtsc();
        for (i = 0; i < n; i++)
            (void)cpuid(0, 0);
        t1 = rdtsc();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    printf("ptvisor-guest: cpuid-loop n=%lu rounds=%lu min_delta=%llu\n", n, nr,
           (unsigned long long)best);
    return 0;
}

/*
 * pin: run on one CPU only and say where the work ran and what CPUID says
 * there (each CPU's hypervisor bit is its own VMCS's answer, or none).  Exit 1
 * when the CPU cannot be chosen or the work ran elsewhere.
 */
static int do_pin(const char *cpu_s, const char *count)
{
    unsigned long cpu, n = 1000000, i;
    uint64_t x = 0x9e3779b97f4a7c15ull, t0, t1;
    cpu_set_t set;
    char *end;

    if (cpu_s == NULL || *cpu_s < '0' || *cpu_s > '9' ||
        (count != NULL && !parse_count(count, &n))) {
        fprintf(stderr, "usage: ptv-probe pin CPU [N]\n");
        return 2;
    }
    cpu = strtoul(cpu_s, &end, 10);
    if (*end != '\0' || cpu >= CPU_SETSIZE) {
        fprintf(stderr, "usage: ptv-probe pin CPU [N]\n");
        return 2;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        printf("ptvisor-guest: pin cpu=%lu error=\"sched_setaffinity: %s\"\n", cpu,
               strerror(errno));
        return 1;
    }
    int start = sched_getcpu();
    t0 = rdtsc();
    for (i = 0; i < n; i++) { /* xorshift64: work the compiler cannot drop */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    t1 = rdtsc();
    struct hv_view v = read_view(); /* CPUID on this CPU */
    int end_cpu = sched_getcpu();
    int ok = start == (int)cpu && end_cpu == (int)cpu;
    printf("ptvisor-guest: pin cpu=%lu ran_on=%d hypervisor=%d signature=\"%s\" loops=%lu "
           "tsc_delta=%llu result=%#llx",
           cpu, end_cpu, v.hypervisor, v.signature, n, (unsigned long long)(t1 - t0),
           (unsigned long long)x);
    printf(start != end_cpu ? " started_on=%d\n" : "\n", start);
    return ok ? 0 : 1;
}

/*
 * rip-wrap: the CPL 3 attack of issue 7 item 7.  A 32-bit compatibility-mode
 * program (Linux's __USER32_CS) puts CPUID, which always exits to a VMM, in
 * the last two bytes below 4 GiB.  On hardware the next instruction is fetched
 * at EIP 0 (EIP is 32 bits wide outside 64-bit mode), which is unmapped: SIGSEGV
 * with RIP 0.  A VMM that writes RIP 0x100000000 back makes VM entry fail and
 * stops the whole machine -- from an unprivileged process.
 */
#define USER32_CS 0x23 /* arch/x86/include/asm/segment.h: GDT_ENTRY_DEFAULT_USER32_CS * 8 + 3 */
static sigjmp_buf wrap_back;
static volatile uint64_t wrap_rip = ~0ull;

static void wrap_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    wrap_rip = (uint64_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    siglongjmp(wrap_back, 1);
}

static int do_rip_wrap(void)
{
    uint8_t *page = mmap((void *)0xfffff000ul, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (page == MAP_FAILED) {
        printf("ptvisor-guest: rip-wrap skipped (cannot map 0xfffff000)\n");
        return 77;
    }
    page[0xffe] = 0x0f; /* CPUID at 0xfffffffe */
    page[0xfff] = 0xa2;
    /* the handler runs on its own stack: the fault happens in compatibility mode */
    static uint8_t altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
    sigaltstack(&ss, NULL);
    struct sigaction sa = {.sa_sigaction = wrap_segv,
                           .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK};
    sigaction(SIGSEGV, &sa, NULL);
    if (!sigsetjmp(wrap_back, 1)) {
        __asm__ volatile("xorl %%eax, %%eax\n\t"
                         "xorl %%ecx, %%ecx\n\t"
                         "pushq %0\n\t"
                         "pushq %1\n\t"
                         "lretq" ::"i"(USER32_CS),
                         "r"(0xfffffffeull)
                         : "rax", "rbx", "rcx", "rdx", "memory");
    }
    munmap(page, 4096);
    printf("ptvisor-guest: rip-wrap %s rip=%#llx\n", wrap_rip == 0 ? "ok" : "wrong",
           (unsigned long long)wrap_rip);
    return wrap_rip == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "view";

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(cmd, "view") == 0)
        return print_view();
    if (strcmp(cmd, "vmcall-version") == 0)
        return do_vmcall_version();
    if (strcmp(cmd, "exit-stats") == 0)
        return do_exit_stats();
    if (strcmp(cmd, "tsc") == 0) {
        printf("ptvisor-guest: tsc=%llu\n", (unsigned long long)rdtsc());
        return 0;
    }
    if (strcmp(cmd, "rip-wrap") == 0)
        return do_rip_wrap();
    if (strcmp(cmd, "cpuid-loop") == 0)
        return do_cpuid_loop(argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL);
    if (strcmp(cmd, "pin") == 0)
        return do_pin(argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL);
    fprintf(stderr, "usage: ptv-probe [view|vmcall-version|exit-stats|tsc|rip-wrap|cpuid-loop N "
                    "[R]|pin CPU [N]]\n");
    return 2;
}
