/* SPDX-License-Identifier: MIT */
/*
 * The DMAR table (see dmar.h): every offset is checked against the table's checked length
 * before it is read; nothing the firmware wrote is used before its structure's length is.
 */
#include <stdarg.h>
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include "iommu/dmar.h"

/* ACPI 5.2.6: the system description table header */
#define HDR_OFF_LEN  4
#define HDR_ACPI_LEN 36
/* VT-d 8.1: DMAR fields after the header */
#define DMAR_OFF_HAW   36
#define DMAR_OFF_FLAGS 37
#define HAW_MIN        32 /* narrower would not even reach the 4 GiB below */
#define HAW_MAX        64

/* VT-d 8.2: remapping structure types */
#define RS_DRHD 0
#define RS_RMRR 1
#define RS_HDR  4 /* type (2) + length (2) */

/* VT-d 8.3: DRHD */
#define DRHD_OFF_FLAGS   4
#define DRHD_OFF_SIZE    5
#define DRHD_OFF_SEGMENT 6
#define DRHD_OFF_BASE    8
#define DRHD_LEN         16
#define DRHD_INCLUDE_ALL (1u << 0)
#define DRHD_SIZE_MASK   0x0fu

/* VT-d 8.4: RMRR */
#define RMRR_OFF_SEGMENT 6
#define RMRR_OFF_BASE    8
#define RMRR_OFF_LIMIT   16
#define RMRR_LEN         24

/* VT-d 8.3.1: device scope */
#define DS_LEN_MIN      6 /* type, length, flags, reserved, enumeration ID, start bus */
#define DS_TYPE_MIN     1 /* PCI endpoint */
#define DS_TYPE_MAX     5 /* ACPI namespace device */
#define DS_TYPE_PCI_SUB 2

#define PAGE_MASK 0xfffull

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static bool __attribute__((format(printf, 3, 4))) fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (!err || !cap)
        return false;
    n = ptv_snprintf(err, cap, "DMAR: ");
    if ((size_t)n >= cap)
        return false;
    va_start(ap, fmt);
    ptv_vsnprintf(err + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* the device scopes in s[0..len): each one's length and type; their count in *n */
static bool scopes(const uint8_t *s, size_t len, unsigned idx, const char *what, unsigned *n,
                   char *err, size_t cap)
{
    size_t off = 0;
    *n = 0;
    while (off < len) {
        if (len - off < DS_LEN_MIN)
            return fail(err, cap, "%s %u: device scope at +%zu truncated (%zu bytes left)", what,
                        idx, off, len - off);
        unsigned type = s[off], slen = s[off + 1];
        if (slen < DS_LEN_MIN || (slen - DS_LEN_MIN) % 2 || slen > len - off)
            return fail(err, cap, "%s %u: device scope at +%zu has length %u (6 + 2n, in bounds)",
                        what, idx, off, slen);
        if (type < DS_TYPE_MIN || type > DS_TYPE_MAX)
            return fail(err, cap, "%s %u: device scope at +%zu has unknown type %u", what, idx, off,
                        type);
        if (type <= DS_TYPE_PCI_SUB && slen == DS_LEN_MIN)
            return fail(err, cap, "%s %u: PCI device scope at +%zu has no path", what, idx, off);
        off += slen;
        (*n)++;
    }
    return true;
}

static bool drhd(const uint8_t *p, unsigned len, struct dmar_info *d, char *err, size_t cap)
{
    unsigned idx = d->n_units;
    struct dmar_unit u = {0};
    uint64_t lim = d->haw >= 64 ? UINT64_MAX : (1ull << d->haw) - 1;

    if (len < DRHD_LEN)
        return fail(err, cap, "DRHD %u: length %u is shorter than %u", idx, len, DRHD_LEN);
    if (idx == DMAR_MAX_UNITS)
        return fail(err, cap, "more than %u DRHDs (remapping units)", DMAR_MAX_UNITS);
    u.include_all = p[DRHD_OFF_FLAGS] & DRHD_INCLUDE_ALL;
    if ((p[DRHD_OFF_SIZE] & DRHD_SIZE_MASK) > DMAR_REG_MAX_LOG)
        return fail(err, cap, "DRHD %u: register set of 2^%u pages (at most 2^%u)", idx,
                    p[DRHD_OFF_SIZE] & DRHD_SIZE_MASK, DMAR_REG_MAX_LOG);
    u.reg_size = 4096ull << (p[DRHD_OFF_SIZE] & DRHD_SIZE_MASK);
    u.segment = get16(p + DRHD_OFF_SEGMENT);
    u.reg_base = get64(p + DRHD_OFF_BASE);
    if (u.reg_base == 0 || (u.reg_base & PAGE_MASK))
        return fail(err, cap, "DRHD %u: register base %#llx is not a 4 KiB aligned address", idx,
                    (unsigned long long)u.reg_base);
    if (u.reg_base > lim || u.reg_size - 1 > lim - u.reg_base)
        return fail(err, cap, "DRHD %u: registers [%#llx, +%#llx) beyond the %u-bit host width",
                    idx, (unsigned long long)u.reg_base, (unsigned long long)u.reg_size, d->haw);
    for (unsigned j = 0; j < idx; j++) {
        const struct dmar_unit *o = &d->units[j];
        if (u.reg_base < o->reg_base + o->reg_size && o->reg_base < u.reg_base + u.reg_size)
            return fail(err, cap, "DRHDs %u and %u: register sets overlap at %#llx", j, idx,
                        (unsigned long long)u.reg_base);
        if (u.include_all && o->include_all && o->segment == u.segment)
            return fail(err, cap, "DRHDs %u and %u: both INCLUDE_PCI_ALL for segment %u", j, idx,
                        u.segment);
    }
    if (!scopes(p + DRHD_LEN, len - DRHD_LEN, idx, "DRHD", &u.n_scopes, err, cap))
        return false;
    d->units[d->n_units++] = u;
    return true;
}

static bool rmrr(const uint8_t *p, unsigned len, struct dmar_info *d, char *err, size_t cap)
{
    unsigned idx = d->n_rmrr, n;
    uint64_t base, limit, lim = d->haw >= 64 ? UINT64_MAX : (1ull << d->haw) - 1;

    if (len < RMRR_LEN)
        return fail(err, cap, "RMRR %u: length %u is shorter than %u", idx, len, RMRR_LEN);
    if (idx == DMAR_MAX_RMRR)
        return fail(err, cap, "more than %u RMRRs", DMAR_MAX_RMRR);
    base = get64(p + RMRR_OFF_BASE);
    limit = get64(p + RMRR_OFF_LIMIT); /* the last byte, inclusive */
    if ((base & PAGE_MASK) || (limit & PAGE_MASK) != PAGE_MASK || limit < base || limit > lim)
        return fail(err, cap,
                    "RMRR %u: [%#llx, %#llx] is not 4 KiB aligned, empty or beyond %u bits", idx,
                    (unsigned long long)base, (unsigned long long)limit, d->haw);
    if (!scopes(p + RMRR_LEN, len - RMRR_LEN, idx, "RMRR", &n, err, cap))
        return false;
    if (n == 0)
        return fail(err, cap, "RMRR %u: no device scope", idx);
    d->rmrr[d->n_rmrr++] = (struct dmar_rmrr){base, limit + 1 == 0 ? UINT64_MAX : limit + 1,
                                              get16(p + RMRR_OFF_SEGMENT)};
    return true;
}

/* a segment with units but none for all its devices: only the listed devices are remapped */
static bool listed_only(const struct dmar_info *d)
{
    for (unsigned i = 0; i < d->n_units; i++) {
        bool all = false;
        for (unsigned j = 0; j < d->n_units; j++)
            all |= d->units[j].segment == d->units[i].segment && d->units[j].include_all;
        if (!all)
            return true;
    }
    return false;
}

bool dmar_parse(const uint8_t *t, size_t len, struct dmar_info *d, char *err, size_t cap)
{
    uint32_t tlen;
    uint8_t sum = 0;

    memset(d, 0, sizeof(*d));
    if (err && cap)
        err[0] = 0;
    if (!t || len < DMAR_HEADER_LEN)
        return fail(err, cap, "table of %zu bytes is shorter than its %u-byte header", t ? len : 0,
                    DMAR_HEADER_LEN);
    if (memcmp(t, "DMAR", 4) != 0)
        return fail(err, cap, "signature is not \"DMAR\"");
    tlen = get32(t + HDR_OFF_LEN);
    if (tlen < DMAR_HEADER_LEN || tlen > len || tlen > DMAR_MAX_LEN)
        return fail(err, cap, "length %u (%u..%zu bytes, at most %u)", tlen, DMAR_HEADER_LEN, len,
                    DMAR_MAX_LEN);
    for (uint32_t i = 0; i < tlen; i++)
        sum = (uint8_t)(sum + t[i]);
    if (sum != 0)
        return fail(err, cap, "checksum wrong");
    d->haw = t[DMAR_OFF_HAW] + 1u;
    d->flags = t[DMAR_OFF_FLAGS];
    if (d->haw < HAW_MIN || d->haw > HAW_MAX)
        return fail(err, cap, "host address width %u bits (%u..%u)", d->haw, HAW_MIN, HAW_MAX);

    for (uint32_t off = DMAR_HEADER_LEN; off < tlen;) {
        const uint8_t *p = t + off;
        unsigned type, slen;
        if (tlen - off < RS_HDR)
            return fail(err, cap, "structure at +%u truncated", off);
        type = get16(p);
        slen = get16(p + 2);
        if (slen < RS_HDR || slen > tlen - off)
            return fail(err, cap, "structure type %u at +%u has length %u (4..%u)", type, off, slen,
                        tlen - off);
        if (type == RS_DRHD && !drhd(p, slen, d, err, cap))
            return false;
        if (type == RS_RMRR && !rmrr(p, slen, d, err, cap))
            return false;
        if (type != RS_DRHD && type != RS_RMRR)
            d->n_other++;
        off += slen;
    }
    if (d->n_units == 0)
        return fail(err, cap, "no DRHD (remapping unit)");
    d->listed_only = listed_only(d);
    return true;
}
