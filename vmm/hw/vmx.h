/* SPDX-License-Identifier: MIT */
/*
 * VMX architectural names (Linux arch/x86/include/asm/vmx.h vocabulary,
 * SDM Vol. 3C ch. 25-28 and appendix A/C).  PT-specific control bits live in
 * vmm/pt/rtit.h.
 */
#ifndef PTV_VMX_VMX_H
#define PTV_VMX_VMX_H

#include <stdint.h>

/* capability MSRs (pt-facts G.2) */
#define MSR_IA32_VMX_BASIC               0x480
#define MSR_IA32_VMX_PINBASED_CTLS       0x481
#define MSR_IA32_VMX_PROCBASED_CTLS      0x482
#define MSR_IA32_VMX_EXIT_CTLS           0x483
#define MSR_IA32_VMX_ENTRY_CTLS          0x484
#define MSR_IA32_VMX_MISC                0x485
#define MSR_IA32_VMX_CR0_FIXED0          0x486
#define MSR_IA32_VMX_CR0_FIXED1          0x487
#define MSR_IA32_VMX_CR4_FIXED0          0x488
#define MSR_IA32_VMX_CR4_FIXED1          0x489
#define MSR_IA32_VMX_VMCS_ENUM           0x48a
#define MSR_IA32_VMX_PROCBASED_CTLS2     0x48b
#define MSR_IA32_VMX_EPT_VPID_CAP        0x48c
#define MSR_IA32_VMX_TRUE_PINBASED_CTLS  0x48d
#define MSR_IA32_VMX_TRUE_PROCBASED_CTLS 0x48e
#define MSR_IA32_VMX_TRUE_EXIT_CTLS      0x48f
#define MSR_IA32_VMX_TRUE_ENTRY_CTLS     0x490
#define MSR_IA32_VMX_VMFUNC              0x491
#define MSR_IA32_VMX_FIRST               MSR_IA32_VMX_BASIC
#define MSR_IA32_VMX_LAST                0x492
#define MSR_CORE_PERF_GLOBAL_CTRL        0x38f

#define VMX_BASIC_REVISION(b)    ((uint32_t)(b)&0x7fffffffu)
#define VMX_BASIC_REGION_SIZE(b) ((uint32_t)((b) >> 32) & 0x1fffu)
#define VMX_BASIC_32BIT_PHYS     (1ull << 48)
#define VMX_BASIC_MEM_TYPE(b)    ((unsigned)((b) >> 50) & 0xf)
#define VMX_BASIC_TRUE_CTLS      (1ull << 55)
#define VMX_MEMTYPE_WB           6

/* pin-based controls */
#define PIN_BASED_EXT_INTR_MASK (1u << 0)
#define PIN_BASED_NMI_EXITING   (1u << 3)
#define PIN_BASED_VIRTUAL_NMIS  (1u << 5)
#define PIN_BASED_PREEMPT_TIMER (1u << 6)
/* primary processor-based controls */
#define CPU_BASED_HLT_EXITING                 (1u << 7)
#define CPU_BASED_NMI_WINDOW_EXITING          (1u << 22)
#define CPU_BASED_CR3_LOAD_EXITING            (1u << 15)
#define CPU_BASED_CR3_STORE_EXITING           (1u << 16)
#define CPU_BASED_UNCOND_IO_EXITING           (1u << 24)
#define CPU_BASED_USE_IO_BITMAPS              (1u << 25)
#define CPU_BASED_MONITOR_TRAP_FLAG           (1u << 27)
#define CPU_BASED_USE_MSR_BITMAPS             (1u << 28)
#define CPU_BASED_ACTIVATE_SECONDARY_CONTROLS (1u << 31)
/* secondary processor-based controls */
#define SECONDARY_EXEC_ENABLE_EPT            (1u << 1)
#define SECONDARY_EXEC_ENABLE_RDTSCP         (1u << 3)
#define SECONDARY_EXEC_ENABLE_VPID           (1u << 5)
#define SECONDARY_EXEC_WBINVD_EXITING        (1u << 6)
#define SECONDARY_EXEC_UNRESTRICTED_GUEST    (1u << 7)
#define SECONDARY_EXEC_ENABLE_INVPCID        (1u << 12)
#define SECONDARY_EXEC_XSAVES                (1u << 20)
#define SECONDARY_EXEC_MODE_BASED_EPT_EXEC   (1u << 22)
#define SECONDARY_EXEC_ENABLE_USR_WAIT_PAUSE (1u << 26)
/* VM-exit controls */
#define VM_EXIT_SAVE_DEBUG_CONTROLS        (1u << 2)
#define VM_EXIT_HOST_ADDR_SPACE_SIZE       (1u << 9)
#define VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL (1u << 12)
#define VM_EXIT_SAVE_IA32_PAT              (1u << 18)
#define VM_EXIT_LOAD_IA32_PAT              (1u << 19)
#define VM_EXIT_SAVE_IA32_EFER             (1u << 20)
#define VM_EXIT_LOAD_IA32_EFER             (1u << 21)
/* VM-entry controls */
#define VM_ENTRY_LOAD_DEBUG_CONTROLS        (1u << 2)
#define VM_ENTRY_IA32E_MODE                 (1u << 9)
#define VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL (1u << 13)
#define VM_ENTRY_LOAD_IA32_PAT              (1u << 14)
#define VM_ENTRY_LOAD_IA32_EFER             (1u << 15)

/* EPT/VPID capabilities (IA32_VMX_EPT_VPID_CAP) */
#define VMX_EPT_PAGE_WALK_4_BIT           (1ull << 6)
#define VMX_EPTP_WB_BIT                   (1ull << 14)
#define VMX_EPT_2MB_PAGE_BIT              (1ull << 16)
#define VMX_EPT_1GB_PAGE_BIT              (1ull << 17)
#define VMX_EPT_INVEPT_BIT                (1ull << 20)
#define VMX_EPT_EXTENT_SINGLE_CONTEXT_BIT (1ull << 25)
#define VMX_EPT_EXTENT_GLOBAL_BIT         (1ull << 26)
#define VMX_VPID_INVVPID_BIT              (1ull << 32)
#define VMX_VPID_EXTENT_SINGLE_BIT        (1ull << 41)
#define VMX_VPID_EXTENT_ALL_BIT           (1ull << 42)
#define VMX_VPID_EXTENT_SINGLE_NONGLOBAL  (1ull << 43)

/* exit reasons (SDM Vol. 3D appendix C) */
#define EXIT_REASON_EXCEPTION_NMI       0
#define EXIT_REASON_EXTERNAL_INTERRUPT  1
#define EXIT_REASON_TRIPLE_FAULT        2
#define EXIT_REASON_INIT_SIGNAL         3
#define EXIT_REASON_SIPI_SIGNAL         4
#define EXIT_REASON_INTERRUPT_WINDOW    7
#define EXIT_REASON_NMI_WINDOW          8
#define EXIT_REASON_TASK_SWITCH         9
#define EXIT_REASON_CPUID               10
#define EXIT_REASON_GETSEC              11
#define EXIT_REASON_HLT                 12
#define EXIT_REASON_INVD                13
#define EXIT_REASON_INVLPG              14
#define EXIT_REASON_RDPMC               15
#define EXIT_REASON_RDTSC               16
#define EXIT_REASON_RSM                 17
#define EXIT_REASON_VMCALL              18
#define EXIT_REASON_VMCLEAR             19
#define EXIT_REASON_VMLAUNCH            20
#define EXIT_REASON_VMPTRLD             21
#define EXIT_REASON_VMPTRST             22
#define EXIT_REASON_VMREAD              23
#define EXIT_REASON_VMRESUME            24
#define EXIT_REASON_VMWRITE             25
#define EXIT_REASON_VMOFF               26
#define EXIT_REASON_VMON                27
#define EXIT_REASON_CR_ACCESS           28
#define EXIT_REASON_DR_ACCESS           29
#define EXIT_REASON_IO_INSTRUCTION      30
#define EXIT_REASON_MSR_READ            31
#define EXIT_REASON_MSR_WRITE           32
#define EXIT_REASON_INVALID_STATE       33
#define EXIT_REASON_MSR_LOAD_FAIL       34
#define EXIT_REASON_MWAIT_INSTRUCTION   36
#define EXIT_REASON_MONITOR_TRAP_FLAG   37
#define EXIT_REASON_MONITOR_INSTRUCTION 39
#define EXIT_REASON_PAUSE_INSTRUCTION   40
#define EXIT_REASON_MCE_DURING_VMENTRY  41
#define EXIT_REASON_TPR_BELOW_THRESHOLD 43
#define EXIT_REASON_APIC_ACCESS         44
#define EXIT_REASON_EOI_INDUCED         45
#define EXIT_REASON_GDTR_IDTR           46
#define EXIT_REASON_LDTR_TR             47
#define EXIT_REASON_EPT_VIOLATION       48
#define EXIT_REASON_EPT_MISCONFIG       49
#define EXIT_REASON_INVEPT              50
#define EXIT_REASON_RDTSCP              51
#define EXIT_REASON_PREEMPTION_TIMER    52
#define EXIT_REASON_INVVPID             53
#define EXIT_REASON_WBINVD              54
#define EXIT_REASON_XSETBV              55
#define EXIT_REASON_APIC_WRITE          56
#define EXIT_REASON_RDRAND              57
#define EXIT_REASON_INVPCID             58
#define EXIT_REASON_VMFUNC              59
#define EXIT_REASON_ENCLS               60
#define EXIT_REASON_RDSEED              61
#define EXIT_REASON_PML_FULL            62
#define EXIT_REASON_XSAVES              63
#define EXIT_REASON_XRSTORS             64
#define EXIT_REASON_MAX                 65
#define VMX_EXIT_REASONS_FAILED_VMENTRY (1u << 31)

/* interruption information (exit, IDT-vectoring, entry) */
#define INTR_INFO_VECTOR_MASK       0xffu
#define INTR_INFO_INTR_TYPE_MASK    0x700u
#define INTR_INFO_DELIVER_CODE      (1u << 11)
#define INTR_INFO_UNBLOCK_NMI       (1u << 12)
#define INTR_INFO_VALID             (1u << 31)
#define INTR_TYPE_EXT_INTR          (0u << 8)
#define INTR_TYPE_NMI_INTR          (2u << 8)
#define INTR_TYPE_HARD_EXCEPTION    (3u << 8)
#define INTR_TYPE_SOFT_INTR         (4u << 8)
#define INTR_TYPE_PRIV_SW_EXCEPTION (5u << 8)
#define INTR_TYPE_SOFT_EXCEPTION    (6u << 8)

#define GUEST_INTR_STATE_STI     (1u << 0)
#define GUEST_INTR_STATE_MOV_SS  (1u << 1)
#define GUEST_INTR_STATE_SMI     (1u << 2)
#define GUEST_INTR_STATE_NMI     (1u << 3)
#define GUEST_ACTIVITY_ACTIVE    0
#define GUEST_ACTIVITY_HLT       1
#define GUEST_ACTIVITY_SHUTDOWN  2
#define GUEST_ACTIVITY_WAIT_SIPI 3

/* EPT violation exit qualification */
#define EPT_VIOLATION_ACC_READ    (1ull << 0)
#define EPT_VIOLATION_ACC_WRITE   (1ull << 1)
#define EPT_VIOLATION_ACC_INSTR   (1ull << 2)
#define EPT_VIOLATION_X_SUPER     (1ull << 5) /* the GPA was executable (supervisor-mode, MBEC) */
#define EPT_VIOLATION_X_USER      (1ull << 6) /* ... for user-mode linear addresses (MBEC) */
#define EPT_VIOLATION_GLA_VALID   (1ull << 7)
#define EPT_VIOLATION_NMI_UNBLOCK (1ull << 12)

/* I/O instruction exit qualification (SDM Vol. 3C table "Exit Qualification for
 * I/O Instructions"): size - 1 in bits 2:0, IN, INS/OUTS, REP, port in 31:16 */
#define IO_QUAL_SIZE(q)   ((unsigned)((q)&7) + 1)
#define IO_QUAL_IN        (1ull << 3)
#define IO_QUAL_STRING    (1ull << 4)
#define IO_QUAL_REP       (1ull << 5)
#define IO_QUAL_IMM       (1ull << 6)
#define IO_QUAL_PORT(q)   ((uint16_t)((q) >> 16))
#define IO_BITMAP_A_PORTS 0x8000u /* bitmap A: ports 0-0x7fff, B: 0x8000-0xffff */

/* exception vectors */
#define DE_VECTOR  0
#define DB_VECTOR  1
#define NMI_VECTOR 2
#define BP_VECTOR  3
#define UD_VECTOR  6
#define DF_VECTOR  8
#define GP_VECTOR  13
#define PF_VECTOR  14
#define MC_VECTOR  18

/* segment access rights */
#define VMX_AR_UNUSABLE (1u << 16)
#define VMX_AR_L        (1u << 13) /* CS.L: 64-bit code segment */
#define VMX_AR_DB       (1u << 14) /* CS.D: 32-bit default operand size */

/* Adjust a control word to a capability MSR (pt-facts G.3):
 * result = (wanted | allowed0) & allowed1.  Returns 0, or -1 with *missing =
 * the required bits the CPU cannot set. */
int vmx_adjust_controls(uint64_t cap_msr, uint32_t required, uint32_t optional, uint32_t *out,
                        uint32_t *missing) __attribute__((warn_unused_result));
const char *vmx_exit_reason_name(uint32_t reason);
const char *vmx_insn_error_name(uint32_t err);

/* the memory operands of INVEPT and INVVPID (SDM Vol. 3C 30.3) */
struct invept_desc {
    uint64_t eptp, rsvd;
};
struct invvpid_desc {
    uint64_t vpid, lin;
};

#endif
