/* SPDX-License-Identifier: MIT */
/*
 * The hardware format of EPT paging-structure entries and of the EPTP, as
 * shift/mask macros (never bitfields).  Names follow Linux (asm/vmx.h).
 *
 * SDM Vol. 3C 28.2.2 "EPT Translation Mechanism", Tables 28-1..28-6.  (Section
 * numbers in vmm/ept/ are those of the 2016 SDM that pt-facts.md quotes; later
 * editions renumber the VMX chapters: search by title.)  4-level walk:
 *   level 4 PML4E (512 GiB each, never a leaf)
 *   level 3 PDPTE (1 GiB leaf if bit 7 = 1)
 *   level 2 PDE   (2 MiB leaf if bit 7 = 1)
 *   level 1 PTE   (4 KiB leaf)
 * A 5-level walk (EPT_VPID_CAP bit 7, ept_set_levels()) adds level 5, the
 * PML5E (256 TiB each, never a leaf), and translates GPA bits 56:0.
 */
#ifndef PTV_EPT_ENTRY_H
#define PTV_EPT_ENTRY_H

#include <stdint.h>

#define EPT_LEVELS         4 /* the default walk; struct ept.levels is 4 or 5 */
#define EPT_ENTRIES        512u
#define EPT_PAGE_SIZE      4096ull
#define EPT_LEVEL_SHIFT(l) (12u + 9u * ((unsigned)(l)-1u)) /* 12, 21, 30, 39 */
#define EPT_LEVEL_SIZE(l)  (1ull << EPT_LEVEL_SHIFT(l))    /* bytes mapped by one entry */
#define EPT_INDEX(gpa, l)  ((unsigned)(((gpa) >> EPT_LEVEL_SHIFT(l)) & (EPT_ENTRIES - 1u)))
#define EPT_GPA_BITS       48u /* a 4-level walk translates GPA bits 47:0 (5-level: 56:0) */

/* bits common to all entries */
#define VMX_EPT_READABLE_MASK   (1ull << 0)
#define VMX_EPT_WRITABLE_MASK   (1ull << 1)
#define VMX_EPT_EXECUTABLE_MASK (1ull << 2)
#define VMX_EPT_RWX_MASK        (7ull << 0)
/* leaf entries only */
#define VMX_EPT_MT_EPTE_SHIFT  3
#define VMX_EPT_MT_MASK        (7ull << VMX_EPT_MT_EPTE_SHIFT)
#define VMX_EPT_IPAT_BIT       (1ull << 6) /* ignore the guest PAT */
#define VMX_EPT_PAGE_SIZE_MASK (1ull << 7) /* PDPTE/PDE: 1 = leaf; reserved in PML4E */
#define VMX_EPT_ACCESS_BIT     (1ull << 8) /* only with EPTP A/D enable: unused here */
#define VMX_EPT_DIRTY_BIT      (1ull << 9)
/*
 * Bit 11 is ignored by the CPU in every EPT entry (SDM tables above).  ptvisor
 * sets it in every entry it creates, so "in use" does not depend on RWX: an
 * entry protected to RWX = 0 keeps its address and memory type (KVM uses the
 * same bit for its "MMU present" marker).
 */
#define EPT_SW_USED (1ull << 11)
/* physical address bits 51:12 (the CPU also requires bits above MAXPHYADDR = 0) */
#define EPT_ADDR_MASK 0x000ffffffffff000ull

/* EPTP (VMCS field EPT_POINTER), SDM Vol. 3C 24.6.11; pt-facts.md G.6 */
#define VMX_EPTP_MT_WB         6ull        /* paging structures WB (EPT_VPID_CAP bit 14) */
#define VMX_EPTP_PWL_4         (3ull << 3) /* page-walk length - 1 */
#define VMX_EPTP_PWL_5         (4ull << 3) /* 5-level walk (EPT_VPID_CAP bit 7) */
#define VMX_EPTP_AD_ENABLE_BIT (1ull << 6) /* not set: no accessed/dirty flags */

#endif
