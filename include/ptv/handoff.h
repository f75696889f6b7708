/* SPDX-License-Identifier: MIT */
/*
 * struct ptv_handoff: the one ABI between the UEFI loader (boot/) and the VMM
 * (vmm/).  The loader fills it, the VMM validates it (ptv_handoff_check())
 * before it trusts any field.  Bump PTV_HANDOFF_VERSION on any layout change.
 */
#ifndef PTV_HANDOFF_H
#define PTV_HANDOFF_H

#include <stdint.h>
#include <stddef.h>
#include "config.h"

#define PTV_HANDOFF_MAGIC   0x314646484f565450ull /* "PTVOHFF1" little-endian */
#define PTV_HANDOFF_VERSION 4
#define PTV_HANDOFF_MAX_MEM 256
#define PTV_MAX_CPUS        64 /* CPUs the VMM runs on; AP numbers beyond are refused */

/* memory map in neutral form (no EFI types cross this boundary) */
enum ptv_mem_type {
    PTV_MEM_RAM = 1,      /* usable by the guest OS */
    PTV_MEM_RESERVED = 2, /* firmware reserved: mapped for the guest, not RAM */
    PTV_MEM_ACPI = 3,     /* ACPI tables / NVS: mapped, not RAM for PT output */
    PTV_MEM_MMIO = 4,     /* device memory */
    PTV_MEM_VMM = 5,      /* the VMM image and pool: never mapped for the guest */
};

struct ptv_mem_range {
    uint64_t base; /* 4 KiB aligned */
    uint64_t size; /* bytes, multiple of 4 KiB, > 0 */
    uint32_t type; /* enum ptv_mem_type */
    uint32_t _pad;
};
_Static_assert(sizeof(struct ptv_mem_range) == 24, "ptv_mem_range layout");

struct ptv_handoff {
    uint64_t magic;   /* PTV_HANDOFF_MAGIC */
    uint32_t version; /* PTV_HANDOFF_VERSION */
    uint32_t size;    /* sizeof(struct ptv_handoff) */

    uint64_t vmm_base; /* physical base of the loaded vmm.elf image */
    uint64_t vmm_size;
    uint64_t pool_base; /* VMM page pool (4 KiB aligned) */
    uint64_t pool_size;
    uint64_t acpi_rsdp; /* 0 if the firmware has none */
    uint64_t acpi_dmar; /* (4) the firmware's DMAR table, 0 if none: the VMM's VT-d units.  The
                         * loader hides it from the guest once the VMM runs (vmm/iommu/) */
    uint64_t tsc_at_handoff;

    uint32_t nr_mem; /* entries used in mem[] (sorted, non-overlapping) */
    uint32_t _pad0;
    struct ptv_mem_range mem[PTV_HANDOFF_MAX_MEM];

    struct ptv_config cfg;
};

/*
 * The VMM entry point, called by the loader with the System V calling
 * convention, first on the BSP with cpu = 0, then (version 2) on every enabled
 * AP through EFI MP services with cpu = its number (1..PTV_MAX_CPUS-1), the same
 * handoff pointer:
 *     int ptv_vmm_entry(struct ptv_handoff *h, uint64_t cpu);
 * It returns PTV_ENTRY_OK when the caller now runs as the guest, otherwise a
 * PTV_ENTRY_* error: the CPU is then left as it was (VMX off).  An AP that
 * entered VMX but cannot run the guest never returns (parked in VMX root).
 */
enum ptv_entry_status {
    PTV_ENTRY_OK = 0,
    PTV_ENTRY_BAD_HANDOFF = 1,
    PTV_ENTRY_NO_VMX = 2,
    PTV_ENTRY_VMX_LOCKED_OFF = 3,  /* FEATURE_CONTROL locked without VMX outside SMX */
    PTV_ENTRY_MISSING_CONTROL = 4, /* a required VMX control/capability is absent */
    PTV_ENTRY_NO_MEMORY = 5,
    PTV_ENTRY_VMX_FAILED = 6, /* a VMX instruction failed; details on serial */
};

#endif
