/* SPDX-License-Identifier: MIT */
/*
 * vmm/lib/range.h, the one wrap-safe range walk, and the guest reads that
 * use it at the top of the address space.
 *
 * Every walk runs under a step bound and is compared with a byte-by-byte reference.  The old
 * loop shape of trace_step.c's note_lin, `for (va = lin; va <= lin + 15; va = (va | 0xfff) +
 * 1)`, transcribed as it was, goes through the same checker: it never ends for an instruction
 * in the last page of the address space (the checker stops it at the bound) and notes no page
 * at all 8 bytes below the top -- the checker must catch both, or it proves nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/range.h"

#define RAM_SIZE (1u << 20)
#include "fakes/fake_ram.h"

#define PAGE      4096ull
#define MAX_STEPS 64u /* far above any walk below: len / chunk + 2 */

/* the pieces a walk visits (at most MAX_STEPS of them: a walk that wants more is cut) */
struct pieces {
    uint64_t addr[MAX_STEPS], len[MAX_STEPS];
    unsigned n;
    bool cut;
};

typedef void walker(uint64_t start, uint64_t len, uint64_t chunk, uint64_t space,
                    struct pieces *out);

static bool add(struct pieces *out, uint64_t addr, uint64_t len)
{
    if (out->n == MAX_STEPS) {
        out->cut = true;
        return false;
    }
    out->addr[out->n] = addr;
    out->len[out->n++] = len;
    return true;
}

static void walk_new(uint64_t start, uint64_t len, uint64_t chunk, uint64_t space,
                     struct pieces *out)
{
    struct range_walk w;
    range_for_each(&w, start, len, chunk, space)
    {
        if (!add(out, w.addr, w.len))
            return;
    }
}

/* trace_step.c:404 at 5428e32, only for 16-byte instruction windows in the 64-bit space: one
 * piece per chunk the loop visits, cut at MAX_STEPS where the real loop went on for 2^52 */
static void walk_old(uint64_t lin, uint64_t len, uint64_t chunk, uint64_t space, struct pieces *out)
{
    (void)len;
    (void)space;
    for (uint64_t va = lin; va <= lin + 15; va = (va | (chunk - 1)) + 1) {
        uint64_t end = (va | (chunk - 1)) < lin + 15 ? (va | (chunk - 1)) : lin + 15;
        if (!add(out, va, end - va + 1))
            return;
    }
}

/* the reference: byte i of the range is at (start + i) & space; pieces split where the chunk
 * changes or the address does not follow on */
static void reference(uint64_t start, uint64_t len, uint64_t chunk, uint64_t space,
                      struct pieces *out)
{
    for (uint64_t i = 0; i < len; i++) {
        uint64_t a = (start + i) & space;
        if (out->n && out->addr[out->n - 1] + out->len[out->n - 1] == a && (a & (chunk - 1)) != 0) {
            out->len[out->n - 1]++;
            continue;
        }
        if (!add(out, a, 1))
            return;
    }
}

/* 0 when fn walks [start, start + len) as the reference does, else what went wrong */
static const char *check(walker *fn, uint64_t start, uint64_t len, uint64_t chunk, uint64_t space)
{
    struct pieces got = {.n = 0}, want = {.n = 0};
    fn(start, len, chunk, space, &got);
    reference(start, len, chunk, space, &want);
    if (got.cut)
        return "no end: the walk went past the step bound";
    if (got.n != want.n)
        return "wrong number of pieces";
    for (unsigned i = 0; i < got.n; i++)
        if (got.addr[i] != want.addr[i] || got.len[i] != want.len[i])
            return "wrong piece";
    return 0;
}

static void expect(walker *fn, uint64_t start, uint64_t len, uint64_t chunk, uint64_t space,
                   const char *want_err)
{
    const char *err = check(fn, start, len, chunk, space);
    if (want_err ? !err || strcmp(err, want_err) : err != 0)
        fail_msg("walk of %#lx + %lu (chunk %#lx, space %#lx): %s, expected %s", start, len, chunk,
                 space, err ? err : "ok", want_err ? want_err : "ok");
}

/* note_lin's walk: the pages of the 16 bytes an instruction at lin may cover */
static void test_insn_pages(void **state)
{
    (void)state;
    static const uint64_t lins[] = {0x1000,
                                    0x1ff0,
                                    0x1ff1,
                                    0x1fff,
                                    0xfffffffffffff000ull, /* the hang */
                                    0xfffffffffffff7f0ull,
                                    0xffffffffffffeff8ull,
                                    0xfffffffffffffff0ull,
                                    0xfffffffffffffff1ull, /* across the top: 0 next */
                                    0xfffffffffffffff8ull,
                                    0xffffffffffffffffull};
    for (unsigned i = 0; i < sizeof(lins) / sizeof(lins[0]); i++)
        expect(walk_new, lins[i], 16, PAGE, RANGE_SPACE64, 0);
    /* across the top the second page is linear page 0 */
    struct pieces p = {.n = 0};
    walk_new(0xfffffffffffffff8ull, 16, PAGE, RANGE_SPACE64, &p);
    assert_int_equal(p.n, 2);
    assert_true(p.addr[0] == 0xfffffffffffffff8ull && p.len[0] == 8);
    assert_true(p.addr[1] == 0 && p.len[1] == 8);
    /* outside 64-bit mode the linear space ends at 4 GiB: 32-bit code at its top, and CS base +
     * EIP beyond it (what the tracer computes before the mask) */
    expect(walk_new, 0xfffffff8ull, 16, PAGE, RANGE_SPACE32, 0);
    expect(walk_new, 0x1fffffff8ull, 16, PAGE, RANGE_SPACE32, 0);
    p = (struct pieces){.n = 0};
    walk_new(0xfffffff8ull, 16, PAGE, RANGE_SPACE32, &p);
    assert_true(p.n == 2 && p.addr[0] == 0xfffffff8ull && p.addr[1] == 0);

    /* the checker catches the old shape: a hang in the last page, nothing noted 8 bytes from
     * the top, while it agrees where the old loop was right */
    expect(walk_old, 0x1ff1, 16, PAGE, RANGE_SPACE64, 0);
    expect(walk_old, 0xfffffffffffff000ull, 16, PAGE, RANGE_SPACE64,
           "no end: the walk went past the step bound");
    expect(walk_old, 0xfffffffffffff7f0ull, 16, PAGE, RANGE_SPACE64,
           "no end: the walk went past the step bound");
    expect(walk_old, 0xfffffffffffffff8ull, 16, PAGE, RANGE_SPACE64, "wrong number of pieces");
}

/* longer walks (guest memory copies, dump windows), other chunk sizes, random ones */
static void test_walks(void **state)
{
    (void)state;
    static const uint64_t starts[] = {0,
                                      1,
                                      0xfff,
                                      0x1000,
                                      0x7ffffffff000ull,
                                      0xfffffffffffff000ull,
                                      0xffffffffffffe001ull,
                                      0xffffffffffffffffull,
                                      0xfffff000ull,
                                      0xffffffffull};
    static const uint64_t lens[] = {0, 1, 15, 16, 4095, 4096, 4097, 8192, 3 * 4096 + 5};
    for (unsigned s = 0; s < sizeof(starts) / sizeof(starts[0]); s++)
        for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
            expect(walk_new, starts[s], lens[l], PAGE, RANGE_SPACE64, 0);
            expect(walk_new, starts[s], lens[l], PAGE, RANGE_SPACE32, 0);
            expect(walk_new, starts[s], lens[l], 0x800, RANGE_SPACE64, 0);
        }
    srand(27);
    for (unsigned i = 0; i < 20000; i++) {
        uint64_t chunk = 1ull << (rand() % 11);
        uint64_t start = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 11) ^ (uint64_t)rand();
        if (i & 1)
            start = ~0ull - (uint64_t)(rand() % 20000); /* near the top */
        uint64_t len = (uint64_t)rand() % (chunk * (MAX_STEPS - 3) + 1);
        expect(walk_new, start, len, chunk, (i & 2) ? RANGE_SPACE32 : RANGE_SPACE64, 0);
    }
    /* a huge range ends too, in len / chunk + 2 pieces (not walked byte by byte here) */
    struct range_walk w;
    unsigned n = 0;
    uint64_t total = 0;
    range_for_each(&w, 0xfffffffffffff123ull, ~0ull, 1ull << 62, RANGE_SPACE64)
    {
        total += w.len;
        if (++n > 8)
            break;
    }
    assert_int_equal(n, 5);
    assert_true(total == ~0ull);
}

static void test_fits(void **state)
{
    (void)state;
    assert_true(range_fits(0, 0, RANGE_SPACE64));
    assert_true(range_fits(~0ull, 0, RANGE_SPACE64));
    assert_true(range_fits(~0ull, 1, RANGE_SPACE64));
    assert_false(range_fits(~0ull, 2, RANGE_SPACE64));
    assert_true(range_fits(0, ~0ull, RANGE_SPACE64));
    assert_true(range_fits(1, ~0ull, RANGE_SPACE64)); /* up to and including the top */
    assert_false(range_fits(2, ~0ull, RANGE_SPACE64));
    assert_true(range_fits(0xfffff000ull, 0x1000, RANGE_SPACE32));
    assert_false(range_fits(0xfffff001ull, 0x1000, RANGE_SPACE32));
    assert_false(range_fits(0x100000000ull, 1, RANGE_SPACE32));
    assert_false(range_fits(0xfffffffffffff000ull, 0x1001, RANGE_SPACE64));
    /* an exclusive end for `while (a < end)`: none once the range reaches 2^64 */
    uint64_t end = 0;
    assert_true(range_end(0x1000, 0x2000, &end) && end == 0x3000);
    assert_true(range_end(0xfffffffffffff000ull, 0xfff, &end) && end == ~0ull);
    assert_false(range_end(0xfffffffffffff000ull, 0x1000, &end)); /* end 2^64 reads 0 */
    assert_false(range_end(~0ull, 2, &end));
    assert_true(range_end(~0ull, 0, &end));
}

/*
 * gwalk.c reads guest memory through the walk: 16 code bytes 8 below the top of the 64-bit
 * linear space come from the last page and from linear page 0 (the decision in range.h);
 * under 32-bit paging from the top of the 4 GiB space and its page 0.
 */
static void test_gw_read_top(void **state)
{
    (void)state;
    memset(ram, 0, RAM_SIZE);
    /* 4-level, CR3 0x10000: linear 0xfffffffffffff000 -> 0x20000, linear 0 -> 0x21000 */
    const uint64_t cr3 = 0x10000;
    put64(cr3 + 8 * 511, 0x11000 | 3);
    put64(0x11000 + 8 * 511, 0x12000 | 3);
    put64(0x12000 + 8 * 511, 0x13000 | 3);
    put64(0x13000 + 8 * 511, 0x20000 | 3);
    put64(cr3, 0x14000 | 3);
    put64(0x14000, 0x15000 | 3);
    put64(0x15000, 0x16000 | 3);
    put64(0x16000, 0x21000 | 3);
    for (unsigned i = 0; i < 8; i++) {
        ram[0x20ff8 + i] = (uint8_t)(0xa0 + i);
        ram[0x21000 + i] = (uint8_t)(0xb0 + i);
    }
    struct gw_paging p = {.cr0 = 0x80000001, .cr3 = cr3, .cr4 = 0x20, .efer = 1 << 10};
    uint8_t buf[16], want[16];
    for (unsigned i = 0; i < 8; i++) {
        want[i] = (uint8_t)(0xa0 + i);
        want[8 + i] = (uint8_t)(0xb0 + i);
    }
    unsigned got = 0;
    assert_int_equal(gw_read(&mem, &p, 0xfffffffffffffff8ull, buf, 16, &got), 0);
    assert_int_equal(got, 16);
    assert_memory_equal(buf, want, 16);
    /* 32-bit paging, CR3 0x30000: PDE 1023 -> PT 0x31000 (PTE 1023 -> 0x20000), PDE 0 -> PT
     * 0x32000 (PTE 0 -> 0x21000) */
    p = (struct gw_paging){.cr0 = 0x80000001, .cr3 = 0x30000};
    uint32_t e;
    e = 0x31000 | 3;
    memcpy(ram + 0x30000 + 4 * 1023, &e, 4);
    e = 0x20000 | 3;
    memcpy(ram + 0x31000 + 4 * 1023, &e, 4);
    e = 0x32000 | 3;
    memcpy(ram + 0x30000, &e, 4);
    e = 0x21000 | 3;
    memcpy(ram + 0x32000, &e, 4);
    got = 0;
    assert_int_equal(gw_read(&mem, &p, 0xfffffff8ull, buf, 16, &got), 0);
    assert_int_equal(got, 16);
    assert_memory_equal(buf, want, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insn_pages),
        cmocka_unit_test(test_walks),
        cmocka_unit_test(test_fits),
        cmocka_unit_test(test_gw_read_top),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
