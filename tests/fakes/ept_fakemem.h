/* SPDX-License-Identifier: MIT */
/*
 * Fake physical memory for EPT host tests: a page allocator over a malloc'd
 * arena whose "physical" addresses start at FAKEMEM_PA_BASE (never equal to
 * the virtual ones), an allocation budget to inject failures, a log of every
 * 8-byte store ept.c makes to table pages and of every invalidation (ops.flush,
 * fakemem_flush()), and a break-before-make checker.
 *
 * The checker (on for the EPT fakemem_watch() names; fx_setup() does it) knows
 * which pages are reachable tables, at which level and for which GPAs, from the
 * stores alone, and keeps every present leaf that left the tree since the last
 * invalidation (a translation some CPU may still cache, with its page size).
 * A store is a violation when
 *  - it replaces a present entry by a present one of another kind (a leaf by a
 *    table or the reverse: a page-size change in place), or
 *  - it makes a leaf present (itself, or inside a table it links) over GPAs for
 *    which a leaf of another page size left the tree since the last
 *    invalidation (a CPU could then hold both sizes: SDM Vol. 3A 4.10.2.3; the
 *    iTLB-multihit machine check).
 * A violation aborts (names the store) unless bbm_count_only is set; it is
 * counted in bbm_violations either way.  Tests that model the caller's INVEPT
 * must call fakemem_flush(), not ept_flush_done(), so the checker sees it.
 */
#ifndef TEST_EPT_FAKEMEM_H
#define TEST_EPT_FAKEMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ept/ept.h"

#define FAKEMEM_PA_BASE 0x00000075a0000000ull

/* a logged store; slot NULL: an invalidation (ops.flush or fakemem_flush()) */
struct fake_store {
    uint64_t *slot;
    uint64_t old, val;
};

/* a present leaf that left the tree, [gpa, end) in pages of leaf_size */
struct fake_gone {
    uint64_t gpa, end, leaf_size;
};

struct fakemem {
    uint8_t *arena;
    size_t npages, used;
    long budget; /* allocations still allowed; < 0: unlimited */
    unsigned long nallocs;
    bool recording; /* log stores into log[] */
    struct fake_store *log;
    size_t nlog, caplog;
    /* invalidations seen (ops.flush, fakemem_flush()); flush_fails: ops.flush is a
     * shootdown that times out (no ept_flush_done(), not an invalidation) */
    unsigned long flushes;
    bool flush_fails;
    /* the break-before-make checker */
    const struct ept *watch;
    uint8_t *pg_level; /* per page: level of its entries while a reachable table, else 0 */
    uint64_t *pg_base; /* per page: first GPA it maps while reachable */
    struct fake_gone *gone;
    size_t ngone, capgone;
    bool bbm_count_only;
    unsigned long bbm_violations;
    char bbm_first[256]; /* the first violation */
};

void fakemem_init(struct fakemem *fm, size_t npages);
/* forget every page handed out (their contents stay until handed out again) */
void fakemem_reset(struct fakemem *fm);
void fakemem_free(struct fakemem *fm);
struct ept_ops fakemem_ops(struct fakemem *fm);
uint64_t fakemem_va_to_pa(const struct fakemem *fm, const void *va);
/* check break-before-make on e (after ept_init(e) over fm's ops) */
void fakemem_watch(struct fakemem *fm, const struct ept *e);
/* the caller's INVEPT on every CPU: logged, then ept_flush_done(e) */
void fakemem_flush(struct fakemem *fm, struct ept *e);

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

/* 0, or ept_init()'s error; break-before-make checked */
static inline int fx_setup(struct fx *f, size_t npages, bool has_1g, bool has_2m)
{
    fakemem_init(&f->fm, npages);
    struct ept_ops ops = fakemem_ops(&f->fm);
    int rc = ept_init(&f->e, &ops, has_1g, has_2m);

    if (!rc)
        fakemem_watch(&f->fm, &f->e);
    return rc;
}

/* the caller's INVEPT (vmx_ept_sync()) */
static inline void fx_flush(struct fx *f)
{
    fakemem_flush(&f->fm, &f->e);
}

#endif
