/* SPDX-License-Identifier: MIT */
/*
 * Instructions that may fault in root and are answered by the host IDT's fix-up (desc.c):
 * a probed MSR, XSETBV of a value the CPU refuses.  Pure hardware touch; host tests link their
 * stand-ins instead (a fake MSR map with #GP injection).
 */
#include "host/desc.h"
#include "hw/cpu.h"
#include "hw/percpu.h"

int rdmsr_safe(uint32_t msr, uint64_t *val)
{
    uint32_t lo = 0, hi = 0;
    struct percpu *pc = this_cpu();
    pc->exc_fixup_hit = 0;
    asm volatile("1: rdmsr\n2:\n\t" EXTABLE_ENTRY(1b, 2b)
                 : "+a"(lo), "+d"(hi)
                 : "c"(msr)
                 : "memory");
    if (pc->exc_fixup_hit)
        return -1;
    *val = ((uint64_t)hi << 32) | lo;
    return 0;
}

int wrmsr_safe(uint32_t msr, uint64_t val)
{
    struct percpu *pc = this_cpu();
    pc->exc_fixup_hit = 0;
    asm volatile("1: wrmsr\n2:\n\t" EXTABLE_ENTRY(1b, 2b)::"c"(msr), "a"((uint32_t)val),
                 "d"((uint32_t)(val >> 32))
                 : "memory");
    return pc->exc_fixup_hit ? -1 : 0;
}

int xsetbv_safe(uint32_t index, uint64_t val)
{
    struct percpu *pc = this_cpu();
    pc->exc_fixup_hit = 0;
    asm volatile("1: xsetbv\n2:\n\t" EXTABLE_ENTRY(1b, 2b)::"c"(index), "a"((uint32_t)val),
                 "d"((uint32_t)(val >> 32))
                 : "memory");
    return pc->exc_fixup_hit ? -1 : 0;
}
