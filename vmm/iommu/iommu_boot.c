/* SPDX-License-Identifier: MIT */
/* The VMM's VT-d set-up, pure steps (see iommu_boot.h; docs/ARCHITECTURE.md 2.6). */
#include <stdarg.h>
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include "iommu/iommu_boot.h"

static bool __attribute__((format(printf, 2, 3))) why(struct iommu_boot *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ptv_vsnprintf(b->why, sizeof(b->why), fmt, ap);
    va_end(ap);
    return false;
}

/* the map's type at pa and where that range ends (a hole: PTV_MEM_MMIO, to the next page) */
static uint32_t type_at(const struct iommu_boot_in *in, uint64_t pa, uint64_t *end)
{
    for (unsigned i = 0; i < in->n; i++)
        if (pa - in->mem[i].base < in->mem[i].size) {
            *end = in->mem[i].base + in->mem[i].size;
            return in->mem[i].type;
        }
    *end = (pa | 0xfff) + 1;
    return PTV_MEM_MMIO;
}

static bool in_vmm(const struct iommu_boot_in *in, uint64_t base, uint64_t size)
{
    return base < in->vmm_base + in->vmm_size && in->vmm_base < base + size;
}

/* [pa, pa + n) is memory the map lists, not the VMM's */
static bool firmware_memory(const struct iommu_boot_in *in, uint64_t pa, uint64_t n)
{
    uint64_t end;
    if (pa + n < pa || in_vmm(in, pa, n))
        return false;
    for (uint64_t p = pa; p < pa + n; p = end) {
        uint32_t t = type_at(in, p, &end);
        if (t == PTV_MEM_VMM || t == PTV_MEM_MMIO)
            return false;
    }
    return true;
}

/* a unit's registers: device memory (a hole or MMIO in the map), never RAM or the VMM's */
static bool device_memory(const struct iommu_boot_in *in, uint64_t base, uint64_t size)
{
    uint64_t end;
    if (in_vmm(in, base, size))
        return false;
    for (uint64_t p = base; p < base + size; p = end) {
        uint32_t t = type_at(in, p, &end);
        if (t == PTV_MEM_RAM || t == PTV_MEM_VMM || t == PTV_MEM_ACPI)
            return false;
    }
    return true;
}

static const uint8_t *dmar_bytes(const struct iommu_boot_in *in, struct iommu_boot *b, size_t *len)
{
    const uint8_t *h;
    uint32_t tlen;

    if (!in->dmar_pa) {
        why(b, "the loader found no DMAR table (no VT-d, or ACPI tables it could not read)");
        return NULL;
    }
    if (!firmware_memory(in, in->dmar_pa, DMAR_HEADER_LEN) ||
        !(h = in->phys(in->ctx, in->dmar_pa, DMAR_HEADER_LEN))) {
        why(b, "the DMAR table at %#llx is not in firmware memory",
            (unsigned long long)in->dmar_pa);
        return NULL;
    }
    tlen = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
    if (tlen < DMAR_HEADER_LEN || tlen > DMAR_MAX_LEN) {
        why(b, "the DMAR table's length %u is out of range (%u..%u)", tlen, DMAR_HEADER_LEN,
            DMAR_MAX_LEN);
        return NULL;
    }
    if (!firmware_memory(in, in->dmar_pa, tlen) || !(h = in->phys(in->ctx, in->dmar_pa, tlen))) {
        why(b, "the DMAR table at %#llx runs out of firmware memory",
            (unsigned long long)in->dmar_pa);
        return NULL;
    }
    *len = tlen;
    return h;
}

bool iommu_boot_tables(const struct iommu_boot_in *in, struct iommu_boot *b)
{
    static struct vtd_range holes[DMAR_MAX_UNITS + 1];
    char err[DMAR_ERR_MAX];
    const uint8_t *t;
    size_t len = 0;
    uint64_t top;
    unsigned long pages;
    bool coherent = true;
    unsigned n;

    memset(b, 0, sizeof(*b));
    if (!(t = dmar_bytes(in, b, &len)))
        return false;
    if (!dmar_parse(t, len, &b->dmar, err, sizeof(err)))
        return why(b, "%s", err);
    n = b->dmar.n_units;
    struct vtd_map_in map = {.mem = in->mem, .n = in->n, .hole = holes, .n_hole = n + 1};
    for (unsigned i = 0; i < n; i++) {
        const struct dmar_unit *u = &b->dmar.units[i];
        b->regs[i] = (struct vtd_range){u->reg_base, u->reg_size};
        holes[i] = b->regs[i];
    }
    holes[n] = (struct vtd_range){in->vmm_base, in->vmm_size};
    if (!vtd_tables_span(&map, &top, err, sizeof(err)))
        return why(b, "%s", err);
    for (unsigned i = 0; i < n; i++) {
        const struct dmar_unit *u = &b->dmar.units[i];
        struct vtd_regs r;
        /* below the map: the EPT maps them, so EPT can make them read-only */
        if (!device_memory(in, u->reg_base, u->reg_size) || u->reg_base + u->reg_size > top)
            return why(b, "unit %u's registers [%#llx, +%#llx) are not device memory below %#llx",
                       i, (unsigned long long)u->reg_base, (unsigned long long)u->reg_size,
                       (unsigned long long)top);
        r = in->unit(in->ctx, u->reg_base);
        if (!vtd_probe(&r, u->reg_size, &b->caps[i], err, sizeof(err)))
            return why(b, "unit %u at %#llx: %s", i, (unsigned long long)u->reg_base, err);
        coherent = coherent && b->caps[i].coherent;
        b->n_units = i + 1;
    }
    if (!vtd_choose(b->caps, n, top, &map.levels, &map.has_2m, &map.has_1g, err, sizeof(err)))
        return why(b, "%s", err);
    pages = vtd_tables_pages(&map, &top, err, sizeof(err));
    if (!pages)
        return why(b, "%s", err);
    /* the APs, trace rings and EPT maps come later: units without 2 MiB pages need ~3,000
     * pages per 4 GiB, with them a handful */
    if (pages > in->free_pages / 4)
        return why(b,
                   "the remapping tables need %lu pages, more than a quarter of the pool's %lu "
                   "free (vmm_pool)",
                   pages, in->free_pages);
    struct vtd_page_ops ops = in->pages;
    if (coherent)
        ops.flush = NULL;
    if (!vtd_tables_build(&map, &ops, &b->tab, err, sizeof(err)))
        return why(b, "%s", err);
    for (unsigned i = 0; i < b->dmar.n_rmrr && i < 32; i++) {
        const struct dmar_rmrr *r = &b->dmar.rmrr[i];
        if (r->end > top || in_vmm(in, r->base, r->end - r->base))
            b->rmrr_warn |= 1u << i;
    }
    return true;
}

bool iommu_boot_enable(const struct iommu_boot_in *in, struct iommu_boot *b)
{
    static struct vtd_prog prog;
    b->n_on = 0;
    for (unsigned i = 0; i < b->n_units; i++) {
        struct vtd_regs r = in->unit(in->ctx, b->dmar.units[i].reg_base);
        vtd_prog_init(&prog, &b->caps[i], b->tab.root_pa);
        if (vtd_enable(&prog, &r) != VTD_DONE)
            return why(b, "unit %u at %#llx: %s", i, (unsigned long long)b->dmar.units[i].reg_base,
                       prog.err);
        b->te_was_on[i] = prog.te_was_on;
        b->n_on = i + 1;
    }
    return true;
}
