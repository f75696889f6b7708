/* SPDX-License-Identifier: MIT */
/*
 * LZ4 block compressor (interface in lz4w.h).  The block format, as the LZ4 project's
 * lz4_Block_format.md describes it:
 *   - a block is a series of sequences; a sequence is a token byte, literals, then a match;
 *   - token: high nibble = literal count (15: more bytes follow), low nibble = match length
 *     minus 4 (15: more bytes follow); each extra length byte adds its value, 255 means
 *     another byte follows;
 *   - a match is a 2-byte little-endian offset (1 .. 65535) back into the decoded output,
 *     then the extra match length bytes; the minimum match is 4 bytes;
 *   - the last sequence has literals only (no offset);
 *   - end of block rules: the last 5 bytes are always literals, and the last match starts at
 *     least 12 bytes before the end (so a block shorter than 13 bytes is all literals).
 * This encoder is greedy: at each position it looks up the last position with the same
 * 4 bytes (one hash table slot), takes the match if the bytes agree, extends it backwards
 * over pending literals and forwards as far as the rules allow.  After 32 misses in a row it
 * looks at every second position, after 64 every third... (incompressible data costs less).
 */
#include "trace/lz4w.h"

#include "lib/ptv_string.h"

#define MIN_MATCH    4
#define LAST_LITS    5  /* the last 5 bytes are literals */
#define MF_LIMIT     12 /* a match starts at least 12 bytes before the end */
#define MAX_DISTANCE 65535u

static uint32_t read32(const uint8_t *p)
{
    uint32_t v;

    __builtin_memcpy(&v, p, sizeof(v));
    return v;
}

static unsigned hash4(uint32_t v)
{
    return (v * 2654435761u) >> (32 - LZ4W_HASH_LOG);
}

/* bytes a length field takes beyond its nibble */
static size_t ext_bytes(size_t len)
{
    return len < 15 ? 0 : (len - 15) / 255 + 1;
}

static uint8_t *put_ext(uint8_t *op, size_t len)
{
    if (len < 15)
        return op;
    len -= 15;
    while (len >= 255) {
        *op++ = 255;
        len -= 255;
    }
    *op++ = (uint8_t)len;
    return op;
}

/*
 * One sequence: `lits` literals from `lit`, then (when mlen > 0) a match of mlen bytes at
 * distance `dist`.  NULL when it would not fit below `end`.
 */
static uint8_t *put_seq(uint8_t *op, const uint8_t *end, const uint8_t *lit, size_t lits,
                        size_t dist, size_t mlen)
{
    size_t need = 1 + ext_bytes(lits) + lits + (mlen ? 2 + ext_bytes(mlen - MIN_MATCH) : 0);

    if (need > (size_t)(end - op))
        return NULL;
    size_t ml = mlen ? mlen - MIN_MATCH : 0;
    *op++ = (uint8_t)(((lits < 15 ? lits : 15) << 4) | (ml < 15 ? ml : 15));
    op = put_ext(op, lits);
    memcpy(op, lit, lits);
    op += lits;
    if (mlen) {
        *op++ = (uint8_t)(dist & 0xff);
        *op++ = (uint8_t)(dist >> 8);
        op = put_ext(op, ml);
    }
    return op;
}

size_t lz4w_compress(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, struct lz4w_hash *h)
{
    uint8_t *op = dst;
    const uint8_t *end = dst + cap;
    size_t ip = 0, anchor = 0, misses = 0;

    if (n == 0 || n > LZ4W_MAX_INPUT)
        return 0;
    memset(h->pos, 0, sizeof(h->pos));
    if (n >= MF_LIMIT + 1) {
        size_t ip_last = n - MF_LIMIT;    /* the last position a match may start at */
        size_t match_end = n - LAST_LITS; /* a match ends at or before this */
        while (ip <= ip_last) {
            uint32_t v = read32(src + ip);
            unsigned slot = hash4(v);
            size_t cand = h->pos[slot];
            h->pos[slot] = (uint16_t)ip;
            /* slot 0 doubles as "empty": position 0 is then only found by a real compare */
            if (cand >= ip || ip - cand > MAX_DISTANCE || read32(src + cand) != v) {
                ip += 1 + (misses++ >> 5); /* incompressible stretches: look less often */
                continue;
            }
            misses = 0;
            size_t len = MIN_MATCH;
            while (ip + len < match_end && src[cand + len] == src[ip + len])
                len++;
            while (ip > anchor && cand > 0 && src[ip - 1] == src[cand - 1]) {
                ip--;
                cand--;
                len++;
            }
            op = put_seq(op, end, src + anchor, ip - anchor, ip - cand, len);
            if (!op)
                return 0;
            ip += len;
            anchor = ip;
            /* remember a position inside the match so the next one can chain to it */
            if (ip - 2 <= ip_last)
                h->pos[hash4(read32(src + ip - 2))] = (uint16_t)(ip - 2);
        }
    }
    op = put_seq(op, end, src + anchor, n - anchor, 0, 0);
    return op ? (size_t)(op - dst) : 0;
}
