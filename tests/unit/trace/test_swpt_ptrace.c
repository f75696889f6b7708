/* SPDX-License-Identifier: MIT */
/*
 * The ptrace oracle of the software PT generator: real programs single-stepped with
 * PTRACE_SINGLESTEP; at every step the RIP, the code bytes from /proc/PID/mem, the VMM's
 * classifier (vmm/trace/x86_class.c) and the generator (vmm/trace/swpt.c) fed as the VMM
 * feeds them.  The kernel is outside the filter: a SYSCALL step is a SYSCALL-class
 * instruction into a fake kernel IP at CPL 0 and a SYSRET-class one back; a signal delivery
 * an event from the interrupted RIP into the kernel and an IRET-class return to the handler;
 * a scheduler switch between two processes an event, a MOV CR3 (CR3 = a per-process value)
 * and an IRET.  Each code page is recorded the first time it runs and libipt decodes from
 * exactly those bytes, per CR3; its instruction sequence must be the stepped one.
 *
 * Exit 77 (SKIP) with the reason when ptrace is not permitted here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <intel-pt.h>

#include "trace/swpt.h"
#include "trace/x86_class.h"
#include "fakes/ptrace_probe.h"
#include "fakes/swpt_dec.h"

#define KSYS     0xffffffff81000000ull /* fake kernel: syscall entry */
#define KSIG     0xffffffff81001000ull /* signal delivery */
#define KSCHED   0xffffffff81002000ull /* scheduler: MOV CR3 then IRET */
#define USER_TOP 0x00007fffffffffffull
#define PG       4096ull

static const struct x86_insn I_SYSRET = {.len = 3, .branch = X86_BR_SYSRET};
static const struct x86_insn I_IRET = {.len = 2, .branch = X86_BR_IRET};
static const struct x86_insn I_MOVCR3 = {.len = 3, .branch = X86_BR_NONE, .flags = X86_F_MOV_CR3};

static char helper_dir[4096];

/* ---- the code bytes that ran, per address space ---- */

#define HBITS 15
struct page {
    uint64_t cr3, va;
    struct page *next;
    uint8_t b[PG];
};
static struct page *pages[1u << HBITS];
static size_t npages;

static unsigned hash(uint64_t cr3, uint64_t va)
{
    return (unsigned)((((va >> 12) ^ (cr3 << 20)) * 0x9e3779b97f4a7c15ull) >> (64 - HBITS));
}

static struct page *page_find(uint64_t cr3, uint64_t va)
{
    for (struct page *p = pages[hash(cr3, va)]; p; p = p->next)
        if (p->cr3 == cr3 && p->va == va)
            return p;
    return NULL;
}

static struct page *page_record(uint64_t cr3, uint64_t va, int memfd)
{
    struct page *p = page_find(cr3, va);

    if (p)
        return p;
    p = malloc(sizeof(*p));
    assert_non_null(p);
    if (pread(memfd, p->b, PG, (off_t)va) != (ssize_t)PG) {
        free(p);
        return NULL;
    }
    p->cr3 = cr3;
    p->va = va;
    p->next = pages[hash(cr3, va)];
    pages[hash(cr3, va)] = p;
    npages++;
    return p;
}

static void pages_free(void)
{
    for (size_t i = 0; i < (1u << HBITS); i++)
        while (pages[i]) {
            struct page *n = pages[i]->next;
            free(pages[i]);
            pages[i] = n;
        }
    npages = 0;
}

/* up to `size` recorded bytes at ip (crossing into the next recorded page) */
static int recorded(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip)
{
    size_t n = 0;

    while (n < size) {
        const struct page *p = page_find(cr3, (ip + n) & ~(PG - 1));
        if (!p)
            break;
        size_t off = (ip + n) & (PG - 1), k = PG - off;
        k = k < size - n ? k : size - n;
        memcpy(buf + n, p->b + off, k);
        n += k;
    }
    return (int)n;
}

/* ---- tracees ---- */

struct proc {
    const char *name;
    pid_t pid;
    int memfd;
    uint64_t cr3, rip;
    int pending_sig;
    bool exited;
    uint64_t steps;
};

struct oracle {
    struct swpt t;
    struct swpt_ring ring;
    uint64_t tsc;
    uint64_t *exp_ip, *exp_cr3;
    size_t nexp, cap, pos;
    uint64_t default_cr3;
    uint64_t steps, syscalls, signals, switches, rep_iters;
    char err[300];
};

static void expect(struct oracle *o, uint64_t ip, uint64_t cr3)
{
    if (o->nexp == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1 << 20;
        o->exp_ip = realloc(o->exp_ip, o->cap * sizeof(uint64_t));
        o->exp_cr3 = realloc(o->exp_cr3, o->cap * sizeof(uint64_t));
        assert_non_null(o->exp_ip);
        assert_non_null(o->exp_cr3);
    }
    o->exp_ip[o->nexp] = ip;
    o->exp_cr3[o->nexp++] = cr3;
}

static struct swpt_ctx uctx(const struct proc *p)
{
    return (struct swpt_ctx){.cr3 = p->cr3, .cpl = 3, .cs = X86_CODE64};
}

static struct swpt_ctx kctx(const struct proc *p)
{
    return (struct swpt_ctx){.cr3 = p->cr3, .cpl = 0, .cs = X86_CODE64};
}

static uint64_t get_rip(pid_t pid)
{
    struct user_regs_struct r;

    if (ptrace(PTRACE_GETREGS, pid, NULL, &r) != 0)
        fail_msg("PTRACE_GETREGS: %s", strerror(errno));
    return r.rip;
}

static void proc_start(struct proc *p, const char *name, char *const argv[], uint64_t cr3)
{
    int st;
    char path[64];

    memset(p, 0, sizeof(*p));
    p->name = name;
    p->cr3 = cr3;
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP)
        fail_msg("%s: no exec stop (status %#x)", name, st);
    ptrace(PTRACE_SETOPTIONS, p->pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)p->pid);
    p->memfd = open(path, O_RDONLY);
    assert_true(p->memfd >= 0);
    p->rip = get_rip(p->pid);
}

static void proc_end(struct proc *p)
{
    int st;

    if (!p->exited) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
        p->exited = true;
    }
    close(p->memfd);
}

/* SigCgt of /proc/PID/status: the signal has a handler */
static bool sig_caught(pid_t pid, int sig)
{
    char path[64], line[256];
    unsigned long long mask = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return false;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    fclose(f);
    return (mask >> (sig - 1)) & 1;
}

static void classify(struct oracle *o, struct proc *p, uint64_t ip, struct x86_insn *in)
{
    uint8_t b[X86_MAX_INSN];

    /* the bytes that run: their pages are recorded at first execution */
    if (!page_record(p->cr3, ip & ~(PG - 1), p->memfd))
        fail_msg("%s: code at %#llx unreadable", p->name, (unsigned long long)ip);
    if ((ip & (PG - 1)) > PG - X86_MAX_INSN)
        page_record(p->cr3, (ip & ~(PG - 1)) + PG, p->memfd);
    int n = recorded(b, sizeof(b), p->cr3, ip);
    int r = x86_classify(b, (size_t)n, X86_CODE64, in);
    if (r != 0)
        fail_msg("%s: x86_classify %d at %#llx: %02x %02x %02x %02x %02x %02x", p->name, r,
                 (unsigned long long)ip, b[0], b[1], b[2], b[3], b[4], b[5]);
}

/* the instruction at ip completed; the program goes on at nrip */
static void completed(struct oracle *o, struct proc *p, uint64_t ip, const struct x86_insn *in,
                      uint64_t nrip)
{
    struct swpt_ctx u = uctx(p), k = kctx(p);
    uint64_t fall = ip + in->len;

    o->tsc += 100;
    if (in->branch == X86_BR_SYSCALL) {
        expect(o, ip, p->cr3);
        swpt_insn(&o->t, ip, in, KSYS, &k, o->tsc);
        o->syscalls++;
        if (!p->exited)
            swpt_insn(&o->t, KSYS, &I_SYSRET, nrip, &u, o->tsc);
        return;
    }
    if ((in->flags & X86_F_REP) && nrip == ip) { /* one iteration of a REP string op */
        swpt_insn(&o->t, ip, in, ip, &u, o->tsc);
        o->rep_iters++;
        return;
    }
    bool ok;
    switch (in->branch) {
    case X86_BR_NONE:
        ok = nrip == fall;
        break;
    case X86_BR_JCC:
        ok = nrip == fall || nrip == x86_direct_target(ip, in, X86_CODE64);
        break;
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
        ok = nrip == x86_direct_target(ip, in, X86_CODE64);
        break;
    case X86_BR_JMP_INDIRECT:
    case X86_BR_CALL_INDIRECT:
    case X86_BR_RET:
        ok = true;
        break;
    default:
        ok = false;
        break;
    }
    if (!ok)
        fail_msg("%s: %s at %#llx went to %#llx", p->name, x86_branch_name(in->branch),
                 (unsigned long long)ip, (unsigned long long)nrip);
    expect(o, ip, p->cr3);
    swpt_insn(&o->t, ip, in, nrip, &u, o->tsc);
}

/* one PTRACE_SINGLESTEP, with whatever it turned out to be */
static void proc_step(struct oracle *o, struct proc *p)
{
    int st, sig = p->pending_sig;
    bool handler = sig && sig_caught(p->pid, sig);
    uint64_t ip = p->rip;
    struct x86_insn in;

    p->pending_sig = 0;
    if (!handler)
        classify(o, p, ip, &in);
    if (ptrace(PTRACE_SINGLESTEP, p->pid, NULL, (void *)(long)sig) != 0)
        fail_msg("PTRACE_SINGLESTEP: %s", strerror(errno));
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    p->steps++;
    o->steps++;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
        p->exited = true;
        if (!handler) /* exit_group: a syscall that never returns */
            completed(o, p, ip, &in, KSYS);
        return;
    }
    int stop = WSTOPSIG(st);
    uint64_t nrip = get_rip(p->pid);
    p->rip = nrip;
    if (stop != SIGTRAP)
        p->pending_sig = stop;
    if (handler) { /* the kernel built a frame: the handler's first instruction is next */
        struct swpt_ctx u = uctx(p), k = kctx(p);
        swpt_event(&o->t, ip, KSIG, &k, o->tsc);
        swpt_insn(&o->t, KSIG, &I_IRET, nrip, &u, o->tsc);
        o->signals++;
        return;
    }
    if (stop != SIGTRAP && nrip == ip)
        return; /* a signal stopped it before the instruction ran */
    completed(o, p, ip, &in, nrip);
}

/* a timer interrupt, the kernel switches to process b: event, MOV CR3, IRET */
static void sched_switch(struct oracle *o, struct proc *a, struct proc *b)
{
    struct swpt_ctx ka = kctx(a), kb = kctx(b), ub = uctx(b);

    o->tsc += 1000;
    swpt_event(&o->t, a->rip, KSCHED, &ka, o->tsc);
    swpt_insn(&o->t, KSCHED, &I_MOVCR3, KSCHED + 3, &kb, o->tsc);
    swpt_insn(&o->t, KSCHED + 3, &I_IRET, b->rip, &ub, o->tsc);
    o->switches++;
}

/* ---- decode and compare ---- */

static int read_cb(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx)
{
    const struct oracle *o = ctx;

    return recorded(buf, size, cr3 == SWPT_DEC_NO_CR3 ? o->default_cr3 : cr3, ip);
}

static int match_cb(uint64_t ip, uint64_t cr3, void *ctx)
{
    struct oracle *o = ctx;

    if (o->pos >= o->nexp || o->exp_ip[o->pos] != ip ||
        (cr3 != SWPT_DEC_NO_CR3 && cr3 != o->exp_cr3[o->pos])) {
        snprintf(o->err, sizeof(o->err),
                 "decoded #%zu %#llx (cr3 %#llx), stepped %#llx (cr3 %#llx)", o->pos,
                 (unsigned long long)ip, (unsigned long long)cr3,
                 o->pos < o->nexp ? (unsigned long long)o->exp_ip[o->pos] : 0ull,
                 o->pos < o->nexp ? (unsigned long long)o->exp_cr3[o->pos] : 0ull);
        return 1;
    }
    o->pos++;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct {
    uint64_t steps, insns, bytes, syscalls, signals, switches;
    double step_s, decode_s;
} total;

static void oracle_init(struct oracle *o, const struct swpt_cfg *cfg, const struct proc *first)
{
    struct swpt_ctx u = uctx(first);
    const char *why;

    memset(o, 0, sizeof(*o));
    assert_int_equal(swpt_cfg_check(cfg, &why), 0);
    o->ring = (struct swpt_ring){.size = 64u << 20, .stop_on_full = true};
    o->ring.buf = malloc(o->ring.size);
    assert_non_null(o->ring.buf);
    o->default_cr3 = first->cr3;
    swpt_start(&o->t, cfg, &o->ring, &u, first->rip, 0);
}

static void oracle_check(struct oracle *o, const char *what, double t_step)
{
    struct swpt_dec_stats st;
    unsigned counts[SWPT_PKT_TYPES];
    char err[300];
    size_t whole;
    double t0;

    assert_false(o->ring.stopped);
    if (swpt_pkt_scan(o->ring.buf, o->ring.head, counts, &whole, err, sizeof(err)) != 0)
        fail_msg("%s: %s", what, err);
    assert_int_equal(whole, o->ring.head);
    t0 = now_s();
    o->pos = 0;
    if (swpt_decode(o->ring.buf, o->ring.head, read_cb, match_cb, o, &st, err, sizeof(err)) != 0)
        fail_msg("%s: %s; %s", what, err, o->err);
    double t_dec = now_s() - t0;
    assert_int_equal(o->pos, o->nexp);
    assert_int_equal(o->t.traced, o->nexp); /* what a CPL 3 owner is told */
    print_message("%-26s %8llu steps %8zu insns %4llu syscalls %2llu signals %3llu switches "
                  "%7llu PT bytes (%.3f B/insn) PIP %u, step %.2f s, decode %.3f s\n",
                  what, (unsigned long long)o->steps, o->nexp, (unsigned long long)o->syscalls,
                  (unsigned long long)o->signals, (unsigned long long)o->switches,
                  (unsigned long long)o->ring.head, (double)o->ring.head / (double)o->nexp,
                  counts[ppt_pip], t_step, t_dec);
    total.steps += o->steps;
    total.insns += o->nexp;
    total.bytes += o->ring.head;
    total.syscalls += o->syscalls;
    total.signals += o->signals;
    total.switches += o->switches;
    total.step_s += t_step;
    total.decode_s += t_dec;
    free(o->ring.buf);
    free(o->exp_ip);
    free(o->exp_cr3);
    pages_free();
}

/* one program, user-only filter (RTIT_CTL.User = 1, OS = 0) */
static void run_one(const char *name, char *const argv[], unsigned min_signals, uint64_t max_steps)
{
    const struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = 1u << 14};
    struct oracle o;
    struct proc p;
    double t0 = now_s();

    proc_start(&p, name, argv, 0x1000);
    oracle_init(&o, &cfg, &p);
    while (!p.exited && p.steps < max_steps)
        proc_step(&o, &p);
    swpt_stop(&o.t, p.exited ? KSYS : p.rip);
    proc_end(&p);
    assert_true(o.nexp > 1000);
    assert_true(o.signals >= min_signals);
    oracle_check(&o, name, now_s() - t0);
}

static char *sig_path(void)
{
    static char path[4200];

    snprintf(path, sizeof(path), "%s/swpt_sig", helper_dir);
    return path;
}

static void test_busybox(void **state)
{
    char *const argv[] = {(char *)"/bin/busybox", (char *)"ls", (char *)"-l", (char *)"/etc", NULL};

    (void)state;
    run_one("busybox ls -l /etc", argv, 0, 250000);
}

static void test_sort(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/passwd", NULL};

    (void)state;
    run_one("sort /etc/passwd", argv, 0, 250000);
}

static void test_sha256sum(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sha256sum", (char *)"/etc/hostname", NULL};

    (void)state;
    run_one("sha256sum /etc/hostname", argv, 0, 150000);
}

static void test_signals(void **state)
{
    char *const argv[] = {sig_path(), NULL};

    (void)state;
    run_one("swpt_sig (signals)", argv, 5, 1000000);
}

/* two processes interleaved by a scheduler, each its own CR3; OS = 1 so that PIPs are
 * written (SDM 33.4.2.7), user code only by an IP range, so PacketEn = 0 in the kernel */
static void test_two_processes(void **state)
{
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true, .nranges = 1},
                           .psb_period = 1u << 14};
    char *const a_argv[] = {(char *)"/bin/ls", (char *)"/", NULL};
    char *const b_argv[] = {sig_path(), NULL};
    struct oracle o;
    struct proc p[2];
    unsigned cur = 0;
    double t0 = now_s();

    (void)state;
    cfg.filter.range[0].hi = USER_TOP;
    proc_start(&p[0], "ls /", a_argv, 0x11000);
    proc_start(&p[1], "swpt_sig", b_argv, 0x22000);
    oracle_init(&o, &cfg, &p[0]);
    while (!(p[0].exited && p[1].exited) && o.steps < 500000) {
        struct proc *a = &p[cur];
        for (unsigned i = 0; i < 3000 && !a->exited; i++)
            proc_step(&o, a);
        struct proc *b = &p[cur ^ 1];
        if (b->exited)
            continue;
        if (a->exited) /* the kernel switches from the dead one */
            a->rip = KSYS;
        sched_switch(&o, a, b);
        cur ^= 1;
    }
    swpt_stop(&o.t, p[cur].rip);
    proc_end(&p[0]);
    proc_end(&p[1]);
    assert_true(o.switches >= 4);
    oracle_check(&o, "ls / + swpt_sig, scheduled", now_s() - t0);
}

static void test_summary(void **state)
{
    (void)state;
    print_message(
        "TOTAL: %llu instructions verified (%llu steps) in 6 runs of 5 programs, %llu syscalls, "
        "%llu signals, %llu CR3 switches; %llu PT bytes = %.3f bytes/instruction; "
        "stepping %.1f s (%.2f us/step), libipt decode %.2f s (%.0f ns/insn)\n",
        (unsigned long long)total.insns, (unsigned long long)total.steps,
        (unsigned long long)total.syscalls, (unsigned long long)total.signals,
        (unsigned long long)total.switches, (unsigned long long)total.bytes,
        (double)total.bytes / (double)total.insns, total.step_s,
        total.step_s * 1e6 / (double)total.steps, total.decode_s,
        total.decode_s * 1e9 / (double)total.insns);
    assert_true(total.insns >= 1000000);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busybox),       cmocka_unit_test(test_sort),
        cmocka_unit_test(test_sha256sum),     cmocka_unit_test(test_signals),
        cmocka_unit_test(test_two_processes), cmocka_unit_test(test_summary),
    };
    const char *why;
    ssize_t n = readlink("/proc/self/exe", helper_dir, sizeof(helper_dir) - 1);

    (void)argc;
    (void)argv;
    if (n <= 0) {
        printf("SKIP: /proc/self/exe unreadable\n");
        return 77;
    }
    helper_dir[n] = 0;
    *strrchr(helper_dir, '/') = 0;
    why = ptrace_unavailable();
    if (why) {
        printf("SKIP: ptrace not permitted here: %s\n", why);
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
