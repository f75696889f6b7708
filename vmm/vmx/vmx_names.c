/* SPDX-License-Identifier: MIT */
/* Exit reason and VM-instruction error names for logs and dumps. */
#include "hw/vmx.h"
#include <stddef.h>

static const char *const exit_reason_names[EXIT_REASON_MAX] = {
    [EXIT_REASON_EXCEPTION_NMI] = "EXCEPTION_NMI",
    [EXIT_REASON_EXTERNAL_INTERRUPT] = "EXTERNAL_INTERRUPT",
    [EXIT_REASON_TRIPLE_FAULT] = "TRIPLE_FAULT",
    [EXIT_REASON_INIT_SIGNAL] = "INIT_SIGNAL",
    [EXIT_REASON_SIPI_SIGNAL] = "SIPI_SIGNAL",
    [EXIT_REASON_INTERRUPT_WINDOW] = "INTERRUPT_WINDOW",
    [EXIT_REASON_NMI_WINDOW] = "NMI_WINDOW",
    [EXIT_REASON_TASK_SWITCH] = "TASK_SWITCH",
    [EXIT_REASON_CPUID] = "CPUID",
    [EXIT_REASON_GETSEC] = "GETSEC",
    [EXIT_REASON_HLT] = "HLT",
    [EXIT_REASON_INVD] = "INVD",
    [EXIT_REASON_INVLPG] = "INVLPG",
    [EXIT_REASON_RDPMC] = "RDPMC",
    [EXIT_REASON_RDTSC] = "RDTSC",
    [EXIT_REASON_RSM] = "RSM",
    [EXIT_REASON_VMCALL] = "VMCALL",
    [EXIT_REASON_VMCLEAR] = "VMCLEAR",
    [EXIT_REASON_VMLAUNCH] = "VMLAUNCH",
    [EXIT_REASON_VMPTRLD] = "VMPTRLD",
    [EXIT_REASON_VMPTRST] = "VMPTRST",
    [EXIT_REASON_VMREAD] = "VMREAD",
    [EXIT_REASON_VMRESUME] = "VMRESUME",
    [EXIT_REASON_VMWRITE] = "VMWRITE",
    [EXIT_REASON_VMOFF] = "VMXOFF",
    [EXIT_REASON_VMON] = "VMXON",
    [EXIT_REASON_CR_ACCESS] = "CR_ACCESS",
    [EXIT_REASON_DR_ACCESS] = "DR_ACCESS",
    [EXIT_REASON_IO_INSTRUCTION] = "IO_INSTRUCTION",
    [EXIT_REASON_MSR_READ] = "MSR_READ",
    [EXIT_REASON_MSR_WRITE] = "MSR_WRITE",
    [EXIT_REASON_INVALID_STATE] = "INVALID_STATE",
    [EXIT_REASON_MSR_LOAD_FAIL] = "MSR_LOAD_FAIL",
    [EXIT_REASON_MWAIT_INSTRUCTION] = "MWAIT",
    [EXIT_REASON_MONITOR_TRAP_FLAG] = "MONITOR_TRAP_FLAG",
    [EXIT_REASON_MONITOR_INSTRUCTION] = "MONITOR",
    [EXIT_REASON_PAUSE_INSTRUCTION] = "PAUSE",
    [EXIT_REASON_MCE_DURING_VMENTRY] = "MCE_DURING_VMENTRY",
    [EXIT_REASON_TPR_BELOW_THRESHOLD] = "TPR_BELOW_THRESHOLD",
    [EXIT_REASON_APIC_ACCESS] = "APIC_ACCESS",
    [EXIT_REASON_EOI_INDUCED] = "EOI_INDUCED",
    [EXIT_REASON_GDTR_IDTR] = "GDTR_IDTR",
    [EXIT_REASON_LDTR_TR] = "LDTR_TR",
    [EXIT_REASON_EPT_VIOLATION] = "EPT_VIOLATION",
    [EXIT_REASON_EPT_MISCONFIG] = "EPT_MISCONFIG",
    [EXIT_REASON_INVEPT] = "INVEPT",
    [EXIT_REASON_RDTSCP] = "RDTSCP",
    [EXIT_REASON_PREEMPTION_TIMER] = "PREEMPTION_TIMER",
    [EXIT_REASON_INVVPID] = "INVVPID",
    [EXIT_REASON_WBINVD] = "WBINVD",
    [EXIT_REASON_XSETBV] = "XSETBV",
    [EXIT_REASON_APIC_WRITE] = "APIC_WRITE",
    [EXIT_REASON_RDRAND] = "RDRAND",
    [EXIT_REASON_INVPCID] = "INVPCID",
    [EXIT_REASON_VMFUNC] = "VMFUNC",
    [EXIT_REASON_ENCLS] = "ENCLS",
    [EXIT_REASON_RDSEED] = "RDSEED",
    [EXIT_REASON_PML_FULL] = "PML_FULL",
    [EXIT_REASON_XSAVES] = "XSAVES",
    [EXIT_REASON_XRSTORS] = "XRSTORS",
};

const char *vmx_exit_reason_name(uint32_t reason)
{
    reason &= 0xffff;
    if (reason < EXIT_REASON_MAX && exit_reason_names[reason])
        return exit_reason_names[reason];
    return "UNKNOWN";
}

/* SDM Vol. 3C 31.4 "VM instruction error numbers" */
static const char *const insn_errors[] = {
    [0] = "no error",
    [1] = "VMCALL executed in VMX root operation",
    [2] = "VMCLEAR with invalid physical address",
    [3] = "VMCLEAR with VMXON pointer",
    [4] = "VMLAUNCH with non-clear VMCS",
    [5] = "VMRESUME with non-launched VMCS",
    [6] = "VMRESUME after VMXOFF",
    [7] = "VM entry with invalid control field(s)",
    [8] = "VM entry with invalid host-state field(s)",
    [9] = "VMPTRLD with invalid physical address",
    [10] = "VMPTRLD with VMXON pointer",
    [11] = "VMPTRLD with incorrect VMCS revision identifier",
    [12] = "VMREAD/VMWRITE from/to unsupported VMCS component",
    [13] = "VMWRITE to read-only VMCS component",
    [15] = "VMXON executed in VMX root operation",
    [16] = "VM entry with invalid executive-VMCS pointer",
    [17] = "VM entry with non-launched executive VMCS",
    [18] = "VM entry with executive-VMCS pointer not VMXON pointer",
    [19] = "VMCALL with non-clear VMCS",
    [20] = "VMCALL with invalid VM-exit control fields",
    [22] = "VMCALL with incorrect MSEG revision identifier",
    [23] = "VMXOFF under dual-monitor treatment of SMIs and SMM",
    [24] = "VMCALL with invalid SMM-monitor features",
    [25] = "VM entry with invalid VM-execution control fields in executive VMCS",
    [26] = "VM entry with events blocked by MOV SS",
    [28] = "Invalid operand to INVEPT/INVVPID",
};

const char *vmx_insn_error_name(uint32_t err)
{
    if (err < sizeof(insn_errors) / sizeof(insn_errors[0]) && insn_errors[err])
        return insn_errors[err];
    return "unknown VM-instruction error";
}
