/* SPDX-License-Identifier: MIT */
/* Test-only fake EPT, host memory and page pool.  See fake_world.h. */
#include "model/fake_world.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_PAGES 64 /* 256 KiB blocks */
#define NBLOCKS     (FW_GRAM_PAGES / BLOCK_PAGES)

static const struct {
    uint64_t base, size;
} canaries[] = {
    {0, FW_MIB},
    {5 * FW_MIB, FW_MIB},
    {22 * FW_MIB, FW_MIB},
};

/* Page page + 1 continues page's run: contiguous in HPA and of the same kind. */
static bool run_goes_on(const struct fake_world *fw, uint64_t page)
{
    return page + 1 < FW_GRAM_PAGES &&
           fw->gpage_to_hpage[page + 1] == fw->gpage_to_hpage[page] + 1 &&
           fw->protected_by_vmm[page + 1] == fw->protected_by_vmm[page];
}

static void translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    struct fake_world *fw = ctx;
    uint64_t page = gpa >> 12;

    out->hpa = 0;
    out->len = PT_PAGE_SIZE - (gpa & 0xfff);
    if (gpa < FW_GRAM_SIZE) {
        out->kind = fw->protected_by_vmm[page] ? PT_MEM_PROTECTED : PT_MEM_GUEST_RAM;
        out->hpa = fw_gpa_to_hpa(fw, gpa);
        if (fw->xlate_mode == FW_XLATE_FAST) {
            out->len += (fw->run_end[page] - page - 1) * PT_PAGE_SIZE;
        } else if (fw->xlate_mode == FW_XLATE_MAX) {
            /* extend while the next page is contiguous in HPA and of the same kind */
            for (; run_goes_on(fw, page); page++)
                out->len += PT_PAGE_SIZE;
        }
    } else if (gpa < FW_GPA_MMIO) {
        out->kind = PT_MEM_VMM;
        out->hpa = gpa - FW_GPA_VMM; /* the VMM image */
    } else if (gpa < FW_GPA_UNMAPPED) {
        out->kind = PT_MEM_MMIO;
    } else {
        out->kind = PT_MEM_UNMAPPED;
    }
}

static bool read64(void *ctx, uint64_t gpa, uint64_t *val)
{
    struct fake_world *fw = ctx;

    if (gpa >= FW_GRAM_SIZE || (gpa & 7))
        return false;
    memcpy(val, fw->hmem + fw_gpa_to_hpa(fw, gpa), 8);
    return true;
}

static bool read_hpa64(void *ctx, uint64_t hpa, uint64_t *val)
{
    struct fake_world *fw = ctx;

    if (!fw_hpa_is_guest_ram(hpa) || (hpa & 7))
        return false; /* the engine may only read where a translation to guest RAM led */
    memcpy(val, fw->hmem + hpa, 8);
    return true;
}

static bool set_wp(void *ctx, uint64_t gpa_page, bool protect)
{
    struct fake_world *fw = ctx;
    uint64_t page = gpa_page >> 12;

    fw->wp_changes++;
    if ((gpa_page & 0xfff) || page >= FW_GRAM_PAGES) {
        fw->wp_errors++;
        return false;
    }
    if (protect) {
        if (fw->wp_fail_after == 0)
            return false;
        if (fw->wp_fail_after != UINT32_MAX)
            fw->wp_fail_after--;
    }
    if (fw->wp[page] == protect)
        fw->wp_errors++;
    fw->wp[page] = protect;
    return true;
}

static void *pool_alloc(void *ctx, uint64_t *hpa)
{
    struct fake_world *fw = ctx;

    if (fw->alloc_fail_after == 0)
        return NULL;
    if (fw->alloc_fail_after != UINT32_MAX)
        fw->alloc_fail_after--;
    for (uint32_t i = 0; i < FW_POOL_PAGES; i++) {
        if (!fw->pool_used[i]) {
            fw->pool_used[i] = true;
            fw->pool_in_use++;
            *hpa = FW_POOL_BASE + ((uint64_t)i << 12);
            memset(fw->hmem + *hpa, 0, PT_PAGE_SIZE);
            return fw->hmem + *hpa;
        }
    }
    return NULL;
}

static void pool_free(void *ctx, void *va, uint64_t hpa)
{
    struct fake_world *fw = ctx;
    uint64_t i = (hpa - FW_POOL_BASE) >> 12;

    if (hpa < FW_POOL_BASE || i >= FW_POOL_PAGES || va != fw->hmem + hpa || !fw->pool_used[i]) {
        fw->free_errors++;
        return;
    }
    fw->pool_used[i] = false;
    fw->pool_in_use--;
    memset(fw->hmem + hpa, 0x5a, PT_PAGE_SIZE); /* poison: stale use shows */
}

struct fake_world *fw_new(int scramble)
{
    struct fake_world *fw = calloc(1, sizeof(*fw));
    uint64_t off = 0;

    fw->hmem = malloc(FW_HMEM_SIZE);
    for (uint64_t i = 0; i < FW_HMEM_SIZE; i++)
        fw->hmem[i] = (uint8_t)(i * 131 + (i >> 12) * 7 + 1);
    for (uint32_t b = 0; b < NBLOCKS; b++) {
        /* block b -> backing block (7b + 3) mod 64: never in place */
        uint32_t hb = scramble ? (b * 7 + 3) % NBLOCKS : (b + 1) % NBLOCKS;
        for (uint32_t p = 0; p < BLOCK_PAGES; p++) {
            uint32_t hp = p;
            if (scramble && (b % 4) == 1)
                hp = p ^ 1; /* pairwise swapped: forces 4 KiB host pieces */
            if (scramble && (b % 4) == 2)
                hp = (p + 8) % BLOCK_PAGES; /* rotated: contiguous but misaligned runs */
            fw->gpage_to_hpage[b * BLOCK_PAGES + p] =
                (uint32_t)(FW_BACKING_BASE >> 12) + hb * BLOCK_PAGES + hp;
        }
    }
    fw->canary_ref = malloc(3 * FW_MIB);
    for (size_t i = 0; i < sizeof(canaries) / sizeof(canaries[0]); i++) {
        memcpy(fw->canary_ref + off, fw->hmem + canaries[i].base, canaries[i].size);
        off += canaries[i].size;
    }
    fw->wp_fail_after = UINT32_MAX;
    fw->alloc_fail_after = UINT32_MAX;
    fw->mem =
        (struct pt_mem_ops){.ctx = fw, .translate = translate, .read64 = read64, .set_wp = set_wp};
    fw->alloc = (struct pt_page_alloc){.ctx = fw, .alloc = pool_alloc, .free = pool_free};
    return fw;
}

void fw_offer_read_hpa64(struct fake_world *fw, bool on)
{
    fw->mem.read_hpa64 = on ? read_hpa64 : NULL;
}

void fw_fast_translate(struct fake_world *fw)
{
    if (!fw->run_end)
        fw->run_end = malloc(FW_GRAM_PAGES * sizeof(*fw->run_end));
    for (uint64_t p = FW_GRAM_PAGES; p-- > 0;)
        fw->run_end[p] = run_goes_on(fw, p) ? fw->run_end[p + 1] : (uint32_t)p + 1;
    fw->xlate_mode = FW_XLATE_FAST;
}

void fw_free(struct fake_world *fw)
{
    free(fw->run_end);
    free(fw->hmem);
    free(fw->canary_ref);
    free(fw);
}

uint64_t fw_gpa_to_hpa(const struct fake_world *fw, uint64_t gpa)
{
    return ((uint64_t)fw->gpage_to_hpage[gpa >> 12] << 12) | (gpa & 0xfff);
}

bool fw_guest_store64(struct fake_world *fw, uint64_t gpa, uint64_t val)
{
    if (fw->wp[gpa >> 12])
        return false;
    memcpy(fw->hmem + fw_gpa_to_hpa(fw, gpa), &val, 8);
    return true;
}

uint64_t fw_guest_load64(const struct fake_world *fw, uint64_t gpa)
{
    uint64_t v;
    memcpy(&v, fw->hmem + fw_gpa_to_hpa(fw, gpa), 8);
    return v;
}

void fw_guest_read(const struct fake_world *fw, uint64_t gpa, void *buf, uint64_t n)
{
    uint8_t *b = buf;
    while (n) {
        uint64_t chunk = PT_PAGE_SIZE - (gpa & 0xfff);
        if (chunk > n)
            chunk = n;
        memcpy(b, fw->hmem + fw_gpa_to_hpa(fw, gpa), chunk);
        b += chunk;
        gpa += chunk;
        n -= chunk;
    }
}

void fw_guest_snapshot(const struct fake_world *fw, uint8_t *flat)
{
    fw_guest_read(fw, 0, flat, FW_GRAM_SIZE);
}

bool fw_canaries_ok(const struct fake_world *fw)
{
    uint64_t off = 0;
    for (size_t i = 0; i < sizeof(canaries) / sizeof(canaries[0]); i++) {
        if (memcmp(fw->canary_ref + off, fw->hmem + canaries[i].base, canaries[i].size))
            return false;
        off += canaries[i].size;
    }
    return true;
}

bool fw_hpa_is_guest_ram(uint64_t hpa)
{
    return hpa >= FW_BACKING_BASE && hpa < FW_BACKING_BASE + FW_GRAM_SIZE;
}

uint32_t fw_wp_count(const struct fake_world *fw)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < FW_GRAM_PAGES; i++)
        n += fw->wp[i];
    return n;
}

void fw_swap_pages(struct fake_world *fw, uint32_t g1, uint32_t g2)
{
    uint8_t tmp[PT_PAGE_SIZE];
    uint8_t *a = fw->hmem + ((uint64_t)fw->gpage_to_hpage[g1] << 12);
    uint8_t *b = fw->hmem + ((uint64_t)fw->gpage_to_hpage[g2] << 12);
    uint32_t h = fw->gpage_to_hpage[g1];

    memcpy(tmp, a, PT_PAGE_SIZE);
    memcpy(a, b, PT_PAGE_SIZE);
    memcpy(b, tmp, PT_PAGE_SIZE);
    fw->gpage_to_hpage[g1] = fw->gpage_to_hpage[g2];
    fw->gpage_to_hpage[g2] = h;
    if (fw->xlate_mode == FW_XLATE_FAST)
        fw->xlate_mode = FW_XLATE_MAX; /* the runs changed */
}
