/* SPDX-License-Identifier: MIT */
/*
 * The host half of trace.efi (tests/guest/trace.c): read the serial log, rebuild
 * the guest's code pages and the two trace windows, decode them with libipt and
 * compare with what the guest says ran.
 *
 *   trace_check SERIAL_LOG
 *
 * Window 1: the decoded instructions outside the wrapper code == the guest's own
 * single-step (RFLAGS.TF) reference, one by one.  Window 2 (IP range around a
 * UD2): decoded = the range's instructions without the UD2, and the decoder saw
 * tracing stop at the UD2 (the event) and resume after it.  Prints PASS/FAIL
 * lines; exit status 1 on any FAIL.
 */
#define _GNU_SOURCE
#include <intel-pt.h>
#include "fakes/swpt_dec.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAGES 256
#define MAX_IPS   (1u << 20)

static struct page {
    uint64_t addr;
    uint8_t b[4096];
} pages[MAX_PAGES];
static unsigned npages;
static uint8_t pt[2][1 << 20];
static size_t ptlen[2];
static uint64_t *ref;
static size_t nref;
static uint64_t rt_lo, rt_hi, ev_lo, ev_ud, ev_after, ev_hi;
static int failures;
static bool nomtf; /* the guest saw no MTF exit (TRACE-NOMTF): only the decodes are checked */

static void verdict(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures += !ok;
}

static size_t unhex(const char *s, uint8_t *out, size_t max)
{
    size_t n = 0;
    while (s[0] && s[1] && n < max && s[0] != '\n' && s[0] != '\r') {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1)
            break;
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

static struct page *page_at(uint64_t a, bool add)
{
    for (unsigned i = 0; i < npages; i++)
        if (pages[i].addr == (a & ~0xfffull))
            return &pages[i];
    if (!add || npages == MAX_PAGES)
        return NULL;
    pages[npages].addr = a & ~0xfffull;
    return &pages[npages++];
}

static int read_mem(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx)
{
    (void)cr3, (void)ctx;
    size_t n = 0;
    while (n < size) {
        struct page *p = page_at(ip + n, false);
        if (!p)
            break;
        size_t off = (ip + n) & 0xfff, k = 4096 - off;
        if (k > size - n)
            k = size - n;
        memcpy(buf + n, p->b + off, k);
        n += k;
    }
    return n ? (int)n : -pte_nomap;
}

static bool parse(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return false;
    }
    char line[512];
    ref = calloc(MAX_IPS, sizeof(*ref));
    while (fgets(line, sizeof(line), f)) {
        char *s = strstr(line, "TRACE-");
        uint64_t a;
        int n;
        if (!s)
            continue;
        if (sscanf(s, "TRACE-CODE %" SCNx64 " %n", &a, &n) == 1) {
            struct page *p = page_at(a, true);
            if (p)
                unhex(s + n, p->b + (a & 0xfff), 4096 - (a & 0xfff));
        } else if (sscanf(s, "TRACE-PT1 %" SCNx64 " %n", &a, &n) == 1 && a < sizeof(pt[0])) {
            size_t k = unhex(s + n, pt[0] + a, sizeof(pt[0]) - a);
            if (a + k > ptlen[0])
                ptlen[0] = a + k;
        } else if (sscanf(s, "TRACE-PT2 %" SCNx64 " %n", &a, &n) == 1 && a < sizeof(pt[1])) {
            size_t k = unhex(s + n, pt[1] + a, sizeof(pt[1]) - a);
            if (a + k > ptlen[1])
                ptlen[1] = a + k;
        } else if (!strncmp(s, "TRACE-NOMTF", 11)) {
            nomtf = true;
        } else if (!strncmp(s, "TRACE-REF", 9)) {
            char *q = s + 9, *e;
            for (;;) {
                uint64_t ip = strtoull(q, &e, 16);
                if (e == q || nref == MAX_IPS)
                    break;
                ref[nref++] = ip;
                q = e;
            }
        } else if (sscanf(s, "TRACE-RANGE rt %" SCNx64 " %" SCNx64, &rt_lo, &rt_hi) == 2) {
        } else if (sscanf(s, "TRACE-RANGE ev %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64, &ev_lo,
                          &ev_ud, &ev_after, &ev_hi) == 4) {
        }
    }
    fclose(f);
    return true;
}

struct ips {
    uint64_t *ip;
    size_t n;
};

static int on_insn(uint64_t ip, uint64_t cr3, void *ctx)
{
    (void)cr3;
    struct ips *o = ctx;
    if (o->n < MAX_IPS)
        o->ip[o->n++] = ip;
    return 0;
}

/* the instruction at ip (in a printed code page) is a REP / REPNE string instruction */
static bool is_rep_string(uint64_t ip)
{
    for (unsigned i = 0; i < npages; i++) {
        if (ip < pages[i].addr || ip >= pages[i].addr + 4096 - 15)
            continue;
        const uint8_t *b = pages[i].b + (ip - pages[i].addr);
        bool rep = false;
        unsigned k = 0;
        for (; k < 14; k++) {
            uint8_t x = b[k];
            if (x == 0xf3 || x == 0xf2)
                rep = true;
            else if (!(x == 0x66 || x == 0x67 || x == 0x2e || x == 0x3e || x == 0x26 || x == 0x36 ||
                       x == 0x64 || x == 0x65 || (x >= 0x40 && x <= 0x4f)))
                break;
        }
        uint8_t op = b[k];
        return rep && ((op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) ||
                       (op >= 0x6c && op <= 0x6f));
    }
    return false;
}

/* one stream through the shared libipt decoder (tests/fakes/swpt_dec.c): 0 or -1 + err */
static int decode(const uint8_t *buf, size_t len, struct ips *o, struct swpt_dec_stats *st,
                  char *err, size_t errlen)
{
    o->n = 0;
    return swpt_decode(buf, len, read_mem, on_insn, o, st, err, errlen);
}

static bool in_rt(uint64_t ip)
{
    return ip >= rt_lo && ip < rt_hi;
}

static uint8_t *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    uint8_t *p = NULL;
    size_t cap = 0;
    *len = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (*len == cap && !(p = realloc(p, cap = cap ? 2 * cap : 65536)))
            abort();
        size_t n = fread(p + *len, 1, cap - *len, f);
        if (!n)
            break;
        *len += n;
    }
    fclose(f);
    if (!p)
        p = malloc(1);
    return p;
}

/*
 * The serial dumps, as `ptvisor-trace extract` wrote them: the TRACE_DUMP of window 2 (its
 * trace stream == the bytes TRACE_READ gave the guest, its code snapshots == the pages the
 * guest printed where both have a page) and the crash dump (a crash report of the triple
 * fault, this CPU's last window).
 */
static void check_dumps(const char *vdir, const char *cdir)
{
    size_t n, m;
    uint8_t *t = slurp(vdir, "cpu0.pt", &n);
    verdict(t && n == ptlen[1] && !memcmp(t, pt[1], n),
            "TRACE_DUMP: the extracted trace == window 2 as TRACE_READ gave it (%zu / %zu bytes)",
            t ? n : 0, ptlen[1]);
    free(t);
    uint8_t *list = slurp(vdir, "snapshots", &m);
    unsigned snaps = 0, same = 0, other = 0, differ = 0;
    for (char *line = list ? strtok((char *)list, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        uint64_t va, len;
        char cr3[32], file[256];
        if (sscanf(line, "%" SCNx64 " %" SCNi64 " %31s %255s", &va, &len, cr3, file) != 4)
            continue;
        size_t got;
        uint8_t *b = slurp(vdir, file, &got);
        snaps++;
        for (uint64_t o = 0; b && got == len && o + 4096 <= len; o += 4096) {
            struct page *pg = page_at(va + o, false);
            if (!pg)
                other++;
            else if (!memcmp(pg->b, b + o, 4096))
                same++;
            else
                differ++;
        }
        free(b);
    }
    free(list);
    verdict(snaps >= 1 && same >= 1 && differ == 0,
            "TRACE_DUMP: %u code snapshot(s); %u page(s) == the guest's bytes, %u differ, %u not "
            "printed by the guest",
            snaps, same, differ, other);
    uint8_t *crash = slurp(cdir, "crash.txt", &n);
    bool tf = crash && memmem(crash, n, "guest stopped: TRIPLE_FAULT", 27);
    verdict(tf, "crash dump: crash.txt holds the report of the triple fault (%zu bytes)",
            crash ? n : 0);
    verdict(crash && memmem(crash, n, "---- last exits", 15) && memmem(crash, n, "guest LBR", 9),
            "crash dump: the report has the recent exits and the guest's LBR section");
    free(crash);
    uint8_t *meta = slurp(cdir, "dump.meta", &n);
    verdict(meta && memmem(meta, n, "reason crash", 12) && memmem(meta, n, "complete yes", 12),
            "crash dump: complete, reason crash");
    free(meta);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: trace_check SERIAL_LOG [VMCALL_DUMP_DIR CRASH_DUMP_DIR]\n");
        return 2;
    }
    if (!parse(argv[1]))
        return 2;
    if (argc == 4)
        check_dumps(argv[2], argv[3]);
    verdict(nref > 500 && npages > 0 && ptlen[0] > 0 && ptlen[1] > 0 && rt_lo && ev_lo,
            "the log holds the reference (%zu IPs), %u code pages and both windows (%zu, %zu "
            "bytes)",
            nref, npages, ptlen[0], ptlen[1]);
    if (failures)
        return 1;

    /* window 1 */
    struct ips o = {.ip = calloc(MAX_IPS, sizeof(uint64_t))};
    struct swpt_dec_stats st;
    char err[256] = "no error";
    int rc = decode(pt[0], ptlen[0], &o, &st, err, sizeof(err));
    verdict(rc == 0, "window 1 decodes with libipt from PSB to end (%s)", err);
    size_t same = 0, first_diff = (size_t)-1;
    uint64_t *dec = calloc(MAX_IPS, sizeof(*dec)), *exp = calloc(MAX_IPS, sizeof(*exp));
    size_t nd = 0, ne = 0;
    for (size_t a = 0; a < o.n; a++)
        if (!in_rt(o.ip[a]))
            dec[nd++] = o.ip[a];
    /* a REP string instruction is one instruction in the trace (PT does not break it up unless an
     * event does), while the trap flag single-steps each iteration (SDM Vol. 3B 17.3.1.4): the
     * reference's repeats of one REP instruction count once */
    for (size_t b = 0; b < nref; b++)
        if (!in_rt(ref[b]) && !(ne && exp[ne - 1] == ref[b] && is_rep_string(ref[b])))
            exp[ne++] = ref[b];
    for (size_t i = 0; i < nd && i < ne; i++) {
        if (dec[i] != exp[i]) {
            first_diff = i;
            break;
        }
        same++;
    }
    if (first_diff != (size_t)-1 || nd != ne) {
        size_t i = first_diff == (size_t)-1 ? same : first_diff;
        printf("INFO: first difference at instruction %zu: decoded %#" PRIx64 ", stepped %#" PRIx64
               "\n",
               i, i < nd ? dec[i] : 0, i < ne ? exp[i] : 0);
    }
    if (nomtf)
        printf("SKIP: window 1 vs the reference: the CPU delivered no MTF VM exit (Bochs 2.7)\n");
    else
        verdict(nd == ne && same == ne && ne > 500,
                "window 1: decoded %zu instructions == the %zu single-stepped, in order", nd, ne);
    printf("INFO: window 1: %zu bytes of PT for %zu instructions (%.2f bytes/instruction)\n",
           ptlen[0], o.n, o.n ? (double)ptlen[0] / (double)o.n : 0.0);

    /* window 2: [ev_lo, ev_hi] with the UD2 at ev_ud */
    snprintf(err, sizeof(err), "no error");
    const uint64_t range2[1][2] = {{ev_lo, ev_hi}};
    o.n = 0;
    rc = swpt_decode_ranges(pt[1], ptlen[1], read_mem, on_insn, &o, &st, err, sizeof(err), range2,
                            1);
    verdict(rc == 0, "window 2 decodes with libipt (%s)", err);
    if (nomtf) {
        printf("SKIP: window 2 vs the range: the CPU delivered no MTF VM exit (Bochs 2.7)\n");
        return failures ? 1 : 0;
    }
    uint64_t want[] = {ev_lo, ev_lo + 1, ev_after, ev_after + 1, ev_hi};
    bool ok = o.n == 5;
    for (size_t i = 0; ok && i < 5; i++)
        ok = o.ip[i] == want[i];
    verdict(ok, "window 2: decoded %zu instructions == the range's 5 without the UD2", o.n);
    if (!ok)
        for (size_t i = 0; i < o.n && i < 16; i++)
            printf("INFO: window 2 instruction %zu at %#" PRIx64 " (range %#" PRIx64 "-%#" PRIx64
                   ", UD2 %#" PRIx64 ")\n",
                   i, o.ip[i], ev_lo, ev_hi, ev_ud);
    verdict(st.async_disabled >= 1 && st.first_async_disabled_at == ev_ud && st.enabled >= 2,
            "window 2: tracing stopped at the UD2 (%#" PRIx64 ") and resumed after it",
            st.async_disabled ? st.first_async_disabled_at : 0);
    return failures ? 1 : 0;
}
