/* SPDX-License-Identifier: MIT */
/*
 * The verdict of the on-box self-test's long trace ("trace across >= 1,000 VM exits and
 * check that the output is continuous"), pure: no EFI, no MSR access.  pt-selftest.efi
 * (tests/guest/pt_selftest.c) fills one ToPA output region with a known byte, traces a loop
 * that makes two VM exits per round (CPUID, RDMSR OUTPUT_MASK_PTRS), keeps every MASK_PTRS it
 * read, stops, and asks pt_cont_check() whether the region holds one continuous trace.
 * tests/model/test_pt_cont.c asks the same of the real PT controller on the CPU twin (pass)
 * and, through tests/model/oracle-bites.sh, of the controller with the rewind defect put back
 * (must fail).
 *
 * What "continuous" means here, from the SDM (Vol. 3C "Trace Output" / "ToPA", "Packet
 * Stream Boundary"): the output pointer only moves forward within a region (the samples,
 * compared as (table offset, output offset) pairs, never go backwards); the trace starts with a
 * PSB at the region's first byte; nothing is written past the final pointer (a rewound trace
 * leaves its older bytes there); PSBs come at most about every 2^(PSBFreq + 11) bytes
 * (checked with a margin of one period: a PSB waits for a packet boundary).
 */
#ifndef PTV_GUEST_PT_CONT_H
#define PTV_GUEST_PT_CONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pt_cont_in {
    const uint64_t *samples; /* IA32_RTIT_OUTPUT_MASK_PTRS after each exit, in order */
    unsigned n_samples;
    const uint8_t *out; /* the output region, as the guest reads it after TraceEn = 0 */
    uint64_t size;
    uint64_t end;        /* the output offset after TraceEn = 0 (MASK_PTRS[63:32]) */
    uint8_t fill;        /* what every byte of the region held before tracing */
    uint64_t psb_period; /* 2^(PSBFreq + 11); 0: the spacing is not checked */
};

struct pt_cont_out {
    uint64_t psbs;    /* PSBs found in [0, end) */
    uint64_t max_gap; /* the largest distance between PSBs (or from the last one to end) */
    char why[160];    /* the first thing that is wrong, or a summary */
};

bool pt_cont_check(const struct pt_cont_in *in, struct pt_cont_out *out);

#endif
