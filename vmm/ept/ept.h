/* SPDX-License-Identifier: MIT */
/*
 * A pure EPT table builder: map, unmap, protect, translate.  No VMX
 * instruction, no MSR and no global state: the VMM hands it an allocator
 * (struct ept_ops) and issues INVEPT itself when ept_flush_needed() says so.
 * The same file compiles into the VMM and into host tests.
 *
 * Rules every mutating call follows:
 *  - validate, then commit: all operands are checked and every table page the
 *    change needs is reserved before the first entry is written; on any error
 *    the tree is exactly as before (pages already obtained stay on a spare
 *    list for the next call, they are not leaked);
 *  - no torn state: a new table is completely filled while unreachable and is
 *    linked by one 8-byte store, so every store leaves a tree in which each
 *    GPA translates either as before or as after the call, or, between the
 *    break and the make of a page-size change (below), not at all;
 *  - no EPT misconfiguration by construction (SDM Vol. 3C 28.2.3.1): W or X
 *    without R, reserved memory types, 1 GiB/2 MiB pages the CPU lacks and
 *    addresses above MAXPHYADDR are refused;
 *  - a table, once linked, stays (later maps into that range use it), except
 *    (a) under ept_unmap_prune(): a table that call leaves with no entry in use
 *    is unlinked by one store and put on a *retired* list; and (b) a split
 *    undone: a table a mutating call walked into and left *uniform* (512 leaves,
 *    one set of attributes, one contiguous host run aligned to the larger page,
 *    at a level the CPU has large pages for; a child table that is uniform
 *    itself counts as its leaf, so a split two levels deep comes back at once)
 *    is replaced by that one larger leaf -- every GPA translates the same
 *    before and after (break-before-make, below) -- and retired likewise with
 *    the tables below it (splits a guest drives, e.g. by
 *    moving its APIC window, come back when undone).  A retired page is
 *    never written again (but for its not-present word 0, the list link) and
 *    is reused only after ept_flush_done(), i.e. after the caller's INVEPT
 *    made the CPU forget every cached pointer to it (SDM Vol. 3C 28.4.3.1);
 *    so no page can be reused while the CPU's paging-structure caches may
 *    still point at it.  Table pages are never handed back to the allocator;
 *  - break-before-make: an entry never changes page size in place.  A split
 *    (a leaf becomes a table of smaller pages) or a merge (a table becomes one
 *    larger leaf) first makes the entry not present (one store), then has
 *    every CPU that may use this EPT invalidate (ops.flush), and only then
 *    writes the new entry (one store).  The same holds for a table or a leaf
 *    larger than 4 KiB written into a not-present entry while an invalidation
 *    is still owed (the entry may have held the other kind a moment ago).  So
 *    no CPU can hold translations of two page sizes for one address: after a
 *    size change in place a TLB may hold both, and which one an access uses is
 *    implementation-specific (SDM Vol. 3A 4.10.2.3, "Details of TLB Use", whose
 *    remedy is this order; EPT: Vol. 3C 28.4.3.4, "Guidelines for Use of the
 *    INVEPT Instruction"); CPUs with the iTLB-multihit erratum
 *    (IA32_ARCH_CAPABILITIES.PSCHANGE_MC_NO = 0, CVE-2018-12207) raise a
 *    machine check when an instruction fetch meets both.  The window between
 *    the two stores is one shootdown long; a guest access in it takes an EPT
 *    violation, which the VMM resolves by retrying once it holds the EPT lock
 *    (the change is complete by then).  Changes within one page size (another
 *    address, type or permissions) are written in place, as the SDM allows,
 *    and invalidated afterwards (ept_flush_needed()).
 * Errors are negative errno values (EPT_E*); 0 is success.
 */
#ifndef PTV_EPT_H
#define PTV_EPT_H

#include <stdbool.h>
#include <stdint.h>
#include "ept/memtype.h"

/* permissions (the low three bits of an EPT entry) */
#define EPT_R   (1u << 0)
#define EPT_W   (1u << 1)
#define EPT_X   (1u << 2)
#define EPT_RWX (EPT_R | EPT_W | EPT_X)

/* memtype argument flag: set IPAT, i.e. ignore the guest PAT (pt-facts.md G.6) */
#define EPT_MT_IPAT (1u << 3)

/* page levels reported by ept_translate() */
#define EPT_LEVEL_4K 1u
#define EPT_LEVEL_2M 2u
#define EPT_LEVEL_1G 3u

enum {
    EPT_ENOENT = -2,  /* ept_protect over a hole; ept_translate of an unmapped GPA */
    EPT_ENOMEM = -12, /* the allocator ran out: nothing changed */
    EPT_EEXIST = -17, /* ept_build_identity on a non-empty EPT */
    EPT_EINVAL = -22, /* bad operand: alignment, overflow, perms, memtype */
};

struct ept;

struct ept_ops {
    void *ctx;
    /* a zeroed, 4 KiB aligned 4 KiB page; its physical address in *pa; NULL if out */
    void *(*alloc_page)(void *ctx, uint64_t *pa);
    /* the VMM's mapping of a table page the allocator returned */
    void *(*pa_to_va)(void *ctx, uint64_t pa);
    /*
     * Optional: perform the 8-byte store *slot = val (a single atomic store).
     * NULL means ept.c stores itself.  Tests use it to record every store.
     */
    void (*store)(void *ctx, uint64_t *slot, uint64_t val);
    /*
     * Required: make every CPU that may use this EPT forget what it cached
     * from it (INVEPT here and an EPT shootdown to the others), then, if all
     * of them did, call ept_flush_done(e).  ept.c calls it in the middle of a
     * mutating call, between the break and the make of a page-size change
     * (the rules above), only while ept_flush_needed(e); it must not call a
     * mutating ept_* function.  If some CPU did not answer, ept.c goes on with
     * the make: that CPU may keep the old page size, as it keeps any stale
     * translation until it answers (the caller reports it).
     */
    void (*flush)(void *ctx, struct ept *e);
};

struct ept {
    struct ept_ops ops;
    uint64_t root_pa; /* the PML4 */
    uint64_t *root;
    bool has_1g;         /* EPT_VPID_CAP bit 17 (and has_2m) */
    bool has_2m;         /* EPT_VPID_CAP bit 16 */
    unsigned maxphyaddr; /* CPUID 0x80000008 EAX[7:0]; 52 until ept_set_maxphyaddr() */
    unsigned levels;     /* 4, or 5 after ept_set_levels() */
    bool flush_needed;   /* a translation was narrowed, changed or split: INVEPT */
    /* pages obtained by a reservation and not used yet, linked through word 0 */
    uint64_t spare_pa;
    unsigned nr_spare;
    /* tables unlinked by ept_unmap_prune(), reusable after the next INVEPT */
    uint64_t retired_pa;
    unsigned nr_retired;
    /* counters */
    unsigned long nr_tables;    /* linked table pages, the PML4 included */
    unsigned long nr_leaves[3]; /* entries in use per page size: [0] 4K, [1] 2M, [2] 1G */
    unsigned long nr_breaks;    /* ops.flush calls for break-before-make */
};

/* Set up an empty EPT (allocates the PML4).  ops->flush is required (EPT_EINVAL). */
int ept_init(struct ept *e, const struct ept_ops *ops, bool has_1g, bool has_2m)
    __attribute__((warn_unused_result));
/*
 * Use a 5-level walk (levels 5; EPT_VPID_CAP bit 7): GPAs up to 2^57, EPTP
 * page-walk length 5.  Refused once anything is mapped.  (4 = the default.)
 */
int ept_set_levels(struct ept *e, unsigned levels) __attribute__((warn_unused_result));
/* Tell the builder the CPU's MAXPHYADDR (36..52); refused once anything is mapped. */
int ept_set_maxphyaddr(struct ept *e, unsigned bits) __attribute__((warn_unused_result));

/*
 * Map [gpa, gpa+size) to [hpa, hpa+size) with perms (EPT_R[W][X], R required)
 * and memtype (EPT_MT_*, optionally | EPT_MT_IPAT), using the largest pages
 * (1G/2M/4K) that gpa, hpa and size alignment allow.  Existing mappings in the
 * range are replaced (huge pages straddling its ends are split; existing
 * tables are kept and filled at their level).  gpa, hpa and size 4 KiB aligned.
 */
int ept_map(struct ept *e, uint64_t gpa, uint64_t hpa, uint64_t size, unsigned perms,
            unsigned memtype) __attribute__((warn_unused_result));
/* Make [gpa, gpa+size) not present, splitting huge pages at the ends; holes are fine. */
int ept_unmap(struct ept *e, uint64_t gpa, uint64_t size) __attribute__((warn_unused_result));
/*
 * ept_unmap(), then unlink every table below the root the call left with no
 * entry in use; those pages are retired until ept_flush_done() (see the rules
 * above).  INVEPT is then needed (ept_flush_needed()).
 */
int ept_unmap_prune(struct ept *e, uint64_t gpa, uint64_t size) __attribute__((warn_unused_result));
/*
 * Set the permissions of every page in [gpa, gpa+size) to perms (0 allowed:
 * the entries keep address and type but are not present to the CPU).  The
 * whole range must be mapped (else EPT_ENOENT, nothing changed).  *narrowed
 * (may be NULL) is set when some permission was removed: INVEPT before the
 * guest runs again.
 */
int ept_protect(struct ept *e, uint64_t gpa, uint64_t size, unsigned perms, bool *narrowed)
    __attribute__((warn_unused_result));
/*
 * Walk the tables for gpa.  EPT_ENOENT if unmapped.  *memtype as ept_map()
 * takes it (EPT_MT_* | EPT_MT_IPAT), *page_level EPT_LEVEL_*; a page protected
 * to 0 reports perms 0.  Any out pointer may be NULL.
 */
int ept_translate(const struct ept *e, uint64_t gpa, uint64_t *hpa, unsigned *perms,
                  unsigned *memtype, unsigned *page_level);
/* EPTP: root | WB paging structures | 4-level walk | no A/D (pt-facts.md G.6) */
uint64_t ept_eptp(const struct ept *e);

/* Obtain n spare table pages now (so later calls need no allocation). */
int ept_reserve(struct ept *e, unsigned long n) __attribute__((warn_unused_result));

/*
 * true when a change since the last ept_flush_done() needs an INVEPT.  A mutating call that
 * changed a page size has invalidated through ops.flush already: it may return with nothing
 * owed although it narrowed a translation (the new, narrower entry was written after the
 * invalidation, into an entry no CPU could hold).
 */
static inline bool ept_flush_needed(const struct ept *e)
{
    return e->flush_needed;
}
/* the caller has executed INVEPT (single-context, this EPTP): retired tables become spare */
void ept_flush_done(struct ept *e);

/* the GPAs the walk translates: [0, 2^48) with 4 levels, [0, 2^57) with 5 */
static inline uint64_t ept_gpa_limit(const struct ept *e)
{
    return 1ull << (12u + 9u * e->levels);
}

/* pool pages the EPT holds: linked tables, spares, retired tables */
static inline unsigned long ept_pages_held(const struct ept *e)
{
    return e->nr_tables + e->nr_spare + e->nr_retired;
}

#endif
