/* SPDX-License-Identifier: MIT */
/*
 * Cross-CPU EPT shootdown (the protocol and its rules: shootdown.h).  Every
 * access to shared state is an __atomic builtin, so the host tests can
 * interleave (and break) them one by one.
 */
#include "smp/shootdown.h"

void sd_init(struct shootdown *s, unsigned nr_cpus)
{
    __atomic_store_n(&s->lock.locked, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, 0, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < SMP_MAX_CPUS; i++) {
        struct sd_cpu *c = &s->cpu[i];
        __atomic_store_n(&c->state, SD_CPU_OFF, __ATOMIC_RELAXED);
        __atomic_store_n(&c->seen, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->ipi_owed, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->answered, 0, __ATOMIC_RELAXED);
    }
    s->nr_cpus = nr_cpus > SMP_MAX_CPUS ? SMP_MAX_CPUS : nr_cpus ? nr_cpus : 1;
    __atomic_store_n(&s->completed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->last_ticks, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->timeouts, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* seen = max(seen, g); true if this call raised it.  An NMI may interrupt us
 * between load and CAS and raise it further: never lower it back. */
static bool raise_seen(struct sd_cpu *c, uint64_t g)
{
    uint64_t old = __atomic_load_n(&c->seen, __ATOMIC_RELAXED);
    while (old < g)
        if (__atomic_compare_exchange_n(&c->seen, &old, g, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
            return true;
    return false;
}

void sd_catch_up(struct shootdown *s, unsigned self, const struct sd_ops *ops)
{
    struct sd_cpu *c = &s->cpu[self];
    /* acquire: the EPT stores of generation g are visible before we flush */
    uint64_t g = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&c->seen, __ATOMIC_RELAXED) >= g)
        return;
    /* INVEPT is serializing (SDM Vol. 3A, serializing instructions): it completes
     * before seen is published */
    ops->flush_local(ops->ctx);
    if (raise_seen(c, g))
        __atomic_add_fetch(&c->answered, 1, __ATOMIC_RELAXED);
}

void sd_relax(void *waiter)
{
    const struct sd_waiter *w = waiter;
    sd_catch_up(w->s, w->self, w->ops);
    w->ops->relax(w->ops->ctx);
}

void sd_set_state(struct shootdown *s, unsigned self, enum sd_cpu_state st,
                  const struct sd_ops *ops)
{
    __atomic_store_n(&s->cpu[self].state, (uint32_t)st, __ATOMIC_SEQ_CST);
    if (st != SD_CPU_ACTIVE)
        return;
    /* Dekker, this side: state stored, then gen read (pairs with sd_run) */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    sd_catch_up(s, self, ops);
}

bool sd_on_nmi(struct shootdown *s, unsigned self, const struct sd_ops *ops)
{
    /* read-modify-write: pairs with the initiator's xchg, so the gen read
     * below sees every generation whose NMI this one stands for */
    bool vmm = __atomic_exchange_n(&s->cpu[self].ipi_owed, 0, __ATOMIC_SEQ_CST) != 0;
    sd_catch_up(s, self, ops);
    return vmm;
}

/* must the initiator of generation g still wait for CPU i? */
static bool lagging(struct shootdown *s, unsigned i, uint64_t g)
{
    return __atomic_load_n(&s->cpu[i].state, __ATOMIC_SEQ_CST) == SD_CPU_ACTIVE &&
           __atomic_load_n(&s->cpu[i].seen, __ATOMIC_ACQUIRE) < g;
}

int sd_run(struct shootdown *s, unsigned self, const struct sd_ops *ops, uint64_t timeout_ticks,
           uint64_t *missing)
{
    struct sd_waiter w = {s, self, ops};
    spin_lock_relax(&s->lock, sd_relax, &w);
    uint64_t t0 = ops->now(ops->ctx);

    uint64_t g = __atomic_add_fetch(&s->gen, 1, __ATOMIC_SEQ_CST);
    /* Dekker, this side: gen bumped, then states read (pairs with sd_set_state) */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    ops->flush_local(ops->ctx);
    raise_seen(&s->cpu[self], g);

    uint64_t wait = 0;
    for (unsigned i = 0; i < s->nr_cpus; i++) {
        if (i == self || !lagging(s, i, g))
            continue;
        wait |= 1ull << i;
        /* one NMI in flight per target: if one is, its handler reads gen after
         * our xchg (same location, seq_cst) and so flushes for g too */
        if (__atomic_exchange_n(&s->cpu[i].ipi_owed, 1, __ATOMIC_SEQ_CST) == 0)
            ops->send_ipi(ops->ctx, i);
    }

    uint64_t now = t0;
    for (;;) {
        for (unsigned i = 0; i < s->nr_cpus; i++)
            if ((wait >> i & 1) && !lagging(s, i, g))
                wait &= ~(1ull << i);
        now = ops->now(ops->ctx);
        if (!wait || now - t0 >= timeout_ticks)
            break;
        sd_relax(&w);
    }

    __atomic_store_n(&s->last_ticks, now - t0, __ATOMIC_RELAXED);
    if (missing)
        *missing = wait;
    if (wait)
        __atomic_add_fetch(&s->timeouts, 1, __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&s->completed, 1, __ATOMIC_RELAXED);
    spin_unlock(&s->lock);
    return wait ? -1 : 0;
}
