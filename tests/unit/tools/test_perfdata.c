/* SPDX-License-Identifier: MIT */
/*
 * `ptvisor-trace perf` against Debian's perf: a real program single-stepped with ptrace, each
 * step classified by the VMM's classifier (vmm/trace/x86_class.c) and fed to the VMM's
 * software PT generator (vmm/trace/swpt.c) as test_swpt_ptrace.c does, written as a dump
 * directory (the contract of tools/ptvisor-trace/ptt.h: the PT bytes, the code pages that
 * ran as snapshots), exported by the tool, decoded by `perf script --itrace=i1i` with HOME
 * an empty directory.  perf's instruction sequence must be the stepped one, exactly; its
 * branch view (--itrace=b) the stepped taken branches; with -e libc@BASE and -k vmlinux the
 * symbols perf prints must be those of the files.
 *
 *   test_perfdata PTVISOR-TRACE     (the tool binary)
 *
 * Also checks the perf.data image with pd_parse and the writer's refusals.  Prints the
 * figure `make bench` takes: perf's decode rate in instructions per second.
 * Exit 77 (SKIP) with the reason when perf is not installed or ptrace is not permitted.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
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
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakes/ptrace_probe.h"

#include "trace/swpt.h"
#include "trace/x86_class.h"
#include "perfdata.h"

#define KSYS 0xffffffff81000000ull /* fake kernel syscall entry: SYSRETQ */
#define PG   4096ull

static const char *tool;    /* the ptvisor-trace binary */
static char perf_bin[4096]; /* perf */
static char work[4096];     /* scratch directory */
static char home[4200];     /* empty HOME for perf */

static const struct x86_insn I_SYSRET = {.len = 3, .branch = X86_BR_SYSRET};
static const uint8_t SYSRETQ[3] = {0x48, 0x0f, 0x07};

/* ---- recorded code pages (one address space per run) ---- */

struct page {
    uint64_t va;
    uint8_t b[PG];
};

struct pages {
    struct page *p;
    size_t n, cap;
};

static struct page *page_find(const struct pages *v, uint64_t va)
{
    for (size_t i = v->n; i-- > 0;)
        if (v->p[i].va == va)
            return &v->p[i];
    return NULL;
}

static bool page_record(struct pages *v, int memfd, uint64_t va)
{
    if (page_find(v, va))
        return true;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 256;
        v->p = realloc(v->p, v->cap * sizeof(*v->p));
        assert_non_null(v->p);
    }
    if (pread(memfd, v->p[v->n].b, PG, (off_t)va) != (ssize_t)PG)
        return false;
    v->p[v->n++].va = va;
    return true;
}

/* ---- the traced run ---- */

struct run {
    struct swpt t;
    struct swpt_ring ring;
    uint64_t *ip; /* stepped instructions, in order */
    uint8_t *br;  /* their enum x86_branch */
    uint8_t *len;
    size_t n, cap;
    uint64_t syscalls, tsc;
    uint64_t stop_ip; /* where tracing stopped: the last instruction went there */
    bool kernel;      /* OS = 1: the fake kernel code runs traced */
    uint64_t cr3;     /* its address space in the dump */
    struct pages pages;
    uint64_t libc_base;
    char libc[4096];
};

static void run_free(struct run *r)
{
    free(r->ring.buf);
    free(r->ip);
    free(r->br);
    free(r->len);
    free(r->pages.p);
    memset(r, 0, sizeof(*r));
}

static void expect(struct run *r, uint64_t ip, const struct x86_insn *in)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1 << 16;
        r->ip = realloc(r->ip, r->cap * sizeof(*r->ip));
        r->br = realloc(r->br, r->cap);
        r->len = realloc(r->len, r->cap);
        assert_true(r->ip && r->br && r->len);
    }
    r->ip[r->n] = ip;
    r->br[r->n] = in->branch;
    r->len[r->n++] = in->len;
}

static uint64_t get_rip(pid_t pid)
{
    struct user_regs_struct regs;

    if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0)
        fail_msg("PTRACE_GETREGS: %s", strerror(errno));
    return regs.rip;
}

/* where libc's lowest page is mapped in the tracee */
static void find_libc(struct run *r, pid_t pid)
{
    char path[64], line[4200];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        unsigned long long lo;
        char *name = strchr(line, '/');
        if (!name || !strstr(name, "/libc.so.6") || sscanf(line, "%llx-", &lo) != 1)
            continue;
        name[strcspn(name, "\n")] = 0;
        if (!r->libc_base || lo < r->libc_base) {
            r->libc_base = lo;
            snprintf(r->libc, sizeof(r->libc), "%s", name);
        }
    }
    fclose(f);
}

static void trace_program(struct run *r, char *const argv[], uint64_t max_steps, bool kernel,
                          uint64_t cr3)
{
    const struct swpt_cfg cfg = {.filter = {.user = true, .kernel = kernel},
                                 .psb_period = 1u << 12};
    struct swpt_ctx u = {.cr3 = cr3, .cpl = 3, .cs = X86_CODE64};
    struct swpt_ctx k = {.cr3 = cr3, .cpl = 0, .cs = X86_CODE64};
    const char *why;
    char path[64];
    int st, memfd;
    pid_t pid;
    uint64_t steps = 0, ip;
    bool exited = false;

    memset(r, 0, sizeof(*r));
    r->kernel = kernel;
    r->cr3 = cr3;
    assert_int_equal(swpt_cfg_check(&cfg, &why), 0);
    r->ring = (struct swpt_ring){.size = 64u << 20, .stop_on_full = true};
    r->ring.buf = malloc(r->ring.size);
    assert_non_null(r->ring.buf);

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP);
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    memfd = open(path, O_RDONLY);
    assert_true(memfd >= 0);
    ip = get_rip(pid);
    swpt_start(&r->t, &cfg, &r->ring, &u, ip, 0);

    while (steps < max_steps) {
        uint8_t b[X86_MAX_INSN];
        struct x86_insn in;
        uint64_t pg = ip & ~(PG - 1), nrip;

        if (!page_record(&r->pages, memfd, pg))
            fail_msg("code at %#llx unreadable", (unsigned long long)ip);
        if ((ip & (PG - 1)) > PG - X86_MAX_INSN)
            page_record(&r->pages, memfd, pg + PG);
        size_t n = PG - (ip & (PG - 1));
        n = n < sizeof(b) ? n : sizeof(b);
        memcpy(b, page_find(&r->pages, pg)->b + (ip & (PG - 1)), n);
        if (n < sizeof(b) && page_find(&r->pages, pg + PG)) {
            memcpy(b + n, page_find(&r->pages, pg + PG)->b, sizeof(b) - n);
            n = sizeof(b);
        }
        if (x86_classify(b, n, X86_CODE64, &in) != 0)
            fail_msg("x86_classify failed at %#llx", (unsigned long long)ip);
        if (in.branch == X86_BR_SYSCALL && !exited) /* before exit_group runs */
            find_libc(r, pid);
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) != 0)
            fail_msg("PTRACE_SINGLESTEP: %s", strerror(errno));
        assert_int_equal(waitpid(pid, &st, 0), pid);
        steps++;
        r->tsc += 100;
        if (WIFEXITED(st) || WIFSIGNALED(st)) { /* exit_group: the syscall never returns */
            assert_int_equal(in.branch, X86_BR_SYSCALL);
            expect(r, ip, &in);
            swpt_insn(&r->t, ip, &in, KSYS, &k, r->tsc);
            exited = true;
            ip = KSYS;
            break;
        }
        if (WSTOPSIG(st) != SIGTRAP)
            fail_msg("signal %d at %#llx: pick a program without signals", WSTOPSIG(st),
                     (unsigned long long)ip);
        nrip = get_rip(pid);
        if (in.branch == X86_BR_SYSCALL) {
            expect(r, ip, &in);
            swpt_insn(&r->t, ip, &in, KSYS, &k, r->tsc);
            if (kernel)
                expect(r, KSYS, &I_SYSRET);
            swpt_insn(&r->t, KSYS, &I_SYSRET, nrip, &u, r->tsc);
            r->syscalls++;
        } else if ((in.flags & X86_F_REP) && nrip == ip) {
            swpt_insn(&r->t, ip, &in, ip, &u, r->tsc); /* one more iteration */
        } else {
            expect(r, ip, &in);
            swpt_insn(&r->t, ip, &in, nrip, &u, r->tsc);
        }
        ip = nrip;
    }
    swpt_stop(&r->t, ip);
    r->stop_ip = ip;
    if (!exited) {
        if (!r->libc_base)
            find_libc(r, pid);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    close(memfd);
    assert_false(r->ring.stopped);
}

/* ---- files ---- */

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_text(const char *path, const char *fmt, ...)
{
    va_list ap;
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    assert_int_equal(fclose(f), 0);
}

static char *path_in(const char *dir, const char *name)
{
    static char buf[4][4400];
    static unsigned k;

    char *p = buf[k++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
    return p;
}

/* the dump directory of runs, run i on CPU cpu[i] (ptt.h); a hole of hole_len bytes at
 * stream offset hole_off of the last CPU's stream when hole_len != 0 */
static void write_dump(const char *dir, struct run *const *r, const unsigned *cpu, unsigned n,
                       uint64_t hole_off, uint64_t hole_len)
{
    bool kernel = false;
    FILE *snaps;

    mkdir(dir, 0755);
    mkdir(path_in(dir, "snap"), 0755);
    write_text(path_in(dir, "dump.meta"),
               "protocol 1\ndump 1\nreason vmcall\nsource software\ncpus %u\ntsc_hz 0\n"
               "kernel_base 0x0\ncomplete %s\nframes_ok 1\nframes_bad 0\nframes_missing %u\n",
               n, hole_len ? "no" : "yes", hole_len ? 1 : 0);
    snaps = fopen(path_in(dir, "snapshots"), "w");
    assert_non_null(snaps);
    for (unsigned c = 0; c < n; c++) {
        char name[64], missing[64] = "";
        const struct run *x = r[c];
        uint64_t len = x->ring.head;

        snprintf(name, sizeof(name), "cpu%u.pt", cpu[c]);
        if (c == n - 1 && hole_len) { /* the stream with the hole cut out */
            assert_true(hole_off + hole_len < len);
            uint8_t *cut = malloc(len - hole_len);
            assert_non_null(cut);
            memcpy(cut, x->ring.buf, hole_off);
            memcpy(cut + hole_off, x->ring.buf + hole_off + hole_len, len - hole_off - hole_len);
            write_file(path_in(dir, name), cut, len - hole_len);
            free(cut);
            snprintf(missing, sizeof(missing), "missing %llu+%llu\n", (unsigned long long)hole_off,
                     (unsigned long long)hole_len);
        } else {
            write_file(path_in(dir, name), x->ring.buf, len);
        }
        snprintf(name, sizeof(name), "cpu%u.meta", cpu[c]);
        write_text(path_in(dir, name),
                   "cpu %u\nbytes %llu\nring_size %llu\nwrapped 0\noverflows 0\nfilters %s\n"
                   "cr3 %#llx\n%scrc %s\n",
                   cpu[c], (unsigned long long)len, (unsigned long long)x->ring.size,
                   x->kernel ? "user,kernel" : "user", (unsigned long long)x->cr3, missing,
                   hole_len && c == n - 1 ? "unknown" : "ok");
        for (size_t i = 0; i < x->pages.n; i++) {
            snprintf(name, sizeof(name), "snap/c%u-%zu.bin", c, i);
            write_file(path_in(dir, name), x->pages.p[i].b, PG);
            fprintf(snaps, "%llx %llu %llx %s\n", (unsigned long long)x->pages.p[i].va,
                    (unsigned long long)PG, (unsigned long long)x->cr3, name);
        }
        kernel |= x->kernel;
    }
    if (kernel) { /* the fake kernel's page: SYSRETQ at KSYS, INT3 elsewhere */
        uint8_t k[PG];
        memset(k, 0xcc, sizeof(k));
        memcpy(k, SYSRETQ, sizeof(SYSRETQ));
        write_file(path_in(dir, "snap/k0.bin"), k, sizeof(k));
        fprintf(snaps, "%llx %llu any snap/k0.bin\n", (unsigned long long)KSYS,
                (unsigned long long)PG);
    }
    assert_int_equal(fclose(snaps), 0);
}

/* run argv with HOME=home, stdout and stderr to files; the exit status */
static int run_cmd(char *const argv[], const char *out, const char *errf, double *secs)
{
    struct timespec t0, t1;
    int st;
    pid_t pid;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        setenv("HOME", home, 1);
        unsetenv("DEBUGINFOD_URLS");
        unsetenv("PERF_CONFIG");
        execv(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (secs)
        *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;

    assert_non_null(f);
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 1 << 20;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static void show_file(const char *what, const char *path)
{
    char *t = slurp(path, NULL);
    print_message("---- %s ----\n%.3000s\n", what, t);
    free(t);
}

/* ---- perf's view ---- */

struct line {
    int cpu; /* -1: no [CPU] field */
    uint64_t ip, addr;
    char sym[128];
};

struct lines {
    struct line *v;
    size_t n, cap;
    unsigned errors; /* "instruction trace error" lines */
};

static void push_line(struct lines *L, const struct line *x)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 1 << 16;
        L->v = realloc(L->v, L->cap * sizeof(*L->v));
        assert_non_null(L->v);
    }
    L->v[L->n++] = *x;
}

/* `perf script -F [cpu,]ip[,addr][,sym]` lines: "[CPU] IP [SYM] [=> ADDR [SYM]]" */
static void parse_perf(const char *path, bool with_addr, struct lines *L)
{
    char *t = slurp(path, NULL), *save = NULL;

    memset(L, 0, sizeof(*L));
    for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        struct line x = {.cpu = -1};
        char *p = l, *e;
        if (strstr(l, "instruction trace error")) {
            if (L->errors < 5)
                print_message("perf: %s\n", l);
            L->errors++;
            continue;
        }
        while (*p == ' ')
            p++;
        if (*p == '[') {
            x.cpu = (int)strtol(p + 1, &e, 10);
            if (*e != ']')
                fail_msg("perf script line not understood: \"%s\"", l);
            p = e + 1;
        }
        x.ip = strtoull(p, &e, 16);
        if (e == p)
            fail_msg("perf script line not understood: \"%s\"", l);
        p = e;
        while (*p == ' ')
            p++;
        if (with_addr) {
            char *arrow = strstr(p, "=>");
            if (!arrow)
                fail_msg("perf script branch line without =>: \"%s\"", l);
            *arrow = 0;
            x.addr = strtoull(arrow + 2, &e, 16);
            if (e == arrow + 2)
                fail_msg("perf script branch line without a target: \"%s\"", l);
        }
        snprintf(x.sym, sizeof(x.sym), "%.*s", (int)strcspn(p, " "), p);
        push_line(L, &x);
    }
    free(t);
}

static double perf_rate; /* the best instructions / s of perf script --itrace=i1i */

static void perf_script(const char *data, const char *itrace, const char *fields, const char *tag,
                        const char *what, bool with_addr, struct lines *L)
{
    char out[4400], errf[4400], it[64], fl[64];
    char *argv[] = {perf_bin, (char *)"script", (char *)"-i", (char *)data,
                    it,       (char *)"-F",     fl,           NULL};
    double secs;

    snprintf(it, sizeof(it), "--itrace=%s", itrace);
    snprintf(fl, sizeof(fl), "%s", fields);
    snprintf(out, sizeof(out), "%s/%s.%s", work, tag, what);
    snprintf(errf, sizeof(errf), "%s/%s.%s.err", work, tag, what);
    int rc = run_cmd(argv, out, errf, &secs);
    if (rc != 0) {
        show_file("perf script stderr", errf);
        fail_msg("perf script %s -F %s exited %d", it, fields, rc);
    }
    parse_perf(out, with_addr, L);
    if (!strcmp(itrace, "i1ie") && (double)L->n / secs > perf_rate)
        perf_rate = (double)L->n / secs;
}

/* the instructions of one CPU */
static size_t cpu_seq(const struct lines *L, int cpu, uint64_t *out)
{
    size_t k = 0;

    for (size_t i = 0; i < L->n; i++)
        if (L->v[i].cpu == cpu)
            out[k++] = L->v[i].ip;
    return k;
}

/* how much of the stepped run a decoded sequence is: its first *head and last *tail */
static void head_tail(const uint64_t *v, size_t k, const struct run *x, size_t *head, size_t *tail)
{
    size_t h = 0, t = 0;

    while (h < k && h < x->n && v[h] == x->ip[h])
        h++;
    while (t < k - h && t < x->n - h && v[k - 1 - t] == x->ip[x->n - 1 - t])
        t++;
    *head = h;
    *tail = t;
}

/* perf's instructions of each CPU are the stepped ones; on the CPU with a hole (hole_cpu,
 * -1: none) they are a head and a tail of them: *head, *tail (counts) */
static void check_instructions(struct run *const *r, const unsigned *cpu, unsigned n,
                               const char *data, const char *tag, int hole_cpu, uint64_t **seq,
                               size_t *nseq)
{
    struct lines L;

    perf_script(data, "i1ie", "cpu,ip", tag, "insn", false, &L);
    for (unsigned c = 0; c < n; c++) {
        const struct run *x = r[c];
        uint64_t *v = malloc((L.n + 1) * sizeof(*v));
        assert_non_null(v);
        size_t k = cpu_seq(&L, (int)cpu[c], v), head, tail;
        head_tail(v, k, x, &head, &tail);
        if ((int)cpu[c] != hole_cpu) {
            if (head != k || k != x->n)
                fail_msg("%s: cpu %u: perf's instruction #%zu is %#llx, stepped %#llx (%zu "
                         "decoded, %zu stepped)",
                         tag, cpu[c], head, head < k ? (unsigned long long)v[head] : 0ull,
                         head < x->n ? (unsigned long long)x->ip[head] : 0ull, k, x->n);
            print_message("%s: cpu %u: perf script --itrace=i1i: %zu instructions identical "
                          "to the stepped ones\n",
                          tag, cpu[c], k);
        } else {
            /* decoded up to the hole, then from the first PSB after it */
            if (head + tail != k || head < 1000 || tail < 1000 || head + tail >= x->n)
                fail_msg("%s: cpu %u with a hole: perf's %zu instructions are not %zu stepped "
                         "ones up to the hole and %zu from a PSB after it to the end",
                         tag, cpu[c], k, head, tail);
            if (L.errors == 0)
                fail_msg("%s: perf reported no error for the lost range", tag);
            print_message("%s: cpu %u: perf script --itrace=i1ie: the first %zu and the last "
                          "%zu of %zu stepped instructions around the hole, %u error line%s\n",
                          tag, cpu[c], head, tail, x->n, L.errors, L.errors == 1 ? "" : "s");
        }
        seq[c] = v;
        nseq[c] = k;
    }
    if (hole_cpu < 0 && L.errors)
        fail_msg("%s: perf reported %u decode errors", tag, L.errors);
    free(L.v);
}

/* `ptvisor-trace decode` on the same dump gives perf's instructions, CPU by CPU:
 * "[CPU]  IP SYM (FILE)" lines, "[CPU]  [gap: ...]" where the flow was lost.  On the CPU with
 * a hole both resume at the same PSB; where the piece before the hole ends (a packet cut in
 * two) libipt and perf may stop a few instructions apart. */
static void check_decode(const char *dir, char *const opts[], struct run *const *r,
                         const unsigned *cpu, unsigned n, int hole_cpu, uint64_t *const *seq,
                         const size_t *nseq, const char *tag)
{
    char out[4400], errf[4400];
    char *argv[16] = {(char *)tool, (char *)"decode", (char *)"-q"};
    unsigned k = 3, gaps = 0;
    uint64_t *dec[64];
    size_t ndec[64] = {0};

    for (unsigned i = 0; opts && opts[i] && k < 14; i++)
        if (strcmp(opts[i], "-q"))
            argv[k++] = opts[i];
    argv[k++] = (char *)dir;
    argv[k] = NULL;
    snprintf(out, sizeof(out), "%s/%s.decode", work, tag);
    snprintf(errf, sizeof(errf), "%s/%s.decode.err", work, tag);
    if (run_cmd(argv, out, errf, NULL) != 0) {
        show_file("ptvisor-trace decode stderr", errf);
        fail_msg("ptvisor-trace decode failed");
    }
    for (unsigned i = 0; i < n; i++) {
        dec[i] = malloc((r[i]->n + 1) * sizeof(uint64_t));
        assert_non_null(dec[i]);
    }
    char *t = slurp(out, NULL), *save = NULL;
    for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *e, *p;
        unsigned c = (unsigned)strtoul(l + 1, &e, 10), i;
        for (i = 0; i < n && cpu[i] != c; i++)
            ;
        if (l[0] != '[' || *e != ']' || i == n)
            fail_msg("%s: ptvisor-trace decode: \"%s\"", tag, l);
        if (strstr(l, "[gap")) {
            gaps++;
            continue;
        }
        uint64_t ip = strtoull(e + 1, &p, 16);
        if (p == e + 1 || ndec[i] > r[i]->n)
            fail_msg("%s: ptvisor-trace decode: \"%s\"", tag, l);
        dec[i][ndec[i]++] = ip;
    }
    free(t);
    for (unsigned i = 0; i < n; i++) {
        if ((int)cpu[i] == hole_cpu) {
            size_t ph, pt, dh, dt;
            head_tail(seq[i], nseq[i], r[i], &ph, &pt);
            head_tail(dec[i], ndec[i], r[i], &dh, &dt);
            /* every instruction either decodes is a stepped one (head_tail), both resume at
             * the same PSB (dt == pt); before the hole they may stop a few instructions
             * apart: the cut packet ends a run of straight-line code each follows its own way
             * (measured: one short, and once 5 further than perf, all of them right) */
            if (dh + dt != ndec[i] || dt != pt || dh + 2 < ph || ph + 16 < dh)
                fail_msg("%s: cpu %u: ptvisor-trace decode has the first %zu and the last %zu "
                         "of the stepped instructions, perf the first %zu and the last %zu",
                         tag, cpu[i], dh, dt, ph, pt);
            print_message("%s: cpu %u: ptvisor-trace decode: the first %zu and the last %zu "
                          "stepped instructions (perf: %zu and %zu)\n",
                          tag, cpu[i], dh, dt, ph, pt);
        } else {
            size_t j = 0;
            while (j < ndec[i] && j < nseq[i] && dec[i][j] == seq[i][j])
                j++;
            if (j != ndec[i] || j != nseq[i])
                fail_msg("%s: cpu %u: ptvisor-trace decode's instruction #%zu is %#llx, perf's "
                         "%#llx (%zu and %zu instructions)",
                         tag, cpu[i], j, j < ndec[i] ? (unsigned long long)dec[i][j] : 0ull,
                         j < nseq[i] ? (unsigned long long)seq[i][j] : 0ull, ndec[i], nseq[i]);
        }
        free(dec[i]);
    }
    print_message("%s: ptvisor-trace decode agrees with perf on %u CPU%s (%u gap "
                  "line%s)\n",
                  tag, n, n == 1 ? "" : "s", gaps, gaps == 1 ? "" : "s");
}

/* the taken branches of a one-CPU run (no SYSCALL / SYSRET when only user code is traced:
 * those are the filter's edges, trace end / begin in perf) */
static void check_branches(const struct run *r, const char *data, const char *tag)
{
    struct lines L;
    size_t k = 0, taken = 0;

    perf_script(data, "b", "ip,addr", tag, "br", true, &L);
    for (size_t i = 0; i < r->n; i++) {
        uint64_t from = r->ip[i], to = i + 1 < r->n ? r->ip[i + 1] : r->stop_ip;
        bool is_taken;
        switch (r->br[i]) {
        case X86_BR_JCC:
            is_taken = to != from + r->len[i];
            break;
        case X86_BR_JMP_DIRECT:
        case X86_BR_CALL_DIRECT:
        case X86_BR_JMP_INDIRECT:
        case X86_BR_CALL_INDIRECT:
        case X86_BR_RET:
            is_taken = true;
            break;
        default:
            is_taken = r->kernel && (r->br[i] == X86_BR_SYSCALL || r->br[i] == X86_BR_SYSRET);
            break;
        }
        if (!is_taken)
            continue;
        taken++;
        while (k < L.n && (!L.v[k].ip || !L.v[k].addr)) /* trace begin / end */
            k++;
        if (k == L.n || L.v[k].ip != from || L.v[k].addr != to)
            fail_msg("%s: branch #%zu: stepped %#llx -> %#llx, perf %#llx -> %#llx", tag, taken,
                     (unsigned long long)from, (unsigned long long)to,
                     k < L.n ? (unsigned long long)L.v[k].ip : 0ull,
                     k < L.n ? (unsigned long long)L.v[k].addr : 0ull);
        k++;
    }
    while (k < L.n && (!L.v[k].ip || !L.v[k].addr))
        k++;
    if (k != L.n || L.errors)
        fail_msg("%s: perf has %zu more branches (%u errors)", tag, L.n - k, L.errors);
    print_message("%s: perf script --itrace=b: %zu taken branches identical to the stepped "
                  "ones\n",
                  tag, taken);
    free(L.v);
}

/* ---- symbols: the functions of libc's .dynsym, read here with <elf.h> ---- */

struct fn {
    uint64_t lo, hi;
    const char *name;
};

static struct fn *libc_functions(const char *path, uint64_t base, size_t *nfn, void **map,
                                 size_t *maplen)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    struct fn *v = NULL;
    size_t cap = 0;

    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    assert_true(m != MAP_FAILED);
    const Elf64_Ehdr *eh = (const void *)m;
    const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
    uint64_t low = ~0ull;
    const Elf64_Phdr *ph = (const void *)(m + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_vaddr & ~(PG - 1)) < low)
            low = ph[i].p_vaddr & ~(PG - 1);
    *nfn = 0;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB)
            continue;
        const Elf64_Sym *sy = (const void *)(m + sh[i].sh_offset);
        const char *str = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        for (size_t j = 0; j < sh[i].sh_size / sizeof(*sy); j++) {
            if (ELF64_ST_TYPE(sy[j].st_info) != STT_FUNC || !sy[j].st_value || !sy[j].st_size)
                continue;
            if (*nfn == cap) {
                cap = cap ? 2 * cap : 4096;
                v = realloc(v, cap * sizeof(*v));
                assert_non_null(v);
            }
            uint64_t lo = sy[j].st_value - low + base;
            v[(*nfn)++] = (struct fn){lo, lo + sy[j].st_size, str + sy[j].st_name};
        }
    }
    *map = m;
    *maplen = (size_t)st.st_size;
    return v;
}

/* perf's symbol for every instruction inside a libc function is one of its names */
static void check_symbols(const struct run *r, const char *data, const char *tag)
{
    size_t nfn, maplen, in_fn = 0, kernel = 0;
    struct lines L;
    void *map;

    perf_script(data, "i1i", "ip,sym", tag, "sym", false, &L);
    const struct line *v = L.v;
    size_t n = L.n;
    struct fn *fn = libc_functions(r->libc, r->libc_base, &nfn, &map, &maplen);
    assert_int_equal(n, r->n);
    for (size_t i = 0; i < n; i++) {
        bool covered = false, named = false;
        if (v[i].ip == KSYS) {
            if (strcmp(v[i].sym, "entry_SYSCALL_64"))
                fail_msg("%s: kernel instruction %#llx: perf says \"%s\", -k says "
                         "entry_SYSCALL_64",
                         tag, (unsigned long long)v[i].ip, v[i].sym);
            kernel++;
            continue;
        }
        for (size_t j = 0; j < nfn; j++)
            if (v[i].ip >= fn[j].lo && v[i].ip < fn[j].hi) {
                covered = true;
                named |= !strcmp(fn[j].name, v[i].sym);
            }
        if (covered && !named)
            fail_msg("%s: %#llx is in a libc function, perf names it \"%s\"", tag,
                     (unsigned long long)v[i].ip, v[i].sym);
        in_fn += covered;
    }
    assert_true(in_fn > 1000);
    assert_true(!r->kernel || kernel == r->syscalls);
    print_message("%s: perf script -F sym: %zu instructions in libc functions named as libc's "
                  "symbol table names them, %zu kernel ones as the -k file does\n",
                  tag, in_fn, kernel);
    munmap(map, maplen);
    free(fn);
    free(L.v);
}

/* ---- the tests ---- */

static void export_dump(const char *dir, const char *data, char *const extra[])
{
    char out[4400], errf[4400];
    char *argv[16] = {(char *)tool, (char *)"perf", (char *)"-o", (char *)data};
    unsigned k = 4;

    for (unsigned i = 0; extra && extra[i] && k < 14; i++)
        argv[k++] = extra[i];
    argv[k++] = (char *)dir;
    argv[k] = NULL;
    snprintf(out, sizeof(out), "%s/export.out", work);
    snprintf(errf, sizeof(errf), "%s/export.err", work);
    int rc = run_cmd(argv, out, errf, NULL);
    if (rc != 0) {
        show_file("ptvisor-trace perf stderr", errf);
        fail_msg("ptvisor-trace perf exited %d", rc);
    }
}

static void check_image(const char *data, struct run *const *r, unsigned n, unsigned queues,
                        uint64_t lost)
{
    size_t len;
    char *img = slurp(data, &len), err[300];
    struct pd_info info;
    uint64_t bytes = 0;

    if (pd_parse((const uint8_t *)img, len, &info, err, sizeof(err)) != 0)
        fail_msg("pd_parse: %s", err);
    for (unsigned c = 0; c < n; c++)
        bytes += r[c]->ring.head;
    assert_int_equal(info.nauxtrace, queues);
    assert_int_equal(info.naux_index, queues);
    assert_int_equal(info.nitrace, n);
    bytes -= lost; /* each queue padded to 8 bytes */
    assert_true(info.aux_bytes >= bytes && info.aux_bytes < bytes + 8 * queues);
    assert_int_equal(info.noretcomp_bit & info.pt_config, PD_PT_CFG_NORETCOMP);
    assert_int_equal(info.pmu_type, PD_PMU_TYPE_DEFAULT);
    free(img);
}

static void free_seqs(uint64_t **seq, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        free(seq[i]);
}

/* one program, user code only */
static void test_user(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/passwd", NULL};
    char dir[4400], data[4400];
    static struct run r;
    struct run *rs[1] = {&r};
    const unsigned cpu[1] = {0};
    uint64_t *seq[1];
    size_t nseq[1];

    (void)state;
    trace_program(&r, argv, 120000, false, 0x1000);
    snprintf(dir, sizeof(dir), "%s/user", work);
    snprintf(data, sizeof(data), "%s/user.data", work);
    write_dump(dir, rs, cpu, 1, 0, 0);
    export_dump(dir, data, NULL);
    check_image(data, rs, 1, 1, 0);
    print_message("sort /etc/passwd, user only: %zu instructions, %llu syscalls, %llu PT bytes, "
                  "%zu code pages\n",
                  r.n, (unsigned long long)r.syscalls, (unsigned long long)r.ring.head, r.pages.n);
    assert_true(r.n >= 10000);
    check_instructions(rs, cpu, 1, data, "user", -1, seq, nseq);
    check_branches(&r, data, "user");
    check_decode(dir, NULL, rs, cpu, 1, -1, seq, nseq, "user");
    free_seqs(seq, 1);
    run_free(&r);
}

/* user and (fake) kernel code traced, symbols from -e libc@BASE and -k vmlinux */
static void test_user_kernel_symbols(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sha256sum", (char *)"/etc/hostname", NULL};
    char dir[4400], data[4400], vmlinux[4400], elfarg[4400];
    struct pd_sym sym = {"entry_SYSCALL_64", KSYS, sizeof(SYSRETQ)};
    struct pd_buf b;
    char err[200];
    static struct run r;
    struct run *rs[1] = {&r};
    const unsigned cpu[1] = {0};
    uint64_t *seq[1];
    size_t nseq[1];

    (void)state;
    trace_program(&r, argv, 150000, true, 0x1000);
    snprintf(dir, sizeof(dir), "%s/kernel", work);
    snprintf(data, sizeof(data), "%s/kernel.data", work);
    snprintf(vmlinux, sizeof(vmlinux), "%s/vmlinux", work);
    write_dump(dir, rs, cpu, 1, 0, 0);
    /* a "vmlinux" naming the fake kernel's entry */
    assert_int_equal(pd_code_elf(&b, KSYS, SYSRETQ, sizeof(SYSRETQ), &sym, 1, err, sizeof(err)), 0);
    write_file(vmlinux, b.p, b.len);
    pd_buf_free(&b);
    assert_true(r.libc_base != 0);
    snprintf(elfarg, sizeof(elfarg), "%s@%llx", r.libc, (unsigned long long)r.libc_base);
    char *const extra[] = {(char *)"-k", vmlinux, (char *)"-e", elfarg, (char *)"-q", NULL};
    export_dump(dir, data, extra);
    print_message("sha256sum, user + kernel: %zu instructions, %llu syscalls into the fake "
                  "kernel, %llu PT bytes\n",
                  r.n, (unsigned long long)r.syscalls, (unsigned long long)r.ring.head);
    assert_true(r.n >= 10000 && r.syscalls > 5);
    check_instructions(rs, cpu, 1, data, "kernel", -1, seq, nseq);
    check_branches(&r, data, "kernel");
    check_symbols(&r, data, "kernel");
    check_decode(dir, extra, rs, cpu, 1, -1, seq, nseq, "kernel");
    free_seqs(seq, 1);
    run_free(&r);
}

/* two programs on CPUs 1 and 3 (two CR3s: one perf process), a range of CPU 3's stream lost
 * in transit: its pieces are two perf queues, the second decoded from its first PSB */
static void test_two_cpus_hole(void **state)
{
    char *const a_argv[] = {(char *)"/bin/ls", (char *)"/", NULL};
    char *const b_argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/passwd", NULL};
    char dir[4400], data[4400];
    static struct run a, b;
    struct run *rs[2] = {&a, &b};
    const unsigned cpu[2] = {1, 3};
    uint64_t *seq[2];
    size_t nseq[2];

    (void)state;
    trace_program(&a, a_argv, 100000, false, 0x11000);
    trace_program(&b, b_argv, 100000, false, 0x22000);
    snprintf(dir, sizeof(dir), "%s/two", work);
    snprintf(data, sizeof(data), "%s/two.data", work);
    assert_true(b.ring.head > 5000); /* a PSB (every 4 KiB) after the hole */
    write_dump(dir, rs, cpu, 2, b.ring.head / 4, 100);
    export_dump(dir, data, NULL);
    check_image(data, rs, 2, 3, 100);
    print_message("ls / on cpu 1 (%zu instructions), sort on cpu 3 (%zu, 100 of its %llu PT bytes "
                  "lost at %llu)\n",
                  a.n, b.n, (unsigned long long)b.ring.head, (unsigned long long)b.ring.head / 4);
    check_instructions(rs, cpu, 2, data, "two", 3, seq, nseq);
    check_decode(dir, NULL, rs, cpu, 2, 3, seq, nseq, "two");
    free_seqs(seq, 2);
    run_free(&a);
    run_free(&b);
}

/* what the writer refuses: perf would misread it */
static void test_refusals(void **state)
{
    static const uint8_t pt[16] = {0x02, 0x82};
    struct pd_cpu cpu = {0, 1, 1};
    struct pd_aux aux = {0, 0, pt, sizeof(pt), false};
    struct pd_map m[2] = {{1, 1, false, 0x400000, 0x1000, 0, "/a"},
                          {1, 1, false, 0x400800, 0x1000, 0, "/b"}};
    struct pd_spec s = {.pmu_type = 8,
                        .trace_user = true,
                        .cpu = &cpu,
                        .ncpu = 1,
                        .aux = &aux,
                        .naux = 1,
                        .map = m,
                        .nmap = 1};
    struct pd_buf b;
    struct pd_info info;
    char err[300];

    (void)state;
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), 0);
    assert_int_equal(pd_parse(b.p, b.len, &info, err, sizeof(err)), 0);
    b.p[104] ^= 0x40; /* the first id of the intel_pt attr: records now name an unknown id */
    assert_int_equal(pd_parse(b.p, b.len, &info, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown id"));
    pd_buf_free(&b);
    s.nmap = 2; /* overlapping maps of one process */
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "overlaps"));
    m[1].pid = m[1].tid = 2; /* another process: fine */
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), 0);
    pd_buf_free(&b);
    m[1] = (struct pd_map){1, 1, false, 0x7ffffffff000ull, 0x1000, 0, "b"}; /* relative */
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), -1);
    m[1] = (struct pd_map){1, 1, false, PD_KERNEL_START - 0x800, 0x1000, 0, "/b"};
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), -1);
    s.nmap = 1;
    s.pmu_type = 4; /* a fixed PERF_TYPE_*: perf would take it for that */
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), -1);
    s.pmu_type = 8;
    aux.cpu = 3; /* no ITRACE_START for it */
    assert_int_equal(pd_build(&s, &b, err, sizeof(err)), -1);
}

/* perf on PATH, or SKIP */
static bool find_perf(void)
{
    const char *path = getenv("PATH");
    char *dup = strdup(path ? path : "/usr/bin:/bin"), *save = NULL;

    for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(perf_bin, sizeof(perf_bin), "%s/perf", d);
        if (access(perf_bin, X_OK) == 0) {
            free(dup);
            return true;
        }
    }
    free(dup);
    return false;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char p[4400];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_user),
        cmocka_unit_test(test_user_kernel_symbols),
        cmocka_unit_test(test_two_cpus_hole),
    };
    const char *why;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: test_perfdata PTVISOR-TRACE\n");
        return 2;
    }
    tool = argv[1];
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "%s: %s (build the tool first)\n", tool, strerror(errno));
        return 1;
    }
    if (!find_perf()) {
        printf("SKIP: perf is not installed (Debian: linux-perf)\n");
        return 77;
    }
    why = ptrace_unavailable();
    if (why) {
        printf("SKIP: ptrace not permitted here: %s\n", why);
        return 77;
    }
    snprintf(work, sizeof(work), "%s/ptv-perf.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(work)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(home, sizeof(home), "%s/home", work);
    mkdir(home, 0700);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (rc == 0) {
        printf("BENCH perf-script-decode %.0f insn/s (perf script --itrace=i1i, host)\n",
               perf_rate);
        if (!getenv("PTV_KEEP"))
            rm_tree(work);
    } else {
        printf("files kept in %s\n", work);
    }
    return rc;
}
