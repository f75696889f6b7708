/* SPDX-License-Identifier: MIT */
/*
 * The end of `ptvisor-trace extract`'s reassembly (fx.c): fx_finish() closes every section's
 * records and sequence numbers, groups sections into dumps by (boot id, dump id), assembles
 * every stream by offset (blocks that disagree on an overlap are both dropped: a range is
 * either verified or reported missing, never guessed), checks it against END's CRC32 and
 * judges each dump complete, usable or unusable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frame_dec.h"
#include "fx_int.h"
#include "ptt.h"

static void finish_records(struct sect *s)
{
    char why[200];

    fx_dup_flush(s);
    if (s->guest) { /* a note: its own BEGIN keys, no boot */
        bool whole = s->bn > 0;
        for (unsigned i = 0; i < s->bn; i++)
            whole = whole && s->bpart[i];
        if (!s->bn) {
            fx_say(&s->msgs, s->line0, false, "guest note %x: data without its BEGIN record",
                   s->dump);
        } else if (!whole) {
            fx_say(&s->msgs, s->line0, false, "guest note %x: BEGIN record incomplete", s->dump);
        } else {
            s->note = fx_xcalloc(1, sizeof(*s->note));
            if (frame_note_parse((const char *const *)s->bpart, s->bn, s->note, why, sizeof(why))) {
                fx_say(&s->msgs, s->bline[0], false, "guest note %x: %s", s->dump, why);
                free(s->note);
                s->note = NULL;
            }
        }
    } else if (!s->bn) {
        fx_say(&s->msgs, s->line0, false, "dump %u cpu %u: DATA/END frames without a BEGIN record",
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
            fx_say(&s->msgs, s->line0, false,
                   "dump %u cpu %u: BEGIN record incomplete (%u of %u lines missing)", s->dump,
                   s->cpu, missing, s->bn);
        } else {
            s->meta = fx_xcalloc(1, sizeof(*s->meta));
            if (frame_meta_parse((const char *const *)s->bpart, s->bn, s->meta, why, sizeof(why))) {
                fx_say(&s->msgs, s->bline[0], false, "dump %u cpu %u: %s", s->dump, s->cpu, why);
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
        s->end = fx_xcalloc(1, sizeof(*s->end));
        if (frame_end_parse((const char *const *)s->epart, s->en, s->end, why, sizeof(why))) {
            fx_say(&s->msgs, s->eline[0], false, "dump %u cpu %u: %s", s->dump, s->cpu, why);
            free(s->end);
            s->end = NULL;
        }
    } else if (s->en) {
        fx_say(&s->msgs, s->line1, false, "dump %u cpu %u: END record incomplete", s->dump, s->cpu);
    }
    if (!s->end && s->guest && s->note && s->note->len == 0 && !s->en)
        return; /* a note without data needs no END */
    if (!s->end && s->guest)
        fx_say(&s->msgs, s->line1, false,
               "guest note %x: no END record: the log ends or the note was cut (last line %lu)",
               s->dump, s->line1);
    else if (!s->end)
        fx_say(&s->msgs, s->line1, false,
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
                fx_say(&s->msgs, prev, false,
                       "dump %u cpu %u: DATA frame %" PRIx64 " lost (after line %lu%s)", s->dump,
                       s->cpu, next, prev, k < s->nseq ? "" : ", at the end");
            else
                fx_say(&s->msgs, prev, false,
                       "dump %u cpu %u: DATA frames %" PRIx64 "..%" PRIx64
                       " lost (after line %lu%s)",
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
    if (s->guest) {
        *known = s->note && k == FRAME_STREAM_TRACE;
        return *known ? s->note->len : 0;
    }
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
    bool declared = s->guest ? !s->note || k == FRAME_STREAM_TRACE
                             : !s->meta || k < FRAME_STREAM_SNAP(s->meta->nsnap);
    bool listed = s->guest ? s->note != NULL : s->meta != NULL;

    st->len = stream_len(s, k, &st->known_len);
    st->used = st->n > 0 || (st->known_len && st->len > 0);
    st->crc = -1;
    if (!st->used)
        return;
    fx_sname(k, nb, sizeof(nb));
    if (listed && !declared) {
        fx_say(&s->msgs, st->b[0]->line0, false,
               "dump %u cpu %u: DATA for %s, which the BEGIN record does not list; dropped",
               s->dump, s->cpu, nb);
        st->used = false;
        return;
    }
    for (size_t i = 0; i < st->n; i++) {
        struct blk *b = st->b[i];
        if (st->known_len && b->off + b->raw > st->len) {
            fx_say(&s->msgs, b->line0, false,
                   "dump %u cpu %u %s: block 0x%" PRIx64
                   "+0x%x beyond the stream's length 0x%" PRIx64 "; dropped",
                   s->dump, s->cpu, nb, b->off, b->raw, st->len);
            b->state = BLK_DROPPED;
            free(b->data); /* out of every comparison below */
            b->data = NULL;
        } else if (b->state == BLK_PARTIAL) {
            fx_say(&s->msgs, b->line1, false,
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
                fx_say(&s->msgs, b->line0, false,
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
            fx_say(&s->msgs, 0, false,
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
            fx_say(&s->msgs, 0, false,
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
            fx_say(&s->msgs, 0, false, "dump %u cpu %u: END and BEGIN disagree on the length of %s",
                   s->dump, s->cpu, fx_sname(k, nb, sizeof(nb)));
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
                fx_say(&d->msgs, s->line0, false,
                       "dump %u: two different BEGIN records for cpu %u (lines %lu and %lu)", d->id,
                       s->cpu, d->s[j]->line0, s->line0);
                complete = false;
            }
        complete = sect_complete(s) && complete;
        for (unsigned k = 0; k < FRAME_MAX_STREAMS; k++)
            usable = usable || (s->meta && s->st[k].have);
    }
    if (ncpus && d->n < ncpus) {
        fx_say(&d->msgs, 0, false, "dump %u: %zu of %u CPU sections in the log", d->id, d->n,
               ncpus);
        complete = false;
    }
    if (!ncpus)
        complete = false;
    d->complete = complete;
    d->status = complete ? 0 : usable ? 2 : 1;
}

/* ---- guest notes ---- */

/* a guest section's note, if it is whole, into x->note; its findings to the log's own */
static void finish_note(struct fx *x, struct sect *s)
{
    struct strm *st = &s->st[FRAME_STREAM_TRACE];
    struct gnote g;
    char why[200];

    for (size_t i = 0; i < s->msgs.n; i++) { /* findings without a dump: the log's */
        GROW(x->global.m, x->global.n, x->global.cap);
        x->global.m[x->global.n++] = s->msgs.m[i];
    }
    s->msgs.n = 0;
    if (!s->note)
        return;
    memset(&g, 0, sizeof(g));
    g.kind = s->note->kind;
    g.line0 = s->line0;
    g.line1 = s->line1;
    if (g.kind == FRAME_NOTE_COMM) {
        g.dump = s->note->dump;
        g.has_pid = s->note->has_pid;
        g.pid = s->note->pid;
        memcpy(g.comm, s->note->comm, sizeof(g.comm));
    } else {
        if (!s->end || st->missing || st->crc != 1 || st->conflict) {
            fx_say(&x->global, s->line0, false,
                   "guest kallsyms note (lines %lu..%lu) incomplete or damaged: not used", s->line0,
                   s->line1);
            return;
        }
        char *all = fx_xcalloc(st->len + 1, 1);
        for (size_t k = 0; k < st->nseg; k++) /* whole: the pieces follow each other */
            memcpy(all + st->seg[k].off, st->seg[k].p, st->seg[k].len);
        int r =
            frame_kallsyms_text(all, st->len, &g.text, &g.len, &g.entry, &g.nsym, why, sizeof(why));
        free(all);
        if (r) {
            fx_say(&x->global, s->line0, false, "guest kallsyms note (lines %lu..%lu): %s",
                   s->line0, s->line1, why);
            return;
        }
    }
    GROW(x->note, x->nnote, x->capnote);
    x->note[x->nnote++] = g;
}

/* log lines between a note and a dump (0: the note is inside the dump's lines) */
static unsigned long distance(const struct gnote *g, const struct dump *d)
{
    if (g->line1 < d->line0)
        return d->line0 - g->line1;
    if (g->line0 > d->line1)
        return g->line0 - d->line1;
    return 0;
}

/* a dump of another boot between the note and dump d: the note is not of d's boot */
static bool other_boot_between(const struct fx *x, const struct gnote *g, const struct dump *d)
{
    unsigned long lo = g->line1 < d->line0 ? g->line1 : d->line1,
                  hi = g->line1 < d->line0 ? d->line0 : g->line0;

    for (size_t j = 0; j < x->nd; j++) {
        const struct dump *o = &x->d[j];
        if (o->boot_known && d->boot_known && o->boot != d->boot && o->line0 > lo && o->line1 < hi)
            return true;
    }
    return false;
}

/*
 * Which note goes with dump i:
 *   kallsyms: where the dump carries the guest's LSTAR, a note whose entry_SYSCALL_64 is at
 *     that address (the same boot, KASLR included); else a note with no dump of another boot
 *     between it and the dump.  The nearest such note in the log.
 *   comm: a note naming the dump's id, with no dump of another boot between, the nearest;
 *     ptvisor-ctl's own comm note before its console line.
 */
static void match_notes(struct fx *x, size_t i)
{
    struct dump *d = &x->d[i];
    const struct frame_meta *m = NULL;
    unsigned long best_k = ~0ul, best_c = ~0ul;
    bool mismatch = false;

    d->kallsyms = d->comm = -1;
    for (size_t k = 0; k < d->n && !m; k++)
        m = d->s[k]->meta;
    for (size_t j = 0; j < x->nnote; j++) {
        const struct gnote *g = &x->note[j];
        unsigned long dist = distance(g, d);
        if (g->kind == FRAME_NOTE_KALLSYMS) {
            if (m && m->syscall_entry) {
                if (g->entry != m->syscall_entry) {
                    mismatch = mismatch || !other_boot_between(x, g, d);
                    continue;
                }
            } else if (other_boot_between(x, g, d)) {
                continue;
            }
            if (dist < best_k) {
                best_k = dist;
                d->kallsyms = (int)j;
            }
        } else if (g->kind == FRAME_NOTE_COMM && g->dump == d->id && !other_boot_between(x, g, d)) {
            /* the structured note wins over the console line at the same distance */
            if (dist < best_c || (dist == best_c && d->comm >= 0 && x->note[d->comm].from_console &&
                                  !g->from_console)) {
                best_c = dist;
                d->comm = (int)j;
            }
        }
    }
    if (d->kallsyms < 0 && mismatch)
        fx_say(&d->msgs, 0, false,
               "dump %u: the guest's kallsyms in this log name entry_SYSCALL_64 at another "
               "address than the dump's LSTAR %#llx (another boot): not used",
               d->id, (unsigned long long)m->syscall_entry);
}

static int dump_cmp(const void *a, const void *b)
{
    const struct dump *x = a, *y = b;

    return x->line0 < y->line0 ? -1 : x->line0 > y->line0;
}

void fx_finish(struct fx *x)
{
    for (size_t i = 0; i < x->norphan; i++)
        fx_say(&x->global, x->orphan[i].line, false, "%s", x->orphan[i].text);
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
            if (!x->all[i]->guest && x->all[i]->boot_known == (pass == 0))
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
    for (size_t i = 0; i < x->nall; i++)
        if (x->all[i]->guest)
            finish_note(x, x->all[i]);
    for (size_t i = 0; i < x->nd; i++)
        match_notes(x, i);
}
