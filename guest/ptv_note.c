/* SPDX-License-Identifier: MIT */
/* Guest notes (see ptv_note.h; the wire format: docs/serial-protocol.md section 12). */
#define _GNU_SOURCE
#include "ptv_note.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lines ---- */

/* hand a line out with its CRC (s holds the line up to the space before the CRC) */
static void put_line(char *s, size_t n, const struct frame_out *o)
{
    uint32_t crc = frame_crc32(0, s, n);

    for (int i = 7; i >= 0; i--)
        s[n++] = "0123456789abcdef"[(crc >> (4 * i)) & 0xf];
    s[n++] = '\n';
    o->line(o->ctx, s, n);
}

/* the VMM encoder's lines, retyped: its BEGIN record is the VMM's (dropped: the note has its
 * own), DATA and END become d and e with their CRC computed again */
static void relay(void *ctx, const char *s, size_t n)
{
    const struct frame_out *o = ctx;
    char line[FRAME_LINE_MAX + 8];

    if (n < FRAME_PREFIX_LEN + 12 || n > FRAME_LINE_MAX || s[FRAME_PREFIX_LEN] == 'B')
        return;
    memcpy(line, s, n);
    line[FRAME_PREFIX_LEN] = s[FRAME_PREFIX_LEN] == 'D' ? 'd' : 'e';
    put_line(line, n - 9, o);
}

int ptv_note_data(uint32_t id, const char *kind, const uint8_t *p, size_t n,
                  const struct frame_out *o)
{
    static struct frame_enc enc; /* about 19 KiB */
    struct frame_out via = {relay, (void *)o};
    struct frame_begin b = {.dump_id = id,
                            .ncpus = 1,
                            .reason = FRAME_REASON_VMCALL,
                            .source = FRAME_SRC_SOFTWARE,
                            .trace_len = n};
    char line[FRAME_LINE_MAX + 8];
    int k;

    if (!n || n > FRAME_STREAM_MAX || strlen(kind) > 32)
        return -1;
    k = snprintf(line, sizeof(line), "%sb %x 0 1/1 note=%s t=%llx ", FRAME_PREFIX, id, kind,
                 (unsigned long long)n);
    put_line(line, (size_t)k, o);
    if (frame_enc_begin(&enc, &b, &via) != 0)
        return -1;
    for (uint64_t off = 0; off < n && !enc.err;)
        off += frame_enc_data(&enc, FRAME_STREAM_TRACE, off, p + off, n - off);
    frame_enc_end(&enc);
    return enc.err ? -1 : 0;
}

void ptv_note_comm(uint32_t id, uint32_t dump, uint64_t pid, const char *comm,
                   const struct frame_out *o)
{
    char line[FRAME_LINE_MAX + 8];
    int k = snprintf(line, sizeof(line),
                     "%sb %x 0 1/1 note=comm dump=%x pid=%llx t=0 comm=", FRAME_PREFIX, id, dump,
                     (unsigned long long)pid);
    size_t n = (size_t)k;

    for (size_t i = 0; i < PTV_NOTE_COMM_MAX && comm[i]; i++) {
        unsigned char c = (unsigned char)comm[i];
        if (c < 0x21 || c > 0x7e)
            c = '_';
        line[n++] = "0123456789abcdef"[c >> 4];
        line[n++] = "0123456789abcdef"[c & 15];
    }
    if (n == (size_t)k) { /* an empty name */
        line[n++] = '5';
        line[n++] = 'f';
    }
    line[n++] = ' ';
    put_line(line, n, o);
}

/* ---- the kallsyms data ---- */

struct ksym {
    uint64_t addr;
    const char *line; /* "T name[\t[mod]]" */
    size_t len;
    size_t order;
};

static int ksym_cmp(const void *a, const void *b)
{
    const struct ksym *x = a, *y = b;

    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int hexdig(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int ptv_note_kallsyms_data(const char *text, size_t n, uint64_t lo, uint64_t hi, char **out,
                           size_t *outlen, unsigned *nsym, const char **why)
{
    struct ksym *s = NULL;
    size_t ns = 0, cap = 0, pos = 0, zero = 0;
    char *buf = NULL;
    size_t bcap = 0;
    FILE *f;

    *out = NULL;
    *outlen = 0;
    *nsym = 0;
    while (pos < n) {
        const char *p = text + pos, *eol = memchr(p, '\n', n - pos);
        size_t len = eol ? (size_t)(eol - p) : n - pos, i = 0;
        uint64_t a = 0;

        pos += len + (eol ? 1 : 0);
        while (i < len && i < 16 && hexdig((unsigned char)p[i]) >= 0)
            a = a << 4 | (uint64_t)hexdig((unsigned char)p[i++]);
        /* "ADDR T NAME": code symbols only; anything else is skipped */
        if (i == 0 || i + 3 >= len || p[i] != ' ' || p[i + 2] != ' ' || !strchr("tTwW", p[i + 1]) ||
            len - i - 1 > 600)
            continue;
        if (a == 0) {
            zero++;
            continue;
        }
        /* the padding before each function of newer kernels (never run): half the lines */
        if (len - i - 3 > 6 && (!memcmp(p + i + 3, "__pfx_", 6) || !memcmp(p + i + 3, "__cfi_", 6)))
            continue;
        if (a < lo || a > hi)
            continue;
        if (ns == cap) {
            cap = cap ? 2 * cap : 4096;
            struct ksym *t = realloc(s, cap * sizeof(*s));
            if (!t) {
                free(s);
                *why = "out of memory";
                return -1;
            }
            s = t;
        }
        s[ns] = (struct ksym){a, p + i + 1, len - i - 1, ns};
        ns++;
    }
    if (!ns) {
        free(s);
        *why = zero ? "every address is 0: the kernel hides them (read /proc/kallsyms as root)"
                    : "no code symbol (no t, T, w or W line) in that range";
        return -1;
    }
    qsort(s, ns, sizeof(*s), ksym_cmp);
    f = open_memstream(&buf, &bcap);
    if (!f) {
        free(s);
        *why = "out of memory";
        return -1;
    }
    uint64_t prev = 0;
    for (size_t i = 0; i < ns; i++) {
        fprintf(f, "+%llx %.*s\n", (unsigned long long)(s[i].addr - prev), (int)s[i].len,
                s[i].line);
        prev = s[i].addr;
    }
    free(s);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        *why = "out of memory";
        return -1;
    }
    *out = buf;
    *outlen = bcap;
    *nsym = (unsigned)ns;
    return 0;
}
