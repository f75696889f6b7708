/* SPDX-License-Identifier: MIT */
/* The step scheduler and x86-TSO memory of sd_sim.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakes/sd_sim.h"

struct sim_world sim = {.mu = PTHREAD_MUTEX_INITIALIZER};
__thread struct sim_cpu *sim_me;

void sim_reset(unsigned n, uint64_t *r, uint64_t max_steps)
{
    sim.model = sim.final = sim.abort = sim.no_fence = false;
    sim.fail[0] = 0;
    sim.n = n;
    sim.steps = 0;
    sim.rng = *r;
    sim.switch_pct = (unsigned[]){5, 20, 50}[rnd(r, 3)];
    sim.drain_pct = (unsigned[]){5, 20, 50}[rnd(r, 3)];
    sim.nmi_pct = (unsigned[]){10, 30, 60}[rnd(r, 3)];
    sim.max_steps = max_steps;
}

void violation(const char *fmt, ...)
{
    pthread_mutex_lock(&sim.mu);
    if (!sim.fail[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sim.fail, sizeof(sim.fail), fmt, ap);
        va_end(ap);
    }
    __atomic_store_n(&sim.abort, true, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&sim.mu);
    struct sim_cpu *c = sim_me;
    if (!c || sim.final)
        return;
    if (sim.model)
        sim_handoff(c, -1); /* straight back to main; this world is never resumed */
    if (sim.hooks.bail)
        sim.hooks.bail(c); /* pthreads: this thread gives up, the others follow */
}

/* ---- x86-TSO memory for the step model ---------------------------------- */

uint64_t sim_mem_read(const volatile void *p, unsigned size)
{
    return size == 4 ? *(const volatile uint32_t *)p : *(const volatile uint64_t *)p;
}

static void mem_write(volatile void *p, unsigned size, uint64_t v)
{
    if (size == 4)
        *(volatile uint32_t *)p = (uint32_t)v;
    else
        *(volatile uint64_t *)p = v;
    if (sim.hooks.written)
        sim.hooks.written(p);
}

static void drain_one(struct sim_cpu *c)
{
    mem_write(c->sb[0].p, c->sb[0].size, c->sb[0].v);
    memmove(&c->sb[0], &c->sb[1], --c->sb_n * sizeof(c->sb[0]));
}

void sim_drain_all(struct sim_cpu *c)
{
    while (c->sb_n)
        drain_one(c);
}

uint64_t sim_own_read(const volatile void *p, unsigned size)
{
    struct sim_cpu *me = sim_me;
    for (unsigned i = me ? me->sb_n : 0; i--;) /* own stores forward to own loads */
        if (me->sb[i].p == p)
            return me->sb[i].v;
    return sim_mem_read(p, size);
}

uint64_t tso_load(const volatile void *p, unsigned size)
{
    if (!sim.model || !sim_me)
        return size == 4 ? __atomic_load_n((const volatile uint32_t *)p, __ATOMIC_SEQ_CST)
                         : __atomic_load_n((const volatile uint64_t *)p, __ATOMIC_SEQ_CST);
    if (!sim.hooks.quiet_load || !sim.hooks.quiet_load(p))
        sched_point(false);
    return sim_own_read(p, size);
}

void tso_fence(int order)
{
    if (!sim.model || !sim_me) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return;
    }
    sched_point(false);
    /* acquire/release fences are free on x86; seq_cst is MFENCE / a locked op */
    if (order == __ATOMIC_SEQ_CST && !sim.no_fence)
        sim_drain_all(sim_me);
}

void tso_store(volatile void *p, unsigned size, uint64_t v, int order)
{
    if (!sim.model || !sim_me) {
        if (size == 4)
            __atomic_store_n((volatile uint32_t *)p, (uint32_t)v, __ATOMIC_SEQ_CST);
        else
            __atomic_store_n((volatile uint64_t *)p, v, __ATOMIC_SEQ_CST);
        return;
    }
    sched_point(false);
    struct sim_cpu *me = sim_me;
    if (me->sb_n == SIM_SB_MAX)
        drain_one(me);
    me->sb[me->sb_n].p = p;
    me->sb[me->sb_n].size = size;
    me->sb[me->sb_n++].v = v;
    if (order == __ATOMIC_SEQ_CST && !sim.no_fence) /* XCHG: a locked store */
        sim_drain_all(me);
}

uint64_t tso_rmw(volatile void *p, unsigned size, int op, uint64_t v)
{
    if (!sim.model || !sim_me) {
        if (size == 4)
            return op == TSO_XCHG
                       ? __atomic_exchange_n((volatile uint32_t *)p, (uint32_t)v, __ATOMIC_SEQ_CST)
                       : __atomic_add_fetch((volatile uint32_t *)p, (uint32_t)v, __ATOMIC_SEQ_CST);
        return op == TSO_XCHG ? __atomic_exchange_n((volatile uint64_t *)p, v, __ATOMIC_SEQ_CST)
                              : __atomic_add_fetch((volatile uint64_t *)p, v, __ATOMIC_SEQ_CST);
    }
    sched_point(false);
    sim_drain_all(sim_me); /* a locked instruction drains the store buffer on x86 */
    uint64_t old = sim_mem_read(p, size), nv = op == TSO_XCHG ? v : old + v;
    if (size == 4)
        nv = (uint32_t)nv;
    mem_write(p, size, nv);
    return op == TSO_XCHG ? old : nv;
}

bool tso_cas(volatile void *p, unsigned size, void *expected, uint64_t desired)
{
    if (!sim.model || !sim_me) {
        if (size == 4)
            return __atomic_compare_exchange_n((volatile uint32_t *)p, (uint32_t *)expected,
                                               (uint32_t)desired, false, __ATOMIC_SEQ_CST,
                                               __ATOMIC_SEQ_CST);
        return __atomic_compare_exchange_n((volatile uint64_t *)p, (uint64_t *)expected, desired,
                                           false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    sched_point(false);
    sim_drain_all(sim_me);
    uint64_t cur = sim_mem_read(p, size), exp = sim_mem_read(expected, size);
    if (cur == exp) {
        mem_write(p, size, desired);
        return true;
    }
    mem_write(expected, size, cur);
    return false;
}

/* ---- the step scheduler ------------------------------------------------- */

void sim_handoff(struct sim_cpu *c, int next)
{
    sim.running = next;
    swapcontext(c ? &c->uc : &sim.main_uc, next < 0 ? &sim.main_uc : &sim.cpu[next]->uc);
    sim_me = c;
}

int sim_pick_runnable(int not )
{
    int cand[SIM_MAX_CPUS], n = 0;
    for (unsigned i = 0; i < sim.n; i++)
        if (!sim.cpu[i]->finished && !sim.cpu[i]->hung && (int)i != not )
            cand[n++] = (int)i;
    return n ? cand[rnd(&sim.rng, (unsigned)n)] : -1;
}

void sched_point(bool yield)
{
    struct sim_cpu *c = sim_me;
    if (!c || sim.final)
        return;
    if (!sim.model) {
        if (sim.hooks.free_point)
            sim.hooks.free_point(c);
        return;
    }
    if (++sim.steps > sim.max_steps)
        violation("no progress after %llu steps: deadlock or livelock",
                  (unsigned long long)sim.steps);
    while (rnd(&sim.rng, 100) < sim.drain_pct) {
        struct sim_cpu *d = sim.cpu[rnd(&sim.rng, sim.n)];
        if (d->sb_n)
            drain_one(d);
    }
    if (rnd(&sim.rng, 100) < sim.nmi_pct) {
        struct sim_cpu *t = sim.cpu[rnd(&sim.rng, sim.n)];
        if (sim.hooks.deliverable(t))
            t->nmi_now = true;
    }
    int next = (int)c->id;
    if (yield || rnd(&sim.rng, 100) < sim.switch_pct) {
        int j = sim_pick_runnable(yield ? (int)c->id : -1);
        if (j >= 0)
            next = j;
    }
    if (next != (int)c->id)
        sim_handoff(c, next);
    if (c->nmi_now) {
        c->nmi_now = false;
        if (sim.hooks.deliverable(c))
            sim.hooks.deliver_nmi(c);
    }
}

/*
 * Coroutines instead of threads: ~5x faster than a baton passed between threads
 * and exactly as deterministic.  ASan prints one warning about swapcontext; no
 * coroutine longjmps or returns across stacks (a violation switches straight
 * to main and the world is dropped), which is where its false positives live.
 */
void sim_make_coroutine(struct sim_cpu *c, void (*fn)(int))
{
    c->stack = malloc(SIM_STACK_SIZE);
    assert_non_null(c->stack);
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = c->stack;
    c->uc.uc_stack.ss_size = SIM_STACK_SIZE;
    c->uc.uc_link = &sim.main_uc;
    makecontext(&c->uc, (void (*)(void))fn, 1, (int)c->id);
}

void sim_run(void)
{
    sim_handoff(NULL, sim_pick_runnable(-1));
}

void sim_free_stacks(void)
{
    for (unsigned i = 0; i < sim.n; i++)
        free(sim.cpu[i]->stack); /* a hung or failed CPU is abandoned: it holds nothing */
}
