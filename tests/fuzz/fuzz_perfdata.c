/* SPDX-License-Identifier: MIT */
/*
 * The perf.data writer (tools/ptvisor-trace/perfdata.c) under arbitrary dump contents: CPUs
 * (numbers, trace bytes, hole lists in and out of order, CR3 lists), code snapshots and ELF
 * segments (overlapping with equal and different bytes, adjacent, empty, huge, across the
 * user/kernel line).  Checks, besides ASan on every exact allocation:
 *   - pd_plan_dump accepts or refuses with a reason, never reads past a source;
 *   - every region byte is the byte the snapshots give there (or, where none covers it, the
 *     ELF segments), and no region byte is one two snapshots (or two ELF segments) disagree
 *     on;
 *   - regions of one address space do not overlap; AUX pieces add up to the trace less
 *     its holes, in order;
 *   - each region's ELF file holds the region's bytes at pd_code_elf_offset, its headers
 *     inside the file;
 *   - the perf.data image parses with pd_parse (the reader of the format) and its counts
 *     are the plan's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfdata.h"
#include "ptt.h"

struct in {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)*in->p << (8 * i);
    return v;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_perfdata: %s\n", what);
    abort();
}

static uint64_t rd(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define MAX_SRC  12
#define MAX_CPUS 4
#define POOL     8192

static uint64_t pick_va(struct in *in)
{
    static const uint64_t base[] = {0x400000,
                                    0x401000,
                                    0x7ffffffff000ull,
                                    0xffffffff81000000ull,
                                    0x7fffffffffff0000ull,
                                    0x8000000000000000ull - 0x800,
                                    0,
                                    ~0ull - 0xfff};
    uint64_t v = take(in, 2);

    return base[v & 7] + ((v >> 3) & 0x1fff);
}

/* the reference: what the region byte at va must be */
static int expected(const struct pd_src *src, unsigned nsrc, uint64_t va, uint8_t *b)
{
    int found = 0; /* 0 none, 1 snapshot, 2 ELF only, -1 snapshots disagree */

    for (unsigned i = 0; i < nsrc; i++) {
        const struct pd_src *s = &src[i];
        if (s->from_elf || va < s->va || va - s->va >= s->len)
            continue;
        if (found == 1 && *b != s->bytes[va - s->va])
            return -1;
        *b = s->bytes[va - s->va];
        found = 1;
    }
    if (found)
        return found;
    for (unsigned i = 0; i < nsrc; i++) {
        const struct pd_src *s = &src[i];
        if (!s->from_elf || va < s->va || va - s->va >= s->len)
            continue;
        if (found == 2 && *b != s->bytes[va - s->va])
            return -1;
        *b = s->bytes[va - s->va];
        found = 2;
    }
    return found;
}

static void check_elf(const struct pd_buf *e, const struct pd_region *r)
{
    uint64_t off = pd_code_elf_offset(r->va);

    if (e->len < 64 || memcmp(e->p, "\177ELF", 4) != 0)
        fail("ELF: no header");
    uint64_t phoff = rd(e->p + 32, 8), shoff = rd(e->p + 40, 8);
    unsigned shnum = (unsigned)rd(e->p + 60, 2);
    if (phoff + 56 > e->len || shoff + 64ull * shnum > e->len)
        fail("ELF: headers outside the file");
    if (rd(e->p + phoff + 8, 8) != off || rd(e->p + phoff + 16, 8) != r->va ||
        rd(e->p + phoff + 32, 8) != r->len)
        fail("ELF: PT_LOAD does not describe the region");
    if (off + r->len > e->len || memcmp(e->p + off, r->bytes, r->len) != 0)
        fail("ELF: code bytes not at pd_code_elf_offset");
    for (unsigned i = 1; i < shnum; i++) {
        const uint8_t *sh = e->p + shoff + 64ull * i;
        if (rd(sh + 24, 8) + rd(sh + 32, 8) > e->len)
            fail("ELF: a section outside the file");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ptt_dump d;
    struct in in = {data, size};
    struct pd_src src[MAX_SRC];
    uint8_t *pool = malloc(POOL);
    uint8_t *cpu_pt[MAX_CPUS] = {0};
    struct ptt_hole holes[MAX_CPUS][4];
    uint64_t cr3s[MAX_CPUS][3];
    unsigned nsrc;
    struct pd_plan plan;
    char err[300];

    if (!pool)
        return 0;
    for (size_t i = 0; i < POOL; i++)
        pool[i] = (uint8_t)(i * 7 + (size ? data[i % size] : 0));
    memset(&d, 0, sizeof(d));

    uint8_t f = (uint8_t)take(&in, 1);
    d.ncpu = f & 3 ? (f & 3) + (f >> 7) : 0; /* 0 .. 4, sometimes 0 */
    for (unsigned c = 0; c < d.ncpu && c < MAX_CPUS; c++) {
        struct ptt_cpu *p = &d.cpu[c];
        uint8_t g = (uint8_t)take(&in, 1);
        p->cpu = (g & 0x80) ? (unsigned)take(&in, 2) : (g & 7);
        p->pt_len = (size_t)take(&in, 2) % 3000;
        cpu_pt[c] = malloc(p->pt_len + 1);
        if (!cpu_pt[c])
            goto out;
        for (size_t i = 0; i < p->pt_len; i++)
            cpu_pt[c][i] = (uint8_t)take(&in, 1);
        p->pt = p->pt_len || (g & 8) ? cpu_pt[c] : NULL;
        p->holes = (g >> 4) & 3;
        p->hole = holes[c];
        for (unsigned h = 0; h < p->holes; h++)
            holes[c][h] = (struct ptt_hole){take(&in, 2), take(&in, 1)};
        p->ncr3 = (g >> 6) & 1 ? 3 : 1;
        p->cr3s = cr3s[c];
        for (unsigned h = 0; h < p->ncr3; h++)
            cr3s[c][h] = take(&in, 1) << 12;
    }

    nsrc = (unsigned)take(&in, 1) % (MAX_SRC + 1);
    for (unsigned i = 0; i < nsrc; i++) {
        uint8_t g = (uint8_t)take(&in, 1);
        uint64_t off = take(&in, 2) % POOL, len = take(&in, 2) % 3000;
        if (off + len > POOL)
            len = POOL - off;
        src[i] = (struct pd_src){pick_va(&in), len, pool + off, (g & 1) != 0};
        if (g & 2) /* the same address as the one before: overlap, equal or not */
            src[i].va = i ? src[i - 1].va + (g >> 4) : src[i].va;
        if ((g & 0x0c) == 0x0c) /* huge: must be refused before a byte is read */
            src[i].len = PD_MAX_CODE + 1 + take(&in, 1);
    }

    if (pd_plan_dump(&d, src, nsrc, &plan, err, sizeof(err)) != 0) {
        if (!err[0])
            fail("refused without a reason");
        goto out;
    }
    for (unsigned i = 0; i < nsrc; i++)
        if (src[i].len > PD_MAX_CODE)
            fail("a huge source was accepted");

    /* regions: the reference bytes, no overlap within a space */
    for (unsigned i = 0; i < plan.nregion; i++) {
        const struct pd_region *r = &plan.region[i];
        if (!r->len || r->kernel != (r->va >= PD_KERNEL_START))
            fail("empty region or wrong space");
        for (unsigned j = 0; j < i; j++) {
            const struct pd_region *o = &plan.region[j];
            if (r->va < o->va + o->len && o->va < r->va + r->len)
                fail("regions overlap");
        }
        for (uint64_t b = 0; b < r->len; b++) {
            uint8_t want = 0;
            int k = expected(src, nsrc, r->va + b, &want);
            if (k <= 0 || want != r->bytes[b])
                fail("a region byte no source gives there (or snapshots disagree on it)");
        }
    }
    /* AUX pieces: the trace less its holes, in order, per CPU */
    for (unsigned c = 0; c < d.ncpu; c++) {
        size_t got = 0;
        for (unsigned a = 0; a < plan.naux; a++)
            if (plan.aux[a].cpu == d.cpu[c].cpu) {
                if (plan.aux[a].data != d.cpu[c].pt + got)
                    fail("AUX pieces out of order");
                got += plan.aux[a].len;
            }
        if (got != d.cpu[c].pt_len)
            fail("AUX pieces do not add up to the trace");
    }

    /* the files: one ELF per region, the perf.data naming them */
    struct pd_map map[64];
    char names[64][40];
    unsigned nmap = 0;
    for (unsigned i = 0; i < plan.nregion && nmap < 64; i++) {
        const struct pd_region *r = &plan.region[i];
        struct pd_sym sym[2] = {{"f", r->va, 1}, {"g", r->va - 4, 16}};
        struct pd_buf e;
        if (pd_code_elf(&e, r->va, r->bytes, r->len, sym, 2, err, sizeof(err)) != 0) {
            if (r->va + r->len <= UINT64_MAX - 0x1000)
                fail("pd_code_elf refused a region");
            continue;
        }
        check_elf(&e, r);
        pd_buf_free(&e);
        snprintf(names[nmap], sizeof(names[0]), "/c/%c-%llx.elf", r->kernel ? 'k' : 'u',
                 (unsigned long long)r->va);
        map[nmap] = (struct pd_map){PD_GUEST_PID, PD_GUEST_PID, r->kernel,
                                    r->va,        r->len,       pd_code_elf_offset(r->va),
                                    names[nmap]};
        nmap++;
    }
    struct pd_spec spec;
    struct pd_buf img;
    struct pd_info info;
    pd_plan_spec(&plan, map, nmap, &spec);
    if (take(&in, 1) & 1)
        spec.filter = "filter 0x400000/0x1000";
    if (pd_build(&spec, &img, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_perfdata: %s\n", err);
        fail("pd_build refused a plan");
    }
    if (pd_parse(img.p, img.len, &info, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_perfdata: %s\n", err);
        fail("the writer's image does not parse");
    }
    uint64_t bytes = 0;
    for (unsigned a = 0; a < plan.naux; a++)
        bytes += (plan.aux[a].len + 7) & ~7ull;
    if (info.nauxtrace != plan.naux || info.naux_index != plan.naux || info.aux_bytes != bytes ||
        info.nmmap != nmap || info.nitrace != plan.ncpu || info.ncomm != plan.ntask)
        fail("the image's counts are not the plan's");
    /* any truncation of the image: the reader refuses or reads less, never past the end */
    size_t cut = (size_t)take(&in, 4) % (img.len + 1);
    uint8_t *copy = malloc(cut ? cut : 1);
    if (copy) {
        memcpy(copy, img.p, cut);
        (void)pd_parse(copy, cut, &info, err, sizeof(err));
        free(copy);
    }
    pd_buf_free(&img);
    pd_plan_free(&plan);
out:
    for (unsigned c = 0; c < MAX_CPUS; c++)
        free(cpu_pt[c]);
    free(pool);
    return 0;
}
