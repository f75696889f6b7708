/* SPDX-License-Identifier: MIT */
/*
 * ptv-probe: what the Linux guest sees of ptvisor, printed as one line per
 * question on the console.  Runs in the guest's initramfs (guest/init), built
 * with `gcc -static`.
 *
 *   ptv-probe                  CPUID view: hypervisor bit, 0x40000000 signature, PT, VMX
 *   ptv-probe vmcall-version   PTV_VMCALL_VERSION       (only when ptvisor is present)
 *   ptv-probe exit-stats [CPU] PTV_VMCALL_EXIT_STATS    (total and per-reason counts of one vCPU:
 *                                                       this one, or CPU's, pinned there; CPL 3
 *                                                       needs vmcall_user = stats in ptvisor.cfg)
 *   ptv-probe tsc              RDTSC (Bochs: instructions retired since reset)
 *   ptv-probe rip-wrap         CPL 3 CPUID at EIP 0xfffffffe of a 32-bit segment: SIGSEGV at 0
 *   ptv-probe cpuid-loop N [R] N x CPUID(0), R rounds (default 5), smallest RDTSC delta
 *   ptv-probe pin CPU [N]      pinned to CPU (sched_setaffinity): N rounds of a small workload
 *                              (default 1000000), the CPU it ran on, that CPU's CPUID view
 *   ptv-probe trace-user [refusals]  the CPL 3 trace rule attacked (needs
 *                              vmcall_user = trace): one line per check, then a summary;
 *                              "refusals": the refused calls only, no window of its own
 *   ptv-probe trace-own CPU    pinned to CPU, its own window around 200 getpid calls: its
 *                              figures (guest/init runs one on each CPU at once)
 *   ptv-probe spin-child N     a child process on this CPU spins N rounds of a busy loop and
 *                              prints the TSC ticks they took; the parent waits for it (under
 *                              `ptvisor-ctl trace`: another process's speed while a window is
 *                              open)
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
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

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

/*
 * exit-stats [CPU]: the VMM's exit counts of the vCPU this runs on (they are per vCPU); with CPU,
 * pinned there first and every line tagged "cpu=N " (guest/init asks each CPU at the marker)
 */
static int do_exit_stats(const char *cpu_s)
{
    struct vmcall_regs r;
    char tag[32] = "";

    if (cpu_s != NULL) {
        char *end;
        unsigned long cpu = strtoul(cpu_s, &end, 10);
        cpu_set_t set;

        if (*cpu_s < '0' || *cpu_s > '9' || *end != '\0' || cpu >= CPU_SETSIZE) {
            fprintf(stderr, "usage: ptv-probe exit-stats [CPU]\n");
            return 2;
        }
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            printf("ptvisor-guest: exit-stats cpu=%lu error=\"sched_setaffinity: %s\"\n", cpu,
                   strerror(errno));
            return 1;
        }
        snprintf(tag, sizeof(tag), "cpu=%lu ", cpu);
    }
    if (!require_ptvisor("exit-stats"))
        return 2;
    fflush(stdout);
    r = vmcall(PTV_VMCALL_EXIT_STATS, 0, 0, 0);
    printf("ptvisor-guest: exit-stats %sstatus=%s(%lld) total_exits=%llu\n", tag,
           vmcall_status(r.rax), (long long)r.rax, (unsigned long long)r.rbx);
    if (r.rax != PTV_VMCALL_OK)
        return 1;
    /* per basic exit reason (SDM Vol. 3C appendix C numbers them below 80) */
    for (uint64_t reason = 0; reason < 80; reason++) {
        struct vmcall_regs q = vmcall(PTV_VMCALL_EXIT_STATS, reason, 0, 0);
        if (q.rax == PTV_VMCALL_OK && q.rcx)
            printf("ptvisor-guest: exit-stats %sreason=%llu count=%llu\n", tag,
                   (unsigned long long)reason, (unsigned long long)q.rcx);
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
 * rip-wrap: a CPL 3 attack on the VMM's RIP emulation.  A 32-bit compatibility-mode
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

/* ---- trace-user: the CPL 3 trace rule (include/ptv/vmcall.h, ABI 7) from a guest process ----
 *
 * A process may open a window on itself in user mode only; anything wider (the kernel, any or
 * another CR3, an IP range or start IP over them, a PTI-pair mask, a budget) is EACCES with no
 * register but RAX changed.  Only the process that opened a window may stop, dump or read it:
 * another process (a fork, its own page tables) gets EACCES, and the kernel's window (trace_boot)
 * is no process's.  What the owner is told is its window's: the instructions it traced, not
 * the kernel's that ran meanwhile (a getpid loop). */

struct tregs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, r8, r9, r10;
};

static struct tregs tcall(struct tregs in)
{
    register uint64_t r8 __asm__("r8") = in.r8;
    register uint64_t r9 __asm__("r9") = in.r9;
    register uint64_t r10 __asm__("r10") = in.r10;
    __asm__ volatile("vmcall"
                     : "+a"(in.rax), "+b"(in.rbx), "+c"(in.rcx), "+d"(in.rdx), "+S"(in.rsi),
                       "+D"(in.rdi), "+r"(r8), "+r"(r9), "+r"(r10)
                     :
                     : "memory");
    in.r8 = r8, in.r9 = r9, in.r10 = r10;
    return in;
}

/* fn with marked registers: refused with EACCES, and nothing but RAX changed */
static int refused(uint64_t fn, uint64_t rbx, uint64_t rcx, uint64_t rdx, uint64_t rsi, uint64_t r8,
                   uint64_t r9, int64_t *rc)
{
    const struct tregs in = {.rax = fn,
                             .rbx = rbx,
                             .rcx = rcx,
                             .rdx = rdx,
                             .rsi = rsi,
                             .rdi = 0x401000,
                             .r8 = r8,
                             .r9 = r9,
                             .r10 = 0x5e5e5e5e};
    struct tregs out = tcall(in);
    *rc = (int64_t)out.rax;
    out.rax = in.rax;
    return *rc == PTV_VMCALL_EACCES && !memcmp(&in, &out, sizeof(in));
}

static unsigned tu_pass, tu_fail;

static void tu_report(int ok, const char *what, int64_t rc)
{
    printf("ptvisor-guest: trace-user %s %s (rax %lld)\n", ok ? "ok  " : "FAIL", what,
           (long long)rc);
    ok ? tu_pass++ : tu_fail++;
}

/* 200 getpid system calls: 6 user instructions each, the kernel's many more */
static void getpid_loop(void)
{
    __asm__ volatile("mov $200, %%ecx\n"
                     "1: mov $39, %%eax\n" /* SYS_getpid */
                     "push %%rcx\n"
                     "syscall\n"
                     "pop %%rcx\n"
                     "dec %%ecx\n"
                     "jnz 1b\n"
                     :
                     :
                     : "rax", "rcx", "r11", "memory");
}

/* in a forked process (another CR3): the calls it may not make on its parent's window; the
 * exit status says which went wrong */
static int other_process(void)
{
    int64_t rc;
    int bad = 0;
    if (!refused(PTV_VMCALL_TRACE_STATUS, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, &rc))
        bad |= 1;
    if (!refused(PTV_VMCALL_TRACE_DUMP, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, &rc))
        bad |= 2;
    if (!refused(PTV_VMCALL_TRACE_STOP, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, &rc))
        bad |= 4;
    /* a window of its own the rule allows, with a range lo > hi: EINVAL whether or not a
     * window of another is open on this vCPU (a malformed request learns nothing of others) */
    struct tregs t =
        tcall((struct tregs){.rax = PTV_VMCALL_TRACE_START,
                             .rbx = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_RANGE,
                             .rdx = 0x402000,
                             .rsi = 0x401000});
    if ((int64_t)t.rax != PTV_VMCALL_EINVAL)
        bad |= 8;
    return bad;
}

static int run_other(const char *when)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(other_process());
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
        tu_report(0, "another process could not be run", pid);
        return -1;
    }
    char what[160];
    snprintf(what, sizeof(what),
             "another process, %s: TRACE_STATUS, TRACE_DUMP, TRACE_STOP refused, registers kept; "
             "a malformed TRACE_START of its own EINVAL, not EBUSY (failed: %#x)",
             when, WEXITSTATUS(st));
    tu_report(WEXITSTATUS(st) == 0, what, 0);
    return 0;
}

static int do_trace_user(const char *arg)
{
    /* "refusals": the attacks only, no window of its own (nothing stepped: guest/init's
     * ptv.steps=0, nested KVM) */
    int refusals_only = arg && strcmp(arg, "refusals") == 0;
    if (!require_ptvisor("trace-user"))
        return 2;
    struct tregs v = tcall((struct tregs){.rax = PTV_VMCALL_VERSION});
    int64_t rc = (int64_t)tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STATUS}).rax;
    if (v.rbx < 7 || rc == PTV_VMCALL_EPERM) {
        printf("ptvisor-guest: trace-user skipped: %s\n",
               v.rbx < 7 ? "VMCALL ABI older than 7" : "vmcall_user is not trace");
        return 0;
    }
    /* the window belongs to this CPU: stay on it (a fork inherits it) */
    cpu_set_t one;
    int cpu = sched_getcpu();
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);

    const uint64_t kernel_lo = 0xffffffff80000000ull, kernel_hi = ~0ull,
                   own = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF;
    static const struct {
        uint64_t flags, rcx, r8, r9;
        const char *what;
    } starts[] = {
        {0, 0, 0, 0, "TRACE_START with the configured filter (kernel and every process)"},
        {PTV_TRACE_F_KERNEL, 0, 0, 0, "TRACE_START of the kernel"},
        {PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF, 0, 0, 0,
         "TRACE_START of this process, kernel mode too"},
        {PTV_TRACE_F_USER, 0, 0, 0, "TRACE_START of every process's user mode"},
        {PTV_TRACE_F_USER | PTV_TRACE_F_CR3, 0x1000, 0, 0, "TRACE_START of a CR3 it names"},
        {PTV_TRACE_F_KERNEL | PTV_TRACE_F_RANGE, 0, 0, 0,
         "TRACE_START of an IP range over kernel text (the KASLR probe)"},
        {PTV_TRACE_F_USER | PTV_TRACE_F_RANGE, 0, 0, 0, "TRACE_START of an IP range, any process"},
        {PTV_TRACE_F_USER | PTV_TRACE_F_START_IP, 0, 0, 0,
         "TRACE_START with a start IP, any process"},
        {own | PTV_TRACE_F_CR3_MASK, 0, 0, 0x1fff,
         "TRACE_START of this process with CR3 bit 12 ignored (another page table)"},
        {own, 0, 1000, 0, "TRACE_START of this process with a budget"},
    };
    for (unsigned i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
        tu_report(refused(PTV_VMCALL_TRACE_START, starts[i].flags, starts[i].rcx, kernel_lo,
                          kernel_hi, starts[i].r8, starts[i].r9, &rc),
                  starts[i].what, rc);
    /* the kernel's window (trace_boot), or none: not this process's */
    tu_report(refused(PTV_VMCALL_TRACE_STATUS, 1, 2, 3, 4, 5, 6, &rc),
              "TRACE_STATUS of a window not its own", rc);
    tu_report(refused(PTV_VMCALL_TRACE_STOP, 1, 2, 3, 4, 5, 6, &rc),
              "TRACE_STOP of a window not its own", rc);
    tu_report(refused(PTV_VMCALL_TRACE_DUMP, 1, 2, 3, 4, 5, 6, &rc),
              "TRACE_DUMP of a window not its own", rc);

    if (refusals_only) {
        printf("ptvisor-guest: trace-user own window skipped: refusals only\n");
        printf("ptvisor-guest: trace-user passed=%u failed=%u\n", tu_pass, tu_fail);
        return tu_fail ? 1 : 0;
    }
    /* its own window: allowed, and what it is told is its own: START, the loop, STOP, nothing
     * else in between (6 user instructions per getpid; the kernel's side of each is many) */
    struct tregs s = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_START,
                                          .rbx = own | PTV_TRACE_F_CR3_MASK,
                                          .r9 = PTV_TRACE_CR3_PCID});
    if ((int64_t)s.rax == PTV_VMCALL_ENODEV || (int64_t)s.rax == PTV_VMCALL_ENOMEM) {
        printf("ptvisor-guest: trace-user own window skipped: no trace source or ring (rax "
               "%lld)\n",
               (long long)(int64_t)s.rax);
    } else {
        getpid_loop();
        struct tregs stop = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STOP});
        tu_report((int64_t)s.rax == PTV_VMCALL_OK, "TRACE_START of this process in user mode",
                  (int64_t)s.rax);
        char what[200];
        snprintf(what, sizeof(what),
                 "TRACE_STOP of its own window: %llu instructions traced, its own only "
                 "(1200..2500: 200 getpid calls in user mode), %llu bytes",
                 (unsigned long long)stop.rcx, (unsigned long long)stop.rbx);
        tu_report((int64_t)stop.rax == PTV_VMCALL_OK && stop.rcx >= 1200 && stop.rcx <= 2500, what,
                  (int64_t)stop.rax);
        s = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STATUS});
        tu_report((int64_t)s.rax == PTV_VMCALL_OK && !(s.rbx & PTV_TRACE_ST_ON) &&
                      s.rsi == stop.rcx && s.rdx == stop.rbx && s.r10 == 0,
                  "TRACE_STATUS of its own closed window: the same figures, R10 = 0",
                  (int64_t)s.rax);
        run_other("after its window closed");
        /* again, and another process tries while it is open */
        s = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_START,
                                 .rbx = own | PTV_TRACE_F_CR3_MASK,
                                 .r9 = PTV_TRACE_CR3_PCID});
        struct tregs on = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STATUS});
        run_other("while its window is open");
        stop = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STOP});
        tu_report((int64_t)s.rax == PTV_VMCALL_OK && (int64_t)on.rax == PTV_VMCALL_OK &&
                      (on.rbx & PTV_TRACE_ST_ON) && (int64_t)stop.rax == PTV_VMCALL_OK,
                  "its own window opened, read and closed again around the other process",
                  (int64_t)stop.rax);
    }
    printf("ptvisor-guest: trace-user passed=%u failed=%u\n", tu_pass, tu_fail);
    return tu_fail ? 1 : 0;
}

/* ptv-probe trace-own CPU: this process's own window on CPU (pinned there), around the getpid
 * loop, while another copy does the same on the other CPU (guest/init): a window on each vCPU at
 * once, each told only its own figures */
static int do_trace_own(const char *arg)
{
    unsigned long cpu = arg ? strtoul(arg, NULL, 0) : 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        printf("ptvisor-guest: trace-own cpu=%lu error=\"sched_setaffinity: %s\"\n", cpu,
               strerror(errno));
        return 1;
    }
    struct tregs s =
        tcall((struct tregs){.rax = PTV_VMCALL_TRACE_START,
                             .rbx = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK,
                             .r9 = PTV_TRACE_CR3_PCID});
    int on = sched_getcpu();
    getpid_loop();
    struct tregs stop = tcall((struct tregs){.rax = PTV_VMCALL_TRACE_STOP});
    printf("ptvisor-guest: trace-own cpu=%lu ran_on=%d start=%lld stop=%lld instructions=%llu "
           "bytes=%llu\n",
           cpu, on, (long long)(int64_t)s.rax, (long long)(int64_t)stop.rax,
           (unsigned long long)stop.rcx, (unsigned long long)stop.rbx);
    return (int64_t)s.rax == PTV_VMCALL_OK && (int64_t)stop.rax == PTV_VMCALL_OK ? 0 : 1;
}

/* ---- ptrace-step: a debugger's single steps after the trace windows ----
 *
 * PTRACE_SINGLESTEP sets the child's trap flag; each step stops it with SIGTRAP one
 * instruction on, as on bare metal, also after the software tracer stepped with its own trap
 * flag (sw_trace = tf: #DB exits while a frame may hold that TF, and only those single steps
 * are taken as the tracer's). */
static int do_ptrace_step(const char *arg)
{
    const unsigned N = arg ? (unsigned)strtoul(arg, NULL, 0) : 100;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        for (volatile int i = 0; i < 10000; i++)
            ;
        _exit(0);
    }
    int st = 0;
    unsigned steps = 0, moved = 0;
    unsigned long long last = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFSTOPPED(st))
        for (unsigned i = 0; i < N; i++) {
            if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0))
                break;
            if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP)
                break;
            struct user_regs_struct r;
            if (ptrace(PTRACE_GETREGS, pid, 0, &r))
                break;
            steps++;
            moved += r.rip != last;
            last = r.rip;
        }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    printf("ptvisor-guest: ptrace-step stepped=%u of %u, rip moved %u times\n", steps, N, moved);
    return steps == N ? 0 : 1;
}

/* a child on this CPU spins n rounds; its ticks, printed by the child; the parent only waits */
static int do_spin_child(const char *arg)
{
    const unsigned long n = arg ? strtoul(arg, NULL, 0) : 1000000;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    sched_setaffinity(0, sizeof(set), &set);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        volatile unsigned long acc = 0;
        /* the parent blocks in waitpid first: its own way there (under `ptvisor-ctl trace`, the
         * window's stepped code) is not the loop's time */
        usleep(100000);
        uint64_t t0 = rdtsc();
        for (unsigned long i = 0; i < n; i++)
            acc += i;
        uint64_t t1 = rdtsc();
        printf("ptvisor-guest: spin-child rounds=%lu ticks=%llu cpu=%d\n", n,
               (unsigned long long)(t1 - t0), sched_getcpu());
        _exit(acc == 0 && n > 1);
    }
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
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
        return do_exit_stats(argc > 2 ? argv[2] : NULL);
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
    if (strcmp(cmd, "trace-own") == 0)
        return do_trace_own(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "trace-user") == 0)
        return do_trace_user(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "ptrace-step") == 0)
        return do_ptrace_step(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "spin-child") == 0)
        return do_spin_child(argc > 2 ? argv[2] : NULL);
    fprintf(stderr,
            "usage: ptv-probe [view|vmcall-version|exit-stats [CPU]|tsc|rip-wrap|cpuid-loop N "
            "[R]|pin CPU [N]|trace-user [refusals]|ptrace-step [N]|spin-child N]\n");
    return 2;
}
