/* SPDX-License-Identifier: MIT */
/*
 * Adversarial guests: ToPA tables, entries or OUTPUT_BASE at VMM memory, MMIO,
 * unmapped or VMM-protected GPAs; END to itself / cycles without output;
 * illegal entries; table edits while tracing.  Each must end as hardware
 * would for the guest (operational error: STATUS.Error = 1, TriggerEn = 0,
 * no output), the VMM must not crash, and no byte outside the guest's own RAM
 * may change: the canary pages around the fake VMM memory stay identical.
 * Where the rule is architectural, the reference model (the guest's tables
 * used directly) must raise the operational error too.
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

struct bad_case {
    const char *name;
    uint64_t ctl, base, mask;
    uint64_t e[4][2]; /* (gpa, value) stores, gpa 0 = none */
    const char *reason;
    bool arch; /* hardware on the guest's own tables raises it too */
};

#define E(b, c, f) ((uint64_t)(b) | ((uint64_t)(c) << TOPA_SIZE_SHIFT) | (f))
#define RING(x)                                                                                    \
    {                                                                                              \
        {T0, (x)},                                                                                 \
        {                                                                                          \
            T0 + 8, T0 | TOPA_END                                                                  \
        }                                                                                          \
    }

static const struct bad_case cases[] = {
    {"base in VMM", H_CTL_TOPA, FW_GPA_VMM, 0, RING(E(0x100000, 0, 0)), "ToPA table in VMM memory",
     false},
    {"base in MMIO", H_CTL_TOPA, FW_GPA_MMIO, 0, RING(E(0x100000, 0, 0)), "ToPA table in MMIO",
     false},
    {"base unmapped", H_CTL_TOPA, 0x7f000000, 0, RING(E(0x100000, 0, 0)),
     "ToPA table not in guest RAM", false},
    {"END to VMM",
     H_CTL_TOPA,
     T0,
     0,
     {{T0, E(0x100000, 0, 0)}, {T0 + 8, FW_GPA_VMM | TOPA_END}},
     "ToPA table in VMM memory",
     false},
    {"region in VMM", H_CTL_TOPA, T0, 0, RING(E(FW_GPA_VMM, 4, 0)), "output region in VMM memory",
     false},
    {"region in MMIO", H_CTL_TOPA, T0, 0, RING(E(FW_GPA_MMIO, 0, 0)), "output region in MMIO",
     false},
    {"region unmapped", H_CTL_TOPA, T0, 0, RING(E(0x7f000000, 0, 0)),
     "output region not in guest RAM", false},
    {"region RAM into VMM", H_CTL_TOPA, T0, 0, RING(E(0, 13, 0)), "output region in VMM memory",
     false},
    {"region over own table", H_CTL_TOPA, T0, 0, RING(E(0, 5, 0)),
     "output region overlaps a ToPA table (VMM rule)", false},
    {"END to itself in entry 0",
     H_CTL_TOPA,
     T0,
     0,
     {{T0, T0 | TOPA_END}},
     "ToPA END in entry 0",
     true},
    {"cycle without output",
     H_CTL_TOPA,
     T0,
     0,
     {{T0, E(0x100000, 0, 0)}, {T0 + 8, T1 | TOPA_END}, {T1, T0 | TOPA_END}},
     "ToPA END in entry 0",
     true},
    {"misaligned region", H_CTL_TOPA, T0, 0, RING(E(0x101000, 3, 0)),
     "ToPA output region not aligned to its size", true},
    {"128 MiB region", H_CTL_TOPA, T0, 0, RING(E(0x8000000, 15, 0)),
     "output region not in guest RAM", false},
    {"reserved bit", H_CTL_TOPA, T0, 0, RING(E(0x100000, 0, PTV_BIT(10))),
     "ToPA entry reserved bits set", true},
    {"END with STOP",
     H_CTL_TOPA,
     T0,
     0,
     {{T0, E(0x100000, 0, 0)}, {T0 + 8, T0 | TOPA_END | TOPA_STOP}},
     "ToPA END entry with INT or STOP",
     true},
    {"base bits 11:7", H_CTL_TOPA, T0 | 0x100, 0, RING(E(0x100000, 0, 0)),
     "OUTPUT_BASE bits 11:7 not 0 in ToPA mode", true},
    {"offset >= size", H_CTL_TOPA, T0, 4096ull << 32, RING(E(0x100000, 0, 0)),
     "OutputOffset >= output region size", true},
    {"single range in VMM",
     H_CTL_SINGLE,
     FW_GPA_VMM,
     0xffff,
     {{0, 0}},
     "output region in VMM memory",
     false},
    {"single range in MMIO",
     H_CTL_SINGLE,
     FW_GPA_MMIO,
     0xfff,
     {{0, 0}},
     "output region in MMIO",
     false},
    {"single range across RAM end",
     H_CTL_SINGLE,
     0,
     0x1ffffff,
     {{0, 0}},
     "output region in VMM memory",
     false},
    {"single range mask",
     H_CTL_SINGLE,
     0x100000,
     0x10fff,
     {{0, 0}},
     "single-range mask not contiguous",
     true},
    {"single range overlap",
     H_CTL_SINGLE,
     0x100800,
     0xfff,
     {{0, 0}},
     "single-range base overlaps the mask",
     true},
};

static void run_case(const struct bad_case *c, bool protect_table)
{
    struct harness *h = h_new(1, true, true);
    uint8_t *before = malloc(FW_GRAM_SIZE);
    uint64_t b, m;

    for (int i = 0; i < 4 && c->e[i][0]; i++)
        h_gset(h, c->e[i][0], c->e[i][1]);
    if (protect_table)
        h->fw->protected_by_vmm[c->base >> 12] = true;
    fw_guest_snapshot(h->fw, before);
    if (h_start(h, c->ctl, 0, c->base, c->mask) != PT_SHADOW_OPERR)
        fail_msg("%s: accepted", c->name);
    if (protect_table) {
        assert_string_equal(h->err.reason, "ToPA table in a VMM-protected page");
    } else if (strcmp(h->err.reason, c->reason)) {
        fail_msg("%s: reason '%s'", c->name, h->err.reason);
    }
    /* the guest-visible outcome: operational error, registers as written */
    assert_int_equal(pt_status_operr(RTIT_STATUS_TRIGGEREN),
                     RTIT_STATUS_ERROR);                      /* TriggerEn cleared, Error set */
    assert_false(pt_shadow_guest_view(&h->sh, 0, 0, &b, &m)); /* no shadow: nothing moves */
    h_trace(h, 256 << 10);
    assert_int_equal(h->hw.bytes, 0);
    if (c->arch && !protect_table) {
        if (!(h->ref.status & RTIT_STATUS_ERROR))
            fail_msg("%s: reference hardware saw no error", c->name);
    }
    /* nothing outside or inside the guest changed */
    assert_true(fw_canaries_ok(h->fw));
    {
        uint8_t *after = malloc(FW_GRAM_SIZE);
        fw_guest_snapshot(h->fw, after);
        assert_memory_equal(before, after, FW_GRAM_SIZE);
        free(after);
    }
    assert_int_equal(h->fw->pool_in_use, 0);
    /* only the refusal record's guest tables stay protected (pt_shadow.h) */
    assert_int_equal(h->sh.mode, PT_SHADOW_REFUSED);
    assert_int_equal(fw_wp_count(h->fw), h->sh.ntables);
    for (uint16_t t = 0; t < h->sh.ntables; t++)
        assert_true(h->fw->wp[h->sh.table_gpa[t] >> 12]);
    free(before);
    h_free(h);
}

static void test_bad_setups(void **state)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], false);
}

static void test_table_in_protected_page(void **state)
{
    run_case(&cases[4], true); /* a legal-looking ring whose table the VMM protects */
}

/* STOP in entry 0 is legal: the trace stops after the first region, as on hardware. */
static void test_stop_in_entry_0(void **state)
{
    struct harness *h = h_new(1, true, true);

    h_gset(h, T0, E(0x104000, 2, TOPA_STOP));
    h_gset(h, T0 + 8, T0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 100 << 10);
    h_compare(h);
    assert_true(h->hw.status & RTIT_STATUS_STOPPED);
    assert_int_equal(h->hw.bytes, 16 << 10);
    h_free(h);
}

/* A hostile edit while tracing: the running shadow stays safe, the next enable rejects it. */
static void test_hostile_edit_while_tracing(void **state)
{
    struct harness *h = h_new(1, true, true);
    uint64_t b, m, s;

    h_gset(h, T0, E(0x100000, 0, 0));
    h_gset(h, T0 + 8, E(0x104000, 2, TOPA_INT));
    h_gset(h, T0 + 16, T0 | TOPA_END);
    assert_int_equal(h_start(h, H_CTL_TOPA, 0, T0, 0), PT_SHADOW_OK);
    h_trace(h, 1000);
    h_gset(h, T0 + 8, E(FW_GPA_VMM, 2, TOPA_INT)); /* point the region at the VMM */
    h_gset(h, T0, E(0x101000, 4, 0));              /* and a misaligned one */
    ptgen_run(&h->ghw, &h->hw, 1 << 20);
    assert_true(fw_canaries_ok(h->fw));
    assert_int_equal(h->hw.wild, 0);
    h_stop(h, &b, &m, &s);
    assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OPERR);
    h_gset(h, T0, E(0x100000, 0, 0));
    assert_int_equal(h_start(h, H_CTL_TOPA, s, b, m), PT_SHADOW_OPERR);
    assert_string_equal(h->err.reason, "output region in VMM memory");
    assert_true(fw_canaries_ok(h->fw));
    h_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_setups),
        cmocka_unit_test(test_table_in_protected_page),
        cmocka_unit_test(test_stop_in_entry_0),
        cmocka_unit_test(test_hostile_edit_while_tracing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
