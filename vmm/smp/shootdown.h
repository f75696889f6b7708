/* SPDX-License-Identifier: MIT */
/*
 * Cross-CPU EPT shootdown: after a CPU narrows the one EPT all vCPUs share
 * (unmap, write-protect, memory-type change), every CPU must forget the
 * translations it cached before the VMM may rely on the change.  Each logical
 * processor caches guest-physical mappings derived from an EPTP and keeps them
 * across VM exits and entries (SDM Vol. 3C 28.4, caching of EPT translations);
 * INVEPT invalidates them on the executing processor only (28.4.3), so the
 * initiator asks the others with an NMI and waits for their answer.  Pure logic: no VMX
 * instruction, no MSR, no global state; the VMM provides struct sd_ops.  Compiles into the VMM and
 * into host tests unchanged.
 *
 * Protocol.  s->gen counts narrowings; cpu[i].seen is the highest generation
 * CPU i has flushed for (INVEPT executed after reading gen >= seen).  The
 * initiator bumps gen, flushes itself, and waits until every ACTIVE CPU has
 * seen >= gen.  Rules:
 *  - at most one VMM NMI in flight per target: ipi_owed is set by the one
 *    initiator whose xchg(ipi_owed, 1) returned 0 (and only it sends), and is
 *    cleared only by sd_on_nmi() when an NMI actually arrives, never by a poll
 *    (a poll that cleared it would leave the NMI in flight to be taken for
 *    the guest's);
 *  - NMIs carry no source, so the split is by count: an NMI arriving while
 *    ipi_owed is set is the VMM's.  If a guest NMI overtakes the VMM's (both
 *    pending as two NMIs), the guest's is consumed and the VMM's one, arriving
 *    later, is reflected instead: the guest gets as many NMIs as were sent to
 *    it, one of them slightly late.  The one known deviation is hardware NMI
 *    coalescing (SDM Vol. 3A 6.7.1, handling multiple NMIs: while NMIs are
 *    blocked at most one more is held pending): a guest NMI that merges with
 *    a VMM NMI in flight is lost, exactly as two NMIs merge on bare metal;
 *  - a CPU in WAIT_SIPI or OFF is never waited for (a vCPU in the
 *    wait-for-SIPI activity state has NMIs blocked, SDM Vol. 3C 25.4.2 / 26.6,
 *    so it could not answer; the NMI stays pending and is taken, as the VMM's,
 *    after the SIPI) and runs no guest code; it catches up before it
 *    runs guest code again.  Dekker ordering makes that sound: the initiator
 *    bumps gen, full fence, reads the states; a CPU entering ACTIVE stores its
 *    state, full fence, reads gen.  At least one of them sees the other: the
 *    initiator waits for it, or it flushes by itself;
 *  - a CPU in VMX root may have NMIs blocked (after an NMI-caused VM exit until
 *    the next VM entry or IRET), so root code answers by polling:
 *    sd_catch_up() before every VM entry and in every spin loop, including
 *    the lock waits (spin_lock_relax() with sd_relax()).  That is why two
 *    initiators cannot deadlock: each waits while answering the other;
 *  - sd_on_nmi() takes no lock and may interrupt any root code, sd_catch_up()
 *    and sd_run() included: seen only ever grows (compare-and-swap), since a
 *    seen lowered by the interrupted poll would make the initiator wait for a
 *    CPU that has flushed, has no NMI in flight and may not exit for long.
 */
#ifndef PTV_SMP_SHOOTDOWN_H
#define PTV_SMP_SHOOTDOWN_H

#include <stdbool.h>
#include <stdint.h>
#include "hw/spinlock.h"

#define SMP_MAX_CPUS 64

enum sd_cpu_state {
    SD_CPU_OFF = 0,       /* not in VMX (yet), or parked: not waited for */
    SD_CPU_ACTIVE = 1,    /* in VMX, running guest code or about to: must answer */
    SD_CPU_WAIT_SIPI = 2, /* its vCPU waits for SIPI (NMIs blocked): not waited for */
};

struct sd_ops {
    void *ctx;
    void (*send_ipi)(void *ctx, unsigned cpu); /* an NMI IPI to that CPU (VMM side) */
    void (*flush_local)(void *ctx);            /* INVEPT on the calling CPU (serializing) */
    uint64_t (*now)(void *ctx);                /* TSC */
    void (*relax)(void *ctx);                  /* PAUSE between polls */
};

struct sd_cpu {
    volatile uint32_t state;    /* enum sd_cpu_state, written by the CPU itself */
    volatile uint64_t seen;     /* highest generation this CPU flushed for */
    volatile uint32_t ipi_owed; /* 1: a VMM NMI to this CPU is in flight */
    volatile uint64_t answered; /* requests of other CPUs this CPU flushed for */
};

struct shootdown {
    struct spinlock lock;  /* one shootdown at a time */
    volatile uint64_t gen; /* generation requested */
    struct sd_cpu cpu[SMP_MAX_CPUS];
    unsigned nr_cpus;
    /* completed: sd_run() calls that returned 0; last_ticks: now() from the
     * lock taken to the end of the last sd_run(); timeouts: calls that returned -1 */
    volatile uint64_t completed, last_ticks, timeouts;
};

/* All CPUs OFF, generation 0.  nr_cpus 1..SMP_MAX_CPUS. */
void sd_init(struct shootdown *s, unsigned nr_cpus);

/*
 * CPU `self` changes state: OFF->ACTIVE when it enters VMX (after VMXON: the
 * catch-up may execute INVEPT), ACTIVE->WAIT_SIPI when its vCPU is put into
 * wait-for-SIPI, WAIT_SIPI->ACTIVE at the SIPI exit.  Entering ACTIVE
 * publishes the state, full fence, then catches up (flushes if a generation
 * passed while it was not ACTIVE), all before the caller runs guest code.
 */
void sd_set_state(struct shootdown *s, unsigned self, enum sd_cpu_state st,
                  const struct sd_ops *ops);

/*
 * Narrowing done by `self` (the EPT change is already stored): flush locally,
 * then make every other ACTIVE CPU flush: bump gen, send an NMI to each ACTIVE
 * CPU with seen < gen unless one is in flight, and wait until each of them has
 * seen >= gen or left ACTIVE, answering requests meanwhile.  Returns 0, or -1
 * after timeout_ticks with *missing (may be NULL) = the CPUs that did not
 * answer (s->timeouts++); those keep their NMI in flight (no second one is
 * sent).  With one CPU: local flush only.  Callers waiting for the EPT lock
 * must answer too (spin_lock_relax() with sd_relax()).
 */
int sd_run(struct shootdown *s, unsigned self, const struct sd_ops *ops, uint64_t timeout_ticks,
           uint64_t *missing) __attribute__((warn_unused_result));

/*
 * An NMI reached `self` (VM exit for NMI, or the root NMI handler): if a VMM
 * NMI was owed (xchg to 0) it was the VMM's: catch up, return true (do NOT
 * give it to the guest).  Otherwise catch up anyway (cheap) and return false:
 * the guest's NMI (or a host PMI: check the PMI status on every NMI, whatever
 * this returns, since a PMI can coalesce with a VMM NMI).
 */
bool sd_on_nmi(struct shootdown *s, unsigned self, const struct sd_ops *ops);

/*
 * Cheap poll, called before every VM entry and from every spin loop in root:
 * if seen < gen, flush and publish seen = gen (answered++ when this call
 * raised seen; every generation it meets was requested by another CPU).
 */
void sd_catch_up(struct shootdown *s, unsigned self, const struct sd_ops *ops);

/* spin_lock_relax() hook for root spin loops: sd_catch_up(), then ops->relax() */
struct sd_waiter {
    struct shootdown *s;
    unsigned self;
    const struct sd_ops *ops;
};
void sd_relax(void *waiter);

#endif
