/* SPDX-License-Identifier: MIT */
/*
 * The serial frame protocol of a trace dump (docs/serial-protocol.md, version 1): what the
 * VMM's encoder (vmm/trace/frame.c) writes and the host tool (tools/ptvisor-trace/frame_dec.c)
 * reads back from a captured serial log -- the line prefix and limits, the stream numbers of a
 * dump section, the payload alphabet, the reasons, sources and filters a BEGIN record names,
 * and its range and snapshot entries.  One spelling for both sides; no code.
 */
#ifndef PTV_FRAME_H
#define PTV_FRAME_H

#include <stdint.h>

#define FRAME_VERSION     1
#define FRAME_PREFIX      "@PTV1 " /* "@PTV" + version + space */
#define FRAME_PREFIX_LEN  6
#define FRAME_LINE_MAX    200          /* one frame line, '\n' included */
#define FRAME_BLOCK_MAX   65536        /* largest raw block the protocol allows */
#define FRAME_STREAM_MAX  (1ull << 40) /* largest stream length the protocol allows */
#define FRAME_MAX_SNAPS   256
#define FRAME_MAX_CR3S    256
#define FRAME_MAX_RANGES  4
#define FRAME_MAX_STREAMS (2 + FRAME_MAX_SNAPS)
#define FRAME_MAX_PARTS   1024 /* lines of one BEGIN or END record */

/* streams of a dump section */
#define FRAME_STREAM_TRACE   0u         /* the CPU's PT bytes, oldest first */
#define FRAME_STREAM_CRASH   1u         /* crash report text */
#define FRAME_STREAM_SNAP(n) (2u + (n)) /* code snapshot n */

#define FRAME_CR3_ANY (~0ull) /* a snapshot valid in every address space */

/* payload encoding: 4 bytes -> 5 characters of this alphabet, value = index (the doc) */
#define FRAME_B85_ALPHABET                                                                         \
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#%()*+,-./:;=?[]^_{|}~"

enum frame_reason {
    FRAME_REASON_VMCALL = 0, /* the guest asked (ptvisor-ctl dump) */
    FRAME_REASON_CRASH,      /* triple fault, shutdown, reset after a panic */
    FRAME_REASON_SERIAL,     /* the host asked over the serial line */
    FRAME_REASON_BOOT,       /* trace_boot window */
    FRAME_REASON_COUNT
};

enum frame_source { FRAME_SRC_HARDWARE = 0, FRAME_SRC_SOFTWARE, FRAME_SRC_COUNT };

/* trace filter as the trace was set up (RTIT_CTL.User / OS / CR3Filter) */
#define FRAME_FILTER_USER   0x1u
#define FRAME_FILTER_KERNEL 0x2u
#define FRAME_FILTER_CR3    0x4u
#define FRAME_FILTER_MASK   0x7u

struct frame_range {
    uint64_t lo, hi; /* inclusive, as ADDRn_A / ADDRn_B */
};

struct frame_snap {
    uint64_t va, cr3, len; /* cr3 = FRAME_CR3_ANY: valid in every address space */
};

#endif
