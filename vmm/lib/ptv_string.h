/* SPDX-License-Identifier: MIT */
/*
 * The few libc string functions pure ptvisor code may use.  In the VMM they
 * come from vmm/lib/string.c (freestanding); in host tests from the host libc.
 */
#ifndef PTV_LIB_STRING_H
#define PTV_LIB_STRING_H

#include <stddef.h>

#ifdef PTV_HOST
#include <string.h>
#else
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t max);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
#endif

#endif
