/* SPDX-License-Identifier: MIT */
/* Test helper: DMAR tables (VT-d 8.1) written field by field, for test_dmar and fuzz_dmar. */
#ifndef PTV_TEST_DMAR_BUILD_H
#define PTV_TEST_DMAR_BUILD_H

#include <stdint.h>
#include <string.h>

struct dmar_buf {
    uint8_t b[4096];
    size_t len;
};

static inline void db_put(struct dmar_buf *d, size_t off, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        d->b[off + i] = (uint8_t)(v >> (8 * i));
}

/* header: signature, length (sealed later), revision 1, HAW field (= width - 1), flags */
static inline void db_start(struct dmar_buf *d, unsigned haw_field, uint8_t flags)
{
    memset(d, 0, sizeof(*d));
    memcpy(d->b, "DMAR", 4);
    d->b[8] = 1;
    memcpy(d->b + 10, "PTVTST", 6);
    d->b[36] = (uint8_t)haw_field;
    d->b[37] = flags;
    d->len = 48;
}

/* a DRHD with one PCI endpoint scope (bus 0, device dev) unless include_all */
static inline size_t db_drhd(struct dmar_buf *d, uint8_t flags, uint8_t size, uint16_t seg,
                             uint64_t base, int dev)
{
    size_t at = d->len, len = 16 + (dev >= 0 ? 8 : 0);
    db_put(d, at, 0, 2);
    db_put(d, at + 2, len, 2);
    d->b[at + 4] = flags;
    d->b[at + 5] = size;
    db_put(d, at + 6, seg, 2);
    db_put(d, at + 8, base, 8);
    if (dev >= 0) {
        d->b[at + 16] = 1; /* PCI endpoint */
        d->b[at + 17] = 8;
        d->b[at + 21] = 0; /* start bus */
        d->b[at + 22] = (uint8_t)dev;
        d->b[at + 23] = 0;
    }
    d->len += len;
    return at;
}

static inline size_t db_rmrr(struct dmar_buf *d, uint16_t seg, uint64_t base, uint64_t limit)
{
    size_t at = d->len, len = 24 + 8;
    db_put(d, at, 1, 2);
    db_put(d, at + 2, len, 2);
    db_put(d, at + 6, seg, 2);
    db_put(d, at + 8, base, 8);
    db_put(d, at + 16, limit, 8);
    d->b[at + 24] = 1;
    d->b[at + 25] = 8;
    d->b[at + 30] = 0x14;
    d->len += len;
    return at;
}

/* an ATSR-like structure of another type, skipped by the parser */
static inline size_t db_other(struct dmar_buf *d, uint16_t type, size_t len)
{
    size_t at = d->len;
    db_put(d, at, type, 2);
    db_put(d, at + 2, len, 2);
    d->len += len;
    return at;
}

/* length and checksum */
static inline void db_seal(struct dmar_buf *d)
{
    uint8_t s = 0;
    db_put(d, 4, d->len, 4);
    d->b[9] = 0;
    for (size_t i = 0; i < d->len; i++)
        s = (uint8_t)(s + d->b[i]);
    d->b[9] = (uint8_t)(0x100 - s);
}

#endif
