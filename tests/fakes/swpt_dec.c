/* SPDX-License-Identifier: MIT */
/* libipt as the oracle of the software PT generator: see swpt_dec.h. */
#include "fakes/swpt_dec.h"

#include <stdio.h>
#include <string.h>

#include <intel-pt.h>

struct cb {
    swpt_dec_read_fn *rd;
    void *ctx;
};

static int read_cb(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip,
                   void *context)
{
    const struct cb *c = context;
    int n = c->rd(buffer, size, asid ? asid->cr3 : SWPT_DEC_NO_CR3, ip, c->ctx);

    return n > 0 ? n : -pte_nomap;
}

static int fail(struct pt_insn_decoder *d, int status, const char *what, char *err, size_t errlen)
{
    uint64_t off = 0;

    pt_insn_get_offset(d, &off);
    snprintf(err, errlen, "libipt %s: %s at trace offset %llu", what, pt_errstr(pt_errcode(status)),
             (unsigned long long)off);
    pt_insn_free_decoder(d);
    return -1;
}

static void count(struct swpt_dec_stats *st, const struct pt_event *ev, uint64_t *cr3)
{
    st->events++;
    switch (ev->type) {
    case ptev_enabled:
        st->enabled++;
        break;
    case ptev_disabled:
        st->disabled++;
        break;
    case ptev_async_disabled:
        if (!st->async_disabled++)
            st->first_async_disabled_at = ev->variant.async_disabled.at;
        break;
    case ptev_async_branch:
        st->async_branch++;
        break;
    case ptev_paging:
        st->paging++;
        *cr3 = ev->variant.paging.cr3;
        break;
    case ptev_async_paging:
        st->paging++;
        *cr3 = ev->variant.async_paging.cr3;
        break;
    case ptev_overflow:
        st->overflow++;
        break;
    case ptev_exec_mode:
        st->exec_mode++;
        break;
    default:
        break;
    }
}

int swpt_decode(const uint8_t *buf, size_t len, swpt_dec_read_fn *rd, swpt_dec_insn_fn *on_insn,
                void *ctx, struct swpt_dec_stats *st, char *err, size_t errlen)
{
    return swpt_decode_ranges(buf, len, rd, on_insn, ctx, st, err, errlen, NULL, 0);
}

int swpt_decode_ranges(const uint8_t *buf, size_t len, swpt_dec_read_fn *rd,
                       swpt_dec_insn_fn *on_insn, void *ctx, struct swpt_dec_stats *st, char *err,
                       size_t errlen, const uint64_t (*ranges)[2], unsigned nranges)
{
    struct pt_config cfg;
    struct pt_insn_decoder *d;
    struct cb c = {rd, ctx};
    uint64_t cr3 = SWPT_DEC_NO_CR3;
    int status;

    memset(st, 0, sizeof(*st));
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    if (nranges > 4)
        nranges = 4;
    uint64_t *ab[4][2] = {{&cfg.addr_filter.addr0_a, &cfg.addr_filter.addr0_b},
                          {&cfg.addr_filter.addr1_a, &cfg.addr_filter.addr1_b},
                          {&cfg.addr_filter.addr2_a, &cfg.addr_filter.addr2_b},
                          {&cfg.addr_filter.addr3_a, &cfg.addr_filter.addr3_b}};
    for (unsigned i = 0; i < nranges; i++) {
        cfg.addr_filter.config.addr_cfg |= 1ull << (4 * i); /* ADDRn_CFG = 1: filter (RTIT_CTL) */
        *ab[i][0] = ranges[i][0];
        *ab[i][1] = ranges[i][1];
    }
    d = pt_insn_alloc_decoder(&cfg);
    if (!d) {
        snprintf(err, errlen, "pt_insn_alloc_decoder failed");
        return -1;
    }
    pt_image_set_callback(pt_insn_get_image(d), read_cb, &c);
    status = pt_insn_sync_forward(d);
    if (status < 0)
        return fail(d, status, "sync", err, errlen);
    for (;;) {
        struct pt_insn in;

        while (status & pts_event_pending) {
            struct pt_event ev;

            status = pt_insn_event(d, &ev, sizeof(ev));
            if (status < 0)
                return fail(d, status, "event", err, errlen);
            count(st, &ev, &cr3);
        }
        if (status & pts_eos)
            break;
        status = pt_insn_next(d, &in, sizeof(in));
        if (status == -pte_eos)
            break; /* the trace ended where the decoder needed more of it */
        if (status < 0)
            return fail(d, status, "insn", err, errlen);
        st->insns++;
        if (on_insn && on_insn(in.ip, cr3, ctx)) {
            snprintf(err, errlen, "instruction %llu (ip %#llx) not the expected one",
                     (unsigned long long)st->insns - 1, (unsigned long long)in.ip);
            pt_insn_free_decoder(d);
            return -1;
        }
    }
    pt_insn_free_decoder(d);
    return 0;
}

int swpt_pkt_scan(const uint8_t *buf, size_t len, unsigned counts[SWPT_PKT_TYPES], size_t *whole,
                  char *err, size_t errlen)
{
    struct pt_config cfg;
    struct pt_packet_decoder *d;
    int r;

    memset(counts, 0, SWPT_PKT_TYPES * sizeof(counts[0]));
    if (whole)
        *whole = 0;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    d = pt_pkt_alloc_decoder(&cfg);
    if (!d) {
        snprintf(err, errlen, "pt_pkt_alloc_decoder failed");
        return -1;
    }
    r = pt_pkt_sync_forward(d);
    if (r < 0) {
        snprintf(err, errlen, "libipt packet decoder: no PSB (%s)", pt_errstr(pt_errcode(r)));
        pt_pkt_free_decoder(d);
        return -1;
    }
    while (r >= 0) {
        struct pt_packet p;
        uint64_t off = 0;

        r = pt_pkt_next(d, &p, sizeof(p));
        if (r >= 0 && (unsigned)p.type < SWPT_PKT_TYPES)
            counts[p.type]++;
        if (r >= 0 && whole && pt_pkt_get_offset(d, &off) >= 0)
            *whole = (size_t)off;
    }
    if (r != -pte_eos) {
        uint64_t off = 0;

        pt_pkt_get_offset(d, &off);
        snprintf(err, errlen, "libipt packet decoder: %s at offset %llu", pt_errstr(pt_errcode(r)),
                 (unsigned long long)off);
        pt_pkt_free_decoder(d);
        return -1;
    }
    pt_pkt_free_decoder(d);
    return 0;
}
