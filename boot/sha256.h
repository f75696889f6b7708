/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4 §6.2), pure C on plain bytes: the loader hashes the
 * vmm.elf it read before it loads it (vmm_pin.c).  No library in the loader,
 * so it is written here; host-tested against the FIPS/NIST examples and
 * coreutils' sha256sum (test_sha256).
 */
#ifndef PTV_BOOT_SHA256_H
#define PTV_BOOT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define PTV_SHA256_LEN   32 /* digest bytes */
#define PTV_SHA256_BLOCK 64 /* message block bytes */

struct ptv_sha256 {
    uint32_t h[8];                 /* the hash value H(i) */
    uint64_t bytes;                /* message bytes so far */
    uint8_t buf[PTV_SHA256_BLOCK]; /* a partial block */
    size_t used;                   /* bytes in buf, < PTV_SHA256_BLOCK */
};

void ptv_sha256_init(struct ptv_sha256 *s);
void ptv_sha256_update(struct ptv_sha256 *s, const void *data, size_t len);
/* pads, writes the digest; s must be initialised again before reuse */
void ptv_sha256_final(struct ptv_sha256 *s, uint8_t out[PTV_SHA256_LEN]);
/* one shot */
void ptv_sha256(const void *data, size_t len, uint8_t out[PTV_SHA256_LEN]);

#endif
