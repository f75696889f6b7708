/* SPDX-License-Identifier: MIT */
/*
 * Serial trace dump encoder (interface in frame.h, wire format in docs/serial-protocol.md).
 *
 * Every line is built in e->line and handed whole to the output: the prefix, the record
 * type, hex fields separated by one space, then " " and the CRC32 of everything before that
 * space as 8 hex digits, then '\n'.  A BEGIN or END record that does not fit one line is cut
 * between key=value tokens into parts "i/n"; a DATA line carries part of one block: the
 * block's raw CRC32, its encoding (stored, or LZ4 with the encoded length), the position of
 * this line's bytes in the encoded block, and those bytes in base 85.
 */
#include "trace/frame.h"

#include "lib/ptv_string.h"

#define BODY_MAX  (FRAME_LINE_MAX - 1 - 9) /* before " XXXXXXXX\n" */
#define TOK_MAX   80                       /* the longest key=value token (snap=) is 58 */
#define PARTS_RES 7                        /* room kept for "iii/nnn" in a record line */

static const uint32_t crc_table[256] = {
    0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f, 0xe963a535, 0x9e6495a3,
    0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988, 0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91,
    0x1db71064, 0x6ab020f2, 0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
    0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9, 0xfa0f3d63, 0x8d080df5,
    0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172, 0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b,
    0x35b5a8fa, 0x42b2986c, 0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
    0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423, 0xcfba9599, 0xb8bda50f,
    0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924, 0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d,
    0x76dc4190, 0x01db7106, 0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
    0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d, 0x91646c97, 0xe6635c01,
    0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e, 0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457,
    0x65b0d9c6, 0x12b7e950, 0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
    0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7, 0xa4d1c46d, 0xd3d6f4fb,
    0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0, 0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9,
    0x5005713c, 0x270241aa, 0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
    0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81, 0xb7bd5c3b, 0xc0ba6cad,
    0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a, 0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683,
    0xe3630b12, 0x94643b84, 0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
    0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb, 0x196c3671, 0x6e6b06e7,
    0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc, 0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5,
    0xd6d6a3e8, 0xa1d1937e, 0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
    0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55, 0x316e8eef, 0x4669be79,
    0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236, 0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f,
    0xc5ba3bbe, 0xb2bd0b28, 0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
    0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f, 0x72076785, 0x05005713,
    0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38, 0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21,
    0x86d3d2d4, 0xf1d4e242, 0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
    0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69, 0x616bffd3, 0x166ccf45,
    0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2, 0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db,
    0xaed16a4a, 0xd9d65adc, 0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
    0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693, 0x54de5729, 0x23d967bf,
    0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94, 0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

uint32_t frame_crc32(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t c = ~crc;

    while (n--)
        c = crc_table[(c ^ *b++) & 0xff] ^ (c >> 8);
    return ~c;
}

/* ---- line building ---- */

static size_t put_hex(char *d, uint64_t v)
{
    char t[16];
    size_t n = 0;

    do {
        t[n++] = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while (v);
    for (size_t i = 0; i < n; i++)
        d[i] = t[n - 1 - i];
    return n;
}

static size_t put_str(char *d, const char *s)
{
    size_t n = strlen(s);

    memcpy(d, s, n);
    return n;
}

static size_t hex_len(uint64_t v)
{
    size_t n = 1;

    while (v >>= 4)
        n++;
    return n;
}

/* payload bytes that fit in `chars` characters */
static size_t b85_fit(size_t chars)
{
    return chars / 5 * 4 + (chars % 5 >= 2 ? chars % 5 - 1 : 0);
}

/* big-endian groups of 4 bytes, 5 digits each, most significant first; a final group of
 * r < 4 bytes is padded with zero bytes and written as its first r + 1 digits */
static size_t put_b85(char *d, const uint8_t *p, size_t k)
{
    static const char alpha[] = FRAME_B85_ALPHABET;
    size_t o = 0;

    for (size_t i = 0; i < k; i += 4) {
        size_t r = k - i < 4 ? k - i : 4;
        uint32_t v = 0;
        char g[5];
        for (size_t j = 0; j < 4; j++)
            v = v << 8 | (j < r ? p[i + j] : 0);
        for (int j = 4; j >= 0; j--) {
            g[j] = alpha[v % 85];
            v /= 85;
        }
        memcpy(d + o, g, r + 1);
        o += r + 1;
    }
    return o;
}

/* length of "@PTV1 T DUMP CPU" */
static size_t head_len(const struct frame_enc *e)
{
    return FRAME_PREFIX_LEN + 2 + hex_len(e->dump_id) + 1 + hex_len(e->cpu);
}

/* "@PTV1 T DUMP CPU" */
static size_t put_head(struct frame_enc *e, char type)
{
    char *d = e->line;
    size_t n = put_str(d, FRAME_PREFIX);

    d[n++] = type;
    d[n++] = ' ';
    n += put_hex(d + n, e->dump_id);
    d[n++] = ' ';
    n += put_hex(d + n, e->cpu);
    return n;
}

/* append " CRC\n" and hand the line out */
static void finish(struct frame_enc *e, size_t n)
{
    char *d = e->line;
    uint32_t crc;

    d[n++] = ' ';
    crc = frame_crc32(0, d, n);
    for (int i = 7; i >= 0; i--)
        d[n++] = "0123456789abcdef"[(crc >> (4 * i)) & 0xf];
    d[n++] = '\n';
    e->out.line(e->out.ctx, d, n);
    e->lines++;
    e->wire_bytes += n;
}

/* ---- BEGIN and END records: key=value tokens packed into lines "i/n" ---- */

typedef size_t (*tok_fn)(const struct frame_enc *e, const void *arg, unsigned i, char *t);

static size_t kv(char *t, const char *key, uint64_t v)
{
    size_t n = put_str(t, key);

    return n + put_hex(t + n, v);
}

static const char *const reason_name[FRAME_REASON_COUNT] = {"vmcall", "crash", "serial", "boot"};
static const char *const source_name[FRAME_SRC_COUNT] = {"hardware", "software"};

static size_t begin_tok(const struct frame_enc *e, const void *arg, unsigned i, char *t)
{
    const struct frame_begin *b = arg;
    size_t n = 0;

    switch (i) {
    case 0:
        return kv(t, "boot=", b->boot_id);
    case 1:
        return kv(t, "cpus=", b->ncpus);
    case 2:
        n = put_str(t, "reason=");
        return n + put_str(t + n, reason_name[b->reason]);
    case 3:
        n = put_str(t, "source=");
        return n + put_str(t + n, source_name[b->source]);
    case 4:
        return kv(t, "ring=", b->ring_size);
    case 5:
        return kv(t, "wrap=", b->wrapped);
    case 6:
        return kv(t, "ovf=", b->overflows);
    case 7:
        return kv(t, "tsc=", b->tsc_hz);
    case 8:
        return kv(t, "kbase=", b->kernel_base);
    case 9:
        n = put_str(t, "filter=");
        if (b->filter & FRAME_FILTER_USER)
            t[n++] = 'u';
        if (b->filter & FRAME_FILTER_KERNEL)
            t[n++] = 'k';
        if (b->filter & FRAME_FILTER_CR3)
            t[n++] = 'c';
        if (!(b->filter & FRAME_FILTER_MASK))
            t[n++] = '-';
        return n;
    case 10:
        return kv(t, "fcr3=", b->filter_cr3);
    case 11:
        return kv(t, "t=", b->trace_len);
    case 12:
        return kv(t, "c=", b->crash_len);
    case 13:
        return kv(t, "nrange=", b->nranges);
    case 14:
        return kv(t, "ncr3=", b->ncr3);
    case 15:
        return kv(t, "nsnap=", b->nsnap);
    }
    i -= 16;
    if (i < b->nranges) {
        n = kv(t, "range=", b->ranges[i].lo);
        t[n++] = '-';
        return n + put_hex(t + n, b->ranges[i].hi);
    }
    i -= b->nranges;
    if (i < b->ncr3)
        return kv(t, "cr3=", b->cr3s[i]);
    i -= b->ncr3;
    if (i < b->nsnap) {
        const struct frame_snap *s = &b->snaps[i];
        n = kv(t, "snap=", i);
        t[n++] = ',';
        n += put_hex(t + n, s->va);
        t[n++] = ',';
        n += s->cr3 == FRAME_CR3_ANY ? put_str(t + n, "any") : put_hex(t + n, s->cr3);
        t[n++] = ',';
        return n + put_hex(t + n, s->len);
    }
    i -= b->nsnap;
    if (i == 0 && b->syscall_entry) /* optional, last: version-1 readers ignore it */
        return kv(t, "lstar=", b->syscall_entry);
    return 0;
}

/* stream s of the END record: "t=LEN,CRC", "c=...", "sN=..."; CRC "-" when unknown */
static size_t end_tok(const struct frame_enc *e, const void *arg, unsigned i, char *t)
{
    size_t n = 0;

    if (i == 0)
        return kv(t, "frames=", e->seq);
    i--;
    if (i >= e->nstreams)
        return 0;
    if (i == FRAME_STREAM_TRACE)
        t[n++] = 't';
    else if (i == FRAME_STREAM_CRASH)
        t[n++] = 'c';
    else
        n = kv(t, "s", i - FRAME_STREAM_SNAP(0));
    t[n++] = '=';
    n += put_hex(t + n, e->st[i].len);
    t[n++] = ',';
    if (e->st[i].crc_pos == e->st[i].len)
        n += put_hex(t + n, e->st[i].crc);
    else
        t[n++] = '-';
    return n;
}

/* lines a record takes: a new line when the next token would pass BODY_MAX */
static unsigned record_lines(const struct frame_enc *e, tok_fn tok, const void *arg)
{
    size_t head = head_len(e);
    char t[TOK_MAX];
    unsigned n = 0;
    size_t len = 0, tl;

    for (unsigned i = 0; (tl = tok(e, arg, i, t)) != 0; i++) {
        if (n == 0 || len + 1 + tl > BODY_MAX) {
            n++;
            len = head + PARTS_RES;
        }
        len += 1 + tl;
    }
    return n;
}

static void emit_record(struct frame_enc *e, char type, tok_fn tok, const void *arg,
                        unsigned nparts)
{
    char t[TOK_MAX];
    unsigned i = 0, part = 0;
    size_t tl = tok(e, arg, 0, t);

    while (tl) {
        size_t n = put_head(e, type), len;
        e->line[n++] = ' ';
        n += put_hex(e->line + n, ++part);
        e->line[n++] = '/';
        n += put_hex(e->line + n, nparts);
        /* the same packing decision as record_lines(): reserved room, not the real one */
        len = head_len(e) + PARTS_RES;
        do {
            e->line[n++] = ' ';
            memcpy(e->line + n, t, tl);
            n += tl;
            len += 1 + tl;
            tl = tok(e, arg, ++i, t);
        } while (tl && len + 1 + tl <= BODY_MAX);
        finish(e, n);
    }
}

/* ---- the encoder ---- */

static const char *begin_check(const struct frame_begin *b, const struct frame_out *o)
{
    if (!b || !o || !o->line)
        return "frame_enc_begin without a begin record or an output";
    if (b->ncpus == 0)
        return "frame_enc_begin: ncpus is 0";
    if ((unsigned)b->reason >= FRAME_REASON_COUNT)
        return "frame_enc_begin: unknown reason";
    if ((unsigned)b->source >= FRAME_SRC_COUNT)
        return "frame_enc_begin: unknown trace source";
    if (b->filter & ~FRAME_FILTER_MASK)
        return "frame_enc_begin: unknown filter flags";
    if (b->nranges > FRAME_MAX_RANGES || (b->nranges && !b->ranges))
        return "frame_enc_begin: more than 4 IP ranges, or no range table";
    if (b->ncr3 > FRAME_MAX_CR3S || (b->ncr3 && !b->cr3s))
        return "frame_enc_begin: more than 256 CR3s, or no CR3 table";
    if (b->nsnap > FRAME_MAX_SNAPS || (b->nsnap && !b->snaps))
        return "frame_enc_begin: more than 256 snapshots, or no snapshot table";
    if (b->trace_len > FRAME_STREAM_MAX || b->crash_len > FRAME_STREAM_MAX)
        return "frame_enc_begin: stream longer than 1 TiB";
    for (unsigned i = 0; i < b->nranges; i++)
        if (b->ranges[i].lo > b->ranges[i].hi)
            return "frame_enc_begin: IP range with lo > hi";
    for (unsigned i = 0; i < b->nsnap; i++)
        if (b->snaps[i].len > FRAME_STREAM_MAX)
            return "frame_enc_begin: snapshot longer than 1 TiB";
    return NULL;
}

int frame_enc_begin(struct frame_enc *e, const struct frame_begin *b, const struct frame_out *o)
{
    const char *why = begin_check(b, o);

    if (why) {
        e->err = why;
        return -1;
    }
    e->out = *o;
    e->err = NULL;
    e->boot_id = b->boot_id;
    e->dump_id = b->dump_id;
    e->cpu = b->cpu;
    e->nstreams = FRAME_STREAM_SNAP(b->nsnap);
    e->seq = 0;
    e->busy = false;
    e->lines = e->wire_bytes = e->raw_bytes = 0;
    for (unsigned i = 0; i < e->nstreams; i++) {
        e->st[i].crc_pos = 0;
        e->st[i].crc = 0;
    }
    e->st[FRAME_STREAM_TRACE].len = b->trace_len;
    e->st[FRAME_STREAM_CRASH].len = b->crash_len;
    for (unsigned i = 0; i < b->nsnap; i++)
        e->st[FRAME_STREAM_SNAP(i)].len = b->snaps[i].len;
    emit_record(e, 'B', begin_tok, b, record_lines(e, begin_tok, b));
    return 0;
}

/* take the next block of the stream into e->blk: LZ4 when it is smaller, else stored */
static int take_block(struct frame_enc *e, unsigned stream, uint64_t off, const uint8_t *p,
                      size_t n)
{
    struct frame_stream *s;
    size_t k, c;

    if (stream >= e->nstreams) {
        e->err = "frame_enc_data: no such stream in this dump";
        return -1;
    }
    s = &e->st[stream];
    if (!p || off >= s->len || n > s->len - off) {
        e->err = "frame_enc_data: bytes outside the stream";
        return -1;
    }
    k = n < FRAME_BLOCK ? n : FRAME_BLOCK;
    if (off == s->crc_pos) { /* the block's CRC and the stream's in one pass */
        uint32_t a = ~0u, b = ~s->crc;
        for (size_t i = 0; i < k; i++) {
            a = crc_table[(a ^ p[i]) & 0xff] ^ (a >> 8);
            b = crc_table[(b ^ p[i]) & 0xff] ^ (b >> 8);
        }
        e->b_crc = ~a;
        s->crc = ~b;
        s->crc_pos += k;
    } else {
        e->b_crc = frame_crc32(0, p, k);
    }
    c = lz4w_compress(p, k, e->blk, k - 1, &e->hash);
    e->b_lz4 = c != 0;
    if (!c) {
        memcpy(e->blk, p, k);
        c = k;
    }
    e->busy = true;
    e->b_stream = stream;
    e->b_off = off;
    e->b_raw = (uint32_t)k;
    e->b_enc = (uint32_t)c;
    e->b_pos = 0;
    e->raw_bytes += k;
    return 0;
}

size_t frame_enc_data(struct frame_enc *e, unsigned stream, uint64_t off, const uint8_t *p,
                      size_t n)
{
    char *d = e->line;
    size_t len, k;

    if (e->err)
        return 0;
    if (!e->busy || e->b_stream != stream || e->b_off != off) {
        if (n == 0)
            return 0;
        if (take_block(e, stream, off, p, n) != 0)
            return 0;
    }
    len = put_head(e, 'D');
    d[len++] = ' ';
    len += put_hex(d + len, e->seq++);
    d[len++] = ' ';
    if (stream == FRAME_STREAM_TRACE)
        d[len++] = 't';
    else if (stream == FRAME_STREAM_CRASH)
        d[len++] = 'c';
    else
        len += kv(d + len, "s", stream - FRAME_STREAM_SNAP(0));
    d[len++] = ' ';
    len += put_hex(d + len, off);
    d[len++] = ' ';
    len += put_hex(d + len, e->b_raw);
    d[len++] = ' ';
    len += put_hex(d + len, e->b_crc);
    d[len++] = ' ';
    if (e->b_lz4)
        len += kv(d + len, "L", e->b_enc);
    else
        d[len++] = 'S';
    d[len++] = ' ';
    len += put_hex(d + len, e->b_pos);
    d[len++] = ' ';
    k = b85_fit(BODY_MAX - len);
    if (k > e->b_enc - e->b_pos)
        k = e->b_enc - e->b_pos;
    len += put_b85(d + len, e->blk + e->b_pos, k);
    finish(e, len);
    e->b_pos += (uint32_t)k;
    if (e->b_pos < e->b_enc)
        return 0;
    e->busy = false;
    return e->b_raw;
}

void frame_enc_end(struct frame_enc *e)
{
    if (e->err)
        return;
    e->busy = false;
    emit_record(e, 'E', end_tok, NULL, record_lines(e, end_tok, NULL));
}
