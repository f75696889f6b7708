/* SPDX-License-Identifier: MIT */
/*
 * The simulated-CPU machinery shared by test_shootdown.c and test_ept_smp.c:
 * a seeded step scheduler (each simulated CPU a coroutine, exactly one running,
 * switched at every scheduling point) over an x86-TSO memory (a store buffer
 * per CPU), whose tso_* functions are what sd_tso.h turns the __atomic
 * builtins of the code under test into.  Outside the step model (before and
 * after a world runs, or with free-running pthreads) the tso_* functions are
 * the real builtins.
 *
 * Each test embeds a struct sim_cpu first in its own CPU struct, points
 * sim.cpu[] at them and fills sim.hooks with what differs between the tests.
 */
#ifndef PTV_TEST_SD_SIM_H
#define PTV_TEST_SD_SIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "fakes/sd_tso.h"

/* the code that includes this uses the real builtins */
#undef __atomic_load_n
#undef __atomic_store_n
#undef __atomic_exchange_n
#undef __atomic_add_fetch
#undef __atomic_compare_exchange_n
#undef __atomic_thread_fence

#define SIM_MAX_CPUS   4
#define SIM_SB_MAX     8
#define SIM_STACK_SIZE (256 * 1024)

struct sim_cpu {
    unsigned id;
    ucontext_t uc; /* step model: each CPU a coroutine */
    char *stack;
    struct {
        volatile void *p;
        unsigned size;
        uint64_t v;
    } sb[SIM_SB_MAX]; /* TSO store buffer, oldest first */
    unsigned sb_n;
    bool nmi_now, hung, finished;
};

struct sim_hooks {
    /* an NMI may be taken by c now; take it */
    bool (*deliverable)(struct sim_cpu *c);
    void (*deliver_nmi)(struct sim_cpu *c);
    /* optional: loads of p are no scheduling points */
    bool (*quiet_load)(const volatile void *p);
    /* optional: a store to p reached memory */
    void (*written)(const volatile void *p);
    /* optional: a scheduling point outside the step model (free-running threads) */
    void (*free_point)(struct sim_cpu *c);
    /* optional: a violation on c outside the step model; may not return */
    void (*bail)(struct sim_cpu *c);
};

extern struct sim_world {
    bool model;    /* the step scheduler runs the CPUs */
    bool final;    /* the end of a world: no scheduling points, no bail-outs */
    bool abort;    /* a violation was recorded */
    bool no_fence; /* mutation: seq_cst stores and fences lose their drain */
    unsigned n;
    struct sim_cpu *cpu[SIM_MAX_CPUS];
    struct sim_hooks hooks;
    ucontext_t main_uc;
    int running; /* the CPU that may run; -1: none left (main's turn) */
    uint64_t steps, max_steps, rng;
    unsigned switch_pct, drain_pct, nmi_pct;
    pthread_mutex_t mu; /* guards fail[] */
    char fail[320];
} sim;

/* the simulated CPU running (this thread, or coroutine); NULL: main */
extern __thread struct sim_cpu *sim_me;

static inline unsigned rnd(uint64_t *s, unsigned n)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (unsigned)(*s % n);
}

/* a new world on n CPUs: the scheduler's rng and its percentages drawn from *r */
void sim_reset(unsigned n, uint64_t *r, uint64_t max_steps);
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t sim_mem_read(const volatile void *p, unsigned size);
/* what the running CPU reads: its own buffered stores first */
uint64_t sim_own_read(const volatile void *p, unsigned size);
void sim_drain_all(struct sim_cpu *c);

/* Every atomic access and hook of the code under test comes here. */
void sched_point(bool yield);
/* switch from CPU c (NULL: main) to CPU next (-1: back to main) */
void sim_handoff(struct sim_cpu *c, int next);
/* a random CPU that can run, other than not; -1 if none */
int sim_pick_runnable(int not );
/* c runs fn(c->id) as a coroutine, back to main when it returns */
void sim_make_coroutine(struct sim_cpu *c, void (*fn)(int));
/* runs the CPUs from main until none is left to run (or a violation) */
void sim_run(void);
void sim_free_stacks(void);

#endif
