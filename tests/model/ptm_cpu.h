/* SPDX-License-Identifier: MIT */
/*
 * Bare-metal reference for RDMSR/WRMSR of the Intel PT (RTIT) MSRs (test code only).
 *
 * What a real Intel CPU does on RDMSR/WRMSR of IA32_RTIT_* given the CPUID it shows, written
 * from the SDM alone (Vol. 3C "Intel Processor Trace": the MSR tables and CPUID leaf 14H; see
 * ptm_cpu.c for the citations).  It is the oracle of the differential test against the engine
 * (vmm/pt/pt_msr.c, pt_ctl_policy.c), so it shares no rule code with them: only the MSR and bit
 * names of pt/rtit.h.  The output side (ctl, status, output_base, output_mask_ptrs, trace
 * bytes) lives in the output model struct ptm (ptm.h).
 */
#ifndef PTV_TESTS_PTM_CPU_H
#define PTV_TESTS_PTM_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/ptm.h"

struct ptm_cpu_caps {      /* what CPUID shows this CPU */
    bool pt;               /* CPUID.(7,0):EBX[25] */
    uint32_t leaf14[2][4]; /* CPUID.(14H, 0/1): EAX, EBX, ECX, EDX */
    unsigned maxphyaddr;   /* CPUID.80000008H:EAX[7:0] */
    unsigned vaddr_bits;   /* linear-address width (48 or 57) for canonical checks */
};

struct ptm_cpu {
    struct ptm *pt; /* the output model (ctl, status, output_base, output_mask_ptrs live there) */
    struct ptm_cpu_caps caps;
    uint64_t cr3_match;
    uint64_t addr[4][2]; /* ADDRn_A, ADDRn_B */
};

/* Cold reset: every RTIT MSR 0 (OUTPUT_MASK_PTRS reads 0x7f); pt must be ptm_init()ed. */
void ptm_cpu_init(struct ptm_cpu *c, struct ptm *pt, const struct ptm_cpu_caps *caps);

/*
 * WRMSR: 0, or -1 for #GP (then nothing changed).  RTIT_CTL TraceEn 0->1 calls
 * ptm_enable(pt, val, pt->status, pt->output_base, pt->output_mask_ptrs); 1->0 calls ptm_disable
 * and then stores the rest of the value.
 */
int ptm_cpu_wrmsr(struct ptm_cpu *c, uint32_t msr, uint64_t val);

/* RDMSR: 0 with *val, or -1 for #GP. */
int ptm_cpu_rdmsr(const struct ptm_cpu *c, uint32_t msr, uint64_t *val);

/*
 * The CPU executes at (cpl, cr3, ip) and has packet pkt to write: the SDM's ContextEn/FilterEn
 * filtering (33.2.4) decides, STATUS bits 1:0 follow.  Returns 1 if the packet went to the
 * output model, 0 if filtered out (or TraceEn = 0).
 */
int ptm_cpu_exec(struct ptm_cpu *c, unsigned cpl, uint64_t cr3, uint64_t ip, const uint8_t *pkt,
                 size_t n, bool psb);

/* Every RTIT MSR index a CPU may have (SDM Vol. 4 table 2-2): 0x560-0x561, 0x570-0x572,
 * 0x580-0x587.  Tests iterate over it. */
#define PTM_NR_RTIT_MSRS 13
extern const uint32_t ptm_rtit_msrs[PTM_NR_RTIT_MSRS];

#endif
