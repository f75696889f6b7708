/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-ctl: control the VMM's trace of this guest from inside it.  A static
 * user-space program: its VMCALLs are allowed at CPL 3 only with `vmcall_user = trace` in
 * ptvisor.cfg (the operator's opt-in; TRACE_READ stays CPL 0 only).  The trace it starts is
 * the VMM's own (system-mode PT where the CPU has it, else the software tracer), and `dump`
 * sends it to the serial console, where `ptvisor-trace extract` on the host reads it back.
 *
 *   ptvisor-ctl status
 *   ptvisor-ctl start [-k] [-u] [-r LO-HI] [-b N]
 *   ptvisor-ctl stop
 *   ptvisor-ctl dump [-w]
 *   ptvisor-ctl run [-k] [-u] [-r LO-HI] [-b N] [-d] -- CMD [ARG...]
 *   ptvisor-ctl trace [-k|--kernel] [-u|--user] [-r LO-HI] [-b N] [-d] -- CMD [ARG...]
 *   ptvisor-ctl kallsyms [-r LO-HI] [FILE]
 *
 * `trace` traces exactly CMD's process, through its CR3, from its first instruction to its exit
 * (see trace_cmd).  From user space that is all the VMM allows (the CPL 3 rule of
 * include/ptv/vmcall.h, ABI 7): a window is the calling process's own, in user mode, and only
 * that process may stop, dump or read it.  So `run` (everything this CPU runs while CMD runs)
 * and `start` / `stop` / `dump` from a shell (each a process of its own, not the window's) are
 * refused with EACCES, and `status` tells "no window of this process" -- the VMM answering at
 * all says tracing is on offer (what /init checks).
 *
 * `kallsyms` sends the kernel's code symbols (FILE, default /proc/kallsyms, read as root) over
 * the console as a guest note (guest/ptv_note.h), so that the host names kernel addresses in
 * every dump of this boot without a vmlinux; it needs no VMM.  `trace -d` sends a comm note
 * with its dump: the traced program's name and pid, for the host's perf.data.
 *
 * Exit status: 0 done, 1 the VMM refused or is not there (one line on stderr says why),
 * 2 usage.  Every line it prints starts with "ptvisor-ctl: ", but the notes' frame lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptv/vmcall.h"
#include "ptv_note.h"

#define SIGNATURE "ptvisor"

struct regs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, r8, r9, r10;
};

static struct regs vmcall(struct regs in)
{
    register uint64_t r8 __asm__("r8") = in.r8;
    register uint64_t r9 __asm__("r9") = in.r9;
    register uint64_t r10 __asm__("r10") = in.r10;
    __asm__ volatile("vmcall"
                     : "+a"(in.rax), "+b"(in.rbx), "+c"(in.rcx), "+d"(in.rdx), "+S"(in.rsi),
                       "+D"(in.rdi), "+r"(r8), "+r"(r9), "+r"(r10)
                     :
                     : "memory");
    in.r8 = r8;
    in.r9 = r9;
    in.r10 = r10;
    return in;
}

/* `trace`: the VMCALLs that act on the window go through a helper process that shares CMD's
 * address space (its CR3: the window's owner), stopped under ptrace (trace_cmd) */
static pid_t via_pid;
static uint64_t via_stub; /* its VMCALL; INT3 */
#define CTL_EGONE (-100)  /* not the VMM's: the helper is gone */

static int pt_trap(pid_t pid, const char *what);

static struct regs call_vmm(struct regs in)
{
    if (!via_pid)
        return vmcall(in);
    struct user_regs_struct r;
    struct regs out = in;
    out.rax = (uint64_t)(int64_t)CTL_EGONE;
    if (ptrace(PTRACE_GETREGS, via_pid, NULL, &r) < 0)
        return out;
    r.orig_rax = (unsigned long long)-1; /* no system call to restart */
    r.rip = via_stub;
    r.rax = in.rax, r.rbx = in.rbx, r.rcx = in.rcx, r.rdx = in.rdx;
    r.rsi = in.rsi, r.rdi = in.rdi, r.r8 = in.r8, r.r9 = in.r9, r.r10 = in.r10;
    if (ptrace(PTRACE_SETREGS, via_pid, NULL, &r) < 0 || pt_trap(via_pid, "call the VMM") < 0 ||
        ptrace(PTRACE_GETREGS, via_pid, NULL, &r) < 0)
        return out;
    out = (struct regs){.rax = r.rax,
                        .rbx = r.rbx,
                        .rcx = r.rcx,
                        .rdx = r.rdx,
                        .rsi = r.rsi,
                        .rdi = r.rdi,
                        .r8 = r.r8,
                        .r9 = r.r9,
                        .r10 = r.r10};
    return out;
}

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
    __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}

/* ptvisor below this system: the hypervisor bit and the signature of leaf 0x40000000 (a
 * VMCALL without a VMM would raise #UD) */
static unsigned long abi; /* the VMM's VMCALL ABI (check_vmm) */

static int check_vmm(void)
{
    uint32_t a, b, c, d;
    char sig[13] = {0};
    cpuid(1, &a, &b, &c, &d);
    if (!(c >> 31 & 1)) {
        fprintf(stderr, "ptvisor-ctl: no hypervisor below this system (CPUID.1:ECX[31] = 0)\n");
        return -1;
    }
    cpuid(0x40000000, &a, &b, &c, &d);
    memcpy(sig, &b, 4);
    memcpy(sig + 4, &c, 4);
    memcpy(sig + 8, &d, 4);
    if (strcmp(sig, SIGNATURE)) {
        fprintf(stderr, "ptvisor-ctl: the hypervisor below is not ptvisor (signature \"%.12s\")\n",
                sig);
        return -1;
    }
    struct regs v = vmcall((struct regs){.rax = PTV_VMCALL_VERSION});
    if (v.rax != PTV_VMCALL_OK || v.rbx < 5) {
        fprintf(stderr,
                "ptvisor-ctl: ptvisor's VMCALL ABI %lu has no TRACE_DUMP (5 or later needed)\n",
                (unsigned long)v.rbx);
        return -1;
    }
    abi = v.rbx;
    return 0;
}

static const char *err_name(int64_t rc)
{
    switch (rc) {
    case PTV_VMCALL_EPERM:
        return "refused at CPL 3: set vmcall_user = trace in ptvisor.cfg";
    case PTV_VMCALL_EACCES:
        return "refused from user space: a window is one process's own, in user mode, and only "
               "that process may stop, dump or read it (`ptvisor-ctl trace -- CMD`)";
    case CTL_EGONE:
        return "the traced command's address space is gone (its helper was killed)";
    case PTV_VMCALL_EINVAL:
        return "invalid request (filters, budget, or nothing traced on this CPU yet)";
    case PTV_VMCALL_EBUSY:
        return "busy (a window is open, or a dump is going out)";
    case PTV_VMCALL_ENODEV:
        return "no trace source on this machine or in this configuration (sw_trace = off?)";
    case PTV_VMCALL_ENOMEM:
        return "the VMM pool cannot hold the trace ring (vmm_pool, pt_buffer)";
    case PTV_VMCALL_ENOSYS:
        return "unknown call (an older VMM?)";
    default:
        return "unknown error";
    }
}

static int fail(const char *what, int64_t rc)
{
    fprintf(stderr, "ptvisor-ctl: %s: %s (%lld)\n", what, err_name(rc), (long long)rc);
    return 1;
}

static void print_status(const struct regs *s)
{
    printf("ptvisor-ctl: status %s%s%s%s%s%s source=%s ring=%lu written=%lu instructions=%lu "
           "gaps=%lu events=%lu\n",
           s->rbx & PTV_TRACE_ST_ON ? "on" : "off", s->rbx & PTV_TRACE_ST_WRAPPED ? ",wrapped" : "",
           s->rbx & PTV_TRACE_ST_STOPPED ? ",stopped" : "",
           s->rbx & PTV_TRACE_ST_BUDGET ? ",budget" : "",
           s->rbx & PTV_TRACE_ST_DUMPING ? ",dumping" : "",
           s->rbx & PTV_TRACE_ST_FREE_CPL ? ",free-cpl" : "",
           s->rbx & PTV_TRACE_ST_SOFTWARE ? "software" : "hardware", (unsigned long)s->rcx,
           (unsigned long)s->rdx, (unsigned long)s->rsi, (unsigned long)s->rdi,
           (unsigned long)s->r8);
}

static int status(void)
{
    struct regs s = call_vmm((struct regs){.rax = PTV_VMCALL_TRACE_STATUS});
    if ((int64_t)s.rax == PTV_VMCALL_EACCES && !via_pid) {
        /* the VMM answered: tracing is on offer, and no window here is this process's */
        printf("ptvisor-ctl: status: no window of this process on this CPU (from user space "
               "only a process's own window is shown: `ptvisor-ctl trace -- CMD`)\n");
        return 0;
    }
    if (s.rax != PTV_VMCALL_OK)
        return fail("status", (int64_t)s.rax);
    print_status(&s);
    return 0;
}

struct opts {
    uint32_t flags;
    uint64_t lo, hi, budget;
    int wait, dump;
};

static int start(const struct opts *o)
{
    struct regs r = vmcall((struct regs){.rax = PTV_VMCALL_TRACE_START,
                                         .rbx = o->flags,
                                         .rdx = o->lo,
                                         .rsi = o->hi,
                                         .r8 = o->budget});
    if (r.rax != PTV_VMCALL_OK)
        return fail("start", (int64_t)r.rax);
    printf("ptvisor-ctl: tracing (%s, ring %lu bytes)\n",
           r.rbx == PTV_TRACE_SRC_HARDWARE ? "Intel PT" : "software tracer", (unsigned long)r.rcx);
    return 0;
}

static int stop(void)
{
    struct regs r = call_vmm((struct regs){.rax = PTV_VMCALL_TRACE_STOP});
    if (r.rax != PTV_VMCALL_OK)
        return fail("stop", (int64_t)r.rax);
    printf("ptvisor-ctl: stopped: %lu bytes, %lu instructions, %lu gaps, %lu events\n",
           (unsigned long)r.rbx, (unsigned long)r.rcx, (unsigned long)r.rsi, (unsigned long)r.rdi);
    return 0;
}

/* notes go out on standard output, the console: whole lines */
static void note_line(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    fwrite(s, 1, n, stdout);
}

static uint32_t note_id(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (lo ^ hi ^ (uint32_t)getpid() << 16) | 1;
}

/* the program `trace` runs, as the kernel names it (its comm), for the dump's comm note */
static char traced_comm[PTV_NOTE_COMM_MAX + 1];
static pid_t traced_pid;

static void note_traced(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    traced_comm[0] = 0;
    if (f) {
        if (!fgets(traced_comm, sizeof(traced_comm), f))
            traced_comm[0] = 0;
        fclose(f);
    }
    traced_comm[strcspn(traced_comm, "\n")] = 0;
    traced_pid = traced_comm[0] ? pid : 0;
}

/* what: the traced program (its name lets the host pick its symbols: tools/run.sh) */
static int dump(int wait, const char *what)
{
    struct regs r = call_vmm((struct regs){.rax = PTV_VMCALL_TRACE_DUMP});
    if (r.rax != PTV_VMCALL_OK)
        return fail("dump", (int64_t)r.rax);
    if (what && traced_pid) {
        const struct frame_out o = {note_line, NULL};
        ptv_note_comm(note_id(), (uint32_t)r.rbx, (uint64_t)traced_pid, traced_comm, &o);
    }
    if (what) {
        const char *base = strrchr(what, '/');
        printf("ptvisor-ctl: dump %lu of %s going out on the serial console\n",
               (unsigned long)r.rbx, base ? base + 1 : what);
    } else {
        printf("ptvisor-ctl: dump %lu going out on the serial console\n", (unsigned long)r.rbx);
    }
    if (!wait)
        return 0;
    fflush(stdout);
    const struct timespec tick = {0, 20 * 1000 * 1000};
    for (unsigned i = 0;; i++) {
        struct regs s = call_vmm((struct regs){.rax = PTV_VMCALL_TRACE_STATUS});
        if (s.rax != PTV_VMCALL_OK)
            return fail("status", (int64_t)s.rax);
        if (!(s.rbx & PTV_TRACE_ST_DUMPING))
            break;
        if (i == 30000) { /* 10 minutes */
            fprintf(stderr, "ptvisor-ctl: dump %lu still going out after 10 minutes\n",
                    (unsigned long)r.rbx);
            return 1;
        }
        nanosleep(&tick, NULL);
    }
    printf("ptvisor-ctl: dump %lu out\n", (unsigned long)r.rbx);
    return 0;
}

/* CMD (pid) runs in the window: wait for it, close the window, say how it ended, the
 * window's status, and dump it (-d) */
static uint64_t tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* CMD runs in the window from t0 (TSC) until it exits: then the window closes (`trace`: the
 * calls go through the helper, call_vmm) */
static int finish(const struct opts *o, char **cmd, pid_t pid, uint64_t t0)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    uint64_t ticks = tsc() - t0;
    int rc = stop();
    printf("ptvisor-ctl: %s exited with %d (%llu TSC ticks in the window)\n", cmd[0],
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), (unsigned long long)ticks);
    if (!rc)
        rc = status();
    if (!rc && o->dump)
        rc = dump(1, cmd[0]);
    return rc;
}

/* ---- trace: one process through its CR3 ----
 *
 * The window must match CMD's CR3, which exists only after its execve() and which user space
 * cannot read; and from user space only the process a window traces may open, stop, dump or
 * read it (the CPL 3 rule).  So CMD's address space makes every call: ptvisor-ctl runs CMD
 * under ptrace, and at the stop after execve (before CMD's first instruction) makes it
 *   1. map one r-x page (an mmap syscall injected at its entry point, bytes restored after), at
 *      the lowest address a process may map (vm.mmap_min_addr), below all of CMD's code,
 *   2. clone a helper: a process that shares CMD's address space (CLONE_VM, so its CR3, the
 *      window's owner) but is no thread of it, a child of ptvisor-ctl (CLONE_PARENT) under its
 *      ptrace (CLONE_PTRACE), stopped before it runs a single instruction, and kept so; CMD's
 *      exit then leaves the address space (and its CR3) to the helper until the window is
 *      closed: no other process can come to run under that CR3 meanwhile,
 *   3. run a stub on the page: VMCALL TRACE_START with PTV_TRACE_F_USER,
 *      PTV_TRACE_F_CR3_SELF (the CR3 the call runs under), a mask for the PCID (the kernel may
 *      give the process another one), PTV_TRACE_F_START_IP = the entry point (nothing is
 *      traced before CMD's first instruction) and an IP range from the page's end to the top
 *      of the lower half (all of CMD, but not the page: what the helper runs there stays out
 *      of the window), then INT3 (ptvisor-ctl reads the result),
 *   4. then, detached, CPUID (a VM exit: where the tracer steps with the trap flag, stepping
 *      resumes there), RAX..RDX as they were at the entry, and a jump to the entry point.
 * From there the trace is CMD's, and only CMD's, until it exits.  Then ptvisor-ctl has the
 * helper make TRACE_STOP, TRACE_STATUS and TRACE_DUMP at the page's VMCALL (call_vmm), and
 * kills it.  All are pinned to this CPU: the window belongs to one vCPU.  What CMD keeps of
 * this: one more r-x page in its address space, and a process sharing it while CMD runs. */

static int pt_poke(pid_t pid, uint64_t addr, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        if (n - i < 8) { /* keep the bytes after the end */
            errno = 0;
            long old = ptrace(PTRACE_PEEKTEXT, pid, (void *)(addr + i), NULL);
            if (errno)
                return -1;
            w = (uint64_t)old;
        }
        memcpy(&w, b + i, n - i < 8 ? n - i : 8);
        if (ptrace(PTRACE_POKETEXT, pid, (void *)(addr + i), (void *)w) < 0)
            return -1;
    }
    return 0;
}

/* continue the tracee until its next stop; it must be the SIGTRAP of an INT3 (or execve) */
static int pt_trap(pid_t pid, const char *what)
{
    int st;
    if (ptrace(PTRACE_CONT, pid, NULL, NULL) < 0)
        return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP)
        return 0;
    fprintf(stderr, "ptvisor-ctl: trace: %s: the command %s\n", what,
            WIFEXITED(st)     ? "exited"
            : WIFSIGNALED(st) ? "was killed"
                              : "stopped by a signal");
    errno = ECHILD;
    return -1;
}

/* the lowest address a process may map: the stub's page, below all of CMD's code */
static uint64_t low_page(void)
{
    unsigned long min = 0;
    FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "r");
    if (f) {
        if (fscanf(f, "%lu", &min) != 1)
            min = 0;
        fclose(f);
    }
    if (min < 0x10000)
        min = 0x10000;
    return (min + 4095) & ~4095ul;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take the address as a hint */
#endif
#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
#endif

/* one injected system call in the stopped tracee at its entry (the bytes there restored after):
 * its result, or -1 with errno */
static int64_t inject_syscall(pid_t pid, const struct user_regs_struct *r0, uint64_t nr,
                              uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                              uint64_t a5, const char *what)
{
    struct user_regs_struct r = *r0;
    errno = 0;
    uint64_t keep = (uint64_t)ptrace(PTRACE_PEEKTEXT, pid, (void *)r0->rip, NULL);
    if (errno || pt_poke(pid, r0->rip, (const uint8_t[]){0x0f, 0x05, 0xcc}, 3) < 0)
        return -1;
    r.orig_rax = (unsigned long long)-1; /* no syscall restart */
    r.rax = nr;
    r.rdi = a0, r.rsi = a1, r.rdx = a2, r.r10 = a3, r.r8 = a4, r.r9 = a5;
    if (ptrace(PTRACE_SETREGS, pid, NULL, &r) < 0 || pt_trap(pid, what) < 0 ||
        ptrace(PTRACE_GETREGS, pid, NULL, &r) < 0 ||
        pt_poke(pid, r0->rip, (const uint8_t *)&keep, 8) < 0)
        return -1;
    if (r.rax >= (unsigned long long)-4095) {
        errno = (int)-(int64_t)r.rax;
        return -1;
    }
    return (int64_t)r.rax;
}

#define STUB_SIZE 60
static void stub_bytes(uint8_t *b, const struct user_regs_struct *r0)
{
    static const uint8_t head[] = {0x0f, 0x01, 0xc1, /* vmcall */
                                   0xcc,             /* int3 */
                                   0x0f, 0xa2};      /* cpuid */
    const uint64_t val[4] = {r0->rax, r0->rbx, r0->rcx, r0->rdx};
    const uint8_t movabs[4] = {0xb8, 0xbb, 0xb9, 0xba}; /* REX.W B8+r: rax, rbx, rcx, rdx */
    size_t n = 0;
    memcpy(b, head, sizeof(head));
    n = sizeof(head);
    for (int i = 0; i < 4; i++) {
        b[n++] = 0x48;
        b[n++] = movabs[i];
        memcpy(b + n, &val[i], 8);
        n += 8;
    }
    static const uint8_t jmp[] = {0xff, 0x25, 0, 0, 0, 0}; /* jmp [rip + 0] */
    memcpy(b + n, jmp, sizeof(jmp));
    n += sizeof(jmp);
    memcpy(b + n, &r0->rip, 8);
}

static int trace_cmd(const struct opts *o, char **cmd)
{
    if (abi < 7) {
        fprintf(stderr,
                "ptvisor-ctl: trace: ptvisor's VMCALL ABI %lu is older than this ptvisor-ctl "
                "(7 or later needed)\n",
                abi);
        return 1;
    }
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) < 0) {
        fprintf(stderr, "ptvisor-ctl: trace: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0) {
            fprintf(stderr, "ptvisor-ctl: trace: ptrace: %s\n", strerror(errno));
            _exit(127);
        }
        execvp(cmd[0], cmd);
        fprintf(stderr, "ptvisor-ctl: %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        fprintf(stderr, "ptvisor-ctl: fork: %s\n", strerror(errno));
        return 1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFSTOPPED(st)) { /* execve failed: the child said why */
        printf("ptvisor-ctl: %s exited with %d before it ran\n", cmd[0],
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return 1;
    }
    note_traced(pid);
    struct user_regs_struct r0, r;
    const char *step = "read registers";
    uint8_t stub[STUB_SIZE];
    pid_t helper = 0;
    int started = 0;
    int64_t x;
    if (ptrace(PTRACE_GETREGS, pid, NULL, &r0) < 0)
        goto fail;
    /* 1: mmap(low, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | NOREPLACE) */
    step = "map the start stub";
    const uint64_t low = low_page();
    x = inject_syscall(pid, &r0, SYS_mmap, low, 4096, PROT_READ | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0, step);
    if (x < 0 && errno == EEXIST) /* something is there already: anywhere else */
        x = inject_syscall(pid, &r0, SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC,
                           MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0, step);
    if (x < 0)
        goto fail;
    const uint64_t page = (uint64_t)x;
    stub_bytes(stub, &r0);
    step = "write the start stub";
    if (pt_poke(pid, page, stub, sizeof(stub)) < 0)
        goto fail;
    /* 2: the helper, in CMD's address space, stopped by the SIGSTOP a CLONE_PTRACE child gets */
    step = "clone the helper";
    x = inject_syscall(pid, &r0, SYS_clone, CLONE_VM | CLONE_PARENT | CLONE_PTRACE | SIGCHLD, 0, 0,
                       0, 0, 0, step);
    if (x <= 0)
        goto fail;
    helper = (pid_t)x;
    while (waitpid(helper, &st, __WALL) < 0)
        if (errno != EINTR)
            goto fail;
    if (!WIFSTOPPED(st)) {
        errno = ECHILD;
        goto fail;
    }
    ptrace(PTRACE_SETOPTIONS, helper, NULL, (void *)(long)PTRACE_O_EXITKILL);
    /* 3: the stub's TRACE_START */
    step = "start the window in the command";
    uint32_t flags = o->flags | PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_START_IP;
    if (!(o->flags & (PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER)))
        flags |= PTV_TRACE_F_USER; /* user space may trace only user mode */
    uint64_t lo = o->lo, hi = o->hi;
    /* everything above the page (user mode only: the kernel half never counts); where the page
     * could not go lowest, the helper's calls at the end run inside the window (a gap there) */
    if (!(o->flags & PTV_TRACE_F_RANGE) && page == low) {
        flags |= PTV_TRACE_F_RANGE;
        lo = page + 4096;
        hi = ~0ull;
    }
    r = r0;
    r.rip = page;
    r.rax = PTV_VMCALL_TRACE_START;
    r.rbx = flags;
    r.rdx = lo;
    r.rsi = hi;
    r.rdi = r0.rip;
    r.r8 = o->budget;
    r.r9 = PTV_TRACE_CR3_PCID;
    if (ptrace(PTRACE_SETREGS, pid, NULL, &r) < 0 || pt_trap(pid, step) < 0 ||
        ptrace(PTRACE_GETREGS, pid, NULL, &r) < 0)
        goto fail;
    if ((int64_t)r.rax != PTV_VMCALL_OK) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        kill(helper, SIGKILL);
        waitpid(helper, &st, __WALL);
        if ((int64_t)r.rax == PTV_VMCALL_EINVAL && !(o->flags & PTV_TRACE_F_RANGE))
            fprintf(stderr, "ptvisor-ctl: trace: the VMM refused a one-process window (system-mode "
                            "PT has no start trigger; sw_trace = on picks the software tracer)\n");
        return fail("trace", (int64_t)r.rax);
    }
    started = 1;
    via_pid = helper; /* from here the window's calls are the helper's */
    via_stub = page;
    printf("ptvisor-ctl: tracing pid %d (%s) from its entry %#llx (%s, ring %lu bytes)\n", pid,
           cmd[0], (unsigned long long)r0.rip,
           r.rbx == PTV_TRACE_SRC_HARDWARE ? "Intel PT" : "software tracer", (unsigned long)r.rcx);
    fflush(stdout);
    /* 4: CMD's registers but RIP at the stub's CPUID; detached, it goes on alone */
    step = "let the command run";
    r = r0;
    r.rip = page + 4;
    uint64_t t0 = tsc();
    if (ptrace(PTRACE_SETREGS, pid, NULL, &r) < 0 || ptrace(PTRACE_DETACH, pid, NULL, NULL) < 0)
        goto fail;
    int rc = finish(o, cmd, pid, t0);
    via_pid = 0;
    kill(helper, SIGKILL);
    waitpid(helper, &st, __WALL);
    return rc;
fail:
    fprintf(stderr, "ptvisor-ctl: trace: %s: %s\n", step, strerror(errno));
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    if (started)
        stop();
    via_pid = 0;
    if (helper > 0) {
        kill(helper, SIGKILL);
        waitpid(helper, &st, __WALL);
    }
    return 1;
}

/* kallsyms [-r LO-HI] [FILE]: the kernel's code symbols as a note on the console */
static int kallsyms(int argc, char **argv)
{
    const char *path = "/proc/kallsyms", *why;
    uint64_t lo = 0, hi = ~0ull;
    for (int i = 2; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            const char *r = argv[++i];
            errno = 0;
            lo = strtoull(r, &end, 16);
            if (errno || *end != '-' || (hi = strtoull(end + 1, &end, 16), errno || *end) ||
                lo > hi) {
                fprintf(stderr, "ptvisor-ctl: kallsyms: -r: expected LO-HI in hex: '%s'\n", r);
                return 2;
            }
        } else if (argv[i][0] == '-' || i + 1 < argc) {
            fprintf(stderr, "ptvisor-ctl: kallsyms: unexpected argument '%s'\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    /* /proc files have no size: read to the end */
    FILE *f = fopen(path, "r");
    char *text = NULL, *data;
    size_t len = 0, cap = 0, dlen;
    unsigned nsym;
    if (!f) {
        fprintf(stderr, "ptvisor-ctl: kallsyms: %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? 2 * cap : 1 << 20;
            char *t = realloc(text, cap);
            if (!t) {
                fprintf(stderr, "ptvisor-ctl: kallsyms: out of memory\n");
                free(text);
                fclose(f);
                return 1;
            }
            text = t;
        }
        size_t r = fread(text + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "ptvisor-ctl: kallsyms: %s: read error\n", path);
        free(text);
        return 1;
    }
    if (ptv_note_kallsyms_data(text, len, lo, hi, &data, &dlen, &nsym, &why) != 0) {
        fprintf(stderr, "ptvisor-ctl: kallsyms: %s: %s\n", path, why);
        free(text);
        return 1;
    }
    free(text);
    /* stdout is line-buffered (main): each line goes out in one write, never split around
     * another process's console output */
    const struct frame_out o = {note_line, NULL};
    int rc = ptv_note_data(note_id(), "kallsyms", (const uint8_t *)data, dlen, &o);
    fflush(stdout);
    free(data);
    if (rc) {
        fprintf(stderr, "ptvisor-ctl: kallsyms: the note could not be encoded\n");
        return 1;
    }
    printf("ptvisor-ctl: kallsyms: %u code symbols of %s sent (%zu bytes before compression)\n",
           nsym, path, dlen);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: ptvisor-ctl status\n"
                    "       ptvisor-ctl start [-k] [-u] [-r LO-HI] [-b N]\n"
                    "       ptvisor-ctl stop\n"
                    "       ptvisor-ctl dump [-w]\n"
                    "       ptvisor-ctl run [-k] [-u] [-r LO-HI] [-b N] [-d] -- CMD [ARG...]\n"
                    "       ptvisor-ctl trace [-k] [-u] [-r LO-HI] [-b N] [-d] -- CMD [ARG...]\n"
                    "       ptvisor-ctl kallsyms [-r LO-HI] [FILE]\n"
                    "  trace: CMD's process only (its CR3), user mode, from its first instruction\n"
                    "  to its exit; run: everything this CPU runs while CMD runs\n"
                    "  -k  trace the kernel (CPL 0)      -u  trace user space (CPL > 0)\n"
                    "      (neither: the VMM's configured pt_filter; trace: -u)\n"
                    "  -r  only instructions in [LO, HI] (hex)\n"
                    "  -b  close the window after N instructions (software tracer only)\n"
                    "  -w  wait until the dump is out     -d  run: dump when CMD is done (waits)\n"
                    "Needs vmcall_user = trace in ptvisor.cfg.  From user space the VMM allows a\n"
                    "process its own window only (user mode, no -k, no -b) and only that process\n"
                    "may stop, dump or read it: `trace` is the command that works; run, start,\n"
                    "stop and dump are refused there.  The dump goes to the serial console; on\n"
                    "the host: ptvisor-trace extract LOG -o DIR.  kallsyms: the kernel's code\n"
                    "symbols (FILE: /proc/kallsyms, as root) over the console, once per boot, for\n"
                    "the host to name kernel addresses (-r: only those in [LO, HI]).\n");
    return 2;
}

static int parse(int argc, char **argv, struct opts *o, int *first)
{
    int i;
    for (i = 2; i < argc; i++) {
        char *a = argv[i], *end;
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-k") || !strcmp(a, "--kernel")) {
            o->flags |= PTV_TRACE_F_KERNEL;
        } else if (!strcmp(a, "-u") || !strcmp(a, "--user")) {
            o->flags |= PTV_TRACE_F_USER;
        } else if (!strcmp(a, "-w")) {
            o->wait = 1;
        } else if (!strcmp(a, "-d")) {
            o->dump = 1;
        } else if (!strcmp(a, "-b") && i + 1 < argc) {
            errno = 0;
            o->budget = strtoull(argv[++i], &end, 0);
            if (errno || *end || !o->budget) {
                fprintf(stderr, "ptvisor-ctl: -b: not an instruction count: '%s'\n", argv[i]);
                return -1;
            }
        } else if (!strcmp(a, "-r") && i + 1 < argc) {
            const char *r = argv[++i];
            errno = 0;
            o->lo = strtoull(r, &end, 16);
            if (errno || *end != '-' || (o->hi = strtoull(end + 1, &end, 16), errno || *end) ||
                o->lo > o->hi) {
                fprintf(stderr, "ptvisor-ctl: -r: expected LO-HI in hex, LO <= HI: '%s'\n", r);
                return -1;
            }
            o->flags |= PTV_TRACE_F_RANGE;
        } else {
            fprintf(stderr, "ptvisor-ctl: unknown option '%s'\n", a);
            return -1;
        }
    }
    *first = i;
    return 0;
}

/* trace CMD: start, fork + exec, wait, stop (and dump): the window holds CMD and, unless
 * filtered out, whatever else this CPU ran meanwhile */
static int run(const struct opts *o, char **cmd)
{
    fflush(stdout);
    int rc = start(o);
    if (rc)
        return rc;
    uint64_t t0 = tsc();
    pid_t pid = fork();
    if (pid == 0) {
        execvp(cmd[0], cmd);
        fprintf(stderr, "ptvisor-ctl: %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        fprintf(stderr, "ptvisor-ctl: fork: %s\n", strerror(errno));
        rc = stop();
        if (!rc)
            rc = status();
        if (!rc && o->dump)
            dump(1, cmd[0]);
        return 1;
    }
    return finish(o, cmd, pid, t0);
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    int first;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return usage();
    const char *c = argv[1];
    if (!strcmp(c, "kallsyms"))
        return kallsyms(argc, argv);
    if (strcmp(c, "status") && strcmp(c, "start") && strcmp(c, "stop") && strcmp(c, "dump") &&
        strcmp(c, "run") && strcmp(c, "trace"))
        return usage();
    if (parse(argc, argv, &o, &first))
        return 2;
    int with_cmd = !strcmp(c, "run") || !strcmp(c, "trace");
    if (with_cmd ? first >= argc : first < argc) {
        if (with_cmd)
            fprintf(stderr, "ptvisor-ctl: %s: no command after --\n", c);
        else
            fprintf(stderr, "ptvisor-ctl: unexpected arguments\n");
        return 2;
    }
    if (check_vmm())
        return 1;
    if (!strcmp(c, "status"))
        return status();
    if (!strcmp(c, "start"))
        return start(&o);
    if (!strcmp(c, "stop"))
        return stop();
    if (!strcmp(c, "dump"))
        return dump(o.wait, NULL);
    if (!strcmp(c, "trace"))
        return trace_cmd(&o, argv + first);
    return run(&o, argv + first);
}
