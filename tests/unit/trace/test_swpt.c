/* SPDX-License-Identifier: MIT */
/*
 * The software PT generator (vmm/trace/swpt.c): byte-exact packets for hand-written SDM
 * Vol. 3C 33.4.2 examples, and synthetic paths through a small hand-assembled code image
 * (known instructions at known addresses, two address spaces) decoded back by libipt's
 * instruction flow decoder, whose instruction sequence must be the executed one: every
 * filter (CPL, CR3, IP range) shown to include and to exclude, syscalls, interrupts, INT3,
 * a CR3 switch, 64 <-> 32-bit code, periodic PSB, OVF, a wrapping ring and a full one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <intel-pt.h>

#include <ptv/config.h>
#include <ptv/vmcall.h>

#include "trace/swpt.h"
#include "trace/treq.h"
#include "fakes/swpt_dec.h"

/* ---- a tiny code image ---- */

#define MAXREG 12
#define MAXINS 128
#define CR3_A  0x1000ull
#define CR3_B  0x2000ull

struct region {
    uint64_t cr3; /* 0: mapped in every address space (the kernel) */
    uint64_t base;
    uint8_t b[256];
    size_t len;
};

struct ins {
    uint64_t cr3, ip;
    struct x86_insn in;
};

struct code {
    struct region r[MAXREG];
    unsigned nr;
    struct ins ins[MAXINS];
    unsigned ni;
};

static struct region *cur(struct code *c)
{
    return &c->r[c->nr - 1];
}

static void org(struct code *c, uint64_t cr3, uint64_t base)
{
    assert_true(c->nr < MAXREG);
    c->r[c->nr++] = (struct region){.cr3 = cr3, .base = base};
}

static uint64_t emit(struct code *c, const uint8_t *b, unsigned n, unsigned branch, int32_t rel)
{
    struct region *r = cur(c);
    uint64_t ip = r->base + r->len;

    assert_true(r->len + n <= sizeof(r->b) && c->ni < MAXINS);
    memcpy(r->b + r->len, b, n);
    r->len += n;
    c->ins[c->ni++] = (struct ins){
        .cr3 = r->cr3, .ip = ip, .in = {.len = (uint8_t)n, .branch = (uint8_t)branch, .rel = rel}};
    return ip;
}

static uint64_t here(struct code *c)
{
    return cur(c)->base + cur(c)->len;
}

#define EMIT(c, br, ...)                                                                           \
    emit(c, (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}), br, 0)

static uint64_t NOP(struct code *c)
{
    return EMIT(c, X86_BR_NONE, 0x90);
}

static uint64_t JNZ(struct code *c, uint64_t target) /* 75 rel8 */
{
    int64_t rel = (int64_t)(target - (here(c) + 2));

    assert_true(rel >= -128 && rel <= 127);
    uint64_t ip = EMIT(c, X86_BR_JCC, 0x75, (uint8_t)rel);
    c->ins[c->ni - 1].in.rel = (int32_t)rel;
    return ip;
}

static uint64_t CALL(struct code *c, uint64_t target) /* e8 rel32 */
{
    int32_t rel = (int32_t)(target - (here(c) + 5));
    uint64_t ip = EMIT(c, X86_BR_CALL_DIRECT, 0xe8, (uint8_t)rel, (uint8_t)(rel >> 8),
                       (uint8_t)(rel >> 16), (uint8_t)(rel >> 24));
    c->ins[c->ni - 1].in.rel = rel;
    return ip;
}

#define CALL_RAX(c) EMIT(c, X86_BR_CALL_INDIRECT, 0xff, 0xd0)
#define JMP_RAX(c)  EMIT(c, X86_BR_JMP_INDIRECT, 0xff, 0xe0)
#define RET(c)      EMIT(c, X86_BR_RET, 0xc3)
#define SYSCALL(c)  EMIT(c, X86_BR_SYSCALL, 0x0f, 0x05)
#define SYSRET(c)   EMIT(c, X86_BR_SYSRET, 0x48, 0x0f, 0x07)
#define IRET(c)     EMIT(c, X86_BR_IRET, 0x48, 0xcf)
#define INT3(c)     EMIT(c, X86_BR_INT, 0xcc)
#define MOV_CR3(c)  EMIT(c, X86_BR_NONE, 0x0f, 0x22, 0xd8)
#define JMPF(c)     EMIT(c, X86_BR_FAR_JMP, 0xff, 0x28) /* jmp far [rax] / [eax] */

static const struct ins *lookup(const struct code *c, uint64_t cr3, uint64_t ip)
{
    for (unsigned i = 0; i < c->ni; i++)
        if (c->ins[i].ip == ip && (c->ins[i].cr3 == 0 || c->ins[i].cr3 == cr3))
            return &c->ins[i];
    fail_msg("no instruction at %#llx (cr3 %#llx)", (unsigned long long)ip,
             (unsigned long long)cr3);
    return NULL;
}

/* libipt's view of memory: the region holding ip in address space cr3 */
static int code_read(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx)
{
    const struct code *c = *(struct code *const *)ctx;

    for (unsigned i = 0; i < c->nr; i++) {
        const struct region *r = &c->r[i];

        if (r->cr3 && cr3 != SWPT_DEC_NO_CR3 && r->cr3 != cr3)
            continue;
        if (ip < r->base || ip >= r->base + r->len)
            continue;
        size_t n = r->base + r->len - ip;
        n = n < size ? n : size;
        memcpy(buf, r->b + (ip - r->base), n);
        return (int)n;
    }
    return -1;
}

/* ---- a CPU walking the image, feeding the generator ---- */

struct sim {
    struct code *c; /* first: code_read's context */
    struct swpt_cfg cfg;
    struct swpt t;
    struct swpt_ring ring;
    uint64_t ip;
    struct swpt_ctx ctx;
    uint64_t tsc;
    bool armed;    /* a start trigger not reached yet: nothing is traced */
    uint64_t *exp; /* the instructions libipt must report */
    size_t nexp, cap;
    size_t pos; /* decode check position */
};

static const struct swpt_ctx U64 = {.cr3 = CR3_A, .cpl = 3, .cs = X86_CODE64};
static const struct swpt_ctx K64 = {.cr3 = CR3_A, .cpl = 0, .cs = X86_CODE64};

static struct swpt_ctx ctx_of(const struct swpt_ctx *base, uint64_t cr3)
{
    struct swpt_ctx x = *base;

    x.cr3 = cr3;
    return x;
}

/* the specification the test holds the generator to (SDM 33.2.5) */
static bool traced(const struct swpt_cfg *cfg, const struct swpt_ctx *x, uint64_t ip)
{
    const struct swpt_filter *f = &cfg->filter;
    bool in_range = f->nranges == 0;

    if (!(x->cpl ? f->user : f->kernel) || (f->cr3_match && ((x->cr3 ^ f->cr3) & ~f->cr3_ignore)))
        return false;
    for (unsigned i = 0; i < f->nranges; i++)
        in_range |= ip >= f->range[i].lo && ip <= f->range[i].hi;
    return in_range;
}

static void sim_start(struct sim *s, struct code *c, const struct swpt_cfg *cfg, size_t ringsz,
                      bool stop_on_full, uint64_t ip, const struct swpt_ctx *ctx)
{
    const char *why;

    *s = (struct sim){
        .c = c, .cfg = *cfg, .ip = ip, .ctx = *ctx, .tsc = 1000, .armed = cfg->filter.start_at};
    assert_int_equal(swpt_cfg_check(cfg, &why), 0);
    s->ring =
        (struct swpt_ring){.buf = calloc(1, ringsz), .size = ringsz, .stop_on_full = stop_on_full};
    s->cap = 1 << 16;
    s->exp = malloc(s->cap * sizeof(*s->exp));
    assert_non_null(s->ring.buf);
    assert_non_null(s->exp);
    swpt_start(&s->t, cfg, &s->ring, ctx, ip, s->tsc);
    assert_true(s->t.on);
}

static void sim_free(struct sim *s)
{
    free(s->ring.buf);
    free(s->exp);
}

static void expect(struct sim *s, uint64_t ip)
{
    if (s->nexp == s->cap) {
        s->cap *= 2;
        s->exp = realloc(s->exp, s->cap * sizeof(*s->exp));
        assert_non_null(s->exp);
    }
    s->exp[s->nexp++] = ip;
}

/* the instruction at s->ip completes; the CPU goes on at next in *after */
static void exec(struct sim *s, uint64_t next, const struct swpt_ctx *after)
{
    const struct ins *i = lookup(s->c, s->ctx.cr3, s->ip);

    /* the start trigger: the first admitted instruction at start_ip and all after it */
    if (s->armed && s->ip == s->cfg.filter.start_ip && traced(&s->cfg, &s->ctx, s->ip))
        s->armed = false;
    /* libipt reports an INT n as an interrupt (FUP + TIP), not as an instruction */
    if (!s->armed && traced(&s->cfg, &s->ctx, s->ip) && i->in.branch != X86_BR_INT)
        expect(s, s->ip);
    s->tsc += 3;
    swpt_insn(&s->t, s->ip, &i->in, next, after, s->tsc);
    s->ip = next;
    s->ctx = *after;
}

/* a non-branch or a direct branch */
static void step(struct sim *s)
{
    const struct ins *i = lookup(s->c, s->ctx.cr3, s->ip);
    uint64_t next = s->ip + i->in.len;

    if (i->in.branch == X86_BR_JMP_DIRECT || i->in.branch == X86_BR_CALL_DIRECT)
        next += (uint64_t)(int64_t)i->in.rel;
    exec(s, next, &s->ctx);
}

static void jcc(struct sim *s, bool taken)
{
    const struct ins *i = lookup(s->c, s->ctx.cr3, s->ip);

    assert_int_equal(i->in.branch, X86_BR_JCC);
    exec(s, s->ip + i->in.len + (taken ? (uint64_t)(int64_t)i->in.rel : 0), &s->ctx);
}

static void go(struct sim *s, uint64_t to, const struct swpt_ctx *after)
{
    exec(s, to, after ? after : &s->ctx);
}

static void event(struct sim *s, uint64_t to, const struct swpt_ctx *after)
{
    s->tsc += 3;
    swpt_event(&s->t, s->ip, to, after, s->tsc);
    s->ip = to;
    s->ctx = *after;
}

static void lost(struct sim *s, uint64_t resume, const struct swpt_ctx *ctx)
{
    swpt_lost(&s->t, resume, ctx, s->tsc);
    s->ip = resume;
    s->ctx = *ctx;
}

/* the ring's bytes, oldest first */
static uint8_t *ring_bytes(const struct swpt_ring *r, size_t *len)
{
    size_t n = r->head < r->size ? (size_t)r->head : (size_t)r->size;
    uint8_t *b = malloc(n ? n : 1);
    size_t start = r->head < r->size ? 0 : (size_t)(r->head % r->size);

    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = r->buf[(start + i) % r->size];
    *len = n;
    return b;
}

static int match_insn(uint64_t ip, uint64_t cr3, void *ctx)
{
    struct sim *s = ctx;

    (void)cr3;
    if (s->pos >= s->nexp || s->exp[s->pos] != ip) {
        print_error("decoded #%zu: %#llx, expected %#llx\n", s->pos, (unsigned long long)ip,
                    s->pos < s->nexp ? (unsigned long long)s->exp[s->pos] : 0ull);
        return 1;
    }
    s->pos++;
    return 0;
}

/* decoded instructions gathered (code_read's context first) */
struct collect {
    struct code *c;
    uint64_t *ip;
    size_t n, cap;
};

static int collect_insn(uint64_t ip, uint64_t cr3, void *ctx)
{
    struct collect *g = ctx;

    (void)cr3;
    if (g->n == g->cap)
        return 1;
    g->ip[g->n++] = ip;
    return 0;
}

/* every byte parses; libipt decodes exactly the expected instructions */
static void check(struct sim *s, unsigned counts[SWPT_PKT_TYPES], struct swpt_dec_stats *st)
{
    char err[200];
    size_t len, whole;
    uint8_t *b = ring_bytes(&s->ring, &len);

    if (swpt_pkt_scan(b, len, counts, &whole, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(whole, len);
    s->pos = 0;
    if (swpt_decode(b, len, code_read, match_insn, s, st, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s->pos, s->nexp);
    assert_int_equal(st->insns, s->nexp);
    /* what a window's CPL 3 owner is told it traced: what the decode yields */
    assert_int_equal(s->t.traced, s->nexp);
    free(b);
}

/* ---- byte-exact packets (SDM Vol. 3C 33.4.2) ---- */

static const struct x86_insn I_JCC = {.len = 2, .branch = X86_BR_JCC};
static const struct x86_insn I_RET = {.len = 1, .branch = X86_BR_RET};
static const struct x86_insn I_SYSCALL = {.len = 2, .branch = X86_BR_SYSCALL};
static const struct x86_insn I_SYSRET = {.len = 3, .branch = X86_BR_SYSRET};
static const struct x86_insn I_JMPF = {.len = 2, .branch = X86_BR_FAR_JMP};
static const struct x86_insn I_CALLR = {.len = 2, .branch = X86_BR_CALL_INDIRECT};
static const struct x86_insn I_MOVCR3 = {.len = 3, .branch = X86_BR_NONE, .flags = X86_F_MOV_CR3};
static const struct x86_insn I_NOP = {.len = 1, .branch = X86_BR_NONE};

#define PSB_BYTES                                                                                  \
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82

static void assert_ring(const struct swpt_ring *r, const uint8_t *want, size_t n)
{
    assert_int_equal(r->head, n);
    for (size_t i = 0; i < n; i++)
        if (r->buf[i] != want[i])
            fail_msg("byte %zu: %02x, want %02x", i, r->buf[i], want[i]);
}

static void test_bytes_all_packets(void **state)
{
    struct swpt_cfg cfg = {
        .filter = {.user = true, .kernel = true}, .psb_period = 4096, .tsc = true};
    uint8_t buf[256];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt t;
    struct swpt_ctx u = {.cr3 = 0x12345000, .cpl = 3, .cs = X86_CODE64};
    struct swpt_ctx k = u, k2, c32, c16, u64;
    const uint64_t K = 0xffffffff81000000ull;
    static const uint8_t want[] = {
        PSB_BYTES, 0x19, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* TSC[55:0] */
        0x99,      0x01,                                           /* MODE.Exec CS.L */
        0x02,      0x43, 0x00, 0x45, 0x23, 0x01, 0x00, 0x00,       /* PIP: CR3[51:5] << 1, NR 0 */
        0x02,      0x23,                                           /* PSBEND */
        0x71,      0x00, 0x10, 0x40, 0x00, 0x00, 0x00,       /* TIP.PGE IPBytes 3 (no last IP) */
        0xfe,                                                /* short TNT 111111 + stop bit */
        0x04,                                                /* short TNT 0 + stop */
        0x2d,      0x34, 0x12,                               /* TIP IPBytes 1: 0x401234 */
        0x6d,      0x00, 0x00, 0x00, 0x81, 0xff, 0xff,       /* TIP IPBytes 3: K (syscall) */
        0x3d,      0x00, 0x00,                               /* FUP IPBytes 1: K (event) */
        0x2d,      0x00, 0x01,                               /* TIP IPBytes 1: K + 0x100 */
        0x02,      0x43, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, /* PIP 0x2000 (MOV CR3) */
        0x99,      0x02,                                     /* MODE.Exec CS.D */
        0x6d,      0x00, 0x00, 0x50, 0x00, 0x00, 0x00,       /* TIP IPBytes 3: 0x500000 */
        0x99,      0x00,                                     /* MODE.Exec 16-bit */
        0x4d,      0x00, 0x70, 0x00, 0x00,                   /* TIP IPBytes 2: 0x7000 */
        0x99,      0x01,                                     /* MODE.Exec CS.L */
        0x4d,      0x00, 0x10, 0x40, 0x00,                   /* TIP IPBytes 2: 0x401000 */
        0x02,      0xf3,                                     /* OVF */
        0x7d,      0x10, 0x70, 0x00, 0x00, 0x00, 0x00,       /* FUP IPBytes 3 (last IP gone) */
        0x3d,      0x20, 0x70,                               /* FUP IPBytes 1 (stop) */
        0x01,                                                /* TIP.PGD, IP suppressed */
    };

    (void)state;
    k.cpl = 0;
    k2 = k;
    k2.cr3 = 0x2000;
    c32 = k2;
    c32.cpl = 3;
    c32.cs = X86_CODE32;
    c16 = c32;
    c16.cs = X86_CODE16;
    u64 = c32;
    u64.cs = X86_CODE64;
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0x0011223344556677ull);
    for (int i = 0; i < 6; i++)
        swpt_insn(&t, 0x401000, &I_JCC, 0x401000, &u, 0);
    swpt_insn(&t, 0x401000, &I_JCC, 0x401002, &u, 0);
    swpt_insn(&t, 0x401002, &I_RET, 0x401234, &u, 0);
    swpt_insn(&t, 0x401234, &I_SYSCALL, K, &k, 0);
    swpt_event(&t, K, K + 0x100, &k, 0);
    swpt_insn(&t, K + 0x100, &I_MOVCR3, K + 0x103, &k2, 0);
    swpt_insn(&t, K + 0x103, &I_JMPF, 0x500000, &c32, 0);
    swpt_insn(&t, 0x500000, &I_JMPF, 0x7000, &c16, 0);
    swpt_insn(&t, 0x7000, &I_JMPF, 0x401000, &u64, 0);
    swpt_lost(&t, 0x7010, &u64, 0);
    swpt_stop(&t, 0x7020);
    assert_ring(&r, want, sizeof(want));
    assert_false(t.on);
    assert_int_equal(t.psbs, 1);
    assert_int_equal(t.overflows, 1);
    assert_int_equal(t.events, 1);
}

/* OS = 0: no PIP even in PSB+; leaving by CPL: TIP.PGD without IP; entering: TIP.PGE */
static void test_bytes_filter_edges(void **state)
{
    struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = 4096};
    uint8_t buf[128];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt t;
    struct swpt_ctx u = {.cr3 = 0x5000, .cpl = 3, .cs = X86_CODE64}, k = u;
    static const uint8_t want1[] = {
        PSB_BYTES, 0x99, 0x01, 0x02, 0x23, 0x71, 0x00,
        0x10,      0x40, 0x00, 0x00, 0x00, 0x01, /* syscall out of the context: TIP.PGD, IP
                                                    suppressed */
        0x31,      0x02, 0x10,                   /* sysret back in: TIP.PGE IPBytes 1 */
    };
    static const uint8_t want2[] = {
        PSB_BYTES, 0x99, 0x01, 0x02, 0x43, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x02,
        0x23,      0x71, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00, 0x21, 0x00, 0x20, /* TIP.PGD(0x402000)
                                                                                */
        0x31,      0x04, 0x10, /* TIP.PGE(0x401004) */
    };

    (void)state;
    k.cpl = 0;
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    swpt_insn(&t, 0x401000, &I_SYSCALL, 0xffffffff81000000ull, &k, 0);
    swpt_insn(&t, 0xffffffff81000000ull, &I_MOVCR3, 0xffffffff81000003ull, &k, 0);
    swpt_insn(&t, 0xffffffff81000003ull, &I_SYSRET, 0x401002, &u, 0);
    assert_ring(&r, want1, sizeof(want1));

    /* an IP range: leaving it keeps ContextEn, so TIP.PGD carries the target */
    cfg.filter.kernel = true;
    cfg.filter.nranges = 1;
    cfg.filter.range[0].lo = 0x401000;
    cfg.filter.range[0].hi = 0x401fff;
    r = (struct swpt_ring){.buf = buf, .size = sizeof(buf)};
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    swpt_insn(&t, 0x401002, &I_CALLR, 0x402000, &u, 0);
    swpt_insn(&t, 0x402000, &I_RET, 0x401004, &u, 0);
    assert_ring(&r, want2, sizeof(want2));
}

static void test_bytes_tnt(void **state)
{
    struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = 4096};
    uint8_t buf[128];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt t;
    const struct swpt_ctx u = {.cr3 = 0x5000, .cpl = 3, .cs = X86_CODE64};
    const bool bits[8] = {1, 0, 1, 1, 0, 0, 1, 1};
    static const uint8_t short8[] = {0xd8, 0x0e}; /* 101100 | 11 */
    static const uint8_t long47[] = {0x02, 0xa3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t long8[] = {0x02, 0xa3, 0xb3, 0x01, 0x00, 0x00, 0x00, 0x00};

    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        cfg.long_tnt = mode;
        r = (struct swpt_ring){.buf = buf, .size = sizeof(buf)};
        swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
        uint64_t start = r.head;
        for (int i = 0; i < 8; i++)
            swpt_insn(&t, 0x401000, &I_JCC, bits[i] ? 0x401000 : 0x401002, &u, 0);
        swpt_insn(&t, 0x401002, &I_RET, 0x401000, &u, 0);
        if (mode) {
            assert_memory_equal(buf + start, long8, sizeof(long8));
        } else {
            assert_memory_equal(buf + start, short8, sizeof(short8));
        }
    }
    /* 47 taken: one full long TNT, written as soon as it is full */
    r = (struct swpt_ring){.buf = buf, .size = sizeof(buf)};
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    uint64_t start = r.head;
    for (int i = 0; i < 47; i++)
        swpt_insn(&t, 0x401000, &I_JCC, 0x401000, &u, 0);
    assert_int_equal(r.head, start + 8);
    assert_memory_equal(buf + start, long47, sizeof(long47));
}

static void test_cfg_check(void **state)
{
    const struct swpt_cfg ok = {.filter = {.user = true}, .psb_period = 256};
    struct swpt_cfg c;
    const char *why = NULL;
    uint8_t buf[64];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt t;

    (void)state;
    assert_int_equal(swpt_cfg_check(&ok, &why), 0);
    c = ok;
    c.psb_period = 1u << 20;
    assert_int_equal(swpt_cfg_check(&c, &why), 0);
    const uint32_t bad_periods[] = {0, 128, 257, 3000, 1u << 21};
    for (unsigned i = 0; i < 5; i++) {
        c = ok;
        c.psb_period = bad_periods[i];
        assert_int_equal(swpt_cfg_check(&c, &why), SWPT_EINVAL);
        assert_non_null(strstr(why, "psb_period"));
    }
    c = ok;
    c.filter.user = false;
    assert_int_equal(swpt_cfg_check(&c, &why), SWPT_EINVAL);
    assert_non_null(strstr(why, "neither"));
    c = ok;
    c.filter.nranges = 5;
    assert_int_equal(swpt_cfg_check(&c, &why), SWPT_EINVAL);
    c = ok;
    c.filter.nranges = 2;
    c.filter.range[1].lo = 10;
    c.filter.range[1].hi = 9;
    assert_int_equal(swpt_cfg_check(&c, &why), SWPT_EINVAL);
    assert_non_null(strstr(why, "lo > hi"));
    assert_int_equal(swpt_cfg_check(NULL, NULL), SWPT_EINVAL);
    /* a bad configuration leaves the generator off: nothing written */
    c.psb_period = 100;
    swpt_start(&t, &c, &r, &U64, 0x1000, 0);
    assert_false(t.on);
    swpt_insn(&t, 0x1000, &I_RET, 0x2000, &U64, 0);
    assert_int_equal(r.head, 0);
}

/* ---- the tour: one program through every kind of transfer ---- */

#define KBASE 0xffffffff81000000ull
struct tour {
    struct code c;
    uint64_t m0, loop, call, callj, sys, intr, int3, dcall, far, back, ijmp, end;
    uint64_t f, f2, f2j, k, ki, kb, c32, c32j;
};

static void build_tour(struct tour *w)
{
    struct code *c = &w->c;

    memset(w, 0, sizeof(*w));
    org(c, 0, 0x401000); /* F: nop; ret */
    w->f = NOP(c);
    RET(c);
    org(c, 0, 0x401100); /* F2: nop; jnz +1; nop; ret */
    w->f2 = NOP(c);
    w->f2j = JNZ(c, here(c) + 3);
    NOP(c);
    RET(c);
    org(c, 0, KBASE); /* syscall entry: nop; sysret */
    w->k = NOP(c);
    SYSRET(c);
    org(c, 0, KBASE + 0x100); /* interrupt handler */
    w->ki = NOP(c);
    IRET(c);
    org(c, 0, KBASE + 0x200); /* #BP handler */
    w->kb = NOP(c);
    IRET(c);
    org(c, 0, 0x500000); /* 32-bit code: nop; jnz self; jmp far [eax] */
    w->c32 = NOP(c);
    w->c32j = JNZ(c, here(c));
    JMPF(c);
    org(c, 0, 0x400000); /* main */
    w->m0 = NOP(c);
    w->loop = JNZ(c, here(c));
    w->call = CALL_RAX(c);
    w->callj = JNZ(c, w->call);
    w->sys = SYSCALL(c);
    w->intr = NOP(c);
    w->int3 = INT3(c);
    w->dcall = CALL(c, w->f2);
    w->far = JMPF(c);
    w->back = NOP(c);
    w->ijmp = JMP_RAX(c);
    w->end = NOP(c);
    NOP(c);
}

/* run the tour: `loops` taken jcc, `calls` indirect calls */
static void run_tour(struct sim *s, struct tour *w, unsigned loops, unsigned calls)
{
    struct swpt_ctx c32 = U64;

    c32.cs = X86_CODE32;
    step(s); /* m0 */
    for (unsigned i = 0; i < loops; i++)
        jcc(s, true);
    jcc(s, false);
    for (unsigned i = 0; i < calls; i++) {
        go(s, w->f, NULL);     /* call rax */
        step(s);               /* nop */
        go(s, w->callj, NULL); /* ret */
        jcc(s, i + 1 < calls);
    }
    go(s, w->k, &K64); /* syscall */
    step(s);
    go(s, w->intr, &U64);  /* sysret */
    event(s, w->ki, &K64); /* interrupt before intr */
    step(s);
    go(s, w->intr, &U64); /* iret */
    step(s);              /* intr: nop */
    go(s, w->kb, &K64);   /* int3 */
    step(s);
    go(s, w->dcall, &U64);     /* iret */
    step(s);                   /* call F2 */
    step(s);                   /* nop */
    jcc(s, true);              /* jnz +1 */
    go(s, w->dcall + 5, NULL); /* ret */
    go(s, w->c32, &c32);       /* jmp far to 32-bit code */
    step(s);
    for (int i = 0; i < 3; i++)
        jcc(s, i < 2);
    go(s, w->back, &U64); /* jmp far back to 64-bit */
    step(s);
    go(s, w->end, NULL); /* jmp rax */
    step(s);
    swpt_stop(&s->t, s->ip);
}

static void tour_with(const struct swpt_cfg *cfg, unsigned loops, unsigned calls,
                      struct swpt_dec_stats *st, unsigned counts[SWPT_PKT_TYPES], size_t *expected)
{
    static struct tour w;
    struct sim s;

    build_tour(&w);
    sim_start(&s, &w.c, cfg, 1 << 20, false, w.m0, &U64);
    run_tour(&s, &w, loops, calls);
    check(&s, counts, st);
    *expected = s.nexp;
    sim_free(&s);
}

static const struct swpt_cfg CFG_ALL = {.filter = {.user = true, .kernel = true},
                                        .psb_period = 1 << 16};

static void test_tour_all(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    size_t ne;

    (void)state;
    for (int v = 0; v < 4; v++) {
        cfg.long_tnt = v & 1;
        cfg.tsc = v & 2;
        tour_with(&cfg, 100, 3, &st, n, &ne);
        assert_true(ne > 100 + 20);
        assert_int_equal(st.async_branch, 2); /* the interrupt and INT3 */
        assert_int_equal(st.exec_mode, 3);    /* PSB+, to 32-bit and back */
        assert_int_equal(n[ppt_tip_pgd], 1);  /* only swpt_stop's */
        assert_int_equal(n[ppt_fup], 3);      /* interrupt, INT3, stop */
        assert_int_equal(n[ppt_tsc], cfg.tsc ? 1 : 0);
        assert_true(n[v & 1 ? ppt_tnt_64 : ppt_tnt_8] > 0);
    }
}

/* CPL filter: user only excludes the kernel, kernel only excludes user code */
static void test_tour_cpl(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    size_t ne_all, ne_user, ne_kernel;

    (void)state;
    tour_with(&cfg, 10, 2, &st, n, &ne_all);
    cfg.filter.kernel = false;
    tour_with(&cfg, 10, 2, &st, n, &ne_user);
    assert_int_equal(n[ppt_pip], 0);        /* OS = 0: no PIP at all (33.4.2.7) */
    assert_int_equal(st.disabled, 1);       /* syscall */
    assert_int_equal(st.async_disabled, 3); /* interrupt, INT3, stop (FUP + TIP.PGD) */
    assert_int_equal(st.enabled, 4);        /* start, sysret, 2 iret */
    cfg.filter.kernel = true;
    cfg.filter.user = false;
    tour_with(&cfg, 10, 2, &st, n, &ne_kernel);
    assert_int_equal(ne_kernel, 6); /* 3 handlers x (nop, sysret/iret) */
    assert_int_equal(st.enabled, 3);
    assert_int_equal(st.disabled, 3); /* sysret, 2 iret */
    assert_int_equal(ne_all, ne_user + ne_kernel);
}

/* IP ranges: main only (calls out leave the range), the called functions only */
static void test_tour_ranges(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    size_t ne_all, ne_main, ne_funcs;

    (void)state;
    tour_with(&cfg, 10, 5, &st, n, &ne_all);
    cfg.filter.nranges = 1;
    cfg.filter.range[0].lo = 0x400000;
    cfg.filter.range[0].hi = 0x400fff;
    tour_with(&cfg, 10, 5, &st, n, &ne_main);
    assert_true(n[ppt_tip_pgd] >= 9); /* 5 calls, syscall, interrupt, int3, F2 */
    assert_true(ne_main > 0 && ne_main < ne_all);
    cfg.filter.nranges = 2;
    cfg.filter.range[0].lo = 0x401000;
    cfg.filter.range[0].hi = 0x4010ff;
    cfg.filter.range[1].lo = 0x401100;
    cfg.filter.range[1].hi = 0x4011ff;
    tour_with(&cfg, 10, 5, &st, n, &ne_funcs);
    assert_int_equal(ne_funcs, 5 * 2 + 3); /* F x 5, F2 once */
    assert_int_equal(st.enabled, 6);
}

/* periodic PSB+: many, and every one keeps the decode exact */
static void test_tour_psb(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    size_t ne;

    (void)state;
    cfg.psb_period = 256;
    tour_with(&cfg, 1000, 2000, &st, n, &ne);
    assert_true(n[ppt_psb] > 40);
    assert_int_equal(n[ppt_psb], n[ppt_psbend]);
    cfg.filter.nranges = 1; /* PSB+ also while outside the filter (no FUP then) */
    cfg.filter.range[0].lo = 0x400000;
    cfg.filter.range[0].hi = 0x400fff;
    tour_with(&cfg, 1000, 2000, &st, n, &ne);
    assert_true(n[ppt_psb] > 40);
    assert_true(n[ppt_fup] < n[ppt_psb] + 5);
}

/* OVF: lost steps, resuming inside (FUP) and from outside the filter (TIP.PGE) */
static void test_lost(void **state)
{
    static struct tour w;
    struct sim s;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    struct swpt_cfg cfg = CFG_ALL;

    (void)state;
    for (int v = 0; v < 2; v++) {
        cfg.filter.kernel = v == 0;
        build_tour(&w);
        sim_start(&s, &w.c, &cfg, 1 << 16, false, w.m0, &U64);
        step(&s);
        jcc(&s, true);
        jcc(&s, false);
        go(&s, w.f, NULL);
        step(&s);
        go(&s, w.callj, NULL); /* ret: the last packet before the loss */
        lost(&s, w.sys, &U64);
        go(&s, w.k, &K64); /* syscall */
        lost(&s, w.intr, &U64);
        step(&s);
        swpt_stop(&s.t, s.ip + 1);
        check(&s, n, &st);
        assert_int_equal(n[ppt_ovf], 2);
        assert_int_equal(st.overflow, 2);
        sim_free(&s);
    }
}

/* a CR3 switch between two processes with different code at the same addresses */
struct procs {
    struct code c;
    uint64_t a0, aloop, asys, aend, b0, bloop, bsys, k, kcr3, kret;
};

static void build_procs(struct procs *p)
{
    struct code *c = &p->c;

    memset(p, 0, sizeof(*p));
    org(c, CR3_A, 0x400000);
    p->a0 = NOP(c);
    p->aloop = JNZ(c, here(c));
    p->asys = SYSCALL(c);
    p->aend = NOP(c);
    NOP(c);
    org(c, CR3_B, 0x400000);
    p->bloop = p->b0 = JNZ(c, here(c));
    p->bsys = SYSCALL(c);
    org(c, 0, KBASE);
    p->k = NOP(c);
    p->kcr3 = MOV_CR3(c);
    p->kret = SYSRET(c);
}

static void run_procs(struct sim *s, struct procs *p)
{
    struct swpt_ctx ka = K64, kb = ctx_of(&K64, CR3_B), ub = ctx_of(&U64, CR3_B);

    step(s);
    for (int i = 0; i < 4; i++)
        jcc(s, i < 3);
    go(s, p->k, &ka); /* A: syscall */
    step(s);
    go(s, p->kret, &kb); /* mov cr3 <- B */
    go(s, p->b0, &ub);   /* sysret into B */
    for (int i = 0; i < 9; i++)
        jcc(s, i < 8);
    go(s, p->k, &kb); /* B: syscall */
    step(s);
    go(s, p->kret, &ka);  /* mov cr3 <- A */
    go(s, p->aend, &U64); /* sysret into A */
    step(s);
    swpt_stop(&s->t, s->ip);
}

static void procs_with(const struct swpt_cfg *cfg, bool decode, unsigned n[SWPT_PKT_TYPES],
                       size_t *ne)
{
    static struct procs p;
    struct sim s;
    struct swpt_dec_stats st;
    char err[200];

    build_procs(&p);
    sim_start(&s, &p.c, cfg, 1 << 16, false, p.a0, &U64);
    run_procs(&s, &p);
    if (decode) {
        check(&s, n, &st);
    } else {
        size_t len, whole;
        uint8_t *b = ring_bytes(&s.ring, &len);
        if (swpt_pkt_scan(b, len, n, &whole, err, sizeof(err)) != 0)
            fail_msg("%s", err);
        free(b);
    }
    *ne = s.nexp;
    sim_free(&s);
}

static void test_cr3(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    unsigned n[SWPT_PKT_TYPES];
    size_t ne_all, ne_a, ne_b, ne;

    (void)state;
    /* OS = 1: PIP at each MOV CR3; libipt follows into B's code */
    procs_with(&cfg, true, n, &ne_all);
    assert_int_equal(n[ppt_pip], 3); /* PSB+, two MOV CR3 */
    /* CR3 filter: A only, B only (kernel instructions under the matching CR3 only) */
    cfg.filter.cr3_match = true;
    cfg.filter.cr3 = CR3_A;
    procs_with(&cfg, true, n, &ne_a);
    cfg.filter.cr3 = CR3_B;
    procs_with(&cfg, true, n, &ne_b);
    assert_int_equal(ne_a + ne_b, ne_all);
    assert_int_equal(ne_b, 9 + 1 + 3); /* B's loop, syscall; sysret into B, kernel nop, mov cr3 */
    /* user code only, by IP range with OS = 1: PIPs written while PacketEn = 0 */
    cfg.filter.cr3_match = false;
    cfg.filter.nranges = 1;
    cfg.filter.range[0].lo = 0;
    cfg.filter.range[0].hi = 0x7fffffffffffull;
    procs_with(&cfg, true, n, &ne);
    assert_int_equal(n[ppt_pip], 3);
    assert_int_equal(n[ppt_tip_pge], 3);
    /* OS = 0: no PIP (libipt could not follow the switch without sideband) */
    cfg.filter.nranges = 0;
    cfg.filter.kernel = false;
    procs_with(&cfg, false, n, &ne);
    assert_int_equal(n[ppt_pip], 0);
}

/* one program's code seen by two processes with PCIDs and PTI PGD pairs (the kernel half at
 * an 8 KiB-aligned PGD, the user half 4 KiB above it with PCID bit 11 set, as Linux does) */
struct pcid_world {
    struct code c;
    uint64_t u0, usys, k, kcr3, kret;
};

static void build_pcid(struct pcid_world *p)
{
    struct code *c = &p->c;

    memset(p, 0, sizeof(*p));
    org(c, 0, 0x400000); /* the same program in both processes */
    p->u0 = NOP(c);
    JNZ(c, here(c));
    p->usys = SYSCALL(c);
    org(c, 0, KBASE);
    p->k = NOP(c);
    p->kcr3 = MOV_CR3(c);
    p->kret = SYSRET(c);
}

#define PGD_A 0x40000ull
#define PGD_B 0x46000ull
static struct swpt_ctx half(uint64_t pgd, unsigned pcid, bool user)
{
    struct swpt_ctx x = user ? U64 : K64;

    x.cr3 = pgd | pcid | (user ? 0x1800u : 0);
    return x;
}

/* A (PCID 3) runs, switches to B (PCID 4), which switches back to A under a new PCID 5 */
static void run_pcid(struct sim *s, struct pcid_world *p)
{
    struct swpt_ctx ka3 = half(PGD_A, 3, false), kb = half(PGD_B, 4, false),
                    ub = half(PGD_B, 4, true), ka5 = half(PGD_A, 5, false),
                    ua5 = half(PGD_A, 5, true);
    for (int round = 0; round < 2; round++) {
        step(s);
        for (int i = 0; i < 3; i++)
            jcc(s, i < 2);
        go(s, p->k, round ? &kb : &ka3); /* syscall */
        step(s);
        go(s, p->kret, round ? &ka5 : &kb); /* mov cr3 */
        go(s, p->u0, round ? &ua5 : &ub);   /* sysret */
    }
    step(s);
    swpt_stop(&s->t, s->ip);
}

static size_t pcid_with(const struct swpt_cfg *cfg, unsigned n[SWPT_PKT_TYPES])
{
    static struct pcid_world p;
    struct sim s;
    struct swpt_dec_stats st;

    build_pcid(&p);
    struct swpt_ctx ua3 = half(PGD_A, 3, true);
    sim_start(&s, &p.c, cfg, 1 << 16, false, p.u0, &ua3);
    run_pcid(&s, &p);
    check(&s, n, &st);
    size_t ne = s.nexp;
    sim_free(&s);
    return ne;
}

/* the CR3 match may ignore the PCID and the PTI half (ABI 6, `ptvisor-ctl trace`): one
 * process's user and kernel halves under any PCID, never the other process */
static void test_cr3_ignore(void **state)
{
    struct swpt_cfg cfg = CFG_ALL;
    unsigned n[SWPT_PKT_TYPES];
    const char *why;

    (void)state;
    size_t all = pcid_with(&cfg, n);
    assert_int_equal(all, 2 * 8 + 1); /* 2 x (5 user + 3 kernel), the last nop */
    cfg.filter.cr3_match = true;
    cfg.filter.cr3 = half(PGD_A, 3, true).cr3; /* what TRACE_START's caller ran under */
    size_t exact = pcid_with(&cfg, n);
    assert_int_equal(exact, 5);    /* A's user half under PCID 3 only */
    cfg.filter.cr3_ignore = 0xfff; /* the PCID: A's user half under 3 and 5 */
    assert_int_equal(pcid_with(&cfg, n), 5 + 1);
    cfg.filter.cr3_ignore = 0x1fff; /* and the kernel half: A's kernel work too, B's never */
    size_t a = pcid_with(&cfg, n);
    assert_int_equal(a, 5 + 2 + 1 + 1); /* A user, A's syscall, the SYSRET back into A, A */
    cfg.filter.cr3 = half(PGD_B, 4, false).cr3;
    assert_int_equal(pcid_with(&cfg, n) + a, all);
    /* only the low 13 bits may be ignored */
    cfg.filter.cr3_ignore = 0x3fff;
    assert_int_not_equal(swpt_cfg_check(&cfg, &why), 0);
    assert_non_null(strstr(why, "12:0"));
}

/* a start trigger: silent until the first instruction at start_ip the filter admits (not the
 * same address in another process, not before), then a PSB+ and TIP.PGE there */
static void test_start_trigger(void **state)
{
    static struct procs p;
    struct swpt_cfg cfg = CFG_ALL;
    struct swpt_dec_stats st;
    unsigned n[SWPT_PKT_TYPES];
    struct sim s;

    (void)state;
    build_procs(&p);
    /* B's loop sits at A's aloop's neighbour: trigger at B's first instruction with CR3 = A
     * first (never fires there: B runs it under CR3_B), then at A's aend */
    cfg.filter.cr3_match = true;
    cfg.filter.cr3 = CR3_A;
    cfg.filter.start_at = true;
    cfg.filter.start_ip = p.aend;
    sim_start(&s, &p.c, &cfg, 1 << 16, false, p.a0, &U64);
    assert_false(s.t.pkt_en);
    run_procs(&s, &p);
    check(&s, n, &st);
    assert_int_equal(s.nexp, 1); /* aend's nop */
    assert_int_equal(s.exp[0], p.aend);
    assert_int_equal(n[ppt_psb], 2);     /* the start's PSB+ (silent) and the trigger's */
    assert_int_equal(n[ppt_pip], 1);     /* only the trigger's PSB+ names a CR3 */
    assert_int_equal(n[ppt_tip_pge], 1); /* at the trigger */
    assert_int_equal(st.enabled, 1);
    sim_free(&s);

    /* the trigger at B's SYSCALL, an address A never runs an instruction at, while A is
     * filtered: another process at that IP never fires it */
    cfg.filter.start_ip = p.bsys;
    sim_start(&s, &p.c, &cfg, 1 << 16, false, p.a0, &U64);
    run_procs(&s, &p);
    check(&s, n, &st);
    assert_int_equal(s.nexp, 0);
    assert_int_equal(n[ppt_psb], 1);
    assert_int_equal(n[ppt_tip_pge] + n[ppt_tip_pgd] + n[ppt_fup], 0); /* stop writes nothing */
    sim_free(&s);
    /* ... and fires there when B is the process filtered */
    cfg.filter.cr3 = CR3_B;
    sim_start(&s, &p.c, &cfg, 1 << 16, false, p.a0, &U64);
    run_procs(&s, &p);
    check(&s, n, &st);
    assert_int_equal(s.nexp, 3); /* B's syscall, the kernel's nop and MOV CR3 under B */
    assert_int_equal(s.exp[0], p.bsys);
    sim_free(&s);

    /* a trigger at the first instruction is a plain start: one PSB+ */
    cfg.filter.cr3 = CR3_A;
    cfg.filter.start_ip = p.a0;
    sim_start(&s, &p.c, &cfg, 1 << 16, false, p.a0, &U64);
    run_procs(&s, &p);
    check(&s, n, &st);
    assert_int_equal(n[ppt_psb], 1);
    assert_int_equal(s.exp[0], p.a0);
    sim_free(&s);

    /* a gap before the trigger loses nothing (no OVF); the trigger still fires after it */
    cfg.filter.start_ip = p.aend;
    sim_start(&s, &p.c, &cfg, 1 << 16, false, p.a0, &U64);
    lost(&s, p.aend, &U64);
    step(&s);
    step(&s);
    swpt_stop(&s.t, s.ip);
    check(&s, n, &st);
    assert_int_equal(n[ppt_ovf], 0);
    assert_int_equal(s.nexp, 2);
    sim_free(&s);
}

/* TRACE_START's registers over the configured defaults (vmm/trace/treq.c) */
static void test_trace_req(void **state)
{
    struct ptv_config pc = {.psb_period = 4096, .trace_filter = PTV_TRACE_USER};
    struct trace_req rq = {0};
    struct swpt_cfg c;
    const char *why;

    (void)state;
    /* no flags: the configured filter, no CR3, no range, no trigger */
    assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), 0);
    assert_true(c.filter.user && !c.filter.kernel && !c.filter.cr3_match && !c.filter.start_at);
    assert_int_equal(c.psb_period, 4096);
    /* the configured CR3 and ranges unless the call names its own */
    pc.trace_cr3 = 0x5000;
    pc.trace_nranges = 1;
    pc.trace_range[0].lo = 0x1000;
    pc.trace_range[0].hi = 0x1fff;
    assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), 0);
    assert_true(c.filter.cr3_match && c.filter.cr3 == 0x5000 && c.filter.nranges == 1);
    /* the caller's CR3, PCID and PTI half ignored, a trigger, the kernel only */
    rq = (struct trace_req){.flags = PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK |
                                     PTV_TRACE_F_START_IP | PTV_TRACE_F_KERNEL | PTV_TRACE_F_RANGE,
                            .cr3 = 0x9000,
                            .caller_cr3 = 0x41803,
                            .cr3_ignore = 0x1fff,
                            .lo = 0x400000,
                            .hi = 0x4fffff,
                            .start_ip = 0x401000};
    assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), 0);
    assert_true(c.filter.kernel && !c.filter.user && c.filter.cr3_match);
    assert_int_equal(c.filter.cr3, 0x41803);
    assert_int_equal(c.filter.cr3_ignore, 0x1fff);
    assert_true(c.filter.start_at && c.filter.start_ip == 0x401000);
    assert_true(c.filter.nranges == 1 && c.filter.range[0].lo == 0x400000);
    /* RCX's CR3 with PTV_TRACE_F_CR3; no mask without PTV_TRACE_F_CR3_MASK */
    rq.flags = PTV_TRACE_F_CR3;
    assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), 0);
    assert_true(c.filter.cr3 == 0x9000 && c.filter.cr3_ignore == 0 && !c.filter.start_at);
    /* refused, each with its reason */
    static const struct {
        uint32_t flags;
        uint64_t ignore;
        const char *why;
    } bad[] = {
        {1u << 7, 0, "unknown"},
        {PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF, 0, "two CR3s"},
        {PTV_TRACE_F_CR3_MASK, 0xfff, "without a CR3"},
        {PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK, 0x2000, "12:0"},
        {PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK, ~0ull, "12:0"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rq = (struct trace_req){.flags = bad[i].flags, .cr3_ignore = bad[i].ignore};
        assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), -1);
        if (!strstr(why, bad[i].why))
            fail_msg("case %u: '%s' does not say '%s'", i, why, bad[i].why);
    }
    /* system-mode PT: what RTIT_CR3_MATCH and a PT with no trigger and no counter can take */
    rq = (struct trace_req){.flags = PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_USER,
                            .caller_cr3 = 0x41803,
                            .cr3_ignore = 0x1f};
    assert_int_equal(trace_req_hw_check(&rq, 0, &why), 0);
    assert_int_equal(trace_req_cr3(&rq), 0x41803);
    assert_int_equal(trace_req_hw_check(&rq, 100, &why), -1); /* a budget */
    rq.cr3_ignore = 0xfff;
    assert_int_equal(trace_req_hw_check(&rq, 0, &why), -1);
    assert_non_null(strstr(why, "CR3[63:5]"));
    rq = (struct trace_req){.flags = PTV_TRACE_F_START_IP};
    assert_int_equal(trace_req_hw_check(&rq, 0, &why), -1);
    rq = (struct trace_req){.flags = PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF};
    assert_int_equal(trace_req_hw_check(&rq, 0, &why), -1);
    /* a configuration that traces nothing is refused too */
    pc.trace_filter = 0;
    rq = (struct trace_req){0};
    assert_int_equal(trace_req_swpt(&rq, &pc, &c, &why), -1);
}

/*
 * overflows counts the OVF packets in the stream: one where a loss touches traced code, none
 * for a loss that begins and ends where PacketEn is 0 (no byte either), none that a stopped
 * ring dropped.  A decoder of the stream finds exactly as many.
 */
static void test_overflows_in_stream(void **state)
{
    struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = 4096};
    uint8_t buf[256];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt t;
    struct swpt_ctx u = {.cr3 = 0x5000, .cpl = 3, .cs = X86_CODE64}, k = u, b = u;
    const uint64_t kip = 0xffffffff81000000ull;
    unsigned n[SWPT_PKT_TYPES];
    char err[200];
    size_t whole;

    (void)state;
    k.cpl = 0;
    b.cr3 = 0x6000;
    cfg.filter.cr3_match = true;
    cfg.filter.cr3 = u.cr3;
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    swpt_insn(&t, 0x401000, &I_SYSCALL, kip, &k, 0);
    const uint64_t head = r.head;
    swpt_lost(&t, kip + 0x40, &k, 0);          /* the kernel, unseen: not the window's */
    swpt_gap(&t, kip + 0x40, 0x402000, &b, 0); /* into another process, unseen */
    swpt_lost(&t, kip + 0x80, &k, 0);          /* and back to the kernel */
    assert_int_equal(r.head, head);
    assert_int_equal(t.overflows, 0);
    swpt_lost(&t, 0x401010, &u, 0); /* the window's code again, by a way not seen: its gap */
    assert_int_equal(t.overflows, 1);
    swpt_insn(&t, 0x401010, &I_NOP, 0x401011, &u, 0);
    swpt_gap(&t, 0x401011, 0x401020, &u, 0); /* inside the window: its gap */
    swpt_gap(&t, 0x401020, kip, &k, 0);      /* from the window's code out: its gap */
    swpt_stop(&t, kip);
    assert_int_equal(t.overflows, 3);
    assert_int_equal(swpt_pkt_scan(buf, (size_t)r.head, n, &whole, err, sizeof(err)), 0);
    assert_int_equal(whole, r.head);
    assert_int_equal(n[ppt_ovf], t.overflows);

    /* a stop-on-full ring that the start filled: the OVF is dropped, not counted */
    r = (struct swpt_ring){.buf = buf, .size = sizeof(buf)};
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    r = (struct swpt_ring){.buf = buf, .size = r.head, .stop_on_full = true};
    swpt_start(&t, &cfg, &r, &u, 0x401000, 0);
    assert_false(r.stopped);
    swpt_lost(&t, 0x401010, &u, 0);
    assert_true(r.stopped);
    assert_true(r.dropped > 0);
    assert_int_equal(t.overflows, 0);
    assert_int_equal(swpt_pkt_scan(buf, (size_t)r.head, n, &whole, err, sizeof(err)), 0);
    assert_int_equal(n[ppt_ovf], 0);
}

/* circular ring: the newest bytes decode from their first PSB to the end */
static void test_ring_wrap(void **state)
{
    static struct tour w;
    struct sim s;
    struct swpt_cfg cfg = CFG_ALL;
    char err[200];
    unsigned n[SWPT_PKT_TYPES];
    struct swpt_dec_stats st;
    size_t len, whole;

    (void)state;
    cfg.psb_period = 256;
    build_tour(&w);
    sim_start(&s, &w.c, &cfg, 2000, false, w.m0, &U64);
    run_tour(&s, &w, 300, 2000);
    assert_true(s.ring.head > 3 * s.ring.size);
    uint8_t *b = ring_bytes(&s.ring, &len);
    assert_int_equal(len, 2000);
    if (swpt_pkt_scan(b, len, n, &whole, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(whole, len);
    /* the decode is a suffix of the whole path */
    struct collect got = {.c = &w.c, .ip = malloc(s.nexp * sizeof(uint64_t)), .cap = s.nexp};
    assert_non_null(got.ip);
    if (swpt_decode(b, len, code_read, collect_insn, &got, &st, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_true(got.n > 50 && got.n < s.nexp);
    assert_memory_equal(got.ip, s.exp + (s.nexp - got.n), got.n * sizeof(uint64_t));
    free(got.ip);
    free(b);
    sim_free(&s);
}

/* stop-on-full: a prefix of the unbounded stream, whole packets only */
static void test_ring_stop(void **state)
{
    static struct tour w;
    struct sim s, big;
    struct swpt_cfg cfg = CFG_ALL;
    char err[200];
    unsigned n[SWPT_PKT_TYPES];
    size_t len, whole;

    (void)state;
    cfg.psb_period = 256;
    for (size_t size = 300; size < 340; size += 7) {
        build_tour(&w);
        sim_start(&big, &w.c, &cfg, 1 << 20, false, w.m0, &U64);
        run_tour(&big, &w, 300, 400);
        sim_start(&s, &w.c, &cfg, size, true, w.m0, &U64);
        run_tour(&s, &w, 300, 400);
        assert_true(s.ring.stopped);
        assert_true(s.ring.head <= size && s.ring.head > size - 16);
        assert_int_equal(s.ring.head + s.ring.dropped, big.ring.head);
        assert_memory_equal(s.ring.buf, big.ring.buf, (size_t)s.ring.head);
        uint8_t *b = ring_bytes(&s.ring, &len);
        if (swpt_pkt_scan(b, len, n, &whole, err, sizeof(err)) != 0)
            fail_msg("%s", err);
        assert_int_equal(whole, len); /* no partial packet at the end */
        free(b);
        sim_free(&s);
        sim_free(&big);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_all_packets),
        cmocka_unit_test(test_bytes_filter_edges),
        cmocka_unit_test(test_bytes_tnt),
        cmocka_unit_test(test_cfg_check),
        cmocka_unit_test(test_tour_all),
        cmocka_unit_test(test_tour_cpl),
        cmocka_unit_test(test_tour_ranges),
        cmocka_unit_test(test_tour_psb),
        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_cr3),
        cmocka_unit_test(test_cr3_ignore),
        cmocka_unit_test(test_start_trigger),
        cmocka_unit_test(test_trace_req),
        cmocka_unit_test(test_ring_wrap),
        cmocka_unit_test(test_ring_stop),
        cmocka_unit_test(test_overflows_in_stream),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
