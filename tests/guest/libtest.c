// SPDX-License-Identifier: MIT
/*
 * Report library for in-guest tests: a small printf, PASS/FAIL/SKIP lines and
 * the summary, written to ConOut.  See libtest.h for the line format.
 */
#include "libtest.h"
#include "lib/fmt.h"

#include <efilib.h>

static EFI_SYSTEM_TABLE *st;
static char options[256]; /* load options as ASCII, NUL-terminated */
static unsigned n_tests, n_failed, n_skipped;

void test_init(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    EFI_LOADED_IMAGE *li = NULL;

    InitializeLib(image, systab);
    st = systab;
    options[0] = '\0';
    if (uefi_call_wrapper(st->BootServices->HandleProtocol, 3, image, &LoadedImageProtocol,
                          (void **)&li) != EFI_SUCCESS ||
        !li || !li->LoadOptions)
        return;
    const CHAR16 *w = li->LoadOptions;
    size_t n = li->LoadOptionsSize / sizeof(CHAR16), i;
    for (i = 0; i < n && i + 1 < sizeof(options) && w[i]; i++)
        options[i] = w[i] < 0x80 ? (char)w[i] : '?';
    options[i] = '\0';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

bool test_option(const char *word)
{
    size_t len = 0;
    while (word[len])
        len++;
    for (const char *p = options; *p;) {
        while (is_space(*p))
            p++;
        const char *start = p;
        while (*p && !is_space(*p))
            p++;
        if ((size_t)(p - start) != len)
            continue;
        size_t i = 0;
        while (i < len && start[i] == word[i])
            i++;
        if (i == len)
            return true;
    }
    return false;
}

void test_stall_us(uint64_t us)
{
    uefi_call_wrapper(st->BootServices->Stall, 1, (UINTN)us);
}

/* ---- formatting: the VMM's own freestanding formatter (vmm/lib/fmt.c) ---- */

size_t test_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
    int n = ptv_vsnprintf(buf, size, fmt, ap);
    return n < 0 ? 0 : (size_t)n;
}

static void console_write(const char *s)
{
    CHAR16 w[160];
    size_t n = 0;

    for (; *s; s++) {
        if (n + 3 >= sizeof(w) / sizeof(w[0])) {
            w[n] = 0;
            uefi_call_wrapper(st->ConOut->OutputString, 2, st->ConOut, w);
            n = 0;
        }
        if (*s == '\n')
            w[n++] = '\r';
        w[n++] = (CHAR16)(unsigned char)*s;
    }
    w[n] = 0;
    uefi_call_wrapper(st->ConOut->OutputString, 2, st->ConOut, w);
}

void test_printf(const char *fmt, ...)
{
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    test_vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    console_write(buf);
}

/* One "TAG: text" line; text cut to LIBTEST_LINE_MAX, line breaks in it flattened. */
static void line(const char *tag, const char *fmt, va_list ap)
{
    char text[LIBTEST_LINE_MAX + 1];

    test_vsnprintf(text, sizeof(text), fmt, ap);
    for (char *c = text; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    test_printf("%s: %s\n", tag, text);
}

bool report(bool cond, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    line(cond ? "PASS" : "FAIL", fmt, ap);
    va_end(ap);
    n_tests++;
    if (!cond)
        n_failed++;
    return cond;
}

void report_skip(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    line("SKIP", fmt, ap);
    va_end(ap);
    n_skipped++;
}

void report_info(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    line("INFO", fmt, ap);
    va_end(ap);
}

unsigned report_summary(void)
{
    test_printf("SUMMARY: %u tests, %u unexpected failures, %u skipped\n", n_tests, n_failed,
                n_skipped);
    return n_failed;
}
