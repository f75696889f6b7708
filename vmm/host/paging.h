/* SPDX-License-Identifier: MIT */
/*
 * The VMM's own page tables (VMX root): an identity map of [0, top) with W^X.
 *
 *   VMM text            R X      (the only executable memory in root)
 *   VMM rodata          R   NX   (incl. the relocation and symbol tables)
 *   everything else     R W NX   (VMM data/bss, handoff, pool, stacks, guest
 *                                 RAM, MMIO: the VMM never executes there)
 *
 * 1 GiB pages where the CPU has them and a block is one class, else 2 MiB,
 * else 4 KiB (only around the VMM image).  Supervisor only (U = 0).  NX needs
 * EFER.NXE, and R/O needs CR0.WP in ring 0: host_paging_efer()/_cr0() give the
 * values the VMCS host state must load on every exit (SDM Vol. 3A 4.6, 4.1.3).
 *
 * The builder and the walker are pure (hpt_*: no CPU access, an allocator and
 * a physical-to-virtual hook), so tests/unit/host/test_paging.c builds tables for
 * any layout in a buffer and checks every page.
 */
#ifndef PTV_PAGING_H
#define PTV_PAGING_H

#include <stdbool.h>
#include <stdint.h>

/* x86-64 4-level paging entry bits (SDM Vol. 3A 4.5, Tables 4-14..4-20) */
#define PTE_P    (1ull << 0)
#define PTE_W    (1ull << 1)
#define PTE_U    (1ull << 2)
#define PTE_PS   (1ull << 7) /* PDPTE/PDE: maps a 1 GiB/2 MiB page */
#define PTE_NX   (1ull << 63)
#define PTE_ADDR 0x000ffffffffff000ull

#define X86_CR0_WP (1ull << 16) /* ring 0 honours R/W (SDM Vol. 3A 2.5) */
#define EFER_NX    (1ull << 11) /* EFER.NXE: bit 63 of paging entries is NX */

struct hpt_layout {
    uint64_t top;                  /* identity map [0, top), rounded up to 1 GiB */
    uint64_t text_start, text_end; /* R X; 4 KiB aligned */
    uint64_t ro_start, ro_end;     /* R NX; 4 KiB aligned, not overlapping text */
    bool has_1g;                   /* CPUID 0x80000001 EDX[26] */
    bool has_nx;                   /* CPUID 0x80000001 EDX[20]: else no NX bit is set */
};

struct hpt_ops {
    void *ctx;
    /* a zeroed 4 KiB page and its physical address in *pa; NULL when out */
    void *(*alloc_page)(void *ctx, uint64_t *pa);
    void *(*pa_to_va)(void *ctx, uint64_t pa);
};

/* Build the tables; 0 and *cr3 (the PML4's address), or -12 (out of pages), -22 (layout). */
int hpt_build(const struct hpt_layout *l, const struct hpt_ops *ops, uint64_t *cr3)
    __attribute__((warn_unused_result));

/* what one linear address gets, walked as the CPU walks */
struct hpt_access {
    bool present, write, exec;
    unsigned level; /* of the leaf: 3 = 1 GiB, 2 = 2 MiB, 1 = 4 KiB */
    uint64_t pa;
};
/* nxe: EFER.NXE; wp: CR0.WP (without it ring 0 may write every page) */
struct hpt_access hpt_lookup(const struct hpt_ops *ops, uint64_t cr3, uint64_t va, bool nxe,
                             bool wp);
/* true when no leaf reachable from cr3 is both writable and executable in ring 0 */
bool hpt_wx_free(const struct hpt_ops *ops, uint64_t cr3, bool nxe, bool wp);

/* ---- the VMM's use (vmm/host/paging_hw.c) ---- */

/* Build the VMM's tables for [0, top) and its own image; the CR3 value, 0 on failure. */
uint64_t host_paging_build(uint64_t top);
/* the host EFER / CR0 the tables need, from the values the VMM starts with */
uint64_t host_paging_efer(uint64_t efer);
uint64_t host_paging_cr0(uint64_t cr0);

/* PTV_VMCALL_SELFCHECK: the live host page tables (CR3) map no page both
 * writable and executable.  checkable() is false where the walk cannot run. */
bool host_paging_checkable(void);
bool host_paging_wx_free(void);

#endif
