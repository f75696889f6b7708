/* SPDX-License-Identifier: MIT */
/*
 * A test-vehicle aid: an MADT for firmware that has none.
 *
 * OVMF on Bochs starts its APs (EFI MP services see them) but installs no ACPI
 * tables, so Linux finds no MADT and boots on one CPU (docs/TEST-VEHICLES.md).
 * The loader scans the firmware's tables (acpi_scan) and, when there is no
 * "APIC" table and more than one CPU is enabled, builds an MADT, a new XSDT
 * and/or RSDT (the old entries plus the MADT) and a new RSDP (acpi_madt_build).
 * Firmware that has an MADT (every real machine) is left untouched.
 *
 * Pure code: physical memory is read through a callback, the new tables are
 * written into a caller's buffer.  Compiled unchanged into the loader
 * (boot/acpi_fixup.c), the host test and the fuzzer.  ACPI 6.5 section numbers
 * are cited as "ACPI 5.2.x".
 */
#ifndef PTV_BOOT_ACPI_MADT_H
#define PTV_BOOT_ACPI_MADT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACPI_ROOT_MAX_ENTRIES 256         /* tables listed in one XSDT/RSDT */
#define ACPI_TABLE_MAX_LEN    (16u << 20) /* any longer table is refused */
#define ACPI_MADT_MAX_CPUS    255         /* xAPIC IDs are 8 bits, 0xff is broadcast */
#define ACPI_ERR_MAX          160         /* bytes per error message, with the NUL */

#define ACPI_IOAPIC_DEFAULT_ADDR 0xfec00000u /* the PC's first I/O APIC */
#define ACPI_LAPIC_DEFAULT_ADDR  0xfee00000u

/*
 * The physical memory the tables live in: copy n bytes at phys into buf
 * (buf NULL: only say whether they are readable).  False if any byte is not.
 */
typedef bool (*acpi_read_fn)(void *ctx, uint64_t phys, void *buf, size_t n);

struct acpi_view {
    acpi_read_fn read;
    void *ctx;
};

/* what acpi_scan found; every table it names was checked */
struct acpi_scan {
    uint64_t rsdp;                        /* 0: the firmware has no ACPI tables at all */
    uint8_t revision;                     /* the RSDP's: 0 = ACPI 1.0 (RSDT only), 2+ = XSDT too */
    char oem_id[6];                       /* the RSDP's, reused in the new tables */
    uint64_t xsdt;                        /* 0 = none */
    uint32_t rsdt;                        /* 0 = none */
    uint8_t xsdt_head[36], rsdt_head[36]; /* their headers, as read */
    uint32_t xsdt_n, rsdt_n;
    uint64_t xsdt_entries[ACPI_ROOT_MAX_ENTRIES];
    uint32_t rsdt_entries[ACPI_ROOT_MAX_ENTRIES];
    bool has_madt; /* an "APIC" table is listed */
    bool has_fadt; /* an "FACP" table is listed; then sci_irq is its SCI_INT */
    uint16_t sci_irq;
};

struct acpi_ioapic {
    bool present;
    uint8_t id;
    uint32_t addr;
    uint32_t gsi_base;
};

/* what the new MADT describes */
struct acpi_madt_in {
    const uint32_t *apic_ids; /* enabled CPUs, the BSP first */
    unsigned n_cpus;
    struct acpi_ioapic ioapic;
};

/* where acpi_madt_build put each table, as offsets into its buffer */
struct acpi_built {
    size_t size;
    size_t rsdp_off, madt_off;
    size_t xsdt_off, rsdt_off; /* SIZE_MAX: not built */
    uint32_t madt_len;
};

/*
 * Read and check the tables reachable from the RSDP at phys (0: none): the
 * RSDP's checksums, the XSDT/RSDT (signature, length, checksum, entry count),
 * every entry's header (readable, 36 bytes .. ACPI_TABLE_MAX_LEN, the whole
 * table readable, not overlapping the root table or the RSDP, listed once),
 * and the FADT when there is one.  False with a one-line reason in err when
 * anything is wrong; *out is then not meaningful.
 */
bool acpi_scan(const struct acpi_view *mem, uint64_t rsdp, struct acpi_scan *out, char *err,
               size_t cap) __attribute__((warn_unused_result));

/* bytes acpi_madt_build needs for these tables and n_cpus (0 if it would refuse) */
size_t acpi_madt_size(const struct acpi_scan *s, const struct acpi_madt_in *in);

/*
 * Build RSDP + XSDT and/or RSDT + MADT into out[0..cap), which the caller will
 * place at physical address out_phys (16-byte aligned, below 4 GiB when an RSDT
 * is built).  Checks everything first (CPU count, APIC IDs 0..0xfe and distinct,
 * cap, out_phys) and writes nothing on failure.  The new root tables list the
 * old entries, then the MADT.  The RSDP keeps the old revision (2 when the
 * firmware had none, with both an XSDT and an RSDT).
 */
bool acpi_madt_build(const struct acpi_scan *s, const struct acpi_madt_in *in, uint8_t *out,
                     size_t cap, uint64_t out_phys, struct acpi_built *res, char *err, size_t ecap)
    __attribute__((warn_unused_result));

/*
 * The loader side (boot/acpi_fixup.c, EFI boot services): scan the firmware's
 * tables and, when they lack an MADT and MP services report more than one
 * enabled CPU, install RSDP + XSDT/RSDT + MADT.  Prints one console line.
 */
void acpi_add_madt_if_missing(void);

/*
 * The DMAR table for the VMM.  acpi_find_table: the first table with signature sig
 * the scanned roots list (XSDT first), 0 if none.  acpi_resign: give the table whose header
 * starts at hdr (its first 10 bytes: signature, length, revision, checksum) signature sig,
 * keeping its checksum right -- how the loader hides the DMAR from the guest once the VMM owns
 * the remapping units (ACPI_DMAR_HIDDEN_SIG; an OS skips a table it does not know).
 */
#define ACPI_DMAR_HIDDEN_SIG "PTVD"
uint64_t acpi_find_table(const struct acpi_view *mem, const struct acpi_scan *s, const char *sig);
void acpi_resign(uint8_t *hdr, const char *sig);

/*
 * The loader side (boot/acpi_fixup.c): the firmware's DMAR table, 0 if none or if the tables
 * are not understood (one console line either way); and, once the VMM runs, hiding it
 * (one line).
 */
uint64_t acpi_find_dmar(void);
void acpi_hide_dmar(uint64_t dmar);

/* sum of n bytes, mod 256: 0 for a table with a right checksum */
uint8_t acpi_sum(const uint8_t *p, size_t n);

#endif
