/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU state of the VMM.  In VMX root, GS.base points at this CPU's
 * struct percpu (HOST_GS_BASE in its VMCS; set by hand during start-up, after
 * the caller's GS.base was saved for the guest).  Nothing else in the VMM
 * uses GS, and the guest's GS.base lives in the VMCS, so the guest can never
 * point the VMM at another CPU's state.
 */
#ifndef PTV_PERCPU_H
#define PTV_PERCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <ptv/handoff.h> /* PTV_MAX_CPUS */

struct vcpu;
struct host_desc;

struct percpu {
    struct percpu *self; /* %gs:0 */
    unsigned id;         /* 0 = the BSP the loader ran on; APs by MP-services number */
    uint32_t apic_id;    /* xAPIC ID (CPUID.1:EBX[31:24]) */
    uint32_t x2apic_id;  /* CPUID.0BH:EDX (= apic_id where the leaf is absent) */
    bool bsp;            /* IA32_APIC_BASE.BSP */
    struct vcpu *vcpu;
    struct host_desc *desc; /* this CPU's GDT, TSS and IDT */
    uint64_t stack_top;     /* the exit loop's stack */
    uint64_t caller_gs_base;
    volatile uint32_t exc_fixup_hit;       /* a fixed-up #GP/#UD hit (rdmsr_safe...) */
    volatile uint32_t nmi_owed;            /* a guest NMI the VMM holds (vcpu_loop.c) */
    volatile uint64_t root_nmis, vmm_nmis; /* NMIs taken in root / that were the VMM's */
    volatile uint32_t root_nmi_pmu;        /* ROOT_NMI_*: NMIs taken in root since the last
                                            * entry, for the PMU rule there (vcpu_loop.c) */
};

#define ROOT_NMI_VMM   1u /* the VMM's own (a shootdown): a guest PMI may have merged in */
#define ROOT_NMI_GUEST 2u /* the guest's */

extern struct percpu percpu_area[PTV_MAX_CPUS];

/* this_cpu(): %gs:0 (percpu_insn.h, replaced by host tests' stand-in) */
#include "hw/percpu_insn.h"

static inline unsigned this_cpu_id(void)
{
    return this_cpu()->id;
}

#endif
