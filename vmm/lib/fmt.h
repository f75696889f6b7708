/* SPDX-License-Identifier: MIT */
#ifndef PTV_LIB_FMT_H
#define PTV_LIB_FMT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* A small vsnprintf: %s %c %d %i %u %x %X %p %% with l/ll/z, width, '0', '-' and '#' flags.
 * Always NUL-terminates (size > 0); returns the length it would have written. */
int ptv_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int ptv_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A check's one-line reason into err[cap] (nothing where err is NULL or cap 0); always false, so a
 * check that refuses says `return ptv_fail(err, cap, "...", ...);` */
bool ptv_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
