/* SPDX-License-Identifier: MIT */
/* Test harness: engine + model vs reference model.  See harness.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <intel-pt.h>
#include <stdlib.h>
#include <string.h>

#include "model/harness.h"
#include "pt/rtit.h"

bool h_eager_end;

struct harness *h_new(int scramble, bool guest_multi, bool host_multi)
{
    struct harness *h = calloc(1, sizeof(*h));

    h->fw = fw_new(scramble);
    h->guest_multi = guest_multi;
    h->env = (struct pt_shadow_env){.mem = &h->fw->mem,
                                    .alloc = &h->fw->alloc,
                                    .host_topa = true,
                                    .host_topa_multi = host_multi,
                                    .host_single_range = true};
    h->scr = calloc(1, sizeof(*h->scr));
    h->scr->walk.regions = calloc(H_MAX_REGIONS, sizeof(struct pt_topa_region));
    h->scr->walk.max_regions = H_MAX_REGIONS;
    pt_shadow_init(&h->sh);
    h->flat = calloc(1, FW_GRAM_SIZE);
    ptm_init(&h->ref, h->flat, FW_GRAM_SIZE, H_MAXPA, guest_multi);
    ptm_init(&h->hw, h->fw->hmem, FW_HMEM_SIZE, H_MAXPA, host_multi);
    h->ref.eager_end = h->hw.eager_end = h_eager_end;
    ptgen_init(&h->gref, 1, 4096);
    ptgen_init(&h->ghw, 1, 4096);
    return h;
}

void h_free(struct harness *h)
{
    pt_shadow_destroy(&h->sh, &h->env);
    assert_int_equal(h->fw->pool_in_use, 0);
    assert_int_equal(fw_wp_count(h->fw), 0);
    assert_int_equal(h->fw->free_errors, 0);
    fw_free(h->fw);
    free(h->scr->walk.regions);
    free(h->scr);
    free(h->flat);
    free(h);
}

uint64_t h_entry(uint64_t base, unsigned size_code, uint64_t flags)
{
    return base | ((uint64_t)size_code << TOPA_SIZE_SHIFT) | flags;
}

void h_gset(struct harness *h, uint64_t gpa, uint64_t val)
{
    /* a guest store to a protected table page exits; the engine lets it through */
    if (!fw_guest_store64(h->fw, gpa, val)) {
        assert_int_equal(pt_shadow_table_write(&h->sh, &h->env, gpa), PT_SHADOW_WP_RETRY);
        assert_true(fw_guest_store64(h->fw, gpa, val));
    }
}

enum pt_shadow_status h_start(struct harness *h, uint64_t ctl, uint64_t status, uint64_t base,
                              uint64_t mask)
{
    struct pt_out_cfg cfg = {.ctl = ctl,
                             .status = status,
                             .output_base = base,
                             .output_mask_ptrs = mask,
                             .topa_multi = h->guest_multi,
                             .maxphyaddr = H_MAXPA};
    enum pt_shadow_status st = pt_shadow_prepare(&h->sh, h->scr, &h->env, &cfg, &h->err);

    h->ctl = ctl;
    /* the reference sees the guest's memory exactly as it is now */
    fw_guest_snapshot(h->fw, h->flat);
    ptm_enable(&h->ref, ctl, status, base, mask);
    if (st == PT_SHADOW_OK) {
        uint64_t hctl = (ctl & ~RTIT_CTL_TOPA) | (h->sh.h_topa ? RTIT_CTL_TOPA : 0);
        ptm_enable(&h->hw, hctl, status, h->sh.h_base, h->sh.h_mask);
    } else {
        /* operational error: the guest's trace does not run */
        ptm_init(&h->hw, h->fw->hmem, FW_HMEM_SIZE, H_MAXPA, h->hw.topa_multi);
        h->hw.eager_end = h_eager_end;
    }
    return st;
}

void h_trace(struct harness *h, uint64_t nbytes)
{
    ptgen_run(&h->gref, &h->ref, nbytes);
    ptgen_run(&h->ghw, &h->hw, nbytes);
}

void h_stop(struct harness *h, uint64_t *g_base, uint64_t *g_mask, uint64_t *g_status)
{
    ptm_disable(&h->ref);
    ptm_disable(&h->hw);
    assert_true(
        pt_shadow_guest_view(&h->sh, h->hw.output_base, h->hw.output_mask_ptrs, g_base, g_mask));
    *g_status = h->hw.status;
}

void h_compare(struct harness *h)
{
    uint64_t g_base, g_mask;
    uint8_t *now = malloc(FW_GRAM_SIZE);

    assert_true(
        pt_shadow_guest_view(&h->sh, h->hw.output_base, h->hw.output_mask_ptrs, &g_base, &g_mask));
    assert_int_equal(g_base, h->ref.output_base);
    assert_int_equal(g_mask, h->ref.output_mask_ptrs);
    assert_int_equal(h->hw.status, h->ref.status);
    assert_int_equal(h->hw.pmis, h->ref.pmis);
    assert_memory_equal(h->hw.pmi_at, h->ref.pmi_at, sizeof(h->hw.pmi_at));
    assert_int_equal(h->hw.global_status, h->ref.global_status);
    assert_int_equal(h->hw.bytes, h->ref.bytes);
    assert_int_equal(h->hw.wild, 0);
    assert_int_equal(h->ref.wild, 0);
    /* every byte of guest RAM, read through the fake EPT, as on the reference */
    fw_guest_snapshot(h->fw, now);
    assert_memory_equal(now, h->flat, FW_GRAM_SIZE);
    free(now);
    assert_true(fw_canaries_ok(h->fw));
    assert_int_equal(h->fw->wp_errors, 0);
}

int h_decode(const uint8_t *buf, uint64_t n, int *packets)
{
    struct pt_config config;
    struct pt_packet_decoder *dec;
    int err;

    pt_config_init(&config);
    config.begin = (uint8_t *)buf;
    config.end = (uint8_t *)buf + n;
    dec = pt_pkt_alloc_decoder(&config);
    if (!dec)
        return -1;
    *packets = 0;
    err = pt_pkt_sync_forward(dec);
    while (err >= 0) {
        struct pt_packet pkt;
        err = pt_pkt_next(dec, &pkt, sizeof(pkt));
        if (err >= 0)
            (*packets)++;
    }
    pt_pkt_free_decoder(dec);
    return err == -pte_eos ? 0 : err;
}
