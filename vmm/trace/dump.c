/* SPDX-License-Identifier: MIT */
/* A serial trace dump, one line at a time: see dump.h. */
#include "trace/dump.h"
#include "lib/ptv_string.h"

#define DUMP_MAX_SECTIONS                                                                          \
    1024 /* frame protocol: a CPU number fits 8 hex digits; this is plenty                         \
          */

static uint64_t stream_len(const struct dump_sect *s, unsigned si)
{
    if (si == 0)
        return s->b.trace_len;
    if (si == 1)
        return s->b.crash_len;
    return s->b.snaps[si - 2].len;
}

static unsigned stream_id(unsigned si)
{
    return si == 0 ? FRAME_STREAM_TRACE : si == 1 ? FRAME_STREAM_CRASH : FRAME_STREAM_SNAP(si - 2);
}

static void discard(void *ctx, const char *s, size_t n)
{
    (void)ctx, (void)s, (void)n;
}

static void count_line(void *ctx, const char *s, size_t n)
{
    struct dump_job *j = ctx;
    j->lines++;
    j->out.line(j->out.ctx, s, n);
}

int dump_start(struct dump_job *j, const struct dump_sect *s, unsigned n,
               const struct dump_ops *ops, const struct frame_out *out)
{
    memset(j, 0, offsetof(struct dump_job, buf));
    j->phase = DUMP_DONE;
    if (!s || !n || n > DUMP_MAX_SECTIONS || !ops || !ops->read || !out || !out->line) {
        j->err = "dump: no sections, too many, or no reader / line sink";
        return -1;
    }
    /* every section's metadata is checked before the first line goes out: a dump never
     * stops half-way because a later section was refused */
    const struct frame_out none = {discard, NULL};
    for (unsigned i = 0; i < n; i++) {
        if (s[i].b.ncpus != n) {
            j->err = "dump: a section's cpus= differs from the number of sections";
            return -1;
        }
        for (unsigned k = 0; k < i; k++)
            if (s[k].b.cpu == s[i].b.cpu) {
                j->err = "dump: two sections for one CPU";
                return -1;
            }
        if (frame_enc_begin(&j->enc, &s[i].b, &none) != 0) {
            j->err = j->enc.err;
            return -1;
        }
    }
    j->ops = *ops;
    j->out = *out;
    j->sect = s;
    j->nsect = n;
    j->phase = DUMP_BEGIN;
    return 0;
}

/* the next stream with bytes left, from (si, off); false when the section has no more */
static bool next_stream(struct dump_job *j, const struct dump_sect *s)
{
    while (j->si < 2 + s->b.nsnap) {
        if (j->off < stream_len(s, j->si))
            return true;
        j->si++;
        j->off = 0;
    }
    return false;
}

bool dump_step(struct dump_job *j)
{
    const struct frame_out mine = {count_line, j};
    for (;;) {
        if (j->phase == DUMP_DONE)
            return false;
        const struct dump_sect *s = &j->sect[j->cur];
        if (j->phase == DUMP_BEGIN) {
            if (frame_enc_begin(&j->enc, &s->b, &mine) != 0) { /* checked in dump_start */
                j->err = j->enc.err;
                j->phase = DUMP_DONE;
                return false;
            }
            j->phase = DUMP_DATA;
            j->si = 0;
            j->off = 0;
            j->blen = 0;
            return true;
        }
        if (j->phase == DUMP_END) {
            frame_enc_end(&j->enc);
            j->phase = ++j->cur < j->nsect ? DUMP_BEGIN : DUMP_DONE;
            return j->phase != DUMP_DONE;
        }
        if (!next_stream(j, s)) {
            j->phase = DUMP_END;
            continue;
        }
        uint64_t len = stream_len(s, j->si);
        if (!j->blen) { /* the first line of a block: read its bytes now */
            size_t want = len - j->off < FRAME_BLOCK ? (size_t)(len - j->off) : FRAME_BLOCK;
            uint64_t at = j->si == 0 ? s->t_start + j->off : j->off;
            size_t got = j->ops.read(j->ops.ctx, j->cur, stream_id(j->si), at, j->buf, want);
            if (got > want)
                got = 0; /* a reader that says more than it was asked is not believed */
            if (!got) {  /* gone (overwritten, unreadable): the host sees the range missing */
                j->lost += want;
                j->off += want;
                continue;
            }
            j->blen = got;
        }
        size_t done = frame_enc_data(&j->enc, stream_id(j->si), j->off, j->buf, j->blen);
        if (j->enc.err) {
            j->err = j->enc.err;
            j->phase = DUMP_DONE;
            return false;
        }
        if (done) {
            j->bytes += done;
            j->off += done;
            j->blen = 0;
        }
        return true;
    }
}

void dump_pacer_start(struct dump_pacer *p, unsigned who, uint64_t now)
{
    p->owner = who + 1;
    p->seen = now;
}

bool dump_pacer_turn(struct dump_pacer *p, unsigned who, uint64_t now)
{
    if (p->owner != who + 1)
        return false;
    p->seen = now;
    return true;
}

bool dump_pacer_adopt(struct dump_pacer *p, unsigned who, uint64_t now, uint64_t stale)
{
    if (!p->owner || p->owner == who + 1 || now <= p->seen || now - p->seen < stale)
        return false;
    dump_pacer_start(p, who, now);
    return true;
}

bool dump_is_psb(const uint8_t *p)
{
    for (unsigned i = 0; i < DUMP_PSB_LEN; i += 2)
        if (p[i] != 0x02 || p[i + 1] != 0x82)
            return false;
    return true;
}

uint64_t dump_trace_start(size_t (*read)(void *ctx, uint64_t off, uint8_t *buf, size_t len),
                          void *ctx, uint64_t oldest, uint64_t written, uint64_t window)
{
    uint64_t start = oldest;
    if (window && written - oldest > window)
        start = written - window;
    if (start == 0 || start >= written)
        return start; /* the whole trace from its first byte (it begins with a PSB) */
    uint8_t chunk[512];
    for (uint64_t at = start; at + DUMP_PSB_LEN <= written;) {
        size_t want = written - at < sizeof(chunk) ? (size_t)(written - at) : sizeof(chunk);
        size_t got = read(ctx, at, chunk, want);
        if (got < DUMP_PSB_LEN || got > want)
            return written;
        for (size_t i = 0; i + DUMP_PSB_LEN <= got; i++)
            if (dump_is_psb(chunk + i))
                return at + i;
        at += got - (DUMP_PSB_LEN - 1); /* a PSB across the chunk edge is found next time */
    }
    return written;
}
