/* SPDX-License-Identifier: MIT */
/* Host page tables: an identity map of all physical memory (SDM Vol. 3A 4.5). */
#include "paging.h"
#include "cpu.h"
#include "palloc.h"

#define PTE_P  (1ull << 0)
#define PTE_W  (1ull << 1)
#define PTE_PS (1ull << 7)
#define GIB    (1ull << 30)
#define MIB2   (1ull << 21)

uint64_t host_paging_build(uint64_t top)
{
    uint64_t pml4_pa;
    uint64_t *pml4 = palloc_page(&pml4_pa);
    if (!pml4)
        return 0;
    bool has_1g = cpuid_count(0x80000001, 0).edx & (1u << 26);
    top = (top + GIB - 1) & ~(GIB - 1);
    for (uint64_t gb = 0; gb < top; gb += GIB) {
        unsigned i4 = (gb >> 39) & 511, i3 = (gb >> 30) & 511;
        if (!(pml4[i4] & PTE_P)) {
            uint64_t pa;
            if (!palloc_page(&pa))
                return 0;
            pml4[i4] = pa | PTE_P | PTE_W;
        }
        uint64_t *pdpt = (uint64_t *)(uintptr_t)(pml4[i4] & ~0xfffull);
        if (has_1g) {
            pdpt[i3] = gb | PTE_P | PTE_W | PTE_PS;
            continue;
        }
        uint64_t pd_pa;
        uint64_t *pd = palloc_page(&pd_pa);
        if (!pd)
            return 0;
        for (unsigned i = 0; i < 512; i++)
            pd[i] = (gb + i * MIB2) | PTE_P | PTE_W | PTE_PS;
        pdpt[i3] = pd_pa | PTE_P | PTE_W;
    }
    return pml4_pa;
}

#define PTE_NX   (1ull << 63)
#define PTE_ADDR 0x000ffffffffff000ull

bool host_paging_checkable(void)
{
    return true;
}

/* a leaf is W+X when every level on its path allows writes and none sets NX */
static bool wx_free(uint64_t table_pa, unsigned level, bool w, bool nx, bool nxe)
{
    const uint64_t *t = (const uint64_t *)(uintptr_t)table_pa;
    for (unsigned i = 0; i < 512; i++) {
        uint64_t e = t[i];
        if (!(e & PTE_P))
            continue;
        bool ew = w && (e & PTE_W), enx = nx || (nxe && (e & PTE_NX));
        if (level == 1 || (level < 4 && (e & PTE_PS))) {
            if (ew && !enx)
                return false;
        } else if (!wx_free(e & PTE_ADDR, level - 1, ew, enx, nxe)) {
            return false;
        }
    }
    return true;
}

bool host_paging_wx_free(void)
{
    /* NX bits only mean something with EFER.NXE; without it every page is executable */
    bool nxe = rdmsr(MSR_EFER) & (1ull << 11);
    return wx_free(read_cr3() & PTE_ADDR, 4, true, false, nxe);
}
