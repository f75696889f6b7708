/* SPDX-License-Identifier: MIT */
/* The loader's check of vmm.elf against its built-in SHA-256 (see vmm_pin.h). */
#include "vmm_pin.h"
#include "fmt.h"

/* the first PTV_PIN_HEX hex digits of a digest, then "..." */
static void fmt_digest(struct ptv_fmt *f, const uint8_t d[PTV_SHA256_LEN])
{
    static const char hex[] = "0123456789abcdef";
    char s[PTV_PIN_HEX + 4];
    int i;

    for (i = 0; i < PTV_PIN_HEX; i++)
        s[i] = hex[(d[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
    s[i++] = '.', s[i++] = '.', s[i++] = '.', s[i] = '\0';
    ptv_fmt_str(f, s);
}

static bool same(const uint8_t a[PTV_SHA256_LEN], const uint8_t b[PTV_SHA256_LEN])
{
    uint8_t diff = 0;
    for (int i = 0; i < PTV_SHA256_LEN; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

enum ptv_pin_verdict ptv_vmm_pin_check(const struct ptv_vmm_pin *pin, const void *file, size_t len,
                                       const char *path, char *msg, size_t cap)
{
    uint8_t found[PTV_SHA256_LEN];
    struct ptv_fmt f;
    enum ptv_pin_verdict v;

    ptv_sha256(file, len, found);
    v = !pin->pinned               ? PTV_PIN_UNPINNED
        : same(pin->sha256, found) ? PTV_PIN_MATCH
                                   : PTV_PIN_MISMATCH;
    ptv_fmt_init(&f, msg, cap);
    ptv_fmt_str(&f, path);
    ptv_fmt_str(&f, ": SHA-256 ");
    switch (v) {
    case PTV_PIN_MATCH:
        fmt_digest(&f, found);
        ptv_fmt_str(&f, " matches the loader's built-in digest");
        break;
    case PTV_PIN_MISMATCH:
        ptv_fmt_str(&f, "mismatch: expected ");
        fmt_digest(&f, pin->sha256);
        ptv_fmt_str(&f, ", found ");
        fmt_digest(&f, found);
        ptv_fmt_str(&f, " (not the vmm.elf this loader was built with) -- booting natively");
        break;
    case PTV_PIN_UNPINNED:
        fmt_digest(&f, found);
        ptv_fmt_str(&f, " not checked: this loader has no built-in digest (a test build)");
        break;
    }
    return v;
}
