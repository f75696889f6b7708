/* SPDX-License-Identifier: MIT */
/*
 * End to end: a guest builds ToPA tables (or a single range) in fake guest
 * RAM, the engine shadows them through the fake EPT (GPA != HPA), the PT model
 * traces into host-physical memory, and the guest must see exactly what it
 * would see on a machine where its tables are used directly (the reference
 * model on a flat GPA == PA copy): same bytes at the same GPAs, same
 * OUTPUT_BASE / MASK_PTRS / STATUS, same PMIs.  The guest's buffer then decodes
 * with libipt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "model/harness.h"
#include "pt/rtit.h"

#define T0 0x10000ull
#define T1 0x11000ull
#define T2 0x12000ull

struct ring {
    uint64_t gpa[16], size[16], table[16];
    uint16_t entry[16];
    int n;
};

static void ring_add(struct ring *r, uint64_t table, uint16_t entry, uint64_t gpa, uint64_t size)
{
    r->table[r->n] = table;
    r->entry[r->n] = entry;
    r->gpa[r->n] = gpa;
    r->size[r->n++] = size;
}

/* The three-table circular ToPA used by most tests; INT on E (T1[1]) and F (T2[0]). */
static void build_three_tables(struct harness *h, struct ring *r, uint64_t e_flags)
{
    memset(r, 0, sizeof(*r));
    h_gset(h, T0 + 0, h_entry(0x100000, 0, 0));
    h_gset(h, T0 + 8, h_entry(0x200000, 4, 0));
    h_gset(h, T0 + 16, h_entry(0x104000, 2, 0));
    h_gset(h, T0 + 24, T1 | TOPA_END);
    h_gset(h, T1 + 0, h_entry(0x400000, 6, 0));
    h_gset(h, T1 + 8, h_entry(0x108000, 1, e_flags));
    h_gset(h, T1 + 16, T2 | TOPA_END);
    h_gset(h, T2 + 0, h_entry(0x800000, 8, TOPA_INT));
    h_gset(h, T2 + 8, T0 | TOPA_END);
    ring_add(r, T0, 0, 0x100000, 4096);
    ring_add(r, T0, 1, 0x200000, 64 << 10);
    ring_add(r, T0, 2, 0x104000, 16 << 10);
    ring_add(r, T1, 0, 0x400000, 256 << 10);
    ring_add(r, T1, 1, 0x108000, 8 << 10);
    ring_add(r, T2, 0, 0x800000, 1 << 20);
}

/* Gather the guest's buffer oldest byte first (from the current position around the ring). */
static uint8_t *gather_ring(struct harness *h, const struct ring *r, bool wrapped, uint64_t *n)
{
    uint64_t total = 0, pos = 0;
    uint32_t idx =
        (uint32_t)PTV_FIELD(h->ref.output_mask_ptrs, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
    uint64_t off = h->ref.output_mask_ptrs >> 32;
    uint8_t *buf;

    for (int i = 0; i < r->n; i++) {
        if (r->table[i] == h->ref.output_base && r->entry[i] == idx)
            pos = total + off;
        total += r->size[i];
    }
    buf = malloc(total);
    for (int i = 0, at = 0; i < r->n; at += (int)r->size[i], i++)
        fw_guest_read(h->fw, r->gpa[i], buf + at, r->size[i]);
    if (!wrapped) {
        *n = h->ref.bytes;
        return buf;
    }
    /* rotate so that the oldest byte (at pos) comes first */
    {
        uint8_t *rot = malloc(total);
        memcpy(rot, buf + pos, total - pos);
        memcpy(rot + total - pos, buf, pos);
        free(buf);
        *n = total;
        return rot;
    }
}

static void assert_decodes(struct harness *h, const struct ring *r, bool wrapped)
{
    uint64_t n;
    int packets = 0;
    uint8_t *buf = gather_ring(h, r, wrapped, &n);

    assert_int_equal(h_decode(buf, n, &packets), 0);
    assert_true(packets > 1000);
    free(buf);
}

static void count_host_entries(const struct pt_shadow *sh, unsigned *outputs)
{
    *outputs = 0;
    for (unsigned i = 0; i < sh->npages; i++) {
        for (unsigned j = 0; j < sh->pages[i].n; j++)
            *outputs += !(sh->pages[i].tbl[j] & TOPA_END);
    }
}

static void test_multi_table_no_wrap(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;
    unsigned outputs;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    assert_int_equal(h->sh.mode, PT_SHADOW_TOPA);
    count_host_entries(&h->sh, &outputs);
    assert_true(outputs > 6); /* scrambled HPA: guest regions were split */
    assert_true(h->fw->wp[T0 >> 12] && h->fw->wp[T1 >> 12] && h->fw->wp[T2 >> 12]);
    assert_int_equal(fw_wp_count(h->fw), 3);
    h_trace(h, 1 << 20);
    h_compare(h);
    assert_int_equal(h->hw.pmis, 1); /* region E filled, F not yet */
    assert_true(h->hw.global_status & GLOBAL_STATUS_TRACE_TOPAPMI);
    assert_int_equal(h->ref.output_base, T2);
    assert_decodes(h, &r, false);
    h_free(h);
}

static void test_multi_table_wraps(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 3500 << 10);
    h_compare(h);
    assert_int_equal(h->hw.pmis, 5); /* E and F, twice; E a third time */
    assert_decodes(h, &r, true);
    h_free(h);
}

static void test_start_mid_table_merges(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;

    build_three_tables(h, &r, TOPA_INT);
    /* current entry T0[2], offset 100: the walk from T0[0] merges into it */
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, (2ull << 7) | (100ull << 32)), PT_SHADOW_OK);
    h_trace(h, 2 << 20);
    h_compare(h);
    h_free(h);
}

static void test_stop_region(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;

    build_three_tables(h, &r, TOPA_INT | TOPA_STOP);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 2 << 20);
    h_compare(h);
    assert_true(h->hw.status & RTIT_STATUS_STOPPED);
    assert_false(h->hw.status & RTIT_STATUS_TRIGGEREN);
    assert_int_equal(h->ref.output_base, T1);
    /* D.3: OutputOffset left equal to the region size, entry = the STOP entry */
    assert_int_equal(h->ref.output_mask_ptrs, 0x7full | (1ull << 7) | ((8ull << 10) << 32));
    assert_int_equal(h->hw.pmis, 1);
    /* the guest restarts without clearing Stopped: nothing is traced, its view is unchanged */
    {
        uint64_t b, m, s;
        h_stop(h, &b, &m, &s);
        assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OK);
        h_trace(h, 10000);
        h_compare(h);
        assert_int_equal(h->hw.bytes, 0);
        /* then clears Stopped and rewinds to the start (as Linux does) */
        h_stop(h, &b, &m, &s);
        assert_int_equal(h_start(h, H_CTL_TOPA, s & ~RTIT_STATUS_STOPPED, T0, 0), PT_SHADOW_OK);
        h_trace(h, 1 << 20);
        h_compare(h);
        assert_true(h->hw.status & RTIT_STATUS_STOPPED);
    }
    h_free(h);
}

/* Full build with the current position deep inside a region split into host pieces. */
static void test_start_in_later_piece(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T2, 700ull << 42), PT_SHADOW_OK);
    assert_int_not_equal(h->sh.h_mask >> 32, 700ull << 10); /* not the first piece */
    h_trace(h, 1500 << 10);
    h_compare(h);
    h_free(h);
}

static void test_stop_resume_fast_path(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;
    uint64_t b, m, s, first_page;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    first_page = h->sh.pages[0].hpa;
    for (int i = 0; i < 6; i++) {
        h_trace(h, 300 << 10);
        h_compare(h);
        h_stop(h, &b, &m, &s);
        assert_int_equal(b, h->ref.output_base);
        assert_int_equal(m, h->ref.output_mask_ptrs);
        assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OK);
        assert_int_equal(h->sh.pages[0].hpa, first_page); /* reused, not rebuilt */
    }
    h_trace(h, 100 << 10);
    h_compare(h);
    assert_decodes(h, &r, true);
    h_free(h);
}

static void test_edit_while_stopped_rebuilds(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;
    uint64_t b, m, s;
    uint32_t changes;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 100 << 10);
    h_stop(h, &b, &m, &s);
    changes = h->fw->wp_changes;
    /* the guest moves region F elsewhere: the store exits, protection is lifted */
    h_gset(h, T2 + 0, h_entry(0xc00000, 7, TOPA_INT));
    assert_true(h->sh.stale);
    assert_int_equal(fw_wp_count(h->fw), 0);
    assert_true(h->fw->wp_changes > changes);
    h_gset(h, T2 + 8, T0 | TOPA_END); /* a second store no longer exits */
    assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OK);
    assert_false(h->sh.stale);
    assert_int_equal(fw_wp_count(h->fw), 3);
    h_trace(h, 1500 << 10);
    h_compare(h);
    h_free(h);
}

static void test_edit_while_tracing(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;
    uint64_t b, m, s;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 10 << 10);
    /* SDM: must not edit in-use tables while TraceEn = 1.  Defined outcome: the
     * write completes, hardware keeps the old (cached) view, nothing leaves the
     * guest's RAM, the edit applies at the next TraceEn 0->1. */
    h_gset(h, T1 + 0, h_entry(0xd00000, 6, 0));
    ptgen_run(&h->ghw, &h->hw, 2 << 20);
    assert_true(fw_canaries_ok(h->fw));
    assert_int_equal(h->hw.wild, 0);
    assert_false(h->hw.status & RTIT_STATUS_ERROR);
    assert_true(pt_shadow_guest_view(&h->sh, h->hw.output_base, h->hw.output_mask_ptrs, &b, &m));
    ptm_disable(&h->hw);
    s = h->hw.status;
    /* restart both machines from what the guest reads now */
    ptgen_init(&h->gref, 7, 4096);
    ptgen_init(&h->ghw, 7, 4096);
    assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OK);
    h->ref.global_status = h->hw.global_status;
    h->ref.pmis = h->hw.pmis = 0;
    memset(h->ref.pmi_at, 0, sizeof(h->ref.pmi_at));
    memset(h->hw.pmi_at, 0, sizeof(h->hw.pmi_at));
    h_trace(h, 1 << 20);
    h_compare(h);
    h_free(h);
}

/*
 * Single-entry ToPA guests (no CPUID.14.0:ECX[1]), on multi and single-entry hosts: one table
 * [region, END back to itself] (SDM "ToPA Errors": an END naming another table is an
 * operational error).  The pointer comes to rest on entry 1 (the END) after the region fills
 * (lazy END, ptm.h); re-enabling from there goes on at entry 0.
 */
static void single_entry_case(bool host_multi)
{
    struct harness *h = h_new(1, false, host_multi);
    uint64_t s0 = 0x13000, b, m, st;

    h_gset(h, s0 + 0, h_entry(0x300000, 4, TOPA_INT));
    h_gset(h, s0 + 8, s0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, s0, 0), PT_SHADOW_OK);
    for (unsigned i = 0; i < h->sh.npages; i++) {
        /* never a chain of host tables when the host is single-entry */
        assert_int_equal(h->sh.npages, host_multi ? h->sh.npages : 1);
        assert_int_equal(h->sh.pages[i].tbl[h->sh.pages[i].n - 1],
                         h->sh.pages[i + 1 < h->sh.npages ? i + 1 : 0].hpa | TOPA_END);
    }
    h_trace(h, 64 << 10); /* exactly one fill: the pointer rests on the END */
    h_compare(h);
    h_stop(h, &b, &m, &st);
    assert_int_equal(b, s0);
    assert_int_equal(m, h_eager_end ? 0x7f : 0x7f | (1ull << 7)); /* rests on END if lazy */
    ptgen_init(&h->gref, 3, 4096);
    ptgen_init(&h->ghw, 3, 4096);
    assert_int_equal(h_start(h, H_CTL_TOPA, st, b, m), PT_SHADOW_OK);
    h->ref.pmis = h->hw.pmis = 0;
    memset(h->ref.pmi_at, 0, sizeof(h->ref.pmi_at));
    memset(h->hw.pmi_at, 0, sizeof(h->hw.pmi_at));
    h_trace(h, 700 << 10);
    h_compare(h);
    assert_int_equal(h->hw.pmis, 10);
    /* a guest chaining two tables gets the operational error on both machines */
    h_stop(h, &b, &m, &st);
    h_gset(h, 0x14000 + 0, h_entry(0x440000, 5, 0));
    h_gset(h, 0x14000 + 8, 0x14000 | TOPA_END);
    h_gset(h, s0 + 8, 0x14000 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, s0, 0), PT_SHADOW_OPERR);
    h_trace(h, 100 << 10);
    assert_true(h->ref.status & RTIT_STATUS_ERROR);
    assert_int_equal(h->ref.bytes, 0);
    h_free(h);
}

/* A single-entry host cannot split a region that is not contiguous in host memory. */
static void test_single_entry_host_needs_contiguous(void **state)
{
    struct harness *h = h_new(1, false, false);
    uint64_t s0 = 0x13000;

    h_gset(h, s0 + 0, h_entry(0x300000, 7, 0)); /* 512 KiB: two scrambled 256 KiB blocks */
    h_gset(h, s0 + 8, s0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, s0, 0), PT_SHADOW_OPERR);
    assert_string_equal(h->err.reason,
                        "output region not contiguous in host memory (single-entry ToPA host)");
    h_free(h);
    h = h_new(1, false, true); /* a multi-entry host splits it */
    h_gset(h, s0 + 0, h_entry(0x300000, 7, 0));
    h_gset(h, s0 + 8, s0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, s0, 0), PT_SHADOW_OK);
    h_trace(h, 1 << 20);
    h_compare(h);
    h_free(h);
}

static void test_single_entry_guest_multi_host(void **state)
{
    single_entry_case(true);
}

static void test_single_entry_guest_single_entry_host(void **state)
{
    single_entry_case(false);
}

static void test_single_range_direct(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r = {0};
    uint64_t b, m, s;

    /* GPA block 20 maps to an aligned, contiguous HPA block */
    assert_int_equal(h_start(h, H_CTL_SINGLE, 0, 0x500000, 0xffff | (5ull << 32)), PT_SHADOW_OK);
    assert_int_equal(h->sh.mode, PT_SHADOW_SINGLE);
    assert_false(h->sh.h_topa);
    assert_int_not_equal(h->sh.h_base, 0x500000);
    h_trace(h, 200 << 10);
    h_compare(h);
    assert_int_equal(h->hw.pmis, 0);
    h_stop(h, &b, &m, &s);
    assert_int_equal(h_start(h, H_CTL_SINGLE, s, b, m), PT_SHADOW_OK);
    h_trace(h, 50 << 10);
    h_compare(h);
    ring_add(&r, 0, 0, 0x500000, 64 << 10);
    h_free(h);
}

static void test_single_range_as_topa(void **state)
{
    struct harness *h = h_new(1, true, true);
    uint64_t b, m, s;

    /* 1 MiB spanning scrambled blocks: not contiguous in HPA */
    assert_int_equal(h_start(h, H_CTL_SINGLE, 0, 0x400000, 0xfffff | (12345ull << 32)),
                     PT_SHADOW_OK);
    assert_int_equal(h->sh.mode, PT_SHADOW_SINGLE_AS_TOPA);
    assert_true(h->sh.h_topa);
    h_trace(h, 2500 << 10);
    h_compare(h);
    assert_int_equal(h->hw.pmis, 0);
    h_stop(h, &b, &m, &s);
    assert_int_equal(b, 0x400000);
    assert_int_equal(h_start(h, H_CTL_SINGLE, s, b, m), PT_SHADOW_OK);
    h_trace(h, 300 << 10);
    h_compare(h);
    h_free(h);
}

static void test_small_single_range(void **state)
{
    struct harness *h = h_new(1, true, true);

    /* 256 bytes inside a swapped page pair: always expressible directly */
    assert_int_equal(h_start(h, H_CTL_SINGLE, 0, 0x441100, 0xff), PT_SHADOW_OK);
    assert_int_equal(h->sh.mode, PT_SHADOW_SINGLE);
    h_trace(h, 5000);
    h_compare(h);
    h_free(h);
}

static void test_rebuild_frees_and_reprotects(void **state)
{
    struct harness *h = h_new(1, true, true);
    struct ring r;

    build_three_tables(h, &r, TOPA_INT);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    for (int i = 0; i < 20; i++) {
        struct pt_out_cfg cfg = {.ctl = H_CTL_TOPA,
                                 .output_base = T1,
                                 .output_mask_ptrs = (uint64_t)(i % 2) << 7,
                                 .topa_multi = true,
                                 .maxphyaddr = H_MAXPA};
        assert_int_equal(pt_shadow_build(&h->sh, h->scr, &h->env, &cfg, &h->err), PT_SHADOW_OK);
        assert_int_equal(h->fw->pool_in_use, 2u * h->sh.npages); /* old pages freed */
        assert_int_equal(fw_wp_count(h->fw), 3);
        assert_int_equal(h->fw->wp_errors, 0);
    }
    h_free(h);
}

/*
 * Linux-shaped buffer (perf AUX, pt.c): three full table pages of 511 4 KiB
 * regions + END, INT on the last region of each table, circular.  Host runs
 * longer than a host page chain through host-only END entries.
 */
static void test_linux_shaped_ring(void **state)
{
    struct harness *h = h_new(1, true, true);
    const unsigned per = 511, ntab = 3;
    unsigned outputs;

    for (unsigned t = 0; t < ntab; t++) {
        uint64_t tg = 0x20000 + 4096ull * t;
        for (unsigned k = 0; k < per; k++)
            h_gset(h, tg + 8ull * k,
                   h_entry(0x200000 + 4096ull * (t * per + k), 0, k == per - 1 ? TOPA_INT : 0));
        h_gset(h, tg + 8ull * per, (0x20000 + 4096ull * ((t + 1) % ntab)) | TOPA_END);
    }
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, 0x20000, 0), PT_SHADOW_OK);
    count_host_entries(&h->sh, &outputs);
    assert_int_equal(outputs, per * ntab);
    h_trace(h, 5 << 20); /* PMIs at 2044, 4088 KiB */
    h_compare(h);
    assert_int_equal(h->hw.pmis, 2);
    h_trace(h, 2 << 20); /* and at 6132 KiB, after the wrap */
    h_compare(h);
    assert_int_equal(h->hw.pmis, 3);
    h_free(h);
}

/* One guest table whose regions split into more pieces than a host page holds. */
static void test_host_page_chaining(void **state)
{
    struct harness *h = h_new(1, true, true);
    unsigned n = 0;

    /* 16 KiB regions in the pairwise-swapped blocks (b % 4 == 1): 4 host pieces each */
    for (unsigned b = 1; b < 64; b += 4) {
        for (unsigned k = 0; k < 16; k++, n++)
            h_gset(h, T0 + 8ull * n,
                   h_entry((b << 18) + (k << 14), 2, n % 100 == 99 ? TOPA_INT : 0));
    }
    h_gset(h, T0 + 8ull * n, T0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, (3ull << 7) | (5000ull << 32)), PT_SHADOW_OK);
    assert_true(h->sh.npages >= 3); /* 1024 pieces: chained host pages (plus the merge run) */
    h_trace(h, 6 << 20);
    h_compare(h);
    assert_true(h->hw.pmis >= 2);
    h_free(h);
}

/* The libipt check can fail: a bad opcode (pt-facts E: 0xC9) in the stream is reported. */
static void test_decoder_catches_garbage(void **state)
{
    uint8_t *mem = calloc(1, 1 << 20);
    struct ptm m;
    struct ptgen g;
    int packets;

    ptm_init(&m, mem, 1 << 20, H_MAXPA, true);
    ptgen_init(&g, 3, 4096);
    ptm_enable(&m, H_CTL_SINGLE, 0, 0, 0xffff);
    ptgen_run(&g, &m, 60000);
    assert_int_equal(h_decode(mem, m.bytes, &packets), 0);
    assert_true(packets > 1000);
    mem[30000] = 0xc9;
    assert_int_not_equal(h_decode(mem, m.bytes, &packets), 0);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_table_no_wrap),
        cmocka_unit_test(test_multi_table_wraps),
        cmocka_unit_test(test_start_mid_table_merges),
        cmocka_unit_test(test_stop_region),
        cmocka_unit_test(test_start_in_later_piece),
        cmocka_unit_test(test_stop_resume_fast_path),
        cmocka_unit_test(test_edit_while_stopped_rebuilds),
        cmocka_unit_test(test_edit_while_tracing),
        cmocka_unit_test(test_single_entry_guest_multi_host),
        cmocka_unit_test(test_single_entry_guest_single_entry_host),
        cmocka_unit_test(test_single_entry_host_needs_contiguous),
        cmocka_unit_test(test_single_range_direct),
        cmocka_unit_test(test_single_range_as_topa),
        cmocka_unit_test(test_small_single_range),
        cmocka_unit_test(test_rebuild_frees_and_reprotects),
        cmocka_unit_test(test_linux_shaped_ring),
        cmocka_unit_test(test_host_page_chaining),
        cmocka_unit_test(test_decoder_catches_garbage),
    };
    int failed =
        cmocka_run_group_tests_name("lazy END (pointer may rest on END)", tests, NULL, NULL);

    h_eager_end = true;
    failed +=
        cmocka_run_group_tests_name("eager END (pointer never rests on END)", tests, NULL, NULL);
    return failed;
}
