/* SPDX-License-Identifier: MIT */
/*
 * Benchmark: what the engine costs while a guest traces in steady state.
 * A guest builds a circular 64-region ToPA (INT every 16th region); the
 * engine shadows it once (TraceEn 0->1); then the PT model -- the "hardware"
 * -- writes N MiB of packets through the shadow tables.  Every engine callback
 * (EPT translate, guest memory read, write-protect) during that phase is what a
 * VM exit would cost on a real CPU; region switches and PMIs happen in the
 * "hardware" alone.  Prints the figures; asserts nothing.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model/fake_world.h"
#include "model/ptgen.h"
#include "model/ptm.h"
#include "pt/pt_shadow.h"
#include "pt/rtit.h"

#define TABLES_GPA 0x10000ull
#define DATA_GPA   0x100000ull
#define NREGIONS   64

static struct pt_mem_ops real;
static unsigned long calls;

static void c_translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    calls++;
    real.translate(ctx, gpa, out);
}
static bool c_read64(void *ctx, uint64_t gpa, uint64_t *val)
{
    calls++;
    return real.read64(ctx, gpa, val);
}
static bool c_set_wp(void *ctx, uint64_t gpa_page, bool protect)
{
    calls++;
    return real.set_wp(ctx, gpa_page, protect);
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 0) : 64;
    struct fake_world *fw = fw_new(1);
    real = fw->mem;
    struct pt_mem_ops counted = {
        .ctx = real.ctx, .translate = c_translate, .read64 = c_read64, .set_wp = c_set_wp};
    struct pt_shadow_env env = {.mem = &counted,
                                .alloc = &fw->alloc,
                                .host_topa = true,
                                .host_topa_multi = true,
                                .host_single_range = true};
    /* two guest tables of 32 regions each, END chaining them into a ring */
    for (unsigned t = 0; t < 2; t++) {
        uint64_t tg = TABLES_GPA + 4096ull * t;
        for (unsigned k = 0; k < NREGIONS / 2; k++) {
            unsigned r = t * (NREGIONS / 2) + k;
            fw_guest_store64(fw, tg + 8ull * k,
                             (DATA_GPA + 4096ull * r) | (r % 16 == 15 ? TOPA_INT : 0));
        }
        fw_guest_store64(fw, tg + 8ull * (NREGIONS / 2), (TABLES_GPA + 4096ull * !t) | TOPA_END);
    }
    struct pt_shadow sh;
    struct pt_shadow_scratch *scr = calloc(1, sizeof(*scr));
    scr->walk.regions = calloc(4096, sizeof(struct pt_topa_region));
    scr->walk.max_regions = 4096;
    pt_shadow_init(&sh);
    uint64_t ctl = RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS;
    struct pt_out_cfg cfg = {.ctl = ctl,
                             .output_base = TABLES_GPA,
                             .output_mask_ptrs = 0x7f,
                             .topa_multi = true,
                             .maxphyaddr = 39};
    struct pt_topa_err err;
    if (pt_shadow_prepare(&sh, scr, &env, &cfg, &err) != PT_SHADOW_OK) {
        fprintf(stderr, "shadow build failed: %s\n", err.reason);
        return 1;
    }
    unsigned long setup_calls = calls;
    calls = 0;

    struct ptm m;
    struct ptgen g;
    ptm_init(&m, fw->hmem, FW_HMEM_SIZE, 39, true);
    ptm_enable(&m, sh.h_topa ? ctl : ctl & ~RTIT_CTL_TOPA, 0, sh.h_base, sh.h_mask);
    ptgen_init(&g, 1, 4096);
    ptgen_run(&g, &m, mib << 20);
    uint64_t switches = m.bytes / 4096;
    printf("bench-pt-steady: %llu MiB traced through a %u-region guest ToPA (shadowed)\n",
           (unsigned long long)mib, NREGIONS);
    printf("  engine calls at TraceEn 0->1 (one VM exit: the RTIT_CTL write): %lu\n", setup_calls);
    printf("  region switches done by the hardware: %llu, ToPA PMIs: %u, operational errors: %s\n",
           (unsigned long long)switches, m.pmis, m.error ? m.error : "none");
    printf("  engine calls while tracing (= VM exits the engine adds in steady state): %lu\n",
           calls);
    printf("  goal: 0 exits per second of steady-state tracing -> %s\n", calls ? "MISSED" : "met");
    pt_shadow_destroy(&sh, &env);
    free(scr->walk.regions);
    free(scr);
    fw_free(fw);
    return 0;
}
