/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace decode: the instruction walker (libipt's pt_insn decoder per CPU, per piece of
 * the trace between holes; errors become gap steps and the decoder resyncs at the next PSB)
 * and the `decode` command that prints it perf-script-like.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "image.h"

/* ---- branch classes ---- */

enum ptt_br ptt_branch_of(const struct ptt_step *s)
{
    unsigned i = 0, op;

    switch (s->iclass) {
    case ptic_cond_jump:
        return PTT_BR_COND;
    case ptic_return:
        return PTT_BR_RET;
    case ptic_far_call:
    case ptic_far_return:
    case ptic_far_jump:
        return PTT_BR_FAR;
    case ptic_call:
    case ptic_jump:
        break;
    default:
        return PTT_BR_NONE;
    }
    /* legacy prefixes, then REX in 64-bit code: FF is the indirect form (SDM Vol. 2 CALL, JMP) */
    while (i < s->size && strchr("\xf0\xf2\xf3\x2e\x36\x3e\x26\x64\x65\x66\x67", s->raw[i]) &&
           s->raw[i])
        i++;
    if (s->mode == ptem_64bit && i < s->size && (s->raw[i] & 0xf0) == 0x40)
        i++;
    op = i < s->size ? s->raw[i] : 0;
    if (s->iclass == ptic_call)
        return op == 0xff ? PTT_BR_CALL_IND : PTT_BR_CALL;
    return op == 0xff ? PTT_BR_JMP_IND : PTT_BR_JMP;
}

/* ---- the walker ---- */

#define QMAX 8

struct walker {
    const struct ptt_dump *d;
    struct ptt_image *im;
    const struct ptt_opts *o;
    ptt_step_fn *fn;
    void *ctx;
    struct ptt_walk_stats *st;
    unsigned cpu;
    uint64_t cr3;
    /* the instruction held until the next one says where it went */
    bool have_prev;
    struct ptt_step prev;
    struct pt_insn prev_insn;
    /* events that came after it, emitted after it */
    struct ptt_step q[QMAX];
    char qtext[QMAX][128];
    unsigned nq;
    int stop;
    struct pt_insn_decoder *dec;
    /* progress */
    bool show_progress, tty, printed;
    double t_start, t_last;
    uint64_t cpu_len, piece_base;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void emit(struct walker *w, const struct ptt_step *s)
{
    if (!w->stop && w->fn(s, w->ctx))
        w->stop = 1;
}

/* the held instruction goes out, with what is known about where it went, then the events */
static void flush(struct walker *w, bool valid, uint64_t next_ip, bool flows)
{
    if (w->have_prev) {
        w->prev.next_valid = valid;
        w->prev.next_ip = valid ? next_ip : 0;
        w->prev.next_flows = valid && flows;
        emit(w, &w->prev);
        w->have_prev = false;
    }
    for (unsigned i = 0; i < w->nq; i++)
        emit(w, &w->q[i]);
    w->nq = 0;
}

/* an event step: queued behind a held instruction (it happened after it) */
static void event(struct walker *w, enum ptt_step_kind kind, uint64_t ip, uint64_t to,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void event(struct walker *w, enum ptt_step_kind kind, uint64_t ip, uint64_t to,
                  const char *fmt, ...)
{
    va_list ap;

    if (w->nq == QMAX)
        flush(w, false, 0, false);
    struct ptt_step *s = &w->q[w->nq];
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->cpu = w->cpu;
    s->cr3 = w->cr3;
    s->ip = ip;
    s->next_ip = to;
    va_start(ap, fmt);
    vsnprintf(w->qtext[w->nq], sizeof(w->qtext[0]), fmt, ap);
    va_end(ap);
    s->what = w->qtext[w->nq];
    w->nq++;
    if (!w->have_prev)
        flush(w, false, 0, false);
}

static void gap(struct walker *w, enum ptt_gap_kind kind, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void gap(struct walker *w, enum ptt_gap_kind kind, uint64_t off, const char *fmt, ...)
{
    struct ptt_step s = {.kind = PTT_STEP_GAP, .cpu = w->cpu, .gap = kind, .offset = off};
    char text[200];
    va_list ap;

    flush(w, false, 0, false);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    s.what = text;
    s.cr3 = w->cr3;
    w->st->gaps++;
    emit(w, &s);
}

static void insn(struct walker *w, const struct pt_insn *in)
{
    /* the held one ran to here */
    flush(w, true, in->ip, true);
    w->prev_insn = *in;
    w->prev = (struct ptt_step){.kind = PTT_STEP_INSN,
                                .cpu = w->cpu,
                                .ip = in->ip,
                                .cr3 = w->cr3,
                                .size = in->size,
                                .iclass = in->iclass,
                                .mode = in->mode,
                                .raw = w->prev_insn.raw};
    w->have_prev = true;
    w->st->insns++;
}

static void progress(struct walker *w, struct pt_insn_decoder *dec)
{
    uint64_t off = 0;
    double t = now_s();

    if (t - w->t_last < 2.0)
        return;
    w->t_last = t;
    pt_insn_get_offset(dec, &off);
    off += w->piece_base;
    fprintf(stderr,
            "ptvisor-trace: %s: cpu%u %3.0f%% of %llu bytes, %llu instructions (%.1f M/s)%s",
            w->o->cmd, w->cpu, w->cpu_len ? 100.0 * (double)off / (double)w->cpu_len : 100.0,
            (unsigned long long)w->cpu_len, (unsigned long long)w->st->insns,
            (double)w->st->insns / (t - w->t_start) / 1e6, w->tty ? "\r" : "\n");
    w->printed = true;
}

static const char *mode_name(enum pt_exec_mode m)
{
    return m == ptem_64bit   ? "64-bit"
           : m == ptem_32bit ? "32-bit"
           : m == ptem_16bit ? "16-bit"
                             : "unknown";
}

static void on_event(struct walker *w, const struct pt_event *ev)
{
    switch (ev->type) {
    case ptev_enabled:
        flush(w, false, 0, false);
        event(w, PTT_STEP_EVENT, ev->variant.enabled.ip, 0, "trace enabled at 0x%llx%s",
              (unsigned long long)ev->variant.enabled.ip,
              ev->variant.enabled.resumed ? " (resumed)" : "");
        break;
    case ptev_disabled:
        flush(w, !ev->ip_suppressed, ev->variant.disabled.ip, false);
        if (ev->ip_suppressed)
            event(w, PTT_STEP_EVENT, 0, 0, "trace disabled");
        else
            event(w, PTT_STEP_EVENT, ev->variant.disabled.ip, 0,
                  "trace disabled, to 0x%llx (outside the filter)",
                  (unsigned long long)ev->variant.disabled.ip);
        break;
    case ptev_async_disabled:
        flush(w, true, ev->variant.async_disabled.at, false);
        event(w, PTT_STEP_EVENT, ev->variant.async_disabled.at, 0,
              "trace disabled asynchronously at 0x%llx",
              (unsigned long long)ev->variant.async_disabled.at);
        break;
    case ptev_async_branch:
        flush(w, true, ev->variant.async_branch.from, true);
        event(w, PTT_STEP_ASYNC, ev->variant.async_branch.from, ev->variant.async_branch.to,
              "interrupt/event at 0x%llx to 0x%llx",
              (unsigned long long)ev->variant.async_branch.from,
              (unsigned long long)ev->variant.async_branch.to);
        break;
    case ptev_paging:
        w->cr3 = ev->variant.paging.cr3;
        if (!ev->status_update)
            event(w, PTT_STEP_EVENT, 0, 0, "cr3 0x%llx", (unsigned long long)w->cr3);
        break;
    case ptev_async_paging:
        w->cr3 = ev->variant.async_paging.cr3;
        event(w, PTT_STEP_EVENT, ev->variant.async_paging.ip, 0, "cr3 0x%llx at 0x%llx",
              (unsigned long long)w->cr3, (unsigned long long)ev->variant.async_paging.ip);
        break;
    case ptev_overflow: {
        uint64_t off = 0;
        pt_insn_get_offset(w->dec, &off);
        off += w->piece_base;
        if (ev->ip_suppressed)
            gap(w, PTT_GAP_OVERFLOW, off, "overflow: packets lost, the trace resumes later");
        else
            gap(w, PTT_GAP_OVERFLOW, off, "overflow: packets lost, the trace resumes at 0x%llx",
                (unsigned long long)ev->variant.overflow.ip);
        break;
    }
    case ptev_exec_mode:
        if (!ev->status_update)
            event(w, PTT_STEP_EVENT, ev->variant.exec_mode.ip, 0, "%s code at 0x%llx",
                  mode_name(ev->variant.exec_mode.mode),
                  (unsigned long long)ev->variant.exec_mode.ip);
        break;
    case ptev_stop:
        flush(w, false, 0, false);
        event(w, PTT_STEP_EVENT, 0, 0, "trace stopped (TraceStop)");
        break;
    case ptev_tsx:
        event(w, PTT_STEP_EVENT, 0, 0, "tsx %s%s", ev->variant.tsx.speculative ? "speculative" : "",
              ev->variant.tsx.aborted ? " aborted" : "");
        break;
    case ptev_vmcs:
    case ptev_async_vmcs:
        event(w, PTT_STEP_EVENT, 0, 0, "vmcs");
        break;
    case ptev_ptwrite:
        event(w, PTT_STEP_EVENT, 0, 0, "ptwrite 0x%llx",
              (unsigned long long)ev->variant.ptwrite.payload);
        break;
    default: /* timing and power events: nothing for the flow */
        break;
    }
}

static int walk_piece(struct walker *w, const uint8_t *buf, size_t len, uint64_t base, char *err,
                      size_t errlen)
{
    struct pt_config cfg;
    struct pt_insn_decoder *dec;
    uint64_t sync = 0, off;
    int status;
    unsigned n = 0;

    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    dec = pt_insn_alloc_decoder(&cfg);
    if (!dec) {
        snprintf(err, errlen, "libipt: cannot allocate a decoder");
        return -1;
    }
    pt_insn_set_image(dec, w->im->pt);
    w->piece_base = base;
    w->dec = dec;
    status = pt_insn_sync_forward(dec);
    if (status == -pte_eos) {
        gap(w, PTT_GAP_NOSYNC, base, "no PSB in %zu bytes: nothing to decode from", len);
        pt_insn_free_decoder(dec);
        return 0;
    }
    pt_insn_get_sync_offset(dec, &sync);
    if (status >= 0 && sync > 0)
        gap(w, PTT_GAP_NOSYNC, base, "%llu bytes before the first PSB skipped",
            (unsigned long long)sync);
    while (!w->stop) {
        struct pt_insn in;

        if (status >= 0) {
            while (status & pts_event_pending) {
                struct pt_event ev;
                status = pt_insn_event(dec, &ev, sizeof(ev));
                if (status < 0)
                    break;
                on_event(w, &ev);
            }
        }
        if (status >= 0) {
            if (status & pts_eos)
                break;
            memset(&in, 0, sizeof(in)); /* some errors return before libipt fills it */
            status = pt_insn_next(dec, &in, sizeof(in));
            if (status == -pte_eos)
                break; /* the trace ends here (a window ends where it ends) */
            /* on an error the instruction may still have been decoded (and ran) */
            if (status >= 0 || (in.iclass != ptic_error && in.size))
                insn(w, &in);
            if (status >= 0) {
                if ((++n & 0xffff) == 0 && w->show_progress)
                    progress(w, dec);
                continue;
            }
        }
        /* an error: say so, resync at the next PSB */
        off = 0;
        pt_insn_get_offset(dec, &off);
        if (status == -pte_nomap)
            gap(w, PTT_GAP_ERROR, base + off, "%s: no code bytes for 0x%llx at offset 0x%llx",
                pt_errstr(pt_errcode(status)), (unsigned long long)in.ip,
                (unsigned long long)(base + off));
        else
            gap(w, PTT_GAP_ERROR, base + off, "%s at offset 0x%llx", pt_errstr(pt_errcode(status)),
                (unsigned long long)(base + off));
        uint64_t before = sync;
        status = pt_insn_sync_forward(dec);
        if (status == -pte_eos)
            break;
        if (pt_insn_get_sync_offset(dec, &sync) < 0 || sync <= before) {
            gap(w, PTT_GAP_NOSYNC, base + off, "cannot resync after offset 0x%llx",
                (unsigned long long)(base + off));
            break;
        }
    }
    flush(w, false, 0, false);
    pt_insn_free_decoder(dec);
    return 0;
}

int ptt_walk(const struct ptt_dump *d, struct ptt_image *im, const struct ptt_opts *o,
             ptt_step_fn *fn, void *ctx, struct ptt_walk_stats *st, char *err, size_t errlen)
{
    struct walker *w = calloc(1, sizeof(*w));

    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(st, 0, sizeof(*st));
    w->d = d;
    w->im = im;
    w->o = o;
    w->fn = fn;
    w->ctx = ctx;
    w->st = st;
    w->tty = isatty(2);
    w->show_progress = o->progress || (w->tty && !o->quiet);
    w->t_start = w->t_last = now_s();
    for (unsigned i = 0; i < d->ncpu && !w->stop; i++) {
        const struct ptt_cpu *c = &d->cpu[i];
        uint64_t stream = 0; /* stream offset of the current piece */
        size_t at = 0;       /* its offset in cpuN.pt */

        if (o->cpu >= 0 && c->cpu != (unsigned)o->cpu)
            continue;
        w->cpu = c->cpu;
        w->cr3 = PTT_CR3_ANY;
        w->cpu_len = c->pt_len;
        st->bytes += c->pt_len;
        struct ptt_step cs = {.kind = PTT_STEP_CPU, .cpu = c->cpu};
        emit(w, &cs);
        for (unsigned h = 0; h <= c->holes && !w->stop; h++) {
            uint64_t end = h < c->holes ? c->hole[h].off : stream + (c->pt_len - at);
            size_t n = (size_t)(end - stream);

            if (n && walk_piece(w, c->pt + at, n, at, err, errlen) != 0) {
                free(w);
                return -1;
            }
            at += n;
            if (h < c->holes) {
                w->cr3 = PTT_CR3_ANY;
                gap(w, PTT_GAP_HOLE, at, "%llu bytes lost in transit (stream offset %llu)",
                    (unsigned long long)c->hole[h].len, (unsigned long long)c->hole[h].off);
                stream = c->hole[h].off + c->hole[h].len;
            }
        }
    }
    if (w->printed && w->tty)
        fputc('\n', stderr);
    int stopped = w->stop;
    free(w);
    return stopped ? 1 : 0;
}

/* ---- the decode command ---- */

static const char decode_help[] =
    "NAME\n"
    "    ptvisor-trace decode - the instruction flow of a dump, perf-script-like\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace decode [OPTIONS] DIR|LOG\n"
    "\n"
    "DESCRIPTION\n"
    "    One line per instruction that ran, CPU by CPU (a dump has no common clock):\n"
    "        [CPU]  IP SYMBOL+0xOFF (FILE)\n"
    "    as `perf script --itrace=i1i -F cpu,ip,sym,symoff,dso` prints it. With --branches,\n"
    "    one line per taken branch (as --itrace=b): [CPU]  FROM SYM (FILE) => TO SYM (FILE).\n"
    "    Where the decoder loses the flow (a decode error, a range lost in transit, an\n"
    "    overflow) a marked line says why and where; decoding goes on at the next PSB:\n"
    "        [CPU]  [gap: CAUSE at offset 0xOFF]      (OFF: in DIR/cpuN.pt)\n"
    "\n"
    "OPTIONS\n"
    "    -e FILE[@BASE]  code and symbols of a guest program or library (repeatable)\n"
    "    -k, --vmlinux VMLINUX  code and symbols of the guest kernel\n"
    "    -m SYSTEM.MAP   kernel symbols (repeatable)\n"
    "    --kallsyms FILE kernel symbols at run addresses (default: the dump's kallsyms)\n"
    "    --kaslr OFF     shift -k/-m by OFF (hex) instead of the offset found (KERNEL\n"
    "                    SYMBOLS in ptvisor-trace --help)\n"
    "    --cpu N         only CPU N\n"
    "    --branches      taken branches only\n"
    "    --events        also print events (enable/disable, interrupts, CR3 changes)\n"
    "    -o FILE         write to FILE instead of standard output\n"
    "    --progress      progress on stderr (default: when stderr is a terminal)\n"
    "    -q              no warnings\n"
    "    See `ptvisor-trace --help` for code bytes, files and exit status.\n";

struct dec_ctx {
    FILE *out;
    struct ptt_image *im;
    const struct ptt_opts *o;
    char line[2 * (4096 + 4200) + 128]; /* names are cut at 4096, paths at 4200 */
};

/* the line is built by hand: fprintf was 3/4 of the decode time */
static char *put_str(char *p, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    memcpy(p, s, n);
    return p + n;
}

static char *put_hex(char *p, uint64_t v, unsigned width) /* right-aligned in width */
{
    char t[16];
    unsigned n = 0;

    do {
        t[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    while (width > n) {
        *p++ = ' ';
        width--;
    }
    while (n)
        *p++ = t[--n];
    return p;
}

/* "IP SYM+0xOFF (DSO)", as perf script prints ip,sym,symoff,dso */
static char *put_loc(char *p, struct ptt_image *im, uint64_t ip)
{
    const struct ptt_sym *s = ptt_syms_find(&im->syms, ip);

    p = put_hex(p, ip, 16);
    if (!s)
        return put_str(p, " [unknown] ([unknown])", 32);
    *p++ = ' ';
    p = put_str(p, s->name, 4096);
    p = put_str(p, "+0x", 3);
    p = put_hex(p, ip - s->addr, 0);
    p = put_str(p, " (", 2);
    p = put_str(p, im->syms.dso[s->dso].name, 4200);
    *p++ = ')';
    return p;
}

static char *put_cpu(char *p, unsigned cpu)
{
    *p++ = '[';
    *p++ = (char)('0' + cpu / 100 % 10);
    *p++ = (char)('0' + cpu / 10 % 10);
    *p++ = (char)('0' + cpu % 10);
    return put_str(p, "]  ", 3);
}

static int dec_step(const struct ptt_step *s, void *ctx)
{
    struct dec_ctx *c = ctx;
    char *p = put_cpu(c->line, s->cpu);

    switch (s->kind) {
    case PTT_STEP_INSN:
        if (c->o->branches) {
            enum ptt_br b = ptt_branch_of(s);
            if (b == PTT_BR_NONE || !s->next_valid || s->next_ip == s->ip + s->size)
                return 0; /* not a branch, or not taken (or where it went is unknown) */
            p = put_loc(p, c->im, s->ip);
            p = put_str(p, " => ", 4);
            p = put_loc(p, c->im, s->next_ip);
        } else {
            p = put_loc(p, c->im, s->ip);
        }
        break;
    case PTT_STEP_ASYNC:
        if (c->o->branches) {
            p = put_loc(p, c->im, s->ip);
            p = put_str(p, " => ", 4);
            p = put_loc(p, c->im, s->next_ip);
            p = put_str(p, "  [event]", 9);
        } else if (c->o->events) {
            p = put_str(p, "[event: ", 8);
            p = put_str(p, s->what, 200);
            *p++ = ']';
        } else {
            return 0;
        }
        break;
    case PTT_STEP_GAP:
        p = put_str(p, "[gap: ", 6);
        p = put_str(p, s->what, 200);
        *p++ = ']';
        break;
    case PTT_STEP_EVENT:
        if (!c->o->events)
            return 0;
        p = put_str(p, "[event: ", 8);
        p = put_str(p, s->what, 200);
        *p++ = ']';
        break;
    case PTT_STEP_CPU:
        return 0;
    }
    *p++ = '\n';
    fwrite_unlocked(c->line, 1, (size_t)(p - c->line), c->out);
    return 0;
}

int ptt_cmd_decode(int argc, char **argv)
{
    struct ptt_session s;
    struct ptt_walk_stats st;
    static struct dec_ctx c;
    char err[300];
    int rc;
    static char obuf[1 << 20];

    if (ptt_session_open(&s, argc, argv, PTT_OPT_OUT | PTT_OPT_BRANCHES | PTT_OPT_EVENTS,
                         decode_help, &rc) != 0)
        return rc;
    c.out = ptt_open_out(&s.o);
    c.im = &s.im;
    c.o = &s.o;
    if (!c.out) {
        ptt_session_close(&s);
        return 1;
    }
    setvbuf(c.out, obuf, _IOFBF, sizeof(obuf));
    rc = ptt_walk(&s.d, &s.im, &s.o, dec_step, &c, &st, err, sizeof(err)) < 0;
    if (rc)
        ptt_fail(s.o.cmd, "%s", err);
    rc |= ptt_close_out(&s.o, c.out);
    ptt_session_close(&s);
    return rc;
}
