/* SPDX-License-Identifier: MIT */
/*
 * Serial trace dump, VMM side: turns a dump -- a CPU's PT bytes, the code
 * snapshots its window ran, a crash report -- into frame lines of the protocol in
 * docs/serial-protocol.md (version 1), which the host tool `ptvisor-trace extract` reads back
 * from a captured serial log.  Pure code, freestanding, no allocation, small stack: compiled
 * unchanged into vmm.elf and into the host tests (tests/unit/trace/test_frame.c).  The
 * protocol's constants, shared with the host tool, are in include/ptv/frame.h; this file is
 * the encoder's API.
 *
 * Use:
 *     frame_enc_begin(e, &begin, &out);               BEGIN record (1 or more lines)
 *     while (off < len && budget--)                    DATA: one line per call, so a
 *         off += frame_enc_data(e, stream, off,        dump is paced over many VM
 *                               buf + off, len - off); exits and resumed later
 *     frame_enc_end(e);                                END record
 * frame_enc_data() takes a block of up to FRAME_BLOCK bytes at its first line (compressed
 * into the encoder, or copied when LZ4 does not pay) and returns 0 until the block's last
 * line is out, then the block's length; call it again with the same stream and offset (the
 * bytes are not read again).  A different stream/offset abandons the block in flight.  To
 * resend a range (an interrupted dump, or a host request), call it with that offset again:
 * the host keys data by offset, duplicates are harmless.
 *
 * The struct frame_enc is large (about 19 KiB: block, LZ4 hash table, stream table): keep it
 * in static or per-CPU memory, never on the stack.
 */
#ifndef PTV_TRACE_FRAME_H
#define PTV_TRACE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/lz4w.h"

#include "ptv/frame.h"

#define FRAME_BLOCK 4096 /* raw bytes the encoder takes per block */

/* what a dump section says about itself: one CPU's trace and what belongs to it */
struct frame_begin {
    uint32_t boot_id; /* tells dumps of different boots apart (e.g. low TSC bits at start) */
    uint32_t dump_id; /* counts dumps since boot */
    uint32_t cpu;
    uint32_t ncpus; /* sections (CPUs) in this dump, >= 1 */
    enum frame_reason reason;
    enum frame_source source;
    uint32_t filter; /* FRAME_FILTER_* */
    uint64_t filter_cr3;
    const struct frame_range *ranges;
    unsigned nranges;
    uint64_t ring_size;
    bool wrapped;
    uint64_t overflows;
    uint64_t tsc_hz;        /* 0: unknown */
    uint64_t kernel_base;   /* guest kernel text base as the VMM saw it, 0: unknown */
    uint64_t syscall_entry; /* the guest's IA32_LSTAR (its 64-bit SYSCALL entry), 0: unknown:
                             * with the kernel's symbols it gives the KASLR offset */
    const uint64_t *cr3s;   /* CR3s seen in the window */
    unsigned ncr3;
    const struct frame_snap *snaps; /* code snapshots, stream FRAME_STREAM_SNAP(i) */
    unsigned nsnap;
    uint64_t trace_len; /* bytes of FRAME_STREAM_TRACE */
    uint64_t crash_len; /* bytes of FRAME_STREAM_CRASH (0: none) */
};

/* where lines go: one whole line per call, '\n' included, n <= FRAME_LINE_MAX */
struct frame_out {
    void (*line)(void *ctx, const char *s, size_t n);
    void *ctx;
};

struct frame_stream {
    uint64_t len;
    uint64_t crc_pos; /* bytes [0, crc_pos) went into crc, in order */
    uint32_t crc;     /* frame_crc32 of [0, crc_pos) */
};

struct frame_enc {
    struct frame_out out;
    const char *err; /* sticky: the first misuse, then nothing more is emitted */
    uint32_t boot_id, dump_id, cpu;
    unsigned nstreams;
    uint64_t seq; /* DATA lines emitted since begin */
    /* the block in flight */
    bool busy;
    unsigned b_stream;
    uint64_t b_off;
    uint32_t b_raw, b_enc, b_pos, b_crc;
    bool b_lz4;
    /* figures since begin */
    uint64_t lines, wire_bytes, raw_bytes;
    struct frame_stream st[FRAME_MAX_STREAMS];
    uint8_t blk[FRAME_BLOCK];
    struct lz4w_hash hash;
    char line[FRAME_LINE_MAX + 8];
};

/* IEEE 802.3 CRC-32 (the zlib / PNG one): crc32(0, p, n) is the CRC of p[0..n);
 * crc32(crc32(0, a, x), b, y) is the CRC of a then b */
uint32_t frame_crc32(uint32_t crc, const void *p, size_t n);

/* validate b, then emit the BEGIN record; 0, or -1 with the reason in e->err (nothing
 * emitted).  b's arrays are read during the call only. */
int frame_enc_begin(struct frame_enc *e, const struct frame_begin *b, const struct frame_out *o)
    __attribute__((warn_unused_result));

/* one DATA line of stream `stream` at byte `off` (see the top of this file); returns the
 * bytes finished by this line (0 while a block is still going out, or on misuse: e->err) */
size_t frame_enc_data(struct frame_enc *e, unsigned stream, uint64_t off, const uint8_t *p,
                      size_t n);

/* true while a block's lines are still going out */
static inline bool frame_enc_busy(const struct frame_enc *e)
{
    return e->busy;
}

/* the END record: per stream its length and CRC32 when every byte went through this encoder
 * in order, frames = DATA lines since begin */
void frame_enc_end(struct frame_enc *e);

#endif
