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
 * At the end (fx_finish) sections are grouped into dumps by (boot id, dump id), every stream
 * is assembled by offset (blocks that disagree on an overlap are both dropped: a range is
 * either verified or reported missing, never guessed) and checked against END's CRC32.
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

#define HASH_SIZE 1024

/* ---- findings ---- */

struct msg {
    unsigned long line; /* 0: not tied to a line (sorted last) */
    bool note;          /* harmless (hidden by -q) */
    char *text;
};

struct msgs {
    struct msg *m;
    size_t n, cap;
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (!q) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return q;
}

static void *xcalloc(size_t n, size_t s)
{
    void *p = calloc(n ? n : 1, s ? s : 1);

    if (!p) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return p;
}

#define GROW(v, n, cap)                                                                            \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? 2 * (cap) : 8;                                                         \
            (v) = xrealloc((v), (cap) * sizeof(*(v)));                                             \
        }                                                                                          \
    } while (0)

static void say(struct msgs *ms, unsigned long line, bool note, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(struct msgs *ms, unsigned long line, bool note, const char *fmt, ...)
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

/* ---- blocks, streams, sections, dumps ---- */

enum { BLK_PARTIAL, BLK_OK, BLK_BAD, BLK_DROPPED };

struct blk {
    uint64_t off;
    uint32_t raw, crc, enc;
    bool lz4;
    int state;
    uint8_t *ebuf, *have; /* while partial: encoded bytes and which of them came */
    uint32_t got;
    uint8_t *data; /* raw bytes once verified */
    unsigned long line0, line1;
};

struct strm {
    struct blk **b; /* sorted by key */
    size_t n, cap;
    /* assembled (fx_finish) */
    struct fx_seg *seg;
    size_t nseg, segcap;
    uint64_t len, have, missing;
    bool known_len, conflict, used;
    int crc;
};

struct seqent {
    uint64_t seq;
    unsigned long line;
};

struct sect {
    uint32_t dump, cpu;
    struct sect *hnext; /* hash chain of the latest section per key */
    struct sect *older; /* the section this one replaced for its key */
    unsigned long line0, line1;
    char **bpart;
    unsigned long *bline;
    unsigned bn;
    struct seqent *seq; /* DATA frames: sequence number, line */
    size_t nseq, capseq;
    char **epart; /* the latest END record */
    unsigned long *eline;
    unsigned en;
    struct strm st[FRAME_MAX_STREAMS];
    struct msgs msgs;
    uint64_t frames_ok, frames_bad, frames_missing;
    /* a run of duplicate DATA frames, reported as one finding */
    unsigned long dup_l0, dup_l1;
    uint64_t dup_n, dup_s0, dup_s1;
    /* fx_finish */
    struct frame_meta *meta;
    struct frame_endrec *end;
    bool boot_known;
    uint32_t boot;
    int dumpidx;
};

struct dump {
    uint32_t boot, id;
    bool boot_known;
    struct sect **s;
    size_t n, cap;
    unsigned long line0, line1;
    struct msgs msgs;
    int status;
    bool complete;
};

struct fx {
    struct sect *hash[HASH_SIZE];
    struct sect **all; /* creation order */
    size_t nall, capall;
    struct dump *d;
    size_t nd, capd;
    struct sect *last;  /* section of the last valid frame */
    struct msg *orphan; /* bad lines before any valid frame */
    size_t norphan, caporphan;
    struct msgs global;
    struct frame_line fl;
    unsigned long lines, frame_lines;
};

static unsigned hkey(uint32_t dump, uint32_t cpu)
{
    return (unsigned)(((uint64_t)dump * 0x9e3779b97f4a7c15ull ^ cpu * 0xc2b2ae3d27d4eb4full) >>
                      54) %
           HASH_SIZE;
}

static struct sect *current(struct fx *x, uint32_t dump, uint32_t cpu)
{
    for (struct sect *s = x->hash[hkey(dump, cpu)]; s; s = s->hnext)
        if (s->dump == dump && s->cpu == cpu)
            return s;
    return NULL;
}

/* a new section becomes the latest for its key */
static struct sect *new_sect(struct fx *x, uint32_t dump, uint32_t cpu, unsigned long line)
{
    struct sect *s = xcalloc(1, sizeof(*s)), **pp = &x->hash[hkey(dump, cpu)];

    s->dump = dump;
    s->cpu = cpu;
    s->line0 = s->line1 = line;
    s->dumpidx = -1;
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->dump == dump && (*pp)->cpu == cpu) {
            s->older = *pp;
            s->hnext = (*pp)->hnext;
            *pp = s;
            break;
        }
    if (!s->older) {
        s->hnext = x->hash[hkey(dump, cpu)];
        x->hash[hkey(dump, cpu)] = s;
    }
    GROW(x->all, x->nall, x->capall);
    x->all[x->nall++] = s;
    return s;
}

static const char *sname(unsigned stream, char *buf, size_t len)
{
    return frame_stream_name(stream, buf, len);
}

static void dup_flush(struct sect *s)
{
    if (!s->dup_n)
        return;
    if (s->dup_n == 1)
        say(&s->msgs, s->dup_l0, true, "duplicate DATA frame %" PRIx64 " of cpu %u (harmless)",
            s->dup_s0, s->cpu);
    else
        say(&s->msgs, s->dup_l0, true,
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
    struct blk *b = xcalloc(1, sizeof(*b));
    b->off = f->off;
    b->raw = f->rawlen;
    b->crc = f->crc;
    b->lz4 = f->lz4;
    b->enc = f->enclen;
    b->ebuf = xcalloc(b->enc, 1);
    b->have = xcalloc(b->enc, 1);
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
            dup_flush(s);
            say(&s->msgs, line, false,
                "DATA frame %" PRIx64 " contradicts an earlier frame for the same bytes of "
                "cpu %u %s block 0x%" PRIx64 "+0x%x (first seen line %lu); ignored",
                f->seq, s->cpu, sname(f->stream, nb, sizeof(nb)), b->off, b->raw, b->line0);
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
    dup_flush(s);
    b->got += fresh;
    if (b->got < b->enc)
        return;
    char why[160];
    b->data = xcalloc(b->raw, 1);
    if (frame_block_decode(b->ebuf, b->enc, b->lz4, b->raw, b->crc, b->data, why, sizeof(why))) {
        say(&s->msgs, line, false,
            "cpu %u %s bytes 0x%" PRIx64 "+0x%x (frames on lines %lu..%lu) rejected: %s", s->cpu,
            sname(f->stream, nb, sizeof(nb)), b->off, b->raw, b->line0, line, why);
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
            dup_flush(s);
        s = *sp = new_sect(x, f->dump, f->cpu, line);
    }
    if (!s->bn) {
        s->bn = f->nparts;
        s->bpart = xcalloc(f->nparts, sizeof(*s->bpart));
        s->bline = xcalloc(f->nparts, sizeof(*s->bline));
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
        s->epart = xcalloc(f->nparts, sizeof(*s->epart));
        s->eline = xcalloc(f->nparts, sizeof(*s->eline));
    }
    if (!s->epart[f->part - 1]) {
        s->epart[f->part - 1] = xstrdup(f->body);
        s->eline[f->part - 1] = line;
    }
}

void fx_line(struct fx *x, const char *s, size_t n, unsigned long lineno, FILE *console)
{
    struct frame_line *f = &x->fl;
    enum frame_kind k = frame_parse(s, n, f);
    struct sect *sec;

    x->lines++;
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
            say(&x->last->msgs, lineno, false, "bad frame line: %s", f->why);
        } else {
            GROW(x->orphan, x->norphan, x->caporphan);
            if (asprintf(&x->orphan[x->norphan].text, "bad frame line: %s", f->why) < 0)
                return;
            x->orphan[x->norphan].line = lineno;
            x->orphan[x->norphan++].note = false;
        }
        return;
    }
    sec = current(x, f->dump, f->cpu);
    if (k == FRAME_BEGIN)
        on_begin(x, &sec, f, lineno);
    else if (!sec)
        sec = new_sect(x, f->dump, f->cpu, lineno);
    if (k == FRAME_DATA)
        on_data(x, sec, f, lineno);
    else if (k == FRAME_END)
        on_end(sec, f, lineno);
    if (k != FRAME_DATA)
        dup_flush(sec);
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

/* ---- fx_finish: records, lost frames, dumps, assembly ---- */

static void finish_records(struct sect *s)
{
    char why[200];

    dup_flush(s);
    if (!s->bn) {
        say(&s->msgs, s->line0, false, "dump %u cpu %u: DATA/END frames without a BEGIN record",
            s->dump, s->cpu);
    } else {
        unsigned missing = 0;
        for (unsigned i = 0; i < s->bn; i++)
            missing += !s->bpart[i];
        if (s->bpart[0]) { /* the boot id tells dumps of two boots apart, even alone */
            const char *b = strstr(s->bpart[0], "boot=");
            unsigned long long v;
            char *end;
            if (b && (b == s->bpart[0] || b[-1] == ' ')) {
                errno = 0;
                v = strtoull(b + 5, &end, 16);
                if (!errno && end != b + 5 && v <= 0xffffffffu) {
                    s->boot_known = true;
                    s->boot = (uint32_t)v;
                }
            }
        }
        if (missing) {
            say(&s->msgs, s->line0, false,
                "dump %u cpu %u: BEGIN record incomplete (%u of %u lines missing)", s->dump, s->cpu,
                missing, s->bn);
        } else {
            s->meta = xcalloc(1, sizeof(*s->meta));
            if (frame_meta_parse((const char *const *)s->bpart, s->bn, s->meta, why, sizeof(why))) {
                say(&s->msgs, s->bline[0], false, "dump %u cpu %u: %s", s->dump, s->cpu, why);
                free(s->meta);
                s->meta = NULL;
            } else {
                s->boot_known = true;
                s->boot = s->meta->boot;
            }
        }
    }
    /* END: when all its lines came */
    bool whole = s->en > 0;
    for (unsigned k = 0; k < s->en; k++)
        whole = whole && s->epart[k];
    if (whole) {
        s->end = xcalloc(1, sizeof(*s->end));
        if (frame_end_parse((const char *const *)s->epart, s->en, s->end, why, sizeof(why))) {
            say(&s->msgs, s->eline[0], false, "dump %u cpu %u: %s", s->dump, s->cpu, why);
            free(s->end);
            s->end = NULL;
        }
    } else if (s->en) {
        say(&s->msgs, s->line1, false, "dump %u cpu %u: END record incomplete", s->dump, s->cpu);
    }
    if (!s->end)
        say(&s->msgs, s->line1, false,
            "dump %u cpu %u: no END record: the log ends or the dump was cut (last frame on "
            "line %lu)",
            s->dump, s->cpu, s->line1);
}

static int seq_cmp(const void *a, const void *b)
{
    const struct seqent *x = a, *y = b;

    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* lost DATA frames: sequence numbers below END's count (or the highest seen) that no line
 * carried */
static void finish_seqs(struct sect *s)
{
    uint64_t expect = s->end ? s->end->frames : 0, next = 0;
    unsigned long prev = s->line0;

    if (s->nseq)
        qsort(s->seq, s->nseq, sizeof(*s->seq), seq_cmp);
    if (s->nseq && s->seq[s->nseq - 1].seq >= expect)
        expect = s->seq[s->nseq - 1].seq + 1;
    for (size_t k = 0; k <= s->nseq; k++) {
        uint64_t q = k < s->nseq ? s->seq[k].seq : expect;
        if (q > next) {
            s->frames_missing += q - next;
            if (q - next == 1)
                say(&s->msgs, prev, false,
                    "dump %u cpu %u: DATA frame %" PRIx64 " lost (after line %lu%s)", s->dump,
                    s->cpu, next, prev, k < s->nseq ? "" : ", at the end");
            else
                say(&s->msgs, prev, false,
                    "dump %u cpu %u: DATA frames %" PRIx64 "..%" PRIx64 " lost (after line %lu%s)",
                    s->dump, s->cpu, next, q - 1, prev, k < s->nseq ? "" : ", at the end");
        }
        if (k < s->nseq) {
            if (q + 1 > next)
                next = q + 1;
            prev = s->seq[k].line;
        }
    }
}

static int dump_of(struct fx *x, const struct sect *s)
{
    int best = -1;

    for (size_t i = 0; i < x->nd; i++) {
        struct dump *d = &x->d[i];
        if (d->id != s->dump)
            continue;
        if (s->boot_known && d->boot_known) {
            if (d->boot == s->boot)
                return (int)i;
            continue;
        }
        /* boot unknown on one side: the latest dump of that id that began before it */
        if (d->line0 <= s->line0 || best < 0)
            best = (int)i;
    }
    return best;
}

static void dump_add(struct fx *x, struct sect *s)
{
    int i = dump_of(x, s);
    struct dump *d;

    if (i < 0) {
        GROW(x->d, x->nd, x->capd);
        d = &x->d[x->nd];
        memset(d, 0, sizeof(*d));
        d->id = s->dump;
        d->line0 = s->line0;
        i = (int)x->nd++;
    }
    d = &x->d[i];
    if (s->boot_known && !d->boot_known) {
        d->boot_known = true;
        d->boot = s->boot;
    }
    GROW(d->s, d->n, d->cap);
    d->s[d->n++] = s;
    s->dumpidx = i;
    if (s->line0 < d->line0)
        d->line0 = s->line0;
    if (s->line1 > d->line1)
        d->line1 = s->line1;
}

static uint64_t stream_len(const struct sect *s, unsigned k, bool *known)
{
    *known = s->meta != NULL;
    if (!s->meta)
        return 0;
    if (k == FRAME_STREAM_TRACE)
        return s->meta->trace_len;
    if (k == FRAME_STREAM_CRASH)
        return s->meta->crash_len;
    if (k - FRAME_STREAM_SNAP(0) < s->meta->nsnap)
        return s->meta->snap[k - FRAME_STREAM_SNAP(0)].len;
    *known = false;
    return 0;
}

static void assemble(struct sect *s, unsigned k)
{
    struct strm *st = &s->st[k];
    char nb[32];
    uint64_t end = 0;
    bool declared = !s->meta || k < FRAME_STREAM_SNAP(s->meta->nsnap);

    st->len = stream_len(s, k, &st->known_len);
    st->used = st->n > 0 || (st->known_len && st->len > 0);
    st->crc = -1;
    if (!st->used)
        return;
    sname(k, nb, sizeof(nb));
    if (s->meta && !declared) {
        say(&s->msgs, st->b[0]->line0, false,
            "dump %u cpu %u: DATA for %s, which the BEGIN record does not list; dropped", s->dump,
            s->cpu, nb);
        st->used = false;
        return;
    }
    for (size_t i = 0; i < st->n; i++) {
        struct blk *b = st->b[i];
        if (st->known_len && b->off + b->raw > st->len) {
            say(&s->msgs, b->line0, false,
                "dump %u cpu %u %s: block 0x%" PRIx64 "+0x%x beyond the stream's length 0x%" PRIx64
                "; dropped",
                s->dump, s->cpu, nb, b->off, b->raw, st->len);
            b->state = BLK_DROPPED;
            free(b->data); /* out of every comparison below */
            b->data = NULL;
        } else if (b->state == BLK_PARTIAL) {
            say(&s->msgs, b->line1, false,
                "dump %u cpu %u %s: block 0x%" PRIx64 "+0x%x incomplete: %u of %u encoded bytes "
                "came (lines %lu..%lu)",
                s->dump, s->cpu, nb, b->off, b->raw, b->got, b->enc, b->line0, b->line1);
        }
    }
    /* blocks that disagree where they overlap are both dropped */
    for (size_t i = 0; i < st->n; i++) {
        struct blk *b = st->b[i];
        if (!b->data)
            continue;
        for (size_t j = i; j-- > 0;) {
            struct blk *a = st->b[j];
            if (a->off + FRAME_BLOCK_MAX <= b->off)
                break;
            if (!a->data || !b->data || a->off + a->raw <= b->off)
                continue;
            uint64_t lo = b->off,
                     hi = a->off + a->raw < b->off + b->raw ? a->off + a->raw : b->off + b->raw;
            if (memcmp(a->data + (lo - a->off), b->data, hi - lo) != 0) {
                say(&s->msgs, b->line0, false,
                    "dump %u cpu %u %s: blocks 0x%" PRIx64 "+0x%x (line %lu) and 0x%" PRIx64
                    "+0x%x (line %lu) disagree where they overlap; both dropped",
                    s->dump, s->cpu, nb, a->off, a->raw, a->line0, b->off, b->raw, b->line0);
                a->state = b->state = BLK_DROPPED;
                st->conflict = true;
            }
        }
    }
    for (size_t i = 0; i < st->n; i++) {
        struct blk *b = st->b[i];
        if (b->state != BLK_OK || b->off + b->raw <= end)
            continue;
        uint64_t from = b->off > end ? b->off : end;
        GROW(st->seg, st->nseg, st->segcap);
        st->seg[st->nseg++] =
            (struct fx_seg){from, b->off + b->raw - from, b->data + (from - b->off)};
        st->have += b->off + b->raw - from;
        end = b->off + b->raw;
    }
    if (!st->known_len)
        st->len = end;
    st->missing = st->len - st->have;
    /* the holes, one finding each */
    uint64_t pos = 0;
    for (size_t i = 0; i <= st->nseg; i++) {
        uint64_t next = i < st->nseg ? st->seg[i].off : st->len;
        if (next > pos)
            say(&s->msgs, 0, false,
                "dump %u cpu %u %s: bytes 0x%" PRIx64 "..0x%" PRIx64 " missing (0x%" PRIx64
                " bytes)",
                s->dump, s->cpu, nb, pos, next - 1, next - pos);
        if (i < st->nseg)
            pos = st->seg[i].off + st->seg[i].len;
    }
    if (!st->missing && s->end && s->end->st[k].present && s->end->st[k].crc_known &&
        s->end->st[k].len == st->len) {
        uint32_t c = 0;
        for (size_t i = 0; i < st->nseg; i++)
            c = frame_dec_crc32(c, st->seg[i].p, st->seg[i].len);
        st->crc = c == s->end->st[k].crc;
        if (!st->crc)
            say(&s->msgs, 0, false,
                "dump %u cpu %u %s: CRC32 of the whole stream is %08x, END says %08x", s->dump,
                s->cpu, nb, c, s->end->st[k].crc);
    }
}

static bool sect_complete(struct sect *s)
{
    if (!s->meta || !s->end)
        return false;
    for (unsigned k = 0; k < FRAME_STREAM_SNAP(s->meta->nsnap); k++) {
        bool known;
        uint64_t len = stream_len(s, k, &known);
        if (!s->end->st[k].present || s->end->st[k].len != len) {
            char nb[32];
            say(&s->msgs, 0, false, "dump %u cpu %u: END and BEGIN disagree on the length of %s",
                s->dump, s->cpu, sname(k, nb, sizeof(nb)));
            return false;
        }
        if (s->st[k].missing || s->st[k].crc == 0 || s->st[k].conflict)
            return false;
    }
    return true;
}

static void finish_dump(struct dump *d)
{
    uint32_t ncpus = 0;
    bool complete = d->n > 0, usable = false;

    for (size_t i = 0; i < d->n; i++) {
        struct sect *s = d->s[i];
        if (s->meta && !ncpus)
            ncpus = s->meta->ncpus;
        for (size_t j = 0; j < i; j++)
            if (d->s[j]->cpu == s->cpu) {
                say(&d->msgs, s->line0, false,
                    "dump %u: two different BEGIN records for cpu %u (lines %lu and %lu)", d->id,
                    s->cpu, d->s[j]->line0, s->line0);
                complete = false;
            }
        complete = sect_complete(s) && complete;
        for (unsigned k = 0; k < FRAME_MAX_STREAMS; k++)
            usable = usable || (s->meta && s->st[k].have);
    }
    if (ncpus && d->n < ncpus) {
        say(&d->msgs, 0, false, "dump %u: %zu of %u CPU sections in the log", d->id, d->n, ncpus);
        complete = false;
    }
    if (!ncpus)
        complete = false;
    d->complete = complete;
    d->status = complete ? 0 : usable ? 2 : 1;
}

static int dump_cmp(const void *a, const void *b)
{
    const struct dump *x = a, *y = b;

    return x->line0 < y->line0 ? -1 : x->line0 > y->line0;
}

void fx_finish(struct fx *x)
{
    for (size_t i = 0; i < x->norphan; i++)
        say(&x->global, x->orphan[i].line, false, "%s", x->orphan[i].text);
    for (size_t i = 0; i < x->norphan; i++)
        free(x->orphan[i].text);
    x->norphan = 0;
    for (size_t i = 0; i < x->nall; i++) {
        finish_records(x->all[i]);
        finish_seqs(x->all[i]);
    }
    /* sections whose boot is known first, so that the others join the right dump */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < x->nall; i++)
            if (x->all[i]->boot_known == (pass == 0))
                dump_add(x, x->all[i]);
    /* dumps in log order (by their first frame line) */
    if (x->nd)
        qsort(x->d, x->nd, sizeof(*x->d), dump_cmp);
    for (size_t i = 0; i < x->nd; i++)
        for (size_t j = 0; j < x->d[i].n; j++)
            x->d[i].s[j]->dumpidx = (int)i;
    for (size_t i = 0; i < x->nall; i++)
        for (unsigned k = 0; k < FRAME_MAX_STREAMS; k++)
            assemble(x->all[i], k);
    for (size_t i = 0; i < x->nd; i++)
        finish_dump(&x->d[i]);
}

/* ---- reading back ---- */

struct fx *fx_new(void)
{
    return xcalloc(1, sizeof(struct fx));
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

static int msg_cmp(const void *a, const void *b)
{
    const struct msg *x = *(struct msg *const *)a, *y = *(struct msg *const *)b;
    unsigned long lx = x->line ? x->line : ULONG_MAX, ly = y->line ? y->line : ULONG_MAX;

    return lx < ly ? -1 : lx > ly;
}

static void collect(const struct msgs *m, const struct msg ***v, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < m->n; i++) {
        GROW(*v, *n, *cap);
        (*v)[(*n)++] = &m->m[i];
    }
}

static uint64_t dump_frames(const struct dump *d, int what)
{
    uint64_t n = 0;

    for (size_t i = 0; i < d->n; i++)
        n += what == 0   ? d->s[i]->frames_ok
             : what == 1 ? d->s[i]->frames_bad
                         : d->s[i]->frames_missing;
    return n;
}

static const struct frame_meta *dump_meta(const struct dump *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->s[i]->meta)
            return d->s[i]->meta;
    return NULL;
}

void fx_report(const struct fx *x, unsigned i, FILE *out, bool quiet)
{
    const struct msg **v = NULL;
    size_t n = 0, cap = 0;
    const struct dump *d;
    const struct frame_meta *m;

    collect(&x->global, &v, &n, &cap);
    if (i < x->nd) {
        d = &x->d[i];
        collect(&d->msgs, &v, &n, &cap);
        for (size_t k = 0; k < d->n; k++)
            collect(&d->s[k]->msgs, &v, &n, &cap);
    }
    if (n)
        qsort(v, n, sizeof(*v), msg_cmp);
    for (size_t k = 0; k < n; k++)
        if (!quiet || !v[k]->note) {
            if (v[k]->line)
                fprintf(out, "line %lu: %s\n", v[k]->line, v[k]->text);
            else
                fprintf(out, "%s\n", v[k]->text);
        }
    free(v);
    if (i >= x->nd)
        return;
    d = &x->d[i];
    m = dump_meta(d);
    fprintf(out,
            "dump %u (boot %s%08x, %s, lines %lu..%lu): %s; %zu of %u CPU section%s; "
            "frames: %" PRIu64 " good, %" PRIu64 " bad, %" PRIu64 " lost\n",
            d->id, d->boot_known ? "" : "?", d->boot, m ? frame_reason_name(m->reason) : "reason ?",
            d->line0, d->line1,
            d->complete      ? "complete"
            : d->status == 2 ? "INCOMPLETE (usable)"
                             : "INCOMPLETE (unusable)",
            d->n, m ? m->ncpus : 0, m && m->ncpus == 1 ? "" : "s", dump_frames(d, 0),
            dump_frames(d, 1), dump_frames(d, 2));
    for (size_t k = 0; k < d->n; k++) {
        const struct sect *s = d->s[k];
        const struct strm *t = &s->st[FRAME_STREAM_TRACE];
        unsigned snaps = 0, snaps_ok = 0;
        for (unsigned j = FRAME_STREAM_SNAP(0); j < FRAME_MAX_STREAMS; j++)
            if (s->st[j].used) {
                snaps++;
                snaps_ok += !s->st[j].missing;
            }
        fprintf(out,
                "  cpu %u: trace %" PRIu64 " of %" PRIu64
                " bytes%s, %u of %u snapshots whole%s%s\n",
                s->cpu, t->have, t->len,
                t->crc == 1   ? " (CRC32 ok)"
                : t->crc == 0 ? " (CRC32 BAD)"
                              : "",
                snaps_ok, s->meta ? s->meta->nsnap : snaps,
                s->st[FRAME_STREAM_CRASH].used ? ", crash report" : "", s->end ? "" : ", no END");
    }
}

void fx_list(const struct fx *x, FILE *out)
{
    for (size_t i = 0; i < x->nd; i++) {
        const struct dump *d = &x->d[i];
        const struct frame_meta *m = dump_meta(d);
        uint64_t bytes = 0;
        for (size_t k = 0; k < d->n; k++)
            bytes += d->s[k]->st[FRAME_STREAM_TRACE].have;
        fprintf(out,
                "dump %u  boot %s%08x  %-6s  %-8s  cpus %zu/%u  trace bytes %" PRIu64
                "  lines %lu..%lu  %s\n",
                d->id, d->boot_known ? "" : "?", d->boot, m ? frame_reason_name(m->reason) : "?",
                m ? frame_source_name(m->source) : "?", d->n, m ? m->ncpus : 0, bytes, d->line0,
                d->line1,
                d->complete      ? "complete"
                : d->status == 2 ? "incomplete"
                                 : "unusable");
    }
}

bool fx_stream(const struct fx *x, unsigned i, uint32_t cpu, unsigned stream,
               struct fx_stream_view *v)
{
    memset(v, 0, sizeof(*v));
    if (i >= x->nd || stream >= FRAME_MAX_STREAMS)
        return false;
    for (size_t k = x->d[i].n; k-- > 0;) {
        const struct sect *s = x->d[i].s[k];
        if (s->cpu != cpu)
            continue;
        const struct strm *st = &s->st[stream];
        v->known_len = st->known_len;
        v->len = st->len;
        v->seg = st->seg;
        v->nseg = st->nseg;
        v->have = st->have;
        v->missing = st->missing;
        v->crc = st->crc;
        return true;
    }
    return false;
}

/* ---- the dump directory ---- */

static int wfile(const char *dir, const char *name, const struct fx_seg *seg, size_t nseg,
                 const char *text, char *why, size_t whylen)
{
    char path[PATH_MAX];
    FILE *f;
    bool ok;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f) {
        snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    ok = true;
    for (size_t i = 0; i < nseg; i++)
        ok = ok && fwrite(seg[i].p, 1, seg[i].len, f) == seg[i].len;
    if (text)
        ok = ok && fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* a text file built with open_memstream */
struct tbuf {
    char *p;
    size_t n;
    FILE *f;
};

static FILE *tb_open(struct tbuf *t)
{
    t->p = NULL;
    t->n = 0;
    t->f = open_memstream(&t->p, &t->n);
    if (!t->f) {
        fprintf(stderr, "ptvisor-trace extract: out of memory\n");
        exit(1);
    }
    return t->f;
}

static int tb_write(struct tbuf *t, const char *dir, const char *name, char *why, size_t whylen)
{
    fclose(t->f);
    int r = wfile(dir, name, NULL, 0, t->p, why, whylen);
    free(t->p);
    return r;
}

static void filter_text(FILE *f, const struct frame_meta *m)
{
    const char *sep = "";

    if (m->filter & FRAME_FILTER_USER) {
        fprintf(f, "user");
        sep = ",";
    }
    if (m->filter & FRAME_FILTER_KERNEL) {
        fprintf(f, "%skernel", sep);
        sep = ",";
    }
    if (m->filter & FRAME_FILTER_CR3) {
        fprintf(f, "%scr3=0x%" PRIx64, sep, m->filter_cr3);
        sep = ",";
    }
    for (unsigned i = 0; i < m->nranges; i++) {
        fprintf(f, "%srange=0x%" PRIx64 "-0x%" PRIx64, sep, m->range[i].lo, m->range[i].hi);
        sep = ",";
    }
    if (!*sep)
        fprintf(f, "none");
}

static void holes(FILE *f, const struct strm *st, const char *key)
{
    uint64_t pos = 0;

    for (size_t i = 0; i <= st->nseg; i++) {
        uint64_t next = i < st->nseg ? st->seg[i].off : st->len;
        if (next > pos)
            fprintf(f, "%s %" PRIu64 "+%" PRIu64 "\n", key, pos, next - pos);
        if (i < st->nseg)
            pos = st->seg[i].off + st->seg[i].len;
    }
}

int fx_write(const struct fx *x, unsigned i, const char *dir, char *why, size_t whylen)
{
    const struct dump *d;
    const struct frame_meta *m;
    struct tbuf snaps, crash, dm;
    char name[64], path[PATH_MAX];
    int r = 0;
    bool any_crash = false, snapdir = false;

    if (i >= x->nd) {
        snprintf(why, whylen, "no such dump");
        return -1;
    }
    d = &x->d[i];
    m = dump_meta(d);
    tb_open(&snaps);
    tb_open(&crash);
    for (size_t k = 0; k < d->n && !r; k++) {
        const struct sect *s = d->s[k];
        const struct strm *t = &s->st[FRAME_STREAM_TRACE];
        struct tbuf cm;
        FILE *f = tb_open(&cm);

        snprintf(name, sizeof(name), "cpu%u.pt", s->cpu);
        r = wfile(dir, name, t->seg, t->nseg, NULL, why, whylen);
        /* bytes: the stream's length; the file holds bytes minus the missing ranges */
        fprintf(f, "cpu %u\nbytes %" PRIu64 "\nreceived %" PRIu64 "\n", s->cpu, t->len, t->have);
        if (s->meta) {
            fprintf(f, "ring_size %" PRIu64 "\nwrapped %d\noverflows %" PRIu64 "\nfilters ",
                    s->meta->ring, s->meta->wrapped, s->meta->overflows);
            filter_text(f, s->meta);
            fprintf(f, "\nsource %s\n", frame_source_name(s->meta->source));
            for (unsigned c = 0; c < s->meta->ncr3; c++)
                fprintf(f, "cr3 0x%" PRIx64 "\n", s->meta->cr3[c]);
        }
        holes(f, t, "missing");
        fprintf(f, "crc %s\n", t->crc == 1 ? "ok" : t->crc == 0 ? "bad" : "unknown");
        snprintf(name, sizeof(name), "cpu%u.meta", s->cpu);
        if (!r)
            r = tb_write(&cm, dir, name, why, whylen);
        else {
            fclose(cm.f);
            free(cm.p);
        }
        /* snapshots: each present range is its own snapshot, at VA + its offset */
        for (unsigned n = 0; s->meta && n < s->meta->nsnap && !r; n++) {
            const struct strm *st = &s->st[FRAME_STREAM_SNAP(n)];
            const struct frame_snap *sn = &s->meta->snap[n];
            if (!snapdir) {
                snprintf(path, sizeof(path), "%s/snap", dir);
                if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                    snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
                    r = -1;
                    break;
                }
                snapdir = true;
            }
            for (size_t g = 0, h; g < st->nseg && !r; g = h) {
                uint64_t len = st->seg[g].len;
                for (h = g + 1;
                     h < st->nseg && st->seg[h].off == st->seg[h - 1].off + st->seg[h - 1].len; h++)
                    len += st->seg[h].len;
                if (len == st->len)
                    snprintf(name, sizeof(name), "snap/cpu%u-%u.bin", s->cpu, n);
                else
                    snprintf(name, sizeof(name), "snap/cpu%u-%u-%" PRIx64 ".bin", s->cpu, n,
                             st->seg[g].off);
                r = wfile(dir, name, &st->seg[g], h - g, NULL, why, whylen);
                fprintf(snaps.f, "0x%" PRIx64 " %" PRIu64 " ", sn->va + st->seg[g].off, len);
                if (sn->cr3 == FRAME_CR3_ANY)
                    fprintf(snaps.f, "any");
                else
                    fprintf(snaps.f, "0x%" PRIx64, sn->cr3);
                fprintf(snaps.f, " %s\n", name);
            }
        }
        /* the crash report: its text, holes marked where they are */
        const struct strm *c = &s->st[FRAME_STREAM_CRASH];
        if (c->used) {
            uint64_t pos = 0;
            any_crash = true;
            if (d->n > 1)
                fprintf(crash.f, "==== cpu %u ====\n", s->cpu);
            for (size_t g = 0; g <= c->nseg; g++) {
                uint64_t next = g < c->nseg ? c->seg[g].off : c->len;
                if (next > pos)
                    fprintf(crash.f, "\n[ptvisor-trace: %" PRIu64 " bytes missing here]\n",
                            next - pos);
                if (g < c->nseg) {
                    fwrite(c->seg[g].p, 1, c->seg[g].len, crash.f);
                    pos = c->seg[g].off + c->seg[g].len;
                }
            }
        }
    }
    if (!r)
        r = tb_write(&snaps, dir, "snapshots", why, whylen);
    else {
        fclose(snaps.f);
        free(snaps.p);
    }
    if (!r && any_crash)
        r = tb_write(&crash, dir, "crash.txt", why, whylen);
    else {
        fclose(crash.f);
        free(crash.p);
    }
    if (r)
        return r;
    FILE *f = tb_open(&dm);
    fprintf(f, "protocol %d\ndump %u\n", FRAME_VERSION, d->id);
    if (d->boot_known)
        fprintf(f, "boot 0x%08x\n", d->boot);
    if (m)
        fprintf(f,
                "reason %s\nsource %s\ntsc_hz %" PRIu64 "\nkernel_base 0x%" PRIx64
                "\ncpus_expected %u\n",
                frame_reason_name(m->reason), frame_source_name(m->source), m->tsc_hz,
                m->kernel_base, m->ncpus);
    if (m && m->syscall_entry)
        fprintf(f, "syscall_entry 0x%" PRIx64 "\n", m->syscall_entry);
    fprintf(f,
            "cpus %zu\ncomplete %s\nframes_ok %" PRIu64 "\nframes_bad %" PRIu64
            "\nframes_missing %" PRIu64 "\n",
            d->n, d->complete ? "yes" : "no", dump_frames(d, 0), dump_frames(d, 1),
            dump_frames(d, 2));
    return tb_write(&dm, dir, "dump.meta", why, whylen);
}
