/* SPDX-License-Identifier: MIT */
/*
 * Benchmark helper: build and rebuild shadows of N-entry guest ToPAs over the
 * fake (scrambled) EPT.  Run under callgrind by bench_shadow.sh, which divides
 * the instructions spent in pt_shadow_build / pt_shadow_prepare by the
 * number of guest entries shadowed.  Prints "entries=<total>" per phase.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "pt/pt_shadow.h"
#include "pt/rtit.h"

#define TABLES_GPA 0x10000ull
#define DATA_GPA   0x100000ull

/* n 4 KiB regions in tables of up to 511 entries + END, circular. */
static void make_topa(struct fake_world *fw, unsigned n)
{
    unsigned per = 511, ntab = (n + per - 1) / per;

    for (unsigned t = 0; t < ntab; t++) {
        uint64_t tg = TABLES_GPA + 4096ull * t;
        unsigned k = 0;
        for (; k < per && t * per + k < n; k++)
            fw_guest_store64(fw, tg + 8ull * k, DATA_GPA + 4096ull * (t * per + k));
        fw_guest_store64(fw, tg + 8ull * k, (TABLES_GPA + 4096ull * ((t + 1) % ntab)) | TOPA_END);
    }
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 2048;
    unsigned iters = argc > 2 ? (unsigned)atoi(argv[2]) : 20;
    struct fake_world *fw = fw_new(1);
    fw_fast_translate(fw);
    struct pt_shadow sh;
    struct pt_shadow_scratch *scr = calloc(1, sizeof(*scr));
    struct pt_shadow_env env = {.mem = &fw->mem,
                                .alloc = &fw->alloc,
                                .host_topa = true,
                                .host_topa_multi = true,
                                .host_single_range = true};
    struct pt_out_cfg cfg = {
        .ctl = RTIT_CTL_TOPA, .output_base = TABLES_GPA, .topa_multi = true, .maxphyaddr = 39};
    struct pt_topa_err err;

    if (n > 3000) /* DATA_GPA + n pages must stay in the 16 MiB of guest RAM */
        n = 3000;
    scr->walk.regions = calloc(4096, sizeof(struct pt_topa_region));
    scr->walk.max_regions = 4096;
    pt_shadow_init(&sh);
    make_topa(fw, n);
    for (unsigned i = 0; i < iters; i++) {
        /* full build each time: a different current entry forces a new walk */
        cfg.output_mask_ptrs = (uint64_t)(i % 2) << 7;
        if (pt_shadow_build(&sh, scr, &env, &cfg, &err) != PT_SHADOW_OK) {
            fprintf(stderr, "build failed: %s\n", err.reason);
            return 1;
        }
    }
    printf("build entries=%llu\n", (unsigned long long)n * iters);
    for (unsigned i = 0; i < iters; i++) {
        /* TraceEn 0->1 with an unchanged setup: the reuse path */
        cfg.output_mask_ptrs = ((uint64_t)(i % 7) << 7) | ((uint64_t)i << 32);
        if (pt_shadow_prepare(&sh, scr, &env, &cfg, &err) != PT_SHADOW_OK)
            return 1;
    }
    printf("prepare calls=%u\n", iters);
    pt_shadow_destroy(&sh, &env);
    fw_free(fw);
    return 0;
}
