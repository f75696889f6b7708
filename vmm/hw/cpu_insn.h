/* SPDX-License-Identifier: MIT */
/*
 * Thin wrappers around privileged x86 instructions (VMM only), included by hw/cpu.h after its
 * types.  The only part of cpu.h that touches the CPU: host tests put a stand-in for this header
 * ahead of it on the include path (tests/fakes/vmm/hw/cpu_insn.h).
 */
#ifndef PTV_CPU_INSN_H
#define PTV_CPU_INSN_H

#include <stdint.h>
#include <stdbool.h>

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

/* segment selectors, LDTR and TR as loaded now */
#define DEFINE_SEL(name, insn)                                                                     \
    static inline uint16_t read_##name(void)                                                       \
    {                                                                                              \
        uint16_t v = 0;                                                                            \
        asm volatile(insn : "=r"(v));                                                              \
        return v;                                                                                  \
    }
DEFINE_SEL(es, "mov %%es, %0")
DEFINE_SEL(cs, "mov %%cs, %0")
DEFINE_SEL(ss, "mov %%ss, %0")
DEFINE_SEL(ds, "mov %%ds, %0")
DEFINE_SEL(fs, "mov %%fs, %0")
DEFINE_SEL(gs, "mov %%gs, %0")
DEFINE_SEL(ldtr, "sldt %0")
DEFINE_SEL(tr, "str %0")
#undef DEFINE_SEL

static inline void sgdt(struct desc_ptr *p)
{
    asm volatile("sgdt %0" : "=m"(*p));
}

static inline void sidt(struct desc_ptr *p)
{
    asm volatile("sidt %0" : "=m"(*p));
}

static inline void lidt(const struct desc_ptr *p)
{
    asm volatile("lidt %0" ::"m"(*p));
}

/* LGDT, CS reloaded by a far return, SS/DS/ES = ds, then LTR tr */
static inline __attribute__((always_inline)) void
load_gdt_segments(const struct desc_ptr *g, uint16_t cs, uint16_t ds, uint16_t tr)
{
    uint64_t tmp;
    asm volatile("lgdt %1\n\t"
                 "pushq %2\n\t"
                 "leaq 1f(%%rip), %0\n\t"
                 "pushq %0\n\t"
                 "lretq\n"
                 "1:\n\t"
                 "mov %w3, %%ss\n\t"
                 "mov %w3, %%ds\n\t"
                 "mov %w3, %%es\n\t"
                 "ltr %w4"
                 : "=&r"(tmp)
                 : "m"(*g), "i"(cs), "r"((uint32_t)ds), "r"((uint32_t)tr)
                 : "memory");
}

static inline void sti(void)
{
    asm volatile("sti");
}

static inline void wbinvd(void)
{
    asm volatile("wbinvd" ::: "memory");
}

/* write back the cache lines of [va, va + n) and wait for it (MFENCE) */
static inline void clflush_range(const void *va, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += 64)
        asm volatile("clflush %0" ::"m"(*((const volatile char *)va + off)));
    asm volatile("mfence" ::: "memory");
}

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
