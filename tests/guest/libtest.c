// SPDX-License-Identifier: MIT
/*
 * Report library for in-guest tests: a small printf, PASS/FAIL/SKIP lines and
 * the summary, written to ConOut.  See libtest.h for the line format.
 */
#include "libtest.h"

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

/* ---- formatter: %[-0][width][l|ll|z](d|i|u|x|X|p|s|c) and %% ---- */

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

static void put_num(struct out *o, uint64_t v, unsigned base, bool neg, bool upper, int width,
                    bool zero, bool left)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char tmp[24];
    int n = 0;

    do {
        tmp[n++] = digits[v % base];
        v /= base;
    } while (v);
    int len = n + (neg ? 1 : 0);
    if (neg && zero)
        put(o, '-');
    for (; !left && len < width; width--)
        put(o, zero ? '0' : ' ');
    if (neg && !zero)
        put(o, '-');
    while (n)
        put(o, tmp[--n]);
    for (; left && len < width; width--)
        put(o, ' ');
}

size_t test_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
    struct out o = {buf, size, 0};

    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            put(&o, *p);
            continue;
        }
        bool zero = false, left = false;
        int width = 0, lng = 0;
        for (p++; *p == '0' || *p == '-'; p++)
            *p == '0' ? (zero = true) : (left = true);
        for (; *p >= '0' && *p <= '9'; p++)
            width = width * 10 + (*p - '0');
        for (; *p == 'l' || *p == 'z'; p++)
            lng++;
        switch (*p) {
        case 'd':
        case 'i': {
            int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
            uint64_t m = v < 0 ? -(uint64_t)v : (uint64_t)v;
            put_num(&o, m, 10, v < 0, false, width, zero, left);
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            uint64_t v = lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned);
            put_num(&o, v, *p == 'u' ? 10 : 16, false, *p == 'X', width, zero, left);
            break;
        }
        case 'p':
            put(&o, '0');
            put(&o, 'x');
            put_num(&o, (uint64_t)va_arg(ap, void *), 16, false, false, width, zero, left);
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            int n = 0;
            if (!s)
                s = "(null)";
            while (s[n])
                n++;
            for (; !left && n < width; width--)
                put(&o, ' ');
            for (const char *q = s; *q; q++)
                put(&o, *q);
            for (; left && n < width; width--)
                put(&o, ' ');
            break;
        }
        case 'c':
            put(&o, (char)va_arg(ap, int));
            break;
        case '%':
            put(&o, '%');
            break;
        case '\0':
            p--; /* lone '%' at the end */
            break;
        default:
            put(&o, '%');
            put(&o, *p);
        }
    }
    if (size)
        buf[o.len < size ? o.len : size - 1] = '\0';
    return o.len;
}

/* ---- console ---- */

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
