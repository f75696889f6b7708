/* SPDX-License-Identifier: MIT */
/* Bounded message building (see fmt.h). */
#include "fmt.h"
#include "lib/fmt.h"

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

/* numbers through the VMM's formatter (vmm/lib/fmt.c): one number printer in the tree */
void ptv_fmt_dec(struct ptv_fmt *f, uint64_t v)
{
    char tmp[24];
    ptv_snprintf(tmp, sizeof(tmp), "%lu", v);
    ptv_fmt_str(f, tmp);
}

void ptv_fmt_hex(struct ptv_fmt *f, uint64_t v)
{
    char tmp[24];
    ptv_snprintf(tmp, sizeof(tmp), "%#lx", v);
    ptv_fmt_str(f, tmp);
}
