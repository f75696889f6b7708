/* SPDX-License-Identifier: MIT */
/* Thin wrappers around privileged x86 instructions (VMM only). */
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

static inline struct cpuid_regs cpuid_count(uint32_t leaf, uint32_t sub)
{
    struct cpuid_regs r;
    asm volatile("cpuid"
                 : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx)
                 : "a"(leaf), "c"(sub));
    return r;
}

static inline uint64_t rdmsr(uint32_t msr)
{
    uint32_t lo, hi;
    asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
    return ((uint64_t)hi << 32) | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
    asm volatile("wrmsr" ::"c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}

#define DEFINE_CR(n)                                                                               \
    static inline uint64_t read_cr##n(void)                                                        \
    {                                                                                              \
        uint64_t v;                                                                                \
        asm volatile("mov %%cr" #n ", %0" : "=r"(v));                                              \
        return v;                                                                                  \
    }                                                                                              \
    static inline void write_cr##n(uint64_t v)                                                     \
    {                                                                                              \
        asm volatile("mov %0, %%cr" #n ::"r"(v) : "memory");                                       \
    }
DEFINE_CR(0)
DEFINE_CR(2)
DEFINE_CR(3)
DEFINE_CR(4)
#undef DEFINE_CR

static inline uint64_t read_dr0(void)
{
    uint64_t v;
    asm volatile("mov %%dr0, %0" : "=r"(v));
    return v;
}

static inline uint64_t read_dr6(void)
{
    uint64_t v;
    __asm__ volatile("mov %%dr6, %0" : "=r"(v));
    return v;
}

static inline void write_dr6(uint64_t v)
{
    __asm__ volatile("mov %0, %%dr6" ::"r"(v));
}

static inline void write_dr0(uint64_t v)
{
    asm volatile("mov %0, %%dr0" : : "r"(v));
}

static inline uint64_t read_dr7(void)
{
    uint64_t v;
    asm volatile("mov %%dr7, %0" : "=r"(v));
    return v;
}

static inline uint64_t read_rflags(void)
{
    uint64_t v;
    asm volatile("pushfq; popq %0" : "=r"(v));
    return v;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline void outb(uint16_t port, uint8_t v)
{
    asm volatile("outb %0, %1" ::"a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline void outw(uint16_t port, uint16_t v)
{
    asm volatile("outw %0, %1" ::"a"(v), "Nd"(port));
}

struct __attribute__((packed)) desc_ptr {
    uint16_t limit;
    uint64_t base;
};

static inline void cli(void)
{
    asm volatile("cli" ::: "memory");
}

static inline void pause(void)
{
    asm volatile("pause");
}

/*
 * IRET to the next instruction: ends the NMI blocking that a VM exit caused by
 * an NMI may leave in root (Bochs 2.7 keeps NMIs masked until an IRET; on
 * hardware it is harmless), so the next NMI IPI reaches this CPU.
 */
static inline void nmi_unblock(void)
{
    uint64_t tmp;
    asm volatile("mov %%rsp, %0\n\t"
                 "pushq $0\n\t"
                 "movw %%ss, (%%rsp)\n\t"
                 "pushq %0\n\t"
                 "pushfq\n\t"
                 "pushq $0\n\t"
                 "movw %%cs, (%%rsp)\n\t"
                 "leaq 1f(%%rip), %0\n\t"
                 "pushq %0\n\t"
                 "iretq\n"
                 "1:"
                 : "=&r"(tmp)
                 :
                 : "memory", "cc");
}

static inline __attribute__((noreturn)) void halt_forever(void)
{
    for (;;)
        asm volatile("cli; hlt");
}

#endif
