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
 * The decisions are pure code in iommu_boot.c (test_iommu_boot); here: MMIO, pool, EPT, log.
 */
#include "iommu/shim/iommu_vmm.h"
#include "iommu/iommu_boot.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vcpu.h"
#include "ept/ept.h"
#include "base/handoff.h"
#include "base/log.h"
#include "base/palloc.h"
#include "base/vmm_state.h"
#include "lib/ptv_string.h"

#define MAX_FAULTS_PER_POLL 8

static struct iommu_boot iommu;
static unsigned long iommu_faults;
static unsigned n_protected;        /* units whose registers EPT makes read-only: regs[0..n) */
static struct vtd_fault last_fault; /* the newest fault polled (PTV_VMCALL_DMA_STATS) */

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

/* the unit's registers through the host page tables, which map all of [0, top) identity */
static struct vtd_regs unit_regs(void *ctx, uint64_t reg_base)
{
    return (struct vtd_regs){mmio_rd32, mmio_rd64, mmio_wr32, mmio_wr64,
                             (void *)(uintptr_t)reg_base};
}

static const uint8_t *phys(void *ctx, uint64_t pa, size_t n)
{
    return (const uint8_t *)(uintptr_t)pa; /* identity mapped; the map's types checked first */
}

static void *table_page(void *ctx, uint64_t *pa)
{
    return palloc_page(pa); /* identity mapped: VA == PA */
}

/* for units that do not snoop (ECAP.C = 0): the tables must be in memory, not only in cache */
static void table_flush(void *ctx, const void *va, size_t n)
{
    clflush_range(va, n);
}

bool iommu_setup(const struct ptv_handoff *h, struct ept *ept)
{
    struct iommu_boot_in in = {.mem = h->mem,
                               .n = h->nr_mem,
                               .vmm_base = vmm_span.base,
                               .vmm_size = vmm_span.size,
                               .dmar_pa = h->acpi_dmar,
                               .phys = phys,
                               .unit = unit_regs,
                               .pages = {table_page, table_flush, NULL},
                               .free_pages = palloc_free_bytes() / 4096};
    struct iommu_boot *b = &iommu;

    if (!iommu_boot_tables(&in, b)) {
        pr_warn("iommu", "DMA not isolated: %s", b->why);
        return false;
    }
    for (unsigned i = 0; i < b->dmar.n_rmrr && i < 32; i++)
        if (b->rmrr_warn & (1u << i))
            pr_warn("iommu",
                    "RMRR %u [%#lx, %#lx) is beyond the map or in VMM memory: its "
                    "device's DMA there is blocked",
                    i, b->dmar.rmrr[i].base, b->dmar.rmrr[i].end);

    /* the registers first: from the moment the guest runs, it cannot write them */
    vm_ept_lock();
    for (unsigned i = 0; i < b->n_units; i++) {
        bool narrowed;
        /* read-only, not executable: exit_ept.c's PT write-protect lifting (R+X pages) never
         * applies here, and a guest write gets #GP(0) with a rate-limited line */
        if (ept_protect(ept, b->regs[i].base, b->regs[i].size, EPT_R, &narrowed)) {
            vm_ept_unlock();
            pr_warn("iommu", "DMA not isolated: unit %u's registers at %#lx: EPT protect failed", i,
                    b->regs[i].base);
            return false;
        }
        n_protected = i + 1;
    }
    vm_ept_unlock();
    vmx_ept_sync(ept);

    bool ok = iommu_boot_enable(&in, b); /* b->n_on units translate, even on failure */
    for (unsigned i = 0; i < b->n_on; i++)
        pr_info("iommu", "unit %u at %#lx (segment %u%s): VT-d %u.%u, translating%s", i,
                b->dmar.units[i].reg_base, b->dmar.units[i].segment,
                b->dmar.units[i].include_all ? ", all devices" : "", (b->caps[i].ver >> 4) & 0xf,
                b->caps[i].ver & 0xf,
                b->te_was_on[i] ? " (the firmware had it translating: root replaced)" : "");
    if (!ok) {
        pr_warn("iommu", "DMA not isolated: %s", b->why);
        return false;
    }
    if (b->dmar.listed_only)
        pr_warn("iommu", "a PCI segment has no INCLUDE_PCI_ALL unit: its devices are remapped as "
                         "the DMAR lists them; one it does not list (hot-plugged) is not");
    pr_info("iommu",
            "DMA isolated: %u unit%s remap [0, %#lx) 1:1 minus VMM [%#lx, %#lx) and their "
            "registers; %lu table pages (%lu x 1G, %lu x 2M, %lu x 4K), %u-level walk; "
            "interrupt remapping not used; faults polled every %u exits",
            b->n_on, b->n_on == 1 ? "" : "s", b->tab.top, vmm_span.base,
            vmm_span.base + vmm_span.size, b->tab.pages, b->tab.leaves[2], b->tab.leaves[1],
            b->tab.leaves[0], b->tab.levels, IOMMU_POLL_EXITS);
    return true;
}

void iommu_poll_faults(void)
{
    struct vtd_fault f[MAX_FAULTS_PER_POLL];
    bool overflow;

    for (unsigned i = 0; i < iommu.n_on; i++) {
        struct vtd_regs r = unit_regs(NULL, iommu.dmar.units[i].reg_base);
        unsigned got = vtd_faults_poll(&r, &iommu.caps[i], f, MAX_FAULTS_PER_POLL, &overflow);
        iommu_faults += got;
        if (got)
            last_fault = f[(got < MAX_FAULTS_PER_POLL ? got : MAX_FAULTS_PER_POLL) - 1];
        for (unsigned k = 0; k < got && k < MAX_FAULTS_PER_POLL; k++)
            pr_warn_rl("iommu",
                       "DMA %s by %02x:%02x.%u at %#lx blocked (unit %u, fault reason %#x); %lu "
                       "so far",
                       f[k].write ? "write" : "read", f[k].sid >> 8, (f[k].sid >> 3) & 0x1f,
                       f[k].sid & 7, f[k].addr, i, f[k].reason, iommu_faults);
        if (overflow)
            pr_warn_rl("iommu", "unit %u: fault records overflowed (more faults than logged)", i);
    }
}

bool iommu_owns(uint64_t gpa)
{
    for (unsigned i = 0; i < n_protected; i++)
        if (gpa - iommu.regs[i].base < iommu.regs[i].size)
            return true;
    return false;
}

unsigned long iommu_faults_seen(void)
{
    return iommu_faults;
}

unsigned iommu_units_on(void)
{
    return iommu.n_on;
}

bool iommu_last_fault(uint64_t *addr, uint16_t *sid, bool *write)
{
    *addr = last_fault.addr, *sid = last_fault.sid, *write = last_fault.write;
    return iommu_faults != 0;
}
