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

#include "trace/swpt.h"
#include "trace/x86_class.h"
#include "perfdata.h"

#define KSYS 0xffffffff81000000ull /* fake kernel syscall entry: SYSRETQ */
#define PG   4096ull
#define CR3  0x1000ull

static const char *tool;    /* the ptvisor-trace binary */
static char perf_bin[4096]; /* perf */
static char work[4096];     /* scratch directory */
static char home[4200];     /* empty HOME for perf */

static const struct x86_insn I_SYSRET = {.len = 3, .branch = X86_BR_SYSRET};
static const uint8_t SYSRETQ[3] = {0x48, 0x0f, 0x07};

/* ---- recorded code pages (one address space) ---- */

struct page {
    uint64_t va;
    uint8_t b[PG];
};
static struct page *pages;
static size_t npages, cap_pages;

static struct page *page_find(uint64_t va)
{
    for (size_t i = npages; i-- > 0;)
        if (pages[i].va == va)
            return &pages[i];
    return NULL;
}

static bool page_record(int memfd, uint64_t va)
{
    if (page_find(va))
        return true;
    if (npages == cap_pages) {
        cap_pages = cap_pages ? 2 * cap_pages : 256;
        pages = realloc(pages, cap_pages * sizeof(*pages));
        assert_non_null(pages);
    }
    if (pread(memfd, pages[npages].b, PG, (off_t)va) != (ssize_t)PG)
        return false;
    pages[npages++].va = va;
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
    uint64_t libc_base;
    char libc[4096];
};

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

static void trace_program(struct run *r, char *const argv[], uint64_t max_steps, bool kernel)
{
    const struct swpt_cfg cfg = {.filter = {.user = true, .kernel = kernel},
                                 .psb_period = 1u << 12};
    struct swpt_ctx u = {.cr3 = CR3, .cpl = 3, .cs = X86_CODE64};
    struct swpt_ctx k = {.cr3 = CR3, .cpl = 0, .cs = X86_CODE64};
    const char *why;
    char path[64];
    int st, memfd;
    pid_t pid;
    uint64_t steps = 0, ip;
    bool exited = false;

    memset(r, 0, sizeof(*r));
    npages = 0;
    r->kernel = kernel;
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

        if (!page_record(memfd, pg))
            fail_msg("code at %#llx unreadable", (unsigned long long)ip);
        if ((ip & (PG - 1)) > PG - X86_MAX_INSN)
            page_record(memfd, pg + PG);
        size_t n = PG - (ip & (PG - 1));
        n = n < sizeof(b) ? n : sizeof(b);
        memcpy(b, page_find(pg)->b + (ip & (PG - 1)), n);
        if (n < sizeof(b) && page_find(pg + PG)) {
            memcpy(b + n, page_find(pg + PG)->b, sizeof(b) - n);
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

/* the dump directory of a run (ptt.h) */
static void write_dump(const struct run *r, const char *dir)
{
    FILE *snaps;

    mkdir(dir, 0755);
    mkdir(path_in(dir, "snap"), 0755);
    write_text(path_in(dir, "dump.meta"),
               "protocol 1\ndump 1\nreason vmcall\nsource software\ncpus 1\ntsc_hz 0\n"
               "kernel_base 0x0\ncomplete yes\nframes_ok 1\nframes_bad 0\nframes_missing 0\n");
    write_file(path_in(dir, "cpu0.pt"), r->ring.buf, r->ring.head);
    write_text(path_in(dir, "cpu0.meta"),
               "cpu 0\nbytes %llu\nring_size %llu\nwrapped 0\noverflows 0\nfilters %s\n"
               "cr3 %#llx\ncrc ok\n",
               (unsigned long long)r->ring.head, (unsigned long long)r->ring.size,
               r->kernel ? "user,kernel" : "user", (unsigned long long)CR3);
    snaps = fopen(path_in(dir, "snapshots"), "w");
    assert_non_null(snaps);
    for (size_t i = 0; i < npages; i++) {
        char name[64];
        snprintf(name, sizeof(name), "snap/u%zu.bin", i);
        write_file(path_in(dir, name), pages[i].b, PG);
        fprintf(snaps, "%llx %llu %llx %s\n", (unsigned long long)pages[i].va,
                (unsigned long long)PG, (unsigned long long)CR3, name);
    }
    if (r->kernel) { /* the fake kernel's page: SYSRETQ at KSYS, INT3 elsewhere */
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
    uint64_t ip, addr;
    char sym[128];
};

/* parse `perf script -F ip[,addr],sym` lines: "IP SYM" or "IP => ADDR SYM"-like forms */
static struct line *parse_perf(const char *path, bool with_addr, size_t *n, unsigned *errors)
{
    char *t = slurp(path, NULL), *save = NULL;
    struct line *v = NULL;
    size_t cap = 0;

    *n = 0;
    *errors = 0;
    for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        struct line x = {0};
        char *p = l, *e;
        if (strstr(l, "instruction trace error")) {
            if (*errors < 5)
                print_message("perf: %s\n", l);
            (*errors)++;
            continue;
        }
        x.ip = strtoull(p, &e, 16);
        if (e == p)
            fail_msg("perf script line not understood: \"%s\"", l);
        p = e;
        while (*p == ' ')
            p++;
        if (with_addr) { /* "IP SYM => ADDR SYM" */
            char *arrow = strstr(p, "=>");
            if (!arrow)
                fail_msg("perf script branch line without =>: \"%s\"", l);
            *arrow = 0;
            x.addr = strtoull(arrow + 2, &e, 16);
            if (e == arrow + 2)
                fail_msg("perf script branch line: no target: \"%s\"", l);
        }
        size_t sl = strcspn(p, " ");
        snprintf(x.sym, sizeof(x.sym), "%.*s", (int)sl, p);
        if (*n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[(*n)++] = x;
    }
    free(t);
    return v;
}

static double perf_rate; /* instructions / s of perf script --itrace=i1i */

/* `ptvisor-trace decode` on the same dump: "[CPU]  IP SYM (FILE)" per instruction */
static void check_decode(const struct run *r, const char *dir, char *const opts[], const char *tag)
{
    char out[4400], errf[4400];
    char *argv[16] = {(char *)tool, (char *)"decode", (char *)"-q"};
    unsigned k = 3;
    size_t n = 0;

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
    char *t = slurp(out, NULL), *save = NULL;
    for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *p = strchr(l, ']'), *e;
        if (l[0] != '[' || !p || strstr(l, "[gap"))
            fail_msg("%s: ptvisor-trace decode: \"%s\"", tag, l);
        uint64_t ip = strtoull(p + 1, &e, 16);
        if (e == p + 1)
            fail_msg("%s: ptvisor-trace decode line without an IP: \"%s\"", tag, l);
        if (n >= r->n || ip != r->ip[n])
            fail_msg("%s: ptvisor-trace decode instruction #%zu %#llx, perf (= stepped) %#llx", tag,
                     n, (unsigned long long)ip, n < r->n ? (unsigned long long)r->ip[n] : 0ull);
        n++;
    }
    free(t);
    if (n != r->n)
        fail_msg("%s: ptvisor-trace decode: %zu instructions, perf %zu", tag, n, r->n);
    print_message("%s: ptvisor-trace decode: the same %zu instructions as perf\n", tag, n);
}

static void check_instructions(const struct run *r, const char *data, const char *tag)
{
    char out[4400], errf[4400];
    char *argv[] = {
        perf_bin,     (char *)"script", (char *)"-i", (char *)data, (char *)"--itrace=i1ie",
        (char *)"-F", (char *)"ip",     NULL};
    size_t n;
    unsigned errors;
    double secs;

    snprintf(out, sizeof(out), "%s/%s.insn", work, tag);
    snprintf(errf, sizeof(errf), "%s/%s.insn.err", work, tag);
    int rc = run_cmd(argv, out, errf, &secs);
    if (rc != 0) {
        show_file("perf script stderr", errf);
        fail_msg("perf script exited %d", rc);
    }
    struct line *v = parse_perf(out, false, &n, &errors);
    for (size_t i = 0; i < n && i < r->n; i++)
        if (v[i].ip != r->ip[i]) {
            show_file("perf script stderr", errf);
            fail_msg("%s: instruction #%zu: perf %#llx, stepped %#llx (previous %#llx)", tag, i,
                     (unsigned long long)v[i].ip, (unsigned long long)r->ip[i],
                     i ? (unsigned long long)r->ip[i - 1] : 0ull);
        }
    if (n != r->n || errors) {
        show_file("perf script stderr", errf);
        fail_msg("%s: perf decoded %zu instructions and %u errors, %zu were stepped", tag, n,
                 errors, r->n);
    }
    perf_rate = (double)n / secs;
    print_message("%s: perf script --itrace=i1i: %zu instructions identical to the stepped ones, "
                  "%.2f s (%.0f insn/s)\n",
                  tag, n, secs, perf_rate);
    free(v);
}

/* the taken branches of the stepped run (no SYSCALL / SYSRET: the filter edges there) */
static void check_branches(const struct run *r, const char *data, const char *tag)
{
    char out[4400], errf[4400];
    char *argv[] = {
        perf_bin,     (char *)"script",  (char *)"-i", (char *)data, (char *)"--itrace=b",
        (char *)"-F", (char *)"ip,addr", NULL};
    size_t n, k = 0, taken = 0;
    unsigned errors;

    snprintf(out, sizeof(out), "%s/%s.br", work, tag);
    snprintf(errf, sizeof(errf), "%s/%s.br.err", work, tag);
    if (run_cmd(argv, out, errf, NULL) != 0) {
        show_file("perf script stderr", errf);
        fail_msg("perf script --itrace=b failed");
    }
    struct line *v = parse_perf(out, true, &n, &errors);
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
        default: /* SYSCALL / SYSRET: leave or enter the traced range (or both traced) */
            is_taken = r->kernel && (r->br[i] == X86_BR_SYSCALL || r->br[i] == X86_BR_SYSRET);
            break;
        }
        if (!is_taken)
            continue;
        taken++;
        while (k < n && (!v[k].ip || !v[k].addr)) /* trace begin / end */
            k++;
        if (k == n || v[k].ip != from || v[k].addr != to)
            fail_msg("%s: branch #%zu: stepped %#llx -> %#llx, perf %#llx -> %#llx", tag, taken,
                     (unsigned long long)from, (unsigned long long)to,
                     k < n ? (unsigned long long)v[k].ip : 0ull,
                     k < n ? (unsigned long long)v[k].addr : 0ull);
        k++;
    }
    while (k < n && (!v[k].ip || !v[k].addr))
        k++;
    if (k != n || errors)
        fail_msg("%s: perf has %zu more branches (%u errors)", tag, n - k, errors);
    print_message("%s: perf script --itrace=b: %zu taken branches identical to the stepped ones\n",
                  tag, taken);
    free(v);
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
    char out[4400], errf[4400];
    char *argv[] = {
        perf_bin,     (char *)"script", (char *)"-i", (char *)data, (char *)"--itrace=i1i",
        (char *)"-F", (char *)"ip,sym", NULL};
    size_t n, nfn, maplen, in_fn = 0, kernel = 0;
    unsigned errors;
    void *map;

    snprintf(out, sizeof(out), "%s/%s.sym", work, tag);
    snprintf(errf, sizeof(errf), "%s/%s.sym.err", work, tag);
    if (run_cmd(argv, out, errf, NULL) != 0) {
        show_file("perf script stderr", errf);
        fail_msg("perf script -F ip,sym failed");
    }
    struct line *v = parse_perf(out, false, &n, &errors);
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
    free(v);
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

static void check_image(const char *data, const struct run *r)
{
    size_t len;
    char *img = slurp(data, &len), err[300];
    struct pd_info info;

    if (pd_parse((const uint8_t *)img, len, &info, err, sizeof(err)) != 0)
        fail_msg("pd_parse: %s", err);
    assert_int_equal(info.nauxtrace, 1);
    assert_int_equal(info.nitrace, 1);
    assert_int_equal(info.aux_bytes, (r->ring.head + 7) & ~7ull);
    assert_int_equal(info.noretcomp_bit & info.pt_config, PD_PT_CFG_NORETCOMP);
    assert_int_equal(info.pmu_type, PD_PMU_TYPE_DEFAULT);
    free(img);
}

static void test_user(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/passwd", NULL};
    char dir[4400], data[4400];
    struct run r;

    (void)state;
    trace_program(&r, argv, 120000, false);
    snprintf(dir, sizeof(dir), "%s/user", work);
    snprintf(data, sizeof(data), "%s/user.data", work);
    write_dump(&r, dir);
    export_dump(dir, data, NULL);
    check_image(data, &r);
    print_message("sort /etc/passwd, user only: %zu instructions, %llu syscalls, %llu PT bytes, "
                  "%zu code pages\n",
                  r.n, (unsigned long long)r.syscalls, (unsigned long long)r.ring.head, npages);
    assert_true(r.n >= 10000);
    check_instructions(&r, data, "user");
    check_branches(&r, data, "user");
    check_decode(&r, dir, NULL, "user");
    free(r.ring.buf);
    free(r.ip);
    free(r.br);
    free(r.len);
}

static void test_user_kernel_symbols(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sha256sum", (char *)"/etc/hostname", NULL};
    char dir[4400], data[4400], vmlinux[4400], elfarg[4400];
    struct pd_sym sym = {"entry_SYSCALL_64", KSYS, sizeof(SYSRETQ)};
    struct pd_buf b;
    char err[200];
    struct run r;

    (void)state;
    trace_program(&r, argv, 150000, true);
    snprintf(dir, sizeof(dir), "%s/kernel", work);
    snprintf(data, sizeof(data), "%s/kernel.data", work);
    snprintf(vmlinux, sizeof(vmlinux), "%s/vmlinux", work);
    write_dump(&r, dir);
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
    check_instructions(&r, data, "kernel");
    check_branches(&r, data, "kernel");
    check_symbols(&r, data, "kernel");
    check_decode(&r, dir, extra, "kernel");
    free(r.ring.buf);
    free(r.ip);
    free(r.br);
    free(r.len);
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

static const char *ptrace_unavailable(void)
{
    static char why[200];
    int st;
    pid_t pid = fork();

    if (pid < 0)
        return "fork failed";
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(99);
        raise(SIGSTOP);
        _exit(0);
    }
    if (waitpid(pid, &st, 0) != pid)
        return "waitpid failed";
    if (WIFEXITED(st)) {
        snprintf(why, sizeof(why), "PTRACE_TRACEME refused");
        return why;
    }
    if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) != 0) {
        snprintf(why, sizeof(why), "PTRACE_SINGLESTEP refused: %s", strerror(errno));
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return why;
    }
    waitpid(pid, &st, 0);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return NULL;
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
        rm_tree(work);
    } else {
        printf("files kept in %s\n", work);
    }
    return rc;
}
