/* SPDX-License-Identifier: MIT */
/*
 * this_cpu(): the one read of %gs the VMM makes (hw/percpu.h says why GS points at the CPU's
 * struct percpu).  Included by percpu.h after the struct; host tests put a stand-in for this
 * header ahead of it on the include path.
 */
#ifndef PTV_PERCPU_INSN_H
#define PTV_PERCPU_INSN_H

static inline struct percpu *this_cpu(void)
{
    struct percpu *p;
    asm volatile("mov %%gs:0, %0" : "=r"(p));
    return p;
}

#endif
