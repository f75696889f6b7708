/* SPDX-License-Identifier: MIT */
/* Freestanding string functions for the VMM and the loader (see ptv_string.h). */
#include "lib/ptv_string.h"
#include <stdint.h>

/* eight bytes a step where n allows (x86 loads and stores need no alignment); the compiler
 * must not turn these loops back into calls of themselves */
#define NO_LIBCALL __attribute__((optimize("no-tree-loop-distribute-patterns")))

NO_LIBCALL void *memcpy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (; n >= 8; n -= 8, d += 8, s += 8) {
        uint64_t w;
        __builtin_memcpy(&w, s, 8); /* one unaligned 8-byte load, inlined */
        __builtin_memcpy(d, &w, 8);
    }
    while (n--)
        *d++ = *s++;
    return dst;
}

NO_LIBCALL void *memmove(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (d < s) {
        while (n--)
            *d++ = *s++;
    } else {
        while (n--)
            d[n] = s[n];
    }
    return dst;
}

NO_LIBCALL void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    uint64_t w = 0x0101010101010101ull * (uint8_t)c;
    for (; n >= 8; n -= 8, d += 8)
        __builtin_memcpy(d, &w, 8);
    while (n--)
        *d++ = (uint8_t)c;
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (; n; n--, x++, y++)
        if (*x != *y)
            return *x - *y;
    return 0;
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

size_t strnlen(const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && s[n])
        n++;
    return n;
}

int strcmp(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n)
{
    for (; n; n--, a++, b++) {
        if (*a != *b)
            return (unsigned char)*a - (unsigned char)*b;
        if (!*a)
            return 0;
    }
    return 0;
}
