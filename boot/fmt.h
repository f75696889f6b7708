/* SPDX-License-Identifier: MIT */
/*
 * Bounded message building for the loader's pure parts (config parser, ELF
 * loader, memory map): no libc printf in the loader, none needed here.  The
 * buffer is always NUL-terminated; output past the end is dropped.
 */
#ifndef PTV_BOOT_FMT_H
#define PTV_BOOT_FMT_H

#include <stddef.h>
#include <stdint.h>

struct ptv_fmt {
    char *buf;
    size_t cap; /* bytes in buf, including the NUL */
    size_t len;
};

void ptv_fmt_init(struct ptv_fmt *f, char *buf, size_t cap);
void ptv_fmt_str(struct ptv_fmt *f, const char *s);
/* n bytes of s, unprintable bytes shown as '?', cut to 40 bytes with "..." */
void ptv_fmt_quoted(struct ptv_fmt *f, const char *s, size_t n);
void ptv_fmt_dec(struct ptv_fmt *f, uint64_t v);
void ptv_fmt_hex(struct ptv_fmt *f, uint64_t v); /* with 0x */

#endif
