/* SPDX-License-Identifier: MIT */
/*
 * libipt as the oracle of the software PT generator (vmm/trace/swpt.c): decode a stream
 * from its first PSB to its end with libipt's instruction flow decoder (pt_insn) over code
 * bytes the caller supplies per address space, and parse every byte with libipt's packet
 * decoder.  Shared by tests/unit/trace/test_swpt.c, test_swpt_ptrace.c and tests/fuzz/fuzz_swpt.c.
 */
#ifndef PTV_TEST_SWPT_DEC_H
#define PTV_TEST_SWPT_DEC_H

#include <stddef.h>
#include <stdint.h>

#define SWPT_DEC_NO_CR3 0xffffffffffffffffull /* no PIP seen yet (libipt pt_asid_no_cr3) */

/* the code bytes at `ip` in the address space `cr3`: bytes copied (<= size), or < 0 */
typedef int swpt_dec_read_fn(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx);
/* one decoded instruction; nonzero stops the decode (an error) */
typedef int swpt_dec_insn_fn(uint64_t ip, uint64_t cr3, void *ctx);

struct swpt_dec_stats {
    uint64_t insns;
    uint64_t enabled, disabled, async_disabled, async_branch, paging, overflow, exec_mode;
    uint64_t events;
    uint64_t first_async_disabled_at; /* the IP of the first async disable (if any) */
};

/* 0, or -1 with a one-line reason in err */
int swpt_decode(const uint8_t *buf, size_t len, swpt_dec_read_fn *rd, swpt_dec_insn_fn *on_insn,
                void *ctx, struct swpt_dec_stats *st, char *err, size_t errlen);
/* the same with the IP ranges the trace was filtered on (libipt's pt_config.addr_filter, as perf
 * passes it): without them libipt cannot tell where a TIP.PGD after a plain instruction (the IP
 * left a range linearly) takes effect; at most 4 ranges, lo <= hi inclusive */
int swpt_decode_ranges(const uint8_t *buf, size_t len, swpt_dec_read_fn *rd,
                       swpt_dec_insn_fn *on_insn, void *ctx, struct swpt_dec_stats *st, char *err,
                       size_t errlen, const uint64_t (*ranges)[2], unsigned nranges);

#define SWPT_PKT_TYPES 32
/* every byte from the first PSB parses; counts[enum pt_packet_type]; *whole (if not NULL):
 * the offset after the last whole packet (== len: no partial packet at the end); 0 or -1 */
int swpt_pkt_scan(const uint8_t *buf, size_t len, unsigned counts[SWPT_PKT_TYPES], size_t *whole,
                  char *err, size_t errlen);

#endif
