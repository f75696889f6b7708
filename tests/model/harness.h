/* SPDX-License-Identifier: MIT */
/*
 * Test harness: one guest, the engine shadowing its output through the fake
 * EPT, the PT model tracing into host-physical memory (hw), and a reference
 * PT model tracing the same packets on a flat GPA == HPA copy of guest RAM
 * (ref).  After each step the guest-visible state of both must agree.
 */
#ifndef PTV_TESTS_HARNESS_H
#define PTV_TESTS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/fake_world.h"
#include "model/ptgen.h"
#include "model/ptm.h"
#include "pt/pt_shadow.h"

#define H_MAXPA       39
#define H_MAX_REGIONS 4096
#define H_CTL_TOPA    (RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS)
#define H_CTL_SINGLE  (RTIT_CTL_TRACEEN | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS)

struct harness {
    struct fake_world *fw;
    bool guest_multi;
    struct pt_shadow_env env;
    struct pt_shadow sh;
    struct pt_shadow_scratch *scr;
    struct pt_topa_err err;
    uint8_t *flat; /* reference memory: GPA == PA */
    struct ptm ref, hw;
    struct ptgen gref, ghw;
    uint64_t ctl;
};

extern bool h_eager_end; /* both models follow END eagerly (ptm.h) */

struct harness *h_new(int scramble, bool guest_multi, bool host_multi);
void h_free(struct harness *h);
uint64_t h_entry(uint64_t base, unsigned size_code, uint64_t flags);
void h_gset(struct harness *h, uint64_t gpa, uint64_t val);
/* TraceEn 0->1 with these guest registers: shadow (prepare) + start both models. */
enum pt_shadow_status h_start(struct harness *h, uint64_t ctl, uint64_t status, uint64_t base,
                              uint64_t mask);
/* Same packets to both models. */
void h_trace(struct harness *h, uint64_t nbytes);
/* TraceEn 1->0; the guest's registers become what it reads back. */
void h_stop(struct harness *h, uint64_t *g_base, uint64_t *g_mask, uint64_t *g_status);
/* Assert that the guest sees the same thing as on the reference machine. */
void h_compare(struct harness *h);
/* Decode n bytes of guest memory gathered by the caller with libipt; returns packets. */
int h_decode(const uint8_t *buf, uint64_t n, int *packets);

#endif
