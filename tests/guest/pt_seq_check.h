/* SPDX-License-Identifier: MIT */
/*
 * The verdict of the on-box self-test of the VMM's own trace ("on-box self-test
 * traces a known code sequence and checks it"), pure: no EFI.  tests/guest/vmm_trace_selftest.c
 * opens a trace window (TRACE_START with an IP range around tests/guest/pt_seq.S), runs the
 * sequence, reads the ring back (TRACE_READ) and asks pt_seq_check() whether the packets say
 * exactly what ran.  The same holds for hardware system-mode PT and for the software tracer: both
 * write the packets of the SDM (Vol. 3C "Intel Processor Trace", packet formats: pt-facts E).
 * tests/unit/guest/test_pt_seq_check.c runs it on streams written with the VMM's own encoder
 * (pt_pkt.c), with the noise a real CPU adds (PSB+, CBR, TSC, MTC, CYC, PAD, VMCS, PIP, exits as PGD/PGE
 * pairs) and with planted faults.
 *
 * The walker knows the packets of the SDM's table that a trace without PEBS-via-PT or trigger
 * tracing can hold (lengths as libipt's pt_opcodes.h); anything else, block packets
 * (BBP/BIP/BEP) and TRIG included, ends the check with its offset (a wrong length would make the
 * rest garbage).
 */
#ifndef PTV_GUEST_PT_SEQ_CHECK_H
#define PTV_GUEST_PT_SEQ_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_SEQ_MAX_TIPS 8

struct pt_seq_expect {
    uint64_t start;  /* the first IP: TIP.PGE there opens the sequence */
    uint64_t lo, hi; /* the traced range, inclusive: a resume (PGE after PGD) must be inside */
    const char *tnt; /* the conditional branches in order, "T" / "N" */
    uint64_t tips[PT_SEQ_MAX_TIPS];
    unsigned n_tips;
};

struct pt_seq_seen {
    char tnt[64];
    unsigned n_tnt;
    uint64_t tips[PT_SEQ_MAX_TIPS];
    unsigned n_tips;
    unsigned packets, psbs, resumes; /* resumes: PGD/PGE pairs inside the sequence (exits) */
    char why[160];
};

bool pt_seq_check(const uint8_t *buf, size_t n, const struct pt_seq_expect *e,
                  struct pt_seq_seen *s);

#endif
