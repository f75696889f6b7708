/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace extract: the subcommand (options, the dump directory's preparation, progress,
 * exit status) over the reassembly core of fx.c, fx_finish.c and fx_out.c (fx_*, declared in
 * frame_dec.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "frame_dec.h"
#include "ptt.h"

/* ---- the subcommand ---- */

static const char help[] =
    "NAME\n"
    "    ptvisor-trace extract - turn a captured serial log into a trace dump directory\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace extract LOG -o DIR [-q] [--dump N]\n"
    "    ptvisor-trace extract LOG --list\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads LOG (a serial console capture; - for standard input), finds the frame lines\n"
    "    the ptvisor VMM writes when it dumps a trace (\"@PTV1 ...\", docs/serial-protocol.md),\n"
    "    checks every line's CRC32, puts the data back together by offset, checks every block\n"
    "    and every stream against its CRC32, and writes the dump directory DIR:\n"
    "        dump.meta     the dump: protocol, dump id, boot id, reason, source, CPUs,\n"
    "                      TSC frequency, kernel base, complete yes|no, frame counts\n"
    "        cpuN.pt       the PT bytes of CPU N, oldest first; a range lost in transit is\n"
    "                      left out, never zero-filled (cpuN.meta lists it as missing OFF+LEN)\n"
    "        cpuN.meta     ring size, wrap and overflow state, filters, CR3s, missing ranges,\n"
    "                      whole-stream CRC32 ok|bad|unknown\n"
    "        snapshots     one line per code snapshot: VA LEN CR3|any FILE (a snapshot with a\n"
    "                      hole is listed as its whole pieces)\n"
    "        snap/         the snapshot bytes\n"
    "        crash.txt     the crash report, when the dump has one\n"
    "        console.log   LOG without its frame lines: the guest's console as it was\n"
    "    Frame lines may be mixed with any console output, end in \\r\\n, come twice, out of\n"
    "    order, or follow console text on the same line. Nothing is guessed: a range is\n"
    "    written only when its bytes passed their CRC32.\n"
    "\n"
    "    Every finding goes to standard error with its log line number: lines that are not\n"
    "    valid frames (and why), blocks that failed their CRC32 or LZ4 decoding, frames lost\n"
    "    (by sequence number), byte ranges missing, a dump without its END (a cut log),\n"
    "    duplicated frames (harmless), then a summary. A log with several dumps: the last one\n"
    "    is extracted unless --dump says which.\n"
    "\n"
    "OPTIONS\n"
    "    -o DIR      the dump directory (created; an existing one is refreshed only if it\n"
    "                holds a dump.meta or is empty)\n"
    "    --dump N    the dump with id N (the last one with that id if the log holds several\n"
    "                boots); default: the last dump in the log\n"
    "    --list      list the dumps in LOG, one line each, and write nothing\n"
    "    -q          no progress line, no notes on harmless things (duplicates)\n"
    "    -h, --help  this text\n"
    "\n"
    "EXIT STATUS\n"
    "    0  the dump is complete: every stream of every CPU whole and verified\n"
    "    2  the dump is incomplete but usable (what is there is verified)\n"
    "    1  error: no dump in the log, nothing usable, bad arguments, I/O error\n"
    "\n"
    "SEE ALSO\n"
    "    docs/serial-protocol.md, ptvisor-trace decode, ptvisor-trace perf\n";

/* files this tool writes into a dump directory (a refresh removes only these) */
static bool ours(const char *n)
{
    unsigned c;
    int len = 0;

    if (!strcmp(n, "dump.meta") || !strcmp(n, "snapshots") || !strcmp(n, "crash.txt") ||
        !strcmp(n, "console.log"))
        return true;
    if (sscanf(n, "cpu%u.pt%n", &c, &len) == 1 && len > 0 && !n[len])
        return true;
    len = 0;
    return sscanf(n, "cpu%u.meta%n", &c, &len) == 1 && len > 0 && !n[len];
}

static int prepare_dir(const char *dir, char *why, size_t whylen)
{
    struct stat sb;
    char path[PATH_MAX];
    DIR *dp;
    struct dirent *de;
    bool empty = true, dumpdir = false;

    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0777) != 0) {
            snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, whylen, "%s exists and is not a directory", dir);
        return -1;
    }
    dp = opendir(dir);
    if (!dp) {
        snprintf(why, whylen, "cannot read %s: %s", dir, strerror(errno));
        return -1;
    }
    while ((de = readdir(dp)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        empty = false;
        dumpdir = dumpdir || !strcmp(de->d_name, "dump.meta");
    }
    if (!empty && !dumpdir) {
        closedir(dp);
        snprintf(why, whylen, "%s is not empty and holds no dump.meta: not overwriting it", dir);
        return -1;
    }
    rewinddir(dp);
    while ((de = readdir(dp)) != NULL)
        if (ours(de->d_name)) {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    closedir(dp);
    snprintf(path, sizeof(path), "%s/snap", dir);
    dp = opendir(path);
    if (dp) {
        while ((de = readdir(dp)) != NULL)
            if (!strncmp(de->d_name, "cpu", 3) && strstr(de->d_name, ".bin")) {
                char p2[PATH_MAX + 300];
                snprintf(p2, sizeof(p2), "%s/%s", path, de->d_name);
                unlink(p2);
            }
        closedir(dp);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct opts {
    const char *log, *dir;
    bool quiet, list;
    long long dump; /* -1: the last */
};

/* 0 complete, 2 incomplete but usable, 1 error (reason in why) */
static int run(const struct opts *o, char *why, size_t whylen)
{
    FILE *in, *console = NULL;
    struct fx *x;
    char *line = NULL, path[PATH_MAX];
    size_t cap = 0;
    ssize_t n;
    unsigned long ln = 0;
    struct stat sb;
    off_t total = 0, done = 0;
    bool tty = isatty(2), shown = false;
    double t_start = now_s(), t_last = t_start;
    int last_pct = -1, status, i;

    in = strcmp(o->log, "-") ? fopen(o->log, "rb") : stdin;
    if (!in) {
        snprintf(why, whylen, "cannot open %s: %s", o->log, strerror(errno));
        return 1;
    }
    if (fstat(fileno(in), &sb) == 0 && S_ISREG(sb.st_mode))
        total = sb.st_size;
    if (!o->list) {
        if (prepare_dir(o->dir, why, whylen) != 0) {
            if (in != stdin)
                fclose(in);
            return 1;
        }
        snprintf(path, sizeof(path), "%s/console.log", o->dir);
        console = fopen(path, "wb");
        if (!console) {
            snprintf(why, whylen, "cannot create %s/console.log: %s", o->dir, strerror(errno));
            if (in != stdin)
                fclose(in);
            return 1;
        }
    }
    x = fx_new();
    while ((n = getline(&line, &cap, in)) > 0) {
        done += n;
        if (line[n - 1] == '\n')
            n--;
        fx_line(x, line, (size_t)n, ++ln, console);
        /* progress once a read takes more than a second: each second on a terminal, else
         * each 10% */
        if (!o->quiet && total && (ln & 0xfff) == 0) {
            int pct = (int)(100.0 * (double)done / (double)total);
            double t = now_s();
            if (t - t_start >= 1.0 && (tty ? t - t_last >= 1.0 : pct / 10 != last_pct / 10)) {
                fprintf(stderr, "%sextract: %d%% (%.1f of %.1f MB, %lu lines, %lu frames)%s",
                        tty ? "\r" : "", pct, (double)done / 1e6, (double)total / 1e6, ln,
                        fx_frame_lines(x), tty ? "" : "\n");
                t_last = t;
                last_pct = pct;
                shown = true;
            }
        }
    }
    if (shown && tty)
        fputc('\n', stderr);
    bool rerr = ferror(in);
    free(line);
    if (in != stdin)
        fclose(in);
    if (console && fclose(console) != 0) {
        snprintf(why, whylen, "cannot write %s/console.log: %s", o->dir, strerror(errno));
        fx_free(x);
        return 1;
    }
    if (rerr) {
        snprintf(why, whylen, "cannot read %s: %s", o->log, strerror(errno));
        fx_free(x);
        return 1;
    }
    fx_finish(x);
    if (o->list) {
        fx_list(x, stdout);
        status = fx_ndumps(x) ? 0 : 1;
        if (!fx_ndumps(x))
            snprintf(why, whylen, "no dump in %s (%lu lines, %lu frame lines)", o->log, ln,
                     fx_frame_lines(x));
        fx_free(x);
        return status;
    }
    i = fx_pick(x, o->dump);
    if (i < 0) {
        fx_report(x, 0, stderr, o->quiet);
        if (o->dump >= 0)
            snprintf(why, whylen, "no dump %lld in %s (--list shows them)", o->dump, o->log);
        else
            snprintf(why, whylen, "no dump in %s (%lu lines, %lu frame lines)", o->log, ln,
                     fx_frame_lines(x));
        fx_free(x);
        return 1;
    }
    fx_report(x, (unsigned)i, stderr, o->quiet);
    status = fx_status(x, (unsigned)i);
    if (fx_write(x, (unsigned)i, o->dir, why, whylen) != 0)
        status = 1;
    else if (status == 1)
        snprintf(why, whylen, "dump %u in %s has nothing usable", fx_dump_id(x, i), o->log);
    fx_free(x);
    return status;
}

int ptt_extract_log(const char *log, const char *dir, int quiet, char *err, size_t errlen)
{
    struct opts o = {.log = log, .dir = dir, .quiet = quiet, .dump = -1};
    char why[512] = "";
    int r = run(&o, why, sizeof(why));

    if (r == 1) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

int ptt_cmd_extract(int argc, char **argv)
{
    struct opts o = {.dump = -1};
    char why[512] = "";
    int r;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-q")) {
            o.quiet = true;
        } else if (!strcmp(a, "--list")) {
            o.list = true;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--dump")) {
            if (i + 1 == argc) {
                fprintf(stderr, "ptvisor-trace extract: %s needs a value (--help)\n", a);
                return 1;
            }
            if (a[1] == 'o') {
                o.dir = argv[++i];
            } else {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(argv[++i], &end, 0);
                if (errno || *end || end == argv[i] || argv[i][0] == '-' || v > 0xffffffffu) {
                    fprintf(stderr, "ptvisor-trace extract: --dump wants a dump id, not '%s'\n",
                            argv[i]);
                    return 1;
                }
                o.dump = (long long)v;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ptvisor-trace extract: unknown option %s (--help)\n", a);
            return 1;
        } else if (!o.log) {
            o.log = a;
        } else {
            fprintf(stderr, "ptvisor-trace extract: one LOG only ('%s' and '%s')\n", o.log, a);
            return 1;
        }
    }
    if (!o.log || (!o.list && !o.dir)) {
        fprintf(stderr, "ptvisor-trace extract: usage: extract LOG -o DIR [-q] [--dump N] | "
                        "extract LOG --list (--help)\n");
        return 1;
    }
    r = run(&o, why, sizeof(why));
    if (r == 1)
        fprintf(stderr, "ptvisor-trace extract: %s\n", why);
    else if (!o.list && !o.quiet)
        fprintf(stderr, "ptvisor-trace extract: %s written (%s)\n", o.dir,
                r == 0 ? "complete" : "incomplete");
    return r;
}
