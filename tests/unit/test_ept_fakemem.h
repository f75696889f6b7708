/* SPDX-License-Identifier: MIT */
/*
 * Fake physical memory for EPT host tests: a page allocator over a malloc'd
 * arena whose "physical" addresses start at FAKEMEM_PA_BASE (never equal to
 * the virtual ones), an allocation budget to inject failures, and a log of
 * every 8-byte store ept.c makes to table pages.
 */
#ifndef TEST_EPT_FAKEMEM_H
#define TEST_EPT_FAKEMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ept/ept.h"

#define FAKEMEM_PA_BASE 0x00000075a0000000ull

struct fake_store {
    uint64_t *slot;
    uint64_t old, val;
};

struct fakemem {
    uint8_t *arena;
    size_t npages, used;
    long budget; /* allocations still allowed; < 0: unlimited */
    unsigned long nallocs;
    bool recording; /* log stores into log[] */
    struct fake_store *log;
    size_t nlog, caplog;
};

void fakemem_init(struct fakemem *fm, size_t npages);
/* forget every page handed out (their contents stay until handed out again) */
void fakemem_reset(struct fakemem *fm);
void fakemem_free(struct fakemem *fm);
struct ept_ops fakemem_ops(struct fakemem *fm);
uint64_t fakemem_va_to_pa(const struct fakemem *fm, const void *va);

/* A dump of every entry in use reachable from the root, to compare trees. */
struct tree_dump {
    uint64_t *words; /* triples: table pa, index, value */
    size_t n, cap;
};
void tree_dump(const struct ept *e, struct tree_dump *d);
bool tree_equal(const struct tree_dump *a, const struct tree_dump *b);
void tree_dump_free(struct tree_dump *d);
/* true if the table page holding 'slot' is reachable from the root */
bool slot_reachable(const struct ept *e, const uint64_t *slot);

/* a fixture: fake memory of npages and an empty EPT over it */
struct fx {
    struct fakemem fm;
    struct ept e;
};

/* 0, or ept_init()'s error */
static inline int fx_setup(struct fx *f, size_t npages, bool has_1g, bool has_2m)
{
    fakemem_init(&f->fm, npages);
    struct ept_ops ops = fakemem_ops(&f->fm);
    return ept_init(&f->e, &ops, has_1g, has_2m);
}

#endif
