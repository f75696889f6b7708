/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace flamegraph: a self-contained SVG (no script, no external file) from the call
 * stacks of a dump (stacks.c) or from folded stacks.  The outermost frames at the bottom;
 * each frame a rectangle as wide as the instructions that ran in it and in what it called;
 * its name as text where it fits, and as a title (tooltip) with the count and the share.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "image.h"

#define ROW     16 /* px per frame */
#define TOP     36 /* title */
#define BOTTOM  28 /* the line of figures */
#define SIDE    10
#define CHAR_PX 7.0 /* 12px Verdana, about */
#define MIN_PX  0.1 /* narrower frames (and what they called) are left out */

/* text for XML: & < > " ' escaped; bytes outside printable ASCII become '?' (a symbol name
 * is not known to be UTF-8); at most max characters, ".." when cut */
static void xml_put(FILE *f, const char *s, size_t max)
{
    size_t n = strlen(s), i;
    bool cut = n > max;

    if (cut)
        n = max > 2 ? max - 2 : 0;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
        }
    }
    if (cut)
        fputs("..", f);
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* warm colours, the same for the same name */
static void colour(const char *name, unsigned *r, unsigned *g, unsigned *b)
{
    uint32_t h = name_hash(name);

    if (!strcmp(name, "[unknown]")) {
        *r = *g = *b = 190;
        return;
    }
    *r = 200 + (h % 56);
    *g = 80 + ((h >> 8) % 150);
    *b = 30 + ((h >> 16) % 50);
}

struct kid {
    uint32_t node;
    const char *name;
};

static int kid_cmp(const void *a, const void *b)
{
    const struct kid *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    return c ? c : (x->node < y->node ? -1 : x->node > y->node);
}

struct frame {
    uint32_t node;
    double x;
    unsigned depth;
};

static unsigned max_depth(const struct ptt_stacks *k, double scale)
{
    unsigned *d = calloc(k->nnode ? k->nnode : 1, sizeof(*d)), m = 0;

    if (!d)
        return 0;
    for (uint32_t i = 1; i < k->nnode; i++) {
        d[i] = d[k->node[i].parent] + 1;
        if ((double)k->node[i].total * scale >= MIN_PX && d[i] > m)
            m = d[i];
    }
    free(d);
    return m;
}

/* 0, or -1 when out of memory */
static int write_svg(const struct ptt_stacks *k, FILE *f, const char *title, unsigned width,
                     const char *unit)
{
    uint64_t total = k->nnode ? k->node[0].total : 0;
    double scale = total ? (double)(width - 2 * SIDE) / (double)total : 0;
    unsigned depth = max_depth(k, scale);
    unsigned height = TOP + BOTTOM + ROW * (depth ? depth : 1) + 8;
    struct frame *todo = NULL;
    struct kid *kids = NULL;
    size_t ntodo = 0, cap = 0, kcap = 0;
    int rc = -1;
    uint64_t shown = 0;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
            "height=\"%u\" viewBox=\"0 0 %u %u\">\n"
            "<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
            "g:hover rect{stroke:#000;stroke-width:0.8}</style>\n"
            "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#f4f4ee\"/>\n"
            "<text x=\"%u\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">",
            width, height, width, height, width, height, width / 2);
    xml_put(f, title, 200);
    fputs("</text>\n", f);
    fprintf(f, "<text x=\"%u\" y=\"%u\">%llu %s; hover over a frame for its count</text>\n", SIDE,
            height - 10, (unsigned long long)total, unit);
    /* depth-first from the root's children, left to right by name */
    if (total && k->nnode > 1) {
        cap = 1024;
        todo = malloc(cap * sizeof(*todo));
        if (!todo)
            goto out;
        todo[ntodo++] = (struct frame){0, SIDE, 0};
    }
    while (ntodo) {
        struct frame fr = todo[--ntodo];
        const struct ptt_node *n = &k->node[fr.node];
        double w = (double)n->total * scale;

        if (fr.node != 0) {
            const char *name = k->names[n->name];
            unsigned r, g, b;
            double y = height - BOTTOM - (double)ROW * fr.depth;
            size_t fit = w > 3 * CHAR_PX ? (size_t)((w - 6) / CHAR_PX) : 0;

            colour(name, &r, &g, &b);
            fputs("<g><title>", f);
            xml_put(f, name, 4096);
            fprintf(f,
                    " (%llu %s, %.2f%%)</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%u\" fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
                    (unsigned long long)n->total, unit, 100.0 * (double)n->total / (double)total,
                    fr.x, y, w, ROW - 1, r, g, b);
            if (fit >= 3) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", fr.x + 3, y + ROW - 4);
                xml_put(f, name, fit);
                fputs("</text>", f);
            }
            fputs("</g>\n", f);
            shown++;
        }
        /* children: sorted by name, pushed right to left so the leftmost comes out first */
        size_t nk = 0;
        for (uint32_t c = n->child; c; c = k->node[c].sibling) {
            if ((double)k->node[c].total * scale < MIN_PX)
                continue;
            if (nk == kcap) {
                size_t nc = kcap ? 2 * kcap : 64;
                struct kid *nn = realloc(kids, nc * sizeof(*nn));
                if (!nn)
                    goto out;
                kids = nn;
                kcap = nc;
            }
            kids[nk++] = (struct kid){c, k->names[k->node[c].name]};
        }
        if (!nk)
            continue;
        qsort(kids, nk, sizeof(*kids), kid_cmp);
        double x = fr.x;
        size_t first = ntodo;
        if (ntodo + nk > cap) {
            size_t nc = (ntodo + nk) * 2;
            struct frame *nt = realloc(todo, nc * sizeof(*nt));
            if (!nt)
                goto out;
            todo = nt;
            cap = nc;
        }
        for (size_t i = 0; i < nk; i++) { /* in order, then reversed on the stack */
            todo[first + nk - 1 - i] = (struct frame){kids[i].node, x, fr.depth + 1};
            x += (double)k->node[kids[i].node].total * scale;
        }
        ntodo += nk;
    }
    fputs("</svg>\n", f);
    rc = 0;
out:
    free(todo);
    free(kids);
    return rc;
}

/* ---- the flamegraph command ---- */

static const char flame_help[] =
    "NAME\n"
    "    ptvisor-trace flamegraph - a flame graph (SVG) of a dump's call stacks\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace flamegraph [OPTIONS] DIR|LOG -o FILE.svg\n"
    "    ptvisor-trace flamegraph --folded STACKS.txt -o FILE.svg\n"
    "\n"
    "DESCRIPTION\n"
    "    The call stacks of `ptvisor-trace stacks` drawn as a flame graph: outermost frames\n"
    "    at the bottom, each frame as wide as the instructions that ran in it and in what it\n"
    "    called, its name where it fits; hovering shows the name, the instruction count and\n"
    "    the share of the total. The SVG is self-contained (no script, no external file).\n"
    "    Frames narrower than 0.1 pixel are left out.\n"
    "\n"
    "OPTIONS\n"
    "    -e FILE[@BASE], -k/--vmlinux VMLINUX, -m SYSTEM.MAP, --kallsyms FILE, --kaslr OFF,\n"
    "    --cpu N, -q, --progress\n"
    "                    as for decode\n"
    "    --depth N, --per-cpu  as for stacks\n"
    "    --folded FILE   draw these folded stacks (\"a;b;c COUNT\" lines) instead of a dump\n"
    "    --title TEXT    the title (default: the dump)\n"
    "    --width PX      the width in pixels (default 1200)\n"
    "    -o FILE         write to FILE instead of standard output\n";

struct fl_ctx {
    struct ptt_stacks k;
    struct ptt_syms *syms;
    int oom;
};

static int fl_step(const struct ptt_step *s, void *ctx)
{
    struct fl_ctx *c = ctx;

    if (ptt_stacks_step(&c->k, c->syms, s) != 0) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

int ptt_cmd_flamegraph(int argc, char **argv)
{
    struct ptt_session s;
    struct ptt_walk_stats st;
    struct fl_ctx *c = calloc(1, sizeof(*c));
    char err[600], title[512];
    int rc = 0;
    FILE *out;

    memset(&s, 0, sizeof(s));
    if (!c)
        return ptt_fail(argv[0], "out of memory");
    rc = ptt_opts_parse(argc, argv, PTT_OPT_OUT | PTT_OPT_FLAME | PTT_OPT_DEPTH | PTT_OPT_PERCPU,
                        flame_help, &s.o);
    if (rc) {
        free(c);
        return rc > 0 ? 0 : 1;
    }
    ptt_stacks_init(&c->k, s.o.depth, s.o.per_cpu);
    if (s.o.folded) { /* no dump: folded stacks */
        char *text;
        size_t len;

        if (s.o.input)
            rc = ptt_fail(s.o.cmd, "--folded or a dump, not both");
        else if (ptt_read_file(s.o.folded, 1ull << 32, &text, &len, err, sizeof(err)) != 0)
            rc = ptt_fail(s.o.cmd, "%s", err);
        else {
            if (ptt_stacks_add_folded(&c->k, text, len, s.o.folded, err, sizeof(err)) != 0)
                rc = ptt_fail(s.o.cmd, "%s", err);
            free(text);
        }
    } else if (ptt_session_load(&s, &rc) == 0) {
        c->syms = &s.im.syms;
        rc = ptt_walk(&s.d, &s.im, &s.o, fl_step, c, &st, err, sizeof(err));
        if (rc < 0 || c->oom)
            rc = ptt_fail(s.o.cmd, "%s", rc < 0 ? err : "out of memory for the call stacks");
        else
            rc = 0;
    } else {
        s.d.dir = NULL; /* nothing loaded */
    }
    if (rc == 0) {
        ptt_stacks_totals(&c->k);
        if (s.o.title)
            snprintf(title, sizeof(title), "%s", s.o.title);
        else
            snprintf(title, sizeof(title), "ptvisor-trace: %s", s.o.folded ? s.o.folded : s.d.dir);
        out = ptt_open_out(&s.o);
        if (!out) {
            rc = 1;
        } else {
            if (write_svg(&c->k, out, title, s.o.width, "instructions") != 0)
                rc = ptt_fail(s.o.cmd, "out of memory drawing the graph");
            rc |= ptt_close_out(&s.o, out);
        }
    }
    ptt_stacks_free(&c->k);
    free(c);
    if (s.d.dir)
        ptt_session_close(&s);
    return rc;
}
