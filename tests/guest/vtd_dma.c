// SPDX-License-Identifier: MIT
/*
 * vtd-dma.efi: the VMM's own VT-d set-up (vmm/iommu/iommu_boot.c with dmar.c, vtd_tables.c
 * and vtd.c, linked in unchanged; the handoff map from boot/memmap.c) drives QEMU's
 * intel-iommu from a bare EFI program, and QEMU's edu device proves
 * what it does to DMA (make test-qemu-vtd, tests/system/qemu-vtd.sh; QEMU TCG, q35,
 * -device intel-iommu,intremap=off -device edu).
 *
 *   control   translation off: edu writes a "VMM" page P -- the device really reaches it, so
 *             the blocked checks below can fail
 *   enable    the firmware's memory map made into the handoff map with P as the VMM's
 *             memory; iommu_boot_tables (DMAR, units, walk, tables) and iommu_boot_enable
 *             exactly as the VMM runs them, minus EPT
 *   allowed   edu reads a source page and writes an allowed page: the bytes land
 *   blocked   edu writes P: P is unchanged and the unit recorded the fault (edu's requester
 *             ID, P's address, a write); edu reads P: the bytes never reach the device, a read
 *             fault is recorded
 *
 *   Linux     (qemu:vtd-linux, when the volume has the guest) the DMAR renamed as the loader
 *             renames it, Linux booted to its marker with the unit still translating
 *
 * edu (QEMU docs/specs/edu.rst): BAR0 registers 0x80 source, 0x88 destination, 0x90 count,
 * 0x98 command (bit 0 start, bit 1 direction: 1 = edu -> RAM); its buffer is at device address
 * 0x40000; DMA addresses are masked to 28 bits, so every page here is below 256 MiB.
 */
#include "libtest.h"
#include "lib/ptv_string.h"
#include "lib/fmt.h"
#include "iommu/iommu_boot.h"
#include "../../boot/memmap.h"
#include "../../boot/acpi_madt.h"

#include <efilib.h>

#define EDU_VENDOR     0x1234
#define EDU_DEVICE     0x11e8
#define EDU_DMA_SRC    0x80
#define EDU_DMA_DST    0x88
#define EDU_DMA_CNT    0x90
#define EDU_DMA_CMD    0x98
#define EDU_DMA_RUN    1u
#define EDU_DMA_TO_RAM 2u
#define EDU_BUF        0x40000u
#define DMA_BELOW      0x0ffff000ull /* edu's 28-bit DMA mask */
#define LEN            64
#define P_FILL         0x5a

#define PCI_CMD_MEM    (1u << 1)
#define PCI_CMD_MASTER (1u << 2)

static inline void outl(uint16_t port, uint32_t v)
{
    asm volatile("outl %0, %1" ::"a"(v), "Nd"(port));
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t v;
    asm volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static uint32_t pci_read(unsigned dev, unsigned fn, unsigned off)
{
    outl(0xcf8, 0x80000000u | dev << 11 | fn << 8 | (off & 0xfc));
    return inl(0xcfc);
}

static void pci_write(unsigned dev, unsigned fn, unsigned off, uint32_t v)
{
    outl(0xcf8, 0x80000000u | dev << 11 | fn << 8 | (off & 0xfc));
    outl(0xcfc, v);
}

/* ---- the unit's registers, as the VMM reaches them: plain MMIO ---- */
static uint32_t mmio_rd32(void *ctx, unsigned off)
{
    return *(volatile uint32_t *)((uintptr_t)ctx + off);
}
static uint64_t mmio_rd64(void *ctx, unsigned off)
{
    return *(volatile uint64_t *)((uintptr_t)ctx + off);
}
static void mmio_wr32(void *ctx, unsigned off, uint32_t v)
{
    *(volatile uint32_t *)((uintptr_t)ctx + off) = v;
}
static void mmio_wr64(void *ctx, unsigned off, uint64_t v)
{
    *(volatile uint64_t *)((uintptr_t)ctx + off) = v;
}

/* EfiReservedMemoryType, as the VMM's pool and tables are: Linux started afterwards never
 * reuses them (the "VMM" page, the remapping tables) */
static uint8_t *page_below(uint64_t max)
{
    EFI_PHYSICAL_ADDRESS a = max;
    if (uefi_call_wrapper(BS->AllocatePages, 4, AllocateMaxAddress, EfiReservedMemoryType, 1, &a))
        return NULL;
    return (uint8_t *)(uintptr_t)a;
}

static void *table_page(void *ctx, uint64_t *pa)
{
    uint8_t *p = page_below(0xffffffffull);
    *pa = (uint64_t)(uintptr_t)p;
    return p;
}

/* the DMAR from the ACPI 2.0 RSDP's XSDT (the firmware here is QEMU's, trusted) */
static const uint8_t *find_dmar(void)
{
    static EFI_GUID acpi20 = ACPI_20_TABLE_GUID;
    void *rsdp = NULL;
    if (LibGetSystemConfigurationTable(&acpi20, &rsdp) || !rsdp)
        return NULL;
    const uint8_t *r = rsdp, *x = (const uint8_t *)(uintptr_t) * (const uint64_t *)(r + 24);
    if (!x || x[0] != 'X')
        return NULL;
    uint32_t len = *(const uint32_t *)(x + 4);
    for (uint32_t off = 36; off + 8 <= len; off += 8) {
        const uint8_t *t = (const uint8_t *)(uintptr_t) * (const uint64_t *)(x + off);
        if (t && t[0] == 'D' && t[1] == 'M' && t[2] == 'A' && t[3] == 'R')
            return t;
    }
    return NULL;
}

struct edu {
    volatile uint8_t *bar;
    unsigned dev;
};

static void edu_w(struct edu *e, unsigned off, uint64_t v)
{
    *(volatile uint64_t *)(e->bar + off) = v;
}

static uint64_t edu_r(struct edu *e, unsigned off)
{
    return *(volatile uint64_t *)(e->bar + off);
}

/* one DMA; false if the device never finished it (5 s) */
static bool edu_dma(struct edu *e, uint64_t src, uint64_t dst, bool to_ram)
{
    edu_w(e, EDU_DMA_SRC, src);
    edu_w(e, EDU_DMA_DST, dst);
    edu_w(e, EDU_DMA_CNT, LEN);
    edu_w(e, EDU_DMA_CMD, EDU_DMA_RUN | (to_ram ? EDU_DMA_TO_RAM : 0));
    for (unsigned i = 0; i < 500; i++) {
        if (!(edu_r(e, EDU_DMA_CMD) & EDU_DMA_RUN))
            return true;
        test_stall_us(10000);
    }
    return false;
}

/* RAM page -> edu buffer -> RAM page */
static bool copy(struct edu *e, const uint8_t *from, uint8_t *to)
{
    return edu_dma(e, (uintptr_t)from, EDU_BUF, false) && edu_dma(e, EDU_BUF, (uintptr_t)to, true);
}

static bool all(const uint8_t *p, uint8_t v)
{
    for (unsigned i = 0; i < 4096; i++)
        if (p[i] != v)
            return false;
    return true;
}

static bool find_edu(struct edu *e)
{
    for (unsigned dev = 0; dev < 32; dev++) {
        uint32_t id = pci_read(dev, 0, 0);
        if ((id & 0xffff) != EDU_VENDOR || id >> 16 != EDU_DEVICE)
            continue;
        uint32_t bar = pci_read(dev, 0, 0x10);
        if (bar & 1 || !(bar & ~0xfu))
            return false;
        pci_write(dev, 0, 0x04, (pci_read(dev, 0, 0x04) & 0xffff) | PCI_CMD_MEM | PCI_CMD_MASTER);
        e->bar = (volatile uint8_t *)(uintptr_t)(bar & ~0xfu);
        e->dev = dev;
        return true;
    }
    return false;
}

static struct vtd_regs unit_regs(void *ctx, uint64_t base)
{
    return (struct vtd_regs){mmio_rd32, mmio_rd64, mmio_wr32, mmio_wr64, (void *)(uintptr_t)base};
}

static const uint8_t *phys(void *ctx, uint64_t pa, size_t n)
{
    return (const uint8_t *)(uintptr_t)pa; /* UEFI: identity mapped */
}

static struct ptv_mem_range mem[PTV_HANDOFF_MAX_MEM];
static struct iommu_boot b;
static char err[PTV_MEMMAP_ERR_MAX];

/* EFI memory types as the loader classifies them (boot/vmm_load.c classify()) */
static uint32_t classify(UINT32 t)
{
    switch (t) {
    case EfiConventionalMemory:
    case EfiLoaderCode:
    case EfiLoaderData:
    case EfiBootServicesCode:
    case EfiBootServicesData:
        return PTV_MEM_RAM;
    case EfiACPIReclaimMemory:
    case EfiACPIMemoryNVS:
        return PTV_MEM_ACPI;
    case EfiMemoryMappedIO:
    case EfiMemoryMappedIOPortSpace:
        return PTV_MEM_MMIO;
    default:
        return PTV_MEM_RESERVED;
    }
}

/* the firmware's map, as the loader hands it over, with [vmm, vmm + 4 KiB) as the VMM's */
static bool memory_map(uint64_t vmm, unsigned *n)
{
    UINTN nr, key, dsize;
    UINT32 dver;
    EFI_MEMORY_DESCRIPTOR *map = LibMemoryMap(&nr, &key, &dsize, &dver);
    static struct ptv_mem_range in[512];
    if (!map || nr > 512)
        return false;
    for (UINTN i = 0; i < nr; i++) {
        EFI_MEMORY_DESCRIPTOR *d = (void *)((UINT8 *)map + i * dsize);
        in[i] =
            (struct ptv_mem_range){d->PhysicalStart, d->NumberOfPages * 4096, classify(d->Type), 0};
    }
    FreePool(map);
    return ptv_memmap_build(in, (unsigned)nr, vmm, 4096, mem, PTV_HANDOFF_MAX_MEM, n, err,
                            sizeof(err)) == 0;
}

/*
 * With \ptvisor\vmlinuz.efi on the volume (qemu:vtd-linux): what the loader does once the VMM
 * runs -- the DMAR renamed by its own acpi_resign() -- and then Linux, started with the unit
 * still translating through the VMM's tables.  Returns only if the kernel is not there or
 * does not start.
 */
static void linux_with_dmar_hidden(EFI_HANDLE image, uint8_t *dmar)
{
    static CHAR16 opts[] = L"initrd=\\ptvisor\\initrd.img console=ttyS0,115200 panic=-1";
    static CHAR16 kernel[] = L"\\ptvisor\\vmlinuz.efi";
    EFI_LOADED_IMAGE *li, *kli;
    EFI_HANDLE k = NULL;
    EFI_STATUS st;

    if (uefi_call_wrapper(BS->HandleProtocol, 3, image, &LoadedImageProtocol, (void **)&li))
        return;
    EFI_DEVICE_PATH *path = FileDevicePath(li->DeviceHandle, kernel);
    st = path ? uefi_call_wrapper(BS->LoadImage, 6, FALSE, image, path, NULL, 0, &k)
              : EFI_OUT_OF_RESOURCES;
    if (EFI_ERROR(st)) {
        report_info("no Linux to start (\\ptvisor\\vmlinuz.efi: %lu)", (unsigned long)st);
        return;
    }
    if (uefi_call_wrapper(BS->HandleProtocol, 3, k, &LoadedImageProtocol, (void **)&kli))
        return;
    kli->LoadOptions = opts;
    kli->LoadOptionsSize = sizeof(opts);
    acpi_resign(dmar, ACPI_DMAR_HIDDEN_SIG);
    test_printf("INFO: DMAR renamed %s; starting Linux with the unit translating\n",
                ACPI_DMAR_HIDDEN_SIG);
    st = uefi_call_wrapper(BS->StartImage, 3, k, NULL, NULL);
    test_printf("INFO: Linux returned %lu\n", (unsigned long)st);
}

static struct vtd_fault faults[8];

/* the faults the unit recorded now; true if one is edu's at page, of that kind */
static bool fault_seen(const struct vtd_regs *r, const struct vtd_caps *c, struct edu *e,
                       const uint8_t *page, bool write, unsigned *n)
{
    bool ovf, seen = false;
    *n = vtd_faults_poll(r, c, faults, 8, &ovf);
    for (unsigned i = 0; i < *n && i < 8; i++) {
        report_info("fault: %s by %02x:%02x.%u at %#lx, reason %#x",
                    faults[i].write ? "write" : "read", faults[i].sid >> 8,
                    (faults[i].sid >> 3) & 0x1f, faults[i].sid & 7, faults[i].addr,
                    faults[i].reason);
        seen |= faults[i].addr == (uintptr_t)page && faults[i].sid == e->dev << 3 &&
                faults[i].write == write;
    }
    return seen;
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    struct edu e;
    uint8_t *p, *a, *a2, *s;
    const uint8_t *t;
    unsigned n;

    test_init(image, systab);
    t = find_dmar();
    if (!t) {
        report_skip("no DMAR table: QEMU without -device intel-iommu");
        report_summary();
        return EFI_SUCCESS;
    }
    if (!find_edu(&e)) {
        report_skip("no edu device with a memory BAR");
        report_summary();
        return EFI_SUCCESS;
    }
    p = page_below(DMA_BELOW);
    a = page_below(DMA_BELOW);
    a2 = page_below(DMA_BELOW);
    s = page_below(DMA_BELOW);
    if (!report(p && a && a2 && s, "four pages below 256 MiB for edu"))
        goto out;
    for (unsigned i = 0; i < 4096; i++)
        s[i] = (uint8_t)(0xc0 + i % 61);
    memset(p, P_FILL, 4096);
    memset(a, 0, 4096);
    memset(a2, 0, 4096);

    /* the control: without translation the device writes P */
    bool landed = copy(&e, s, p) && !memcmp(p, s, LEN);
    report(landed, "control, translation off: edu DMA lands in page %#lx", (uintptr_t)p);
    memset(p, P_FILL, 4096);

    /* the handoff map as the loader makes it (boot/memmap.c), P as the VMM's memory, and the
     * VMM's own set-up (iommu_boot.c) from there: DMAR, units, walk, tables, sequence */
    uint64_t pb = (uintptr_t)p;
    unsigned nmem = 0;
    bool ok = memory_map(pb, &nmem);
    if (!report(ok, "handoff map built: %u ranges, VMM page %#lx (%s)", nmem, pb,
                err[0] ? err : "ok"))
        goto out;
    struct iommu_boot_in in = {.mem = mem,
                               .n = nmem,
                               .vmm_base = pb,
                               .vmm_size = 4096,
                               .dmar_pa = (uintptr_t)t,
                               .phys = phys,
                               .unit = unit_regs,
                               .pages = {table_page, NULL, NULL},
                               .free_pages = 4096};
    /* (each call before its report: argument evaluation order is unspecified) */
    ok = iommu_boot_tables(&in, &b);
    if (!report(ok, "the VMM's set-up: DMAR, %u unit(s), tables (%s)", b.n_units,
                ok ? "ok" : b.why)) {
        uint32_t tl = *(const uint32_t *)(t + 4);
        for (uint32_t i = 0; i < tl && i < 512; i += 16) {
            char hex[64];
            unsigned k = 0;
            for (uint32_t j = i; j < i + 16 && j < tl; j++)
                k += (unsigned)ptv_snprintf(hex + k, sizeof(hex) - k, "%02x", t[j]);
            report_info("DMAR +%03x %s", i, hex);
        }
        goto out;
    }
    report_info("unit 0 at %#lx: CAP %#lx ECAP %#lx", b.dmar.units[0].reg_base, b.caps[0].cap,
                b.caps[0].ecap);
    report_info("tables: [0, %#lx) in %lu pages (1G %lu 2M %lu 4K %lu), %u levels", b.tab.top,
                b.tab.pages, b.tab.leaves[2], b.tab.leaves[1], b.tab.leaves[0], b.tab.levels);
    struct vtd_regs r = unit_regs(NULL, b.dmar.units[0].reg_base);
    const struct vtd_caps *caps = &b.caps[0];
    ok = iommu_boot_enable(&in, &b);
    uint32_t gsts = mmio_rd32(r.ctx, VTD_REG_GSTS);
    if (!report(ok && b.n_on == b.n_units && (gsts & VTD_GSTS_TES),
                "unit translating (GSTS %#x) %s", gsts, ok ? "" : b.why))
        goto out;
    fault_seen(&r, caps, &e, p, true, &n);
    report(n == 0, "no fault recorded before the DMA checks (%u)", n);

    ok = copy(&e, s, a) && !memcmp(a, s, LEN);
    report(ok, "allowed: edu reads a RAM page and writes another, the bytes land");
    fault_seen(&r, caps, &e, p, true, &n);
    report(n == 0, "allowed: no fault recorded (%u)", n);

    bool done = edu_dma(&e, EDU_BUF, (uintptr_t)p, true);
    report(done && all(p, P_FILL), "blocked: edu's write to the VMM page leaves it unchanged");
    ok = fault_seen(&r, caps, &e, p, true, &n);
    report(ok, "blocked: the unit recorded edu's write fault at %#lx (%u faults)", (uintptr_t)p, n);

    memset(p, P_FILL, 4096); /* the CPU's own write: whatever the blocked DMA did, P holds P_FILL */
    done = copy(&e, p, a2);
    bool leaked = false;
    for (unsigned i = 0; i < LEN; i++)
        leaked |= a2[i] == P_FILL;
    report(done && !leaked, "blocked: edu's read of the VMM page never sees its bytes");
    ok = fault_seen(&r, caps, &e, p, false, &n);
    report(ok, "blocked: the unit recorded edu's read fault at %#lx (%u faults)", (uintptr_t)p, n);
out:
    if (report_summary() == 0 && t)
        linux_with_dmar_hidden(image, (uint8_t *)(uintptr_t)t);
    return EFI_SUCCESS;
}
