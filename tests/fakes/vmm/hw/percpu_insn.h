/* SPDX-License-Identifier: MIT */
/* Host tests' stand-in for vmm/hw/percpu_insn.h: this CPU is the test's (no %gs). */
#ifndef PTV_PERCPU_INSN_H
#define PTV_PERCPU_INSN_H

#include "fakes/vmm_world.h"

static inline struct percpu *this_cpu(void)
{
    return fake_this_cpu;
}

#endif
