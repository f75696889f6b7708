/* SPDX-License-Identifier: MIT */
/*
 * DMA isolation: the VMM's side of VT-d (docs/ARCHITECTURE.md 2.6).  At boot, on the BSP: the
 * firmware's DMAR table (its address came through the handoff; the loader hides the table from
 * the guest once the VMM runs) is checked and parsed (dmar.c), every unit is probed (vtd.c), one
 * set of remapping tables is built from the handoff memory map -- guest memory 1:1, the VMM's
 * memory and the units' registers left out (vtd_tables.c) -- every unit is switched to them
 * (vtd.c's sequence over MMIO), and the units' register pages become read-only in the guest's
 * EPT.  Anything that stops this is one line "DMA not isolated: <reason>", and the guest runs
 * as before.  Faults the units record are polled on the BSP every IOMMU_POLL_EXITS VM exits.
 */
#include "iommu/iommu_vmm.h"
#include "iommu/dmar.h"
#include "iommu/vtd.h"
#include "iommu/vtd_tables.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vcpu.h"
#include "ept/ept.h"
#include "handoff.h"
#include "log.h"
#include "palloc.h"
#include "vmm.h"
#include "lib/ptv_string.h"

#define MAX_FAULTS_PER_POLL 8

static struct {
    struct dmar_info dmar;
    struct vtd_caps caps[DMAR_MAX_UNITS];
    unsigned n_on;        /* units translating, caps[0..n_on) */
    unsigned n_protected; /* units whose registers are read-only in EPT, units[0..n) */
    unsigned long faults;
} iommu;

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

static struct vtd_regs unit_regs(unsigned i)
{
    return (struct vtd_regs){mmio_rd32, mmio_rd64, mmio_wr32, mmio_wr64,
                             (void *)(uintptr_t)iommu.dmar.units[i].reg_base};
}

static void *table_page(void *ctx, uint64_t *pa)
{
    return palloc_page(pa); /* identity mapped: VA == PA */
}

/* for units that do not snoop (ECAP.C = 0): the tables must be in memory, not only in cache */
static void table_flush(void *ctx, const void *va, size_t n)
{
    for (size_t off = 0; off < n; off += 64)
        asm volatile("clflush %0" ::"m"(*((const volatile char *)va + off)));
    asm volatile("mfence" ::: "memory");
}

/* the DMAR's bytes lie in firmware memory the map names (ACPI or reserved; not VMM, not MMIO) */
static const uint8_t *dmar_bytes(const struct ptv_handoff *h, size_t *len, const char **why)
{
    uint64_t pa = h->acpi_dmar, end, p;
    uint32_t tlen;

    if (pa == 0) {
        *why = "the loader found no DMAR table (no VT-d, or ACPI tables it could not read)";
        return NULL;
    }
    for (p = pa; p < pa + DMAR_HEADER_LEN; p = end) {
        uint32_t t = ptv_mem_type_at(h, p, &end);
        if (t == PTV_MEM_VMM || t == PTV_MEM_MMIO || pa + DMAR_HEADER_LEN < pa) {
            *why = "the DMAR table's address is not in firmware memory";
            return NULL;
        }
    }
    tlen = *(const volatile uint32_t *)(uintptr_t)(pa + 4);
    if (tlen < DMAR_HEADER_LEN || tlen > DMAR_MAX_LEN) {
        *why = "the DMAR table's length is out of range";
        return NULL;
    }
    for (p = pa; p < pa + tlen; p = end) {
        uint32_t t = ptv_mem_type_at(h, p, &end);
        if (t == PTV_MEM_VMM || t == PTV_MEM_MMIO) {
            *why = "the DMAR table runs out of firmware memory";
            return NULL;
        }
    }
    *len = tlen;
    return (const uint8_t *)(uintptr_t)pa;
}

/* RMRRs: memory some device keeps using (USB legacy, graphics); the tables map it 1:1 like any
 * guest memory unless it is the VMM's or beyond the map, which is only worth a warning: that
 * device's DMA there faults, nothing else changes */
static void rmrr_check(uint64_t top)
{
    for (unsigned i = 0; i < iommu.dmar.n_rmrr; i++) {
        const struct dmar_rmrr *r = &iommu.dmar.rmrr[i];
        if (r->end > top || (r->base < vmm_span.base + vmm_span.size && vmm_span.base < r->end))
            pr_warn("iommu", "RMRR %u [%#lx, %#lx) is %s: its device's DMA there is blocked", i,
                    r->base, r->end, r->end > top ? "beyond the map" : "in VMM memory");
    }
}

static bool not_isolated(const char *why)
{
    pr_warn("iommu", "DMA not isolated: %s", why);
    return false;
}

bool iommu_setup(const struct ptv_handoff *h, struct ept *ept)
{
    static struct vtd_range holes[DMAR_MAX_UNITS + 1];
    static struct vtd_prog prog;
    char err[DMAR_ERR_MAX];
    const char *why;
    const uint8_t *t;
    size_t len = 0;
    unsigned levels, n;
    bool has_2m, has_1g, coherent = true;
    struct vtd_tables tab;
    uint64_t top;

    t = dmar_bytes(h, &len, &why);
    if (!t)
        return not_isolated(why);
    if (!dmar_parse(t, len, &iommu.dmar, err, sizeof(err)))
        return not_isolated(err);
    n = iommu.dmar.n_units;
    for (unsigned i = 0; i < n; i++) {
        const struct dmar_unit *u = &iommu.dmar.units[i];
        struct vtd_regs r = unit_regs(i);
        uint64_t end;
        /* registers inside the EPT's identity map, in device memory: never RAM or the VMM's */
        if (ptv_mem_type_at(h, u->reg_base, &end) == PTV_MEM_RAM ||
            ptv_mem_type_at(h, u->reg_base, &end) == PTV_MEM_VMM ||
            (u->reg_base - vmm_span.base < vmm_span.size) ||
            (vmm_span.base - u->reg_base < u->reg_size)) {
            pr_warn("iommu", "DMA not isolated: unit %u's registers at %#lx overlap memory", i,
                    u->reg_base);
            return false;
        }
        if (!vtd_probe(&r, u->reg_size, &iommu.caps[i], err, sizeof(err))) {
            pr_warn("iommu", "DMA not isolated: unit %u at %#lx: %s", i, u->reg_base, err);
            return false;
        }
        coherent = coherent && iommu.caps[i].coherent;
        holes[i] = (struct vtd_range){u->reg_base, u->reg_size};
    }
    holes[n] = (struct vtd_range){vmm_span.base, vmm_span.size};
    struct vtd_map_in in = {
        .mem = h->mem, .n = h->nr_mem, .hole = holes, .n_hole = n + 1, .levels = 3};
    unsigned long pages;
    if (!vtd_tables_span(&in, &top, err, sizeof(err)))
        return not_isolated(err);
    for (unsigned i = 0; i < n; i++)
        if (iommu.dmar.units[i].reg_base + iommu.dmar.units[i].reg_size > top) {
            pr_warn("iommu",
                    "DMA not isolated: unit %u's registers at %#lx are above the "
                    "identity map's %#lx",
                    i, iommu.dmar.units[i].reg_base, top);
            return false;
        }
    if (!vtd_choose(iommu.caps, n, top, &levels, &has_2m, &has_1g, err, sizeof(err)))
        return not_isolated(err);
    in.levels = levels;
    in.has_2m = has_2m;
    in.has_1g = has_1g;
    /* at most a quarter of what is free: the APs, trace rings and EPT maps come later (units
     * without 2 MiB pages need ~3,000 pages per 4 GiB; with them a handful) */
    pages = vtd_tables_pages(&in, &top, err, sizeof(err));
    if (!pages)
        return not_isolated(err);
    if (pages * 4096 > palloc_free_bytes() / 4) {
        pr_warn("iommu",
                "DMA not isolated: the remapping tables need %lu pages, more than a quarter of "
                "the pool's %lu free (vmm_pool)",
                pages, palloc_free_bytes() / 4096);
        return false;
    }
    struct vtd_page_ops ops = {table_page, coherent ? NULL : table_flush, NULL};
    if (!vtd_tables_build(&in, &ops, &tab, err, sizeof(err)))
        return not_isolated(err);

    /* the registers first: from the moment the guest runs, it cannot write them */
    vm_ept_lock();
    for (unsigned i = 0; i < n; i++) {
        bool narrowed;
        /* read-only, not executable: exit_ept.c's PT write-protect lifting (R+X pages) never
         * applies here, and a guest write gets #GP(0) with a rate-limited line */
        if (ept_protect(ept, holes[i].base, holes[i].size, EPT_R, &narrowed)) {
            vm_ept_unlock();
            pr_warn("iommu", "DMA not isolated: unit %u's registers at %#lx: EPT protect failed", i,
                    holes[i].base);
            return false;
        }
    }
    vm_ept_unlock();
    vmx_ept_sync(ept);
    iommu.n_protected = n;
    rmrr_check(top);

    for (unsigned i = 0; i < n; i++) {
        struct vtd_regs r = unit_regs(i);
        vtd_prog_init(&prog, &iommu.caps[i], tab.root_pa);
        if (vtd_enable(&prog, &r) != VTD_DONE) {
            iommu.n_on = i; /* the units before it translate; their faults still get polled */
            pr_warn("iommu", "DMA not isolated: unit %u at %#lx: %s", i,
                    iommu.dmar.units[i].reg_base, prog.err);
            return false;
        }
        pr_info("iommu", "unit %u at %#lx (segment %u%s): VT-d %u.%u, translating%s", i,
                iommu.dmar.units[i].reg_base, iommu.dmar.units[i].segment,
                iommu.dmar.units[i].include_all ? ", all devices" : "",
                (iommu.caps[i].ver >> 4) & 0xf, iommu.caps[i].ver & 0xf,
                prog.te_was_on ? " (the firmware had it translating: root replaced)" : "");
    }
    iommu.n_on = n;
    if (iommu.dmar.listed_only)
        pr_warn("iommu", "a PCI segment has no INCLUDE_PCI_ALL unit: its devices are remapped as "
                         "the DMAR lists them; one it does not list (hot-plugged) is not");
    pr_info("iommu",
            "DMA isolated: %u unit%s remap [0, %#lx) 1:1 minus VMM [%#lx, %#lx) and their "
            "registers; %lu table pages (%lu x 1G, %lu x 2M, %lu x 4K), %u-level walk; "
            "interrupt remapping not used; faults polled every %u exits",
            n, n == 1 ? "" : "s", tab.top, vmm_span.base, vmm_span.base + vmm_span.size, tab.pages,
            tab.leaves[2], tab.leaves[1], tab.leaves[0], tab.levels, IOMMU_POLL_EXITS);
    return true;
}

void iommu_poll_faults(void)
{
    struct vtd_fault f[MAX_FAULTS_PER_POLL];
    bool overflow;

    for (unsigned i = 0; i < iommu.n_on; i++) {
        struct vtd_regs r = unit_regs(i);
        unsigned got = vtd_faults_poll(&r, &iommu.caps[i], f, MAX_FAULTS_PER_POLL, &overflow);
        iommu.faults += got;
        for (unsigned k = 0; k < got && k < MAX_FAULTS_PER_POLL; k++)
            pr_warn_rl("iommu",
                       "DMA %s by %02x:%02x.%u at %#lx blocked (unit %u, fault reason %#x); %lu "
                       "so far",
                       f[k].write ? "write" : "read", f[k].sid >> 8, (f[k].sid >> 3) & 0x1f,
                       f[k].sid & 7, f[k].addr, i, f[k].reason, iommu.faults);
        if (overflow)
            pr_warn_rl("iommu", "unit %u: fault records overflowed (more faults than logged)", i);
    }
}

bool iommu_owns(uint64_t gpa)
{
    for (unsigned i = 0; i < iommu.n_protected; i++)
        if (gpa - iommu.dmar.units[i].reg_base < iommu.dmar.units[i].reg_size)
            return true;
    return false;
}

unsigned long iommu_faults_seen(void)
{
    return iommu.faults;
}
