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
    "    ptvisor-trace extract - turn a captured serial log into trace dump directories\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace extract LOG -o DIR [-q]              every dump: DIR/dump-ID-REASON/\n"
    "    ptvisor-trace extract LOG -o DIR [-q] --dump N     dump N: DIR is its directory\n"
    "    ptvisor-trace extract LOG -o DIR [-q] --last       the last dump: DIR is its directory\n"
    "    ptvisor-trace extract LOG --list\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads LOG (a serial console capture; - for standard input), finds the frame lines\n"
    "    the ptvisor VMM writes when it dumps a trace (\"@PTV1 ...\", docs/serial-protocol.md),\n"
    "    checks every line's CRC32, puts the data back together by offset, checks every block\n"
    "    and every stream against its CRC32, and writes a dump directory per dump:\n"
    "        dump.meta     the dump: protocol, dump id, boot id, reason, source, CPUs,\n"
    "                      TSC frequency, kernel base, complete yes|no, frame counts, and\n"
    "                      the traced program's comm and pid when the guest named them\n"
    "        cpuN.pt       the PT bytes of CPU N, oldest first; a range lost in transit is\n"
    "                      left out, never zero-filled (cpuN.meta lists it as missing OFF+LEN)\n"
    "        cpuN.meta     ring size, wrap and overflow state, filters, CR3s, missing ranges,\n"
    "                      whole-stream CRC32 ok|bad|unknown\n"
    "        snapshots     one line per code snapshot: VA LEN CR3|any FILE (a snapshot with a\n"
    "                      hole is listed as its whole pieces)\n"
    "        snap/         the snapshot bytes\n"
    "        crash.txt     the crash report, when the dump has one\n"
    "        kallsyms      the guest kernel's symbols, when the guest sent them for this boot\n"
    "                      (`ptvisor-ctl kallsyms`); the reading commands use them\n"
    "        console.log   LOG without its frame lines: the guest's console as it was\n"
    "    Frame lines may be mixed with any console output, end in \\r\\n, come twice, out of\n"
    "    order, or follow console text on the same line. Nothing is guessed: a range is\n"
    "    written only when its bytes passed their CRC32.\n"
    "\n"
    "    Without --dump or --last, every dump of LOG goes to its own directory DIR/dump-ID-\n"
    "    REASON (dump-1-boot, dump-2-vmcall, ...; where a log holds several boots with the\n"
    "    same id and reason, -bBOOT is added, the boot id in hex), and standard output says\n"
    "    how many dumps there were and where each went. DIR/dumps lists them, one line each\n"
    "    (NAME ID BOOT REASON STATUS), DIR/console.log is the log's console. Give DIR itself\n"
    "    to decode, summary, flamegraph or perf and they read its last dump (and say so).\n"
    "\n"
    "    Every finding goes to standard error with its log line number: lines that are not\n"
    "    valid frames (and why), blocks that failed their CRC32 or LZ4 decoding, frames lost\n"
    "    (by sequence number), byte ranges missing, a dump without its END (a cut log),\n"
    "    duplicated frames (harmless), then a summary per dump.\n"
    "\n"
    "OPTIONS\n"
    "    -o DIR      the output directory, created with its parents. DIR must be empty or\n"
    "                new, or hold what an earlier extract wrote there (refreshed: only the\n"
    "                files and directories extract writes are replaced)\n"
    "    --dump N    only the dump with id N (the last one with that id if the log holds\n"
    "                several boots), into DIR itself\n"
    "    --last      only the last dump of the log, into DIR itself\n"
    "    --list      list the dumps in LOG, one line each, and write nothing\n"
    "    -q          no progress line, no notes on harmless things (duplicates)\n"
    "    -h, --help  this text\n"
    "\n"
    "EXIT STATUS\n"
    "    0  every dump written is complete: every stream of every CPU whole and verified\n"
    "    2  a dump is incomplete but usable (what is there is verified)\n"
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
        !strcmp(n, "console.log") || !strcmp(n, "kallsyms"))
        return true;
    if (sscanf(n, "cpu%u.pt%n", &c, &len) == 1 && len > 0 && !n[len])
        return true;
    len = 0;
    return sscanf(n, "cpu%u.meta%n", &c, &len) == 1 && len > 0 && !n[len];
}

/* mkdir -p */
static int mkdir_p(const char *dir, char *why, size_t whylen)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);

    why[0] = 0;
    if (n == 0 || n >= sizeof(path)) {
        snprintf(why, whylen, "cannot create \"%s\": %s", dir, n ? "name too long" : "empty name");
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != 0)
            continue;
        char c = path[i];
        path[i] = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            snprintf(why, whylen, "cannot create %.400s: %s", path, strerror(errno));
            return -1;
        }
        path[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, whylen, "%s exists and is not a directory", dir);
        return -1;
    }
    return 0;
}

/* a dump directory: new, empty, or holding a dump (its files are removed); `owned`: a
 * dump-* directory inside an extract's own output, whose other files are left alone */
static int prepare(const char *dir, bool owned, char *why, size_t whylen)
{
    struct stat sb;
    char path[PATH_MAX];
    DIR *dp;
    struct dirent *de;
    bool empty = true, dumpdir = false;

    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT) {
            snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
        return mkdir_p(dir, why, whylen);
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
    if (!empty && !dumpdir && !owned) {
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

static int prepare_dir(const char *dir, char *why, size_t whylen)
{
    return prepare(dir, false, why, whylen);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct opts {
    const char *log, *dir;
    bool quiet, list, last;
    long long dump;  /* -1: not given */
    unsigned ndumps; /* out: dumps in the log */
};

/* every dump: DIR must be new, empty, or hold what an earlier extract wrote (its dumps, its
 * index and console, or a single dump's files); those are removed */
static int prepare_top(const char *dir, char *why, size_t whylen)
{
    struct stat sb;
    char path[PATH_MAX];
    DIR *dp;
    struct dirent *de;
    bool empty = true, index = false, single = false;

    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT) {
            snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
        return mkdir_p(dir, why, whylen);
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
        index = index || !strcmp(de->d_name, "dumps");
        single = single || !strcmp(de->d_name, "dump.meta");
    }
    if (!empty && !index && !single) {
        closedir(dp);
        snprintf(why, whylen,
                 "%s is not empty and holds nothing extract wrote (no dumps, no dump.meta): not "
                 "writing into it",
                 dir);
        return -1;
    }
    if (single) { /* an earlier --last / --dump N here: its files go */
        closedir(dp);
        if (prepare_dir(dir, why, whylen) != 0)
            return -1;
        snprintf(path, sizeof(path), "%s/snap", dir);
        rmdir(path);
        dp = opendir(dir);
        if (!dp) {
            snprintf(why, whylen, "cannot read %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    /* the dump directories of an earlier run: dump-* holding a dump.meta */
    rewinddir(dp);
    while ((de = readdir(dp)) != NULL) {
        struct stat ds;
        if (strncmp(de->d_name, "dump-", 5))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        char meta[PATH_MAX + 16];
        snprintf(meta, sizeof(meta), "%s/dump.meta", path);
        if (lstat(path, &ds) != 0 || !S_ISDIR(ds.st_mode) || access(meta, F_OK) != 0)
            continue;
        if (prepare_dir(path, why, whylen) != 0) {
            closedir(dp);
            return -1;
        }
        char snap[PATH_MAX + 16];
        snprintf(snap, sizeof(snap), "%s/snap", path);
        rmdir(snap);
        rmdir(path); /* unless the user put files there */
    }
    closedir(dp);
    snprintf(path, sizeof(path), "%s/dumps", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/console.log", dir);
    unlink(path);
    return 0;
}

static const char *status_text(int st)
{
    return st == 0 ? "complete" : st == 2 ? "INCOMPLETE, usable" : "nothing usable";
}

/* every dump of the log into DIR/NAME; the exit status */
static int write_all(const struct opts *o, struct fx *x, char *why, size_t whylen)
{
    unsigned nd = fx_ndumps(x), written = 0;
    int status = 0;
    char path[PATH_MAX], name[80];
    FILE *idx;

    size_t dl = strlen(o->dir);
    while (dl > 1 && o->dir[dl - 1] == '/') /* trace/ + dump-1-boot: trace/dump-1-boot */
        dl--;
    fx_report_global(x, stderr, o->quiet);
    snprintf(path, sizeof(path), "%s/dumps", o->dir);
    idx = fopen(path, "w");
    if (!idx) {
        snprintf(why, whylen, "cannot create %.400s: %s", path, strerror(errno));
        return 1;
    }
    printf("ptvisor-trace extract: %u dump%s in %s\n", nd, nd == 1 ? "" : "s", o->log);
    for (unsigned i = 0; i < nd; i++) {
        int st = fx_status(x, i);
        fx_report_dump(x, i, stderr, o->quiet);
        fx_dump_name(x, i, name, sizeof(name));
        snprintf(path, sizeof(path), "%.*s/%s", (int)dl, o->dir, name);
        if (st == 1) {
            printf("  dump %u: nothing usable, not written\n", fx_dump_id(x, i));
            continue;
        }
        if (prepare(path, true, why, whylen) != 0 || fx_write(x, i, path, why, whylen) != 0) {
            fclose(idx);
            return 1;
        }
        fx_dump_line(x, i, idx);
        printf("  dump %u (%s) -> %s\n", fx_dump_id(x, i), status_text(st), path);
        written++;
        if (st == 2)
            status = 2;
    }
    if (fclose(idx) != 0) {
        snprintf(why, whylen, "cannot write %s/dumps: %s", o->dir, strerror(errno));
        return 1;
    }
    if (!written) {
        snprintf(why, whylen, "no dump in %s has anything usable", o->log);
        return 1;
    }
    return status;
}

/* 0 complete, 2 incomplete but usable, 1 error (reason in why) */
static int run(struct opts *o, char *why, size_t whylen)
{
    FILE *in, *console = NULL;
    struct fx *x;
    char *line = NULL, path[PATH_MAX];
    size_t cap = 0;
    ssize_t n;
    unsigned long ln = 0;
    struct stat sb;
    off_t total = 0, done = 0;
    bool tty = isatty(2), shown = false, all = !o->last && o->dump < 0;
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
        if ((all ? prepare_top(o->dir, why, whylen) : prepare_dir(o->dir, why, whylen)) != 0) {
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
    o->ndumps = fx_ndumps(x);
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
    if (all) {
        status = write_all(o, x, why, whylen);
        fx_free(x);
        return status;
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

int ptt_extract_log(const char *log, const char *dir, int quiet, unsigned *ndumps, char *err,
                    size_t errlen)
{
    struct opts o = {.log = log, .dir = dir, .quiet = quiet, .dump = -1, .last = true};
    char why[512] = "";
    int r = run(&o, why, sizeof(why));

    if (ndumps)
        *ndumps = o.ndumps;
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
        } else if (!strcmp(a, "--last")) {
            o.last = true;
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
        fprintf(stderr, "ptvisor-trace extract: usage: extract LOG -o DIR [-q] [--dump N | "
                        "--last] | extract LOG --list (--help)\n");
        return 1;
    }
    if (o.last && o.dump >= 0) {
        fprintf(stderr, "ptvisor-trace extract: --last or --dump N, not both\n");
        return 1;
    }
    r = run(&o, why, sizeof(why));
    if (r == 1)
        fprintf(stderr, "ptvisor-trace extract: %s\n", why);
    else if (!o.list && !o.quiet && (o.last || o.dump >= 0))
        fprintf(stderr, "ptvisor-trace extract: %s written (%s)\n", o.dir,
                r == 0 ? "complete" : "incomplete");
    return r;
}
