/* SPDX-License-Identifier: MIT */
/*
 * The SMP shim (smp.h): the pure shootdown protocol (shootdown.c) bound to the
 * local APIC, INVEPT and the TSC.  Nothing here decides anything about
 * ordering; that is the protocol's, tested on the host with simulated CPUs.
 */
#include "smp/smp.h"
#include "hw/cpu.h"
#include "hw/lapic.h"
#include "base/log.h"

#define ICR_BUSY_POLLS 100000u
/* how long an initiator waits for the others' INVEPT: ~0.3 s at 3 GHz */
#define SHOOTDOWN_TIMEOUT (1ull << 30)

struct shootdown vmm_sd;
static volatile uint32_t nr_online;

/* bounded: a wedged ICR costs a lost IPI (the shootdown then times out), never a hang */
static void icr_wait_idle(volatile uint32_t *apic)
{
    for (unsigned i = 0; i < ICR_BUSY_POLLS && (apic[LAPIC_ICR_LO / 4] & ICR_DELIVERY_BUSY); i++)
        pause();
}

/*
 * An NMI IPI to a CPU.  In xAPIC mode the VMM shares the guest's ICR: the guest
 * may have written ICR-high and not yet ICR-low when it exited, so ICR-high is
 * put back afterwards (x2APIC: one 64-bit write, nothing to restore).
 */
static void send_nmi(void *ctx, unsigned cpu)
{
    const struct percpu *t = &percpu_area[cpu];
    uint64_t base = rdmsr(MSR_IA32_APICBASE);
    if (base & LAPIC_BASE_EXTD) {
        wrmsr(X2APIC_ICR, (uint64_t)t->x2apic_id << 32 | ICR_DM_NMI | ICR_LEVEL_ASSERT);
        return;
    }
    volatile uint32_t *apic = lapic_xapic(base);
    icr_wait_idle(apic); /* a guest IPI still on its way: let it go first */
    uint32_t hi = apic[LAPIC_ICR_HI / 4];
    apic[LAPIC_ICR_HI / 4] = t->apic_id << 24;
    apic[LAPIC_ICR_LO / 4] = ICR_DM_NMI | ICR_LEVEL_ASSERT;
    icr_wait_idle(apic);
    apic[LAPIC_ICR_HI / 4] = hi;
}

/* what a shootdown asks of every CPU: set once by smp_init (INVEPT of the guest's EPT) */
static void (*flush_action)(void);

static void flush_local(void *ctx)
{
    flush_action();
}

static uint64_t now(void *ctx)
{
    return rdtsc();
}

static void relax(void *ctx)
{
    pause();
}

static const struct sd_ops ops = {
    .send_ipi = send_nmi, .flush_local = flush_local, .now = now, .relax = relax};

void smp_init(void (*flush)(void))
{
    flush_action = flush;
    sd_init(&vmm_sd, PTV_MAX_CPUS);
}

void smp_set_state(enum sd_cpu_state st)
{
    unsigned self = this_cpu_id();
    if (st == SD_CPU_ACTIVE && vmm_sd.cpu[self].state == SD_CPU_OFF)
        __atomic_add_fetch(&nr_online, 1, __ATOMIC_SEQ_CST);
    sd_set_state(&vmm_sd, self, st, &ops);
}

/* a CPU not (yet, or any more) in the protocol: no INVEPT there (it may not even
 * be in VMX operation: #UD); nobody waits for it, and it catches up when it
 * becomes ACTIVE */
static bool off(unsigned cpu)
{
    return __atomic_load_n(&vmm_sd.cpu[cpu].state, __ATOMIC_SEQ_CST) == SD_CPU_OFF;
}

enum sd_cpu_state smp_get_state(void)
{
    return __atomic_load_n(&vmm_sd.cpu[this_cpu_id()].state, __ATOMIC_SEQ_CST);
}

bool smp_nmi(struct percpu *pc)
{
    if (off(pc->id))
        return false; /* an NMI before its VM entry: the guest's, owed */
    bool ours = sd_on_nmi(&vmm_sd, pc->id, &ops);
    if (ours)
        pc->vmm_nmis++;
    return ours;
}

void smp_catch_up(void)
{
    unsigned self = this_cpu_id();
    if (!off(self))
        sd_catch_up(&vmm_sd, self, &ops);
}

void smp_relax(void *ctx)
{
    smp_catch_up();
    pause();
}

int smp_shootdown(uint64_t *missing)
{
    return sd_run(&vmm_sd, this_cpu_id(), &ops, SHOOTDOWN_TIMEOUT, missing);
}

unsigned smp_online(void)
{
    return nr_online;
}

_Static_assert(SMP_MAX_CPUS == PTV_MAX_CPUS, "one CPU limit for the VMM and the protocol");
