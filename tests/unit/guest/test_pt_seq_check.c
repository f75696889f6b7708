/* SPDX-License-Identifier: MIT */
/*
 * The VMM-trace self-test's verdict (tests/guest/pt_seq_check.c) on streams written with the
 * VMM's own packet encoder: as the software tracer writes them, as hardware system-mode PT
 * writes them (PSB+ with CBR/TSC, MTC, CYC, PAD, a VM exit as TIP.PGD / TIP.PGE), and with
 * planted faults, each of which must be refused with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "guest/pt_seq_check.h"
#include "pt/pt_pkt.h"

#define START  0xffffffff81001000ull
#define RESUME 0xffffffff81001012ull
#define T4     0xffffffff81001030ull
#define HI     0xffffffff81001040ull
#define AFTER  0xffffffff81200000ull

static const struct pt_seq_expect expect = {
    .start = START, .lo = START, .hi = HI, .tnt = "TTTTNTN", .tips = {T4}, .n_tips = 1};

enum fault { NONE, FLIP, WRONG_START, NO_TIP, OVF_IN, RESUME_OUT, UNKNOWN, CUT, WRONG_TIP };

static size_t stream(uint8_t *buf, size_t cap, bool hardware, enum fault f)
{
    struct pt_pkt_enc e;
    pt_pkt_enc_init(&e, buf, cap);
    pt_pkt_psb(&e);
    if (hardware) {
        pt_pkt_cbr(&e, 0x20);
        pt_pkt_tsc(&e, 0x123456789aull);
    }
    pt_pkt_mode_exec(&e, PT_PKT_EXEC_64, false);
    pt_pkt_psbend(&e);
    pt_pkt_pad(&e);
    pt_pkt_ip(&e, PT_PKT_TIP_PGE, PT_PKT_IPC_AUTO, f == WRONG_START ? START + 4 : START);
    if (hardware) {
        buf[e.len++] = 0x59; /* MTC */
        buf[e.len++] = 0x07;
        pt_pkt_tnt_8(&e, f == FLIP ? 0x1a : 0x1e, 5); /* T T T T N */
        buf[e.len++] = 0x07;                          /* CYC with one more byte */
        buf[e.len++] = 0x10;
        /* the CPUID's VM exit: the trace goes off and on again */
        pt_pkt_ip(&e, PT_PKT_TIP_PGD, PT_PKT_IPC_SUPPRESSED, 0);
        buf[e.len++] = 0x02; /* VMCS */
        buf[e.len++] = 0xc8;
        memset(buf + e.len, 0x11, 5);
        e.len += 5;
        if (f == OVF_IN)
            pt_pkt_ovf(&e);
        pt_pkt_ip(&e, PT_PKT_TIP_PGE, PT_PKT_IPC_AUTO, f == RESUME_OUT ? AFTER : RESUME);
        pt_pkt_tnt_8(&e, 0x2, 2); /* T N */
    } else {
        pt_pkt_tnt_64(&e, f == FLIP ? 0x7b : 0x7a, 7); /* T T T T N T N */
        if (f == OVF_IN)
            pt_pkt_ovf(&e);
    }
    if (f == UNKNOWN) {
        buf[e.len++] = 0x02;
        buf[e.len++] = 0x99;
    }
    if (f != NO_TIP)
        pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_AUTO, f == WRONG_TIP ? T4 + 2 : T4);
    pt_pkt_ip(&e, PT_PKT_TIP_PGD, hardware ? PT_PKT_IPC_AUTO : PT_PKT_IPC_SUPPRESSED, AFTER);
    if (hardware) { /* later PSBs with nothing of the sequence */
        pt_pkt_psb(&e);
        pt_pkt_tsc(&e, 0x123456799aull);
        pt_pkt_psbend(&e);
    }
    if (f == CUT) {
        pt_pkt_psb(&e);
        e.len -= 3;
    }
    return e.len;
}

static void check(bool hardware, enum fault f, const char *why_has)
{
    uint8_t buf[512];
    struct pt_seq_seen s;
    size_t n = stream(buf, sizeof(buf), hardware, f);
    bool ok = pt_seq_check(buf, n, &expect, &s);
    print_message("%s fault %d: %s: %s\n", hardware ? "hardware" : "software", f,
                  ok ? "ok" : "refused", s.why);
    assert_int_equal(ok, f == NONE);
    if (why_has)
        assert_non_null(strstr(s.why, why_has));
}

static void test_good_streams(void **state)
{
    check(false, NONE, "branches TTTTNTN");
    check(true, NONE, "1 resumed");
}

static void test_planted_faults(void **state)
{
    for (int hw = 0; hw < 2; hw++) {
        check(hw, FLIP, "expected TTTTNTN");
        check(hw, WRONG_START, "TIP.PGE");
        check(hw, NO_TIP, "0 indirect branch targets");
        check(hw, WRONG_TIP, "indirect branch 0 went to");
        check(hw, OVF_IN, "OVF");
        check(hw, UNKNOWN, "unknown packet 0x02 0x99");
        check(hw, CUT, "cut short");
    }
    check(true, RESUME_OUT, "outside the sequence");
}

/* the walker never reads past the buffer and always ends, whatever the bytes */
static void test_random_bytes(void **state)
{
    uint8_t buf[256];
    struct pt_seq_seen s;
    uint64_t r = 99;
    for (int i = 0; i < 200000; i++) {
        size_t n = 1 + i % sizeof(buf);
        for (size_t k = 0; k < n; k++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            buf[k] = (uint8_t)r;
        }
        (void)pt_seq_check(buf, n, &expect, &s);
        assert_true(strlen(s.why) < sizeof(s.why));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_streams),
        cmocka_unit_test(test_planted_faults),
        cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
