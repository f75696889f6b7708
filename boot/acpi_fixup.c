/* SPDX-License-Identifier: MIT */
/*
 * A test-vehicle aid (docs/TEST-VEHICLES.md): OVMF on Bochs starts its APs but
 * installs no ACPI tables, so Linux sees one CPU.  When the firmware's ACPI
 * tables have no MADT and EFI MP services report more than one enabled CPU,
 * add an MADT (acpi_madt.c builds it) and install a new RSDP in the EFI
 * configuration table before the guest starts.  Firmware with an MADT (every
 * real machine) is left untouched.  One console line says what happened.
 */
#include "loader.h"
#include "acpi_madt.h"
#include "mp_services.h"
#include "lib/fmt.h"
#include "lib/ptv_string.h"

/* I/O APIC registers (82093AA datasheet 3.0, 3.2.1-3.2.2) */
#define IOAPIC_IOREGSEL 0x00
#define IOAPIC_IOWIN    0x10
#define IOAPIC_REG_ID   0x00
#define IOAPIC_REG_VER  0x01
#define IOAPIC_ID_SHIFT 24
#define IOAPIC_ID_MASK  0x0f
#define IOAPIC_VER_MASK 0xff
#define PAGE_BYTES      4096

/* the physical memory the firmware's tables may live in: any memory-map range but MMIO */
struct phys_view {
    EFI_MEMORY_DESCRIPTOR *map;
    UINTN nr, dsize;
};

static bool covered(const struct phys_view *v, uint64_t base, uint64_t end)
{
    bool progress = true;
    while (base < end && progress) {
        progress = false;
        for (UINTN i = 0; i < v->nr; i++) {
            EFI_MEMORY_DESCRIPTOR *d = (void *)((UINT8 *)v->map + i * v->dsize);
            uint64_t s = d->PhysicalStart, e = s + d->NumberOfPages * PAGE_BYTES;
            if (d->Type == EfiMemoryMappedIO || d->Type == EfiMemoryMappedIOPortSpace)
                continue;
            if (s <= base && base < e) {
                base = e;
                progress = true;
            }
        }
    }
    return base >= end;
}

static bool read_phys(void *ctx, uint64_t phys, void *buf, size_t n)
{
    if (phys + n < phys || !covered(ctx, phys, phys + n))
        return false;
    if (buf)
        memcpy(buf, (const void *)(UINTN)phys, n);
    return true;
}

static uint64_t firmware_rsdp(bool *had_v1)
{
    static EFI_GUID acpi20 = ACPI_20_TABLE_GUID;
    void *t20 = NULL, *t10 = NULL;
    if (EFI_ERROR(LibGetSystemConfigurationTable(&acpi20, &t20)))
        t20 = NULL;
    if (EFI_ERROR(LibGetSystemConfigurationTable(&AcpiTableGuid, &t10)))
        t10 = NULL;
    *had_v1 = t10 != NULL;
    return (uint64_t)(UINTN)(t20 ? t20 : t10);
}

/* enabled CPUs' APIC IDs, the BSP first; 0 with *why set if MP services cannot say */
static unsigned enabled_cpus(uint32_t *ids, unsigned max, char *why, size_t cap)
{
    static EFI_GUID mp_guid = PTV_MP_SERVICES_GUID;
    struct ptv_efi_mp *mp;
    UINTN total, enabled;
    unsigned n = 0;
    EFI_STATUS st;

    st = BS->LocateProtocol(&mp_guid, NULL, (void **)&mp);
    if (EFI_ERROR(st) || !mp) {
        ptv_snprintf(why, cap, "no EFI MP services protocol");
        return 0;
    }
    st = mp->GetNumberOfProcessors(mp, &total, &enabled);
    if (EFI_ERROR(st)) {
        ptv_snprintf(why, cap, "MP services GetNumberOfProcessors failed");
        return 0;
    }
    for (UINTN i = 0; i < total; i++) {
        struct ptv_efi_cpu_info info;
        if (EFI_ERROR(mp->GetProcessorInfo(mp, i, &info))) {
            ptv_snprintf(why, cap, "MP services GetProcessorInfo(%u) failed", (unsigned)i);
            return 0;
        }
        if (!(info.StatusFlag & PTV_PROCESSOR_ENABLED))
            continue;
        if (n == max) {
            ptv_snprintf(why, cap, "more than %u enabled CPUs", max);
            return 0;
        }
        if (info.ProcessorId > UINT32_MAX) {
            ptv_snprintf(why, cap, "CPU %u: APIC ID out of range", (unsigned)i);
            return 0;
        }
        ids[n] = (uint32_t)info.ProcessorId;
        if (info.StatusFlag & PTV_PROCESSOR_AS_BSP) { /* the BSP goes first */
            uint32_t t = ids[0];
            ids[0] = ids[n];
            ids[n] = t;
        }
        n++;
    }
    if (n == 0)
        ptv_snprintf(why, cap, "MP services report no enabled CPU");
    return n;
}

static uint32_t ioapic_reg(volatile uint8_t *base, uint32_t reg)
{
    *(volatile uint32_t *)(base + IOAPIC_IOREGSEL) = reg;
    return *(volatile uint32_t *)(base + IOAPIC_IOWIN);
}

/*
 * The PC's I/O APIC at its fixed address 0xfec00000, GSI base 0 (Bochs' BIOS
 * and SeaBIOS describe it so), its ID read from its own ID register as Linux
 * does on 32-bit PCs (io_apic_get_unique_id).  Only asked on firmware without
 * an MADT.  A version register of all ones or zeros means no I/O APIC there.
 */
static struct acpi_ioapic probe_ioapic(void)
{
    volatile uint8_t *base = (volatile uint8_t *)(UINTN)ACPI_IOAPIC_DEFAULT_ADDR;
    uint32_t ver = ioapic_reg(base, IOAPIC_REG_VER);
    struct acpi_ioapic io = {0};

    if (ver == 0xffffffffu || (ver & IOAPIC_VER_MASK) == 0)
        return io;
    io.present = true;
    io.id = (uint8_t)((ioapic_reg(base, IOAPIC_REG_ID) >> IOAPIC_ID_SHIFT) & IOAPIC_ID_MASK);
    io.addr = ACPI_IOAPIC_DEFAULT_ADDR;
    io.gsi_base = 0;
    return io;
}

void acpi_add_madt_if_missing(void)
{
    static EFI_GUID acpi20 = ACPI_20_TABLE_GUID;
    static struct acpi_scan scan; /* 3 KiB: not on the firmware's stack */
    static uint32_t ids[ACPI_MADT_MAX_CPUS];
    struct phys_view pv = {0};
    struct acpi_view view = {read_phys, &pv};
    struct acpi_madt_in in = {.apic_ids = ids};
    struct acpi_built built;
    EFI_PHYSICAL_ADDRESS buf = 0xffffffffu; /* an RSDT needs its tables below 4 GiB */
    char err[ACPI_ERR_MAX];
    void *newp;
    bool had_v1;
    uint64_t rsdp = firmware_rsdp(&had_v1);
    UINTN key, pages, size;
    UINT32 dver;
    EFI_STATUS st;
    bool ok;

    pv.map = LibMemoryMap(&pv.nr, &key, &pv.dsize, &dver);
    if (!pv.map) {
        say("ACPI: GetMemoryMap failed: firmware tables left as they are");
        return;
    }
    ok = acpi_scan(&view, rsdp, &scan, err, sizeof(err));
    FreePool(pv.map);
    if (!ok) {
        sayf(L"ACPI: firmware tables not understood (%a): left as they are", err);
        return;
    }
    if (scan.has_madt) {
        say("ACPI: the firmware's MADT is used as it is");
        return;
    }
    in.n_cpus = enabled_cpus(ids, ACPI_MADT_MAX_CPUS, err, sizeof(err));
    if (in.n_cpus == 0) {
        sayf(L"firmware has no MADT and %a: none added, the guest sees one CPU", err);
        return;
    }
    if (in.n_cpus == 1) {
        say("firmware has no MADT and MP services report one enabled CPU: none added");
        return;
    }
    in.ioapic = probe_ioapic();
    size = acpi_madt_size(&scan, &in);
    pages = (size + PAGE_BYTES - 1) / PAGE_BYTES;
    st = size ? BS->AllocatePages(AllocateMaxAddress, EfiACPIReclaimMemory, pages, &buf)
              : EFI_INVALID_PARAMETER;
    if (size && EFI_ERROR(st)) {
        sayf(L"firmware has no MADT: none added, no memory below 4 GiB for it: %r", st);
        return;
    }
    if (!acpi_madt_build(&scan, &in, (uint8_t *)(UINTN)buf, pages * PAGE_BYTES, buf, &built, err,
                         sizeof(err))) {
        if (size)
            BS->FreePages(buf, pages);
        sayf(L"firmware has no MADT: none added: %a", err);
        return;
    }
    /* a revision 0 RSDP belongs under the ACPI 1.0 GUID only */
    newp = (void *)(UINTN)(buf + built.rsdp_off);
    st = rsdp && scan.revision < 2 ? EFI_SUCCESS : BS->InstallConfigurationTable(&acpi20, newp);
    if (!EFI_ERROR(st) && (had_v1 || (rsdp && scan.revision < 2)))
        st = BS->InstallConfigurationTable(&AcpiTableGuid, newp);
    if (EFI_ERROR(st)) {
        /* the 2.0 entry may be in: the tables stay, valid, where it points */
        sayf(L"firmware has no MADT: added one but InstallConfigurationTable failed: %r", st);
        return;
    }
    if (in.ioapic.present)
        ptv_snprintf(err, sizeof(err), "I/O APIC %u at %#x", in.ioapic.id, in.ioapic.addr);
    else
        ptv_snprintf(err, sizeof(err), "no I/O APIC found");
    sayf(L"firmware has no MADT: added one for %d CPUs (test-vehicle aid): %a, RSDP at 0x%lx%a",
         in.n_cpus, err, (UINT64)(UINTN)newp, rsdp ? "" : ", no ACPI tables before");
}

/*
 * The firmware's DMAR table for the VMM (handoff acpi_dmar).  Only found here: the
 * VMM checks it itself before it uses any field (vmm/iommu/dmar.c).
 */
uint64_t acpi_find_dmar(void)
{
    static struct acpi_scan scan;
    struct phys_view pv = {0};
    struct acpi_view view = {read_phys, &pv};
    char err[ACPI_ERR_MAX];
    bool had_v1;
    uint64_t rsdp = firmware_rsdp(&had_v1), dmar = 0;
    UINTN key;
    UINT32 dver;
    bool ok;

    pv.map = LibMemoryMap(&pv.nr, &key, &pv.dsize, &dver);
    if (!pv.map) {
        say("ACPI: GetMemoryMap failed: no DMAR table for the VMM");
        return 0;
    }
    ok = acpi_scan(&view, rsdp, &scan, err, sizeof(err));
    if (ok)
        dmar = acpi_find_table(&view, &scan, "DMAR");
    FreePool(pv.map);
    if (!ok)
        sayf(L"ACPI: firmware tables not understood (%a): no DMAR table for the VMM", err);
    else if (dmar) /* none: the VMM says "DMA not isolated" */
        sayf(L"ACPI: DMAR table at 0x%lx: the VMM owns the DMA-remapping units", dmar);
    return dmar;
}

/*
 * Once the VMM runs (the loader is its guest now, and ACPI memory is guest memory): rename the
 * DMAR so the guest OS finds none and runs without an IOMMU of its own; the units are the VMM's
 * (their registers are read-only to the guest).  The table is renamed in place, checksum kept:
 * the XSDT/RSDT still list it, under a signature no OS knows.  Not when the VMM did not start:
 * a native boot keeps its IOMMU.
 */
void acpi_hide_dmar(uint64_t dmar)
{
    uint8_t *h = (uint8_t *)(UINTN)dmar;
    if (!dmar)
        return;
    if (memcmp(h, "DMAR", 4) != 0) {
        say("ACPI: the DMAR table changed under the loader: not hidden");
        return;
    }
    acpi_resign(h, ACPI_DMAR_HIDDEN_SIG);
    sayf(L"ACPI: DMAR table renamed %a: the guest sees no IOMMU", ACPI_DMAR_HIDDEN_SIG);
}
