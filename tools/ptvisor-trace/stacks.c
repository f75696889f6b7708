/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace stacks: call stacks rebuilt from the instruction flow, counted per
 * instruction (every instruction is one "sample" of the stack it ran in), printed folded
 * ("a;b;c COUNT", the input format of flame graph tools).
 *
 * The rules: the top frame is always the function of the instruction that runs (a jump into
 * another function, a tail call, replaces it); a call (near or far) whose target the flow
 * reaches pushes the target's function; an interrupt / event libipt reports as an
 * asynchronous branch pushes its handler; a return (near or far, IRET, SYSRET) pops, and
 * where it lands in a function further down the stack (longjmp, frames left by tail calls)
 * pops to it; a gap (decode error, overflow, lost range) empties the stack, since nothing
 * is known of it after; beyond --depth frames the deepest one stands for all deeper ones.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "image.h"

#define UNMATCHED_SEARCH 64 /* frames searched for where a return landed */
#define MAX_FOLDED_DEPTH 65536

static uint32_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint32_t str_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return mix(h);
}

void ptt_stacks_init(struct ptt_stacks *k, unsigned max_depth, bool per_cpu)
{
    memset(k, 0, sizeof(*k));
    k->max_depth = max_depth ? max_depth : 256;
    k->per_cpu = per_cpu;
}

/* ---- names ---- */

static int name_grow(struct ptt_stacks *k)
{
    uint32_t ns = k->nhsize ? 2 * k->nhsize : 1024;
    uint32_t *nh = calloc(ns, sizeof(*nh));

    if (!nh)
        return -1;
    for (uint32_t i = 0; i < k->nname; i++) {
        uint32_t h = str_hash(k->names[i], strlen(k->names[i])) & (ns - 1);
        while (nh[h])
            h = (h + 1) & (ns - 1);
        nh[h] = i + 1;
    }
    free(k->nhash);
    k->nhash = nh;
    k->nhsize = ns;
    return 0;
}

/* the index of a name (interned); UINT32_MAX when out of memory */
static uint32_t intern(struct ptt_stacks *k, const char *s, size_t n)
{
    uint32_t h;

    if ((k->nname + 1) * 2 > k->nhsize && name_grow(k) != 0)
        return UINT32_MAX;
    h = str_hash(s, n) & (k->nhsize - 1);
    while (k->nhash[h]) {
        const char *c = k->names[k->nhash[h] - 1];
        if (!strncmp(c, s, n) && c[n] == 0)
            return k->nhash[h] - 1;
        h = (h + 1) & (k->nhsize - 1);
    }
    if (k->nname == k->capname) {
        uint32_t nc = k->capname ? 2 * k->capname : 1024;
        char **nn = realloc(k->names, nc * sizeof(*nn));
        if (!nn)
            return UINT32_MAX;
        k->names = nn;
        k->capname = nc;
    }
    k->names[k->nname] = strndup(s, n);
    if (!k->names[k->nname])
        return UINT32_MAX;
    k->nhash[h] = k->nname + 1;
    return k->nname++;
}

static uint32_t sym_name(struct ptt_stacks *k, struct ptt_syms *y, uint64_t ip)
{
    const struct ptt_sym *s = ptt_syms_find(y, ip);
    size_t i;

    if (!s)
        return intern(k, "[unknown]", 9);
    i = (size_t)(s - y->s);
    if (k->nsym != y->n) { /* first use with these symbols */
        free(k->sym_name);
        k->sym_name = calloc(y->n, sizeof(*k->sym_name));
        k->nsym = k->sym_name ? y->n : 0;
        if (!k->sym_name)
            return UINT32_MAX;
    }
    if (!k->sym_name[i]) {
        uint32_t id = intern(k, s->name, strlen(s->name));
        if (id == UINT32_MAX)
            return id;
        k->sym_name[i] = id + 1;
    }
    return k->sym_name[i] - 1;
}

/* ---- nodes ---- */

static int node_grow_hash(struct ptt_stacks *k)
{
    uint32_t ns = k->hsize ? 2 * k->hsize : 4096;
    uint32_t *nh = calloc(ns, sizeof(*nh));

    if (!nh)
        return -1;
    for (uint32_t i = 1; i < k->nnode; i++) {
        uint32_t h = mix((uint64_t)k->node[i].parent << 32 | k->node[i].name) & (ns - 1);
        while (nh[h])
            h = (h + 1) & (ns - 1);
        nh[h] = i + 1;
    }
    free(k->hash);
    k->hash = nh;
    k->hsize = ns;
    return 0;
}

static int ensure_root(struct ptt_stacks *k)
{
    if (k->nnode)
        return 0;
    k->node = calloc(1024, sizeof(*k->node));
    if (!k->node)
        return -1;
    k->capnode = 1024;
    k->nnode = 1;
    k->node[0].name = UINT32_MAX;
    return 0;
}

/* the child `name` of `parent` (made when new); UINT32_MAX when out of memory */
static uint32_t child(struct ptt_stacks *k, uint32_t parent, uint32_t name)
{
    uint32_t h;

    if (name == UINT32_MAX || ensure_root(k) != 0)
        return UINT32_MAX;
    if ((k->nnode + 1) * 2 > k->hsize && node_grow_hash(k) != 0)
        return UINT32_MAX;
    h = mix((uint64_t)parent << 32 | name) & (k->hsize - 1);
    while (k->hash[h]) {
        const struct ptt_node *n = &k->node[k->hash[h] - 1];
        if (n->parent == parent && n->name == name)
            return k->hash[h] - 1;
        h = (h + 1) & (k->hsize - 1);
    }
    if (k->nnode == UINT32_MAX - 1)
        return UINT32_MAX;
    if (k->nnode == k->capnode) {
        uint32_t nc = k->capnode * 2;
        struct ptt_node *nn = realloc(k->node, nc * sizeof(*nn));
        if (!nn)
            return UINT32_MAX;
        k->node = nn;
        k->capnode = nc;
    }
    uint32_t id = k->nnode++;
    k->node[id] =
        (struct ptt_node){.parent = parent, .name = name, .sibling = k->node[parent].child};
    k->node[parent].child = id;
    k->hash[h] = id + 1;
    return id;
}

/* ---- the state machine ---- */

static int push(struct ptt_stacks *k, uint32_t name)
{
    uint32_t n;

    if (k->depth >= k->max_depth) { /* the deepest frame stands for the deeper ones */
        k->hidden++;
        k->capped++;
        return 0;
    }
    n = child(k, k->cur, name);
    if (n == UINT32_MAX)
        return -1;
    k->cur = n;
    k->depth++;
    return 0;
}

static void pop(struct ptt_stacks *k, uint32_t landed)
{
    if (k->hidden) {
        k->hidden--;
        return;
    }
    if (k->depth == 0)
        return; /* returned above where the trace began: the next instruction starts anew */
    k->cur = k->node[k->cur].parent;
    k->depth--;
    if (k->depth == 0 || landed == UINT32_MAX || k->node[k->cur].name == landed)
        return;
    /* landed elsewhere: further down the stack? */
    uint32_t n = k->cur;
    for (unsigned i = 0; i < UNMATCHED_SEARCH && i < k->depth; i++) {
        n = k->node[n].parent;
        if (n != k->base && k->node[n].name == landed) {
            k->unmatched++;
            while (k->cur != n) {
                k->cur = k->node[k->cur].parent;
                k->depth--;
            }
            return;
        }
    }
}

static void reset(struct ptt_stacks *k)
{
    k->cur = k->base;
    k->depth = 0;
    k->hidden = 0;
}

int ptt_stacks_step(struct ptt_stacks *k, struct ptt_syms *syms, const struct ptt_step *s)
{
    uint32_t f;

    if (ensure_root(k) != 0)
        return -1;
    switch (s->kind) {
    case PTT_STEP_CPU:
        k->base = 0;
        if (k->per_cpu) {
            char name[16];
            int n = snprintf(name, sizeof(name), "cpu%u", s->cpu);
            k->base = child(k, 0, intern(k, name, (size_t)n));
            if (k->base == UINT32_MAX)
                return -1;
        }
        reset(k);
        return 0;
    case PTT_STEP_GAP:
        k->resets++;
        reset(k);
        return 0;
    case PTT_STEP_EVENT:
        return 0;
    case PTT_STEP_ASYNC:
        if ((f = sym_name(k, syms, s->next_ip)) == UINT32_MAX)
            return -1;
        return push(k, f);
    case PTT_STEP_INSN:
        break;
    }
    if ((f = sym_name(k, syms, s->ip)) == UINT32_MAX)
        return -1;
    if (k->depth == 0) {
        if (push(k, f) != 0)
            return -1;
    } else if (k->node[k->cur].name != f) { /* a jump into another function */
        uint32_t n = child(k, k->node[k->cur].parent, f);
        if (n == UINT32_MAX)
            return -1;
        k->cur = n;
    }
    k->node[k->cur].self++;
    k->total++;
    switch (ptt_branch_of(s)) {
    case PTT_BR_CALL:
    case PTT_BR_CALL_IND:
        if (s->next_flows && s->next_ip != s->ip + s->size) /* call next: reads RIP */
            return push(k, sym_name(k, syms, s->next_ip));
        return 0;
    case PTT_BR_RET:
        if (s->next_valid)
            pop(k, s->next_flows ? sym_name(k, syms, s->next_ip) : UINT32_MAX);
        return 0;
    case PTT_BR_FAR:
        if (s->iclass == ptic_far_call && s->next_flows)
            return push(k, sym_name(k, syms, s->next_ip));
        if (s->iclass == ptic_far_return && s->next_valid)
            pop(k, s->next_flows ? sym_name(k, syms, s->next_ip) : UINT32_MAX);
        return 0;
    default:
        return 0;
    }
}

/* ---- folded text in ---- */

int ptt_stacks_add_folded(struct ptt_stacks *k, const char *text, size_t len, const char *name,
                          char *err, size_t errlen)
{
    unsigned line = 0;
    size_t pos = 0;

    if (ensure_root(k) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    while (pos < len) {
        const char *p = text + pos, *eol = memchr(p, '\n', len - pos);
        size_t n = eol ? (size_t)(eol - p) : len - pos, sp;
        uint64_t count = 0;
        unsigned depth = 0;

        pos += n + (eol ? 1 : 0);
        line++;
        if (n && p[n - 1] == '\r')
            n--;
        if (n == 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if (p[i] == 0 || p[i] == '\t') {
                snprintf(err, errlen, "%s:%u: a NUL or tab byte in a folded stack", name, line);
                return -1;
            }
        for (sp = n; sp > 0 && p[sp - 1] != ' '; sp--)
            ;
        if (sp < 2 || sp == n) {
            snprintf(err, errlen, "%s:%u: not \"frame;frame;... COUNT\"", name, line);
            return -1;
        }
        for (size_t i = sp; i < n; i++) {
            if (p[i] < '0' || p[i] > '9' || count > (UINT64_MAX - 9) / 10) {
                snprintf(err, errlen, "%s:%u: the count is not a number", name, line);
                return -1;
            }
            count = count * 10 + (uint64_t)(p[i] - '0');
        }
        uint32_t cur = 0;
        for (size_t i = 0; i < sp - 1;) {
            size_t j = i;
            while (j < sp - 1 && p[j] != ';')
                j++;
            if (j == i || ++depth > MAX_FOLDED_DEPTH) {
                snprintf(err, errlen, "%s:%u: %s", name, line,
                         j == i ? "an empty frame name" : "more than 65536 frames");
                return -1;
            }
            cur = child(k, cur, intern(k, p + i, j - i));
            if (cur == UINT32_MAX) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            i = j + 1;
        }
        if (k->node[cur].self + count < count || k->total + count < count) {
            snprintf(err, errlen, "%s:%u: counts add up past 2^64", name, line);
            return -1;
        }
        k->node[cur].self += count;
        k->total += count;
    }
    return 0;
}

void ptt_stacks_totals(struct ptt_stacks *k)
{
    for (uint32_t i = 0; i < k->nnode; i++)
        k->node[i].total = k->node[i].self;
    for (uint32_t i = k->nnode; i-- > 1;) /* children come after their parents */
        k->node[k->node[i].parent].total += k->node[i].total;
}

/* ---- folded text out ---- */

static int line_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int ptt_stacks_write_folded(const struct ptt_stacks *k, FILE *f)
{
    char **lines = NULL;
    size_t n = 0, cap = 0;
    char *buf = NULL;
    size_t bcap = 0;
    int rc = -1;

    for (uint32_t i = 1; i < k->nnode; i++) {
        size_t need = 24, at;

        if (!k->node[i].self)
            continue;
        for (uint32_t c = i; c; c = k->node[c].parent)
            need += strlen(k->names[k->node[c].name]) + 1;
        if (need > bcap) {
            char *nb = realloc(buf, need);
            if (!nb)
                goto out;
            buf = nb;
            bcap = need;
        }
        /* the path, written backwards from the leaf */
        at = need - 24;
        buf[at] = 0;
        for (uint32_t c = i; c; c = k->node[c].parent) {
            const char *nm = k->names[k->node[c].name];
            size_t l = strlen(nm);
            if (c != i)
                buf[--at] = ';';
            at -= l;
            memcpy(buf + at, nm, l);
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 1024;
            char **nl = realloc(lines, nc * sizeof(*nl));
            if (!nl)
                goto out;
            lines = nl;
            cap = nc;
        }
        if (asprintf(&lines[n], "%s %llu", buf + at, (unsigned long long)k->node[i].self) < 0)
            goto out;
        n++;
    }
    if (n)
        qsort(lines, n, sizeof(*lines), line_cmp);
    for (size_t i = 0; i < n; i++) {
        fputs(lines[i], f);
        fputc('\n', f);
    }
    rc = 0;
out:
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(buf);
    return rc;
}

void ptt_stacks_free(struct ptt_stacks *k)
{
    for (uint32_t i = 0; i < k->nname; i++)
        free(k->names[i]);
    free(k->names);
    free(k->nhash);
    free(k->node);
    free(k->hash);
    free(k->sym_name);
    memset(k, 0, sizeof(*k));
}

/* ---- the stacks command ---- */

static const char stacks_help[] =
    "NAME\n"
    "    ptvisor-trace stacks - folded call stacks of a dump, counted in instructions\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace stacks [OPTIONS] DIR|LOG\n"
    "\n"
    "DESCRIPTION\n"
    "    One line per call stack: its frames from the outermost, separated by ';', a space\n"
    "    and the number of instructions that ran with exactly that stack (the input format\n"
    "    of flame graph tools). The counts add up to the decoded instructions. Stacks are\n"
    "    rebuilt from the flow: calls push, returns pop (to the caller's frame where a return\n"
    "    skips frames), a jump into another function replaces the top frame, interrupts push\n"
    "    their handler, a gap in the trace starts from an empty stack.\n"
    "\n"
    "OPTIONS\n"
    "    -e FILE[@BASE], -k/--vmlinux VMLINUX, -m SYSTEM.MAP, --kallsyms FILE, --kaslr OFF,\n"
    "    --cpu N, -q, --progress\n"
    "                    as for decode\n"
    "    --depth N       at most N frames (default 256); deeper calls count in the Nth\n"
    "    --per-cpu       a root frame \"cpuN\" per CPU\n"
    "    -o FILE         write to FILE instead of standard output\n";

struct stk_ctx {
    struct ptt_stacks k;
    struct ptt_syms *syms;
    int oom;
};

static int stk_step(const struct ptt_step *s, void *ctx)
{
    struct stk_ctx *c = ctx;

    if (ptt_stacks_step(&c->k, c->syms, s) != 0) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

int ptt_cmd_stacks(int argc, char **argv)
{
    struct ptt_session s;
    struct ptt_walk_stats st;
    struct stk_ctx *c;
    char err[300];
    int rc;
    FILE *out;

    if (ptt_session_open(&s, argc, argv, PTT_OPT_OUT | PTT_OPT_DEPTH | PTT_OPT_PERCPU, stacks_help,
                         &rc) != 0)
        return rc;
    c = calloc(1, sizeof(*c));
    out = c ? ptt_open_out(&s.o) : NULL;
    if (!out) {
        if (!c)
            ptt_fail(s.o.cmd, "out of memory");
        free(c);
        ptt_session_close(&s);
        return 1;
    }
    ptt_stacks_init(&c->k, s.o.depth, s.o.per_cpu);
    c->syms = &s.im.syms;
    rc = ptt_walk(&s.d, &s.im, &s.o, stk_step, c, &st, err, sizeof(err));
    if (rc < 0)
        rc = ptt_fail(s.o.cmd, "%s", err);
    else if (c->oom)
        rc = ptt_fail(s.o.cmd, "out of memory for the call stacks");
    else if (ptt_stacks_write_folded(&c->k, out) != 0)
        rc = ptt_fail(s.o.cmd, "out of memory writing the stacks");
    else
        rc = 0;
    if (!rc && c->k.capped)
        ptt_warn(&s.o, "%llu calls deeper than --depth %u were folded into the deepest frame",
                 (unsigned long long)c->k.capped, s.o.depth);
    rc |= ptt_close_out(&s.o, out);
    ptt_stacks_free(&c->k);
    free(c);
    ptt_session_close(&s);
    return rc;
}
