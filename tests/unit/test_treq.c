/* SPDX-License-Identifier: MIT */
/*
 * The trace VMCALLs' rules (vmm/trace/treq.c), issue 27 defect 7: TRACE_READ's copy.  The
 * destination is resolved once, and the copy writes where it resolved, even when a page's
 * lookup would answer 0 afterwards (another vCPU moved its xAPIC window onto it: the old code
 * looked up again and copied to host address 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace/treq.h"

/* ---- defect 7: TRACE_READ's destination resolved once ---- */

#define NPAGES 6
#define GPA0   0x100000ull /* guest RAM pages GPA0 .. GPA0 + NPAGES pages */

struct mem {
    uint8_t *ram; /* host memory behind the guest pages: identity, as EPT maps guest RAM */
    unsigned lookups[NPAGES + 2];
    int apic_page;      /* -1, or the page another vCPU moves its xAPIC window onto ... */
    unsigned apic_after; /* ... once it was looked up this many times */
    uint64_t wrote_lo, wrote_hi;
    uint64_t stream_off;
};

static uint64_t resolve(void *ctx, uint64_t page)
{
    struct mem *m = ctx;
    assert_int_equal(page & 0xfff, 0);
    if (page < GPA0 || page >= GPA0 + NPAGES * 4096ull)
        return 0; /* not guest RAM */
    unsigned i = (unsigned)((page - GPA0) >> 12);
    if ((int)i == m->apic_page && m->lookups[i] >= m->apic_after)
        return 0; /* the xAPIC window covers it now: EPT maps the APIC-access page there */
    m->lookups[i]++;
    return (uint64_t)(uintptr_t)(m->ram + (page - GPA0));
}

/* the stream's byte at offset o */
static uint8_t stream(uint64_t o)
{
    return (uint8_t)(o * 7 + 3);
}

static uint64_t bytes(void *ctx, uint64_t off, void *dst, uint64_t n)
{
    struct mem *m = ctx;
    uint64_t lo = (uint64_t)(uintptr_t)m->ram, at = (uint64_t)(uintptr_t)dst;
    /* only ever into the guest RAM the lookups gave: never host address 0 + something */
    if (at < lo || at + n > lo + NPAGES * 4096ull)
        fail_msg("a copy to host %#lx, outside the guest RAM at %#lx", (unsigned long)at,
                 (unsigned long)lo);
    for (uint64_t i = 0; i < n; i++)
        ((uint8_t *)dst)[i] = stream(off + i);
    m->wrote_lo = at - lo;
    m->wrote_hi = at - lo + n;
    m->stream_off = off;
    return n;
}

static void mem_init(struct mem *m, uint8_t *ram)
{
    memset(m, 0, sizeof(*m));
    m->ram = ram;
    m->apic_page = -1;
    memset(ram, 0xee, NPAGES * 4096);
}

static void test_read_once(void **state)
{
    (void)state;
    static uint8_t ram[NPAGES * 4096];
    const struct trace_read_io io = {.resolve = resolve, .bytes = bytes};
    struct trace_read_io x = io;
    struct mem m;
    uint64_t copied;

    /* three pages from an odd offset; the middle page becomes the xAPIC window right after
     * the check looked it up: the copy still goes where the check resolved (guest RAM), each
     * page looked up once */
    for (unsigned moved = 0; moved < 4; moved++) {
        mem_init(&m, ram);
        m.apic_page = (int)moved;
        m.apic_after = 1;
        x.ctx = &m;
        const uint64_t gpa = GPA0 + 0x123, len = 2 * 4096 + 100;
        assert_int_equal(trace_read_copy(&x, gpa, len, 5000, &copied), 0);
        assert_int_equal(copied, len);
        for (unsigned i = 0; i < NPAGES; i++)
            assert_int_equal(m.lookups[i], i < 3 ? 1 : 0);
        assert_int_equal(m.wrote_lo, 0x123);
        assert_int_equal(m.wrote_hi, 0x123 + len);
        for (uint64_t i = 0; i < len; i++)
            if (ram[0x123 + i] != stream(5000 + i))
                fail_msg("byte %lu not the stream's", (unsigned long)i);
        assert_int_equal(ram[0x122], 0xee);
        assert_int_equal(ram[0x123 + len], 0xee);
    }
    /* a destination page that is the xAPIC window (or not RAM) when checked: nothing copied */
    mem_init(&m, ram);
    m.apic_page = 2;
    m.apic_after = 0;
    x.ctx = &m;
    assert_int_equal(trace_read_copy(&x, GPA0, 4 * 4096, 0, &copied), -1);
    assert_int_equal(copied, 0);
    assert_int_equal(m.wrote_hi, 0);
    assert_int_equal(ram[0], 0xee);
    assert_int_equal(trace_read_copy(&x, GPA0 + (NPAGES - 1) * 4096ull, 8192, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
    /* no length: nothing looked up, nothing written */
    mem_init(&m, ram);
    x.ctx = &m;
    assert_int_equal(trace_read_copy(&x, 0, 0, 0, &copied), 0);
    assert_int_equal(m.lookups[0], 0);
    /* a range past the top of the physical space, or ending at it (no RAM there): refused,
     * and the walk ends (lib/range.h: never an address that wraps to 0) */
    assert_int_equal(trace_read_copy(&x, ~0ull - 10, 100, 0, &copied), -1);
    assert_int_equal(trace_read_copy(&x, ~0ull - 4095, 4096, 0, &copied), -1);
    assert_int_equal(trace_read_copy(&x, 1, ~0ull, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
}

/* pages that do not make one host range (a resolver that is not the identity): refused before
 * a byte is written */
static uint64_t resolve_scattered(void *ctx, uint64_t page)
{
    struct mem *m = ctx;
    unsigned i = (unsigned)((page - GPA0) >> 12);
    return (uint64_t)(uintptr_t)(m->ram + ((i * 2) % NPAGES) * 4096ull);
}

static void test_read_scattered(void **state)
{
    (void)state;
    static uint8_t ram[NPAGES * 4096];
    struct mem m;
    mem_init(&m, ram);
    const struct trace_read_io io = {.ctx = &m, .resolve = resolve_scattered, .bytes = bytes};
    uint64_t copied;
    assert_int_equal(trace_read_copy(&io, GPA0, 2 * 4096, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
    assert_int_equal(trace_read_copy(&io, GPA0 + 8, 4000, 0, &copied), 0); /* one page */
    assert_int_equal(copied, 4000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_once),
        cmocka_unit_test(test_read_scattered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
