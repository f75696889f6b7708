/* SPDX-License-Identifier: MIT */
/*
 * The on-box self-test's long trace (tests/guest/pt_selftest.c), run on the host: the
 * same guest program — one ToPA output region filled with a known byte, then rounds of a traced
 * burst, a VM exit and a RDMSR of OUTPUT_MASK_PTRS (another exit), >= 1,000 rounds — runs through
 * the real controller + engine on the CPU twin (tests/model/diff.h), and the self-test's own
 * verdict (tests/guest/pt_cont.c) must accept what the guest sees; the differential against
 * bare metal must agree at the end.  Planted faults in the result (a sample going backwards, a
 * byte past the final pointer, a lost PSB) must each be refused; oracle-bites.sh rebuilds this
 * test with the controller's rewind defect put back, and it must fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "guest/pt_cont.h"
#include "model/diff.h"
#include "pt/rtit.h"

#define ROUNDS 1200
#define FILL   0xa5
#define PERIOD 4096 /* ptgen's PSB period in diff.c */
#define EXIT   4    /* diff_step op: an exit of another kind */
#define TRACE  0    /* diff_step op: a traced burst */

struct run {
    uint64_t samples[ROUNDS];
    uint8_t *out;
    uint64_t size, end, traced_exits;
};

static void selftest_program(enum diff_mode mode, struct run *r)
{
    struct diff *x = diff_new(mode, 11);
    /* a single-output-entry host needs a host-contiguous region (a VMM limit, diff.h): one page */
    unsigned code = mode == DIFF_SHADOW_1E ? 0 : 8;
    uint64_t data = diff_data_gpa(), v, ops, exits, bytes, episodes;
    uint64_t topa[2] = {data | (uint64_t)code << TOPA_SIZE_SHIFT | TOPA_STOP,
                        diff_table_gpa() | TOPA_END};

    r->size = 4096ull << code;
    for (uint64_t off = 0; off < r->size; off += 8)
        diff_guest_store(x, data + off, 0x0101010101010101ull * FILL);
    if (!diff_setup_topa(x, topa, 2) || !diff_wrmsr(x, MSR_IA32_RTIT_CTL,
                                                    RTIT_CTL_TRACEEN | RTIT_CTL_OS | RTIT_CTL_USR |
                                                        RTIT_CTL_BRANCH_EN | RTIT_CTL_TOPA))
        fail_msg("mode %d: set-up: %s", mode, diff_why(x));
    for (unsigned i = 0; i < ROUNDS; i++) {
        if (!diff_step(x, TRACE, 20 + (i * 7) % 200, 0) || !diff_step(x, EXIT, 0, 0))
            fail_msg("mode %d round %u: %s", mode, i, diff_why(x));
        /* through the VMM only, as the self-test reads it: the verdict must stand on its own */
        if (!diff_rdmsr(x, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &r->samples[i], false))
            fail_msg("mode %d round %u: RDMSR faulted", mode, i);
    }
    if (!diff_wrmsr(x, MSR_IA32_RTIT_CTL, 0) ||
        !diff_rdmsr(x, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &v, false))
        fail_msg("mode %d: stop: %s", mode, diff_why(x));
    r->end = v >> 32;
    r->out = malloc(r->size);
    diff_guest_read(x, data, r->out, r->size);
    diff_counts(x, &ops, &exits, &r->traced_exits, &bytes, &episodes);
    /* the self-test's verdict first (it must catch a defect on its own), then bare metal */
    struct pt_cont_in in = {r->samples, ROUNDS, r->out, r->size, r->end, FILL, PERIOD};
    struct pt_cont_out o;
    if (!pt_cont_check(&in, &o))
        fail_msg("mode %d: the self-test's verdict: %s", mode, o.why);
    print_message("mode %d: %s, %lu traced exits\n", mode, o.why, (unsigned long)r->traced_exits);
    if (!diff_finish(x))
        fail_msg("mode %d: differs from bare metal: %s", mode, diff_why(x));
    diff_free(x);
}

static void test_selftest_loop_all_modes(void **state)
{
    for (int mode = DIFF_SHADOW; mode <= DIFF_SHADOW_1E; mode++) {
        struct run *r = calloc(1, sizeof(*r));
        selftest_program(mode, r);
        /* the single-entry case fills its one page and stops (STOP): the pointer must hold */
        if (mode != DIFF_SHADOW_1E) {
            assert_true(r->traced_exits >= 2 * ROUNDS);
            assert_true(r->end > 8 * PERIOD); /* a long trace, many PSB periods */
        } else {
            assert_int_equal(r->end, r->size);
        }
        free(r->out);
        free(r);
    }
}

/* each fault a broken VMM could leave must be refused by the verdict */
static void test_verdict_refuses_planted_faults(void **state)
{
    struct run *r = calloc(1, sizeof(*r));
    struct pt_cont_out o;
    selftest_program(DIFF_SHADOW, r);
    struct pt_cont_in in = {r->samples, ROUNDS, r->out, r->size, r->end, FILL, PERIOD};
    assert_true(pt_cont_check(&in, &o));

    /* the pointer went back (the rewind of defect 2, seen from RDMSR) */
    uint64_t keep = r->samples[500];
    r->samples[500] = r->samples[499] - (1ull << 32);
    assert_false(pt_cont_check(&in, &o));
    assert_non_null(strstr(o.why, "backwards"));
    r->samples[500] = keep;

    /* older bytes past the final pointer (a rewound trace written over its start) */
    r->out[r->end + 100] = 0x02;
    assert_false(pt_cont_check(&in, &o));
    assert_non_null(strstr(o.why, "past the final"));
    r->out[r->end + 100] = FILL;

    /* no PSB at the start */
    r->out[3] ^= 0xff;
    assert_false(pt_cont_check(&in, &o));
    r->out[3] ^= 0xff;

    /* a stretch without PSBs (lost output) */
    uint8_t *copy = malloc(r->end);
    memcpy(copy, r->out, r->end);
    for (uint64_t i = 16; i < r->end; i++)
        if (r->out[i] == 0x02 && i > r->end / 4 && i < r->end / 2)
            r->out[i] = 0x00;
    assert_false(pt_cont_check(&in, &o));
    assert_non_null(strstr(o.why, "without a PSB"));
    memcpy(r->out, copy, r->end);

    /* a final pointer outside the region, or an empty trace */
    in.end = 0;
    assert_false(pt_cont_check(&in, &o));
    in.end = r->size + 1;
    assert_false(pt_cont_check(&in, &o));
    in.end = r->end;
    assert_true(pt_cont_check(&in, &o));
    free(copy);
    free(r->out);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selftest_loop_all_modes),
        cmocka_unit_test(test_verdict_refuses_planted_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
