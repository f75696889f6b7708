/* SPDX-License-Identifier: MIT */
/*
 * The VMM's host page tables on this CPU: the pure builder (paging.c) fed with
 * the run-time layout of vmm.elf (linker.ld symbols, relocated by the loader)
 * and pool pages; the live check behind PTV_SELFCHECK_HOST_WX.
 */
#include "host/paging.h"
#include "hw/cpu.h"
#include "base/palloc.h"
#include "base/vmm_state.h"

/* linker.ld: page-aligned section bounds (run-time addresses: the VMM is a PIE) */
extern char __text_start[], __text_end[], __rodata_start[], __rodata_end[];

#define CPUID_EXT_EDX_NX     (1u << 20)
#define CPUID_EXT_EDX_1GPAGE (1u << 26)

static void *hw_alloc(void *ctx, uint64_t *pa)
{
    return palloc_page(pa);
}

static void *hw_pa_to_va(void *ctx, uint64_t pa)
{
    return (void *)(uintptr_t)pa; /* the VMM runs identity mapped */
}

static const struct hpt_ops hw_ops = {.alloc_page = hw_alloc, .pa_to_va = hw_pa_to_va};
static bool have_nx;

uint64_t host_paging_build(uint64_t top)
{
    uint32_t edx =
        cpuid_count(0x80000000, 0).eax >= 0x80000001 ? cpuid_count(0x80000001, 0).edx : 0;
    struct hpt_layout l = {
        .top = top,
        .text_start = (uint64_t)(uintptr_t)__text_start,
        .text_end = (uint64_t)(uintptr_t)__text_end,
        .ro_start = (uint64_t)(uintptr_t)__rodata_start,
        .ro_end = (uint64_t)(uintptr_t)__rodata_end,
        .has_1g = edx & CPUID_EXT_EDX_1GPAGE,
        .has_nx = edx & CPUID_EXT_EDX_NX,
    };
    uint64_t cr3;

    have_nx = l.has_nx;
    return hpt_build(&l, &hw_ops, &cr3) ? 0 : cr3;
}

uint64_t host_paging_efer(uint64_t efer)
{
    return have_nx ? efer | EFER_NX : efer;
}

uint64_t host_paging_cr0(uint64_t cr0)
{
    return cr0 | X86_CR0_WP;
}

bool host_paging_checkable(void)
{
    return true;
}

bool host_paging_wx_free(void)
{
    uint64_t cr3 = read_cr3() & PTE_ADDR;

    /* the tables in use must be the VMM's own, and W^X with the live EFER.NXE and CR0.WP */
    return cr3 == vmm_host_cr3 &&
           hpt_wx_free(&hw_ops, cr3, rdmsr(MSR_EFER) & EFER_NX, read_cr0() & X86_CR0_WP);
}
