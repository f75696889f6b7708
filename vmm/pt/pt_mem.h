/* SPDX-License-Identifier: MIT */
/*
 * How the PT engine sees guest memory: a narrow interface over EPT.
 *
 * The shadow-ToPA engine (pt_topa.c, pt_shadow.c) and the PT EPT-violation
 * decision (pt_eptv.c) never touch EPT or host memory directly.  In the VMM the
 * callbacks are implemented over the real EPT (vmm/ept/); in host tests over
 * fake guest RAM and a fake EPT whose GPA->HPA map is deliberately not the
 * identity, so that a GPA used as an HPA is caught.
 */
#ifndef PTV_PT_MEM_H
#define PTV_PT_MEM_H

#include <stdbool.h>
#include <stdint.h>

#define PT_PAGE_SIZE  4096ull
#define PT_PAGE_SHIFT 12
#define PT_PAGE_MASK  (~(PT_PAGE_SIZE - 1))

/*
 * What a guest-physical page is, as EPT maps it for this guest.
 *
 *  GUEST_RAM  ordinary guest RAM, mapped readable and writable (the engine's own
 *             write-protection of guest ToPA table pages does NOT change this: a
 *             protected table page is still GUEST_RAM).
 *  VMM        memory that belongs to the VMM (its image, pool, other guests).
 *  MMIO       device memory, APIC pages, anything that is not RAM.
 *  UNMAPPED   no EPT mapping, or beyond the guest's RAM.
 *  PROTECTED  guest RAM the VMM protects for reasons of its own, e.g. a ToPA
 *             table page of another vCPU's shadow.  PT output may never go
 *             there: hardware writes through a shadow bypass EPT, so the
 *             protection would silently not hold.
 */
enum pt_mem_kind {
    PT_MEM_GUEST_RAM = 0,
    PT_MEM_VMM,
    PT_MEM_MMIO,
    PT_MEM_UNMAPPED,
    PT_MEM_PROTECTED,
    PT_MEM_COUNT, /* not a kind: "work bound reached" in the walker's reasons */
};

/* Result of one translation. */
struct pt_mem_xlate {
    uint64_t hpa;          /* host-physical address of the GPA asked for */
    uint64_t len;          /* bytes from the GPA on which kind is the same and GPA->HPA is
                              contiguous; at least up to the end of the 4 KiB page */
    enum pt_mem_kind kind; /* hpa and len are meaningful for every kind, hpa only for RAM */
};

struct pt_mem_ops {
    void *ctx;
    /* Translate gpa through EPT.  Must always fill *out (UNMAPPED if nothing is there). */
    void (*translate)(void *ctx, uint64_t gpa, struct pt_mem_xlate *out);
    /* Read 8 bytes of guest RAM at an 8-byte-aligned gpa.  false if gpa is not guest RAM. */
    bool (*read64)(void *ctx, uint64_t gpa, uint64_t *val);
    /*
     * Write-protect (protect = true) or unprotect one 4 KiB guest page in EPT, so
     * that guest writes to a guest ToPA table page exit to the VMM.  Protecting
     * may fail (an EPT split needs memory): return false.  Unprotecting must not
     * fail.  Calls are not reference counted by the engine: one engine instance
     * protects a page once and unprotects it once.
     */
    bool (*set_wp)(void *ctx, uint64_t gpa_page, bool protect);
    /*
     * Optional (NULL: the walker reads ToPA entries with read64).  Read 8 bytes at the
     * host-physical hpa, inside a guest-RAM page a translate() of the same walk returned: the
     * walker translates a guest ToPA table page once and reads its entries through this,
     * instead of one translation per entry inside read64.  false if hpa cannot be read.
     */
    bool (*read_hpa64)(void *ctx, uint64_t hpa, uint64_t *val);
};

/*
 * The last translation, kept for the work of one walk/build (pt_topa.c, pt_shadow.c): a GPA
 * inside [gpa, gpa + len) of the last answer is answered from it (same kind, HPA at the same
 * distance), which the contract of len above makes exact.  With EPT's 2 MiB / 1 GiB leaves one
 * translation then covers many 4 KiB pages of a ToPA.  Never kept across builds: EPT may
 * change between them (pt_shadow_mem_changed).
 */
struct pt_xlate_cache {
    uint64_t gpa, hpa, len; /* len 0: empty */
    enum pt_mem_kind kind;
};

static inline void pt_xlate(const struct pt_mem_ops *mem, struct pt_xlate_cache *c, uint64_t gpa,
                            struct pt_mem_xlate *out)
{
    uint64_t d = gpa - c->gpa;

    if (d >= c->len) {
        *out = (struct pt_mem_xlate){.kind = PT_MEM_UNMAPPED};
        mem->translate(mem->ctx, gpa, out);
        c->gpa = gpa;
        c->hpa = out->hpa;
        c->len = out->len;
        c->kind = out->kind;
        return;
    }
    out->hpa = c->hpa + d;
    out->len = c->len - d;
    out->kind = c->kind;
}

/*
 * Host pages for shadow ToPA tables and their bookkeeping.  alloc returns the
 * VMM virtual address of a zeroed 4 KiB page and stores its host-physical
 * address in *hpa, or NULL when the pool is empty.
 */
struct pt_page_alloc {
    void *ctx;
    void *(*alloc)(void *ctx, uint64_t *hpa);
    void (*free)(void *ctx, void *va, uint64_t hpa);
};

#endif
