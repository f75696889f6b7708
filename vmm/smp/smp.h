/* SPDX-License-Identifier: MIT */
/*
 * The VMM's SMP shim: CPUs coming under the VMM, the EPT shootdown protocol of
 * vmm/smp/shootdown.c (pure, host-tested) bound to this machine -- NMI IPIs
 * through the local APIC, INVEPT, the TSC.
 */
#ifndef PTV_SMP_H
#define PTV_SMP_H

#include <stdbool.h>
#include <stdint.h>
#include "hw/percpu.h"
#include "smp/shootdown.h"

extern struct shootdown vmm_sd;

/* set-up on the BSP, before any CPU runs the guest; flush: what a shootdown runs on each CPU */
void smp_init(void (*flush)(void));
/* this CPU changes state (SD_CPU_ACTIVE when its vCPU is about to run guest code) */
void smp_set_state(enum sd_cpu_state st);
/* this CPU's state in the protocol (SD_CPU_WAIT_SIPI: its vCPU waits for a SIPI) */
enum sd_cpu_state smp_get_state(void);
/* an NMI reached this CPU: true if it was an EPT shootdown request (answered) */
bool smp_nmi(struct percpu *pc);
/* a hint, read without ordering: a shootdown generation this CPU has not seen yet
 * (the entry path's cheap test before smp_catch_up(); a miss costs only time: the
 * initiator's NMI still comes) */
static inline bool smp_behind(const struct percpu *pc)
{
    return __atomic_load_n(&vmm_sd.gen, __ATOMIC_RELAXED) !=
           __atomic_load_n(&vmm_sd.cpu[pc->id].seen, __ATOMIC_RELAXED);
}
/* answer a shootdown this CPU has not answered yet (before VM entry, spin loops) */
void smp_catch_up(void);
/* relax hook for spin loops in root: PAUSE, answering shootdowns */
void smp_relax(void *ctx);
/* INVEPT here and on every CPU running the guest; -1 with the CPUs that did not answer */
int smp_shootdown(uint64_t *missing);
/* CPUs under the VMM */
unsigned smp_online(void);

#endif
