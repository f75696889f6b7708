/* SPDX-License-Identifier: MIT */
/* Fake physical memory for the EPT host tests (see test_ept_fakemem.h). */
#include "test_ept_fakemem.h"
#include "ept/ept_entry.h"

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
}

void fakemem_reset(struct fakemem *fm)
{
    fm->used = 0;
    fm->budget = -1;
    fm->nallocs = 0;
    fm->recording = false;
    fm->nlog = 0;
}

void fakemem_free(struct fakemem *fm)
{
    free(fm->arena);
    free(fm->log);
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

static void fm_store(void *ctx, uint64_t *slot, uint64_t val)
{
    struct fakemem *fm = ctx;

    if (((uintptr_t)slot & 7) || fakemem_va_to_pa(fm, slot) >= FAKEMEM_PA_BASE + fm->used * 4096)
        die("store outside the allocated table pages");
    if (fm->recording) {
        if (fm->nlog == fm->caplog) {
            fm->caplog = fm->caplog ? 2 * fm->caplog : 1024;
            fm->log = realloc(fm->log, fm->caplog * sizeof(*fm->log));
            if (!fm->log)
                die("out of host memory");
        }
        fm->log[fm->nlog++] = (struct fake_store){slot, *slot, val};
    }
    *slot = val;
}

struct ept_ops fakemem_ops(struct fakemem *fm)
{
    return (struct ept_ops){
        .ctx = fm, .alloc_page = fm_alloc, .pa_to_va = fm_pa_to_va, .store = fm_store};
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
