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
#include <intel-pt.h>
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

static int read_mem(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip, void *ctx)
{
    (void)asid, (void)ctx;
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

/* decode one stream; the IPs of the instructions, and the async-disable IPs */
static int decode(const uint8_t *buf, size_t len, uint64_t *ips, size_t max, size_t *n,
                  uint64_t *disabled_at, unsigned *ndis, unsigned *nenabled)
{
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    struct pt_insn_decoder *d = pt_insn_alloc_decoder(&cfg);
    if (!d)
        return -1;
    struct pt_image *img = pt_insn_get_image(d);
    pt_image_set_callback(img, read_mem, NULL);
    *n = 0;
    *ndis = *nenabled = 0;
    int status = pt_insn_sync_forward(d), err = 0;
    while (status >= 0) {
        while (status & pts_event_pending) {
            struct pt_event ev;
            status = pt_insn_event(d, &ev, sizeof(ev));
            if (status < 0)
                break;
            if (ev.type == ptev_async_disabled && *ndis < 8)
                disabled_at[(*ndis)++] = ev.variant.async_disabled.at;
            if (ev.type == ptev_enabled)
                (*nenabled)++;
        }
        if (status < 0)
            break;
        struct pt_insn insn;
        status = pt_insn_next(d, &insn, sizeof(insn));
        if (insn.iclass != ptic_error && status >= 0 && *n < max)
            ips[(*n)++] = insn.ip;
        else if (status >= 0 && insn.iclass != ptic_error && *n >= max)
            break;
    }
    if (status < 0 && status != -pte_eos)
        err = status;
    pt_insn_free_decoder(d);
    return err;
}

static bool in_rt(uint64_t ip)
{
    return ip >= rt_lo && ip < rt_hi;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: trace_check SERIAL_LOG\n");
        return 2;
    }
    if (!parse(argv[1]))
        return 2;
    verdict(nref > 500 && npages > 0 && ptlen[0] > 0 && ptlen[1] > 0 && rt_lo && ev_lo,
            "the log holds the reference (%zu IPs), %u code pages and both windows (%zu, %zu "
            "bytes)",
            nref, npages, ptlen[0], ptlen[1]);
    if (failures)
        return 1;

    /* window 1 */
    uint64_t *ips = calloc(MAX_IPS, sizeof(*ips)), dis[8];
    size_t n = 0;
    unsigned ndis, nen;
    int err = decode(pt[0], ptlen[0], ips, MAX_IPS, &n, dis, &ndis, &nen);
    verdict(err == 0, "window 1 decodes with libipt from PSB to end (%s)",
            err ? pt_errstr(pt_errcode(err)) : "no error");
    size_t a = 0, b = 0, same = 0, first_diff = (size_t)-1;
    uint64_t *dec = calloc(MAX_IPS, sizeof(*dec)), *exp = calloc(MAX_IPS, sizeof(*exp));
    size_t nd = 0, ne = 0;
    for (a = 0; a < n; a++)
        if (!in_rt(ips[a]))
            dec[nd++] = ips[a];
    for (b = 0; b < nref; b++)
        if (!in_rt(ref[b]))
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
           ptlen[0], n, n ? (double)ptlen[0] / (double)n : 0.0);

    /* window 2: [ev_lo, ev_hi] with the UD2 at ev_ud */
    err = decode(pt[1], ptlen[1], ips, MAX_IPS, &n, dis, &ndis, &nen);
    verdict(err == 0, "window 2 decodes with libipt (%s)",
            err ? pt_errstr(pt_errcode(err)) : "no error");
    if (nomtf) {
        printf("SKIP: window 2 vs the range: the CPU delivered no MTF VM exit (Bochs 2.7)\n");
        return failures ? 1 : 0;
    }
    uint64_t want[] = {ev_lo, ev_lo + 1, ev_after, ev_after + 1, ev_hi};
    bool ok = n == 5;
    for (size_t i = 0; ok && i < 5; i++)
        ok = ips[i] == want[i];
    verdict(ok, "window 2: decoded %zu instructions == the range's 5 without the UD2", n);
    verdict(ndis >= 1 && dis[0] == ev_ud && nen >= 2,
            "window 2: tracing stopped at the UD2 (%#" PRIx64 ") and resumed after it",
            ndis ? dis[0] : 0);
    return failures ? 1 : 0;
}
