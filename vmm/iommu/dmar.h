/* SPDX-License-Identifier: MIT */
/*
 * The firmware's ACPI DMAR table (Intel VT-d spec rev 4.1, chapter 8), parsed and checked.
 *
 * Pure code over a byte buffer: the VMM hands it the table the loader found (vmm/iommu/
 * iommu_vmm.c), the host test and the fuzzer hand it anything.  Every field is checked before
 * it is used; a table that fails any check is refused with one line in err, and the VMM then
 * runs without DMA isolation.  Section numbers "VT-d 8.x" are that spec's.
 */
#ifndef PTV_IOMMU_DMAR_H
#define PTV_IOMMU_DMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DMAR_MAX_UNITS   16          /* remapping units (DRHDs) the VMM programs */
#define DMAR_MAX_RMRR    32          /* reserved memory regions it checks */
#define DMAR_MAX_LEN     (64u << 10) /* a longer table is refused */
#define DMAR_HEADER_LEN  48          /* ACPI header (36) + HAW, flags, 10 reserved */
#define DMAR_ERR_MAX     160         /* bytes per error message, with the NUL */
#define DMAR_REG_MAX_LOG 4           /* register sets up to 2^4 pages (64 KiB) */

/* DMAR flags (VT-d 8.1) */
#define DMAR_F_INTR_REMAP      (1u << 0)
#define DMAR_F_X2APIC_OPT_OUT  (1u << 1)
#define DMAR_F_DMA_CTRL_OPT_IN (1u << 2)

/* one DMA-remapping hardware unit (DRHD, VT-d 8.3) */
struct dmar_unit {
    uint64_t reg_base; /* its register set, 4 KiB aligned */
    uint64_t reg_size; /* bytes: 4 KiB << the table's Size field */
    uint16_t segment;  /* PCI segment */
    bool include_all;  /* INCLUDE_PCI_ALL: every device of the segment not listed elsewhere */
    unsigned n_scopes; /* device scope entries (checked, not used: see vtd_tables.h) */
};

/* a reserved memory region some device keeps using (RMRR, VT-d 8.4) */
struct dmar_rmrr {
    uint64_t base, end; /* [base, end), 4 KiB aligned */
    uint16_t segment;
};

struct dmar_info {
    unsigned haw;  /* host address width in bits (the table's field + 1) */
    uint8_t flags; /* DMAR_F_* */
    unsigned n_units;
    struct dmar_unit units[DMAR_MAX_UNITS];
    unsigned n_rmrr;
    struct dmar_rmrr rmrr[DMAR_MAX_RMRR];
    unsigned n_other; /* ATSR, RHSA, ANDD, SATC, ...: length-checked and skipped */
    /* some segment has no INCLUDE_PCI_ALL unit: its devices are remapped as far as the scopes
     * list them (VT-d 8.3: the firmware then lists them all; QEMU 7.2 does), and a device they
     * do not name -- one hot-plugged later -- is behind no unit */
    bool listed_only;
};

/*
 * Parse the DMAR table in t[0..len) (len: bytes readable there; the table's own length must fit
 * in it).  Checks the signature, length, checksum, host address width, every structure's length
 * and every device scope's, each DRHD's register set (4 KiB aligned, below 2^HAW, no two
 * overlapping, at most one INCLUDE_PCI_ALL unit per segment) and each RMRR (aligned, non-empty,
 * below 2^HAW); notes a segment whose devices are only listed (listed_only).  False with a
 * one-line reason in err on the first problem.
 */
bool dmar_parse(const uint8_t *t, size_t len, struct dmar_info *out, char *err, size_t cap)
    __attribute__((warn_unused_result));

#endif
