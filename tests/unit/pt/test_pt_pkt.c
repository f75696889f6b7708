/* SPDX-License-Identifier: MIT */
/*
 * Packet encoder (vmm/pt/pt_pkt.c), with libipt as the oracle: every stream the encoder writes
 * is decoded by libipt's packet decoder (types and payloads) and, for IP compression, by its
 * query decoder, which reconstructs full IPs from compressed ones the way a trace tool does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <intel-pt.h>

#include "pt/pt_pkt.h"
#include "pt/rtit.h"

#define BUFSZ 4096

static uint8_t buf[BUFSZ];

struct dec {
    struct pt_packet_decoder *d;
};

static struct pt_packet_decoder *open_dec(const uint8_t *b, size_t len, bool sync)
{
    struct pt_config cfg;
    struct pt_packet_decoder *d;

    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)b;
    cfg.end = (uint8_t *)b + len;
    d = pt_pkt_alloc_decoder(&cfg);
    assert_non_null(d);
    if (sync)
        assert_true(pt_pkt_sync_forward(d) >= 0);
    else
        assert_int_equal(pt_pkt_sync_set(d, 0), 0);
    return d;
}

static void next(struct pt_packet_decoder *d, struct pt_packet *p, enum pt_packet_type want)
{
    int r = pt_pkt_next(d, p, sizeof(*p));

    if (r < 0)
        fail_msg("libipt: %s (wanted packet type %d)", pt_errstr(pt_errcode(r)), want);
    if (p->type != want)
        fail_msg("libipt decoded packet type %d, wanted %d", p->type, want);
}

static void at_end(struct pt_packet_decoder *d)
{
    struct pt_packet p;

    assert_int_equal(pt_pkt_next(d, &p, sizeof(p)), -pte_eos);
}

/* One stream with every packet type, decoded packet by packet. */
static void every_packet_type(void **state)
{
    struct pt_pkt_enc e;
    struct pt_packet_decoder *d;
    struct pt_packet p;
    const uint64_t cr3 = 0x000ffffedcba9000ull | 0x7e0; /* CR3[51:5], PCID bits included */
    const uint64_t ip1 = 0xffffffff81000000ull, ip2 = 0xffffffff8100abcdull;

    pt_pkt_enc_init(&e, buf, sizeof(buf));
    assert_int_equal(pt_pkt_psb(&e), 16);
    assert_int_equal(pt_pkt_tsc(&e, 0xfe23456789abcdefull), 8);
    assert_int_equal(pt_pkt_cbr(&e, 42), 4);
    assert_int_equal(pt_pkt_mode_exec(&e, PT_PKT_EXEC_64, false), 2);
    assert_int_equal(pt_pkt_pip(&e, cr3, true), 8);
    assert_int_equal(pt_pkt_psbend(&e), 2);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP_PGE, PT_PKT_IPC_FULL, ip1), 9);
    assert_int_equal(pt_pkt_tnt_8(&e, 0x5, 3), 1);
    assert_int_equal(pt_pkt_tnt_64(&e, 0x5555aaaa1234ull, 47), 8);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_UPDATE_16, ip2), 3);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_FUP, PT_PKT_IPC_UPDATE_32, ip1), 5);
    assert_int_equal(pt_pkt_pad(&e), 1);
    assert_int_equal(pt_pkt_mode_exec(&e, PT_PKT_EXEC_32, false), 2);
    assert_int_equal(pt_pkt_mode_exec(&e, PT_PKT_EXEC_16, false), 2);
    assert_int_equal(pt_pkt_pip(&e, 0x1000, false), 8);
    assert_int_equal(pt_pkt_ovf(&e), 2);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP_PGD, PT_PKT_IPC_SUPPRESSED, 0), 1);
    assert_int_equal(e.len, 16 + 8 + 4 + 2 + 8 + 2 + 9 + 1 + 8 + 3 + 5 + 1 + 2 + 2 + 8 + 2 + 1);

    d = open_dec(buf, e.len, true);
    next(d, &p, ppt_psb);
    next(d, &p, ppt_tsc);
    assert_int_equal(p.payload.tsc.tsc, 0x0023456789abcdefull); /* TSC[55:0] */
    next(d, &p, ppt_cbr);
    assert_int_equal(p.payload.cbr.ratio, 42);
    next(d, &p, ppt_mode);
    assert_int_equal(p.payload.mode.leaf, pt_mol_exec);
    assert_int_equal(pt_get_exec_mode(&p.payload.mode.bits.exec), ptem_64bit);
    next(d, &p, ppt_pip);
    assert_int_equal(p.payload.pip.cr3, cr3 & 0x000fffffffffffe0ull);
    assert_int_equal(p.payload.pip.nr, 1);
    next(d, &p, ppt_psbend);
    next(d, &p, ppt_tip_pge);
    assert_int_equal(p.payload.ip.ipc, pt_ipc_full);
    assert_int_equal(p.payload.ip.ip, ip1);
    next(d, &p, ppt_tnt_8);
    assert_int_equal(p.payload.tnt.bit_size, 3);
    assert_int_equal(p.payload.tnt.payload, 0x5);
    next(d, &p, ppt_tnt_64);
    assert_int_equal(p.payload.tnt.bit_size, 47);
    assert_int_equal(p.payload.tnt.payload, 0x5555aaaa1234ull);
    next(d, &p, ppt_tip);
    assert_int_equal(p.payload.ip.ipc, pt_ipc_update_16);
    assert_int_equal(p.payload.ip.ip, ip2 & 0xffff);
    next(d, &p, ppt_fup);
    assert_int_equal(p.payload.ip.ipc, pt_ipc_update_32);
    assert_int_equal(p.payload.ip.ip, ip1 & 0xffffffff);
    next(d, &p, ppt_pad);
    next(d, &p, ppt_mode);
    assert_int_equal(pt_get_exec_mode(&p.payload.mode.bits.exec), ptem_32bit);
    next(d, &p, ppt_mode);
    assert_int_equal(pt_get_exec_mode(&p.payload.mode.bits.exec), ptem_16bit);
    next(d, &p, ppt_pip);
    assert_int_equal(p.payload.pip.cr3, 0x1000);
    assert_int_equal(p.payload.pip.nr, 0);
    next(d, &p, ppt_ovf);
    next(d, &p, ppt_tip_pgd);
    assert_int_equal(p.payload.ip.ipc, pt_ipc_suppressed);
    at_end(d);
    pt_pkt_free_decoder(d);
}

/* Every TNT length, short and long, with a varying pattern. */
static void tnt_all_lengths(void **state)
{
    for (unsigned n = 1; n <= 47; n++) {
        uint64_t bits = (0x9e3779b97f4a7c15ull * n) & ((1ull << n) - 1);
        struct pt_pkt_enc e;
        struct pt_packet_decoder *d;
        struct pt_packet p;

        pt_pkt_enc_init(&e, buf, sizeof(buf));
        if (n <= 6)
            assert_int_equal(pt_pkt_tnt_8(&e, bits, n), 1);
        assert_int_equal(pt_pkt_tnt_64(&e, bits, n), 8);
        d = open_dec(buf, e.len, false);
        if (n <= 6) {
            next(d, &p, ppt_tnt_8);
            assert_int_equal(p.payload.tnt.bit_size, n);
            assert_int_equal(p.payload.tnt.payload, bits);
        }
        next(d, &p, ppt_tnt_64);
        assert_int_equal(p.payload.tnt.bit_size, n);
        assert_int_equal(p.payload.tnt.payload, bits);
        at_end(d);
        pt_pkt_free_decoder(d);
    }
}

static void invalid_args(void **state)
{
    struct pt_pkt_enc e;

    pt_pkt_enc_init(&e, buf, sizeof(buf));
    assert_int_equal(pt_pkt_tnt_8(&e, 0, 0), PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_tnt_8(&e, 0, 7), PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_tnt_8(&e, 0x8, 3), PT_PKT_EINVAL); /* bit above n */
    assert_int_equal(pt_pkt_tnt_64(&e, 0, 48), PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_tnt_64(&e, 0, 0), PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_mode_exec(&e, (enum pt_pkt_exec)3, false), PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_ip(&e, (enum pt_pkt_ip_kind)0x0c, PT_PKT_IPC_FULL, 0), PT_PKT_EINVAL);
    /* no IP yet: updates cannot be decoded */
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_UPDATE_16, 0x1234), PT_PKT_EINVAL);
    /* non-canonical IP cannot be sign-extended */
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_SEXT_48, 0x0000800000000000ull),
                     PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_FULL, 0xffffffff81000000ull), 9);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_UPDATE_16, 0xffffffff82000000ull),
                     PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_UPDATE_32, 0x00007fff82000000ull),
                     PT_PKT_EINVAL);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, (enum pt_pkt_ipc)5, 0), PT_PKT_EINVAL);
    assert_int_equal(e.len, 9); /* refused packets wrote nothing */
    /* PSB forgets the last IP */
    assert_int_equal(pt_pkt_psb(&e), 16);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_UPDATE_16, 0xffffffff81000000ull),
                     PT_PKT_EINVAL);
}

typedef int (*enc_fn)(struct pt_pkt_enc *e);
static int w_pad(struct pt_pkt_enc *e)
{
    return pt_pkt_pad(e);
}
static int w_psb(struct pt_pkt_enc *e)
{
    return pt_pkt_psb(e);
}
static int w_psbend(struct pt_pkt_enc *e)
{
    return pt_pkt_psbend(e);
}
static int w_ovf(struct pt_pkt_enc *e)
{
    return pt_pkt_ovf(e);
}
static int w_pip(struct pt_pkt_enc *e)
{
    return pt_pkt_pip(e, 0x1234000, true);
}
static int w_mode(struct pt_pkt_enc *e)
{
    return pt_pkt_mode_exec(e, PT_PKT_EXEC_64, false);
}
static int w_tsc(struct pt_pkt_enc *e)
{
    return pt_pkt_tsc(e, 123456789);
}
static int w_cbr(struct pt_pkt_enc *e)
{
    return pt_pkt_cbr(e, 30);
}
static int w_tnt8(struct pt_pkt_enc *e)
{
    return pt_pkt_tnt_8(e, 1, 1);
}
static int w_tnt64(struct pt_pkt_enc *e)
{
    return pt_pkt_tnt_64(e, 1, 40);
}
static int w_tip_full(struct pt_pkt_enc *e)
{
    return pt_pkt_ip(e, PT_PKT_TIP, PT_PKT_IPC_FULL, 0xffffffff81234567ull);
}
static int w_fup_sext(struct pt_pkt_enc *e)
{
    return pt_pkt_ip(e, PT_PKT_FUP, PT_PKT_IPC_SEXT_48, 0xffffffff81234567ull);
}

/* Bounded output: a packet that does not fit writes nothing, never past the end. */
static void bounded_buffer(void **state)
{
    static const enc_fn fns[] = {w_pad, w_psb, w_psbend, w_ovf,   w_pip,      w_mode,
                                 w_tsc, w_cbr, w_tnt8,   w_tnt64, w_tip_full, w_fup_sext};
    static const int sizes[] = {1, 16, 2, 2, 8, 2, 8, 4, 1, 8, 9, 7};

    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        for (int room = 0; room <= sizes[i]; room++) {
            uint8_t area[64];
            struct pt_pkt_enc e;
            const size_t pre = 3; /* some bytes already in the buffer */

            memset(area, 0xcc, sizeof(area));
            pt_pkt_enc_init(&e, area, pre + (size_t)room);
            e.len = pre;
            int r = fns[i](&e);
            if (room < sizes[i]) {
                assert_int_equal(r, PT_PKT_ENOSPC);
                assert_int_equal(e.len, pre);
                for (size_t b = 0; b < sizeof(area); b++)
                    assert_int_equal(area[b], 0xcc);
            } else {
                assert_int_equal(r, sizes[i]);
                assert_int_equal(e.len, pre + (size_t)sizes[i]);
                for (size_t b = pre + (size_t)room; b < sizeof(area); b++)
                    assert_int_equal(area[b], 0xcc);
            }
        }
    }
    /* a NULL buffer holds nothing */
    struct pt_pkt_enc e;
    pt_pkt_enc_init(&e, NULL, 100);
    assert_int_equal(pt_pkt_pad(&e), PT_PKT_ENOSPC);
}

/*
 * IP compression against libipt's query decoder, which applies the last-IP rules: a stream of
 * TIPs under every explicit compression, then pseudo-random IPs under PT_PKT_IPC_AUTO.
 */
static void ip_compression_roundtrip(void **state)
{
    static const struct {
        enum pt_pkt_ipc ipc;
        uint64_t ip;
    } steps[] = {
        {PT_PKT_IPC_UPDATE_16, 0xffffffff8100beefull},
        {PT_PKT_IPC_UPDATE_32, 0xffffffffc0de1234ull},
        {PT_PKT_IPC_SEXT_48, 0x00007f1234567890ull},
        {PT_PKT_IPC_UPDATE_48, 0x00007fabcdef0123ull},
        {PT_PKT_IPC_FULL, 0xffffffff81000000ull},
        {PT_PKT_IPC_SEXT_48, 0xffff800000001000ull},
        {PT_PKT_IPC_UPDATE_16, 0xffff800000002000ull},
    };
    enum { NRAND = 400 };
    uint64_t want[NRAND + 16];
    unsigned nwant = 0, count[8] = {0};
    struct pt_pkt_enc e;
    uint64_t x = 0x12345678;
    uint64_t ip = 0xffffffff81000000ull;

    pt_pkt_enc_init(&e, buf, sizeof(buf));
    assert_true(pt_pkt_psb(&e) > 0);
    assert_true(pt_pkt_mode_exec(&e, PT_PKT_EXEC_64, false) > 0);
    assert_true(pt_pkt_psbend(&e) > 0);
    assert_int_equal(pt_pkt_ip(&e, PT_PKT_TIP_PGE, PT_PKT_IPC_SEXT_48, ip), 7);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        assert_true(pt_pkt_ip(&e, PT_PKT_TIP, steps[i].ipc, steps[i].ip) > 0);
        want[nwant++] = steps[i].ip;
    }
    for (unsigned i = 0; i < NRAND; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        switch (x % 5) { /* small and large jumps, canonical and not */
        case 0:
            ip ^= x >> 52;
            break;
        case 1:
            ip ^= (x >> 40) & 0xffffff;
            break;
        case 2:
            ip = (x & 1) ? 0xffff800000000000ull | (x >> 17) : (x >> 17);
            break;
        case 3:
            ip = x;
            break;
        default:
            ip ^= (x >> 20) & 0xffffffffffull;
        }
        enum pt_pkt_ipc best = pt_pkt_ipc_best(&e, ip);
        count[best]++;
        assert_true(pt_pkt_ip(&e, PT_PKT_TIP, PT_PKT_IPC_AUTO, ip) > 0);
        want[nwant++] = ip;
    }
    /* each compression was chosen at least once by the random walk */
    for (unsigned c = 1; c <= 6; c++)
        if (c != 5 && !count[c])
            fail_msg("compression %u never chosen", c);

    struct pt_config cfg;
    struct pt_query_decoder *q;
    struct pt_event ev;
    uint64_t got;
    int st;

    pt_config_init(&cfg);
    cfg.begin = buf;
    cfg.end = buf + e.len;
    q = pt_qry_alloc_decoder(&cfg);
    assert_non_null(q);
    st = pt_qry_sync_forward(q, &got);
    assert_true(st >= 0);
    while (st & pts_event_pending) {
        st = pt_qry_event(q, &ev, sizeof(ev));
        assert_true(st >= 0);
        if (ev.type == ptev_enabled)
            assert_int_equal(ev.variant.enabled.ip, 0xffffffff81000000ull);
    }
    for (unsigned i = 0; i < nwant; i++) {
        st = pt_qry_indirect_branch(q, &got);
        if (st < 0)
            fail_msg("libipt query: %s at TIP %u", pt_errstr(pt_errcode(st)), i);
        if (got != want[i])
            fail_msg("TIP %u: libipt 0x%llx, encoded 0x%llx", i, (unsigned long long)got,
                     (unsigned long long)want[i]);
    }
    pt_qry_free_decoder(q);
}

static void pip_for_cr3_write(void **state)
{
    static const uint64_t cr3s[] = {0, 0x1000, 0x7fffffffe0ull, 0x000fffffffffffe0ull,
                                    0x8000000012345003ull /* no-flush bit + PCID */};

    for (size_t i = 0; i < sizeof(cr3s) / sizeof(cr3s[0]); i++) {
        for (int nr = 0; nr < 2; nr++) {
            uint8_t pip[PT_PKT_PIP_SIZE];
            struct pt_packet_decoder *d;
            struct pt_packet p;

            assert_int_equal(pt_pip_for_cr3_write(cr3s[i], nr, pip), PT_PKT_PIP_SIZE);
            d = open_dec(pip, sizeof(pip), false);
            next(d, &p, ppt_pip);
            assert_int_equal(p.payload.pip.cr3, cr3s[i] & 0x000fffffffffffe0ull);
            assert_int_equal(p.payload.pip.nr, nr);
            at_end(d);
            pt_pkt_free_decoder(d);
        }
    }
}

/* PIP needs TriggerEn && ContextEn && OS (and tracing): the whole truth table. */
static void pip_needed(void **state)
{
    for (unsigned m = 0; m < 32; m++) {
        uint64_t ctl = ((m & 1) ? RTIT_CTL_TRACEEN : 0) | ((m & 2) ? RTIT_CTL_OS : 0) |
                       ((m & 16) ? RTIT_CTL_USR | RTIT_CTL_BRANCH_EN : 0);
        uint64_t st = ((m & 4) ? RTIT_STATUS_TRIGGEREN : 0) | ((m & 8) ? RTIT_STATUS_CONTEXTEN : 0);

        assert_int_equal(pt_pip_needed(ctl, st), (m & 15) == 15);
    }
}

static void pip_guest_nr(void **state)
{
    assert_true(pt_pip_guest_nr(0));
    assert_true(pt_pip_guest_nr(SECONDARY_EXEC_PT_USE_GPA));
    assert_false(pt_pip_guest_nr(SECONDARY_EXEC_PT_CONCEAL_VMX));
    assert_false(pt_pip_guest_nr(SECONDARY_EXEC_PT_CONCEAL_VMX | SECONDARY_EXEC_PT_USE_GPA));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_packet_type),
        cmocka_unit_test(tnt_all_lengths),
        cmocka_unit_test(invalid_args),
        cmocka_unit_test(bounded_buffer),
        cmocka_unit_test(ip_compression_roundtrip),
        cmocka_unit_test(pip_for_cr3_write),
        cmocka_unit_test(pip_needed),
        cmocka_unit_test(pip_guest_nr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
