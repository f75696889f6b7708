/* SPDX-License-Identifier: MIT */
/*
 * The instructions the in-guest checks execute, each wrapped so that a #UD,
 * #GP or #PF it raises is caught (trap.h) and returned as a vector number
 * instead of taking down the guest.
 */
#ifndef PTV_GUEST_X86_H
#define PTV_GUEST_X86_H

#include <stdint.h>

#include "trap.h"

struct cpuid_regs {
    uint32_t eax, ebx, ecx, edx;
};

static inline uint64_t cr3_read(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr3, %0" : "=r"(v));
    return v;
}

static inline void cr3_write(uint64_t v)
{
    __asm__ volatile("mov %0, %%cr3" ::"r"(v) : "memory");
}

static inline struct cpuid_regs cpuid(uint32_t leaf, uint32_t subleaf)
{
    struct cpuid_regs r;
    __asm__ volatile("cpuid"
                     : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx)
                     : "a"(leaf), "c"(subleaf));
    return r;
}

/* RDMSR; returns TRAP_NONE and the value, or the vector it raised. */
static inline int rdmsr_trap(uint32_t msr, uint64_t *val)
{
    uint32_t lo = 0, hi = 0;
    trap_arm();
    __asm__ volatile(TRAP_INSN("rdmsr") : "+a"(lo), "+d"(hi) : "c"(msr) : "memory");
    *val = ((uint64_t)hi << 32) | lo;
    return trap_disarm();
}

static inline int wrmsr_trap(uint32_t msr, uint64_t val)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("wrmsr")::"c"(msr), "a"((uint32_t)val), "d"((uint32_t)(val >> 32))
                     : "memory");
    return trap_disarm();
}

/* VMCALL with the ptvisor ABI (include/ptv/vmcall.h): RAX = function, RBX/RCX/RDX; the trace
 * calls also answer in RSI..R10 (clobbered here), and R8 (TRACE_START's budget) is not set. */
struct vmcall_regs {
    uint64_t rax, rbx, rcx, rdx;
};

/* a VMCALL with every register the VMCALL ABI uses (include/ptv/vmcall.h: RAX..RDI, R8..R10,
 * in and out); no trap catcher: the trace calls never fault */
struct vmcall6 {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, r8, r9, r10;
};

static inline void vmcall6(struct vmcall6 *r)
{
    register uint64_t r8 __asm__("r8") = r->r8;
    register uint64_t r9 __asm__("r9") = r->r9;
    register uint64_t r10 __asm__("r10") = r->r10;
    __asm__ volatile("vmcall"
                     : "+a"(r->rax), "+b"(r->rbx), "+c"(r->rcx), "+d"(r->rdx), "+S"(r->rsi),
                       "+D"(r->rdi), "+r"(r8), "+r"(r9), "+r"(r10)::"memory");
    r->r8 = r8;
    r->r9 = r9;
    r->r10 = r10;
}

static inline int vmcall_trap(struct vmcall_regs *r)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("vmcall")
                     : "+a"(r->rax), "+b"(r->rbx), "+c"(r->rcx), "+d"(r->rdx)::"rsi", "rdi", "r8",
                       "r9", "r10", "memory");
    return trap_disarm();
}

/* One 8-byte load / store at a fixed address (identity-mapped under UEFI). */
static inline int load64_trap(uint64_t addr, uint64_t *val)
{
    uint64_t v = 0;
    trap_arm();
    __asm__ volatile(TRAP_INSN("movq (%%rdx), %%rax") : "+a"(v) : "d"(addr) : "memory");
    *val = v;
    return trap_disarm();
}

static inline int store64_trap(uint64_t addr, uint64_t val)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("movq %%rax, (%%rdx)")::"a"(val), "d"(addr) : "memory");
    return trap_disarm();
}

/* Jump to addr; returns the vector its fetch raised (a fetch that does not
 * fault runs whatever is there: use only where a fault is the expected outcome). */
static inline int fetch_trap(uint64_t addr)
{
    uint64_t scratch;
    trap_arm();
    __asm__ volatile(TRAP_JUMP("%[addr]") : [scratch] "=&r"(scratch) : [addr] "r"(addr) : "memory");
    return trap_disarm();
}

static inline int xgetbv_trap(uint32_t xcr, uint64_t *val)
{
    uint32_t lo = 0, hi = 0;
    trap_arm();
    __asm__ volatile(TRAP_INSN("xgetbv") : "+a"(lo), "+d"(hi) : "c"(xcr) : "memory");
    *val = ((uint64_t)hi << 32) | lo;
    return trap_disarm();
}

static inline int xsetbv_trap(uint32_t xcr, uint64_t val)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("xsetbv")::"c"(xcr), "a"((uint32_t)val), "d"((uint32_t)(val >> 32))
                     : "memory");
    return trap_disarm();
}

static inline int wbinvd_trap(void)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("wbinvd")::: "memory");
    return trap_disarm();
}

static inline int invd_trap(void)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("invd")::: "memory");
    return trap_disarm();
}

static inline int vmxoff_trap(void)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("vmxoff")::: "cc", "memory");
    return trap_disarm();
}

static inline int ud2_trap(void)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("ud2")::: "memory");
    return trap_disarm();
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t read_cr4(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr4, %0" : "=r"(v));
    return v;
}

static inline uint64_t read_cr3(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr3, %0" : "=r"(v));
    return v;
}

static inline int write_cr3_trap(uint64_t v)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("movq %%rax, %%cr3")::"a"(v) : "memory");
    return trap_disarm();
}

static inline int write_cr4_trap(uint64_t v)
{
    trap_arm();
    __asm__ volatile(TRAP_INSN("movq %%rax, %%cr4")::"a"(v) : "memory");
    return trap_disarm();
}

static inline void write_cr4(uint64_t v)
{
    __asm__ volatile("mov %0, %%cr4" ::"r"(v) : "memory");
}

#endif
