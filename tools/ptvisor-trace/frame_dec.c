/* SPDX-License-Identifier: MIT */
/*
 * Frame protocol reader (interface in frame_dec.h, wire format in docs/serial-protocol.md).
 * Strict: every number is lowercase hex without leading zeros, fields are separated by one
 * space, the line CRC is checked before any field is believed, and every limit of the
 * protocol is enforced, so a line either decodes to exactly what an encoder wrote or is
 * refused with the reason.
 */
#define _GNU_SOURCE
#include "frame_dec.h"

#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#define MAX_TOKENS 100 /* a 200-byte line has fewer */

static void whyf(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void whyf(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (!why || !len)
        return;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* ---- CRC-32, table built from the reflected polynomial 0xedb88320 ---- */

uint32_t frame_dec_crc32(uint32_t crc, const void *p, size_t n)
{
    static uint32_t table[256];
    static bool ready;
    const uint8_t *b = p;
    uint32_t c;

    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            c = i;
            for (int k = 0; k < 8; k++)
                c = (c >> 1) ^ (0xedb88320u & -(c & 1));
            table[i] = c;
        }
        ready = true;
    }
    c = ~crc;
    while (n--)
        c = table[(c ^ *b++) & 0xff] ^ (c >> 8);
    return ~c;
}

/* ---- fields ---- */

/* canonical lowercase hex of at most maxd digits */
static bool hexv(const char *s, size_t n, unsigned maxd, uint64_t *v)
{
    uint64_t x = 0;

    if (n == 0 || n > maxd || (s[0] == '0' && n > 1))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned d;
        if (s[i] >= '0' && s[i] <= '9')
            d = (unsigned)(s[i] - '0');
        else if (s[i] >= 'a' && s[i] <= 'f')
            d = (unsigned)(s[i] - 'a' + 10);
        else
            return false;
        x = x << 4 | d;
    }
    *v = x;
    return true;
}

static bool hex32(const char *s, size_t n, uint32_t *v)
{
    uint64_t x;

    if (!hexv(s, n, 8, &x))
        return false;
    *v = (uint32_t)x;
    return true;
}

long frame_b85_decode(const char *s, size_t n, uint8_t *out)
{
    static int8_t val[256];
    static bool ready;
    static const char alpha[] = FRAME_B85_ALPHABET;
    long o = 0;

    if (!ready) {
        memset(val, -1, sizeof(val));
        for (int i = 0; i < 85; i++)
            val[(uint8_t)alpha[i]] = (int8_t)i;
        ready = true;
    }
    for (size_t i = 0; i < n; i += 5) {
        size_t r = n - i < 5 ? n - i : 5;
        uint64_t v = 0;
        if (r == 1)
            return -1;
        for (size_t j = 0; j < 5; j++) {
            int d = j < r ? val[(uint8_t)s[i + j]] : 84;
            if (d < 0)
                return -1;
            v = v * 85 + (unsigned)d;
        }
        if (v > 0xffffffffu)
            return -1;
        for (size_t j = 0; j < r - 1; j++)
            out[o++] = (uint8_t)(v >> (24 - 8 * j));
    }
    return o;
}

struct tok {
    const char *s;
    size_t n;
};

/* split on single spaces; -1 on an empty token or more than max */
static int split(const char *s, size_t n, struct tok *t, int max)
{
    int k = 0;
    size_t i = 0;

    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != ' ')
            j++;
        if (j == i || k == max)
            return -1;
        t[k].s = s + i;
        t[k++].n = j - i;
        i = j + 1;
    }
    return k;
}

static bool tok_is(const struct tok *t, const char *lit)
{
    return t->n == strlen(lit) && memcmp(t->s, lit, t->n) == 0;
}

/* "t", "c", "sN" -> FRAME_STREAM_* */
static bool stream_id(const struct tok *t, unsigned *stream)
{
    uint64_t v;

    if (tok_is(t, "t"))
        *stream = FRAME_STREAM_TRACE;
    else if (tok_is(t, "c"))
        *stream = FRAME_STREAM_CRASH;
    else if (t->n >= 2 && t->s[0] == 's' && hexv(t->s + 1, t->n - 1, 3, &v) && v < FRAME_MAX_SNAPS)
        *stream = FRAME_STREAM_SNAP((unsigned)v);
    else
        return false;
    return true;
}

static enum frame_kind bad(struct frame_line *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum frame_kind bad(struct frame_line *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(f->why, sizeof(f->why), fmt, ap);
    va_end(ap);
    return f->kind = FRAME_BAD;
}

static enum frame_kind parse_data(struct frame_line *f, struct tok *t, int nt)
{
    uint64_t v;

    if (nt != 11)
        return bad(f, "DATA frame with %d fields, not 10", nt - 1);
    if (!hexv(t[3].s, t[3].n, 16, &f->seq))
        return bad(f, "DATA frame: bad sequence number");
    if (!stream_id(&t[4], &f->stream))
        return bad(f, "DATA frame: unknown stream '%.*s'", (int)(t[4].n > 8 ? 8 : t[4].n), t[4].s);
    if (!hexv(t[5].s, t[5].n, 16, &f->off))
        return bad(f, "DATA frame: bad offset");
    if (!hexv(t[6].s, t[6].n, 5, &v) || v == 0 || v > FRAME_BLOCK_MAX)
        return bad(f, "DATA frame: raw length not in 1..0x10000");
    f->rawlen = (uint32_t)v;
    if (f->off > FRAME_STREAM_MAX - f->rawlen)
        return bad(f, "DATA frame: bytes beyond 1 TiB");
    if (!hex32(t[7].s, t[7].n, &f->crc))
        return bad(f, "DATA frame: bad CRC32 field");
    if (tok_is(&t[8], "S")) {
        f->lz4 = false;
        f->enclen = f->rawlen;
    } else if (t[8].n >= 2 && t[8].s[0] == 'L' && hexv(t[8].s + 1, t[8].n - 1, 5, &v) && v > 0 &&
               v < f->rawlen) {
        f->lz4 = true;
        f->enclen = (uint32_t)v;
    } else {
        return bad(f, "DATA frame: encoding is neither S nor L with a length below the raw one");
    }
    if (!hexv(t[9].s, t[9].n, 5, &v) || v >= f->enclen)
        return bad(f, "DATA frame: position outside the encoded block");
    f->pos = (uint32_t)v;
    long k = frame_b85_decode(t[10].s, t[10].n, f->payload);
    if (k <= 0)
        return bad(f, "DATA frame: payload is not base 85 of the protocol");
    if ((uint64_t)f->pos + (uint64_t)k > f->enclen)
        return bad(f, "DATA frame: payload runs past the encoded block");
    f->plen = (uint32_t)k;
    return f->kind = FRAME_DATA;
}

static enum frame_kind parse_record(struct frame_line *f, struct tok *t, int nt, size_t bodyoff,
                                    const char *body, size_t bodylen)
{
    const char *slash;
    uint64_t i, n;

    if (nt < 5)
        return bad(f, "%s record line without key=value fields",
                   f->kind == FRAME_BEGIN ? "BEGIN" : "END");
    slash = memchr(t[3].s, '/', t[3].n);
    if (!slash || !hexv(t[3].s, (size_t)(slash - t[3].s), 3, &i) ||
        !hexv(slash + 1, t[3].n - (size_t)(slash - t[3].s) - 1, 3, &n) || i < 1 || i > n ||
        n > FRAME_MAX_PARTS)
        return bad(f, "record part is not i/n with 1 <= i <= n <= 0x400");
    f->part = (unsigned)i;
    f->nparts = (unsigned)n;
    for (size_t k = bodyoff; k < bodylen; k++) {
        unsigned char c = (unsigned char)body[k];
        if (c > 0x7e)
            return bad(f, "record with a non-ASCII character");
        if (c < 0x21 && c != ' ')
            return bad(f, "record with a control character");
    }
    memcpy(f->body, body + bodyoff, bodylen - bodyoff);
    f->body[bodylen - bodyoff] = 0;
    return f->kind;
}

enum frame_kind frame_parse(const char *s, size_t n, struct frame_line *f)
{
    const char *at = NULL, *p = s, *body;
    struct tok t[MAX_TOKENS];
    size_t len, bodylen;
    uint64_t crc;
    int nt;

    f->kind = FRAME_NONE;
    f->guest = false;
    f->why[0] = 0;
    f->at = 0;
    f->prefix_bad = false;
    while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    while ((p = memmem(p, n - (size_t)(p - s), "@PTV", 4)) != NULL)
        at = p++;
    if (!at)
        return FRAME_NONE;
    f->at = (size_t)(at - s);
    len = n - f->at;
    if (len > FRAME_LINE_MAX - 1)
        return bad(f, "frame line of %zu characters (at most %d)", len, FRAME_LINE_MAX - 1);
    if (len < FRAME_PREFIX_LEN || memcmp(at, FRAME_PREFIX, FRAME_PREFIX_LEN) != 0) {
        size_t d = 4;
        while (d < len && at[d] >= '0' && at[d] <= '9')
            d++;
        f->prefix_bad = true;
        if (d > 4 && d < len && at[d] == ' ')
            return bad(f, "frame of protocol version %.*s (this tool reads version %d)",
                       (int)(d - 4 > 8 ? 8 : d - 4), at + 4, FRAME_VERSION);
        return bad(f, "\"@PTV\" without a frame after it (kept as console text)");
    }
    if (len < FRAME_PREFIX_LEN + 2 + 9 || at[len - 9] != ' ')
        return bad(f, "frame without its line CRC");
    crc = 0;
    for (size_t k = len - 8; k < len; k++) {
        char c = at[k];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return bad(f, "frame without its line CRC");
        crc = crc << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (frame_dec_crc32(0, at, len - 8) != (uint32_t)crc)
        return bad(f, "line CRC32 mismatch (damaged line)");
    body = at + FRAME_PREFIX_LEN;
    bodylen = len - 9 - FRAME_PREFIX_LEN;
    nt = split(body, bodylen, t, MAX_TOKENS);
    if (nt < 3)
        return bad(f, "frame with %s",
                   nt < 0 ? "an empty field or too many fields" : "too few fields");
    if (!hex32(t[1].s, t[1].n, &f->dump) || !hex32(t[2].s, t[2].n, &f->cpu))
        return bad(f, "frame with a bad dump id or CPU field");
    /* b, d, e: the same records, written by software in the guest (a separate namespace) */
    if (t[0].n == 1 && (t[0].s[0] == 'b' || t[0].s[0] == 'd' || t[0].s[0] == 'e')) {
        f->guest = true;
        t[0].s = t[0].s[0] == 'b' ? "B" : t[0].s[0] == 'd' ? "D" : "E";
    }
    if (tok_is(&t[0], "D"))
        return parse_data(f, t, nt);
    if (tok_is(&t[0], "B") || tok_is(&t[0], "E")) {
        f->kind = t[0].s[0] == 'B' ? FRAME_BEGIN : FRAME_END;
        if (nt < 4)
            return bad(f, "record line without its part number");
        size_t bodyoff = (size_t)(t[3].s + t[3].n - body);
        return parse_record(f, t, nt, bodyoff + 1 > bodylen ? bodylen : bodyoff + 1, body, bodylen);
    }
    return bad(f, "unknown frame type '%.*s'", (int)(t[0].n > 8 ? 8 : t[0].n), t[0].s);
}

/* ---- records ---- */

static const char *const reason_names[FRAME_REASON_COUNT] = {"vmcall", "crash", "serial", "boot"};
static const char *const source_names[FRAME_SRC_COUNT] = {"hardware", "software"};

const char *frame_reason_name(enum frame_reason r)
{
    return (unsigned)r < FRAME_REASON_COUNT ? reason_names[r] : "?";
}

const char *frame_source_name(enum frame_source s)
{
    return (unsigned)s < FRAME_SRC_COUNT ? source_names[s] : "?";
}

const char *frame_stream_name(unsigned stream, char *buf, size_t len)
{
    if (stream == FRAME_STREAM_TRACE)
        snprintf(buf, len, "trace");
    else if (stream == FRAME_STREAM_CRASH)
        snprintf(buf, len, "crash report");
    else
        snprintf(buf, len, "snapshot %u", stream - FRAME_STREAM_SNAP(0));
    return buf;
}

/* the key=value tokens of all parts, one at a time */
struct kv_iter {
    const char *const *body;
    unsigned n, part;
    const char *p;
};

static bool kv_next(struct kv_iter *it, struct tok *key, struct tok *val)
{
    while (!it->p || !*it->p) {
        if (it->part == it->n)
            return false;
        it->p = it->body[it->part++];
    }
    const char *e = strchr(it->p, ' ');
    size_t n = e ? (size_t)(e - it->p) : strlen(it->p);
    const char *eq = memchr(it->p, '=', n);
    key->s = it->p;
    key->n = eq ? (size_t)(eq - it->p) : n;
    val->s = eq ? eq + 1 : it->p + n;
    val->n = eq ? n - key->n - 1 : 0;
    it->p += n + (e ? 1 : 0);
    return true;
}

static bool num(const struct tok *v, uint64_t max, uint64_t *out)
{
    return hexv(v->s, v->n, 16, out) && *out <= max;
}

static int pick(const struct tok *v, const char *const *names, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        if (tok_is(v, names[i]))
            return (int)i;
    return -1;
}

/* split "a,b,c,d" into exactly `want` pieces */
static bool commas(const struct tok *v, struct tok *out, int want)
{
    int k = 0;
    size_t i = 0;

    while (k < want) {
        size_t j = i;
        while (j < v->n && v->s[j] != ',')
            j++;
        out[k].s = v->s + i;
        out[k++].n = j - i;
        if (j == v->n)
            break;
        i = j + 1;
    }
    return k == want && out[want - 1].s + out[want - 1].n == v->s + v->n;
}

enum {
    K_BOOT,
    K_CPUS,
    K_REASON,
    K_SOURCE,
    K_RING,
    K_WRAP,
    K_OVF,
    K_TSC,
    K_KBASE,
    K_FILTER,
    K_FCR3,
    K_T,
    K_C,
    K_NRANGE,
    K_NCR3,
    K_NSNAP,
    K_COUNT
};
static const char *const meta_keys[K_COUNT] = {"boot", "cpus",   "reason", "source", "ring", "wrap",
                                               "ovf",  "tsc",    "kbase",  "filter", "fcr3", "t",
                                               "c",    "nrange", "ncr3",   "nsnap"};

static bool filter_parse(const struct tok *v, uint32_t *f)
{
    static const char letters[] = "ukc";

    *f = 0;
    if (tok_is(v, "-"))
        return true;
    if (v->n == 0)
        return false;
    for (size_t i = 0; i < v->n; i++) {
        const char *l = memchr(letters, v->s[i], 3);
        if (!l || (*f & (1u << (l - letters))))
            return false;
        *f |= 1u << (l - letters);
    }
    return true;
}

int frame_meta_parse(const char *const *body, unsigned n, struct frame_meta *m, char *why,
                     size_t whylen)
{
    struct kv_iter it = {.body = body, .n = n};
    struct tok k, v, f[4];
    bool seen[K_COUNT] = {0}, snap_seen[FRAME_MAX_SNAPS] = {0};
    unsigned nr = 0, nc = 0, ns = 0;
    uint64_t x, y;

    memset(m, 0, sizeof(*m));
    while (kv_next(&it, &k, &v)) {
        int key = pick(&k, meta_keys, K_COUNT);
        if (k.n == 0 || v.s == k.s + k.n) {
            whyf(why, whylen, "BEGIN field '%.*s' is not key=value", (int)(k.n > 16 ? 16 : k.n),
                 k.s);
            return -1;
        }
        if (key >= 0) {
            bool ok = true;
            if (seen[key]) {
                whyf(why, whylen, "BEGIN field %s given twice", meta_keys[key]);
                return -1;
            }
            seen[key] = true;
            switch (key) {
            case K_BOOT:
                ok = num(&v, 0xffffffffu, &x) && ((m->boot = (uint32_t)x), true);
                break;
            case K_CPUS:
                ok = num(&v, 0xffffffffu, &x) && x >= 1 && ((m->ncpus = (uint32_t)x), true);
                break;
            case K_REASON: {
                int r = pick(&v, reason_names, FRAME_REASON_COUNT);
                ok = r >= 0 && ((m->reason = (enum frame_reason)r), true);
                break;
            }
            case K_SOURCE: {
                int r = pick(&v, source_names, FRAME_SRC_COUNT);
                ok = r >= 0 && ((m->source = (enum frame_source)r), true);
                break;
            }
            case K_RING:
                ok = num(&v, UINT64_MAX, &m->ring);
                break;
            case K_WRAP:
                ok = num(&v, 1, &x) && ((m->wrapped = x), true);
                break;
            case K_OVF:
                ok = num(&v, UINT64_MAX, &m->overflows);
                break;
            case K_TSC:
                ok = num(&v, UINT64_MAX, &m->tsc_hz);
                break;
            case K_KBASE:
                ok = num(&v, UINT64_MAX, &m->kernel_base);
                break;
            case K_FILTER:
                ok = filter_parse(&v, &m->filter);
                break;
            case K_FCR3:
                ok = num(&v, UINT64_MAX, &m->filter_cr3);
                break;
            case K_T:
                ok = num(&v, FRAME_STREAM_MAX, &m->trace_len);
                break;
            case K_C:
                ok = num(&v, FRAME_STREAM_MAX, &m->crash_len);
                break;
            case K_NRANGE:
                ok = num(&v, FRAME_MAX_RANGES, &x) && ((m->nranges = (unsigned)x), true);
                break;
            case K_NCR3:
                ok = num(&v, FRAME_MAX_CR3S, &x) && ((m->ncr3 = (unsigned)x), true);
                break;
            case K_NSNAP:
                ok = num(&v, FRAME_MAX_SNAPS, &x) && ((m->nsnap = (unsigned)x), true);
                break;
            }
            if (!ok) {
                whyf(why, whylen, "BEGIN field %s has a bad value", meta_keys[key]);
                return -1;
            }
        } else if (tok_is(&k, "lstar")) {
            if (m->syscall_entry || !num(&v, UINT64_MAX, &x) || !x) {
                whyf(why, whylen, "BEGIN lstar is not a nonzero number (or given twice)");
                return -1;
            }
            m->syscall_entry = x;
        } else if (tok_is(&k, "range")) {
            const char *dash = memchr(v.s, '-', v.n);
            struct tok lo = {v.s, dash ? (size_t)(dash - v.s) : 0};
            struct tok hi = {dash ? dash + 1 : v.s, dash ? v.n - lo.n - 1 : 0};
            if (!dash || !num(&lo, UINT64_MAX, &x) || !num(&hi, UINT64_MAX, &y) || x > y ||
                nr == FRAME_MAX_RANGES) {
                whyf(why, whylen, "BEGIN range is not lo-hi with lo <= hi (at most 4)");
                return -1;
            }
            m->range[nr].lo = x;
            m->range[nr++].hi = y;
        } else if (tok_is(&k, "cr3")) {
            if (!num(&v, UINT64_MAX, &x) || nc == FRAME_MAX_CR3S) {
                whyf(why, whylen, "BEGIN cr3 is not a number (or more than 256)");
                return -1;
            }
            m->cr3[nc++] = x;
        } else if (tok_is(&k, "snap")) {
            uint64_t idx, va, cr3, len;
            if (!commas(&v, f, 4) || !num(&f[0], FRAME_MAX_SNAPS - 1, &idx) ||
                !num(&f[1], UINT64_MAX, &va) ||
                !(tok_is(&f[2], "any") ? ((cr3 = FRAME_CR3_ANY), true)
                                       : num(&f[2], UINT64_MAX, &cr3)) ||
                !num(&f[3], FRAME_STREAM_MAX, &len) || snap_seen[idx]) {
                whyf(why, whylen, "BEGIN snap is not N,VA,CR3|any,LEN with a new N < 256");
                return -1;
            }
            snap_seen[idx] = true;
            m->snap[idx] = (struct frame_snap){.va = va, .cr3 = cr3, .len = len};
            ns++;
        }
        /* other keys: a later version of the protocol; ignored */
    }
    for (int i = 0; i < K_COUNT; i++)
        if (!seen[i]) {
            whyf(why, whylen, "BEGIN record without its %s field", meta_keys[i]);
            return -1;
        }
    if (nr != m->nranges || nc != m->ncr3 || ns != m->nsnap) {
        whyf(why, whylen, "BEGIN lists %u ranges, %u CR3s, %u snapshots; its counts say %u, %u, %u",
             nr, nc, ns, m->nranges, m->ncr3, m->nsnap);
        return -1;
    }
    for (unsigned i = 0; i < m->nsnap; i++)
        if (!snap_seen[i]) {
            whyf(why, whylen, "BEGIN snapshot %u missing (snapshot numbers above nsnap)", i);
            return -1;
        }
    return 0;
}

int frame_end_parse(const char *const *body, unsigned n, struct frame_endrec *r, char *why,
                    size_t whylen)
{
    struct kv_iter it = {.body = body, .n = n};
    struct tok k, v, f[2];
    bool frames = false;
    uint64_t x;

    memset(r, 0, sizeof(*r));
    while (kv_next(&it, &k, &v)) {
        unsigned s;
        if (k.n == 0 || v.s == k.s + k.n) {
            whyf(why, whylen, "END field '%.*s' is not key=value", (int)(k.n > 16 ? 16 : k.n), k.s);
            return -1;
        }
        if (tok_is(&k, "frames")) {
            if (frames || !num(&v, UINT64_MAX, &r->frames)) {
                whyf(why, whylen, "END frames field bad or given twice");
                return -1;
            }
            frames = true;
        } else if (stream_id(&k, &s)) {
            if (r->st[s].present || !commas(&v, f, 2) || !num(&f[0], FRAME_STREAM_MAX, &x) ||
                !(tok_is(&f[1], "-") || hexv(f[1].s, f[1].n, 8, &(uint64_t){0}))) {
                whyf(why, whylen, "END field %.*s is not LEN,CRC|- (or given twice)", (int)k.n,
                     k.s);
                return -1;
            }
            r->st[s].present = true;
            r->st[s].len = x;
            r->st[s].crc_known = !tok_is(&f[1], "-");
            if (r->st[s].crc_known) {
                uint64_t c;
                hexv(f[1].s, f[1].n, 8, &c);
                r->st[s].crc = (uint32_t)c;
            }
        }
    }
    if (!frames || !r->st[FRAME_STREAM_TRACE].present || !r->st[FRAME_STREAM_CRASH].present) {
        whyf(why, whylen, "END record without its frames, t or c field");
        return -1;
    }
    return 0;
}

int frame_note_parse(const char *const *body, unsigned n, struct frame_note *nt, char *why,
                     size_t whylen)
{
    struct kv_iter it = {.body = body, .n = n};
    struct tok k, v;
    bool kind = false, len = false, comm = false;
    uint64_t x;

    memset(nt, 0, sizeof(*nt));
    while (kv_next(&it, &k, &v)) {
        if (k.n == 0 || v.s == k.s + k.n) {
            whyf(why, whylen, "note field '%.*s' is not key=value", (int)(k.n > 16 ? 16 : k.n),
                 k.s);
            return -1;
        }
        if (tok_is(&k, "note")) {
            if (kind) {
                whyf(why, whylen, "note: the key note= twice");
                return -1;
            }
            kind = true;
            if (tok_is(&v, "kallsyms"))
                nt->kind = FRAME_NOTE_KALLSYMS;
            else if (tok_is(&v, "comm"))
                nt->kind = FRAME_NOTE_COMM;
            else {
                whyf(why, whylen, "note of an unknown kind '%.*s' (ignored)",
                     (int)(v.n > 16 ? 16 : v.n), v.s);
                return -1;
            }
        } else if (tok_is(&k, "t")) {
            if (len || !num(&v, FRAME_STREAM_MAX, &nt->len)) {
                whyf(why, whylen, "note: t= is not one length up to 1 TiB");
                return -1;
            }
            len = true;
        } else if (tok_is(&k, "dump")) {
            if (nt->has_dump || !hex32(v.s, v.n, &nt->dump)) {
                whyf(why, whylen, "note: dump= is not one dump id");
                return -1;
            }
            nt->has_dump = true;
        } else if (tok_is(&k, "pid")) {
            if (nt->has_pid || !num(&v, 0x7fffffff, &x)) {
                whyf(why, whylen, "note: pid= is not one process id");
                return -1;
            }
            nt->pid = x;
            nt->has_pid = true;
        } else if (tok_is(&k, "comm")) {
            /* hex of the name's bytes: printable ASCII without space, 1..15 of them */
            if (comm || v.n == 0 || v.n % 2 || v.n / 2 > FRAME_COMM_MAX) {
                whyf(why, whylen, "note: comm= is not 1 to %d bytes in hex", FRAME_COMM_MAX);
                return -1;
            }
            for (size_t i = 0; i < v.n; i += 2) {
                uint64_t hi, lo;
                if (!hexv(v.s + i, 1, 1, &hi) || !hexv(v.s + i + 1, 1, 1, &lo)) {
                    whyf(why, whylen, "note: comm= is not lowercase hex");
                    return -1;
                }
                x = hi << 4 | lo;
                if (x < 0x21 || x > 0x7e) {
                    whyf(why, whylen, "note: comm= holds byte 0x%02x (printable ASCII only)",
                         (unsigned)x);
                    return -1;
                }
                nt->comm[i / 2] = (char)x;
            }
            comm = true;
        }
    }
    if (!kind || !len) {
        whyf(why, whylen, "note record without its note= or t= field");
        return -1;
    }
    if (nt->kind == FRAME_NOTE_COMM && (!comm || !nt->has_dump || nt->len != 0)) {
        whyf(why, whylen, "comm note without comm= and dump=, or with data");
        return -1;
    }
    if (nt->kind == FRAME_NOTE_KALLSYMS && nt->len == 0) {
        whyf(why, whylen, "kallsyms note without data (t=0)");
        return -1;
    }
    return 0;
}

/* ---- the data of a kallsyms note ---- */

#define KSYM_NAME_MAX 512 /* the kernel's KSYM_NAME_LEN */

static int hexdig_any(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* one kallsyms name: printable ASCII without space, then optionally "\t[MODULE]" */
static bool name_ok(const char *p, size_t n, size_t *name_len)
{
    size_t k = 0;

    while (k < n && p[k] != '\t') {
        if ((unsigned char)p[k] < 0x21 || (unsigned char)p[k] > 0x7e)
            return false;
        k++;
    }
    if (k == 0 || k > KSYM_NAME_MAX)
        return false;
    *name_len = k;
    if (k == n)
        return true;
    /* "\t[mod]" */
    if (n - k < 4 || p[k + 1] != '[' || p[n - 1] != ']')
        return false;
    for (size_t i = k + 2; i < n - 1; i++)
        if ((unsigned char)p[i] < 0x21 || (unsigned char)p[i] > 0x7e || p[i] == '[' || p[i] == ']')
            return false;
    return true;
}

int frame_kallsyms_text(const char *in, size_t n, char **out, size_t *outlen, uint64_t *entry,
                        unsigned *nsym, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t cap = 0;
    FILE *f = open_memstream(&buf, &cap);
    uint64_t addr = 0;
    unsigned line = 0;
    size_t pos = 0;

    *out = NULL;
    *outlen = 0;
    *entry = 0;
    *nsym = 0;
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    while (pos < n) {
        const char *p = in + pos, *eol = memchr(p, '\n', n - pos);
        size_t len = eol ? (size_t)(eol - p) : n - pos, i = 1, digits = 0, nl;
        uint64_t d = 0;

        pos += len + (eol ? 1 : 0);
        line++;
        if (!eol) {
            snprintf(err, errlen, "kallsyms note, line %u: cut (no newline at its end)", line);
            goto bad;
        }
        if (len < 1 || p[0] != '+') {
            snprintf(err, errlen, "kallsyms note, line %u: not \"+DELTA TYPE NAME\"", line);
            goto bad;
        }
        while (i < len && hexdig_any((unsigned char)p[i]) >= 0 && digits < 17) {
            d = d << 4 | (uint64_t)hexdig_any((unsigned char)p[i++]);
            digits++;
        }
        if (!digits || digits > 16 || i + 3 > len || p[i] != ' ' || p[i + 2] != ' ' ||
            !((p[i + 1] >= 'a' && p[i + 1] <= 'z') || (p[i + 1] >= 'A' && p[i + 1] <= 'Z')) ||
            !name_ok(p + i + 3, len - i - 3, &nl)) {
            snprintf(err, errlen, "kallsyms note, line %u: not \"+DELTA TYPE NAME\"", line);
            goto bad;
        }
        if (addr + d < addr) {
            snprintf(err, errlen, "kallsyms note, line %u: the address runs past 2^64", line);
            goto bad;
        }
        addr += d;
        if (nl == 16 && !memcmp(p + i + 3, "entry_SYSCALL_64", 16) && p[i + 1] != 'w' &&
            p[i + 1] != 'W')
            *entry = addr;
        fprintf(f, "%016llx %.*s\n", (unsigned long long)addr, (int)(len - i - 1), p + i + 1);
        (*nsym)++;
    }
    if (fclose(f) != 0 || !buf) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!*nsym) {
        free(buf);
        snprintf(err, errlen, "kallsyms note without a symbol");
        return -1;
    }
    *out = buf;
    *outlen = cap;
    return 0;
bad:
    fclose(f);
    free(buf);
    return -1;
}

int frame_block_decode(const uint8_t *enc, uint32_t enclen, bool lz4, uint32_t rawlen, uint32_t crc,
                       uint8_t *out, char *why, size_t whylen)
{
    if (lz4) {
        int r = LZ4_decompress_safe((const char *)enc, (char *)out, (int)enclen, (int)rawlen);
        if (r < 0) {
            whyf(why, whylen, "LZ4 block does not decode");
            return -1;
        }
        if (r != (int)rawlen) {
            whyf(why, whylen, "LZ4 block decodes to %d bytes, not %u", r, rawlen);
            return -1;
        }
    } else {
        if (enclen != rawlen) {
            whyf(why, whylen, "stored block of %u bytes for %u raw bytes", enclen, rawlen);
            return -1;
        }
        memcpy(out, enc, rawlen);
    }
    uint32_t c = frame_dec_crc32(0, out, rawlen);
    if (c != crc) {
        whyf(why, whylen, "CRC32 of the block is %08x, the frames say %08x", c, crc);
        return -1;
    }
    return 0;
}
