/* SPDX-License-Identifier: MIT */
/*
 * Force-included (-include) into test_shootdown only: every __atomic builtin
 * that vmm/smp/shootdown.c and spinlock.h use becomes a call into the test's
 * model (sd_sim.c, used by test_shootdown.c and test_ept_smp.c), which makes each one a scheduling
 * point and runs it against an x86-TSO memory (a store buffer per simulated CPU).  The real .c file
 * is compiled unchanged; only the meaning of the builtins changes. Outside the step model the calls
 * fall through to the real builtins.
 */
#ifndef PTV_TEST_SD_TSO_H
#define PTV_TEST_SD_TSO_H

#include <stdbool.h>
#include <stdint.h>

enum { TSO_XCHG, TSO_ADD };
uint64_t tso_load(const volatile void *p, unsigned size);
void tso_store(volatile void *p, unsigned size, uint64_t v, int order);
/* returns the old value for TSO_XCHG, the new one for TSO_ADD */
uint64_t tso_rmw(volatile void *p, unsigned size, int op, uint64_t v);
bool tso_cas(volatile void *p, unsigned size, void *expected, uint64_t desired);
void tso_fence(int order);

#define __atomic_load_n(p, m)     ((__typeof__(*(p) + 0))tso_load((p), sizeof(*(p))))
#define __atomic_store_n(p, v, m) tso_store((p), sizeof(*(p)), (uint64_t)(v), (m))
#define __atomic_exchange_n(p, v, m)                                                               \
    ((__typeof__(*(p) + 0))tso_rmw((p), sizeof(*(p)), TSO_XCHG, (uint64_t)(v)))
#define __atomic_add_fetch(p, v, m)                                                                \
    ((__typeof__(*(p) + 0))tso_rmw((p), sizeof(*(p)), TSO_ADD, (uint64_t)(v)))
#define __atomic_compare_exchange_n(p, e, d, w, s, f) tso_cas((p), sizeof(*(p)), (e), (uint64_t)(d))
#define __atomic_thread_fence(m)                      tso_fence(m)

#endif
