/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace against the truth: tests/tools/mkdump.c single-steps a real program
 * (tests/tools/ptt_work.c) with ptrace and writes a dump directory with the software PT of
 * the VMM's generator and the list of executed IPs; the tool (the sanitized build, run as
 * a user runs it) must give back exactly that: decode = every stepped IP in order, symbols =
 * those of `nm`, stacks adding up to the instruction count with the workload's call chains,
 * a flame graph that is valid XML naming the hot functions, summary counts = the stepped
 * branch counts.  Bad inputs: one-line errors and exit 1.  Damaged traces: a gap line and
 * decoding goes on.  SKIP (77) where ptrace is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <intel-pt.h>

static char bin_dir[4096], tmp[4200], tool[4300], work[4300], mkdump[4300];

/* ---- small helpers ---- */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    char *s;
    va_list ap;

    va_start(ap, fmt);
    assert_true(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    return s;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0;

    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            b = realloc(b, cap);
            assert_non_null(b);
        }
        size_t r = fread(b + n, 1, 65536, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    b[n] = 0;
    if (len)
        *len = n;
    return b;
}

static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* run a shell command line; stdout to out (or /dev/null), stderr kept; the exit status */
static int sh(const char *out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sh(const char *out, char **err, const char *fmt, ...)
{
    char *cmd, *line, *errf = xasprintf("%s/stderr.txt", tmp);
    va_list ap;
    int st;

    va_start(ap, fmt);
    assert_true(vasprintf(&cmd, fmt, ap) >= 0);
    va_end(ap);
    line = xasprintf("%s >%s 2>%s", cmd, out ? out : "/dev/null", errf);
    st = system(line);
    if (err)
        *err = slurp(errf, NULL);
    free(cmd);
    free(line);
    free(errf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static unsigned count_lines(const char *s)
{
    unsigned n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- the truth ---- */

struct truth {
    uint64_t *ip;
    size_t n;
    uint64_t insns, cond_taken, cond_not, jmp, jmp_ind, call, call_ind, ret, far;
};

static void truth_load(const char *dir, struct truth *t)
{
    char *path = xasprintf("%s/truth.txt", dir), *text = slurp(path, NULL), *p = text;
    size_t cap = 0;

    memset(t, 0, sizeof(*t));
    while (*p) {
        char *eol = strchr(p, '\n');
        unsigned long long v;
        char key[32];

        if (eol)
            *eol = 0;
        if (sscanf(p, "# %31s %llu", key, &v) == 2) {
            static const char *const k[] = {"insns", "cond_taken", "cond_not", "jmp", "jmp_ind",
                                            "call",  "call_ind",   "ret",      "far"};
            uint64_t *f[] = {&t->insns, &t->cond_taken, &t->cond_not, &t->jmp, &t->jmp_ind,
                             &t->call,  &t->call_ind,   &t->ret,      &t->far};
            for (unsigned i = 0; i < 9; i++)
                if (!strcmp(key, k[i]))
                    *f[i] = v;
        } else if (sscanf(p, "%llx", &v) == 1) {
            if (t->n == cap) {
                cap = cap ? 2 * cap : 1 << 16;
                t->ip = realloc(t->ip, cap * sizeof(*t->ip));
                assert_non_null(t->ip);
            }
            t->ip[t->n++] = v;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    assert_int_equal(t->n, t->insns);
    free(text);
    free(path);
}

/* decode output: IPs of instruction lines, gap lines counted; where the gaps were */
struct decoded {
    char *buf; /* the parsed copy of the text */
    uint64_t *ip;
    char **sym; /* "name+0xoff" */
    size_t n, gaps, first_gap_at;
};

static void decoded_parse(const char *text, struct decoded *d)
{
    size_t cap = 0;

    memset(d, 0, sizeof(*d));
    d->buf = strdup(text);
    assert_non_null(d->buf);
    for (char *p = d->buf; *p;) {
        char *eol = strchr(p, '\n');
        unsigned cpu;
        unsigned long long ip;
        int off = 0;

        if (eol)
            *eol = 0;
        if (strstr(p, "[gap: ")) {
            if (!d->gaps++)
                d->first_gap_at = d->n;
        } else if (sscanf(p, "[%3u]  %llx %n", &cpu, &ip, &off) == 2 && off) {
            if (d->n == cap) {
                cap = cap ? 2 * cap : 1 << 16;
                d->ip = realloc(d->ip, cap * sizeof(*d->ip));
                d->sym = realloc(d->sym, cap * sizeof(*d->sym));
                assert_non_null(d->ip);
                assert_non_null(d->sym);
            }
            d->ip[d->n] = ip;
            d->sym[d->n++] = p + off;
        } else {
            fail_msg("decode printed a line of no known shape: \"%s\"", p);
        }
        if (!eol)
            break;
        p = eol + 1;
    }
}

static void decoded_free(struct decoded *d)
{
    free(d->buf);
    free(d->ip);
    free(d->sym);
}

/* ---- fixtures ---- */

struct nmsym {
    uint64_t addr, size;
    char name[128];
};
static struct nmsym *nm; /* nm's view of the workload */
static size_t nnm;

static char dump1[4300], dump_cr3[4300], log1[4300];
static struct truth T;
static bool skip_all;
static char skip_why[300];

static int setup(void **state)
{
    char *err;
    int r;

    (void)state;
    r = sh(NULL, &err, "%s --log %s %s %s", mkdump, log1, dump1, work);
    if (r == 77) {
        skip_all = true;
        snprintf(skip_why, sizeof(skip_why), "ptrace refused here");
        free(err);
        return 0;
    }
    if (r != 0)
        fail_msg("ptt_mkdump failed (%d): %s", r, err);
    free(err);
    r = sh(NULL, &err, "%s --cr3 2000 %s %s", mkdump, dump_cr3, work);
    if (r != 0)
        fail_msg("ptt_mkdump --cr3 failed (%d): %s", r, err);
    free(err);
    truth_load(dump1, &T);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(T.ip);
    free(nm);
    if (tmp[0]) {
        char *cmd = xasprintf("rm -rf %s", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmp);
        free(cmd);
    }
    return 0;
}

#define NEED_DUMP()                                                                                \
    do {                                                                                           \
        if (skip_all)                                                                              \
            skip();                                                                                \
    } while (0)

/* decode DIR with extra options into a struct decoded; returns the text (to free) */
static char *decode(const char *dir, const char *opts, struct decoded *d, char **err, int *rc)
{
    char *out = xasprintf("%s/decode.txt", tmp), *text;

    *rc = sh(out, err, "%s decode %s %s", tool, dir, opts);
    text = slurp(out, NULL);
    free(out);
    decoded_parse(text, d);
    return text;
}

/* ---- nm: the independent symbol oracle ---- */

static void nm_load(void)
{
    char *out, *text, *p;
    size_t cap = 0;

    if (nm)
        return;
    out = xasprintf("%s/nm.txt", tmp);
    assert_int_equal(sh(out, NULL, "nm -S --defined-only %s", work), 0);
    text = slurp(out, NULL);
    for (p = text; *p;) {
        char *eol = strchr(p, '\n');
        unsigned long long a, s;
        char type, name[128];
        if (eol)
            *eol = 0;
        if (sscanf(p, "%llx %llx %c %127s", &a, &s, &type, name) == 4 && strchr("TtWwi", type) &&
            s) {
            if (nnm == cap) {
                cap = cap ? 2 * cap : 1024;
                nm = realloc(nm, cap * sizeof(*nm));
                assert_non_null(nm);
            }
            nm[nnm].addr = a;
            nm[nnm].size = s;
            snprintf(nm[nnm].name, sizeof(nm[nnm].name), "%s", name);
            nnm++;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    free(text);
    free(out);
    assert_true(nnm > 100);
}

static uint64_t nm_addr(const char *name)
{
    nm_load();
    for (size_t i = 0; i < nnm; i++)
        if (!strcmp(nm[i].name, name))
            return nm[i].addr;
    fail_msg("nm: no %s", name);
    return 0;
}

/* the symbol text decode must print for ip: one of the nm names covering it, +offset */
static bool nm_matches(uint64_t ip, const char *printed, bool *covered)
{
    *covered = false;
    for (size_t i = 0; i < nnm; i++)
        if (ip >= nm[i].addr && ip - nm[i].addr < nm[i].size) {
            char want[200];
            *covered = true;
            snprintf(want, sizeof(want), "%s+0x%llx ", nm[i].name,
                     (unsigned long long)(ip - nm[i].addr));
            if (!strncmp(printed, want, strlen(want)))
                return true;
        }
    return false;
}

/* ---- tests ---- */

static void check_equal_truth(const struct decoded *d, const char *what)
{
    if (d->n != T.n)
        print_message("%s: %zu decoded, %zu stepped\n", what, d->n, T.n);
    for (size_t i = 0; i < d->n && i < T.n; i++)
        if (d->ip[i] != T.ip[i])
            fail_msg("%s: instruction %zu decoded at %#llx, stepped at %#llx", what, i,
                     (unsigned long long)d->ip[i], (unsigned long long)T.ip[i]);
    assert_int_equal(d->n, T.n);
    assert_int_equal(d->gaps, 0);
}

static void test_decode_truth(void **state)
{
    struct decoded d;
    char *err, *opts = xasprintf("-e %s", work), *text;
    int rc;
    struct timespec t0, t1;

    (void)state;
    NEED_DUMP();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    text = decode(dump1, opts, &d, &err, &rc);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    assert_true(T.n >= 10000);
    check_equal_truth(&d, "decode");
    /* symbols: as nm names them, for every instruction inside a sized nm symbol */
    nm_load();
    size_t covered_n = 0;
    for (size_t i = 0; i < d.n; i++) {
        bool covered;
        if (!nm_matches(d.ip[i], d.sym[i], &covered) && covered)
            fail_msg("instruction %zu at %#llx printed as \"%s\"", i, (unsigned long long)d.ip[i],
                     d.sym[i]);
        covered_n += covered;
    }
    assert_true(covered_n * 10 > d.n * 9);
    /* the workload's functions, at their first instruction */
    const char *fn[] = {"hot_mix", "partition", "sort_rec", "fib", "op_xor", "main"};
    for (unsigned k = 0; k < 6; k++) {
        char want[4400];
        bool seen = false;
        snprintf(want, sizeof(want), "%s+0x0 (%s)", fn[k], work);
        for (size_t i = 0; i < d.n && !seen; i++)
            seen = d.ip[i] == nm_addr(fn[k]) && !strcmp(d.sym[i], want);
        if (!seen)
            fail_msg("no \"%s\" line at %#llx", want, (unsigned long long)nm_addr(fn[k]));
    }
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("decode: %zu instructions = the %zu stepped ones, symbols as nm's; %.2f M "
                  "instructions/s (sanitized build, with output)\n",
                  d.n, T.n, (double)d.n / s / 1e6);
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
}

/* PIPs and snapshots bound to one CR3: right CR3 decodes, another CR3 has no code */
static void test_decode_cr3(void **state)
{
    struct decoded d;
    struct truth t2;
    char *err, *text, *path, *list;
    int rc;

    (void)state;
    NEED_DUMP();
    truth_load(dump_cr3, &t2);
    text = decode(dump_cr3, "", &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(d.n, t2.n);
    for (size_t i = 0; i < d.n; i++)
        assert_true(d.ip[i] == t2.ip[i]);
    assert_int_equal(d.gaps, 0);
    decoded_free(&d);
    free(text);
    free(err);
    /* the CR3 as the VMM may list it, with PCID bits and bit 63: the same address space */
    path = xasprintf("%s/snapshots", dump_cr3);
    list = slurp(path, NULL);
    char *pcid = malloc(strlen(list) * 2 + 1), *q = pcid;
    for (const char *p = list; *p;)
        if (!strncmp(p, " 2000 ", 6)) {
            q += sprintf(q, " 8000000000002007 ");
            p += 6;
        } else {
            *q++ = *p++;
        }
    *q = 0;
    spit(path, pcid, strlen(pcid));
    text = decode(dump_cr3, "", &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(d.n, t2.n);
    assert_int_equal(d.gaps, 0);
    decoded_free(&d);
    free(text);
    free(err);
    free(pcid);
    /* the same snapshots for another address space: nothing may decode silently */
    char *bad = strdup(list);
    for (char *p = bad; (p = strstr(p, " 2000 "));)
        memcpy(p, " 3000 ", 6);
    spit(path, bad, strlen(bad));
    text = decode(dump_cr3, "", &d, &err, &rc);
    spit(path, list, strlen(list));
    assert_int_equal(rc, 0);
    assert_true(d.gaps > 0);
    assert_true(d.n < 10);
    assert_non_null(strstr(text, "no code bytes for 0x"));
    decoded_free(&d);
    free(text);
    free(err);
    free(bad);
    free(list);
    free(path);
    free(t2.ip);
}

static void test_branches(void **state)
{
    char *out = xasprintf("%s/br.txt", tmp), *err, *text;
    uint64_t taken = T.cond_taken + T.jmp + T.jmp_ind + T.call + T.call_ind + T.ret;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(out, &err, "%s decode --branches %s -e %s", tool, dump1, work), 0);
    text = slurp(out, NULL);
    /* every taken near branch; a SYSCALL leaves the traced range (no target in the trace) */
    assert_int_equal(count_lines(text), taken);
    assert_non_null(strstr(text, " => "));
    assert_non_null(strstr(text, "partition+0x0 ("));
    free(text);
    free(err);
    free(out);
}

static void test_stacks(void **state)
{
    char *out = xasprintf("%s/stacks.txt", tmp), *err, *text, *p;
    uint64_t sum = 0;
    unsigned lines = 0;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(out, &err, "%s stacks %s -e %s", tool, dump1, work), 0);
    assert_string_equal(err, "");
    text = slurp(out, NULL);
    for (p = text; *p; lines++) {
        char *eol = strchr(p, '\n'), *sp;
        assert_non_null(eol);
        *eol = 0;
        sp = strrchr(p, ' ');
        assert_non_null(sp);
        sum += strtoull(sp + 1, NULL, 10);
        *eol = '\n';
        p = eol + 1;
    }
    assert_int_equal(sum, T.insns);
    const char *chains[] = {
        "__libc_start_call_main;main;work;sort_rec;sort_rec;sort_rec;partition ",
        "__libc_start_call_main;main;work;checksum;hot_mix ",
        "__libc_start_call_main;main;work;apply;op_xor ",
        "__libc_start_call_main;main;work;apply;op_add ",
        "__libc_start_call_main;main;work;fib;fib;fib;fib;fib;fib ",
        "\n_start;__libc_start_main;__libc_start_call_main;main ",
    };
    for (unsigned i = 0; i < 6; i++)
        if (!strstr(text, chains[i]))
            fail_msg("no stack with \"%s\"", chains[i]);
    /* checksum -> hot_mix: 600 calls, 5 instructions of hot_mix each... as counted */
    print_message("stacks: %u stacks, %llu instructions = the stepped count\n", lines,
                  (unsigned long long)sum);
    free(text);
    free(err);
    free(out);
}

/* valid XML: xmllint, else python3's parser */
static void check_xml(const char *path)
{
    char *err;
    int r;

    if (system("command -v xmllint >/dev/null 2>&1") == 0)
        r = sh(NULL, &err, "xmllint --noout %s", path);
    else
        r = sh(NULL, &err,
               "python3 -c 'import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])' %s", path);
    if (r != 0)
        fail_msg("%s is not valid XML: %s", path, err);
    free(err);
}

static void test_flamegraph(void **state)
{
    char *svg = xasprintf("%s/flame.svg", tmp), *err, *text;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(NULL, &err, "%s flamegraph %s -e %s -o %s", tool, dump1, work, svg), 0);
    assert_string_equal(err, "");
    check_xml(svg);
    text = slurp(svg, NULL);
    assert_non_null(strstr(text, "<svg "));
    assert_non_null(strstr(text, "<title>partition ("));
    assert_non_null(strstr(text, "<title>hot_mix ("));
    assert_non_null(strstr(text, ">main<"));
    assert_null(strstr(text, "<script"));
    free(text);
    free(err);
    /* names that need escaping, from folded input */
    char *folded = xasprintf("%s/f.txt", tmp);
    const char *ft = "a<b>;c&d 10\nx\"y';q 5\nbin\x01\xff 2\n";
    spit(folded, ft, strlen(ft));
    assert_int_equal(
        sh(NULL, &err, "%s flamegraph --folded %s -o %s --title 'T<&>'", tool, folded, svg), 0);
    check_xml(svg);
    text = slurp(svg, NULL);
    assert_non_null(strstr(text, "a&lt;b&gt;"));
    assert_non_null(strstr(text, "c&amp;d"));
    assert_non_null(strstr(text, "x&quot;y&apos;"));
    assert_non_null(strstr(text, "T&lt;&amp;&gt;"));
    assert_non_null(strstr(text, ">17 instructions; "));
    assert_non_null(strstr(text, "bin??"));
    free(text);
    free(err);
    free(folded);
    free(svg);
}

static uint64_t summary_value(const char *text, const char *label)
{
    for (const char *p = text; (p = strstr(p, label)); p++)
        if ((p == text || p[-1] == '\n') && p[strlen(label)] == ' ') {
            const char *eol = strchr(p, '\n'), *q = eol;
            while (q > p && q[-1] >= '0' && q[-1] <= '9')
                q--;
            return strtoull(q, NULL, 10);
        }
    fail_msg("summary has no \"%s\" line", label);
    return 0;
}

static void test_summary(void **state)
{
    char *out = xasprintf("%s/summary.txt", tmp), *err, *text;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(out, &err, "%s summary %s -e %s --top 5", tool, dump1, work), 0);
    assert_string_equal(err, "");
    text = slurp(out, NULL);
    assert_int_equal(summary_value(text, "instructions"), T.insns);
    assert_int_equal(summary_value(text, "  conditional taken"), T.cond_taken);
    assert_int_equal(summary_value(text, "  conditional not taken"), T.cond_not);
    assert_int_equal(summary_value(text, "  jumps direct"), T.jmp);
    assert_int_equal(summary_value(text, "  jumps indirect"), T.jmp_ind);
    assert_int_equal(summary_value(text, "  calls direct"), T.call);
    assert_int_equal(summary_value(text, "  calls indirect"), T.call_ind);
    assert_int_equal(summary_value(text, "  returns"), T.ret);
    assert_int_equal(summary_value(text, "gaps"), 0);
    assert_int_equal(summary_value(text, "branches"), T.cond_taken + T.cond_not + T.jmp +
                                                          T.jmp_ind + T.call + T.call_ind + T.ret +
                                                          T.far);
    assert_true(T.call_ind > 0 && T.jmp_ind > 0 && T.far > 0);
    /* the busiest function of the workload */
    const char *top = strstr(text, "function (file)\n");
    assert_non_null(top);
    assert_non_null(strstr(top, "%  partition ("));
    assert_int_equal(count_lines(top), 6);
    free(text);
    free(err);
    free(out);
}

/* ---- bad inputs: one line, the cause, exit 1 ---- */

static void copy_dump(const char *from, const char *to)
{
    char *cmd = xasprintf("rm -rf %s && cp -r %s %s", to, from, to);

    assert_int_equal(system(cmd), 0);
    free(cmd);
}

static void expect_error(const char *what, const char *cause, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void expect_error(const char *what, const char *cause, const char *fmt, ...)
{
    char *args, *err;
    va_list ap;
    int r;

    va_start(ap, fmt);
    assert_true(vasprintf(&args, fmt, ap) >= 0);
    va_end(ap);
    r = sh(NULL, &err, "%s %s", tool, args);
    if (r != 1 || count_lines(err) != 1 || strncmp(err, "ptvisor-trace: ", 15) ||
        !strstr(err, cause))
        fail_msg("%s: exit %d, stderr \"%s\" (want exit 1 and one line with \"%s\")", what, r, err,
                 cause);
    free(err);
    free(args);
}

static void edit(const char *dir, const char *name, const char *from, const char *to)
{
    char *path = xasprintf("%s/%s", dir, name), *text = slurp(path, NULL), *p = strstr(text, from);
    char *n;

    assert_non_null(p);
    n = xasprintf("%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    spit(path, n, strlen(n));
    free(n);
    free(text);
    free(path);
}

static void test_bad_inputs(void **state)
{
    char *b = xasprintf("%s/bad", tmp), *p;

    (void)state;
    NEED_DUMP();
    expect_error("no dump", "No such file", "decode %s/nonexistent", tmp);
    expect_error("no argument", "which dump", "decode");
    expect_error("unknown option", "unknown", "decode --frobnicate %s", dump1);
    expect_error("option of another command", "takes no", "summary --branches %s", dump1);
    expect_error("no command", "not a command", "frobnicate");
    expect_error("-e missing", "No such file", "decode %s -e %s/none", dump1, tmp);
    p = xasprintf("%s/dump.meta", dump1);
    expect_error("-e not ELF", "not an ELF", "decode %s -e %s", dump1, p);
    free(p);
    expect_error("bad load base", "load base", "decode %s -e %s@zz", dump1, work);

    copy_dump(dump1, b);
    p = xasprintf("%s/cpu0.pt", b);
    unlink(p);
    expect_error("no cpu0.pt", "cpu0.pt: No such file", "decode %s", b);
    free(p);

    copy_dump(dump1, b);
    edit(b, "snapshots", " snap/0000.bin", " snap/../../0000.bin");
    expect_error("snapshot with ..", "\"..\" component", "stacks %s", b);

    copy_dump(dump1, b);
    edit(b, "snapshots", " snap/0000.bin", " /etc/passwd");
    expect_error("absolute snapshot", "absolute path", "summary %s", b);

    copy_dump(dump1, b);
    p = xasprintf("ln -sf /bin/true %s/snap/0001.bin", b);
    assert_int_equal(system(p), 0);
    free(p);
    expect_error("symlink out of the dump", "leads outside the dump", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "snapshots", " snap/0000.bin", " snap/0001.bin");
    expect_error("snapshot size", "the list says", "decode %s", b);

    copy_dump(dump1, b);
    p = xasprintf("truncate -s -7 %s/cpu0.pt", b);
    assert_int_equal(system(p), 0);
    free(p);
    expect_error("truncated .pt", "truncated", "decode %s", b);

    copy_dump(dump1, b);
    p = xasprintf("head -c 300 /dev/urandom > %s/dump.meta", b);
    assert_int_equal(system(p), 0);
    free(p);
    expect_error("garbage dump.meta", "dump.meta: line ", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "cpu0.meta", "cpu 0\n", "cpu 0\nbytes x12\n");
    expect_error("garbage cpu0.meta", "cpu0.meta: line 2: bytes", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "cpu0.meta", "crc ok", "missing 0x10+99999999");
    expect_error("hole past the end", "past the stream", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "dump.meta", "cpus 1", "cpus 2");
    expect_error("cpus 2, one file", "cpus 2, but 1 cpuN.meta", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "dump.meta", "kernel_base 0x0", "kernel_base 12");
    expect_error("kernel_base without 0x", "kernel_base", "decode %s", b);

    copy_dump(dump1, b);
    edit(b, "snapshots", "401000 ", "fffffffffffff000 ");
    expect_error("snapshot wraps", "wraps", "decode %s", b);

    expect_error("--cpu absent", "no trace of CPU 3", "decode %s --cpu 3", dump1);
    p = xasprintf("%s/m.map", tmp);
    spit(p, "ffffffff81000000 T _text\nnot a map line\n", 40);
    expect_error("bad System.map", "m.map:2:", "decode %s -m %s", dump1, p);
    free(p);
    free(b);
}

/* ---- damaged traces: a gap line, and the decode goes on ---- */

/* the offset of the first packet at or after `from`, by libipt's packet decoder */
static uint64_t packet_at(const uint8_t *buf, size_t len, uint64_t from)
{
    struct pt_config cfg;
    struct pt_packet_decoder *d;
    struct pt_packet pk;
    uint64_t off = 0;

    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    d = pt_pkt_alloc_decoder(&cfg);
    assert_non_null(d);
    assert_true(pt_pkt_sync_forward(d) >= 0);
    for (;;) {
        assert_true(pt_pkt_get_offset(d, &off) >= 0);
        if (off >= from)
            break;
        assert_true(pt_pkt_next(d, &pk, sizeof(pk)) >= 0);
    }
    pt_pkt_free_decoder(d);
    return off;
}

/* what was decoded before the first gap is the truth's beginning, what was decoded after the
 * last one its end */
static void check_around_gaps(const struct decoded *d, const char *what)
{
    size_t before = d->first_gap_at, after;

    assert_true(d->gaps >= 1);
    for (size_t i = 0; i < before; i++)
        if (d->ip[i] != T.ip[i])
            fail_msg("%s: before the gap, #%zu is %#llx, stepped %#llx", what, i,
                     (unsigned long long)d->ip[i], (unsigned long long)T.ip[i]);
    /* the tail after resync: match from the end */
    for (after = 0; after < d->n - before; after++)
        if (d->ip[d->n - 1 - after] != T.ip[T.n - 1 - after])
            break;
    print_message("%s: %zu gap line(s); %zu instructions before, %zu after = the truth's "
                  "beginning and end (%zu of %zu)\n",
                  what, d->gaps, before, after, before + after, T.n);
    assert_true(before > 100);
    assert_true(after > 100);
    assert_true(before + after <= T.n);
}

static void test_corrupt_byte(void **state)
{
    char *b = xasprintf("%s/corrupt", tmp), *path, *err, *text;
    uint8_t *pt;
    size_t len;
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    copy_dump(dump1, b);
    path = xasprintf("%s/cpu0.pt", b);
    pt = (uint8_t *)slurp(path, &len);
    uint64_t off = packet_at(pt, len, len / 2);
    pt[off] = 0x09; /* no packet starts with 0x09 */
    spit(path, pt, len);
    text = decode(b, "", &d, &err, &rc);
    assert_int_equal(rc, 0);
    char *want = xasprintf("[gap: unknown opcode at offset 0x%llx]", (unsigned long long)off);
    if (!strstr(text, want)) {
        const char *g = strstr(text, "[gap: ");
        fail_msg("no \"%s\" line; the first gap line: %.100s", want, g ? g : "(none)");
    }
    check_around_gaps(&d, "one corrupted byte");
    assert_true(d.n < T.n);
    decoded_free(&d);
    free(want);
    free(text);
    free(err);
    free(pt);
    free(path);
    free(b);
}

/* a range lost in transit (cpu0.meta "missing"): never decoded across */
static void test_hole(void **state)
{
    char *b = xasprintf("%s/hole", tmp), *path, *err, *text, *line;
    uint8_t *pt;
    size_t len;
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    copy_dump(dump1, b);
    path = xasprintf("%s/cpu0.pt", b);
    pt = (uint8_t *)slurp(path, &len);
    uint64_t off = len / 3, cut = 1000;
    memmove(pt + off, pt + off + cut, len - off - cut);
    spit(path, pt, len - cut);
    line =
        xasprintf("crc ok\nmissing %llu+%llu\n", (unsigned long long)off, (unsigned long long)cut);
    edit(b, "cpu0.meta", "crc ok\n", line);
    text = decode(b, "", &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(err, "1 range of the trace lost in transit"));
    char *want = xasprintf("[gap: 1000 bytes lost in transit (stream offset %llu)]",
                           (unsigned long long)off);
    assert_non_null(strstr(text, want));
    check_around_gaps(&d, "1000 bytes lost");
    decoded_free(&d);
    free(want);
    free(line);
    free(text);
    free(err);
    free(pt);
    free(path);
    free(b);
}

/* code from ELF files where no snapshot is: -e, -k with KASLR, and snapshot precedence */
static void test_elf_code(void **state)
{
    char *b = xasprintf("%s/nosnap", tmp), *err, *text, *opts, *path;
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    copy_dump(dump1, b);
    path = xasprintf("%s/snapshots", b);
    spit(path, "", 0);
    free(path);
    opts = xasprintf("-e %s", work);
    text = decode(b, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    check_equal_truth(&d, "-e only");
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    /* as a "kernel": at dump.meta's kernel_base = its own text start: KASLR offset 0 */
    edit(b, "dump.meta", "kernel_base 0x0", "kernel_base 0x401000");
    opts = xasprintf("-k %s", work);
    text = decode(b, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    check_equal_truth(&d, "-k at kernel_base");
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    /* shifted by --kaslr: the code is not where it ran, the decode says so */
    opts = xasprintf("-k %s --kaslr 100000", work);
    text = decode(b, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_true(d.gaps > 0);
    assert_true(d.n < 10);
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    /* an ELF with other bytes than the snapshots: the snapshots win, one warning */
    char *elf = xasprintf("%s/work-patched", tmp);
    size_t len;
    uint8_t *e = (uint8_t *)slurp(work, &len);
    uint64_t at = nm_addr("hot_mix") - 0x400000; /* static, no PIE: file offset = va - 0x400000 */
    assert_true(at + 4 < len);
    e[at + 1] ^= 0xff;
    e[at + 3] ^= 0xff;
    spit(elf, e, len);
    opts = xasprintf("-e %s", elf);
    text = decode(dump1, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    check_equal_truth(&d, "patched ELF under the snapshots");
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "2 bytes in 2 places differ from the dump's code snapshots"));
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    free(e);
    free(elf);
    free(b);
}

/* System.map symbols (from nm's output) name the same functions */
static void test_system_map(void **state)
{
    char *map = xasprintf("%s/System.map", tmp), *err, *text, *opts;
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(map, NULL, "nm -n --defined-only %s", work), 0);
    opts = xasprintf("-m %s --kaslr 0", map);
    text = decode(dump1, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    check_equal_truth(&d, "with -m");
    /* every instruction of partition named by the map's symbol */
    uint64_t a = nm_addr("partition"), b = nm_addr("sort_rec");
    size_t seen = 0;
    for (size_t i = 0; i < d.n; i++)
        if (d.ip[i] >= a && d.ip[i] < b) {
            char want[100];
            snprintf(want, sizeof(want), "partition+0x%llx ([kernel.kallsyms])",
                     (unsigned long long)(d.ip[i] - a));
            assert_string_equal(d.sym[i], want);
            seen++;
        }
    assert_true(seen > 1000);
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    free(map);
}

/* a KASLR'd kernel whose base the VMM did not know: the guest's LSTAR (dump.meta
 * syscall_entry) against the map's entry_SYSCALL_64 gives the offset, without --kaslr */
static void test_kaslr_from_lstar(void **state)
{
    const uint64_t shift = 0x200000; /* the "link" addresses are the run addresses - shift */
    char *b = xasprintf("%s/lstar", tmp), *nmout = xasprintf("%s/nm.txt", tmp);
    char *map = xasprintf("%s/System.map.lstar", tmp), *err, *text, *opts, line[512];
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    assert_int_equal(sh(nmout, NULL, "nm -n --defined-only %s", work), 0);
    FILE *in = fopen(nmout, "r"), *out = fopen(map, "w");
    assert_non_null(in);
    assert_non_null(out);
    while (fgets(line, sizeof(line), in)) {
        unsigned long long a;
        char type, name[400];
        if (sscanf(line, "%llx %c %399s", &a, &type, name) == 3 && a >= shift)
            fprintf(out, "%016llx %c %s\n", a - shift, type, name);
    }
    uint64_t entry = nm_addr("fib"); /* where the guest's LSTAR points, in this test */
    fprintf(out, "%016llx T entry_SYSCALL_64\n", (unsigned long long)(entry - shift));
    fclose(in);
    fclose(out);
    copy_dump(dump1, b);
    char *meta = xasprintf("%s/dump.meta", b);
    FILE *m = fopen(meta, "a");
    assert_non_null(m);
    fprintf(m, "syscall_entry 0x%llx\n", (unsigned long long)entry);
    fclose(m);
    opts = xasprintf("-m %s", map);
    text = decode(b, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    uint64_t a = nm_addr("partition"), z = nm_addr("sort_rec");
    size_t seen = 0;
    for (size_t i = 0; i < d.n; i++)
        if (d.ip[i] >= a && d.ip[i] < z) {
            char want[100];
            snprintf(want, sizeof(want), "partition+0x%llx ([kernel.kallsyms])",
                     (unsigned long long)(d.ip[i] - a));
            assert_string_equal(d.sym[i], want);
            seen++;
        }
    assert_true(seen > 1000);
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    free(meta);
    free(map);
    free(nmout);
    free(b);
}

/* two CPUs (0 and 2) with the same trace: each decoded on its own, in CPU order; --cpu,
 * summary's columns, --per-cpu stacks; a snapshot listed twice is said once */
static void test_two_cpus(void **state)
{
    char *b = xasprintf("%s/two", tmp), *cmd, *err, *text, *out = xasprintf("%s/o.txt", tmp);
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    copy_dump(dump1, b);
    cmd =
        xasprintf("cd %s && cp cpu0.pt cpu2.pt && sed 's/^cpu 0$/cpu 2/' cpu0.meta > cpu2.meta && "
                  "head -n 1 snapshots >> snapshots",
                  b);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    edit(b, "dump.meta", "cpus 1", "cpus 2");
    text = decode(b, "", &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(d.n, 2 * T.n);
    for (size_t i = 0; i < d.n; i++)
        assert_true(d.ip[i] == T.ip[i % T.n]);
    assert_non_null(strstr(text, "\n[000]  "));
    assert_non_null(strstr(text + strlen(text) / 2 + 1, "\n[002]  "));
    assert_null(strstr(text + strlen(text) / 2 + 64, "\n[000]  "));
    assert_non_null(strstr(err, "1 snapshot overlaps another"));
    assert_int_equal(count_lines(err), 1);
    decoded_free(&d);
    free(text);
    free(err);
    text = decode(b, "--cpu 2 -q", &d, &err, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(d.n, T.n);
    assert_null(strstr(text, "[000]"));
    assert_string_equal(err, "");
    decoded_free(&d);
    free(text);
    free(err);
    assert_int_equal(sh(out, &err, "%s summary -q %s", tool, b), 0);
    text = slurp(out, NULL);
    char *want = xasprintf("%12s %12s %12s", "cpu0", "cpu2", "total");
    assert_non_null(strstr(text, want));
    free(want);
    want =
        xasprintf("\ninstructions%*s %12llu %12llu %12llu\n", 64 - 12, "", (unsigned long long)T.n,
                  (unsigned long long)T.n, (unsigned long long)(2 * T.n));
    if (!strstr(text, want))
        fail_msg("summary: no \"%s\" in\n%s", want, text);
    free(want);
    free(text);
    free(err);
    assert_int_equal(sh(out, &err, "%s stacks -q --per-cpu %s -e %s", tool, b, work), 0);
    text = slurp(out, NULL);
    assert_non_null(strstr(text, "\ncpu2;_start;__libc_start_main;__libc_start_call_main;main;"));
    assert_true(!strncmp(text, "cpu0;", 5));
    free(text);
    free(err);
    free(out);
    free(b);
}

/* a serial log instead of a directory: extracted into a temporary directory (removed after),
 * then decoded; a log cut short decodes what came */
static void test_serial_log(void **state)
{
    char *err, *text, *opts, *tdir = xasprintf("%s/logtmp", tmp),
                             *cut = xasprintf("%s/cut.log", tmp);
    struct decoded d;
    int rc;

    (void)state;
    NEED_DUMP();
    assert_int_equal(mkdir(tdir, 0700), 0);
    /* the whole log: the same instructions as the directory (snapshots from the log) */
    char *out = xasprintf("%s/decode.txt", tmp);
    rc = sh(out, &err, "TMPDIR=%s %s decode %s", tdir, tool, log1);
    assert_int_equal(rc, 0);
    text = slurp(out, NULL);
    decoded_parse(text, &d);
    check_equal_truth(&d, "decode of the serial log");
    decoded_free(&d);
    free(text);
    free(err);
    rc = sh(out, &err, "rmdir %s", tdir); /* fails unless the temporary dump is gone */
    assert_int_equal(rc, 0);
    free(err);
    /* the first half of its lines: the trace came (it is sent first), code pages did not */
    rc = sh(NULL, &err, "{ n=$(wc -l < %s); head -n $((n / 2)) %s > %s; }", log1, log1, cut);
    assert_int_equal(rc, 0);
    free(err);
    rc = sh(out, &err, "%s decode %s", tool, cut);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(err, "the dump is not complete"));
    text = slurp(out, NULL);
    decoded_parse(text, &d);
    assert_true(d.gaps > 0);
    assert_true(d.first_gap_at > 0);
    for (size_t i = 0; i < d.first_gap_at; i++)
        assert_true(d.ip[i] == T.ip[i]);
    assert_non_null(strstr(text, "no code bytes for 0x"));
    print_message("serial log cut in half: %zu instructions before the first gap (no code), %zu "
                  "gap lines\n",
                  d.first_gap_at, d.gaps);
    decoded_free(&d);
    free(text);
    free(err);
    /* with the program's ELF, the code is there again: all of it */
    opts = xasprintf("-e %s", work);
    rc = sh(out, &err, "%s decode %s %s", tool, cut, opts);
    assert_int_equal(rc, 0);
    text = slurp(out, NULL);
    decoded_parse(text, &d);
    check_equal_truth(&d, "cut log with -e");
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);
    free(out);
    free(cut);
    free(tdir);
}

/* ---- kernel symbols: the workload moved into the kernel half ----
 *
 * ptt_mkdump --shift traces ptt_work as if it were kernel code at K_LINK + K_KASLR; objcopy
 * moves ptt_work's ELF to K_LINK (its 0x400000 at 0xffffffff81000000), with an
 * entry_SYSCALL_64 and a _text, as a "vmlinux"; its code symbols at run addresses are the
 * guest's "kallsyms".  Each source of kernel symbols must name >= 99% of the kernel
 * instructions, and the KASLR offset must come from where the help says. */

#define K_LINK  0xffffffff80c00000ull /* + 0x400000 = 0xffffffff81000000 */
#define K_KASLR 0x1e000000ull

static char kdump[4300], vmlinux[4300], kallsyms[4300];
static uint64_t k_entry; /* entry_SYSCALL_64, run address */
static bool kready;

static void kernel_fixtures(void)
{
    char *out, *text, *err;
    FILE *f;
    int r;

    if (kready)
        return;
    snprintf(kdump, sizeof(kdump), "%s/kdump", tmp);
    snprintf(vmlinux, sizeof(vmlinux), "%s/vmlinux", tmp);
    snprintf(kallsyms, sizeof(kallsyms), "%s/kallsyms", tmp);
    r = sh(NULL, &err,
           "objcopy --change-addresses 0x%llx --add-symbol entry_SYSCALL_64=.text:0x100,local "
           "--add-symbol _text=.text:0,global %s %s",
           (unsigned long long)K_LINK, work, vmlinux);
    if (r != 0)
        fail_msg("objcopy: %s", err);
    free(err);
    out = xasprintf("%s/nm-vmlinux.txt", tmp);
    assert_int_equal(sh(out, NULL, "nm -n --defined-only %s", vmlinux), 0);
    text = slurp(out, NULL);
    f = fopen(kallsyms, "w");
    assert_non_null(f);
    for (char *p = text; *p;) {
        char *eol = strchr(p, '\n');
        unsigned long long a;
        char type, name[400];
        if (eol)
            *eol = 0;
        if (sscanf(p, "%llx %c %399s", &a, &type, name) == 3 && strchr("tTwW", type)) {
            fprintf(f, "%016llx %c %s\n", a + K_KASLR, type, name);
            if (!strcmp(name, "entry_SYSCALL_64"))
                k_entry = a + K_KASLR;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    assert_int_equal(fclose(f), 0);
    assert_true(k_entry != 0);
    free(text);
    free(out);
    r = sh(NULL, &err, "%s --shift %llx --lstar %llx --reason boot %s %s", mkdump,
           (unsigned long long)(K_LINK + K_KASLR), (unsigned long long)k_entry, kdump, work);
    if (r != 0)
        fail_msg("ptt_mkdump --shift failed (%d): %s", r, err);
    free(err);
    kready = true;
}

/* summary of DIR with options: kernel instructions named / all kernel instructions */
static double kernel_named(const char *dir, const char *opts, char **text_out)
{
    char *out = xasprintf("%s/ksummary.txt", tmp), *err, *text;
    int r = sh(out, &err, "%s summary %s %s", tool, dir, opts);

    if (r != 0)
        fail_msg("summary %s %s: exit %d: %s", dir, opts, r, err);
    free(err);
    text = slurp(out, NULL);
    free(out);
    uint64_t all = summary_value(text, "  at kernel addresses (from 2^63)");
    uint64_t named = summary_value(text, "    named by a symbol");
    assert_true(all > 100000);
    if (text_out)
        *text_out = text;
    else
        free(text);
    return (double)named / (double)all;
}

static void test_kernel_symbols(void **state)
{
    char *text, *opts, *err, *k2 = xasprintf("%s/kdump-nolstar", tmp);
    char *k3 = xasprintf("%s/kdump-bare", tmp), *p;
    struct decoded d;
    double q;
    int rc;

    (void)state;
    NEED_DUMP();
    kernel_fixtures();
    /* the guest's kallsyms alone: run addresses, no KASLR offset needed */
    opts = xasprintf("--kallsyms %s", kallsyms);
    q = kernel_named(kdump, opts, &text);
    print_message("kernel instructions named: %.2f%% with --kallsyms\n", 100 * q);
    assert_true(q >= 0.99);
    assert_non_null(strstr(text, "partition ([kernel.kallsyms])"));
    free(text);
    text = decode(kdump, opts, &d, &err, &rc);
    assert_int_equal(rc, 0);
    uint64_t a = nm_addr("partition") + K_LINK + K_KASLR,
             z = nm_addr("sort_rec") + K_LINK + K_KASLR;
    size_t seen = 0;
    for (size_t i = 0; i < d.n; i++)
        if (d.ip[i] >= a && d.ip[i] < z) {
            char want[100];
            snprintf(want, sizeof(want), "partition+0x%llx ([kernel.kallsyms])",
                     (unsigned long long)(d.ip[i] - a));
            assert_string_equal(d.sym[i], want);
            seen++;
        }
    assert_true(seen > 1000);
    decoded_free(&d);
    free(text);
    free(err);
    free(opts);

    /* a vmlinux: the offset from the dump's LSTAR */
    opts = xasprintf("--vmlinux %s", vmlinux);
    q = kernel_named(kdump, opts, &text);
    print_message("kernel instructions named: %.2f%% with --vmlinux (KASLR from LSTAR)\n", 100 * q);
    assert_true(q >= 0.99);
    assert_non_null(strstr(text, "KASLR offset 0x1e000000 from the guest's LSTAR"));
    free(text);

    /* no LSTAR, but the guest's kallsyms in the dump: the offset from its _text */
    copy_dump(kdump, k2);
    edit(k2, "dump.meta", "syscall_entry", "# syscall_entry");
    p = xasprintf("cp %s %s/kallsyms", kallsyms, k2);
    assert_int_equal(system(p), 0);
    free(p);
    q = kernel_named(k2, opts, &text);
    print_message("kernel instructions named: %.2f%% with --vmlinux (KASLR from kallsyms)\n",
                  100 * q);
    assert_true(q >= 0.99);
    assert_non_null(strstr(text, "KASLR offset 0x1e000000 from the kallsyms' _text"));
    assert_non_null(strstr(text, "the guest's own"));
    free(text);
    /* the dump's own kallsyms with nothing given: the flame graph names the kernel's
     * functions */
    char *svg = xasprintf("%s/k.svg", tmp);
    assert_int_equal(sh(NULL, NULL, "%s flamegraph %s -o %s", tool, k2, svg), 0);
    text = slurp(svg, NULL);
    assert_non_null(strstr(text, "partition"));
    assert_non_null(strstr(text, "fib"));
    free(text);
    free(svg);

    /* neither: the vmlinux at its link addresses names nothing, and summary says why */
    copy_dump(k2, k3);
    p = xasprintf("%s/kallsyms", k3);
    unlink(p);
    free(p);
    q = kernel_named(k3, opts, &text);
    assert_true(q < 0.01);
    assert_non_null(strstr(text, "KASLR offset 0 from none known (0 assumed)"));
    free(text);
    free(opts);
    q = kernel_named(k3, "", &text);
    assert_non_null(strstr(text, "kernel: no symbols"));
    free(text);
    /* --kaslr wins over the LSTAR */
    opts = xasprintf("--vmlinux %s --kaslr 0", vmlinux);
    q = kernel_named(kdump, opts, &text);
    assert_true(q < 0.01);
    free(text);
    free(opts);
    free(k2);
    free(k3);
}

static void test_kallsyms_errors(void **state)
{
    char *f = xasprintf("%s/ks-bad", tmp), *b = xasprintf("%s/kdump-bad", tmp);

    (void)state;
    NEED_DUMP();
    kernel_fixtures();
    spit(f, "0000000000000000 T _text\n0000000000000000 t fib\n",
         strlen("0000000000000000 T _text\n0000000000000000 t fib\n"));
    expect_error("kallsyms without addresses", "kptr_restrict", "summary %s --kallsyms %s", kdump,
                 f);
    spit(f, "ffffffff81000000 D data\n", strlen("ffffffff81000000 D data\n"));
    expect_error("kallsyms without code", "no code symbols", "summary %s --kallsyms %s", kdump, f);
    spit(f, "ffffffff81000000 T\n", strlen("ffffffff81000000 T\n"));
    expect_error("kallsyms line cut", "not a symbol line", "decode %s --kallsyms %s", kdump, f);
    expect_error("two --kallsyms", "one --kallsyms", "decode %s --kallsyms %s --kallsyms %s", kdump,
                 f, f);
    expect_error("no kallsyms file", "No such file", "decode %s --kallsyms %s/none", kdump, tmp);
    copy_dump(kdump, b);
    char *p = xasprintf("%s/kallsyms", b);
    spit(p, "ffffffff81000000 T ok\nnot a line\n", strlen("ffffffff81000000 T ok\nnot a line\n"));
    expect_error("a bad DIR/kallsyms", "kallsyms:2:", "perf %s -o %s/x.data", b, tmp);
    free(p);
    free(f);
    free(b);
}

/* ---- a log of several dumps over two boots, with the guest's notes ---- */

static void mk(const char *log, const char *name, const char *opts)
{
    char *err;
    int r = sh(NULL, &err, "%s --log %s --append %s %s/%s %s", mkdump, log, opts, tmp, name, work);

    if (r != 0)
        fail_msg("ptt_mkdump %s: %d: %s", opts, r, err);
    free(err);
}

static void test_extract_every_dump(void **state)
{
    char *log = xasprintf("%s/five.log", tmp), *top = xasprintf("%s/new/a/trace", tmp);
    char *out = xasprintf("%s/extract.txt", tmp), *err, *text, *opts, *want, *p;
    char *dirs[5];
    int r;

    (void)state;
    NEED_DUMP();
    kernel_fixtures();
    unlink(log);
    /* boot 1: the kernel's boot window; a program traced with `trace -d` (comm note) and
     * the kallsyms sent; a dump with the guest's LSTAR. boot 2: its boot window, and a dump
     * whose LSTAR is another one (another KASLR) */
    opts = xasprintf("--shift %llx --reason boot --dump-id 1 --boot-id 1",
                     (unsigned long long)(K_LINK + K_KASLR));
    mk(log, "x1", opts);
    free(opts);
    opts =
        xasprintf("--dump-id 2 --boot-id 1 --note-comm myprog:4242 --note-kallsyms %s", kallsyms);
    mk(log, "x2", opts);
    free(opts);
    opts = xasprintf("--dump-id 3 --boot-id 1 --lstar %llx", (unsigned long long)k_entry);
    mk(log, "x3", opts);
    free(opts);
    opts = xasprintf("--shift %llx --reason boot --dump-id 1 --boot-id 2",
                     (unsigned long long)(K_LINK + K_KASLR));
    mk(log, "x4", opts);
    free(opts);
    opts =
        xasprintf("--dump-id 2 --boot-id 2 --lstar %llx", (unsigned long long)(k_entry + 0x200000));
    mk(log, "x5", opts);
    free(opts);

    /* every dump, into directories that do not exist yet */
    r = sh(out, &err, "%s extract %s -o %s", tool, log, top);
    assert_int_equal(r, 0);
    text = slurp(out, NULL);
    want = xasprintf("ptvisor-trace extract: 5 dumps in %s\n", log);
    assert_non_null(strstr(text, want));
    free(want);
    const char *names[5] = {"dump-1-boot-b00000001", "dump-2-vmcall-b00000001", "dump-3-vmcall",
                            "dump-1-boot-b00000002", "dump-2-vmcall-b00000002"};
    const unsigned ids[5] = {1, 2, 3, 1, 2};
    for (unsigned i = 0; i < 5; i++) {
        dirs[i] = xasprintf("%s/%s", top, names[i]);
        want = xasprintf("  dump %u (complete) -> %s\n", ids[i], dirs[i]);
        if (!strstr(text, want))
            fail_msg("extract's output has no \"%s\": %s", want, text);
        free(want);
    }
    assert_int_equal(count_lines(text), 6);
    free(text);
    free(err);
    p = xasprintf("%s/dumps", top);
    text = slurp(p, NULL);
    assert_int_equal(count_lines(text), 5);
    assert_non_null(strstr(text, "dump-3-vmcall 3 0x00000001 vmcall complete\n"));
    free(text);
    free(p);
    /* the kallsyms: the boot-1 dumps have it (byte for byte: the code symbols, sorted), the
     * boot-2 ones not */
    char *ks = slurp(kallsyms, NULL);
    for (unsigned i = 0; i < 5; i++) {
        p = xasprintf("%s/kallsyms", dirs[i]);
        if (i < 3) {
            text = slurp(p, NULL);
            assert_string_equal(text, ks);
            free(text);
        } else if (access(p, F_OK) == 0) {
            fail_msg("%s: the other boot's kallsyms was given to %s", p, names[i]);
        }
        free(p);
    }
    free(ks);
    /* the comm note names dump 2 of boot 1 only */
    p = xasprintf("%s/dump.meta", dirs[1]);
    text = slurp(p, NULL);
    assert_non_null(strstr(text, "comm myprog\npid 4242\n"));
    free(text);
    free(p);
    p = xasprintf("%s/dump.meta", dirs[4]);
    text = slurp(p, NULL);
    assert_null(strstr(text, "comm "));
    free(text);
    free(p);
    /* the directory itself: its last dump, said so */
    r = sh(out, &err, "%s summary %s", tool, top);
    assert_int_equal(r, 0);
    want = xasprintf("holds 5 dumps: reading the last, %s", dirs[4]);
    assert_non_null(strstr(err, want));
    free(want);
    free(err);
    /* the boot window named from the guest's own kallsyms */
    double q = kernel_named(dirs[0], "", &text);
    print_message("kernel instructions named from the kallsyms the guest sent: %.2f%%\n", 100 * q);
    assert_true(q >= 0.99);
    free(text);
    text = NULL;
    r = sh(out, &err, "%s summary %s", tool, dirs[1]);
    assert_int_equal(r, 0);
    text = slurp(out, NULL);
    assert_non_null(strstr(text, "traced program: myprog (pid 4242)"));
    free(text);
    free(err);
    /* --list is as before: one line per dump */
    r = sh(out, &err, "%s extract %s --list", tool, log);
    assert_int_equal(r, 0);
    text = slurp(out, NULL);
    assert_int_equal(count_lines(text), 5);
    free(text);
    free(err);
    /* --last and --dump N: the dump in the directory itself */
    p = xasprintf("%s/one", tmp);
    assert_int_equal(sh(NULL, NULL, "%s extract %s -o %s --dump 3 -q", tool, log, p), 0);
    want = xasprintf("%s/kallsyms", p);
    assert_int_equal(access(want, F_OK), 0);
    free(want);
    free(p);

    /* a damaged note line: the note is not used, and extract says so */
    char *bad = xasprintf("%s/bad-note.log", tmp), *badtop = xasprintf("%s/bad-note", tmp);
    r = sh(bad, NULL,
           "awk '/^@PTV1 d / && !done { sub(/ t 0 /, \" t 1 \"); done = 1 } { print }' %s", log);
    assert_int_equal(r, 0);
    r = sh(out, &err, "%s extract %s -o %s", tool, bad, badtop);
    if (r != 0)
        fail_msg("extract of a log with a damaged note: exit %d: %s", r, err);
    assert_non_null(strstr(err, "line CRC32 mismatch"));
    assert_non_null(strstr(err, "kallsyms note"));
    assert_non_null(strstr(err, "not used"));
    free(err);
    p = xasprintf("%s/%s/kallsyms", badtop, names[0]);
    assert_true(access(p, F_OK) != 0);
    free(p);
    /* without the comm note, ptvisor-ctl's console line still names the program */
    r = sh(bad, NULL, "grep -v '^@PTV1 b .* note=comm ' %s", log);
    assert_int_equal(r, 0);
    r = sh(out, &err, "%s extract %s -o %s", tool, bad, badtop);
    assert_int_equal(r, 0);
    free(err);
    p = xasprintf("%s/%s/dump.meta", badtop, names[1]);
    text = slurp(p, NULL);
    assert_non_null(strstr(text, "comm myprog\n"));
    assert_null(strstr(text, "pid "));
    free(text);
    free(p);
    for (unsigned i = 0; i < 5; i++)
        free(dirs[i]);
    free(bad);
    free(badtop);
    free(out);
    free(top);
    free(log);
}

static void test_help(void **state)
{
    char *out = xasprintf("%s/help.txt", tmp), *text;
    const char *sect[] = {"NAME\n",  "SYNOPSIS\n",    "DESCRIPTION\n", "COMMANDS\n",  "OPTIONS",
                          "FILES\n", "EXIT STATUS\n", "EXAMPLES\n",    "CODE BYTES\n"};

    (void)state;
    assert_int_equal(sh(out, NULL, "%s --help", tool), 0);
    text = slurp(out, NULL);
    for (unsigned i = 0; i < sizeof(sect) / sizeof(sect[0]); i++)
        if (!strstr(text, sect[i]))
            fail_msg("--help has no %s", sect[i]);
    free(text);
    const char *cmds[] = {"decode", "stacks", "flamegraph", "summary"};
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(sh(out, NULL, "%s %s --help", tool, cmds[i]), 0);
        text = slurp(out, NULL);
        assert_non_null(strstr(text, "SYNOPSIS\n"));
        assert_non_null(strstr(text, cmds[i]));
        free(text);
    }
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_decode_truth),
        cmocka_unit_test(test_decode_cr3),
        cmocka_unit_test(test_branches),
        cmocka_unit_test(test_stacks),
        cmocka_unit_test(test_flamegraph),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_corrupt_byte),
        cmocka_unit_test(test_hole),
        cmocka_unit_test(test_elf_code),
        cmocka_unit_test(test_system_map),
        cmocka_unit_test(test_kaslr_from_lstar),
        cmocka_unit_test(test_serial_log),
        cmocka_unit_test(test_two_cpus),
        cmocka_unit_test(test_kernel_symbols),
        cmocka_unit_test(test_kallsyms_errors),
        cmocka_unit_test(test_extract_every_dump),
    };
    ssize_t n = readlink("/proc/self/exe", bin_dir, sizeof(bin_dir) - 1);
    const char *base = getenv("TMPDIR");
    int r;

    if (n <= 0) {
        printf("SKIP: /proc/self/exe unreadable\n");
        return 77;
    }
    bin_dir[n] = 0;
    *strrchr(bin_dir, '/') = 0;
    snprintf(tool, sizeof(tool), "%s/ptvisor-trace-san", bin_dir);
    snprintf(work, sizeof(work), "%s/ptt_work", bin_dir);
    snprintf(mkdump, sizeof(mkdump), "%s/ptt_mkdump", bin_dir);
    snprintf(tmp, sizeof(tmp), "%s/test_ptt.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(tmp)) {
        printf("mkdtemp %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    snprintf(dump1, sizeof(dump1), "%s/dump", tmp);
    snprintf(dump_cr3, sizeof(dump_cr3), "%s/dump-cr3", tmp);
    snprintf(log1, sizeof(log1), "%s/serial.log", tmp);
    r = cmocka_run_group_tests(tests, setup, teardown);
    if (skip_all) {
        printf("SKIP: %s\n", skip_why);
        return 77;
    }
    return r;
}
