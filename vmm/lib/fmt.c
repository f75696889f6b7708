/* SPDX-License-Identifier: MIT */
/* Freestanding formatter for VMM log lines (see fmt.h). */
#include "lib/fmt.h"
#include <stdint.h>
#include <stdbool.h>

struct out {
    char *buf;
    size_t size, len;
};

static void put(struct out *o, char c)
{
    if (o->len + 1 < o->size)
        o->buf[o->len] = c;
    o->len++;
}

static void put_num(struct out *o, uint64_t v, unsigned base, bool upper, bool neg, int width,
                    bool zero, bool left)
{
    char tmp[24];
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    int n = 0;
    do {
        tmp[n++] = digits[v % base];
        v /= base;
    } while (v);
    int len = n + (neg ? 1 : 0);
    if (neg && zero)
        put(o, '-');
    if (!left)
        for (; width > len; width--)
            put(o, zero ? '0' : ' ');
    if (neg && !zero)
        put(o, '-');
    while (n)
        put(o, tmp[--n]);
    if (left)
        for (; width > len; width--)
            put(o, ' ');
}

int ptv_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
    struct out o = {buf, size, 0};
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            put(&o, *fmt);
            continue;
        }
        fmt++;
        bool zero = false, left = false, alt = false;
        for (;; fmt++) {
            if (*fmt == '0')
                zero = true;
            else if (*fmt == '-')
                left = true;
            else if (*fmt == '#')
                alt = true;
            else
                break;
        }
        int width = 0;
        while (*fmt >= '0' && *fmt <= '9')
            width = width * 10 + (*fmt++ - '0');
        int lng = 0;
        while (*fmt == 'l' || *fmt == 'z') {
            lng++;
            fmt++;
        }
        switch (*fmt) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s)
                s = "(null)";
            int len = 0;
            while (s[len])
                len++;
            if (!left)
                for (int w = width; w > len; w--)
                    put(&o, ' ');
            for (int i = 0; i < len; i++)
                put(&o, s[i]);
            if (left)
                for (int w = width; w > len; w--)
                    put(&o, ' ');
            break;
        }
        case 'c':
            put(&o, (char)va_arg(ap, int));
            break;
        case 'd':
        case 'i': {
            int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
            uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
            put_num(&o, mag, 10, false, v < 0, width, zero, left);
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            uint64_t v = lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned);
            if (alt && *fmt != 'u') {
                put(&o, '0');
                put(&o, 'x');
            }
            put_num(&o, v, *fmt == 'u' ? 10 : 16, *fmt == 'X', false, width, zero, left);
            break;
        }
        case 'p':
            put(&o, '0');
            put(&o, 'x');
            put_num(&o, (uintptr_t)va_arg(ap, void *), 16, false, false, width, zero, left);
            break;
        case '%':
            put(&o, '%');
            break;
        case '\0':
            fmt--;
            break;
        default:
            put(&o, '%');
            put(&o, *fmt);
        }
    }
    if (size)
        buf[o.len < size ? o.len : size - 1] = '\0';
    return (int)o.len;
}

int ptv_snprintf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = ptv_vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

bool ptv_fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (!err || !cap)
        return false;
    va_start(ap, fmt);
    ptv_vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return false;
}
