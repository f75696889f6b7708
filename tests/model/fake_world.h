/* SPDX-License-Identifier: MIT */
/*
 * Test-only "machine" for the PT engine: host-physical memory as a byte array,
 * a fake EPT that maps guest RAM to host pages in a scrambled, NOT identity
 * order (so a GPA used as an HPA is caught), guest-physical holes of each
 * pt_mem_kind, a page allocator for shadow tables, canary pages around the
 * fake VMM memory, and a record of every write-protect change.
 *
 * Host-physical layout (FW_*):
 *   [0, 1M)          VMM image        canary pattern, must never change
 *   [1M, 5M)         VMM page pool    shadow ToPA pages come from here
 *   [5M, 6M)         canary           must never change
 *   [6M, 22M)        backing of guest RAM (4096 pages, scrambled)
 *   [22M, 23M)       canary           must never change
 * Guest-physical layout:
 *   [0, 16M)         guest RAM (pages may be marked PROTECTED)
 *   [16M, 17M)       VMM memory as seen from the guest (kind VMM)
 *   [17M, 18M)       MMIO
 *   everything else  unmapped
 */
#ifndef PTV_TESTS_FAKE_WORLD_H
#define PTV_TESTS_FAKE_WORLD_H

#include <stdbool.h>
#include <stdint.h>

#include "pt/pt_mem.h"

#define FW_MIB          (1ull << 20)
#define FW_HMEM_SIZE    (23 * FW_MIB)
#define FW_POOL_BASE    (1 * FW_MIB)
#define FW_POOL_PAGES   1024
#define FW_BACKING_BASE (6 * FW_MIB)
#define FW_GRAM_SIZE    (16 * FW_MIB)
#define FW_GRAM_PAGES   (FW_GRAM_SIZE >> 12)
#define FW_GPA_VMM      (16 * FW_MIB)
#define FW_GPA_MMIO     (17 * FW_MIB)
#define FW_GPA_UNMAPPED (18 * FW_MIB)

struct fake_world {
    uint8_t *hmem;                          /* host-physical memory */
    uint32_t gpage_to_hpage[FW_GRAM_PAGES]; /* fake EPT for guest RAM */
    bool protected_by_vmm[FW_GRAM_PAGES];   /* kind PROTECTED */
    bool wp[FW_GRAM_PAGES];                 /* write-protected by the engine */
    uint32_t wp_changes;                    /* set_wp calls */
    uint32_t wp_errors;                     /* protect twice / unprotect unprotected */
    uint32_t wp_fail_after;                 /* protect fails after this many (UINT32_MAX: never) */
    bool pool_used[FW_POOL_PAGES];
    uint32_t pool_in_use;
    uint32_t alloc_fail_after; /* alloc fails after this many more (UINT32_MAX: never) */
    uint32_t free_errors;      /* double free / foreign page */
    uint8_t *canary_ref;       /* copy of the canary ranges at init */
    /*
     * How far a translation reaches (pt_mem_xlate.len):
     *   FW_XLATE_MAX   the whole HPA-contiguous run of the same kind (a loop over its pages);
     *   FW_XLATE_PAGE  only to the end of the 4 KiB page, the least the contract allows (as
     *                  an EPT of 4 KiB leaves would answer): the engine must find contiguity
     *                  across translations itself;
     *   FW_XLATE_FAST  as MAX in O(1), from runs fw_fast_translate() computed (benchmarks).
     */
    enum { FW_XLATE_MAX = 0, FW_XLATE_PAGE, FW_XLATE_FAST } xlate_mode;
    uint32_t *run_end; /* FW_XLATE_FAST: first guest page after each page's run */
    struct pt_mem_ops mem;
    struct pt_page_alloc alloc;
};

/* scramble: 0 = identity-shaped blocks (still not GPA == HPA), 1 = scrambled as documented. */
struct fake_world *fw_new(int scramble);
void fw_free(struct fake_world *fw);

uint64_t fw_gpa_to_hpa(const struct fake_world *fw, uint64_t gpa);
/* Guest stores/loads through the fake EPT.  Store fails (false) on a write-protected page. */
bool fw_guest_store64(struct fake_world *fw, uint64_t gpa, uint64_t val);
uint64_t fw_guest_load64(const struct fake_world *fw, uint64_t gpa);
void fw_guest_read(const struct fake_world *fw, uint64_t gpa, void *buf, uint64_t n);
/* Copy all guest RAM into a flat GPA-indexed image (for the reference run). */
void fw_guest_snapshot(const struct fake_world *fw, uint8_t *flat);
/* Canary ranges unchanged since fw_new. */
bool fw_canaries_ok(const struct fake_world *fw);
/* hpa in [FW_BACKING_BASE, +FW_GRAM_SIZE): guest RAM backing. */
bool fw_hpa_is_guest_ram(uint64_t hpa);
uint32_t fw_wp_count(const struct fake_world *fw);
/* Remap: guest pages g1 and g2 exchange their host pages, contents moving along (the guest
 * sees the same bytes; the host addresses behind both GPAs change). */
void fw_swap_pages(struct fake_world *fw, uint32_t g1, uint32_t g2);
/*
 * Translations in O(1) (FW_XLATE_FAST), with the same answers as FW_XLATE_MAX, for benchmarks
 * that count the engine's instructions: the runs are computed now, so neither the mapping nor
 * protected_by_vmm may change afterwards (fw_swap_pages goes back to FW_XLATE_MAX).
 */
void fw_fast_translate(struct fake_world *fw);
/* Offer pt_mem_ops.read_hpa64 (the walker reads ToPA entries by host address) or not (NULL,
 * the default, as vmm.elf's pt_vmx.c today). */
void fw_offer_read_hpa64(struct fake_world *fw, bool on);

#endif
