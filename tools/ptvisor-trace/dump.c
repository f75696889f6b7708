/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: load a dump directory (ptt.h) or a serial log (extracted into a temporary
 * directory first).  Every file is checked: the text files line by line (one-line errors
 * naming the file and the line), sizes against what the metadata says, snapshot paths stay
 * inside the directory (no "..", not absolute, no symlink out).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "ptt.h"

#define META_MAX  (1u << 20)
#define SNAPL_MAX (64u << 20)
#define PT_MAX    (4ull << 30)
#define SNAP_MAX  (1ull << 30) /* one snapshot's bytes */
#define NSNAP_MAX 1000000u
#define NCR3_MAX  65536u
#define NHOLE_MAX 1000000u

int ptt_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    char *b;

    *buf = NULL;
    *len = 0;
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > max) {
        snprintf(err, errlen, "%s: %llu bytes, more than the %llu this file may have", path,
                 (unsigned long long)st.st_size, (unsigned long long)max);
        close(fd);
        return -1;
    }
    b = malloc((size_t)st.st_size + 1);
    if (!b) {
        snprintf(err, errlen, "%s: out of memory for %llu bytes", path,
                 (unsigned long long)st.st_size);
        close(fd);
        return -1;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "%s: %s", path,
                     r < 0 ? strerror(errno) : "shorter than its size");
            free(b);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    b[got] = 0;
    *buf = b;
    *len = got;
    return 0;
}

/* ---- numbers and lines ---- */

static int fail(char *err, size_t errlen, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, unsigned line, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(err, errlen, "line %u: ", line);

    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* a token: [s, s+n) */
struct tok {
    const char *s;
    size_t n;
};

static bool tok_is(struct tok t, const char *w)
{
    return t.n == strlen(w) && !memcmp(t.s, w, t.n);
}

static int parse_hex(struct tok t, bool need_prefix, uint64_t *v)
{
    size_t i = 0;

    if (t.n >= 2 && t.s[0] == '0' && (t.s[1] | 0x20) == 'x')
        i = 2;
    else if (need_prefix)
        return -1;
    if (i == t.n || t.n - i > 16)
        return -1;
    *v = 0;
    for (; i < t.n; i++) {
        int d = ptt_hexdig((unsigned char)t.s[i]);
        if (d < 0)
            return -1;
        *v = *v << 4 | (uint64_t)d;
    }
    return 0;
}

static int parse_dec(struct tok t, uint64_t *v)
{
    if (t.n == 0 || t.n > 20)
        return -1;
    *v = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.s[i] < '0' || t.s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(t.s[i] - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return -1;
        *v = *v * 10 + d;
    }
    return 0;
}

/* decimal, or hex with 0x */
static int parse_num(struct tok t, uint64_t *v)
{
    if (t.n >= 2 && t.s[0] == '0' && (t.s[1] | 0x20) == 'x')
        return parse_hex(t, true, v);
    return parse_dec(t, v);
}

/* split the text in lines; each line in "key value" form: key [a-z0-9_]+, one space or
 * tab, value = the rest (printable, no trailing blanks).  Blank lines and '#' lines are
 * skipped.  Returns 1 with a line, 0 at the end, -1 on a bad line (error set). */
struct lines {
    const char *text;
    size_t len, pos;
    unsigned no;
};

static int next_line(struct lines *L, struct tok *key, struct tok *val, char *err, size_t errlen)
{
    for (;;) {
        if (L->pos >= L->len)
            return 0;
        const char *p = L->text + L->pos, *eol = memchr(p, '\n', L->len - L->pos);
        size_t n = eol ? (size_t)(eol - p) : L->len - L->pos;

        L->pos += n + (eol ? 1 : 0);
        L->no++;
        if (n && p[n - 1] == '\r')
            n--;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20 && p[i] != '\t')
                return fail(err, errlen, L->no, "control byte 0x%02x", (unsigned char)p[i]);
            else if ((unsigned char)p[i] >= 0x7f)
                return fail(err, errlen, L->no, "non-ASCII byte 0x%02x", (unsigned char)p[i]);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == 0 || p[0] == '#')
            continue;
        size_t k = 0;
        while (k < n &&
               ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= '0' && p[k] <= '9') || p[k] == '_'))
            k++;
        if (k == 0 || k == n || (p[k] != ' ' && p[k] != '\t'))
            return fail(err, errlen, L->no, "not a \"key value\" line");
        *key = (struct tok){p, k};
        while (k < n && (p[k] == ' ' || p[k] == '\t'))
            k++;
        *val = (struct tok){p + k, n - k};
        return 1;
    }
}

static void tok_copy(char *dst, size_t size, struct tok t)
{
    size_t n = t.n < size - 1 ? t.n : size - 1;

    memcpy(dst, t.s, n);
    dst[n] = 0;
}

/* ---- dump.meta ---- */

int ptt_parse_dump_meta(const char *text, size_t len, struct ptt_dump *d, uint64_t frames[3],
                        char *err, size_t errlen)
{
    static const char *const keys[] = {"protocol",  "dump",       "reason",         "source",
                                       "cpus",      "tsc_hz",     "kernel_base",    "complete",
                                       "frames_ok", "frames_bad", "frames_missing", "syscall_entry",
                                       "comm",      "pid"};
    bool seen[sizeof(keys) / sizeof(keys[0])] = {0};
    struct lines L = {text, len, 0, 0};
    struct tok k, v;
    uint64_t x, fr[3] = {0};
    int r;

    while ((r = next_line(&L, &k, &v, err, errlen)) > 0) {
        unsigned i;
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (tok_is(k, keys[i]))
                break;
        if (i == sizeof(keys) / sizeof(keys[0]))
            continue; /* unknown keys are ignored (newer protocol) */
        if (seen[i])
            return fail(err, errlen, L.no, "\"%s\" given twice", keys[i]);
        seen[i] = true;
        switch (i) {
        case 0: /* protocol */
            if (parse_dec(v, &x) || x == 0 || x > 1000)
                return fail(err, errlen, L.no, "protocol: not a version number");
            d->protocol = (unsigned)x;
            break;
        case 1:
            if (parse_dec(v, &x) || x > UINT32_MAX)
                return fail(err, errlen, L.no, "dump: not a dump number");
            d->dump_id = (unsigned)x;
            break;
        case 2:
            if (!tok_is(v, "vmcall") && !tok_is(v, "crash") && !tok_is(v, "serial") &&
                !tok_is(v, "boot"))
                return fail(err, errlen, L.no, "reason: not vmcall, crash, serial or boot");
            tok_copy(d->reason, sizeof(d->reason), v);
            break;
        case 3:
            if (!tok_is(v, "hardware") && !tok_is(v, "software"))
                return fail(err, errlen, L.no, "source: not hardware or software");
            tok_copy(d->source, sizeof(d->source), v);
            break;
        case 4:
            if (parse_dec(v, &x) || x > PTT_MAX_CPUS)
                return fail(err, errlen, L.no, "cpus: not a number up to %u", PTT_MAX_CPUS);
            d->ncpu = (unsigned)x;
            break;
        case 5:
            if (parse_dec(v, &d->tsc_hz))
                return fail(err, errlen, L.no, "tsc_hz: not a number");
            break;
        case 6:
            if (parse_hex(v, true, &d->kernel_base))
                return fail(err, errlen, L.no, "kernel_base: not 0x and 1 to 16 hex digits");
            break;
        case 7:
            if (tok_is(v, "yes"))
                d->complete = 1;
            else if (tok_is(v, "no"))
                d->complete = 0;
            else
                return fail(err, errlen, L.no, "complete: not yes or no");
            break;
        case 11:
            if (parse_hex(v, true, &d->syscall_entry))
                return fail(err, errlen, L.no, "syscall_entry: not 0x and 1 to 16 hex digits");
            break;
        case 12:
            if (v.n == 0 || v.n >= sizeof(d->comm))
                return fail(err, errlen, L.no, "comm: not 1 to %zu characters",
                            sizeof(d->comm) - 1);
            for (size_t c = 0; c < v.n; c++)
                if (v.s[c] == ' ' || v.s[c] == '\t')
                    return fail(err, errlen, L.no, "comm: a name without blanks");
            tok_copy(d->comm, sizeof(d->comm), v);
            break;
        case 13:
            if (parse_dec(v, &d->pid) || d->pid > INT32_MAX)
                return fail(err, errlen, L.no, "pid: not a process id");
            d->has_pid = true;
            break;
        default: /* 8, 9, 10: the frame counts */
            if (parse_dec(v, &fr[i - 8]))
                return fail(err, errlen, L.no, "%s: not a number", keys[i]);
            break;
        }
    }
    if (r < 0)
        return -1;
    if (!seen[0])
        return fail(err, errlen, L.no, "no \"protocol\" line");
    if (!seen[4])
        return fail(err, errlen, L.no, "no \"cpus\" line");
    if (!seen[7])
        d->complete = 0;
    if (frames)
        memcpy(frames, fr, sizeof(fr));
    return 0;
}

/* ---- cpuN.meta ---- */

static int hole_cmp(const void *a, const void *b)
{
    const struct ptt_hole *x = a, *y = b;

    return x->off < y->off ? -1 : x->off > y->off;
}

int ptt_parse_cpu_meta(const char *text, size_t len, struct ptt_cpu *c, uint64_t *bytes, char *err,
                       size_t errlen)
{
    struct lines L = {text, len, 0, 0};
    struct tok k, v;
    bool have_cpu = false, have_bytes = false;
    unsigned hcap = 0, ccap = 0;
    uint64_t x;
    int r;

    while ((r = next_line(&L, &k, &v, err, errlen)) > 0) {
        if (tok_is(k, "cpu")) {
            if (have_cpu || parse_dec(v, &x) || x >= PTT_MAX_CPUS)
                return fail(err, errlen, L.no, "cpu: not one CPU number below %u", PTT_MAX_CPUS);
            c->cpu = (unsigned)x;
            have_cpu = true;
        } else if (tok_is(k, "bytes")) {
            if (have_bytes || parse_dec(v, bytes))
                return fail(err, errlen, L.no, "bytes: not one byte count");
            have_bytes = true;
        } else if (tok_is(k, "ring_size")) {
            if (parse_dec(v, &c->ring_size))
                return fail(err, errlen, L.no, "ring_size: not a number");
        } else if (tok_is(k, "wrapped")) {
            if (!tok_is(v, "0") && !tok_is(v, "1"))
                return fail(err, errlen, L.no, "wrapped: not 0 or 1");
            c->wrapped = v.s[0] == '1';
        } else if (tok_is(k, "overflows")) {
            if (parse_dec(v, &c->overflows))
                return fail(err, errlen, L.no, "overflows: not a number");
        } else if (tok_is(k, "crc")) {
            if (tok_is(v, "bad"))
                c->crc_bad = 1;
            else if (!tok_is(v, "ok") && !tok_is(v, "unknown"))
                return fail(err, errlen, L.no, "crc: not ok, bad or unknown");
        } else if (tok_is(k, "cr3")) {
            if (parse_hex(v, true, &x))
                return fail(err, errlen, L.no, "cr3: not 0x and 1 to 16 hex digits");
            if (c->ncr3 == NCR3_MAX)
                return fail(err, errlen, L.no, "more than %u cr3 lines", NCR3_MAX);
            if (c->ncr3 == ccap) {
                ccap = ccap ? 2 * ccap : 16;
                uint64_t *n = realloc(c->cr3s, ccap * sizeof(*n));
                if (!n)
                    return fail(err, errlen, L.no, "out of memory");
                c->cr3s = n;
            }
            c->cr3s[c->ncr3++] = x;
        } else if (tok_is(k, "missing")) {
            const char *plus = memchr(v.s, '+', v.n);
            struct ptt_hole h;
            if (!plus || parse_num((struct tok){v.s, (size_t)(plus - v.s)}, &h.off) ||
                parse_num((struct tok){plus + 1, v.n - (size_t)(plus + 1 - v.s)}, &h.len) ||
                h.len == 0 || h.off + h.len < h.off)
                return fail(err, errlen, L.no, "missing: not OFFSET+LENGTH (LENGTH > 0)");
            if (c->holes == NHOLE_MAX)
                return fail(err, errlen, L.no, "more than %u missing lines", NHOLE_MAX);
            if (c->holes == hcap) {
                hcap = hcap ? 2 * hcap : 16;
                struct ptt_hole *n = realloc(c->hole, hcap * sizeof(*n));
                if (!n)
                    return fail(err, errlen, L.no, "out of memory");
                c->hole = n;
            }
            c->hole[c->holes++] = h;
        }
        /* filters and unknown keys: informational */
    }
    if (r < 0)
        return -1;
    if (!have_cpu)
        return fail(err, errlen, L.no, "no \"cpu\" line");
    if (!have_bytes)
        return fail(err, errlen, L.no, "no \"bytes\" line");
    if (c->holes)
        qsort(c->hole, c->holes, sizeof(*c->hole), hole_cmp);
    for (unsigned i = 0; i < c->holes; i++) {
        const struct ptt_hole *h = &c->hole[i];
        if (h->off + h->len > *bytes)
            return fail(err, errlen, L.no, "missing %llu+%llu: past the stream's %llu bytes",
                        (unsigned long long)h->off, (unsigned long long)h->len,
                        (unsigned long long)*bytes);
        if (i && c->hole[i - 1].off + c->hole[i - 1].len > h->off)
            return fail(err, errlen, L.no, "missing ranges at %llu and %llu overlap",
                        (unsigned long long)c->hole[i - 1].off, (unsigned long long)h->off);
    }
    return 0;
}

/* ---- snapshots ---- */

/* FILE stays inside DIR by its shape: relative, no ".." component, printable */
static const char *path_problem(struct tok p)
{
    if (p.n == 0)
        return "no file name";
    if (p.s[0] == '/')
        return "an absolute path";
    for (size_t i = 0; i < p.n;) {
        size_t j = i;
        while (j < p.n && p.s[j] != '/')
            j++;
        if (j - i == 2 && p.s[i] == '.' && p.s[i + 1] == '.')
            return "a \"..\" component";
        i = j + 1;
    }
    if (p.s[p.n - 1] == '/')
        return "a directory";
    if (p.n > PATH_MAX / 2)
        return "too long";
    return NULL;
}

int ptt_parse_snapshots(const char *text, size_t len, struct ptt_dump *d, char *err, size_t errlen)
{
    unsigned line = 0, cap = 0;
    size_t pos = 0;

    while (pos < len) {
        const char *p = text + pos, *eol = memchr(p, '\n', len - pos);
        size_t n = eol ? (size_t)(eol - p) : len - pos;
        struct tok f[4];
        unsigned nf = 0;
        size_t i = 0;

        pos += n + (eol ? 1 : 0);
        line++;
        if (n && p[n - 1] == '\r')
            n--;
        for (size_t j = 0; j < n; j++)
            if ((unsigned char)p[j] < 0x20 || (unsigned char)p[j] >= 0x7f)
                return fail(err, errlen, line, "byte 0x%02x in the snapshot list",
                            (unsigned char)p[j]);
        while (n && p[n - 1] == ' ')
            n--;
        if (n == 0 || p[0] == '#')
            continue;
        while (nf < 4 && i < n) { /* three fields, then FILE = the rest of the line */
            while (i < n && p[i] == ' ')
                i++;
            if (i == n)
                break;
            size_t j = nf == 3 ? n : i;
            while (j < n && p[j] != ' ')
                j++;
            f[nf++] = (struct tok){p + i, j - i};
            i = j;
        }
        if (nf != 4)
            return fail(err, errlen, line, "not \"VA LEN CR3|any FILE\"");
        struct ptt_snap s = {0};
        const char *why;
        if (parse_hex(f[0], false, &s.va))
            return fail(err, errlen, line, "VA: not 1 to 16 hex digits");
        if (parse_num(f[1], &s.len) || s.len == 0 || s.len > SNAP_MAX)
            return fail(err, errlen, line, "LEN: not a length from 1 to %llu",
                        (unsigned long long)SNAP_MAX);
        if (s.va + (s.len - 1) < s.va)
            return fail(err, errlen, line, "snapshot at 0x%llx + %llu wraps past 2^64",
                        (unsigned long long)s.va, (unsigned long long)s.len);
        if (tok_is(f[2], "any"))
            s.cr3 = PTT_CR3_ANY;
        else if (parse_hex(f[2], false, &s.cr3) || s.cr3 == PTT_CR3_ANY)
            return fail(err, errlen, line, "CR3: not hex digits or \"any\"");
        if ((why = path_problem(f[3])))
            return fail(err, errlen, line, "snapshot file is %s", why);
        if (d->nsnap == NSNAP_MAX)
            return fail(err, errlen, line, "more than %u snapshots", NSNAP_MAX);
        s.path = strndup(f[3].s, f[3].n);
        if (!s.path)
            return fail(err, errlen, line, "out of memory");
        if (d->nsnap == cap) {
            cap = cap ? 2 * cap : 64;
            struct ptt_snap *ns = realloc(d->snap, cap * sizeof(*ns));
            if (!ns) {
                free(s.path);
                return fail(err, errlen, line, "out of memory");
            }
            d->snap = ns;
        }
        d->snap[d->nsnap++] = s;
    }
    return 0;
}

/* ---- the directory ---- */

static char *join(const char *dir, const char *name)
{
    char *p = NULL;
    size_t n = strlen(dir);

    while (n > 1 && dir[n - 1] == '/') /* "trace/" + "x" is "trace/x" */
        n--;
    if (asprintf(&p, "%.*s/%s", (int)n, dir, name) < 0)
        return NULL;
    return p;
}

/* read DIR/name as text and run a parser; errors prefixed with the path */
static int load_text(const char *dir, const char *name, size_t max, char **text, size_t *len,
                     char *err, size_t errlen)
{
    char *path = join(dir, name);
    int r;

    if (!path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r = ptt_read_file(path, max, text, len, err, errlen);
    free(path);
    return r;
}

static void prefix_err(const char *dir, const char *name, char *err, size_t errlen)
{
    char tmp[512];

    snprintf(tmp, sizeof(tmp), "%s", err);
    snprintf(err, errlen, "%s/%s: %s", dir, name, tmp);
}

/* cpuN.meta names: "cpu" + a CPU number without leading zeros + ".meta" */
static int cpu_meta_name(const char *name, unsigned *cpu)
{
    size_t n = strlen(name);
    uint64_t v;

    if (n < 9 || strncmp(name, "cpu", 3) || strcmp(name + n - 5, ".meta"))
        return -1;
    struct tok t = {name + 3, n - 8};
    if (parse_dec(t, &v) || (t.n > 1 && t.s[0] == '0'))
        return -1;
    if (v >= PTT_MAX_CPUS)
        return -2;
    *cpu = (unsigned)v;
    return 0;
}

static int cpu_cmp(const void *a, const void *b)
{
    const struct ptt_cpu *x = a, *y = b;

    return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

static int load_cpus(struct ptt_dump *d, char *err, size_t errlen)
{
    DIR *dh = opendir(d->dir);
    struct dirent *de;
    unsigned found = 0, want = d->ncpu;
    bool have[PTT_MAX_CPUS] = {0};

    if (!dh) {
        snprintf(err, errlen, "%s: %s", d->dir, strerror(errno));
        return -1;
    }
    d->ncpu = 0;
    while ((de = readdir(dh))) {
        unsigned cpu;
        int r = cpu_meta_name(de->d_name, &cpu);
        if (r == -2) {
            snprintf(err, errlen, "%s/%s: CPU number not below %u", d->dir, de->d_name,
                     PTT_MAX_CPUS);
            closedir(dh);
            return -1;
        }
        if (r < 0)
            continue;
        if (found == PTT_MAX_CPUS || have[cpu]) {
            closedir(dh);
            snprintf(err, errlen, "%s: CPU %u twice", d->dir, cpu);
            return -1;
        }
        have[cpu] = true;
        d->cpu[found++].cpu = cpu;
    }
    closedir(dh);
    if (found != want) {
        snprintf(err, errlen, "%s/dump.meta: cpus %u, but %u cpuN.meta file%s in the directory",
                 d->dir, want, found, found == 1 ? "" : "s");
        return -1;
    }
    qsort(d->cpu, found, sizeof(d->cpu[0]), cpu_cmp);
    for (unsigned i = 0; i < found; i++) {
        struct ptt_cpu *c = &d->cpu[i];
        unsigned cpu = c->cpu;
        char name[32], *text, *pt;
        size_t len;
        uint64_t bytes = 0, missing = 0;

        d->ncpu = i + 1; /* what is allocated gets freed */
        snprintf(name, sizeof(name), "cpu%u.meta", cpu);
        if (load_text(d->dir, name, META_MAX, &text, &len, err, errlen) != 0)
            return -1;
        int r = ptt_parse_cpu_meta(text, len, c, &bytes, err, errlen);
        free(text);
        if (r != 0) {
            prefix_err(d->dir, name, err, errlen);
            return -1;
        }
        if (c->cpu != cpu) {
            snprintf(err, errlen, "%s/%s: says cpu %u", d->dir, name, c->cpu);
            return -1;
        }
        for (unsigned h = 0; h < c->holes; h++)
            missing += c->hole[h].len;
        snprintf(name, sizeof(name), "cpu%u.pt", cpu);
        if (load_text(d->dir, name, PT_MAX, &pt, &len, err, errlen) != 0)
            return -1;
        c->pt = (uint8_t *)pt;
        c->pt_len = len;
        if (len != bytes - missing) {
            snprintf(err, errlen,
                     "%s/%s: %zu bytes, but cpu%u.meta says %llu bytes of which %llu missing "
                     "(a truncated or wrong file)",
                     d->dir, name, len, cpu, (unsigned long long)bytes,
                     (unsigned long long)missing);
            return -1;
        }
    }
    return 0;
}

static int load_snaps(struct ptt_dump *d, char *err, size_t errlen)
{
    char *text, *path, *real_dir;
    size_t len;
    int r;

    path = join(d->dir, "snapshots");
    if (!path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        free(path);
        return 0; /* no snapshots: code only from ELF files */
    }
    r = ptt_read_file(path, SNAPL_MAX, &text, &len, err, errlen);
    free(path);
    if (r != 0)
        return -1;
    r = ptt_parse_snapshots(text, len, d, err, errlen);
    free(text);
    if (r != 0) {
        prefix_err(d->dir, "snapshots", err, errlen);
        return -1;
    }
    real_dir = realpath(d->dir, NULL);
    if (!real_dir) {
        snprintf(err, errlen, "%s: %s", d->dir, strerror(errno));
        return -1;
    }
    size_t rl = strlen(real_dir);
    r = 0;
    for (unsigned i = 0; i < d->nsnap && r == 0; i++) {
        struct ptt_snap *s = &d->snap[i];
        char *full = join(d->dir, s->path), *real = NULL;
        struct stat st;

        r = -1;
        if (!full)
            snprintf(err, errlen, "out of memory");
        else if (!(real = realpath(full, NULL)) || stat(real, &st) != 0)
            snprintf(err, errlen, "%s/snapshots: snapshot %u: %s: %s", d->dir, i + 1, s->path,
                     strerror(errno));
        else if (strncmp(real, real_dir, rl) || real[rl] != '/')
            snprintf(err, errlen, "%s/snapshots: snapshot %u: %s leads outside the dump (to %s)",
                     d->dir, i + 1, s->path, real);
        else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->len)
            snprintf(err, errlen,
                     "%s/snapshots: snapshot %u: %s has %llu bytes, the list says %llu", d->dir,
                     i + 1, s->path, (unsigned long long)st.st_size, (unsigned long long)s->len);
        else
            r = 0;
        free(real);
        if (r == 0) {
            free(s->path);
            s->path = full;
        } else {
            free(full);
        }
    }
    free(real_dir);
    return r;
}

/* dumps extracted from a log into a temporary directory, removed by ptt_dump_free */
static char *tmp_dirs[16];

static void rm_tree(const char *dir)
{
    DIR *dh = opendir(dir);
    struct dirent *de;

    if (!dh)
        return;
    while ((de = readdir(dh))) {
        char *p;
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        p = join(dir, de->d_name);
        if (!p)
            continue;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
        free(p);
    }
    closedir(dh);
    rmdir(dir);
}

/* DIR itself when it is a dump directory; else, where it is what extract wrote for every dump
 * of a log (DIR/dumps: "NAME ID BOOT REASON STATUS" lines), its last dump's directory;
 * malloc'd, or NULL with a one-line reason */
static char *pick_dir(const char *dir, unsigned *ndumps, char *err, size_t errlen)
{
    char *meta = join(dir, "dump.meta"), *index = join(dir, "dumps"), *text = NULL, *out = NULL;
    char last[256] = "";
    size_t len;

    *ndumps = 0;
    if (!meta || !index) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (access(meta, F_OK) == 0 || access(index, F_OK) != 0) {
        out = strdup(dir); /* a dump directory (or not: dump.meta's absence is reported) */
        if (!out)
            snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (ptt_read_file(index, META_MAX, &text, &len, err, errlen) != 0)
        goto done;
    unsigned no = 0;
    for (char *p = text, *eol; p < text + len; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(text + len - p));
        if (!eol)
            eol = text + len;
        no++;
        size_t n = 0;
        while (p + n < eol && p[n] > ' ' && p[n] < 0x7f)
            n++;
        if (n == 0 && p == eol)
            continue;
        if (n < 6 || n >= sizeof(last) || strncmp(p, "dump-", 5) || memchr(p, '/', n) ||
            (p + n < eol && p[n] != ' ')) {
            snprintf(err, errlen, "%s/dumps: line %u: not \"dump-... ID BOOT REASON STATUS\"", dir,
                     no);
            goto done;
        }
        memcpy(last, p, n);
        last[n] = 0;
        (*ndumps)++;
    }
    if (!*ndumps) {
        snprintf(err, errlen, "%s/dumps lists no dump (extract wrote none there)", dir);
        goto done;
    }
    out = join(dir, last);
    if (!out)
        snprintf(err, errlen, "out of memory");
done:
    free(meta);
    free(index);
    free(text);
    return out;
}

int ptt_dump_load(const char *dir_or_log, struct ptt_dump *d, char *err, size_t errlen)
{
    struct stat st;
    char *text;
    size_t len;
    int r;

    memset(d, 0, sizeof(*d));
    if (stat(dir_or_log, &st) != 0) {
        snprintf(err, errlen, "%s: %s", dir_or_log, strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode)) { /* a serial log */
        const char *base = getenv("TMPDIR");
        char *tmp = NULL;
        unsigned slot;

        for (slot = 0; slot < 16 && tmp_dirs[slot]; slot++)
            ;
        if (slot == 16 || asprintf(&tmp, "%s/ptvisor-trace.XXXXXX", base ? base : "/tmp") < 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (!mkdtemp(tmp)) {
            snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
            free(tmp);
            return -1;
        }
        tmp_dirs[slot] = tmp;
        d->dir = strdup(tmp);
        if (!d->dir || ptt_extract_log(dir_or_log, tmp, 1, &d->ndumps, err, errlen) != 0) {
            if (!d->dir)
                snprintf(err, errlen, "out of memory");
            ptt_dump_free(d);
            return -1;
        }
    } else if (S_ISDIR(st.st_mode)) {
        d->dir = pick_dir(dir_or_log, &d->ndumps, err, errlen);
        if (!d->dir)
            return -1;
    } else {
        snprintf(err, errlen, "%s: neither a dump directory nor a serial log", dir_or_log);
        return -1;
    }
    if (d->ndumps > 1) {
        d->given = strdup(dir_or_log);
        if (!d->given) {
            snprintf(err, errlen, "out of memory");
            ptt_dump_free(d);
            return -1;
        }
    }
    if (load_text(d->dir, "dump.meta", META_MAX, &text, &len, err, errlen) != 0) {
        ptt_dump_free(d);
        return -1;
    }
    unsigned ndumps = d->ndumps;
    char *given = d->given;
    r = ptt_parse_dump_meta(text, len, d, NULL, err, errlen);
    d->ndumps = ndumps;
    d->given = given;
    free(text);
    if (r != 0) {
        prefix_err(d->dir, "dump.meta", err, errlen);
        ptt_dump_free(d);
        return -1;
    }
    if (load_cpus(d, err, errlen) != 0 || load_snaps(d, err, errlen) != 0) {
        ptt_dump_free(d);
        return -1;
    }
    return 0;
}

void ptt_dump_free(struct ptt_dump *d)
{
    for (unsigned i = 0; i < d->ncpu; i++) {
        free(d->cpu[i].pt);
        free(d->cpu[i].cr3s);
        free(d->cpu[i].hole);
    }
    for (unsigned i = 0; i < d->nsnap; i++)
        free(d->snap[i].path);
    free(d->snap);
    for (unsigned i = 0; d->dir && i < 16; i++)
        if (tmp_dirs[i] && !strcmp(tmp_dirs[i], d->dir)) {
            rm_tree(tmp_dirs[i]);
            free(tmp_dirs[i]);
            tmp_dirs[i] = NULL;
        }
    free(d->dir);
    free(d->given);
    memset(d, 0, sizeof(*d));
}
