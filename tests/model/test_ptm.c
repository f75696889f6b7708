/* SPDX-License-Identifier: MIT */
/* The PT hardware model against the rules in docs/pt-facts.md (B.4, B.5, D). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "model/ptm.h"
#include "pt/rtit.h"

#define MEM  (4ull << 20)
#define CTLT (RTIT_CTL_TRACEEN | RTIT_CTL_TOPA)

static uint8_t *mem;
static struct ptm m;

static int setup(void **state)
{
    mem = calloc(1, MEM);
    ptm_init(&m, mem, MEM, 39, true);
    return 0;
}

static int teardown(void **state)
{
    free(mem);
    return 0;
}

static void put64(uint64_t pa, uint64_t v)
{
    memcpy(mem + pa, &v, 8);
}

static void bytes(size_t n, uint8_t val)
{
    for (size_t i = 0; i < n; i++)
        ptm_packet(&m, &val, 1, false);
}

static uint32_t idx(void)
{
    return (uint32_t)PTV_FIELD(m.output_mask_ptrs, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
}

static uint64_t off(void)
{
    return m.output_mask_ptrs >> 32;
}

static int pmi_seen;
static void on_pmi(struct ptm *mm, void *arg)
{
    (void)mm;
    (void)arg;
    pmi_seen++;
}

/* D.2: fill -> next entry, END -> next table entry 0, circular */
static void test_topa_traversal(void **state)
{
    put64(0x1000, 0x10000 | (0 << 6));            /* 4K */
    put64(0x1008, 0x20000 | (1 << 6));            /* 8K */
    put64(0x1010, 0x2000 | TOPA_END);             /* -> table 2 */
    put64(0x2000, 0x30000 | (0 << 6) | TOPA_INT); /* 4K, INT */
    put64(0x2008, 0x1000 | TOPA_END);             /* -> table 1: circular */
    m.pmi_cb = on_pmi;
    pmi_seen = 0;
    ptm_enable(&m, CTLT, 0, 0x1000, 0);
    bytes(4096, 0xa1);
    assert_int_equal(idx(), 1);
    assert_int_equal(off(), 0);
    bytes(8192, 0xa2);
    /* lazy END: the pointer rests on the END entry until the next byte */
    assert_int_equal(m.output_base, 0x1000);
    assert_int_equal(idx(), 2);
    bytes(10, 0xa3);
    assert_int_equal(m.output_base, 0x2000);
    assert_int_equal(off(), 10);
    assert_int_equal(mem[0x10000 + 4095], 0xa1);
    assert_int_equal(mem[0x20000 + 8191], 0xa2);
    assert_int_equal(mem[0x30000 + 9], 0xa3);
    assert_int_equal(pmi_seen, 0);
    bytes(4086, 0xa4);
    assert_int_equal(pmi_seen, 1); /* D.3 INT */
    assert_true(m.global_status & GLOBAL_STATUS_TRACE_TOPAPMI);
    bytes(1, 0xa5);
    assert_int_equal(m.output_base, 0x1000); /* wrapped */
    assert_int_equal(mem[0x10000], 0xa5);
    assert_int_equal(m.status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED), 0);
    assert_true(m.status & RTIT_STATUS_TRIGGEREN);
}

/* Model option: END followed right after the fill, the pointer never rests on END. */
static void test_topa_eager_end(void **state)
{
    put64(0x1000, 0x10000);
    put64(0x1008, 0x2000 | TOPA_END);
    put64(0x2000, 0x20000);
    put64(0x2008, 0x1000 | TOPA_END);
    m.eager_end = true;
    ptm_enable(&m, CTLT, 0, 0x1000, 0);
    bytes(4096, 0x11);
    assert_int_equal(m.output_base, 0x2000);
    assert_int_equal(idx(), 0);
    assert_int_equal(off(), 0);
}

/* D.3 STOP: Stopped, TriggerEn cleared, offset = size, output stops */
static void test_topa_stop(void **state)
{
    put64(0x1000, 0x10000 | TOPA_STOP);
    put64(0x1008, 0x1000 | TOPA_END);
    ptm_enable(&m, CTLT, 0, 0x1000, 0);
    bytes(5000, 0x77);
    assert_true(m.status & RTIT_STATUS_STOPPED);
    assert_false(m.status & RTIT_STATUS_TRIGGEREN);
    assert_true(m.ctl & RTIT_CTL_TRACEEN);
    assert_int_equal(idx(), 0);
    assert_int_equal(off(), 4096);
    assert_int_equal(m.bytes, 4096);
    assert_int_equal(mem[0x11000], 0);
}

static void expect_error(uint64_t ctl, uint64_t base, uint64_t mask)
{
    memset(mem + 0x10000, 0, 0x20000);
    ptm_enable(&m, ctl, 0, base, mask);
    bytes(64, 0x55);
    assert_true(m.status & RTIT_STATUS_ERROR);
    assert_false(m.status & RTIT_STATUS_TRIGGEREN);
    assert_int_equal(m.bytes, 0);
    for (size_t i = 0x10000; i < 0x30000; i++)
        assert_int_equal(mem[i], 0);
}

/* D.4 operational errors */
static void test_topa_errors(void **state)
{
    put64(0x1000, 0x10000 | PTV_BIT(1)); /* reserved bit */
    expect_error(CTLT, 0x1000, 0);
    put64(0x1000, 0x10000 | PTV_BIT(45)); /* beyond MAXPHYADDR 39 */
    expect_error(CTLT, 0x1000, 0);
    put64(0x1000, 0x2000 | TOPA_END); /* END in entry 0 */
    expect_error(CTLT, 0x1000, 0);
    put64(0x1000, 0x10000);
    put64(0x1008, 0x2000 | TOPA_END | TOPA_INT); /* END with INT */
    expect_error(CTLT, 0x1000, 1ull << 7);
    put64(0x1000, 0x11000 | (1 << 6)); /* 8K region at a 4K boundary */
    expect_error(CTLT, 0x1000, 0);
    put64(0x1000, 0x10000);
    expect_error(CTLT, 0x1000, 4096ull << 32); /* offset >= size */
    expect_error(CTLT, 0x1080, 0);             /* OUTPUT_BASE bits 11:7 */
}

/* D.2 single-entry ToPA rules */
static void test_single_entry_rules(void **state)
{
    ptm_init(&m, mem, MEM, 39, false);
    put64(0x1000, 0x10000);
    put64(0x1008, 0x10000); /* entry 1 not END */
    expect_error(CTLT, 0x1000, 0);
    put64(0x1008, 0x1000 | TOPA_END);
    ptm_enable(&m, CTLT, 0, 0x1000, 0);
    bytes(4096 + 5, 0x42);
    assert_false(m.status & RTIT_STATUS_ERROR);
    assert_int_equal(off(), 5);
    assert_int_equal(idx(), 0);
}

/* B.5 single range: (base & ~mask) | (offset & mask), circular, no PMI */
static void test_single_range(void **state)
{
    m.pmis = 0;
    ptm_enable(&m, RTIT_CTL_TRACEEN, 0, 0x10000, 0xfff | (4000ull << 32));
    bytes(100, 0x99);
    assert_int_equal(mem[0x10000 + 3999], 0);
    assert_int_equal(mem[0x10000 + 4000], 0x99);
    assert_int_equal(mem[0x10000 + 4095], 0x99);
    assert_int_equal(mem[0x10000 + 3], 0x99);
    assert_int_equal(mem[0x10000 + 4], 0);
    assert_int_equal(m.output_mask_ptrs >> 32, 4);
    assert_int_equal(m.pmis, 0);
    expect_error(RTIT_CTL_TRACEEN, 0x10000, 0xf0ff);                /* mask not contiguous */
    expect_error(RTIT_CTL_TRACEEN, 0x10800, 0xfff);                 /* base overlaps mask */
    expect_error(RTIT_CTL_TRACEEN, 0x10000, 0x7f | (128ull << 32)); /* offset > mask */
}

/* B.4 PacketByteCnt: bytes since the last PSB */
static void test_byte_count(void **state)
{
    uint8_t psb[16], pad = 0;
    for (int i = 0; i < 16; i += 2) {
        psb[i] = 0x02;
        psb[i + 1] = 0x82;
    }
    ptm_enable(&m, RTIT_CTL_TRACEEN, 0, 0x10000, 0xffff);
    for (int i = 0; i < 30; i++)
        ptm_packet(&m, &pad, 1, false);
    ptm_packet(&m, psb, 16, true);
    ptm_packet(&m, &pad, 1, false);
    assert_int_equal(PTV_FIELD(m.status, RTIT_STATUS_BYTECNT_SHIFT, 0x1ffff), 17);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topa_traversal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topa_eager_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topa_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topa_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_entry_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_byte_count, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
