/* SPDX-License-Identifier: MIT */
/*
 * The reassembly core of `ptvisor-trace extract` (the subcommand: extract.c): a serial log ->
 * the dump directory of ptt.h (docs/serial-protocol.md).
 *
 * The core (fx_*, declared in frame_dec.h) reads the log one line at a time:
 *   - a line without "@PTV" is console output; text glued in front of a frame too;
 *   - a frame line is validated by frame_parse() (bad ones are reported, never believed);
 *   - frames go to the *section* of their (dump id, CPU): the latest one in log order, or a
 *     new one when a BEGIN line contradicts it (another boot, another dump); DATA that comes
 *     before any BEGIN opens a section the BEGIN joins later;
 *   - a section keeps its streams as blocks keyed by (offset, length, CRC, encoding); a DATA
 *     line fills bytes of one block, a full block is decoded and checked against its CRC32
 *     at once; duplicates are counted, never stored twice;
 *   - DATA sequence numbers (0, 1, ... since the encoder's BEGIN; END says how many) give
 *     the frame numbers of lost lines: those no line of the section carried.  A resumed dump
 *     sends BEGIN again and counts from 0 again; the union of what came is what counts.
 * At the end, fx_finish (fx_finish.c) groups sections into dumps and assembles every stream;
 * fx_out.c reports what was built and writes the dump directory.  fx_int.h holds the
 * structures the three share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "frame_dec.h"
#include "fx_int.h"
#include "ptt.h"

void *fx_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (!q) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return q;
}

void *fx_xcalloc(size_t n, size_t s)
{
    void *p = calloc(n ? n : 1, s ? s : 1);

    if (!p) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return p;
}

void fx_say(struct msgs *ms, unsigned long line, bool note, const char *fmt, ...)
{
    va_list ap;
    char *t;

    va_start(ap, fmt);
    if (vasprintf(&t, fmt, ap) < 0)
        t = NULL;
    va_end(ap);
    if (!t)
        return;
    GROW(ms->m, ms->n, ms->cap);
    ms->m[ms->n++] = (struct msg){.line = line, .note = note, .text = t};
}

static unsigned hkey(bool guest, uint32_t dump, uint32_t cpu)
{
    return (unsigned)(((uint64_t)dump * 0x9e3779b97f4a7c15ull ^ cpu * 0xc2b2ae3d27d4eb4full ^
                       (guest ? 0x165667b19e3779f9ull : 0)) >>
                      54) %
           HASH_SIZE;
}

static struct sect *current(struct fx *x, bool guest, uint32_t dump, uint32_t cpu)
{
    for (struct sect *s = x->hash[hkey(guest, dump, cpu)]; s; s = s->hnext)
        if (s->guest == guest && s->dump == dump && s->cpu == cpu)
            return s;
    return NULL;
}

/* a new section becomes the latest for its key */
static struct sect *new_sect(struct fx *x, bool guest, uint32_t dump, uint32_t cpu,
                             unsigned long line)
{
    struct sect *s = fx_xcalloc(1, sizeof(*s)), **pp = &x->hash[hkey(guest, dump, cpu)];

    s->guest = guest;
    s->dump = dump;
    s->cpu = cpu;
    s->line0 = s->line1 = line;
    s->dumpidx = -1;
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->guest == guest && (*pp)->dump == dump && (*pp)->cpu == cpu) {
            s->older = *pp;
            s->hnext = (*pp)->hnext;
            *pp = s;
            break;
        }
    if (!s->older) {
        s->hnext = x->hash[hkey(guest, dump, cpu)];
        x->hash[hkey(guest, dump, cpu)] = s;
    }
    GROW(x->all, x->nall, x->capall);
    x->all[x->nall++] = s;
    return s;
}

const char *fx_sname(unsigned stream, char *buf, size_t len)
{
    return frame_stream_name(stream, buf, len);
}

void fx_dup_flush(struct sect *s)
{
    if (!s->dup_n)
        return;
    if (s->dup_n == 1)
        fx_say(&s->msgs, s->dup_l0, true, "duplicate DATA frame %" PRIx64 " of cpu %u (harmless)",
               s->dup_s0, s->cpu);
    else
        fx_say(&s->msgs, s->dup_l0, true,
               "%" PRIu64 " duplicate DATA frames (seq %" PRIx64 "..%" PRIx64
               ", to line %lu) of cpu %u (harmless)",
               s->dup_n, s->dup_s0, s->dup_s1, s->dup_l1, s->cpu);
    s->dup_n = 0;
}

static void dup_note(struct sect *s, uint64_t seq, unsigned long line)
{
    if (!s->dup_n) {
        s->dup_l0 = line;
        s->dup_s0 = seq;
    }
    s->dup_n++;
    s->dup_l1 = line;
    s->dup_s1 = seq;
}

/* ---- one line ---- */

static int blk_cmp(const struct blk *b, const struct frame_line *f)
{
    if (b->off != f->off)
        return b->off < f->off ? -1 : 1;
    if (b->raw != f->rawlen)
        return b->raw < f->rawlen ? -1 : 1;
    if (b->crc != f->crc)
        return b->crc < f->crc ? -1 : 1;
    if (b->lz4 != f->lz4)
        return b->lz4 < f->lz4 ? -1 : 1;
    if (b->enc != f->enclen)
        return b->enc < f->enclen ? -1 : 1;
    return 0;
}

static struct blk *blk_get(struct strm *st, const struct frame_line *f, unsigned long line)
{
    size_t lo = 0, hi = st->n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = blk_cmp(st->b[mid], f);
        if (c == 0)
            return st->b[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    struct blk *b = fx_xcalloc(1, sizeof(*b));
    b->off = f->off;
    b->raw = f->rawlen;
    b->crc = f->crc;
    b->lz4 = f->lz4;
    b->enc = f->enclen;
    b->ebuf = fx_xcalloc(b->enc, 1);
    b->have = fx_xcalloc(b->enc, 1);
    b->line0 = line;
    GROW(st->b, st->n, st->cap);
    memmove(&st->b[lo + 1], &st->b[lo], (st->n - lo) * sizeof(*st->b));
    st->b[lo] = b;
    st->n++;
    return b;
}

static void on_data(struct fx *x, struct sect *s, const struct frame_line *f, unsigned long line)
{
    struct blk *b;
    char nb[32];
    uint32_t fresh = 0;

    GROW(s->seq, s->nseq, s->capseq);
    s->seq[s->nseq++] = (struct seqent){f->seq, line};
    b = blk_get(&s->st[f->stream], f, line);
    b->line1 = line;
    if (b->state != BLK_PARTIAL) {
        dup_note(s, f->seq, line);
        return;
    }
    for (uint32_t i = 0; i < f->plen; i++)
        if (b->have[f->pos + i] && b->ebuf[f->pos + i] != f->payload[i]) {
            fx_dup_flush(s);
            fx_say(&s->msgs, line, false,
                   "DATA frame %" PRIx64 " contradicts an earlier frame for the same bytes of "
                   "cpu %u %s block 0x%" PRIx64 "+0x%x (first seen line %lu); ignored",
                   f->seq, s->cpu, fx_sname(f->stream, nb, sizeof(nb)), b->off, b->raw, b->line0);
            return;
        }
    for (uint32_t i = 0; i < f->plen; i++)
        if (!b->have[f->pos + i]) {
            b->have[f->pos + i] = 1;
            b->ebuf[f->pos + i] = f->payload[i];
            fresh++;
        }
    if (!fresh) {
        dup_note(s, f->seq, line);
        return;
    }
    fx_dup_flush(s);
    b->got += fresh;
    if (b->got < b->enc)
        return;
    char why[160];
    b->data = fx_xcalloc(b->raw, 1);
    if (frame_block_decode(b->ebuf, b->enc, b->lz4, b->raw, b->crc, b->data, why, sizeof(why))) {
        fx_say(&s->msgs, line, false,
               "cpu %u %s bytes 0x%" PRIx64 "+0x%x (frames on lines %lu..%lu) rejected: %s", s->cpu,
               fx_sname(f->stream, nb, sizeof(nb)), b->off, b->raw, b->line0, line, why);
        free(b->data);
        b->data = NULL;
        b->state = BLK_BAD;
    } else {
        b->state = BLK_OK;
    }
    free(b->ebuf);
    free(b->have);
    b->ebuf = b->have = NULL;
    (void)x;
}

static char *xstrdup(const char *s)
{
    char *t = strdup(s);

    if (!t) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return t;
}

static bool begin_contradicts(const struct sect *s, const struct frame_line *f)
{
    return s->bn && (s->bn != f->nparts ||
                     (s->bpart[f->part - 1] && strcmp(s->bpart[f->part - 1], f->body) != 0));
}

static void on_begin(struct fx *x, struct sect **sp, const struct frame_line *f, unsigned long line)
{
    struct sect *s = *sp;

    if (!s || begin_contradicts(s, f)) {
        if (s)
            fx_dup_flush(s);
        s = *sp = new_sect(x, f->guest, f->dump, f->cpu, line);
    }
    if (!s->bn) {
        s->bn = f->nparts;
        s->bpart = fx_xcalloc(f->nparts, sizeof(*s->bpart));
        s->bline = fx_xcalloc(f->nparts, sizeof(*s->bline));
    }
    if (!s->bpart[f->part - 1]) {
        s->bpart[f->part - 1] = xstrdup(f->body);
        s->bline[f->part - 1] = line;
    }
}

static void on_end(struct sect *s, const struct frame_line *f, unsigned long line)
{
    if (s->en && (s->en != f->nparts ||
                  (s->epart[f->part - 1] && strcmp(s->epart[f->part - 1], f->body) != 0))) {
        /* a later END (after a resend, or of a resumed dump) replaces the earlier one */
        for (unsigned i = 0; i < s->en; i++)
            free(s->epart[i]);
        free(s->epart);
        free(s->eline);
        s->en = 0;
    }
    if (!s->en) {
        s->en = f->nparts;
        s->epart = fx_xcalloc(f->nparts, sizeof(*s->epart));
        s->eline = fx_xcalloc(f->nparts, sizeof(*s->eline));
    }
    if (!s->epart[f->part - 1]) {
        s->epart[f->part - 1] = xstrdup(f->body);
        s->eline[f->part - 1] = line;
    }
}

/* ptvisor-ctl's line "ptvisor-ctl: dump N of PROG going out on the serial console" names the
 * program of dump N (a guest older than the comm note says no more than this) */
static void console_note(struct fx *x, const char *s, size_t n, unsigned long lineno)
{
    static const char pre[] = "ptvisor-ctl: dump ", mid[] = " of ", post[] = " going out";
    const char *p = memmem(s, n, pre, sizeof(pre) - 1), *end = s + n;
    uint64_t id = 0;
    size_t digits = 0, len = 0;
    struct gnote g;

    if (!p)
        return;
    p += sizeof(pre) - 1;
    while (p < end && *p >= '0' && *p <= '9' && digits < 10) {
        id = id * 10 + (uint64_t)(*p++ - '0');
        digits++;
    }
    if (!digits || id > UINT32_MAX || (size_t)(end - p) < sizeof(mid) - 1 ||
        memcmp(p, mid, sizeof(mid) - 1))
        return;
    p += sizeof(mid) - 1;
    memset(&g, 0, sizeof(g));
    while (p + len < end && p[len] > 0x20 && p[len] < 0x7f)
        len++;
    if (!len || (size_t)(end - p - len) < sizeof(post) - 1 ||
        memcmp(p + len, post, sizeof(post) - 1))
        return;
    /* the kernel's comm: the program's file name, cut to 15 bytes */
    memcpy(g.comm, p, len > FRAME_COMM_MAX ? FRAME_COMM_MAX : len);
    g.kind = FRAME_NOTE_COMM;
    g.line0 = g.line1 = lineno;
    g.dump = (uint32_t)id;
    g.from_console = true;
    GROW(x->note, x->nnote, x->capnote);
    x->note[x->nnote++] = g;
}

void fx_line(struct fx *x, const char *s, size_t n, unsigned long lineno, FILE *console)
{
    struct frame_line *f = &x->fl;
    enum frame_kind k = frame_parse(s, n, f);
    struct sect *sec;

    x->lines++;
    console_note(x, s, k == FRAME_NONE ? n : f->at, lineno);
    if (k == FRAME_NONE) {
        if (console) {
            fwrite(s, 1, n, console);
            fputc('\n', console);
        }
        return;
    }
    if (console && (f->at || f->prefix_bad)) { /* the console text before the frame */
        fwrite(s, 1, f->prefix_bad ? n : f->at, console);
        fputc('\n', console);
    }
    x->frame_lines++;
    if (k == FRAME_BAD) {
        if (x->last) {
            x->last->frames_bad++;
            fx_say(&x->last->msgs, lineno, false, "bad frame line: %s", f->why);
        } else {
            GROW(x->orphan, x->norphan, x->caporphan);
            if (asprintf(&x->orphan[x->norphan].text, "bad frame line: %s", f->why) < 0)
                return;
            x->orphan[x->norphan].line = lineno;
            x->orphan[x->norphan++].note = false;
        }
        return;
    }
    sec = current(x, f->guest, f->dump, f->cpu);
    if (k == FRAME_BEGIN)
        on_begin(x, &sec, f, lineno);
    else if (!sec)
        sec = new_sect(x, f->guest, f->dump, f->cpu, lineno);
    if (k == FRAME_DATA)
        on_data(x, sec, f, lineno);
    else if (k == FRAME_END)
        on_end(sec, f, lineno);
    if (k != FRAME_DATA)
        fx_dup_flush(sec);
    sec->frames_ok++;
    sec->line1 = lineno;
    if (!x->last) /* bad lines before the first good frame belong to its dump */
        for (size_t i = 0; i < x->norphan; i++) {
            GROW(sec->msgs.m, sec->msgs.n, sec->msgs.cap);
            sec->msgs.m[sec->msgs.n++] = x->orphan[i];
            sec->frames_bad++;
        }
    if (!x->last)
        x->norphan = 0;
    x->last = sec;
}

/* ---- reading back ---- */

struct fx *fx_new(void)
{
    return fx_xcalloc(1, sizeof(struct fx));
}

static void msgs_free(struct msgs *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->m[i].text);
    free(m->m);
}

static void sect_free(struct sect *s)
{
    for (unsigned i = 0; i < s->bn; i++)
        free(s->bpart[i]);
    free(s->bpart);
    free(s->bline);
    for (unsigned k = 0; k < s->en; k++)
        free(s->epart[k]);
    free(s->epart);
    free(s->eline);
    free(s->seq);
    for (unsigned k = 0; k < FRAME_MAX_STREAMS; k++) {
        struct strm *st = &s->st[k];
        for (size_t i = 0; i < st->n; i++) {
            free(st->b[i]->ebuf);
            free(st->b[i]->have);
            free(st->b[i]->data);
            free(st->b[i]);
        }
        free(st->b);
        free(st->seg);
    }
    msgs_free(&s->msgs);
    free(s->meta);
    free(s->note);
    free(s->end);
    free(s);
}

void fx_free(struct fx *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->nall; i++)
        sect_free(x->all[i]);
    free(x->all);
    for (size_t i = 0; i < x->nd; i++) {
        free(x->d[i].s);
        msgs_free(&x->d[i].msgs);
    }
    free(x->d);
    for (size_t i = 0; i < x->norphan; i++)
        free(x->orphan[i].text);
    free(x->orphan);
    msgs_free(&x->global);
    for (size_t i = 0; i < x->nnote; i++)
        free(x->note[i].text);
    free(x->note);
    free(x);
}

unsigned long fx_frame_lines(const struct fx *x)
{
    return x->frame_lines;
}

uint32_t fx_dump_id(const struct fx *x, unsigned i)
{
    return x->d[i].id;
}

unsigned fx_ndumps(const struct fx *x)
{
    return (unsigned)x->nd;
}

int fx_status(const struct fx *x, unsigned i)
{
    return i < x->nd ? x->d[i].status : 1;
}

int fx_pick(const struct fx *x, long long dump_id)
{
    for (size_t i = x->nd; i-- > 0;)
        if (dump_id < 0 || x->d[i].id == dump_id)
            return (int)i;
    return -1;
}
