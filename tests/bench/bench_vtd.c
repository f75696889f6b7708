/* SPDX-License-Identifier: MIT */
/*
 * bench-vtd (make bench): what DMA isolation costs at boot, as the VMM does it (iommu_boot.c,
 * which iommu_vmm.c calls): QEMU 7.2's DMAR checked and parsed, its unit probed, the walk
 * chosen, the tables counted and built for 512 MiB and 4 GiB of RAM, and the unit's enable
 * sequence run.  The unit is a minimal register
 * file that answers every command at once (its few instructions are in the count; the real
 * cost of each register access is the bus's, so the accesses are counted apart).  Prints one
 * BENCH line per layout; instructions come from callgrind, per function (boot_512m, boot_4g,
 * boot_4g_4k: the last without large pages), in mk/28-iommu.mk.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iommu/iommu_boot.h"

static uint8_t regs[4096];
static unsigned long accesses;
static uint8_t *pool;
static size_t pool_used, pool_pages;

static uint32_t rd32(void *c, unsigned off)
{
    (void)c;
    accesses++;
    return *(uint32_t *)(regs + off);
}
static uint64_t rd64(void *c, unsigned off)
{
    (void)c;
    accesses++;
    return *(uint64_t *)(regs + off);
}
static void wr32(void *c, unsigned off, uint32_t v)
{
    (void)c;
    accesses++;
    if (off == VTD_REG_GCMD) /* commands done at once: GSTS shows the enables and RTPS */
        *(uint32_t *)(regs + VTD_REG_GSTS) = (v & (VTD_GCMD_TE | VTD_GCMD_QIE | VTD_GCMD_IRE)) |
                                             (v & VTD_GCMD_SRTP ? VTD_GSTS_RTPS : 0);
    else if (off != VTD_REG_FSTS && off < 0x200)
        *(uint32_t *)(regs + off) = v;
}
static void wr64(void *c, unsigned off, uint64_t v)
{
    (void)c;
    accesses++;
    if (off == VTD_REG_CCMD)
        v = 1ull << 59;   /* done, global */
    else if (off == 0xf8) /* QEMU's IOTLB register: ECAP.IRO 0xf */
        v = 1ull << 57;
    *(uint64_t *)(regs + off) = v;
}

static void *page(void *ctx, uint64_t *pa)
{
    (void)ctx;
    if (pool_used == pool_pages)
        return NULL;
    *pa = 0x100000000ull + pool_used * 4096;
    return pool + 4096 * pool_used++;
}

/* QEMU 7.2's DMAR (-device intel-iommu,intremap=off), as its firmware hands it over */
static const uint8_t qemu_dmar[] = {
    0x44, 0x4d, 0x41, 0x52, 0x70, 0x00, 0x00, 0x00, 0x01, 0x29, 0x42, 0x4f, 0x43, 0x48, 0x53, 0x20,
    0x42, 0x58, 0x50, 0x43, 0x20, 0x20, 0x20, 0x20, 0x01, 0x00, 0x00, 0x00, 0x42, 0x58, 0x50, 0x43,
    0x01, 0x00, 0x00, 0x00, 0x26, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd9, 0xfe, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x08, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x00,
    0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x02, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x03};

#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)
static const struct ptv_mem_range mem_512m[] = {
    {0, 0xa0000, PTV_MEM_RAM, 0},
    {MiB(1), MiB(499), PTV_MEM_RAM, 0},
    {MiB(500), MiB(6) + 0x5000, PTV_MEM_VMM, 0},
    {MiB(506) + 0x5000, MiB(4) - 0x5000, PTV_MEM_RAM, 0},
    {MiB(510), MiB(2), PTV_MEM_ACPI, 0},
    {0xb0000000, MiB(256), PTV_MEM_RESERVED, 0},
};
static const struct ptv_mem_range mem_4g[] = {
    {0, 0xa0000, PTV_MEM_RAM, 0},
    {MiB(1), GiB(2) - MiB(3), PTV_MEM_RAM, 0},
    {GiB(2) - MiB(2), MiB(2), PTV_MEM_ACPI, 0},
    {0xb0000000, MiB(256), PTV_MEM_RESERVED, 0},
    {GiB(4), GiB(2) - MiB(64), PTV_MEM_RAM, 0},
    {GiB(6) - MiB(64), MiB(64), PTV_MEM_VMM, 0},
};

struct result {
    unsigned long pages, accesses;
    unsigned levels;
    int ok;
};

static uint64_t dmar_at;

static const uint8_t *phys(void *ctx, uint64_t pa, size_t n)
{
    (void)ctx;
    return pa >= dmar_at && pa - dmar_at + n <= sizeof(qemu_dmar) ? qemu_dmar + (pa - dmar_at)
                                                                  : NULL;
}

static struct vtd_regs unit(void *ctx, uint64_t base)
{
    (void)ctx;
    (void)base;
    return (struct vtd_regs){rd32, rd64, wr32, wr64, NULL};
}

/* iommu_setup()'s pure steps (iommu_boot.c) for the map m, the DMAR in its ACPI range at at */
static struct result boot(const struct ptv_mem_range *m, unsigned n, uint64_t at, int large)
{
    static struct iommu_boot b;
    struct result res = {0};
    uint64_t vmm_base = 0, vmm_size = 0;

    for (unsigned i = 0; i < n; i++)
        if (m[i].type == PTV_MEM_VMM) {
            vmm_base = m[i].base;
            vmm_size = m[i].size;
        }
    memset(regs, 0, sizeof(regs));
    *(uint32_t *)(regs + VTD_REG_VER) = 0x10;
    /* QEMU's CAP/ECAP as the QEMU test read them */
    *(uint64_t *)(regs + VTD_REG_CAP) = 0xd2008c22260206ull & ~(large ? 0 : 3ull << 34);
    *(uint64_t *)(regs + VTD_REG_ECAP) = 0xf42;
    accesses = 0;
    pool_used = 0;
    dmar_at = at;
    struct iommu_boot_in in = {.mem = m,
                               .n = n,
                               .vmm_base = vmm_base,
                               .vmm_size = vmm_size,
                               .dmar_pa = at,
                               .phys = phys,
                               .unit = unit,
                               .pages = {page, NULL, NULL},
                               .free_pages = pool_pages};
    if (!iommu_boot_tables(&in, &b) || !iommu_boot_enable(&in, &b)) {
        fprintf(stderr, "bench-vtd: %s\n", b.why);
        return res;
    }
    res.ok = b.n_on == 1;
    res.pages = b.tab.pages;
    res.accesses = accesses;
    res.levels = b.tab.levels;
    return res;
}

/* the functions callgrind counts */
struct result boot_512m(void);
struct result boot_4g(void);
struct result boot_4g_4k(void);
__attribute__((noinline)) struct result boot_512m(void)
{
    return boot(mem_512m, 6, MiB(510), 1);
}
__attribute__((noinline)) struct result boot_4g(void)
{
    return boot(mem_4g, 6, GiB(2) - MiB(2), 1);
}
__attribute__((noinline)) struct result boot_4g_4k(void)
{
    return boot(mem_4g, 6, GiB(2) - MiB(2), 0);
}

int main(void)
{
    pool_pages = 16384;
    pool = aligned_alloc(4096, pool_pages * 4096); /* the quarter rule: 4,096 table pages */
    if (!pool)
        return 1;
    struct result a = boot_512m(), b = boot_4g(), c = boot_4g_4k();
    printf("BENCH vtd-boot 512 MiB RAM: %lu table pages (%lu KiB), %u-level walk, %lu register "
           "accesses (ok %d)\n",
           a.pages, a.pages * 4, a.levels, a.accesses, a.ok);
    printf("BENCH vtd-boot 4 GiB RAM: %lu table pages (%lu KiB), %u-level walk, %lu register "
           "accesses (ok %d)\n",
           b.pages, b.pages * 4, b.levels, b.accesses, b.ok);
    printf("BENCH vtd-boot 4 GiB RAM, unit without 2M/1G pages: %lu table pages (%lu KiB), "
           "%lu register accesses (ok %d)\n",
           c.pages, c.pages * 4, c.accesses, c.ok);
    free(pool);
    return !(a.ok && b.ok && c.ok);
}
