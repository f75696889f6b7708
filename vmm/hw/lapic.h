/* SPDX-License-Identifier: MIT */
/*
 * This CPU's local APIC as the VMM reaches it in root: it is the guest's (it passes through) and
 * never moves (IA32_APIC_BASE is virtualized, ARCHITECTURE 2.1), so its registers are found from
 * the real IA32_APIC_BASE: the xAPIC page, or in x2APIC mode MSR 0x800 + offset / 16 (SDM Vol. 3A
 * "x2APIC Register Address Space").  Used by the EPT shootdown's NMI IPI (smp/smp.c) and the PMU
 * shim (pmu/shim/pmu_vmx.c).
 */
#ifndef PTV_LAPIC_H
#define PTV_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/cpu.h"

#define LAPIC_BASE_EXTD (1ull << 10) /* IA32_APIC_BASE: x2APIC mode */
#define LAPIC_BASE_EN   (1ull << 11) /* IA32_APIC_BASE: the APIC is on */
#define LAPIC_ICR_LO    0x300
#define LAPIC_ICR_HI    0x310
#define LAPIC_LVT_PMC   0x340 /* LVT performance-counter entry */
#define X2APIC_ICR      0x830 /* the ICR in one 64-bit MSR */
#define X2APIC_SELF_IPI 0x83f
/* ICR bits (SDM Vol. 3A "Interrupt Command Register") */
#define ICR_DM_NMI        (4u << 8)
#define ICR_DELIVERY_BUSY (1u << 12)
#define ICR_LEVEL_ASSERT  (1u << 14) /* 1 for every delivery mode but INIT de-assert */
#define ICR_SELF          (1u << 18) /* destination shorthand "self" */

/* the xAPIC page of IA32_APIC_BASE value base (meaningful in xAPIC mode only) */
static inline volatile uint32_t *lapic_xapic(uint64_t base)
{
    return (volatile uint32_t *)(uintptr_t)(base & ~0xfffull & ((1ull << 52) - 1));
}

/* a 32-bit register by its xAPIC offset, in either mode; false: the APIC is off */
static inline bool lapic_read(unsigned off, uint32_t *val)
{
    uint64_t base = rdmsr(MSR_IA32_APICBASE);
    if (!(base & LAPIC_BASE_EN))
        return false;
    *val = base & LAPIC_BASE_EXTD ? (uint32_t)rdmsr(0x800 + off / 16) : lapic_xapic(base)[off / 4];
    return true;
}

static inline bool lapic_write(unsigned off, uint32_t val)
{
    uint64_t base = rdmsr(MSR_IA32_APICBASE);
    if (!(base & LAPIC_BASE_EN))
        return false;
    if (base & LAPIC_BASE_EXTD)
        wrmsr(0x800 + off / 16, val);
    else
        lapic_xapic(base)[off / 4] = val;
    return true;
}

#endif
