/* SPDX-License-Identifier: MIT */
/*
 * A tiny report library for in-guest test programs (kvm-unit-tests style).
 *
 * Output goes to the UEFI console (OVMF mirrors it to COM1), one line each,
 * in exactly these forms so the harness can parse the serial log:
 *
 *   PASS: <what>
 *   FAIL: <what>
 *   SKIP: <why>
 *   INFO: <free text, not counted>
 *   SUMMARY: <N> tests, <M> unexpected failures, <K> skipped
 *
 * <what> is cut to LIBTEST_LINE_MAX characters, so a line never wraps on the
 * firmware's 80-column terminal.  N counts PASS + FAIL lines.
 */
#ifndef PTV_GUEST_LIBTEST_H
#define PTV_GUEST_LIBTEST_H

#include <efi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIBTEST_LINE_MAX 72

#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

void test_init(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab);

/* true if the image's load options (the config's cmdline) hold this word */
bool test_option(const char *word);

bool report(bool cond, const char *fmt, ...) PRINTF_LIKE(2, 3);
void report_skip(const char *fmt, ...) PRINTF_LIKE(1, 2);
void report_info(const char *fmt, ...) PRINTF_LIKE(1, 2);
/* prints the SUMMARY line; returns the number of unexpected failures */
unsigned report_summary(void);

/* busy-wait through the firmware (Boot Services Stall) */
void test_stall_us(uint64_t us);

/* plain console output, and the formatter behind it (returns the full length) */
void test_printf(const char *fmt, ...) PRINTF_LIKE(1, 2);
size_t test_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);

#endif
