/* SPDX-License-Identifier: MIT */
/*
 * Host tests' stand-in for vmm/hw/cpu_insn.h: the same wrappers on the fake machine of
 * tests/fakes/vmm_world.c.  A plain RDMSR/WRMSR that would #GP in root (no fix-up: the VMM would
 * crash) is counted in fake_root_faults, which the tests require to stay 0.
 */
#ifndef PTV_CPU_INSN_H
#define PTV_CPU_INSN_H

#include <stdint.h>
#include <stdbool.h>
#include "fakes/vmm_world.h"

static inline struct cpuid_regs cpuid_count(uint32_t leaf, uint32_t sub)
{
    struct cpuid_regs r;
    fake_cpuid(leaf, sub, &r);
    return r;
}

static inline uint64_t rdmsr(uint32_t msr)
{
    uint64_t v = 0;
    if (!fake_rdmsr(msr, &v)) {
        fake_root_faults++;
        fake_root_fault_msr = msr;
    }
    return v;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
    if (!fake_wrmsr(msr, v)) {
        fake_root_faults++;
        fake_root_fault_msr = msr;
    }
}

#define DEFINE_CR(n)                                                                               \
    static inline uint64_t read_cr##n(void)                                                        \
    {                                                                                              \
        return fake_cpu.cr##n;                                                                     \
    }                                                                                              \
    static inline void write_cr##n(uint64_t v)                                                     \
    {                                                                                              \
        fake_cpu.cr##n = v;                                                                        \
    }
DEFINE_CR(0)
DEFINE_CR(2)
DEFINE_CR(3)
DEFINE_CR(4)
#undef DEFINE_CR

static inline uint64_t read_dr0(void)
{
    return fake_cpu.dr0;
}

static inline uint64_t read_dr6(void)
{
    return fake_cpu.dr6;
}

static inline void write_dr6(uint64_t v)
{
    fake_cpu.dr6 = v;
}

static inline void write_dr0(uint64_t v)
{
    fake_cpu.dr0 = v;
}

static inline uint64_t read_dr7(void)
{
    return fake_cpu.dr7;
}

static inline uint64_t read_rflags(void)
{
    return fake_cpu.rflags;
}

static inline uint64_t rdtsc(void)
{
    return fake_cpu.tsc += 1000;
}

static inline void outb(uint16_t port, uint8_t v)
{
    fake_out(port, v, 1);
}

static inline uint8_t inb(uint16_t port)
{
    return (uint8_t)fake_in(port, 1);
}

static inline void outw(uint16_t port, uint16_t v)
{
    fake_out(port, v, 2);
}

#define DEFINE_SEL(name)                                                                           \
    static inline uint16_t read_##name(void)                                                       \
    {                                                                                              \
        return fake_cpu.name;                                                                      \
    }
DEFINE_SEL(es)
DEFINE_SEL(cs)
DEFINE_SEL(ss)
DEFINE_SEL(ds)
DEFINE_SEL(fs)
DEFINE_SEL(gs)
DEFINE_SEL(ldtr)
DEFINE_SEL(tr)
#undef DEFINE_SEL

static inline void sgdt(struct desc_ptr *p)
{
    fake_store_desc(0, p);
}

static inline void sidt(struct desc_ptr *p)
{
    fake_store_desc(1, p);
}

static inline void lidt(const struct desc_ptr *p)
{
    fake_load_desc(1, p);
}

static inline void load_gdt_segments(const struct desc_ptr *g, uint16_t cs, uint16_t ds,
                                     uint16_t tr)
{
    fake_load_desc(0, g);
    fake_cpu.cs = cs;
    fake_cpu.ss = fake_cpu.ds = fake_cpu.es = ds;
    fake_cpu.tr = tr;
}

static inline void sti(void)
{
    fake_cpu.irq_on = true;
}

static inline void wbinvd(void)
{
    fake_cpu.wbinvds++;
}

static inline void clflush_range(const void *va, uint64_t n)
{
    fake_cpu.clflushes += (n + 63) / 64;
}

static inline void cli(void)
{
    fake_cpu.irq_on = false;
}

static inline void pause(void) {}

static inline void nmi_unblock(void)
{
    fake_cpu.nmi_unblocks++;
}

static inline __attribute__((noreturn)) void halt_forever(void)
{
    fake_halt();
}

#endif
