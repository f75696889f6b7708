/* SPDX-License-Identifier: MIT */
/*
 * Intel PT architectural names: RTIT MSRs, their bits, CPUID leaf 0x14 fields
 * and ToPA entry fields.  Sources: docs/pt-facts.md sections B, C, D
 * (SDM Vol. 3C ch. 33 "Intel Processor Trace"; Linux msr-index.h names).
 * Names only: no logic here.  Shared by the engine, the hardware model and tests.
 */
#ifndef PTV_PT_RTIT_H
#define PTV_PT_RTIT_H

#include <stdint.h>

#define PTV_BIT(n)                (1ull << (n))
#define PTV_FIELD(v, shift, mask) (((v) >> (shift)) & (mask))

/* MSRs (pt-facts B.1) */
#define MSR_IA32_RTIT_OUTPUT_BASE      0x560
#define MSR_IA32_RTIT_OUTPUT_MASK_PTRS 0x561
#define MSR_IA32_RTIT_CTL              0x570
#define MSR_IA32_RTIT_STATUS           0x571
#define MSR_IA32_RTIT_CR3_MATCH        0x572
#define MSR_IA32_RTIT_ADDR0_A          0x580 /* ADDRn_A = 0x580 + 2n, ADDRn_B = 0x581 + 2n */
#define MSR_IA32_RTIT_ADDR3_B          0x587
#define MSR_IA32_RTIT_ADDR_A(n)        (0x580u + 2u * (n))
#define MSR_IA32_RTIT_ADDR_B(n)        (0x581u + 2u * (n))
#define PT_MAX_ADDR_RANGES             4

#define MSR_IA32_PERF_GLOBAL_STATUS   0x38e
#define MSR_IA32_PERF_GLOBAL_OVF_CTRL 0x390
#define GLOBAL_STATUS_TRACE_TOPAPMI   PTV_BIT(55) /* pt-facts A.8 */

/* IA32_RTIT_CTL (pt-facts B.2) */
#define RTIT_CTL_TRACEEN          PTV_BIT(0)
#define RTIT_CTL_CYCLEACC         PTV_BIT(1)
#define RTIT_CTL_OS               PTV_BIT(2)
#define RTIT_CTL_USR              PTV_BIT(3)
#define RTIT_CTL_PWR_EVT_EN       PTV_BIT(4)
#define RTIT_CTL_FUP_ON_PTW       PTV_BIT(5)
#define RTIT_CTL_FABRIC_EN        PTV_BIT(6)
#define RTIT_CTL_CR3EN            PTV_BIT(7)
#define RTIT_CTL_TOPA             PTV_BIT(8)
#define RTIT_CTL_MTC_EN           PTV_BIT(9)
#define RTIT_CTL_TSC_EN           PTV_BIT(10)
#define RTIT_CTL_DISRETC          PTV_BIT(11)
#define RTIT_CTL_PTW_EN           PTV_BIT(12)
#define RTIT_CTL_BRANCH_EN        PTV_BIT(13)
#define RTIT_CTL_MTC_RANGE_SHIFT  14
#define RTIT_CTL_MTC_RANGE        (0xfull << 14)
#define RTIT_CTL_CYC_THRESH_SHIFT 19
#define RTIT_CTL_CYC_THRESH       (0xfull << 19)
#define RTIT_CTL_PSB_FREQ_SHIFT   24
#define RTIT_CTL_PSB_FREQ         (0xfull << 24)
#define RTIT_CTL_EVENT_EN         PTV_BIT(31)
#define RTIT_CTL_ADDR_SHIFT(n)    (32 + 4 * (n))
#define RTIT_CTL_ADDR(n)          (0xfull << RTIT_CTL_ADDR_SHIFT(n))
#define RTIT_CTL_NOTNT            PTV_BIT(55)
#define RTIT_CTL_INJ_PSB_PMI      PTV_BIT(56)
#define RTIT_ADDR_CFG_UNUSED      0
#define RTIT_ADDR_CFG_FILTER      1
#define RTIT_ADDR_CFG_STOP        2

/* IA32_RTIT_STATUS (pt-facts B.4) */
#define RTIT_STATUS_FILTEREN      PTV_BIT(0)
#define RTIT_STATUS_CONTEXTEN     PTV_BIT(1)
#define RTIT_STATUS_TRIGGEREN     PTV_BIT(2)
#define RTIT_STATUS_ERROR         PTV_BIT(4)
#define RTIT_STATUS_STOPPED       PTV_BIT(5)
#define RTIT_STATUS_PENDPSB       PTV_BIT(6)
#define RTIT_STATUS_PENDTOPAPMI   PTV_BIT(7)
#define RTIT_STATUS_BYTECNT_SHIFT 32
#define RTIT_STATUS_BYTECNT       (0x1ffffull << 32)

/* IA32_RTIT_OUTPUT_MASK_PTRS (pt-facts B.5) */
#define RTIT_MASK_LOWER               0x7full
#define RTIT_MASK_TABLE_OFFSET_SHIFT  7
#define RTIT_MASK_TABLE_OFFSET        (0x1ffffffull << 7) /* bits 31:7 */
#define RTIT_MASK_OUTPUT_OFFSET_SHIFT 32

/* CPUID leaf 0x14 (pt-facts C) */
#define CPUID_7_EBX_INTEL_PT        PTV_BIT(25)
#define PT_CPUID_LEAF               0x14
#define PT_CAP_EBX_CR3_FILTER       PTV_BIT(0)
#define PT_CAP_EBX_PSB_CYC          PTV_BIT(1)
#define PT_CAP_EBX_IP_FILTER        PTV_BIT(2)
#define PT_CAP_EBX_MTC              PTV_BIT(3)
#define PT_CAP_EBX_PTWRITE          PTV_BIT(4)
#define PT_CAP_EBX_POWER_EVENT      PTV_BIT(5)
#define PT_CAP_EBX_PSB_PMI_PRESERVE PTV_BIT(6)
#define PT_CAP_EBX_EVENT_TRACE      PTV_BIT(7)
#define PT_CAP_EBX_TNT_DISABLE      PTV_BIT(8)
#define PT_CAP_ECX_TOPA             PTV_BIT(0)
#define PT_CAP_ECX_TOPA_MULTI       PTV_BIT(1)
#define PT_CAP_ECX_SINGLE_RANGE     PTV_BIT(2)
#define PT_CAP_ECX_TRANSPORT        PTV_BIT(3)
#define PT_CAP_ECX_LIP              PTV_BIT(31)

/* ToPA entry (pt-facts D.1) */
#define TOPA_END              PTV_BIT(0)
#define TOPA_INT              PTV_BIT(2)
#define TOPA_STOP             PTV_BIT(4)
#define TOPA_SIZE_SHIFT       6
#define TOPA_SIZE_MASK        (0xfull << 6)
#define TOPA_RSVD_LOW         (PTV_BIT(1) | PTV_BIT(3) | PTV_BIT(5) | (0x3ull << 10))
#define TOPA_BASE_MASK(maxpa) ((((1ull << (maxpa)) - 1)) & ~0xfffull)
#define TOPA_REGION_SIZE(e)   (4096ull << PTV_FIELD((e), TOPA_SIZE_SHIFT, 0xf))

/* VMX capability bits the PT probe reads (pt-facts A.2, A.3) */
#define VMX_MISC_INTEL_PT             PTV_BIT(14)
#define SECONDARY_EXEC_PT_CONCEAL_VMX (1u << 19)
#define SECONDARY_EXEC_PT_USE_GPA     (1u << 24)
#define VM_EXIT_PT_CONCEAL_PIP        (1u << 24)
#define VM_EXIT_CLEAR_IA32_RTIT_CTL   (1u << 25)
#define VM_ENTRY_PT_CONCEAL_PIP       (1u << 17)
#define VM_ENTRY_LOAD_IA32_RTIT_CTL   (1u << 18)

#endif
