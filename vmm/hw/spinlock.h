/* SPDX-License-Identifier: MIT */
/*
 * A test-and-test-and-set spinlock for VMX root (interrupts are off there).
 * Pure C11 atomics: compiles into the VMM and into host tests.  A waiter runs
 * relax() between tries, the hook where a CPU spinning in root still answers
 * EPT shootdown requests (vmm/smp/shootdown.h), so two CPUs can never wait on
 * each other.
 */
#ifndef PTV_SPINLOCK_H
#define PTV_SPINLOCK_H

#include <stdbool.h>
#include <stdint.h>

struct spinlock {
    volatile uint32_t locked;
};
#define SPINLOCK_INIT                                                                              \
    {                                                                                              \
        0                                                                                          \
    }

static inline bool spin_trylock(struct spinlock *l)
{
    return !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE);
}

static inline void spin_lock_relax(struct spinlock *l, void (*relax)(void *), void *ctx)
{
    while (!spin_trylock(l))
        while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED))
            if (relax)
                relax(ctx);
            else
                __builtin_ia32_pause();
}

static inline void spin_lock(struct spinlock *l)
{
    spin_lock_relax(l, 0, 0);
}

static inline void spin_unlock(struct spinlock *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif
