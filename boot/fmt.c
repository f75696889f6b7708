/* SPDX-License-Identifier: MIT */
/* Bounded message building (see fmt.h). */
#include "fmt.h"

#define QUOTE_MAX 40

static void put(struct ptv_fmt *f, char c)
{
    if (f->cap == 0)
        return;
    if (f->len + 1 < f->cap)
        f->buf[f->len++] = c;
    f->buf[f->len] = '\0';
}

void ptv_fmt_init(struct ptv_fmt *f, char *buf, size_t cap)
{
    f->buf = buf;
    f->cap = cap;
    f->len = 0;
    if (cap)
        buf[0] = '\0';
}

void ptv_fmt_str(struct ptv_fmt *f, const char *s)
{
    while (*s)
        put(f, *s++);
}

void ptv_fmt_quoted(struct ptv_fmt *f, const char *s, size_t n)
{
    size_t i;

    put(f, '\'');
    for (i = 0; i < n && i < QUOTE_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        put(f, c >= 0x20 && c < 0x7f ? (char)c : '?');
    }
    if (n > QUOTE_MAX)
        ptv_fmt_str(f, "...");
    put(f, '\'');
}

void ptv_fmt_dec(struct ptv_fmt *f, uint64_t v)
{
    char tmp[20];
    int n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put(f, tmp[--n]);
}

void ptv_fmt_hex(struct ptv_fmt *f, uint64_t v)
{
    char tmp[16];
    int n = 0;

    do {
        tmp[n++] = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while (v);
    ptv_fmt_str(f, "0x");
    while (n)
        put(f, tmp[--n]);
}
