/* SPDX-License-Identifier: MIT */
/* Fake physical memory for the EPT host tests (see ept_fakemem.h). */
#include "fakes/ept_fakemem.h"
#include "ept/ept_entry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "fakemem: %s\n", what);
    abort();
}

void fakemem_init(struct fakemem *fm, size_t npages)
{
    memset(fm, 0, sizeof(*fm));
    fm->arena = aligned_alloc(4096, npages * 4096);
    if (!fm->arena)
        die("out of host memory");
    memset(fm->arena, 0xa5, npages * 4096); /* alloc_page must zero */
    fm->npages = npages;
    fm->budget = -1;
    fm->pg_level = calloc(npages, sizeof(*fm->pg_level));
    fm->pg_base = calloc(npages, sizeof(*fm->pg_base));
    if (!fm->pg_level || !fm->pg_base)
        die("out of host memory");
}

void fakemem_reset(struct fakemem *fm)
{
    fm->used = 0;
    fm->budget = -1;
    fm->nallocs = 0;
    fm->recording = false;
    fm->nlog = 0;
    fm->flushes = 0;
    fm->flush_fails = false;
    fm->watch = NULL;
    memset(fm->pg_level, 0, fm->npages * sizeof(*fm->pg_level));
    fm->ngone = 0;
    fm->bbm_count_only = false;
    fm->bbm_violations = 0;
    fm->bbm_first[0] = 0;
}

void fakemem_free(struct fakemem *fm)
{
    free(fm->arena);
    free(fm->log);
    free(fm->pg_level);
    free(fm->pg_base);
    free(fm->gone);
    memset(fm, 0, sizeof(*fm));
}

uint64_t fakemem_va_to_pa(const struct fakemem *fm, const void *va)
{
    const uint8_t *p = va;

    if (p < fm->arena || p >= fm->arena + fm->npages * 4096)
        die("va outside the arena");
    return FAKEMEM_PA_BASE + (uint64_t)(p - fm->arena);
}

static void *fm_alloc(void *ctx, uint64_t *pa)
{
    struct fakemem *fm = ctx;
    uint8_t *va;

    if (fm->budget == 0 || fm->used == fm->npages)
        return NULL;
    if (fm->budget > 0)
        fm->budget--;
    va = fm->arena + fm->used++ * 4096;
    memset(va, 0, 4096);
    *pa = fakemem_va_to_pa(fm, va);
    fm->nallocs++;
    return va;
}

static void *fm_pa_to_va(void *ctx, uint64_t pa)
{
    struct fakemem *fm = ctx;

    if (pa < FAKEMEM_PA_BASE || pa >= FAKEMEM_PA_BASE + fm->used * 4096 || (pa & 4095))
        die("pa_to_va of a page never allocated");
    return fm->arena + (pa - FAKEMEM_PA_BASE);
}

static void log_push(struct fakemem *fm, uint64_t *slot, uint64_t old, uint64_t val)
{
    if (!fm->recording)
        return;
    if (fm->nlog == fm->caplog) {
        fm->caplog = fm->caplog ? 2 * fm->caplog : 1024;
        fm->log = realloc(fm->log, fm->caplog * sizeof(*fm->log));
        if (!fm->log)
            die("out of host memory");
    }
    fm->log[fm->nlog++] = (struct fake_store){slot, old, val};
}

/* ---- the break-before-make checker ---- */

enum kind { K_NONE, K_LEAF, K_TABLE };

static bool is_table(uint64_t v, unsigned level);

static enum kind kind_of(uint64_t v, unsigned level)
{
    if (!(v & EPT_SW_USED))
        return K_NONE;
    return is_table(v, level) ? K_TABLE : K_LEAF;
}

static bool present(uint64_t v)
{
    return (v & VMX_EPT_RWX_MASK) != 0;
}

static void bbm_fail(struct fakemem *fm, const char *fmt, ...)
{
    char buf[sizeof(fm->bbm_first)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (!fm->bbm_violations++)
        memcpy(fm->bbm_first, buf, sizeof(buf));
    if (!fm->bbm_count_only) {
        fprintf(stderr, "fakemem: break-before-make violated: %s\n", buf);
        abort();
    }
}

/* the level of the entries of the reachable table holding slot, and its first GPA */
static bool table_of(const struct fakemem *fm, const uint64_t *slot, unsigned *level,
                     uint64_t *base)
{
    uint64_t pa = fakemem_va_to_pa(fm, slot) & ~4095ull;
    size_t pg = (size_t)((pa - FAKEMEM_PA_BASE) / 4096);

    if (pa == fm->watch->root_pa) {
        *level = fm->watch->levels;
        *base = 0;
        return true;
    }
    if (!fm->pg_level[pg])
        return false;
    *level = fm->pg_level[pg];
    *base = fm->pg_base[pg];
    return true;
}

static void gone_add(struct fakemem *fm, uint64_t gpa, uint64_t size)
{
    struct fake_gone *last = fm->ngone ? &fm->gone[fm->ngone - 1] : NULL;

    if (last && last->leaf_size == size && last->end == gpa) {
        last->end += size;
        return;
    }
    if (fm->ngone == fm->capgone) {
        fm->capgone = fm->capgone ? 2 * fm->capgone : 64;
        fm->gone = realloc(fm->gone, fm->capgone * sizeof(*fm->gone));
        if (!fm->gone)
            die("out of host memory");
    }
    fm->gone[fm->ngone++] = (struct fake_gone){gpa, gpa + size, size};
}

static const char *size_name(uint64_t size)
{
    return size == 4096 ? "4K" : size == 2ull << 20 ? "2M" : size == 1ull << 30 ? "1G" : "?";
}

/* a leaf of size becomes present at gpa: no leaf of another size may have gone since */
static void check_present(struct fakemem *fm, uint64_t gpa, uint64_t size)
{
    for (size_t k = 0; k < fm->ngone; k++) {
        const struct fake_gone *g = &fm->gone[k];

        if (g->leaf_size != size && g->gpa < gpa + size && gpa < g->end) {
            bbm_fail(fm,
                     "a %s leaf made present at GPA %#llx while %s leaves over [%#llx, %#llx) "
                     "left the tree with no invalidation since (a CPU may hold both sizes)",
                     size_name(size), (unsigned long long)gpa, size_name(g->leaf_size),
                     (unsigned long long)g->gpa, (unsigned long long)g->end);
            return;
        }
    }
}

/* the table at pa (entries at level, first GPA base) becomes reachable (on) or not */
static void reach(struct fakemem *fm, uint64_t pa, unsigned level, uint64_t base, bool on)
{
    size_t pg = (size_t)((pa - FAKEMEM_PA_BASE) / 4096);
    const uint64_t *t = fm_pa_to_va(fm, pa);

    fm->pg_level[pg] = on ? (uint8_t)level : 0;
    fm->pg_base[pg] = base;
    for (unsigned i = 0; i < 512; i++) {
        uint64_t v = t[i], gpa = base + (uint64_t)i * EPT_LEVEL_SIZE(level);

        if (kind_of(v, level) == K_TABLE)
            reach(fm, v & EPT_ADDR_MASK, level - 1, gpa, on);
        else if (kind_of(v, level) == K_LEAF && present(v)) {
            if (on)
                check_present(fm, gpa, EPT_LEVEL_SIZE(level));
            else
                gone_add(fm, gpa, EPT_LEVEL_SIZE(level));
        }
    }
}

/* *slot = val, checked */
static void checked_store(struct fakemem *fm, uint64_t *slot, uint64_t val)
{
    unsigned level;
    uint64_t base, gpa, old = *slot;
    enum kind ko, kn;

    if (!fm->watch || old == val || !table_of(fm, slot, &level, &base)) {
        *slot = val;
        return;
    }
    gpa = base + (uint64_t)(((uintptr_t)slot & 4095) / 8) * EPT_LEVEL_SIZE(level);
    ko = kind_of(old, level);
    kn = kind_of(val, level);
    if (present(old) && present(val) && ko != kn)
        bbm_fail(fm, "the level-%u entry for GPA %#llx went from a present %s to a present %s",
                 level, (unsigned long long)gpa, ko == K_TABLE ? "table" : "leaf",
                 kn == K_TABLE ? "table" : "leaf");
    if (ko == K_TABLE)
        reach(fm, old & EPT_ADDR_MASK, level - 1, gpa, false);
    else if (ko == K_LEAF && present(old))
        gone_add(fm, gpa, EPT_LEVEL_SIZE(level));
    *slot = val;
    if (kn == K_TABLE)
        reach(fm, val & EPT_ADDR_MASK, level - 1, gpa, true);
    else if (kn == K_LEAF && present(val))
        check_present(fm, gpa, EPT_LEVEL_SIZE(level));
}

static void fm_store(void *ctx, uint64_t *slot, uint64_t val)
{
    struct fakemem *fm = ctx;

    if (((uintptr_t)slot & 7) || fakemem_va_to_pa(fm, slot) >= FAKEMEM_PA_BASE + fm->used * 4096)
        die("store outside the allocated table pages");
    log_push(fm, slot, *slot, val);
    checked_store(fm, slot, val);
}

void fakemem_watch(struct fakemem *fm, const struct ept *e)
{
    fm->watch = e;
    fm->ngone = 0;
    memset(fm->pg_level, 0, fm->npages * sizeof(*fm->pg_level));
}

void fakemem_flush(struct fakemem *fm, struct ept *e)
{
    log_push(fm, NULL, 0, 0);
    fm->flushes++;
    fm->ngone = 0; /* every CPU forgot what it cached */
    ept_flush_done(e);
}

static void fm_flush(void *ctx, struct ept *e)
{
    struct fakemem *fm = ctx;

    if (!fm->flush_fails)
        fakemem_flush(fm, e);
}

struct ept_ops fakemem_ops(struct fakemem *fm)
{
    return (struct ept_ops){.ctx = fm,
                            .alloc_page = fm_alloc,
                            .pa_to_va = fm_pa_to_va,
                            .store = fm_store,
                            .flush = fm_flush};
}

static void dump_push(struct tree_dump *d, uint64_t a, uint64_t b, uint64_t c)
{
    if (d->n + 3 > d->cap) {
        d->cap = d->cap ? 2 * d->cap : 3 * 1024;
        d->words = realloc(d->words, d->cap * sizeof(*d->words));
        if (!d->words)
            die("out of host memory");
    }
    d->words[d->n++] = a;
    d->words[d->n++] = b;
    d->words[d->n++] = c;
}

static bool is_table(uint64_t v, unsigned level)
{
    return (v & EPT_SW_USED) && level > 1 && (level >= 4 || !(v & VMX_EPT_PAGE_SIZE_MASK));
}

static void dump_table(const struct ept *e, uint64_t pa, unsigned level, struct tree_dump *d,
                       const uint64_t *find, bool *found)
{
    const uint64_t *t = e->ops.pa_to_va(e->ops.ctx, pa);
    unsigned i;

    if (find && find >= t && find < t + 512)
        *found = true;
    for (i = 0; i < 512; i++) {
        if (!(t[i] & EPT_SW_USED))
            continue;
        if (d)
            dump_push(d, pa, i, t[i]);
        if (is_table(t[i], level))
            dump_table(e, t[i] & EPT_ADDR_MASK, level - 1, d, find, found);
    }
}

void tree_dump(const struct ept *e, struct tree_dump *d)
{
    d->n = 0;
    dump_table(e, e->root_pa, e->levels, d, NULL, NULL);
}

bool tree_equal(const struct tree_dump *a, const struct tree_dump *b)
{
    return a->n == b->n && (a->n == 0 || !memcmp(a->words, b->words, a->n * sizeof(*a->words)));
}

void tree_dump_free(struct tree_dump *d)
{
    free(d->words);
    memset(d, 0, sizeof(*d));
}

bool slot_reachable(const struct ept *e, const uint64_t *slot)
{
    bool found = false;

    dump_table(e, e->root_pa, e->levels, NULL, slot, &found);
    return found;
}
