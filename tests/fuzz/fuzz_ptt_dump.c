/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ptvisor-trace's reading side (tools/ptvisor-trace): the first byte
 * picks what the rest is:
 *   0 dump.meta   1 cpuN.meta   2 snapshot list   3 System.map   4 folded stacks
 *   5 PT bytes decoded over a fixed image (a loop, a call, a return, an indirect jump)
 *   6 the same with a range "lost in transit" (the piecewise decode around holes)
 *   7 kallsyms text (--kallsyms, DIR/kallsyms)
 *   8 a guest kallsyms note's data ("+DELTA TYPE NAME" lines), turned into kallsyms text,
 *     which must then load as kallsyms with the same symbols
 * Invariants: no crash, leak or UB; a refusal is one non-empty line; what a parser accepts
 * holds what the contract says (holes sorted, disjoint, inside the stream; snapshots not
 * empty, not wrapping, paths relative without ".."); the call stacks count exactly the
 * instructions the walk decoded.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame_dec.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the fixed code, at 0x400000 (64-bit):
 *   0: xor eax,eax   2: inc eax   4: cmp eax,16   7: jne 2   9: call 0x10   e: jmp 0
 *  10: ret   11: jmp rax   13: syscall   15: iretq   17: int3 */
static const uint8_t code[] = {0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x10, 0x75,
                               0xf9, 0xe8, 0x02, 0x00, 0x00, 0x00, 0xeb, 0xf0,
                               0xc3, 0xff, 0xe0, 0x0f, 0x05, 0x48, 0xcf, 0xcc};

static struct ptt_dump dump;
static struct ptt_image img;
static struct ptt_opts opts;
static char code_path[64];

static void check_err(const char *err)
{
    if (!err[0] || strchr(err, '\n'))
        abort();
}

static char *text_of(const uint8_t *p, size_t n)
{
    char *t = malloc(n + 1);

    if (!t)
        abort();
    memcpy(t, p, n);
    t[n] = 0;
    return t;
}

static void setup(void)
{
    char err[600];
    int fd;

    if (img.pt)
        return;
    snprintf(code_path, sizeof(code_path), "/tmp/fuzz_ptt_code.XXXXXX");
    fd = mkstemp(code_path);
    if (fd < 0 || write(fd, code, sizeof(code)) != (ssize_t)sizeof(code) || close(fd) != 0)
        abort();
    dump.snap = calloc(1, sizeof(*dump.snap));
    dump.snap[0] = (struct ptt_snap){0x400000, sizeof(code), PTT_CR3_ANY, code_path};
    dump.nsnap = 1;
    dump.ncpu = 1;
    opts.cmd = "fuzz";
    opts.quiet = true;
    opts.cpu = -1;
    if (ptt_image_build(&img, &dump, &opts, err, sizeof(err)) != 0)
        abort();
    /* the file stays mapped by libipt's section cache; the name can go */
    unlink(code_path);
}

struct walk_ctx {
    struct ptt_stacks k;
    uint64_t insns;
};

static int on_step(const struct ptt_step *s, void *ctx)
{
    struct walk_ctx *c = ctx;

    if (s->kind == PTT_STEP_INSN) {
        c->insns++;
        if (s->size == 0 || s->size > 15 || (s->next_flows && !s->next_valid))
            abort();
        (void)ptt_branch_of(s);
    }
    if ((s->kind == PTT_STEP_GAP || s->kind == PTT_STEP_EVENT) && (!s->what || !s->what[0]))
        abort();
    if (ptt_stacks_step(&c->k, &img.syms, s) != 0)
        abort();
    return 0;
}

static void decode(const uint8_t *p, size_t n, bool hole)
{
    struct ptt_cpu *c = &dump.cpu[0];
    struct ptt_hole h;
    struct ptt_walk_stats st;
    struct walk_ctx *w = calloc(1, sizeof(*w));
    char err[300];

    if (!w)
        abort();
    memset(c, 0, sizeof(*c));
    c->pt = malloc(n ? n : 1);
    memcpy(c->pt, p, n);
    c->pt_len = n;
    if (hole && n >= 2) { /* the hole: at a place and of a length the first two bytes say */
        h.off = 2 + (n > 2 ? p[0] % (n - 1) : 0);
        if (h.off > n)
            h.off = n;
        h.len = 1 + p[1];
        c->hole = &h;
        c->holes = 1;
    }
    ptt_stacks_init(&w->k, 8, false);
    if (ptt_walk(&dump, &img, &opts, on_step, w, &st, err, sizeof(err)) != 0)
        abort();
    if (st.insns != w->insns || w->k.total != w->insns)
        abort();
    ptt_stacks_free(&w->k);
    free(c->pt);
    c->pt = NULL;
    c->hole = NULL;
    c->holes = 0;
    free(w);
}

/* kallsyms text: refused with one line, or symbols that are sorted, each found at its own
 * address, at least one of them not at 0 */
static void kallsyms(const uint8_t *p, size_t n)
{
    struct ptt_syms y;
    char err[600];
    char *t = text_of(p, n);

    memset(&y, 0, sizeof(y));
    int dso =
        ptt_syms_add_kallsyms_text(&y, t, n, "kallsyms", "[kernel.kallsyms]", err, sizeof(err));
    if (dso < 0) {
        check_err(err);
    } else {
        bool nonzero = false;
        ptt_syms_finish(&y);
        for (size_t i = 0; i < y.n; i++) {
            nonzero = nonzero || y.s[i].addr;
            if (y.s[i].end <= y.s[i].addr || (i && y.s[i - 1].addr >= y.s[i].addr))
                abort();
            if (ptt_syms_find(&y, y.s[i].addr) != &y.s[i])
                abort();
        }
        if (!y.n || !nonzero)
            abort();
    }
    ptt_syms_free(&y);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[600];

    setup();
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 9) {
    case 0: {
        struct ptt_dump d;
        memset(&d, 0, sizeof(d));
        uint64_t fr[3];
        char *t = text_of(p, n);
        if (ptt_parse_dump_meta(t, n, &d, fr, err, sizeof(err)) != 0)
            check_err(err);
        else if (d.ncpu > PTT_MAX_CPUS || !d.protocol)
            abort();
        free(t);
        break;
    }
    case 1: {
        struct ptt_cpu c;
        uint64_t bytes = 0;
        memset(&c, 0, sizeof(c));
        char *t = text_of(p, n);
        if (ptt_parse_cpu_meta(t, n, &c, &bytes, err, sizeof(err)) != 0) {
            check_err(err);
        } else {
            for (unsigned i = 0; i < c.holes; i++)
                if (!c.hole[i].len || c.hole[i].off + c.hole[i].len > bytes ||
                    (i && c.hole[i - 1].off + c.hole[i - 1].len > c.hole[i].off))
                    abort();
            if (c.cpu >= PTT_MAX_CPUS)
                abort();
        }
        free(c.hole);
        free(c.cr3s);
        free(t);
        break;
    }
    case 2: {
        struct ptt_dump d;
        memset(&d, 0, sizeof(d));
        char *t = text_of(p, n);
        if (ptt_parse_snapshots(t, n, &d, err, sizeof(err)) != 0)
            check_err(err);
        for (unsigned i = 0; i < d.nsnap; i++) {
            const struct ptt_snap *s = &d.snap[i];
            if (!s->len || s->va + (s->len - 1) < s->va || s->path[0] == '/' ||
                !strcmp(s->path, "..") || !strncmp(s->path, "../", 3) || strstr(s->path, "/../") ||
                (strlen(s->path) >= 3 && !strcmp(s->path + strlen(s->path) - 3, "/..")))
                abort();
            free(s->path);
        }
        free(d.snap);
        free(t);
        break;
    }
    case 3: {
        struct ptt_syms y;
        char buf[64];
        memset(&y, 0, sizeof(y));
        char *t = text_of(p, n);
        int dso = ptt_syms_add_map_text(&y, t, n, "map", "[k]", err, sizeof(err));
        if (dso < 0) {
            check_err(err);
        } else {
            ptt_syms_set_bias(&y, (unsigned)dso, n);
            ptt_syms_finish(&y);
            for (size_t i = 0; i < y.n; i++) {
                if (y.s[i].end <= y.s[i].addr || (i && y.s[i - 1].addr >= y.s[i].addr))
                    abort();
                if (ptt_syms_find(&y, y.s[i].addr) != &y.s[i])
                    abort();
                ptt_syms_fmt(&y, y.s[i].addr + 1, buf, sizeof(buf));
            }
        }
        ptt_syms_free(&y);
        free(t);
        break;
    }
    case 4: {
        struct ptt_stacks k;
        FILE *null = fopen("/dev/null", "w");
        char *t = text_of(p, n);
        ptt_stacks_init(&k, 0, false);
        if (ptt_stacks_add_folded(&k, t, n, "folded", err, sizeof(err)) != 0) {
            check_err(err);
        } else {
            ptt_stacks_totals(&k);
            if (k.nnode && k.node[0].total != k.total)
                abort();
            if (null && ptt_stacks_write_folded(&k, null) != 0)
                abort();
        }
        if (null)
            fclose(null);
        ptt_stacks_free(&k);
        free(t);
        break;
    }
    case 5:
        decode(p, n, false);
        break;
    case 6:
        decode(p, n, true);
        break;
    case 7:
        kallsyms(p, n);
        break;
    default: {
        char *t = text_of(p, n), *out;
        size_t olen;
        uint64_t entry;
        unsigned nsym;
        if (frame_kallsyms_text(t, n, &out, &olen, &entry, &nsym, err, sizeof(err)) != 0) {
            check_err(err);
        } else {
            /* nsym lines, addresses ascending, and kallsyms takes them */
            uint64_t prev = 0;
            unsigned lines = 0;
            for (char *q = out; q < out + olen; lines++) {
                char *e = memchr(q, '\n', (size_t)(out + olen - q));
                uint64_t a = strtoull(q, NULL, 16);
                if (!e || a < prev || e - q < 20)
                    abort();
                prev = a;
                q = e + 1;
            }
            if (lines != nsym)
                abort();
            kallsyms((const uint8_t *)out, olen);
            free(out);
        }
        free(t);
        break;
    }
    }
    return 0;
}
