/* SPDX-License-Identifier: MIT */
/*
 * The dump driver (vmm/trace/dump.c) against the host tool's reader: sections go out one
 * line per step, with guest console lines in between, and `ptvisor-trace extract`'s core
 * (tools/ptvisor-trace/fx.c) must give back every stream byte for byte -- the trace window
 * cut from a wrapped ring at a PSB, the crash report, the code snapshots, of every CPU.
 * Also: a block the ring overwrote while the dump went out is reported missing (never
 * invented), metadata of any section is refused before the first line, the PSB search, and
 * who sends a paced dump (struct dump_pacer): a dump whose owner stopped entering the guest
 * is taken over by the next request and finishes whole.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace/dump.h"
#include "frame_dec.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- a fake machine: per CPU a ring (absolute offsets), a crash text, snapshots ---- */

#define NCPU   3
#define RING   (64u << 10)
#define NSNAP  2
#define SNAPSZ 8192u

struct cpu {
    uint8_t ring[RING];
    uint64_t written; /* stream bytes written in all: the ring holds [written - RING, written) */
    char crash[3000];
    uint8_t snap[NSNAP][SNAPSZ];
    struct frame_snap si[NSNAP];
    uint64_t cr3s[2];
};

static struct cpu cpus[NCPU];
static struct dump_sect sect[NCPU];
static uint64_t lose_lo = ~0ull, lose_hi; /* trace offsets the fake ring "overwrote" */

static void ring_put(struct cpu *c, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++, c->written++)
        c->ring[c->written % RING] = p[i];
}

static const uint8_t PSB[16] = {2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
                                2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82};

/* packet-like filler that never holds a PSB, a PSB every `period` bytes */
static void fill(struct cpu *c, uint64_t total, uint64_t period)
{
    uint8_t b[64];
    for (uint64_t done = 0; done < total;) {
        if (done % period == 0) {
            ring_put(c, PSB, sizeof(PSB));
            done += sizeof(PSB);
            continue;
        }
        for (unsigned i = 0; i < sizeof(b); i++)
            b[i] = (uint8_t)rnd();
        for (unsigned i = 0; i < sizeof(b); i++) /* no 0x02: no PSB but the ones put here */
            if (b[i] == 0x02)
                b[i] = 0x03;
        uint64_t n = total - done < sizeof(b) ? total - done : sizeof(b);
        if (done / period != (done + n - 1) / period)
            n = period - done % period;
        ring_put(c, b, n);
        done += n;
    }
}

static size_t ring_read(void *ctx, uint64_t off, uint8_t *buf, size_t len)
{
    const struct cpu *c = ctx;
    uint64_t oldest = c->written > RING ? c->written - RING : 0;
    if (off < oldest || off >= c->written)
        return 0;
    if (len > c->written - off)
        len = c->written - off;
    for (size_t i = 0; i < len; i++)
        buf[i] = c->ring[(off + i) % RING];
    return len;
}

static size_t rd(void *ctx, unsigned s, unsigned stream, uint64_t off, uint8_t *buf, size_t len)
{
    (void)ctx;
    struct cpu *c = &cpus[s];
    if (stream == FRAME_STREAM_TRACE) {
        if (off < lose_hi && off + len > lose_lo)
            return 0;
        return ring_read(c, off, buf, len);
    }
    const uint8_t *p;
    uint64_t n;
    if (stream == FRAME_STREAM_CRASH) {
        p = (const uint8_t *)c->crash;
        n = strlen(c->crash);
    } else {
        p = c->snap[stream - FRAME_STREAM_SNAP(0)];
        n = SNAPSZ;
    }
    if (off >= n)
        return 0;
    if (len > n - off)
        len = n - off;
    memcpy(buf, p + off, len);
    return len;
}

/* lines of the log: frame lines and guest console text, as a capture would hold them */
struct log {
    char **l;
    size_t n, cap;
};

static void put(struct log *L, const char *s, size_t n)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 1024;
        L->l = realloc(L->l, L->cap * sizeof(*L->l));
        assert_non_null(L->l);
    }
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    L->l[L->n++] = strndup(s, n);
}

static unsigned step_lines; /* lines of the current step */

static void sink(void *ctx, const char *s, size_t n)
{
    assert_true(n <= FRAME_LINE_MAX && n && s[n - 1] == '\n');
    put(ctx, s, n);
    step_lines++;
}

static void log_free(struct log *L)
{
    for (size_t i = 0; i < L->n; i++)
        free(L->l[i]);
    free(L->l);
    *L = (struct log){0};
}

static struct fx *read_log(const struct log *L)
{
    struct fx *x = fx_new();
    for (size_t i = 0; i < L->n; i++)
        fx_line(x, L->l[i], strlen(L->l[i]), i + 1, NULL);
    fx_finish(x);
    return x;
}

/* three CPUs: CPU 0 wrapped its ring (the window starts at a PSB), CPU 1 did not, CPU 2
 * crashed (crash text) and ran two code pages */
static void machine(uint64_t window)
{
    memset(cpus, 0, sizeof(cpus));
    lose_lo = ~0ull;
    lose_hi = 0;
    fill(&cpus[0], 5 * RING + 1234, 4096);
    fill(&cpus[1], 20000, 4096);
    fill(&cpus[2], RING + 77, 1024);
    snprintf(cpus[2].crash, sizeof(cpus[2].crash),
             "guest stopped: TRIPLE_FAULT\nrip ffffffff81000000\n");
    for (unsigned c = 0; c < NCPU; c++) {
        struct cpu *p = &cpus[c];
        for (unsigned s = 0; s < NSNAP; s++) {
            for (unsigned i = 0; i < SNAPSZ; i++)
                p->snap[s][i] = (uint8_t)rnd();
            p->si[s] = (struct frame_snap){.va = 0xffffffff81000000ull + s * 0x10000,
                                           .cr3 = s ? 0x1000 : FRAME_CR3_ANY,
                                           .len = SNAPSZ};
        }
        p->cr3s[0] = 0x1000;
        p->cr3s[1] = 0x2000;
        uint64_t oldest = p->written > RING ? p->written - RING : 0;
        uint64_t start = dump_trace_start(ring_read, p, oldest, p->written, window);
        sect[c] = (struct dump_sect){
            .b = {.boot_id = 7,
                  .dump_id = 3,
                  .cpu = c,
                  .ncpus = NCPU,
                  .reason = c == 2 ? FRAME_REASON_CRASH : FRAME_REASON_VMCALL,
                  .source = FRAME_SRC_SOFTWARE,
                  .filter = FRAME_FILTER_KERNEL | FRAME_FILTER_USER,
                  .ring_size = RING,
                  .wrapped = p->written > RING,
                  .cr3s = p->cr3s,
                  .ncr3 = 2,
                  .snaps = p->si,
                  .nsnap = c == 1 ? 0 : NSNAP,
                  .trace_len = p->written - start,
                  .crash_len = c == 2 ? strlen(p->crash) : 0},
            .t_start = start,
        };
    }
}

static void run(struct log *L, bool console)
{
    static struct dump_job j;
    const struct dump_ops ops = {.read = rd};
    const struct frame_out out = {sink, L};
    put(L, "Linux version 6.1 (before the dump)", 35);
    assert_int_equal(dump_start(&j, sect, NCPU, &ops, &out), 0);
    unsigned steps = 0;
    for (;;) {
        step_lines = 0;
        bool more = dump_step(&j);
        enum dump_phase ph = j.phase;
        /* a DATA step is one line; BEGIN / END records are whole records */
        if (more && ph == DUMP_DATA && step_lines)
            assert_true(step_lines <= 8);
        steps++;
        if (console && steps % 7 == 0)
            put(L, "[    1.000000] guest console between frames", 44);
        if (!more)
            break;
    }
    assert_null(j.err);
    assert_true(dump_done(&j));
    assert_false(dump_step(&j)); /* done stays done */
}

static void check(const struct fx *x, unsigned c, unsigned stream, const uint8_t *p, size_t len,
                  uint64_t missing)
{
    struct fx_stream_view v;
    assert_true(fx_stream(x, 0, c, stream, &v));
    assert_int_equal(v.len, len);
    assert_int_equal(v.missing, missing);
    for (size_t i = 0; i < v.nseg; i++)
        assert_memory_equal(v.seg[i].p, p + v.seg[i].off, v.seg[i].len);
    if (!missing && len) /* the whole-stream CRC of END matched */
        assert_int_equal(v.crc, 1);
}

static uint8_t *trace_of(unsigned c)
{
    size_t n = sect[c].b.trace_len;
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    assert_int_equal(ring_read(&cpus[c], sect[c].t_start, p, n), n);
    return p;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct log L = {0};
    machine(16384);
    run(&L, true);
    struct fx *x = read_log(&L);
    assert_int_equal(fx_ndumps(x), 1);
    assert_int_equal(fx_status(x, 0), 0);
    for (unsigned c = 0; c < NCPU; c++) {
        uint8_t *t = trace_of(c);
        assert_true(sect[c].b.trace_len > 0);
        assert_memory_equal(t, PSB, sizeof(PSB)); /* every window was cut at a PSB */
        check(x, c, FRAME_STREAM_TRACE, t, sect[c].b.trace_len, 0);
        free(t);
        check(x, c, FRAME_STREAM_CRASH, (const uint8_t *)cpus[c].crash, sect[c].b.crash_len, 0);
        for (unsigned s = 0; s < sect[c].b.nsnap; s++)
            check(x, c, FRAME_STREAM_SNAP(s), cpus[c].snap[s], SNAPSZ, 0);
    }
    /* the window: the newest 16 KiB moved forward to a PSB, never more than asked */
    assert_true(sect[0].b.trace_len <= 16384 && sect[0].b.trace_len > 16384 - 4096);
    assert_int_equal(sect[1].b.trace_len, 20000 - 4096); /* CPU 1: its PSB at 4096 */
    fx_free(x);
    log_free(&L);
}

/* a block the ring no longer has is skipped: reported missing, never invented */
static void test_lost_block(void **state)
{
    (void)state;
    struct log L = {0};
    machine(0); /* whole rings */
    lose_lo = sect[0].t_start + 8192;
    lose_hi = lose_lo + 1;
    run(&L, false);
    struct fx *x = read_log(&L);
    assert_int_equal(fx_status(x, 0), 2); /* usable, incomplete */
    uint8_t *t = trace_of(0);
    check(x, 0, FRAME_STREAM_TRACE, t, sect[0].b.trace_len, FRAME_BLOCK);
    struct fx_stream_view v;
    assert_true(fx_stream(x, 0, 0, FRAME_STREAM_TRACE, &v));
    assert_int_equal(v.crc, -1); /* END cannot vouch for a stream it did not send whole */
    free(t);
    fx_free(x);
    log_free(&L);
}

static void no_line(void *ctx, const char *s, size_t n)
{
    (void)ctx, (void)s, (void)n;
    fail_msg("a line went out for a refused dump");
}

/* every section's metadata is checked before the first line */
static void test_refused(void **state)
{
    (void)state;
    static struct dump_job j;
    const struct dump_ops ops = {.read = rd};
    const struct frame_out out = {no_line, NULL};
    machine(0);
    struct dump_sect bad[NCPU];

    memcpy(bad, sect, sizeof(bad));
    bad[2].b.ncpus = 2;
    assert_int_equal(dump_start(&j, bad, NCPU, &ops, &out), -1);
    assert_non_null(j.err);
    assert_false(dump_step(&j));

    memcpy(bad, sect, sizeof(bad));
    bad[2].b.cpu = 0;
    assert_int_equal(dump_start(&j, bad, NCPU, &ops, &out), -1);

    memcpy(bad, sect, sizeof(bad));
    struct frame_snap huge = {.va = 0x1000, .cr3 = 0, .len = FRAME_STREAM_MAX + 1};
    bad[2].b.snaps = &huge;
    bad[2].b.nsnap = 1;
    assert_int_equal(dump_start(&j, bad, NCPU, &ops, &out), -1);
    assert_false(dump_step(&j));

    assert_int_equal(dump_start(&j, sect, 0, &ops, &out), -1);
    const struct dump_ops none = {0};
    assert_int_equal(dump_start(&j, sect, NCPU, &none, &out), -1);
}

/* the PSB search: cut at the window, forward to the first whole PSB, across chunk edges */
static void test_trace_start(void **state)
{
    (void)state;
    static struct cpu c;
    uint8_t zero[4096] = {0};
    memset(&c, 0, sizeof(c));
    ring_put(&c, PSB, 16);
    ring_put(&c, zero, 1000);
    /* a PSB across the 512-byte read chunk edge of a search starting at 1016 */
    ring_put(&c, zero, 1016 + 510 - c.written);
    uint64_t psb = c.written;
    ring_put(&c, PSB, 16);
    ring_put(&c, zero, 3000);
    assert_int_equal(dump_trace_start(ring_read, &c, 0, c.written, 0), 0); /* whole: 0 */
    assert_int_equal(dump_trace_start(ring_read, &c, 0, c.written, c.written - 1016), psb);
    assert_int_equal(dump_trace_start(ring_read, &c, 0, c.written, c.written - psb), psb);
    /* one byte after the PSB: no PSB in the window */
    assert_int_equal(dump_trace_start(ring_read, &c, 0, c.written, c.written - psb - 1), c.written);
    /* a half PSB at the end is no PSB */
    uint64_t w = c.written;
    ring_put(&c, PSB, 10);
    assert_int_equal(dump_trace_start(ring_read, &c, 0, c.written, c.written - w), c.written);
    /* oldest > 0 (the ring wrapped) searches even without a window */
    assert_int_equal(dump_trace_start(ring_read, &c, 17, c.written, 0), psb);
    /* an empty ring */
    assert_int_equal(dump_trace_start(ring_read, &c, c.written, c.written, 0), c.written);
}

/* ---- pacing: trace/shim/trace_dump.c's shim as it drives the pacer, over two vCPUs ---- */

#define STALE 80 /* ticks: ORPHAN_SLICES stall budgets */
#define EBUSY (-3)

static struct dump_job pj;
static struct dump_pacer pacer;
static bool dumping[2];
static unsigned sent_by[2]; /* slices each vCPU sent */

/* TRACE_DUMP on cpu at now: start_paced() */
static int request(struct log *L, unsigned cpu, uint64_t now)
{
    static const struct dump_ops ops = {.read = rd};
    if (!dump_done(&pj) && pj.sect) {
        if (dump_pacer_adopt(&pacer, cpu, now, STALE))
            dumping[cpu] = true;
        return EBUSY;
    }
    const struct frame_out out = {sink, L};
    static uint32_t id = 100;
    id++;
    for (unsigned c = 0; c < NCPU; c++)
        sect[c].b.dump_id = id; /* each dump its own number, as plan() gives it */
    assert_int_equal(dump_start(&pj, sect, NCPU, &ops, &out), 0);
    dump_pacer_start(&pacer, cpu, now);
    dumping[cpu] = true;
    return 0;
}

/* before cpu's VM entry at now: trace_dump_slice(), three lines per slice */
static void entry(unsigned cpu, uint64_t now)
{
    if (!dumping[cpu])
        return;
    if (dump_done(&pj) || !dump_pacer_turn(&pacer, cpu, now)) {
        dumping[cpu] = false;
        return;
    }
    sent_by[cpu]++;
    bool more = true;
    for (unsigned k = 0; k < 3 && more; k++)
        more = dump_step(&pj);
    if (!more) {
        dump_pacer_end(&pacer);
        dumping[cpu] = false;
    }
}

/* the owner's slices, and a request from the other vCPU meanwhile, are refused and leave it
 * alone while the owner keeps coming; a clock behind the owner's never counts as stale */
static void test_pacer_rules(void **state)
{
    (void)state;
    struct dump_pacer p = {0};
    assert_false(dump_pacer_adopt(&p, 1, 1000, STALE)); /* no dump: nothing to take */
    dump_pacer_start(&p, 0, 100);
    assert_true(dump_pacer_turn(&p, 0, 150));
    assert_false(dump_pacer_turn(&p, 1, 150));
    assert_false(dump_pacer_adopt(&p, 1, 150 + STALE - 1, STALE));
    assert_false(dump_pacer_adopt(&p, 0, 10000, STALE)); /* the owner's own request */
    assert_false(dump_pacer_adopt(&p, 1, 20, STALE));    /* another CPU's TSC behind */
    assert_true(dump_pacer_turn(&p, 0, 200));
    assert_false(dump_pacer_adopt(&p, 1, 200 + STALE - 1, STALE));
    assert_true(dump_pacer_adopt(&p, 1, 200 + STALE, STALE));
    assert_false(dump_pacer_turn(&p, 0, 300)); /* the old owner, back: not its own now */
    assert_true(dump_pacer_turn(&p, 1, 300));
    dump_pacer_end(&p);
    assert_false(dump_pacer_turn(&p, 1, 310));
    assert_false(dump_pacer_adopt(&p, 0, 10000, STALE));
}

/* the owner parks in wait-for-SIPI after two slices; the other vCPU's
 * requests are EBUSY for a bounded time, then one takes the dump over, it finishes whole from
 * that vCPU's entries (the old owner, back, sends nothing more), and the next request starts
 * a new dump */
static void test_parked_owner(void **state)
{
    (void)state;
    struct log L = {0};
    machine(16384);
    memset(&pj, 0, sizeof(pj));
    pj.phase = DUMP_DONE;
    pacer = (struct dump_pacer){0};
    dumping[0] = dumping[1] = false;
    sent_by[0] = sent_by[1] = 0;
    uint64_t t = 0;
    assert_int_equal(request(&L, 0, t), 0);
    entry(0, ++t);
    entry(0, ++t); /* then cpu 0 parks: no entry any more */
    unsigned busy = 0;
    int rc = EBUSY;
    for (; rc == EBUSY && t < 100000; t++) {
        entry(1, t);
        if (t % 10 == 0 && (rc = request(&L, 1, t)) == EBUSY)
            busy++;
        if (t == 20000) /* cpu 0 gets its SIPI and runs again */
            entry(0, t);
    }
    assert_int_equal(rc, 0);         /* a new dump started: the old one is out */
    assert_true(busy * 10 < 20000);  /* a bounded wait: STALE plus the rest of the dump */
    assert_int_equal(sent_by[0], 2); /* cpu 0 sent its two slices and nothing after */
    assert_true(sent_by[1] > 0);
    while (dumping[1]) /* the second dump, from cpu 1 */
        entry(1, ++t);
    assert_true(dump_done(&pj));
    struct fx *x = read_log(&L);
    assert_int_equal(fx_ndumps(x), 2);
    assert_int_equal(fx_status(x, 0), 0); /* the taken-over dump arrived whole */
    for (unsigned c = 0; c < NCPU; c++) {
        uint8_t *tr = trace_of(c);
        check(x, c, FRAME_STREAM_TRACE, tr, sect[c].b.trace_len, 0);
        free(tr);
    }
    fx_free(x);
    log_free(&L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),  cmocka_unit_test(test_lost_block),
        cmocka_unit_test(test_refused),     cmocka_unit_test(test_trace_start),
        cmocka_unit_test(test_pacer_rules), cmocka_unit_test(test_parked_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
