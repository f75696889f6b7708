/* SPDX-License-Identifier: MIT */
/*
 * The serial dump protocol end to end (docs/serial-protocol.md): the VMM's encoder
 * (vmm/trace/frame.c, lz4w.c) writes frame lines, the host tool's reader
 * (tools/ptvisor-trace/frame_dec.c, extract.c) puts them back together, and every byte that
 * comes out must be the byte that went in -- for random data, realistic PT from the software
 * tracer's packet generator (vmm/trace/swpt.c driven by a synthetic program, and by a real
 * program single-stepped with ptrace), every stream kind and the block-size edges; through
 * console output, "\r\n", glued lines, truncation, corrupted bytes in payload / header / CRC,
 * duplicated and reordered frames, resumed dumps, several dumps and CPUs.  The LZ4 compressor
 * is checked against Debian's liblz4 decompressor.  Figures: serial wire bytes per trace byte
 * and the encoder's cost per byte.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <lz4.h>

#include "trace/frame.h"
#include "trace/lz4w.h"
#include "trace/swpt.h"
#include "trace/x86_class.h"
#include "frame_dec.h"
#include "ptt.h"

#define MIB (1u << 20)

/* ---- data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint8_t *random_bytes(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
    return p;
}

/*
 * Realistic PT without a CPU: a synthetic program (functions with loops of fixed trip
 * counts, biased data-dependent branches, direct and indirect calls, returns, system calls
 * into a kernel) run through the VMM's packet generator with the software tracer's settings
 * (BranchEn, DisRETC, PSB every 4 KiB, TSC), user and kernel traced.
 */
#define NFUNC 48
struct site {
    uint8_t kind; /* 0 loop, 1 if, 2 call, 3 indirect call, 4 syscall */
    uint8_t trips, bias, callee;
};
struct synth {
    struct swpt t;
    struct swpt_ring ring;
    struct site site[NFUNC][6];
    uint64_t tsc;
    unsigned depth;
};

static uint64_t fbase(unsigned f)
{
    return (f < NFUNC / 2 ? 0x401000ull : 0xffffffff81000000ull) + 0x400ull * f;
}

static void step(struct synth *s, uint64_t ip, uint8_t branch, uint64_t next, uint8_t cpl)
{
    struct x86_insn in = {.len = 2, .branch = branch};
    struct swpt_ctx c = {.cr3 = 0x1000, .cpl = cpl, .cs = X86_CODE64};

    s->tsc += 37;
    swpt_insn(&s->t, ip, &in, next, &c, s->tsc);
}

static void run_func(struct synth *s, unsigned f, uint64_t ret)
{
    uint8_t cpl = f < NFUNC / 2 ? 3 : 0;
    uint64_t b = fbase(f);

    s->depth++;
    for (unsigned i = 0; i < 6 && !s->ring.stopped; i++) {
        const struct site *st = &s->site[f][i];
        uint64_t ip = b + 0x40 * i;
        switch (st->kind) {
        case 0:
            for (unsigned k = 0; k < st->trips; k++)
                step(s, ip + 0x20, X86_BR_JCC, k + 1 < st->trips ? ip : ip + 0x22, cpl);
            break;
        case 1:
            step(s, ip, X86_BR_JCC, (rnd() & 255) < st->bias ? ip + 0x30 : ip + 2, cpl);
            break;
        case 2:
        case 3:
            if (s->depth > 5)
                break;
            step(s, ip, st->kind == 2 ? X86_BR_CALL_DIRECT : X86_BR_CALL_INDIRECT,
                 fbase(st->callee), cpl);
            run_func(s, st->callee, ip + 2);
            break;
        case 4:
            if (cpl != 3 || s->depth > 5)
                break;
            step(s, ip, X86_BR_SYSCALL, fbase(NFUNC / 2 + st->callee % (NFUNC / 2)), 0);
            run_func(s, NFUNC / 2 + st->callee % (NFUNC / 2), 0);
            step(s, fbase(NFUNC / 2) + 0x3f0, X86_BR_SYSRET, ip + 2, 3);
            break;
        }
    }
    s->depth--;
    if (ret && !s->ring.stopped) /* RET to the caller's next instruction */
        step(s, b + 0x3f0, X86_BR_RET, ret, cpl);
}

static uint8_t *synth_pt(size_t n, uint32_t seed)
{
    static struct synth s;
    const struct swpt_cfg cfg = {
        .filter = {.user = true, .kernel = true}, .psb_period = 4096, .tsc = true};
    struct swpt_ctx c = {.cr3 = 0x1000, .cpl = 3, .cs = X86_CODE64};
    uint8_t *buf = malloc(n + 64);

    assert_non_null(buf);
    memset(&s, 0, sizeof(s));
    rng_state = seed * 0x2545f4914f6cdd1dull + 1;
    for (unsigned f = 0; f < NFUNC; f++)
        for (unsigned i = 0; i < 6; i++)
            s.site[f][i] = (struct site){.kind = (uint8_t)(rnd() % 5),
                                         .trips = (uint8_t)(2 + rnd() % 30),
                                         .bias = (uint8_t)(rnd() % 4 ? 230 : 128),
                                         .callee = (uint8_t)(f + 1 + rnd() % 8) % NFUNC};
    s.ring = (struct swpt_ring){.buf = buf, .size = n + 64, .stop_on_full = true};
    swpt_start(&s.t, &cfg, &s.ring, &c, fbase(0), 0);
    while (!s.ring.stopped && s.ring.head < n) {
        s.depth = 0;
        run_func(&s, (unsigned)(rnd() % (NFUNC / 2)), 0);
    }
    assert_true(s.ring.head >= n);
    return buf;
}

/* ---- lines out of the encoder ---- */

struct lines {
    char **l;
    size_t n, cap;
    uint64_t wire; /* bytes on the wire, '\n' included */
};

static void lines_add(struct lines *L, const char *s, size_t n)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        L->l = realloc(L->l, L->cap * sizeof(*L->l));
        assert_non_null(L->l);
    }
    L->l[L->n] = strndup(s, n);
    assert_non_null(L->l[L->n]);
    L->n++;
}

static void lines_free(struct lines *L)
{
    for (size_t i = 0; i < L->n; i++)
        free(L->l[i]);
    free(L->l);
    memset(L, 0, sizeof(*L));
}

/* every line the encoder writes: whole, '\n'-terminated, at most FRAME_LINE_MAX bytes,
 * printable ASCII, "@" only at its start */
static void out_line(void *ctx, const char *s, size_t n)
{
    struct lines *L = ctx;

    assert_true(n >= FRAME_PREFIX_LEN + 2 && n <= FRAME_LINE_MAX);
    assert_int_equal(s[n - 1], '\n');
    assert_memory_equal(s, FRAME_PREFIX, FRAME_PREFIX_LEN);
    for (size_t i = 0; i < n - 1; i++) {
        assert_true(s[i] >= 0x20 && s[i] <= 0x7e);
        assert_true(i == 0 || s[i] != '@');
    }
    L->wire += n;
    lines_add(L, s, n - 1);
}

static void out_count(void *ctx, const char *s, size_t n)
{
    *(uint64_t *)ctx += n;
}

/* ---- dumps ---- */

struct spec {
    uint32_t boot, dump, cpu, ncpus;
    enum frame_reason reason;
    const uint8_t *trace, *crash;
    size_t tlen, clen;
    unsigned nsnap;
    const uint8_t *snap[4];
    struct frame_snap si[4];
    const uint64_t *cr3s;
    unsigned ncr3;
};

static struct frame_enc enc;

static void spec_begin(struct frame_begin *b, const struct spec *s)
{
    static const struct frame_range r[2] = {{0x400000, 0x4fffff}, {0xffffffff81000000ull, ~0ull}};

    *b = (struct frame_begin){.boot_id = s->boot,
                              .dump_id = s->dump,
                              .cpu = s->cpu,
                              .ncpus = s->ncpus ? s->ncpus : 1,
                              .reason = s->reason,
                              .source = FRAME_SRC_SOFTWARE,
                              .filter = FRAME_FILTER_USER | FRAME_FILTER_KERNEL,
                              .ranges = r,
                              .nranges = 2,
                              .ring_size = 1 << 20,
                              .wrapped = true,
                              .overflows = 3,
                              .tsc_hz = 2400000000ull,
                              .kernel_base = 0xffffffff81000000ull,
                              .cr3s = s->cr3s,
                              .ncr3 = s->ncr3,
                              .snaps = s->si,
                              .nsnap = s->nsnap,
                              .trace_len = s->tlen,
                              .crash_len = s->clen};
}

/* one stream from `from` on, paced one line per call as the VMM does */
static void send_stream(unsigned stream, const uint8_t *p, size_t len, size_t from)
{
    size_t off = from;
    unsigned guard = 0;

    while (off < len) {
        off += frame_enc_data(&enc, stream, off, p + off, len - off);
        assert_null(enc.err);
        assert_true(++guard < 1000000);
    }
    assert_false(frame_enc_busy(&enc));
}

/* BEGIN, every stream from `from` (resume) on, END when `end` */
static void encode(struct lines *L, const struct spec *s, size_t from, bool end)
{
    struct frame_begin b;
    struct frame_out o = {out_line, L};

    spec_begin(&b, s);
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    send_stream(FRAME_STREAM_TRACE, s->trace, s->tlen, from < s->tlen ? from : s->tlen);
    send_stream(FRAME_STREAM_CRASH, s->crash, s->clen, 0);
    for (unsigned i = 0; i < s->nsnap; i++)
        send_stream(FRAME_STREAM_SNAP(i), s->snap[i], s->si[i].len, 0);
    if (end)
        frame_enc_end(&enc);
}

/* ---- the reader, in memory ---- */

static struct fx *read_lines(const struct lines *L)
{
    struct fx *x = fx_new();

    for (size_t i = 0; i < L->n; i++)
        fx_line(x, L->l[i], strlen(L->l[i]), i + 1, NULL);
    fx_finish(x);
    return x;
}

/* what came out is what went in: every present byte, and complete when `whole` */
static uint64_t check_stream(const struct fx *x, unsigned d, uint32_t cpu, unsigned stream,
                             const uint8_t *p, size_t len, bool whole)
{
    struct fx_stream_view v;

    assert_true(fx_stream(x, d, cpu, stream, &v));
    assert_int_equal(v.len, len);
    for (size_t i = 0; i < v.nseg; i++) {
        assert_true(v.seg[i].off + v.seg[i].len <= len);
        assert_memory_equal(v.seg[i].p, p + v.seg[i].off, v.seg[i].len);
    }
    assert_int_equal(v.have + v.missing, len);
    if (whole) {
        assert_int_equal(v.missing, 0);
        assert_int_not_equal(v.crc, 0);
    }
    return v.missing;
}

static void check_spec(const struct fx *x, unsigned d, const struct spec *s, bool whole)
{
    check_stream(x, d, s->cpu, FRAME_STREAM_TRACE, s->trace, s->tlen, whole);
    check_stream(x, d, s->cpu, FRAME_STREAM_CRASH, s->crash, s->clen, whole);
    for (unsigned i = 0; i < s->nsnap; i++)
        check_stream(x, d, s->cpu, FRAME_STREAM_SNAP(i), s->snap[i], s->si[i].len, whole);
}

/* the report of dump d as text */
static char *report(const struct fx *x, unsigned d)
{
    char *t = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&t, &n);

    assert_non_null(f);
    fx_report(x, d, f, false);
    fclose(f);
    return t;
}

static void assert_has(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("report lacks \"%s\":\n%s", what, text);
}

/* a standard dump: trace, crash text, two snapshots */
static uint8_t *T, *C, *S0, *S1;
static struct spec std_spec(size_t tlen)
{
    static const uint64_t cr3s[] = {0x1000, 0x2000, 0x3000};
    struct spec s = {.boot = 0xb007,
                     .dump = 1,
                     .reason = FRAME_REASON_VMCALL,
                     .trace = T,
                     .tlen = tlen,
                     .crash = C,
                     .clen = 700,
                     .nsnap = 2,
                     .cr3s = cr3s,
                     .ncr3 = 3};

    s.snap[0] = S0;
    s.snap[1] = S1;
    s.si[0] = (struct frame_snap){0xffffffff81000000ull, FRAME_CR3_ANY, 4096};
    s.si[1] = (struct frame_snap){0x401000, 0x1000, 5000};
    return s;
}

static int setup(void **state)
{
    (void)state;
    T = synth_pt(2 * MIB, 1);
    C = malloc(700);
    assert_non_null(C);
    for (int i = 0; i < 700; i++)
        C[i] = (uint8_t)("RIP=ffffffff81001234 RSP=ffffc90000003f00 exit ring: CPUID x3\n"[i % 62]);
    S0 = random_bytes(4096);
    S1 = synth_pt(5000, 2); /* compressible, like code */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(T);
    free(C);
    free(S0);
    free(S1);
    return 0;
}

/* ---- CRC32, base 85 ---- */

static void test_crc32(void **state)
{
    uint8_t *p = random_bytes(10000);

    (void)state;
    /* the check value of CRC-32/ISO-HDLC */
    assert_int_equal(frame_crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(frame_dec_crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(frame_crc32(0, "", 0), 0);
    /* the VMM's table and the tool's derived one agree, chained or not */
    for (size_t n = 0; n < 10000; n = n * 3 + 1) {
        uint32_t a = frame_crc32(0, p, n), b = frame_dec_crc32(0, p, n);
        assert_int_equal(a, b);
        assert_int_equal(frame_crc32(frame_crc32(0, p, n / 2), p + n / 2, n - n / 2), a);
    }
    free(p);
}

static void test_b85(void **state)
{
    uint8_t out[16];

    (void)state;
    /* the alphabet: 85 distinct printable characters, none of @ space " ' ` \ < > & $ */
    assert_int_equal(strlen(FRAME_B85_ALPHABET), 85);
    for (int i = 0; i < 85; i++) {
        char c = FRAME_B85_ALPHABET[i];
        assert_true(c > 0x20 && c < 0x7f);
        assert_null(strchr("@\"'`\\<>&$", c));
        assert_null(strchr(&FRAME_B85_ALPHABET[i + 1], c));
    }
    /* vectors (Python: base64.b85encode, then translated to this alphabet) */
    assert_int_equal(frame_b85_decode("00000", 5, out), 4);
    assert_memory_equal(out, "\0\0\0\0", 4);
    assert_int_equal(frame_b85_decode("|NsC0", 5, out), 4);
    assert_memory_equal(out, "\xff\xff\xff\xff", 4);
    assert_int_equal(frame_b85_decode("bY,jN", 5, out), 4);
    assert_memory_equal(out, "test", 4);
    /* partial groups: r bytes in r + 1 characters */
    assert_int_equal(frame_b85_decode("|NsC0{{", 7, out), 5);
    assert_int_equal(out[4], 0xff);
    assert_int_equal(frame_b85_decode("P,hd", 4, out), 3);
    assert_memory_equal(out, "PTV", 3);
    assert_int_equal(frame_b85_decode("|NsC0|N", 7, out), -1); /* pads above 2^32 - 1 */
    /* refused: a 1-character group, a character outside, a group above 2^32 - 1 */
    assert_int_equal(frame_b85_decode("000000", 6, out), -1);
    assert_int_equal(frame_b85_decode("0000@", 5, out), -1);
    assert_int_equal(frame_b85_decode("0000 ", 5, out), -1);
    assert_int_equal(frame_b85_decode("|NsC1", 5, out), -1);
    assert_int_equal(frame_b85_decode("~~~~~", 5, out), -1);
}

/* ---- LZ4: the VMM's compressor, Debian's liblz4 decompressor ---- */

static struct lz4w_hash lzh;

/* compress with cap, check bounds (guard bytes) and liblz4's decode; the compressed size */
static size_t lz4_check(const uint8_t *p, size_t n, size_t cap)
{
    size_t room = cap + 64;
    uint8_t *dst = malloc(room), *back = malloc(n + 1);
    size_t c;

    assert_non_null(dst);
    assert_non_null(back);
    memset(dst, 0xa5, room);
    c = lz4w_compress(p, n, dst, cap, &lzh);
    for (size_t i = cap; i < room; i++)
        assert_int_equal(dst[i], 0xa5); /* never past cap */
    assert_true(c <= cap);
    if (c) {
        int r = LZ4_decompress_safe((const char *)dst, (char *)back, (int)c, (int)n);
        if (r != (int)n)
            fail_msg("liblz4 decodes %d bytes of %zu (block %zu bytes)", r, n, c);
        assert_memory_equal(back, p, n);
    }
    free(dst);
    free(back);
    return c;
}

/* a mix of runs, copies from back, random and text, lengths past the 15 + 255 edges */
static uint8_t *mixed(size_t n)
{
    uint8_t *p = random_bytes(n);

    for (size_t i = 0; i < n;) {
        size_t k = 1 + rnd() % (rnd() & 1 ? 600 : 40);
        if (k > n - i)
            k = n - i;
        switch (rnd() % 4) {
        case 0:
            memset(p + i, (int)(rnd() & 1 ? 0 : rnd()), k);
            break;
        case 1:
            if (i) {
                size_t d = 1 + rnd() % (i < 70000 ? i : 70000);
                for (size_t j = 0; j < k; j++)
                    p[i + j] = p[i + j - d];
            }
            break;
        case 2:
            break; /* random */
        case 3:
            for (size_t j = 0; j < k; j++)
                p[i + j] = (uint8_t) "the quick brown fox "[j % 20];
            break;
        }
        i += k;
    }
    return p;
}

static void test_lz4w(void **state)
{
    uint8_t *zero = calloc(1, LZ4W_MAX_INPUT + 1), *rnd64 = random_bytes(LZ4W_MAX_INPUT);
    size_t c, ref;

    (void)state;
    assert_non_null(zero);
    /* degenerate inputs */
    assert_int_equal(lz4w_compress(zero, 0, rnd64, 100, &lzh), 0);
    assert_int_equal(lz4w_compress(zero, LZ4W_MAX_INPUT + 1, rnd64, 100000, &lzh), 0);
    for (size_t n = 1; n < 40; n++) {
        assert_true(lz4_check(zero, n, (size_t)LZ4_compressBound((int)n)) > 0);
        c = lz4_check(zero, n, n - 1);
        assert_true(n >= 13 ? c > 0 && c < n : c == 0); /* 13: the first block with a match */
    }
    c = lz4_check(zero, LZ4W_MAX_INPUT, LZ4W_MAX_INPUT - 1);
    assert_true(c > 0 && c < 300);
    /* incompressible: 0 for "does not pay", a literal block when given room */
    assert_int_equal(lz4_check(rnd64, LZ4W_MAX_INPUT, LZ4W_MAX_INPUT - 1), 0);
    assert_int_equal(lz4_check(rnd64, 4096, 4095), 0);
    assert_true(lz4_check(rnd64, LZ4W_MAX_INPUT, (size_t)LZ4_compressBound(LZ4W_MAX_INPUT)) >
                LZ4W_MAX_INPUT);
    assert_int_equal(lz4_check(rnd64, 1, 2), 2); /* token + the literal */
    /* every small output bound: fits or 0, never a byte past it */
    for (size_t cap = 0; cap < 300; cap++)
        lz4_check(T, 1000, cap);
    /* realistic PT, 64 KiB and 4 KiB blocks, against liblz4's own compressor */
    size_t mine = 0, theirs = 0;
    uint8_t *dst = malloc(LZ4_compressBound(LZ4W_MAX_INPUT));
    assert_non_null(dst);
    for (size_t off = 0; off + FRAME_BLOCK <= MIB; off += FRAME_BLOCK) {
        mine += lz4_check(T + off, FRAME_BLOCK, FRAME_BLOCK - 1);
        theirs += (size_t)LZ4_compress_default((const char *)T + off, (char *)dst, FRAME_BLOCK,
                                               LZ4_compressBound(FRAME_BLOCK));
    }
    c = lz4_check(T, LZ4W_MAX_INPUT, LZ4W_MAX_INPUT - 1);
    ref = (size_t)LZ4_compress_default((const char *)T, (char *)dst, LZ4W_MAX_INPUT,
                                       LZ4_compressBound(LZ4W_MAX_INPUT));
    print_message("lz4w on synthetic PT: 4 KiB blocks %.2fx (liblz4 default %.2fx), 64 KiB %.2fx "
                  "(liblz4 %.2fx)\n",
                  (double)MIB / (double)mine, (double)MIB / (double)theirs,
                  (double)LZ4W_MAX_INPUT / (double)c, (double)LZ4W_MAX_INPUT / (double)ref);
    assert_true(mine < theirs * 115 / 100); /* greedy, but not far from liblz4 */
    /* mixed content, random lengths, the hash table reused between blocks */
    for (int i = 0; i < 300; i++) {
        size_t n = 1 + rnd() % (i < 250 ? 5000 : LZ4W_MAX_INPUT);
        uint8_t *p = mixed(n);
        lz4_check(p, n, (size_t)LZ4_compressBound((int)n));
        lz4_check(p, n, n - 1);
        lz4_check(p, n, n / 3);
        free(p);
    }
    free(dst);
    free(zero);
    free(rnd64);
}

/* ---- round trips ---- */

static void roundtrip(const struct spec *s)
{
    struct lines L = {0};
    struct fx *x;

    encode(&L, s, 0, true);
    x = read_lines(&L);
    assert_int_equal(fx_ndumps(x), 1);
    if (fx_status(x, 0) != 0)
        fail_msg("status %d:\n%s", fx_status(x, 0), report(x, 0));
    check_spec(x, 0, s, true);
    fx_free(x);
    lines_free(&L);
}

static void test_sizes(void **state)
{
    static const size_t sizes[] = {
        0, 1, 2, 13, FRAME_BLOCK - 1, FRAME_BLOCK, FRAME_BLOCK + 1, 3 * FRAME_BLOCK + 17, MIB};
    uint8_t *r = random_bytes(MIB);

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct spec s = std_spec(sizes[i]);
        roundtrip(&s); /* realistic PT */
        s.trace = r;
        roundtrip(&s); /* incompressible: stored blocks */
        s.nsnap = 0;
        s.clen = 0;
        roundtrip(&s); /* the trace alone */
        s.trace = T + 1;
        s.clen = sizes[i] < 700 ? sizes[i] : 700;
        roundtrip(&s); /* crash text of every small size */
    }
    free(r);
}

/* the wire format itself: a stored block of "test" reads as the doc's example */
static void test_wire_example(void **state)
{
    struct lines L = {0};
    struct frame_line f;
    struct spec s = {
        .boot = 0x5eed, .dump = 2, .cpu = 1, .trace = (const uint8_t *)"test", .tlen = 4};

    (void)state;
    encode(&L, &s, 0, true);
    /* line CRCs and the CRC32 of "test" as Python's zlib.crc32 computes them */
    assert_int_equal(L.n, 4);
    assert_string_equal(L.l[0], "@PTV1 B 2 1 1/2 boot=5eed cpus=1 reason=vmcall source=software "
                                "ring=100000 wrap=1 ovf=3 tsc=8f0d1800 kbase=ffffffff81000000 "
                                "filter=uk fcr3=0 t=4 c=0 nrange=2 ncr3=0 nsnap=0 1ece9c57");
    assert_string_equal(L.l[1], "@PTV1 B 2 1 2/2 range=400000-4fffff "
                                "range=ffffffff81000000-ffffffffffffffff 93016820");
    assert_string_equal(L.l[2], "@PTV1 D 2 1 0 t 0 4 d87f7e0c S 0 bY,jN 10de7281");
    assert_string_equal(L.l[3], "@PTV1 E 2 1 1/1 frames=1 t=4,d87f7e0c c=0,0 60cc98b8");
    assert_int_equal(frame_parse(L.l[2], strlen(L.l[2]), &f), FRAME_DATA);
    assert_int_equal(f.dump, 2);
    assert_int_equal(f.cpu, 1);
    assert_int_equal(f.stream, FRAME_STREAM_TRACE);
    assert_int_equal(f.rawlen, 4);
    assert_int_equal(f.plen, 4);
    assert_memory_equal(f.payload, "test", 4);
    lines_free(&L);
}

/* ---- what a serial capture does to the lines ---- */

static const char *const guest_lines[] = {
    "[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)",
    "Welcome to Debian GNU/Linux 12 (bookworm)!",
    "",
    "login: root",
    "[   12.345678] @PTV is mentioned by a guest here, mid-line",
    "\x1b[1;32mOK\x1b[0m  Started systemd-journald.service",
    "# cat /proc/cpuinfo | grep flags",
};

/* console lines between frames, some glued in front of a frame line, "\r\n" endings */
static void messy(struct lines *dst, const struct lines *src, bool crlf)
{
    for (size_t i = 0; i < src->n; i++) {
        char buf[512];
        const char *g = guest_lines[rnd() % 7];
        unsigned r = (unsigned)(rnd() % 8);
        if (r == 0)
            lines_add(dst, g, strlen(g));
        if (r == 1) { /* a guest line without its '\n', then the frame */
            snprintf(buf, sizeof(buf), "%s%s%s", g, src->l[i], crlf ? "\r" : "");
            lines_add(dst, buf, strlen(buf));
            continue;
        }
        snprintf(buf, sizeof(buf), "%s%s", src->l[i], crlf ? "\r" : "");
        lines_add(dst, buf, strlen(buf));
    }
}

static void test_console_mix(void **state)
{
    struct spec s = std_spec(200000);
    struct lines L = {0}, M = {0};
    struct fx *x;

    (void)state;
    encode(&L, &s, 0, true);
    for (int crlf = 0; crlf < 2; crlf++) {
        messy(&M, &L, crlf);
        x = read_lines(&M);
        assert_int_equal(fx_ndumps(x), 1);
        if (fx_status(x, 0) != 0)
            fail_msg("%s", report(x, 0));
        check_spec(x, 0, &s, true);
        /* the guest line with "@PTV" in it is reported, and nothing else is wrong */
        char *t = report(x, 0);
        assert_has(t, "complete");
        free(t);
        fx_free(x);
        lines_free(&M);
    }
    lines_free(&L);
}

/* the log ends early: partial data kept and exact, no END reported, status 2 */
static void test_truncated(void **state)
{
    struct spec s = std_spec(100000);
    struct lines L = {0};

    (void)state;
    encode(&L, &s, 0, true);
    for (size_t cut = 1; cut < L.n; cut += 1 + cut / 3) {
        struct lines P = L;
        P.n = cut;
        struct fx *x = read_lines(&P);
        char *t = report(x, 0);
        assert_int_equal(fx_ndumps(x), 1);
        struct fx_stream_view v;
        assert_has(t, "no END record");
        assert_true(fx_stream(x, 0, 0, FRAME_STREAM_TRACE, &v));
        /* usable (2) exactly when some bytes came whole, with a BEGIN record (2 lines) */
        assert_int_equal(fx_status(x, 0), cut > 2 && v.have ? 2 : 1);
        if (cut > 2)
            check_spec(x, 0, &s, false);
        if (cut > 2 && v.missing)
            assert_has(t, "missing");
        free(t);
        fx_free(x);
    }
    lines_free(&L);
}

/* one byte of one line changed, at every place of the line in turn: the line is refused with
 * its line number, its block's range is missing, and every byte that comes out is right */
static void test_corrupted(void **state)
{
    struct spec s = std_spec(60000);
    struct lines L = {0};
    unsigned hits = 0;

    (void)state;
    encode(&L, &s, 0, true);
    for (size_t i = 0; i < L.n; i++) {
        size_t len = strlen(L.l[i]);
        for (size_t k = 0; k < len; k += 1 + (i % 7)) {
            char *saved = strdup(L.l[i]), flip = (char)("0a~!Zq9 "[rnd() % 8]);
            char want[64];
            assert_non_null(saved);
            if (L.l[i][k] == flip)
                flip = L.l[i][k] == 'x' ? 'y' : 'x';
            L.l[i][k] = flip;
            struct fx *x = read_lines(&L);
            char *t = report(x, fx_ndumps(x) ? fx_ndumps(x) - 1 : 0);
            snprintf(want, sizeof(want), "line %zu: bad frame line", i + 1);
            assert_int_not_equal(fx_status(x, 0), 0);
            if (k >= 4) /* (in "@PTV" itself the line is console text, its frame lost) */
                assert_has(t, want);
            if (saved[6] == 'D' && k >= 6) { /* a DATA line: its block's range is missing */
                assert_int_equal(fx_status(x, 0), 2);
                assert_has(t, "missing");
            } else if (saved[6] == 'B' && k >= 6) { /* BEGIN: no metadata, nothing usable */
                assert_int_equal(fx_status(x, 0), 1);
                assert_has(t, "BEGIN record incomplete");
            } else if (saved[6] == 'E' && k >= 6) {
                assert_int_equal(fx_status(x, 0), 2);
                assert_has(t, "no END record");
            }
            for (unsigned d = 0; d < fx_ndumps(x); d++)
                if (fx_status(x, d) != 1)
                    check_spec(x, d, &s, false);
            free(t);
            fx_free(x);
            strcpy(L.l[i], saved);
            free(saved);
            hits++;
        }
    }
    print_message("corrupted lines: %u single-byte changes, each reported, nothing wrong out\n",
                  hits);
    lines_free(&L);
}

/* a line cut short, a line with its CRC field damaged, a DATA line lost */
static void test_lost_frames(void **state)
{
    struct spec s = std_spec(60000);
    struct lines L = {0};
    struct fx *x;
    char *t;
    size_t d = 0;

    (void)state;
    encode(&L, &s, 0, true);
    for (size_t i = 0; i < L.n && !d; i++)
        if (!strncmp(L.l[i], "@PTV1 D 1 0 5 ", 14))
            d = i;
    assert_true(d > 0);
    free(L.l[d]);
    memmove(&L.l[d], &L.l[d + 1], (L.n - d - 1) * sizeof(*L.l));
    L.n--;
    L.l[d + 2][strlen(L.l[d + 2]) / 2] = 0;  /* cut */
    L.l[d + 4][strlen(L.l[d + 4]) - 3] ^= 1; /* CRC field */
    x = read_lines(&L);
    t = report(x, 0);
    assert_int_equal(fx_status(x, 0), 2);
    check_spec(x, 0, &s, false);
    assert_has(t, "DATA frame 5 lost");
    assert_has(t, "line CRC32 mismatch");
    assert_has(t, "frames: ");
    assert_has(t, "INCOMPLETE (usable)");
    free(t);
    fx_free(x);
    lines_free(&L);
}

/* a line whose payload was changed and its line CRC made to fit (a bug, or an adversary):
 * the block's own CRC32 (or LZ4's checks) stops it */
static void forge(char *line, size_t k)
{
    size_t n = strlen(line);

    line[k] = line[k] == '0' ? '1' : '0';
    snprintf(line + n - 8, 9, "%08x", frame_dec_crc32(0, line, n - 8));
}

static void test_forged(void **state)
{
    uint8_t *r = random_bytes(3 * FRAME_BLOCK);
    struct spec s = std_spec(3 * FRAME_BLOCK);
    struct lines L = {0};

    (void)state;
    for (int lz4 = 0; lz4 < 2; lz4++) {
        s.trace = lz4 ? T : r;
        encode(&L, &s, 0, true);
        for (size_t i = 0; i < L.n; i++)
            if (strstr(L.l[i], " t 1000 ")) { /* a line of the trace's second block */
                forge(L.l[i], strlen(L.l[i]) - 12);
                break;
            }
        struct fx *x = read_lines(&L);
        char *t = report(x, 0);
        assert_int_equal(fx_status(x, 0), 2);
        check_spec(x, 0, &s, false);
        assert_has(t, "trace bytes 0x1000+0x1000 (frames on lines");
        assert_has(t, lz4 ? "rejected: " : "rejected: CRC32 of the block is");
        assert_has(t, "trace: bytes 0x1000..0x1fff missing");
        free(t);
        fx_free(x);
        lines_free(&L);
    }
    free(r);
}

/* every line twice, then in random order: harmless */
static void test_dup_reorder(void **state)
{
    struct spec s = std_spec(300000);
    struct lines L = {0}, D = {0};
    struct fx *x;
    char *t;

    (void)state;
    encode(&L, &s, 0, true);
    for (size_t i = 0; i < L.n; i++) {
        lines_add(&D, L.l[i], strlen(L.l[i]));
        if (i % 3 == 0)
            lines_add(&D, L.l[i], strlen(L.l[i]));
    }
    x = read_lines(&D);
    assert_int_equal(fx_status(x, 0), 0);
    check_spec(x, 0, &s, true);
    t = report(x, 0);
    assert_has(t, "duplicate DATA frame");
    free(t);
    fx_free(x);
    /* shuffled DATA lines (BEGIN first, END last) */
    for (size_t i = D.n - 2; i > 2; i--) {
        size_t j = 2 + rnd() % (i - 1);
        char *tmp = D.l[i];
        D.l[i] = D.l[j];
        D.l[j] = tmp;
    }
    x = read_lines(&D);
    if (fx_status(x, 0) != 0)
        fail_msg("%s", report(x, 0));
    check_spec(x, 0, &s, true);
    fx_free(x);
    lines_free(&D);
    lines_free(&L);
}

/* interrupted, then resumed: BEGIN again and the rest from an offset (a fresh encoder), or
 * the same encoder resending a range and ending again */
static void test_resume(void **state)
{
    struct spec s = std_spec(500000);
    struct lines L = {0};
    struct fx *x;
    size_t keep;

    (void)state;
    encode(&L, &s, 0, false);
    keep = L.n * 2 / 5;
    for (size_t i = keep; i < L.n; i++)
        free(L.l[i]);
    L.n = keep; /* the dump was cut here */
    lines_add(&L, "[  100.1] guest goes on", 23);
    x = read_lines(&L);
    assert_int_equal(fx_status(x, 0), 2);
    fx_free(x);
    encode(&L, &s, 3 * FRAME_BLOCK, true); /* resumed at a block before the cut */
    x = read_lines(&L);
    if (fx_status(x, 0) != 0)
        fail_msg("%s", report(x, 0));
    check_spec(x, 0, &s, true);
    fx_free(x);
    lines_free(&L);

    /* the same encoder: a block abandoned halfway, the range sent again later */
    struct frame_begin b;
    struct frame_out o = {out_line, &L};
    spec_begin(&b, &s);
    s.nsnap = 0;
    s.clen = 0;
    spec_begin(&b, &s);
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    assert_int_equal(frame_enc_data(&enc, 0, 0, s.trace, s.tlen), 0); /* first line of block 0 */
    assert_true(frame_enc_busy(&enc));
    send_stream(FRAME_STREAM_TRACE, s.trace, s.tlen, FRAME_BLOCK); /* abandons block 0 */
    frame_enc_end(&enc);
    x = read_lines(&L);
    assert_int_equal(fx_status(x, 0), 2); /* block 0 incomplete */
    fx_free(x);
    send_stream(FRAME_STREAM_TRACE, s.trace, FRAME_BLOCK, 0);
    frame_enc_end(&enc); /* block 0 was taken before it was abandoned: the CRC is known */
    x = read_lines(&L);
    if (fx_status(x, 0) != 0)
        fail_msg("%s", report(x, 0));
    check_stream(x, 0, 0, FRAME_STREAM_TRACE, s.trace, s.tlen, true);
    fx_free(x);
    lines_free(&L);
}

/* a resumed pass cut at other block boundaries: blocks overlap; where they agree the dump is
 * whole, where they disagree (the ring changed in between) both are dropped, never one picked */
static void test_overlap(void **state)
{
    struct spec s = std_spec(100000), t;
    struct lines L = {0};
    struct fx *x;
    char *r;

    (void)state;
    encode(&L, &s, 0, true);
    encode(&L, &s, 5 * FRAME_BLOCK + 100, true);
    x = read_lines(&L);
    if (fx_status(x, 0) != 0)
        fail_msg("%s", report(x, 0));
    check_spec(x, 0, &s, true);
    fx_free(x);
    lines_free(&L);

    t = s;
    t.trace = T + 1; /* the same metadata, other bytes */
    encode(&L, &s, 0, true);
    encode(&L, &t, 5 * FRAME_BLOCK + 100, true);
    x = read_lines(&L);
    r = report(x, 0);
    assert_int_equal(fx_status(x, 0), 2);
    check_spec(x, 0, &s, false);
    assert_has(r, "disagree where they overlap; both dropped");
    assert_has(r, "trace: bytes 0x5000..");
    free(r);
    fx_free(x);
    lines_free(&L);
}

/* several dumps, CPUs and boots in one log */
static void test_many(void **state)
{
    struct spec a = std_spec(30000), b = std_spec(20000), c0, c1, boot2;
    struct lines L = {0};
    struct fx *x;
    char *t;

    (void)state;
    b.dump = 2;
    b.trace = T + 5;
    c0 = std_spec(40000);
    c0.dump = 3;
    c0.ncpus = 2;
    c0.reason = FRAME_REASON_CRASH;
    c1 = c0;
    c1.cpu = 1;
    c1.trace = T + 77;
    boot2 = a; /* next boot: dump ids start again */
    boot2.boot = 0xb008;
    boot2.trace = T + 999;
    encode(&L, &a, 0, true);
    encode(&L, &b, 0, true);
    encode(&L, &c0, 0, true);
    encode(&L, &c1, 0, true);
    encode(&L, &boot2, 0, true);
    x = read_lines(&L);
    assert_int_equal(fx_ndumps(x), 4);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(fx_status(x, i), 0);
    check_spec(x, 0, &a, true);
    check_spec(x, 1, &b, true);
    check_spec(x, 2, &c0, true);
    check_spec(x, 2, &c1, true);
    check_spec(x, 3, &boot2, true);
    assert_int_equal(fx_pick(x, -1), 3);
    assert_int_equal(fx_pick(x, 1), 3); /* the last dump 1: the second boot's */
    assert_int_equal(fx_pick(x, 2), 1);
    assert_int_equal(fx_pick(x, 9), -1);
    fx_free(x);
    /* cpu 1's section lost: dump 3 incomplete, cpu 0 still usable */
    struct lines P = {0};
    for (size_t i = 0; i < L.n; i++)
        if (strncmp(L.l[i], "@PTV1 B 3 1 ", 12) && strncmp(L.l[i], "@PTV1 D 3 1 ", 12) &&
            strncmp(L.l[i], "@PTV1 E 3 1 ", 12))
            lines_add(&P, L.l[i], strlen(L.l[i]));
    x = read_lines(&P);
    assert_int_equal(fx_status(x, 2), 2);
    t = report(x, 2);
    assert_has(t, "1 of 2 CPU sections");
    free(t);
    fx_free(x);
    lines_free(&P);
    lines_free(&L);
}

/* records of many lines: 256 CR3s, 256 snapshots */
static void test_big_records(void **state)
{
    static uint64_t cr3s[FRAME_MAX_CR3S];
    static struct frame_snap si[FRAME_MAX_SNAPS];
    static const uint8_t code[4] = {0x0f, 0x0b, 0xeb, 0xfe};
    struct lines L = {0};
    struct frame_begin b;
    struct frame_out o = {out_line, &L};
    struct spec s = std_spec(5000);
    struct frame_meta *m = calloc(1, sizeof(*m));
    struct frame_line f;
    const char *body[FRAME_MAX_PARTS];
    unsigned n = 0;
    char why[200];

    (void)state;
    assert_non_null(m);
    for (unsigned i = 0; i < FRAME_MAX_CR3S; i++)
        cr3s[i] = 0xfffffffffffff000ull - 0x1000ull * i;
    for (unsigned i = 0; i < FRAME_MAX_SNAPS; i++)
        si[i] = (struct frame_snap){~0ull - 0x10000ull * i, i % 2 ? FRAME_CR3_ANY : cr3s[i], 4};
    s.cr3s = cr3s;
    s.ncr3 = FRAME_MAX_CR3S;
    spec_begin(&b, &s);
    b.snaps = si;
    b.nsnap = FRAME_MAX_SNAPS;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    for (size_t i = 0; i < L.n; i++) {
        assert_int_equal(frame_parse(L.l[i], strlen(L.l[i]), &f), FRAME_BEGIN);
        assert_int_equal(f.part, i + 1);
        assert_int_equal(f.nparts, L.n);
        body[n++] = strdup(f.body);
    }
    assert_true(n > 60);
    assert_int_equal(frame_meta_parse(body, n, m, why, sizeof(why)), 0);
    assert_int_equal(m->ncr3, FRAME_MAX_CR3S);
    assert_int_equal(m->nsnap, FRAME_MAX_SNAPS);
    assert_memory_equal(m->cr3, cr3s, sizeof(cr3s));
    assert_memory_equal(m->snap, si, sizeof(si));
    assert_int_equal(m->kernel_base, 0xffffffff81000000ull);
    assert_int_equal(m->overflows, 3);
    assert_true(m->wrapped);
    /* a part missing, or given in another order, is refused or read the same */
    assert_int_equal(frame_meta_parse(body + 1, n - 1, m, why, sizeof(why)), -1);
    for (unsigned i = 0; i < FRAME_MAX_SNAPS; i++)
        send_stream(FRAME_STREAM_SNAP(i), code, 4, 0);
    send_stream(FRAME_STREAM_TRACE, T, 5000, 0);
    send_stream(FRAME_STREAM_CRASH, C, 700, 0);
    frame_enc_end(&enc);
    struct fx *x = read_lines(&L);
    if (fx_status(x, 0) != 0)
        fail_msg("%s", report(x, 0));
    for (unsigned i = 0; i < FRAME_MAX_SNAPS; i++)
        check_stream(x, 0, 0, FRAME_STREAM_SNAP(i), code, 4, true);
    fx_free(x);
    for (unsigned i = 0; i < n; i++)
        free((void *)body[i]);
    free(m);
    lines_free(&L);
}

/* the encoder refuses what it cannot say, and then says nothing */
static void test_misuse(void **state)
{
    struct lines L = {0};
    struct frame_begin b;
    struct frame_out o = {out_line, &L};
    struct spec s = std_spec(100);
    struct frame_range bad_range = {5, 4};

    (void)state;
    spec_begin(&b, &s);
    b.nsnap = FRAME_MAX_SNAPS + 1;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    assert_non_null(enc.err);
    spec_begin(&b, &s);
    b.ncpus = 0;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    spec_begin(&b, &s);
    b.filter = 0x80;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    spec_begin(&b, &s);
    b.ranges = &bad_range;
    b.nranges = 1;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    spec_begin(&b, &s);
    b.trace_len = FRAME_STREAM_MAX + 1;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    spec_begin(&b, &s);
    b.reason = FRAME_REASON_COUNT;
    assert_int_equal(frame_enc_begin(&enc, &b, &o), -1);
    assert_int_equal(frame_enc_data(&enc, 0, 0, T, 10), 0);
    frame_enc_end(&enc);
    assert_int_equal(L.n, 0);
    /* valid begin; then a stream that is not there, bytes past the end */
    spec_begin(&b, &s);
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    assert_null(enc.err);
    size_t n0 = L.n;
    assert_int_equal(frame_enc_data(&enc, FRAME_STREAM_SNAP(2), 0, T, 1), 0);
    assert_non_null(enc.err);
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    n0 = L.n;
    assert_int_equal(frame_enc_data(&enc, FRAME_STREAM_TRACE, 0, T, 101), 0);
    assert_non_null(enc.err);
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    n0 = L.n;
    assert_int_equal(frame_enc_data(&enc, FRAME_STREAM_TRACE, 100, T, 1), 0);
    assert_non_null(enc.err);
    assert_int_equal(frame_enc_data(&enc, FRAME_STREAM_TRACE, 0, T, 1), 0);
    frame_enc_end(&enc);
    assert_int_equal(L.n, n0);
    /* nothing to send is not an error */
    assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
    assert_int_equal(frame_enc_data(&enc, FRAME_STREAM_TRACE, 0, T, 0), 0);
    assert_null(enc.err);
    lines_free(&L);
}

/* ---- the subcommand, on files ---- */

static char tmpdir[] = "/tmp/test_frame.XXXXXX";

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    size_t n = 0;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc(n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, n, f), n);
    p[n] = 0;
    fclose(f);
    if (len)
        *len = n;
    return p;
}

static char *path_of(const char *a, const char *b)
{
    static char p[4][512];
    static int i;

    i = (i + 1) % 4;
    snprintf(p[i], sizeof(p[i]), "%s/%s%s%s", tmpdir, a, b ? "/" : "", b ? b : "");
    return p[i];
}

/* ptvisor-trace extract ARGS, with stdout and stderr captured */
static int cli(char **out, char **err, int argc, ...)
{
    char *argv[12];
    va_list ap;
    int so = dup(1), se = dup(2), r;
    int fo = open(path_of("stdout", NULL), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    int fe = open(path_of("stderr", NULL), O_CREAT | O_TRUNC | O_WRONLY, 0600);

    assert_true(argc < 12 && fo >= 0 && fe >= 0);
    va_start(ap, argc);
    argv[0] = (char *)"extract";
    for (int i = 1; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    argv[argc] = NULL;
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    dup2(fo, 1);
    dup2(fe, 2);
    r = ptt_cmd_extract(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    *out = slurp(path_of("stdout", NULL), NULL);
    *err = slurp(path_of("stderr", NULL), NULL);
    return r;
}

static void save(const struct lines *L, const char *name, bool crlf)
{
    FILE *f = fopen(path_of(name, NULL), "wb");

    assert_non_null(f);
    for (size_t i = 0; i < L->n; i++)
        fprintf(f, "%s%s\n", L->l[i], crlf ? "\r" : "");
    fclose(f);
}

static void file_is(const char *dir, const char *name, const void *p, size_t n)
{
    size_t len;
    char *got = slurp(path_of(dir, name), &len);

    if (!got)
        fail_msg("%s/%s not written", dir, name);
    assert_int_equal(len, n);
    assert_memory_equal(got, p, n);
    free(got);
}

static void test_cli(void **state)
{
    struct spec s = std_spec(150000), s2 = std_spec(9000);
    struct lines L = {0}, M = {0};
    char *out, *err, *t, want[128];

    (void)state;
    assert_non_null(mkdtemp(tmpdir));
    s2.dump = 2;
    s2.reason = FRAME_REASON_CRASH;
    encode(&L, &s, 0, true);
    lines_add(&L, "guest: after dump 1", 19);
    encode(&L, &s2, 0, true);
    lines_add(&L, "guest: the end", 14);
    lines_add(&M, "guest: first line", 17);
    for (size_t i = 0; i < L.n; i++)
        lines_add(&M, L.l[i], strlen(L.l[i]));
    save(&M, "log", true);

    /* --last: the last dump, into the directory itself */
    assert_int_equal(cli(&out, &err, 5, path_of("log", NULL), "-o", path_of("d", NULL), "--last"),
                     0);
    assert_has(err, "dump 2 (boot 0000b007, crash");
    free(out);
    free(err);
    file_is("d", "cpu0.pt", s2.trace, s2.tlen);
    file_is("d", "snap/cpu0-0.bin", S0, 4096);
    file_is("d", "snap/cpu0-1.bin", S1, 5000);
    file_is("d", "crash.txt", C, 700);
    t = (char *)"guest: first line\r\nguest: after dump 1\r\nguest: the end\r\n";
    file_is("d", "console.log", t, strlen(t));
    t = slurp(path_of("d", "dump.meta"), NULL);
    assert_has(t, "protocol 1\ndump 2\n");
    assert_has(t,
               "reason crash\nsource software\ntsc_hz 2400000000\nkernel_base 0xffffffff81000000");
    assert_has(t, "cpus 1\ncomplete yes\n");
    free(t);
    t = slurp(path_of("d", "cpu0.meta"), NULL);
    snprintf(want, sizeof(want), "cpu 0\nbytes %zu\n", s2.tlen);
    assert_has(t, want);
    assert_has(t, "ring_size 1048576\nwrapped 1\noverflows 3\nfilters user,kernel,range=0x400000");
    assert_has(t, "cr3 0x1000\ncr3 0x2000\ncr3 0x3000\n");
    assert_has(t, "crc ok\n");
    free(t);
    t = slurp(path_of("d", "snapshots"), NULL);
    assert_string_equal(t, "0xffffffff81000000 4096 any snap/cpu0-0.bin\n"
                           "0x401000 5000 0x1000 snap/cpu0-1.bin\n");
    free(t);

    /* --dump, into the same directory: refreshed */
    assert_int_equal(
        cli(&out, &err, 6, path_of("log", NULL), "-o", path_of("d", NULL), "--dump", "1", "-q"), 0);
    free(out);
    free(err);
    file_is("d", "cpu0.pt", s.trace, s.tlen);
    /* --list */
    assert_int_equal(cli(&out, &err, 3, path_of("log", NULL), "--list"), 0);
    assert_has(out, "dump 1  boot 0000b007  vmcall  software  cpus 1/1  trace bytes 150000");
    assert_has(out, "dump 2  boot 0000b007  crash");
    free(out);
    free(err);

    /* every dump (no --dump, no --last): one directory each, under directories that do not
     * exist yet; standard output says how many and where */
    assert_int_equal(cli(&out, &err, 4, path_of("log", NULL), "-o", path_of("all/a/b", NULL)), 0);
    snprintf(want, sizeof(want), "ptvisor-trace extract: 2 dumps in %s\n", path_of("log", NULL));
    assert_has(out, want);
    snprintf(want, sizeof(want), "  dump 1 (complete) -> %s\n",
             path_of("all/a/b", "dump-1-vmcall"));
    assert_has(out, want);
    snprintf(want, sizeof(want), "  dump 2 (complete) -> %s\n", path_of("all/a/b", "dump-2-crash"));
    assert_has(out, want);
    assert_has(err, "dump 1 (boot 0000b007, vmcall");
    assert_has(err, "dump 2 (boot 0000b007, crash");
    free(out);
    free(err);
    file_is("all/a/b", "dump-1-vmcall/cpu0.pt", s.trace, s.tlen);
    file_is("all/a/b", "dump-2-crash/cpu0.pt", s2.trace, s2.tlen);
    file_is("all/a/b", "dump-2-crash/crash.txt", C, 700);
    t = slurp(path_of("all/a/b", "dumps"), NULL);
    assert_string_equal(t, "dump-1-vmcall 1 0x0000b007 vmcall complete\n"
                           "dump-2-crash 2 0x0000b007 crash complete\n");
    free(t);
    t = (char *)"guest: first line\r\nguest: after dump 1\r\nguest: the end\r\n";
    file_is("all/a/b", "console.log", t, strlen(t));
    /* again into the same directory: refreshed, a file of the user's kept */
    save(&(struct lines){0}, "all/a/b/dump-1-vmcall/notes.txt", false);
    assert_int_equal(cli(&out, &err, 5, path_of("log", NULL), "-o", path_of("all/a/b", NULL), "-q"),
                     0);
    free(out);
    free(err);
    file_is("all/a/b", "dump-1-vmcall/cpu0.pt", s.trace, s.tlen);
    file_is("all/a/b", "dump-1-vmcall/notes.txt", "", 0);
    /* a file where a directory should be: one line */
    save(&(struct lines){0}, "afile", false);
    assert_int_equal(cli(&out, &err, 4, path_of("log", NULL), "-o", path_of("afile", "x")), 1);
    assert_has(err, "cannot create");
    free(out);
    free(err);

    /* cut in dump 2's trace (at its second block): status 2, holes in cpu0.meta, the file
     * without them */
    size_t full = M.n, cut = 0;
    for (size_t i = 0; i < M.n && !cut; i++)
        if (!strncmp(M.l[i], "@PTV1 D 2 0 ", 12) && strstr(M.l[i], " t 1000 "))
            cut = i;
    assert_true(cut > 0);
    M.n = cut;
    save(&M, "log2", false);
    assert_int_equal(cli(&out, &err, 5, path_of("log2", NULL), "-o", path_of("d2", NULL), "--last"),
                     2);
    assert_has(err, "no END record");
    assert_has(err, "INCOMPLETE (usable)");
    free(out);
    free(err);
    t = slurp(path_of("d2", "cpu0.meta"), NULL);
    assert_has(t, "bytes 9000\nreceived 4096\n");
    assert_has(t, "missing 4096+4904\n");
    assert_has(t, "crc unknown");
    free(t);
    file_is("d2", "cpu0.pt", s2.trace, 4096);
    t = slurp(path_of("d2", "dump.meta"), NULL);
    assert_has(t, "complete no");
    free(t);
    M.n = full;

    /* errors: no dump, a directory that is not ours, bad arguments, help */
    save(&(struct lines){0}, "empty", false);
    assert_int_equal(cli(&out, &err, 4, path_of("empty", NULL), "-o", path_of("d3", NULL)), 1);
    assert_has(err, "no dump in");
    free(out);
    free(err);
    mkdir(path_of("mine", NULL), 0700);
    save(&(struct lines){0}, "mine/precious", false);
    assert_int_equal(cli(&out, &err, 4, path_of("log", NULL), "-o", path_of("mine", NULL)), 1);
    assert_has(err, "holds nothing extract wrote");
    free(out);
    free(err);
    assert_int_equal(
        cli(&out, &err, 5, path_of("log", NULL), "-o", path_of("mine", NULL), "--last"), 1);
    assert_has(err, "not overwriting");
    free(out);
    free(err);
    assert_int_equal(cli(&out, &err, 2, path_of("log", NULL)), 1);
    assert_has(err, "usage");
    free(out);
    free(err);
    assert_int_equal(cli(&out, &err, 4, path_of("log", NULL), "--dump", "x"), 1);
    free(out);
    free(err);
    assert_int_equal(cli(&out, &err, 4, path_of("nolog", NULL), "-o", path_of("d4", NULL)), 1);
    assert_has(err, "cannot open");
    free(out);
    free(err);
    assert_int_equal(cli(&out, &err, 2, "--help"), 0);
    assert_has(out, "EXIT STATUS");
    free(out);
    free(err);
    /* the library entry point other commands use (its findings to a file) */
    char e[256];
    int se = dup(2), fe = open(path_of("stderr", NULL), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(se >= 0 && fe >= 0);
    fflush(stderr);
    dup2(fe, 2);
    int r1 = ptt_extract_log(path_of("log2", NULL), path_of("d5", NULL), 1, NULL, e, sizeof(e));
    int r2 = ptt_extract_log(path_of("empty", NULL), path_of("d6", NULL), 1, NULL, e, sizeof(e));
    fflush(stderr);
    dup2(se, 2);
    close(se);
    close(fe);
    assert_int_equal(r1, 0);
    assert_int_equal(r2, -1);
    assert_has(e, "no dump");
    file_is("d5", "cpu0.pt", s2.trace, 4096);
    err = slurp(path_of("stderr", NULL), NULL);
    assert_has(err, "INCOMPLETE (usable)");
    free(err);
    lines_free(&L);
    lines_free(&M);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* ---- figures ---- */

/* realistic PT from a real program: single-stepped with ptrace as test_swpt_ptrace does,
 * classified by the VMM's classifier, written by the packet generator (user only, a syscall
 * leaves the filter); NULL where ptrace is refused */
static uint8_t *ptrace_pt(char *const argv[], unsigned long max_steps, size_t *len)
{
    static const struct x86_insn sysret = {.len = 3, .branch = X86_BR_SYSRET};
    const struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = 4096, .tsc = true};
    struct swpt_ctx u = {.cr3 = 0x1000, .cpl = 3, .cs = X86_CODE64}, k = u;
    struct swpt t;
    struct swpt_ring ring = {.size = 16 * MIB, .stop_on_full = true};
    struct user_regs_struct regs;
    char mem[64];
    int st, memfd, sig = 0;
    pid_t pid;
    uint64_t rip, tsc = 0;

    k.cpl = 0;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        dup2(null, 2);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) {
        waitpid(pid, &st, 0);
        return NULL;
    }
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
    memfd = open(mem, O_RDONLY);
    if (memfd < 0 || ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return NULL;
    }
    ring.buf = malloc(ring.size);
    assert_non_null(ring.buf);
    rip = regs.rip;
    swpt_start(&t, &cfg, &ring, &u, rip, 0);
    for (unsigned long n = 0; n < max_steps; n++) {
        uint8_t b[X86_MAX_INSN];
        struct x86_insn in;
        ssize_t got = pread(memfd, b, sizeof(b), (off_t)rip);
        if (got <= 0 || x86_classify(b, (size_t)got, X86_CODE64, &in) != 0)
            break;
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) != 0)
            break;
        sig = 0;
        waitpid(pid, &st, 0);
        tsc += 100;
        if (!WIFSTOPPED(st))
            break;
        ptrace(PTRACE_GETREGS, pid, NULL, &regs);
        if (WSTOPSIG(st) != SIGTRAP) {
            sig = WSTOPSIG(st);
            if (regs.rip == rip)
                continue;
        }
        if (in.branch == X86_BR_SYSCALL) {
            swpt_insn(&t, rip, &in, 0xffffffff81000000ull, &k, tsc);
            swpt_insn(&t, 0xffffffff81000000ull, &sysret, regs.rip, &u, tsc);
        } else {
            swpt_insn(&t, rip, &in, regs.rip, &u, tsc);
        }
        rip = regs.rip;
    }
    swpt_stop(&t, rip);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(memfd);
    *len = ring.head;
    return ring.buf;
}

/* wire bytes per trace byte for a trace-only dump of p */
static double wire_ratio(const uint8_t *p, size_t n)
{
    struct spec s = {.boot = 1, .dump = 1, .trace = p, .tlen = n};
    struct lines L = {0};
    struct fx *x;
    double r;

    encode(&L, &s, 0, true);
    x = read_lines(&L);
    assert_int_equal(fx_status(x, 0), 0);
    check_spec(x, 0, &s, true);
    fx_free(x);
    r = (double)L.wire / (double)n;
    lines_free(&L);
    return r;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_figures(void **state)
{
    char *sort_argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/services", NULL};
    uint8_t *r = random_bytes(MIB), *real;
    double synth = wire_ratio(T, 2 * MIB), rnd_ratio = wire_ratio(r, MIB);
    size_t rlen = 0;

    (void)state;
    print_message("wire bytes per trace byte: synthetic-program PT %.3f (2 MiB), random bytes "
                  "%.3f (LZ4 off, base 85 + headers)\n",
                  synth, rnd_ratio);
    assert_true(synth <= 1.0);                       /* the issue's goal */
    assert_true(rnd_ratio > 1.6 && rnd_ratio < 1.8); /* LZ4 off: base 85 and ~50 header bytes */
    real = ptrace_pt(sort_argv, 200000, &rlen);
    if (real && rlen > 4096)
        print_message("wire bytes per trace byte: sort /etc/services, 200,000 steps, %zu PT bytes: "
                      "%.3f\n",
                      rlen, wire_ratio(real, rlen));
    else
        print_message("real-program figure skipped: ptrace refused here\n");
    free(real);

    /* encoder cost on the host: lines to a byte counter, 8 x 2 MiB */
    struct spec s = {.boot = 1, .dump = 1, .trace = T, .tlen = 2 * MIB};
    struct frame_begin b;
    uint64_t wire = 0;
    struct frame_out o = {out_count, &wire};
    double t0 = now_s(), dt;
    spec_begin(&b, &s);
    for (int rep = 0; rep < 8; rep++) {
        assert_int_equal(frame_enc_begin(&enc, &b, &o), 0);
        for (size_t off = 0; off < 2 * MIB;)
            off += frame_enc_data(&enc, 0, off, T + off, 2 * MIB - off);
        frame_enc_end(&enc);
    }
    dt = now_s() - t0;
    print_message("encoder: %.1f ns per trace byte on this host (ASan/UBSan build), %.0f bytes "
                  "per line on the wire\n",
                  dt * 1e9 / (8.0 * 2 * MIB), (double)enc.wire_bytes / (double)enc.lines);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),       cmocka_unit_test(test_b85),
        cmocka_unit_test(test_lz4w),        cmocka_unit_test(test_wire_example),
        cmocka_unit_test(test_sizes),       cmocka_unit_test(test_console_mix),
        cmocka_unit_test(test_truncated),   cmocka_unit_test(test_corrupted),
        cmocka_unit_test(test_lost_frames), cmocka_unit_test(test_forged),
        cmocka_unit_test(test_dup_reorder), cmocka_unit_test(test_resume),
        cmocka_unit_test(test_overlap),     cmocka_unit_test(test_many),
        cmocka_unit_test(test_big_records), cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_cli),         cmocka_unit_test(test_figures),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
