/* SPDX-License-Identifier: MIT */
/*
 * The serial frame reader (tools/ptvisor-trace/frame_dec.c, extract.c) under two kinds of
 * input, chosen by the first byte (guest notes, types b/d/e, included: the text seeds hold
 * some, and their records go through frame_note_parse too):
 *
 *  - 0 or 2 (mod 4): the rest is a serial log, fed line by line to the extractor core and to
 *    the line, record and block decoders directly.  No crash, no UB, no unbounded memory.
 *    With 2, every line holding "@PTV" gets a valid line CRC appended first, so that the
 *    fuzzer reaches the field checks, records, blocks and dumps behind the CRC.
 *
 *  - odd: a differential.  The VMM's encoder (vmm/trace/frame.c) dumps streams made from the
 *    input; the input then mutates the lines (bytes changed, inserted, deleted, lines cut,
 *    lost, duplicated, swapped, console text between them or glued in front, "\r").  Checks:
 *      - a mutated line that frame_parse() accepts is, from its "@PTV" on, exactly a line
 *        the encoder wrote (the line CRC leaves nothing else through);
 *      - every byte the extractor hands out is the byte that was encoded at that offset;
 *      - with harmless mutations only (duplicates, reordering, console text, "\r"), the dump
 *        is complete;
 *      - one mutation may be "forged": a header byte changed and the line CRC recomputed, as
 *        an adversary could; then a dump said to be complete must still be exact.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_dec.h"
#include "trace/frame.h"

#define MAX_LINES 4096

static FILE *devnull;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_frame: %s\n", what);
    abort();
}

/* ---- arbitrary text ---- */

static void text_mode(const uint8_t *p, size_t n, bool add_crc)
{
    static struct frame_line f;
    static char buf[4096];
    struct fx *x = fx_new();
    unsigned long ln = 0;

    for (size_t i = 0; i < n;) {
        const uint8_t *e = memchr(p + i, '\n', n - i);
        size_t len = e ? (size_t)(e - (p + i)) : n - i;
        const char *s = (const char *)p + i;
        const char *at = memmem(s, len, "@PTV", 4);
        if (add_crc && at && len + 9 < sizeof(buf)) {
            memcpy(buf, s, len);
            buf[len] = ' ';
            snprintf(buf + len + 1, 9, "%08x",
                     frame_crc32(0, buf + (at - s), (size_t)(s + len - at) + 1));
            i += len + (e ? 1 : 0);
            s = buf;
            len += 9;
        } else {
            i += len + (e ? 1 : 0);
        }
        fx_line(x, s, len, ++ln, devnull);
        enum frame_kind k = frame_parse(s, len, &f);
        if (k == FRAME_DATA && ((uint64_t)f.pos + f.plen > f.enclen || f.enclen > f.rawlen ||
                                f.rawlen > FRAME_BLOCK_MAX || f.plen == 0))
            fail("DATA frame accepted outside its limits");
        if (k == FRAME_BEGIN || k == FRAME_END) {
            static struct frame_meta m;
            static struct frame_endrec r;
            static struct frame_note nt;
            const char *body[1] = {f.body};
            char why[160];
            if (f.part < 1 || f.part > f.nparts || f.nparts > FRAME_MAX_PARTS)
                fail("record part accepted outside 1..n");
            frame_meta_parse(body, 1, &m, why, sizeof(why));
            frame_end_parse(body, 1, &r, why, sizeof(why));
            if (frame_note_parse(body, 1, &nt, why, sizeof(why)) == 0) {
                /* a comm note's name: 1..15 printable bytes without space */
                size_t cl = strlen(nt.comm);
                if (nt.kind == FRAME_NOTE_COMM && (cl == 0 || cl > FRAME_COMM_MAX))
                    fail("comm note accepted with an empty or long name");
                for (size_t c = 0; c < cl; c++)
                    if (nt.comm[c] < 0x21 || nt.comm[c] > 0x7e)
                        fail("comm note accepted with a byte outside 0x21..0x7e");
            } else if (!why[0] || strchr(why, '\n')) {
                fail("a note refused without a one-line reason");
            }
        }
    }
    fx_finish(x);
    fx_list(x, devnull);
    for (unsigned d = 0; d < fx_ndumps(x); d++) {
        fx_report(x, d, devnull, false);
        for (uint32_t cpu = 0; cpu < 4; cpu++)
            for (unsigned k = 0; k < 4; k++) {
                struct fx_stream_view v;
                if (!fx_stream(x, d, cpu, k, &v))
                    continue;
                uint64_t have = 0;
                for (size_t g = 0; g < v.nseg; g++) {
                    if (g && v.seg[g].off < v.seg[g - 1].off + v.seg[g - 1].len)
                        fail("overlapping segments");
                    have += v.seg[g].len;
                    volatile uint8_t sink = v.seg[g].len ? v.seg[g].p[v.seg[g].len - 1] : 0;
                    (void)sink;
                }
                if (have != v.have || v.have + v.missing != v.len)
                    fail("stream view counts disagree");
            }
    }
    fx_free(x);
}

/* ---- the differential ---- */

struct in {
    const uint8_t *p;
    size_t n;
};

static unsigned take(struct in *in, unsigned bytes)
{
    unsigned v = 0;

    for (unsigned i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (unsigned)*in->p << (8 * i);
    return v;
}

struct lines {
    char *l[MAX_LINES];
    bool real[MAX_LINES]; /* must decode to an original line if accepted */
    size_t n;
};

static struct lines orig, mut;

static void out_line(void *ctx, const char *s, size_t n)
{
    struct lines *L = ctx;

    if (L->n == MAX_LINES)
        fail("more lines than the harness holds");
    L->l[L->n] = strndup(s, n - 1);
    L->real[L->n++] = true;
}

static void add(struct lines *L, char *s, bool real)
{
    if (L->n == MAX_LINES) {
        free(s);
        return;
    }
    L->l[L->n] = s;
    L->real[L->n++] = real;
}

static void recrc(char *s)
{
    size_t n = strlen(s);
    const char *at = strstr(s, "@PTV");

    if (!at || n < 9 + (size_t)(at - s) || s[n - 9] != ' ')
        return;
    uint32_t c = frame_crc32(0, at, (size_t)(s + n - 8 - at));
    snprintf(s + n - 8, 9, "%08x", c);
}

static uint8_t *stream_bytes(struct in *in, size_t len, uint32_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    uint32_t x = seed | 1;
    unsigned mode = take(in, 1);

    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        /* runs and repeats (LZ4 blocks) or noise (stored blocks) */
        p[i] = (mode & 1) ? (uint8_t)(i % (1 + (mode >> 1) % 64) ? p[i - 1] + (x % 3 == 0) : x)
                          : (uint8_t)x;
    }
    return p;
}

static const char *const junk[] = {"login: ", "[  1.0] ok", "", "\x1b[0m", "P T V 1", "#"};

static void diff_mode(const uint8_t *data, size_t size)
{
    static struct frame_enc enc;
    static struct frame_line f;
    struct in in = {data, size};
    size_t tlen = take(&in, 2) % 20000, clen = take(&in, 1) % 300, slen = 1 + take(&in, 2) % 6000;
    uint8_t *t = stream_bytes(&in, tlen, 1 + (uint32_t)size), *c = stream_bytes(&in, clen, 7),
            *sn = stream_bytes(&in, slen, 99);
    struct frame_snap snap = {0x401000, 0x1000, slen};
    uint64_t cr3 = 0x1000;
    struct frame_begin b = {.boot_id = 1,
                            .dump_id = 1,
                            .ncpus = 1,
                            .trace_len = tlen,
                            .crash_len = clen,
                            .snaps = &snap,
                            .nsnap = 1,
                            .cr3s = &cr3,
                            .ncr3 = 1,
                            .filter = FRAME_FILTER_USER};
    struct frame_out o = {out_line, &orig};
    const uint8_t *src[3] = {t, c, sn};
    size_t len[3] = {tlen, clen, slen};
    bool harmful = false, forged = false;

    orig.n = mut.n = 0;
    if (frame_enc_begin(&enc, &b, &o) != 0)
        fail(enc.err);
    for (unsigned s = 0; s < 3; s++)
        for (size_t off = 0; off < len[s];)
            off += frame_enc_data(&enc, s, off, src[s] + off, len[s] - off);
    frame_enc_end(&enc);
    if (enc.err)
        fail(enc.err);
    for (size_t i = 0; i < orig.n; i++)
        add(&mut, strdup(orig.l[i]), true);

    /* mutations */
    for (unsigned k = take(&in, 1) % 12; k-- > 0 && mut.n;) {
        unsigned op = take(&in, 1) % 11, i = take(&in, 2) % (unsigned)mut.n;
        char *s = mut.l[i];
        size_t n = strlen(s), at = take(&in, 1) % (n + 1);
        char buf[2048]; /* a line glued to console text up to 12 times still fits */
        switch (op) {
        case 0: /* a byte changed */
        case 1:
            if (n) {
                s[at % n] = (char)(take(&in, 1) | 0x20);
                harmful = true;
            }
            break;
        case 2: /* a byte lost */
            if (n) {
                memmove(s + at % n, s + at % n + 1, n - at % n);
                harmful = true;
            }
            break;
        case 3: /* the line cut */
            s[at] = 0;
            harmful = harmful || at < n;
            break;
        case 4: /* the line lost */
            free(s);
            memmove(&mut.l[i], &mut.l[i + 1], (mut.n - i - 1) * sizeof(char *));
            memmove(&mut.real[i], &mut.real[i + 1], (mut.n - i - 1) * sizeof(bool));
            mut.n--;
            harmful = true;
            break;
        case 5: /* the line twice */
            add(&mut, strdup(s), mut.real[i]);
            break;
        case 6: { /* two lines swapped */
            unsigned j = take(&in, 2) % (unsigned)mut.n;
            char *tmp = mut.l[i];
            bool r = mut.real[i];
            mut.l[i] = mut.l[j];
            mut.real[i] = mut.real[j];
            mut.l[j] = tmp;
            mut.real[j] = r;
            break;
        }
        case 7: /* console text in front, "\r" behind */
            snprintf(buf, sizeof(buf), "%s%s\r", junk[take(&in, 1) % 6], s);
            free(mut.l[i]);
            mut.l[i] = strdup(buf);
            break;
        case 8: /* a console line */
            add(&mut, strdup(junk[take(&in, 1) % 6]), false);
            break;
        case 9: /* arbitrary bytes as a line */
            n = take(&in, 1) % 64;
            for (size_t j = 0; j < n; j++)
                buf[j] = (char)(take(&in, 1) | 1);
            buf[n] = 0;
            add(&mut, strdup(buf), false);
            harmful = harmful || strstr(buf, "@PTV");
            break;
        case 10: /* forged: a byte changed and the line CRC made to fit (once) */
            if (!forged && n > 20) {
                s[6 + at % (n - 15)] = (char)(take(&in, 1) | 0x20);
                recrc(s);
                mut.real[i] = false;
                forged = harmful = true;
            }
            break;
        }
    }

    /* every line accepted is an original one */
    for (size_t i = 0; i < mut.n; i++) {
        enum frame_kind k = frame_parse(mut.l[i], strlen(mut.l[i]), &f);
        if (k < FRAME_BEGIN || !mut.real[i])
            continue;
        size_t n = strlen(mut.l[i]);
        while (n && (mut.l[i][n - 1] == '\r' || mut.l[i][n - 1] == ' '))
            n--;
        bool found = false;
        for (size_t j = 0; j < orig.n && !found; j++)
            found = strlen(orig.l[j]) == n - f.at && !memcmp(orig.l[j], mut.l[i] + f.at, n - f.at);
        if (!found)
            fail("a changed line was accepted");
    }

    /* every byte out is the byte in */
    struct fx *x = fx_new();
    for (size_t i = 0; i < mut.n; i++)
        fx_line(x, mut.l[i], strlen(mut.l[i]), i + 1, NULL);
    fx_finish(x);
    for (unsigned d = 0; d < fx_ndumps(x); d++)
        fx_report(x, d, devnull, false);
    int pick = fx_pick(x, -1);
    if (!harmful && (pick < 0 || fx_status(x, (unsigned)pick) != 0 || fx_ndumps(x) != 1)) {
        for (unsigned d = 0; d < fx_ndumps(x); d++)
            fx_report(x, d, stderr, false);
        fail("harmless changes only, yet the dump is not complete");
    }
    for (unsigned d = 0; d < fx_ndumps(x); d++) {
        bool complete = fx_status(x, d) == 0;
        if (forged && !complete)
            continue;
        for (unsigned s = 0; s < 3; s++) {
            struct fx_stream_view v;
            if (!fx_stream(x, d, 0, s, &v))
                continue;
            if (complete && (v.missing || v.len != len[s]))
                fail("a complete dump with a stream not whole");
            for (size_t g = 0; g < v.nseg; g++)
                if (v.seg[g].off + v.seg[g].len > len[s] ||
                    memcmp(v.seg[g].p, src[s] + v.seg[g].off, v.seg[g].len))
                    fail("bytes out that were not encoded there");
        }
    }
    fx_free(x);
    for (size_t i = 0; i < orig.n; i++)
        free(orig.l[i]);
    for (size_t i = 0; i < mut.n; i++)
        free(mut.l[i]);
    free(t);
    free(c);
    free(sn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    if (!size)
        return 0;
    if (data[0] & 1)
        diff_mode(data + 1, size - 1);
    else
        text_mode(data + 1, size - 1, data[0] & 2);
    return 0;
}
