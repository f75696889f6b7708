/* SPDX-License-Identifier: MIT */
/*
 * The output side of `ptvisor-trace extract` (extract.c): what the reassembly core (fx.c) put
 * together, as the report of findings and counts, the list of dumps, a stream's bytes, and
 * the dump directory of ptt.h (cpuN.pt, cpuN.meta, snap/, snapshots, crash.txt, dump.meta).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame_dec.h"
#include "fx_int.h"
#include "ptt.h"

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

static void report(const struct fx *x, unsigned i, FILE *out, bool quiet, bool global)
{
    const struct msg **v = NULL;
    size_t n = 0, cap = 0;
    const struct dump *d;
    const struct frame_meta *m;

    if (global)
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
    if (d->kallsyms >= 0) {
        const struct gnote *g = &x->note[d->kallsyms];
        fprintf(out, "  the guest's kallsyms: %u symbols (lines %lu..%lu)\n", g->nsym, g->line0,
                g->line1);
    }
    if (d->comm >= 0) {
        const struct gnote *g = &x->note[d->comm];
        fprintf(out, "  the traced program: %s", g->comm);
        if (g->has_pid)
            fprintf(out, ", pid %llu", (unsigned long long)g->pid);
        fprintf(out, " (line %lu%s)\n", g->line0,
                g->from_console ? ", ptvisor-ctl's console line" : "");
    }
}

void fx_report(const struct fx *x, unsigned i, FILE *out, bool quiet)
{
    report(x, i, out, quiet, true);
}

void fx_report_global(const struct fx *x, FILE *out, bool quiet)
{
    report(x, UINT_MAX, out, quiet, true);
}

void fx_report_dump(const struct fx *x, unsigned i, FILE *out, bool quiet)
{
    report(x, i, out, quiet, false);
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

static const char *reason_of(const struct dump *d)
{
    const struct frame_meta *m = dump_meta(d);

    return m ? frame_reason_name(m->reason) : "unknown";
}

void fx_dump_name(const struct fx *x, unsigned i, char *buf, size_t len)
{
    const struct dump *d = &x->d[i];
    bool clash = false;

    for (size_t j = 0; j < x->nd; j++)
        clash =
            clash || (j != i && x->d[j].id == d->id && !strcmp(reason_of(&x->d[j]), reason_of(d)));
    if (!clash)
        snprintf(buf, len, "dump-%u-%s", d->id, reason_of(d));
    else if (d->boot_known)
        snprintf(buf, len, "dump-%u-%s-b%08x", d->id, reason_of(d), d->boot);
    else
        snprintf(buf, len, "dump-%u-%s-n%u", d->id, reason_of(d), i + 1);
}

void fx_dump_line(const struct fx *x, unsigned i, FILE *out)
{
    const struct dump *d = &x->d[i];
    char name[80];

    fx_dump_name(x, i, name, sizeof(name));
    fprintf(out, "%s %u %s%08x %s %s\n", name, d->id, d->boot_known ? "0x" : "?", d->boot,
            reason_of(d),
            d->complete      ? "complete"
            : d->status == 2 ? "incomplete"
                             : "unusable");
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
    if (d->comm >= 0) {
        fprintf(f, "comm %s\n", x->note[d->comm].comm);
        if (x->note[d->comm].has_pid)
            fprintf(f, "pid %llu\n", (unsigned long long)x->note[d->comm].pid);
    }
    fprintf(f,
            "cpus %zu\ncomplete %s\nframes_ok %" PRIu64 "\nframes_bad %" PRIu64
            "\nframes_missing %" PRIu64 "\n",
            d->n, d->complete ? "yes" : "no", dump_frames(d, 0), dump_frames(d, 1),
            dump_frames(d, 2));
    if (d->kallsyms >= 0) {
        const struct gnote *g = &x->note[d->kallsyms];
        struct fx_seg seg = {0, g->len, (const uint8_t *)g->text};
        if (wfile(dir, "kallsyms", &seg, 1, NULL, why, whylen) != 0) {
            fclose(dm.f);
            free(dm.p);
            return -1;
        }
    }
    return tb_write(&dm, dir, "dump.meta", why, whylen);
}
