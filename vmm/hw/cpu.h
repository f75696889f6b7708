/* SPDX-License-Identifier: MIT */
/*
 * x86 registers, MSR numbers and control bits; the instructions themselves are in cpu_insn.h,
 * which host tests replace with a stand-in (a fake MSR map, CPUID table, registers).
 */
#ifndef PTV_CPU_H
#define PTV_CPU_H

#include <stdint.h>
#include <stdbool.h>

#define MSR_IA32_FEAT_CTL        0x0000003a
#define FEAT_CTL_LOCKED          (1ull << 0)
#define FEAT_CTL_VMX_INSIDE_SMX  (1ull << 1)
#define FEAT_CTL_VMX_OUTSIDE_SMX (1ull << 2)
#define MSR_IA32_SYSENTER_CS     0x00000174
#define MSR_IA32_SYSENTER_ESP    0x00000175
#define MSR_IA32_SYSENTER_EIP    0x00000176
#define MSR_IA32_APICBASE        0x0000001b
#define MSR_IA32_DEBUGCTLMSR     0x000001d9
#define MSR_IA32_CR_PAT          0x00000277
#define MSR_IA32_BIOS_SIGN_ID    0x0000008b /* microcode revision in [63:32] */
#define MSR_EFER                 0xc0000080
#define MSR_FS_BASE              0xc0000100
#define MSR_GS_BASE              0xc0000101
#define MSR_LSTAR                0xc0000082 /* SYSCALL target: the guest's (the VMM never uses it) */
#define EFER_LME                 (1ull << 8)
#define EFER_LMA                 (1ull << 10)

#define X86_CR0_PE      (1ull << 0)
#define X86_CR0_NE      (1ull << 5)
#define X86_CR0_PG      (1ull << 31)
#define X86_CR4_PAE     (1ull << 5)
#define X86_CR4_VMXE    (1ull << 13)
#define X86_CR4_OSXSAVE (1ull << 18)
#define X86_EFLAGS_IF   (1ull << 9)

struct cpuid_regs {
    uint32_t eax, ebx, ecx, edx;
};

struct __attribute__((packed)) desc_ptr {
    uint16_t limit;
    uint64_t base;
};

#include "hw/cpu_insn.h"

#endif
