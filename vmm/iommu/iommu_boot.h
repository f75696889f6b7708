/* SPDX-License-Identifier: MIT */
/*
 * The VMM's VT-d set-up as pure steps (iommu_vmm.c is the shim: MMIO, pool, EPT, log): from the
 * handoff's memory map and DMAR address to tables built and units translating.  Host-tested
 * (test_iommu_boot) over fake physical memory and fake units.
 */
#ifndef PTV_IOMMU_BOOT_H
#define PTV_IOMMU_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptv/handoff.h"
#include "iommu/dmar.h"
#include "iommu/vtd.h"
#include "iommu/vtd_tables.h"

#define IOMMU_WHY_MAX 200

struct iommu_boot_in {
    const struct ptv_mem_range *mem; /* the handoff map (sorted, as ptv_handoff_check wants) */
    unsigned n;
    uint64_t vmm_base, vmm_size; /* the VMM's span (also left out of DMA) */
    uint64_t dmar_pa;            /* the handoff's acpi_dmar (0: none) */
    /* where physical memory [pa, pa + n) can be read; NULL if not (the VMM: identity) */
    const uint8_t *(*phys)(void *ctx, uint64_t pa, size_t n);
    struct vtd_regs (*unit)(void *ctx, uint64_t reg_base); /* a unit's register access */
    struct vtd_page_ops pages;                             /* flush: used where a unit needs it */
    unsigned long free_pages; /* the tables may take at most a quarter of these */
    void *ctx;
};

struct iommu_boot {
    struct dmar_info dmar;
    struct vtd_caps caps[DMAR_MAX_UNITS];
    struct vtd_range regs[DMAR_MAX_UNITS]; /* each unit's register set: read-only to the guest */
    struct vtd_tables tab;
    unsigned n_units;   /* units parsed and probed (regs[0..n_units) valid) */
    unsigned n_on;      /* units translating, in DMAR order */
    uint32_t rmrr_warn; /* bit i: RMRR i in VMM memory or beyond the map (its DMA faults) */
    bool te_was_on[DMAR_MAX_UNITS];
    char why[IOMMU_WHY_MAX]; /* after a false return: "DMA not isolated: " + this */
};

/*
 * The DMAR read and parsed, every unit probed (registers in device memory below the map, not
 * the VMM's), the walk chosen, the tables counted (at most a quarter of the free pages) and
 * built.  Changes no unit.  False with the reason in b->why.
 */
bool iommu_boot_tables(const struct iommu_boot_in *in, struct iommu_boot *b)
    __attribute__((warn_unused_result));

/* every unit switched to the tables, in order; false with the reason at the first that fails
 * (b->n_on units before it translate) */
bool iommu_boot_enable(const struct iommu_boot_in *in, struct iommu_boot *b)
    __attribute__((warn_unused_result));

#endif
