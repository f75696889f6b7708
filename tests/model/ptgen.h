/* SPDX-License-Identifier: MIT */
/*
 * Tiny test-only Intel PT packet generator: a deterministic pseudo-random but
 * syntactically valid packet stream (pt-facts E): PSB+ (PSB, MODE.Exec, FUP,
 * PSBEND) every psb_period bytes, TIP.PGE, then TNT-8, TIP (update-16/32,
 * sext-48), PAD, MODE.Exec, OVF-free.  Packets only: libipt's packet decoder
 * must decode it without error.
 */
#ifndef PTV_TESTS_PTGEN_H
#define PTV_TESTS_PTGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PTGEN_MAX_PACKET 32

struct ptgen {
    uint64_t rng;
    uint64_t ip;
    uint64_t since_psb;
    uint32_t psb_period;
    bool started; /* PSB+ and TIP.PGE emitted */
    bool pge_done;
};

void ptgen_init(struct ptgen *g, uint64_t seed, uint32_t psb_period);
/* Next packet into buf (PTGEN_MAX_PACKET bytes); returns its size, *psb if a PSB. */
size_t ptgen_next(struct ptgen *g, uint8_t *buf, bool *psb);

struct ptm;
/* Feed packets to the model until it has been given at least nbytes bytes. */
uint64_t ptgen_run(struct ptgen *g, struct ptm *m, uint64_t nbytes);

#endif
