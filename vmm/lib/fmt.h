/* SPDX-License-Identifier: MIT */
#ifndef PTV_LIB_FMT_H
#define PTV_LIB_FMT_H

#include <stdarg.h>
#include <stddef.h>

/* A small vsnprintf: %s %c %d %i %u %x %X %p %% with l/ll/z, width, '0', '-' and '#' flags.
 * Always NUL-terminates (size > 0); returns the length it would have written. */
int ptv_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int ptv_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
