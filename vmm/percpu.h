/* SPDX-License-Identifier: MIT */
/* Per-CPU identity.  This release virtualizes the BSP only; the id is kept in
 * one place so SMP can replace it with a per-CPU segment later. */
#ifndef PTV_PERCPU_H
#define PTV_PERCPU_H

extern unsigned ptv_cpu_id;
static inline unsigned this_cpu_id(void)
{
    return ptv_cpu_id;
}

#endif
