/* SPDX-License-Identifier: MIT */
/*
 * A small LZ4 *block* compressor for the serial trace dump (docs/serial-protocol.md), written
 * from the public description of the LZ4 block format (lz4_Block_format.md of the LZ4
 * project): greedy, one hash table in a caller-provided buffer, no allocation, bounded stack.
 * Pure code: compiled unchanged into vmm.elf and into the host tests, which decompress
 * everything it writes with Debian's liblz4 (LZ4_decompress_safe), an independent decoder.
 *
 * Only compression lives in the VMM; the host tool decompresses with liblz4.
 */
#ifndef PTV_LZ4W_H
#define PTV_LZ4W_H

#include <stddef.h>
#include <stdint.h>

#define LZ4W_HASH_LOG     12
#define LZ4W_HASH_ENTRIES (1u << LZ4W_HASH_LOG)
#define LZ4W_MAX_INPUT    65536u /* positions are kept in 16 bits */

/* the caller's scratch: one hash table (8 KiB) */
struct lz4w_hash {
    uint16_t pos[LZ4W_HASH_ENTRIES];
};

/*
 * Compress src[0..n) (n <= LZ4W_MAX_INPUT) into one LZ4 block of at most `cap` bytes at dst.
 * Returns the block's size, or 0 when it would not fit in `cap` (pass cap = n - 1 to get 0
 * for "does not compress") or n is 0 or above LZ4W_MAX_INPUT.  Never writes dst[cap] or
 * beyond, even when it returns 0.
 */
size_t lz4w_compress(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, struct lz4w_hash *h);

#endif
