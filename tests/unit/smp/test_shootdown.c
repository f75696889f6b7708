/* SPDX-License-Identifier: MIT */
/*
 * vmm/smp/shootdown.c against simulated CPUs.  Each CPU caches one translation
 * of a guest page (its "TLB": valid + the EPT version it was filled from);
 * INVEPT (flush_local) drops it.  The oracle:
 *  - no stale translation: a guest access never uses a translation older than
 *    the newest narrowing whose sd_run() returned 0, and when sd_run() returns
 *    0 no CPU that is ACTIVE holds one (so a CPU leaving WAIT_SIPI flushes
 *    before it runs guest code);
 *  - NMIs by count: per CPU, NMIs reflected to the guest never exceed the
 *    guest NMIs sent to it (no VMM NMI leaks to the guest), and equal them once
 *    all are delivered (none swallowed; the model does not coalesce NMIs),
 *    with no VMM NMI left owed;
 *  - no deadlock: a shootdown among responsive CPUs never times out, two
 *    initiators included, and a timeout names exactly the CPUs that hang.
 * Two drivers run the real code: a deterministic step scheduler (each
 * simulated CPU a thread, exactly one running, switched at every atomic
 * access, every hook and at random drains of an x86-TSO store buffer; see
 * sd_tso.h and sd_sim.h, shared with test_ept_smp.c), and free-running
 * pthreads with seeded random delays.  Mutations (broken fence, broken wiring,
 * broken NMI bookkeeping) are made through the model and the hooks, never in
 * shootdown.c, and each must be caught.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "smp/shootdown.h"
#include "fakes/sd_sim.h"

#define MAX_CPUS 4
#define MAX_ACTS 64
_Static_assert(MAX_CPUS <= SIM_MAX_CPUS, "fakes/sd_sim.h");

enum mutation {
    MUT_NONE,
    MUT_NOFENCE,         /* seq_cst stores and fences lose their store-buffer drain */
    MUT_SIPI_NO_CATCHUP, /* at SIPI: state stored as ACTIVE, guest entered, no catch-up */
    MUT_NMI_RESEND,      /* ipi_owed forgotten after the send: NMIs sent while one flies */
    MUT_NMI_SWALLOW,     /* the NMI handler ignores sd_on_nmi(): every NMI taken as the VMM's */
    MUT_LOCK_DEAF,       /* the EPT lock is spun on without answering (root NMIs blocked) */
    MUT_NR
};
static const char *const mut_name[MUT_NR] = {"none",
                                             "fence missing (Dekker)",
                                             "no catch-up at WAIT_SIPI->ACTIVE",
                                             "NMI sent while one in flight",
                                             "guest NMI swallowed",
                                             "EPT lock waiter deaf (two initiators)"};

enum act { A_START, A_GUEST, A_NARROW, A_INIT, A_GNMI, A_HANG };
enum mode { M_OFF, M_ACTIVE, M_WAIT_SIPI };

struct mcpu {
    struct sim_cpu s; /* first: id, coroutine, store buffer, hung, finished */
    struct sd_ops ops;
    pthread_t th;
    jmp_buf jb;
    uint64_t rng;
    bool tlb_valid;
    uint64_t tlb_ver;
    enum mode mode; /* harness truth, updated around sd_set_state() */
    bool in_guest, in_nmi, skip_poll;
    unsigned pending, guest_sent, reflected, ipis; /* NMIs to this CPU */
    unsigned nacts;
    uint8_t acts[MAX_ACTS];
};

static struct world {
    enum mutation mut;
    bool root_nmi_blocked, ept_lock;
    struct shootdown sd;
    struct spinlock eptlock;
    struct mcpu cpu[MAX_CPUS];
    uint64_t ept_ver, committed, runs_ok, runs_to, hung_mask, timeout;
    unsigned narrowing, overlaps; /* CPUs inside narrow(); times two were */
    bool end;
    unsigned progs_left;
} W; /* the step scheduler and the failure: sim (sd_sim.h) */

static struct mcpu *mcpu(struct sim_cpu *s)
{
    return (struct mcpu *)s;
}

/* ---- the simulated hardware --------------------------------------------- */

static void guest_access(struct mcpu *c)
{
    uint64_t committed = __atomic_load_n(&W.committed, __ATOMIC_SEQ_CST);
    if (c->tlb_valid && c->tlb_ver < committed)
        violation("cpu%u: guest used a translation of EPT v%llu after the narrowing to v%llu was "
                  "shot down",
                  c->s.id, (unsigned long long)c->tlb_ver, (unsigned long long)committed);
    if (!c->tlb_valid) {
        c->tlb_valid = true;
        c->tlb_ver = __atomic_load_n(&W.ept_ver, __ATOMIC_SEQ_CST);
    }
}

static bool deliverable(const struct mcpu *c)
{
    return c->mode == M_ACTIVE && !c->in_nmi && !c->s.hung &&
           (c->in_guest || !W.root_nmi_blocked) &&
           __atomic_load_n(&c->pending, __ATOMIC_SEQ_CST) > 0;
}

/* an NMI arrives: the VM exit (or root NMI handler) the VMM wires to sd_on_nmi() */
static void deliver_nmi(struct mcpu *c)
{
    __atomic_add_fetch(&c->pending, -1u, __ATOMIC_SEQ_CST);
    c->in_nmi = true;
    bool vmm = sd_on_nmi(&W.sd, c->s.id, &c->ops);
    if (W.mut == MUT_NMI_SWALLOW)
        vmm = true;
    if (!vmm && ++c->reflected > __atomic_load_n(&c->guest_sent, __ATOMIC_SEQ_CST))
        violation("cpu%u: NMI #%u reflected to the guest, which was sent %u: a VMM NMI leaked",
                  c->s.id, c->reflected, c->guest_sent);
    c->in_nmi = false;
    if (c->in_guest && !sim.final)
        sd_catch_up(&W.sd, c->s.id, &c->ops); /* the VM entry back into the guest */
}

/* a scheduling point with free-running pthreads */
static void pthread_point(struct sim_cpu *s)
{
    struct mcpu *c = mcpu(s);
    if (__atomic_load_n(&sim.abort, __ATOMIC_SEQ_CST))
        longjmp(c->jb, 1);
    unsigned r = rnd(&c->rng, 1000);
    if (r < 3)
        usleep(r * 20);
    else if (r < 60)
        sched_yield();
    else
        for (unsigned i = r % 32; i--;)
            __builtin_ia32_pause();
    if (deliverable(c) && rnd(&c->rng, 2))
        deliver_nmi(c);
}

static bool hk_deliverable(struct sim_cpu *s)
{
    return deliverable(mcpu(s));
}

static void hk_deliver_nmi(struct sim_cpu *s)
{
    deliver_nmi(mcpu(s));
}

static void hk_bail(struct sim_cpu *s)
{
    longjmp(mcpu(s)->jb, 1); /* pthreads: this thread gives up, the others follow */
}

static void h_send_ipi(void *ctx, unsigned cpu)
{
    struct mcpu *t = &W.cpu[cpu];
    __atomic_add_fetch(&t->ipis, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->pending, 1, __ATOMIC_SEQ_CST);
    if (W.mut == MUT_NMI_RESEND)
        tso_store(&W.sd.cpu[cpu].ipi_owed, 4, 0, __ATOMIC_SEQ_CST);
    sched_point(false);
}

static void h_flush(void *ctx)
{
    struct mcpu *c = ctx;
    if (sim.model)
        sim_drain_all(&c->s); /* INVEPT is serializing */
    c->tlb_valid = false;
    sched_point(false);
}

static uint64_t h_now(void *ctx)
{
    if (sim.model)
        return sim.steps;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void h_relax(void *ctx)
{
    sched_point(true);
}

/* ---- what each simulated CPU does --------------------------------------- */

static void guest_segment(struct mcpu *c)
{
    if (c->mode != M_ACTIVE)
        return;
    if (!c->skip_poll)
        sd_catch_up(&W.sd, c->s.id, &c->ops); /* the poll before VM entry */
    c->skip_poll = false;
    c->in_guest = true;
    for (unsigned i = 0; i < 3; i++) {
        guest_access(c);
        sched_point(false);
    }
    c->in_guest = false;
}

static void narrow(struct mcpu *c)
{
    if (c->mode != M_ACTIVE)
        return;
    struct sd_waiter w = {&W.sd, c->s.id, &c->ops};
    if (__atomic_add_fetch(&W.narrowing, 1, __ATOMIC_SEQ_CST) > 1)
        __atomic_add_fetch(&W.overlaps, 1, __ATOMIC_SEQ_CST);
    if (W.ept_lock)
        spin_lock_relax(&W.eptlock, W.mut == MUT_LOCK_DEAF ? NULL : sd_relax, &w);
    uint64_t v = __atomic_add_fetch(&W.ept_ver, 1, __ATOMIC_SEQ_CST); /* the EPT change */
    uint64_t missing = ~0ull;
    int r = sd_run(&W.sd, c->s.id, &c->ops, W.timeout, &missing);
    if (r == 0) {
        if (W.hung_mask)
            violation("cpu%u: sd_run returned 0 although CPUs %#llx never answer", c->s.id,
                      (unsigned long long)W.hung_mask);
        __atomic_add_fetch(&W.runs_ok, 1, __ATOMIC_SEQ_CST);
        uint64_t old = __atomic_load_n(&W.committed, __ATOMIC_SEQ_CST);
        while (old < v && !__atomic_compare_exchange_n(&W.committed, &old, v, false,
                                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        /* in the step model the others are stopped: check them all now */
        for (unsigned j = 0; sim.model && j < sim.n; j++) {
            struct mcpu *o = &W.cpu[j];
            if (o->mode == M_ACTIVE && o->tlb_valid && o->tlb_ver < v)
                violation("cpu%u: sd_run returned 0 while ACTIVE cpu%u holds EPT v%llu < v%llu",
                          c->s.id, j, (unsigned long long)o->tlb_ver, (unsigned long long)v);
        }
    } else {
        __atomic_add_fetch(&W.runs_to, 1, __ATOMIC_SEQ_CST);
        if (missing != W.hung_mask)
            violation("cpu%u: sd_run timed out, missing %#llx, CPUs that hang %#llx", c->s.id,
                      (unsigned long long)missing, (unsigned long long)W.hung_mask);
    }
    if (W.ept_lock)
        spin_unlock(&W.eptlock);
    __atomic_add_fetch(&W.narrowing, -1u, __ATOMIC_SEQ_CST);
}

static void init_sipi(struct mcpu *c)
{
    if (c->mode != M_ACTIVE)
        return;
    c->mode = M_WAIT_SIPI;
    sd_set_state(&W.sd, c->s.id, SD_CPU_WAIT_SIPI, &c->ops);
    for (unsigned i = 1 + rnd(&c->rng, 4); i--;)
        sched_point(false); /* waiting for the SIPI */
    if (W.mut == MUT_SIPI_NO_CATCHUP) {
        tso_store(&W.sd.cpu[c->s.id].state, 4, SD_CPU_ACTIVE, __ATOMIC_SEQ_CST);
        c->skip_poll = true;
    } else {
        sd_set_state(&W.sd, c->s.id, SD_CPU_ACTIVE, &c->ops);
    }
    c->mode = M_ACTIVE;
    guest_segment(c); /* the vCPU starts at the SIPI vector */
}

static void send_guest_nmi(struct mcpu *c)
{
    struct mcpu *t = &W.cpu[(c->s.id + 1 + rnd(&c->rng, sim.n - 1)) % sim.n];
    __atomic_add_fetch(&t->guest_sent, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->pending, 1, __ATOMIC_SEQ_CST);
}

static void *cpu_thread(void *arg)
{
    struct mcpu *c = arg;
    sim_me = &c->s;
    if (sim.model || !setjmp(c->jb)) {
        for (unsigned k = 0; k < c->nacts; k++) {
            switch (c->acts[k]) {
            case A_START:
                sd_set_state(&W.sd, c->s.id, SD_CPU_ACTIVE, &c->ops);
                c->mode = M_ACTIVE;
                break;
            case A_GUEST:
                guest_segment(c);
                break;
            case A_NARROW:
                narrow(c);
                break;
            case A_INIT:
                init_sipi(c);
                break;
            case A_GNMI:
                send_guest_nmi(c);
                break;
            case A_HANG: /* stops answering anything, state ACTIVE, until the end */
                c->s.hung = true;
                if (sim.model)
                    sim_handoff(&c->s, sim_pick_runnable(-1));
                else
                    while (!__atomic_load_n(&W.end, __ATOMIC_SEQ_CST))
                        usleep(100);
                return NULL;
            }
        }
        __atomic_add_fetch(&W.progs_left, -1u, __ATOMIC_SEQ_CST);
        /* idle in the guest, answering by NMI, until every program is done */
        sd_catch_up(&W.sd, c->s.id, &c->ops);
        c->in_guest = true;
        while (__atomic_load_n(&W.progs_left, __ATOMIC_SEQ_CST)) {
            guest_access(c);
            sched_point(true);
        }
        c->in_guest = false;
    }
    c->s.finished = true;
    if (sim.model)
        sim_handoff(&c->s, sim_pick_runnable(-1)); /* never resumed */
    return NULL;
}

static void cpu_coroutine(int i)
{
    cpu_thread(&W.cpu[i]);
}

struct scenario {
    uint64_t seed;
    unsigned n, acts;
    enum mutation mut;
    uint64_t hung_mask;
    bool model;
};

/* Runs one scenario; returns NULL or what failed.  *steps: scheduler steps. */
static const char *run_world(const struct scenario *sc, uint64_t *steps)
{
    uint64_t r = sc->seed * 0x9e3779b97f4a7c15ull + 1;
    memset(W.cpu, 0, sizeof(W.cpu));
    W.end = false;
    W.mut = sc->mut;
    W.hung_mask = sc->hung_mask;
    W.root_nmi_blocked = rnd(&r, 2) || sc->mut == MUT_LOCK_DEAF;
    W.ept_lock = rnd(&r, 2) || sc->mut == MUT_LOCK_DEAF;
    W.ept_ver = W.committed = W.runs_ok = W.runs_to = 0;
    W.narrowing = W.overlaps = 0;
    sim_reset(sc->n, &r, 400000);
    sim.no_fence = sc->mut == MUT_NOFENCE;
    sim.hooks = (struct sim_hooks){.deliverable = hk_deliverable,
                                   .deliver_nmi = hk_deliver_nmi,
                                   .free_point = pthread_point,
                                   .bail = hk_bail};
    /* steps in the model, ns with pthreads */
    W.timeout =
        sc->model ? (sc->hung_mask ? 3000 : 20000) : (sc->hung_mask ? 200000000ull : 2000000000ull);
    W.eptlock.locked = 0;
    sd_init(&W.sd, sc->n);
    W.progs_left = 0;
    static const uint8_t mix[] = {A_GUEST,  A_GUEST, A_GUEST, A_NARROW,
                                  A_NARROW, A_INIT,  A_INIT,  A_GNMI};
    for (unsigned i = 0; i < sc->n; i++) {
        struct mcpu *c = &W.cpu[i];
        c->s.id = i;
        sim.cpu[i] = &c->s;
        c->rng = r + i * 7919 + 1;
        c->ops = (struct sd_ops){c, h_send_ipi, h_flush, h_now, h_relax};
        if (sc->hung_mask >> i & 1) { /* ACTIVE from the start, then silent */
            sd_set_state(&W.sd, i, SD_CPU_ACTIVE, &c->ops);
            c->mode = M_ACTIVE;
            c->acts[c->nacts++] = A_HANG;
            continue;
        }
        W.progs_left++;
        c->acts[c->nacts++] = A_START;
        for (unsigned k = 1 + rnd(&r, sc->acts); k--;)
            c->acts[c->nacts++] = mix[rnd(&r, sizeof(mix))];
    }
    sim.model = sc->model;
    if (sim.model) {
        for (unsigned i = 0; i < sc->n; i++)
            sim_make_coroutine(&W.cpu[i].s, cpu_coroutine);
        sim_run(); /* back when no CPU is left to run */
        W.end = true;
        sim_free_stacks(); /* hung ones are abandoned: they hold nothing */
    } else {
        for (unsigned i = 0; i < sc->n; i++)
            pthread_create(&W.cpu[i].th, NULL, cpu_thread, &W.cpu[i]);
        for (unsigned i = 0; i < sc->n; i++)
            if (!(sc->hung_mask >> i & 1))
                pthread_join(W.cpu[i].th, NULL);
        __atomic_store_n(&W.end, true, __ATOMIC_SEQ_CST);
        for (unsigned i = 0; i < sc->n; i++)
            if (sc->hung_mask >> i & 1)
                pthread_join(W.cpu[i].th, NULL);
    }
    *steps = sim.steps;

    /* the end: every CPU wakes (SIPI, un-hang), takes its pending NMIs, enters the guest */
    for (unsigned i = 0; i < sc->n; i++)
        sim_drain_all(&W.cpu[i].s);
    sim.model = false;
    sim.final = true;
    for (unsigned i = 0; i < sc->n && !sim.fail[0]; i++) {
        struct mcpu *c = &W.cpu[i];
        sim_me = &c->s;
        c->s.hung = false;
        if (c->mode != M_ACTIVE)
            sd_set_state(&W.sd, i, SD_CPU_ACTIVE, &c->ops);
        c->mode = M_ACTIVE;
        c->in_guest = true;
        while (c->pending)
            deliver_nmi(c);
        sd_catch_up(&W.sd, i, &c->ops);
        guest_access(c);
        if (c->reflected != c->guest_sent)
            violation("cpu%u: guest was sent %u NMIs, %u reflected to it", i, c->guest_sent,
                      c->reflected);
        if (W.sd.cpu[i].ipi_owed)
            violation("cpu%u: a VMM NMI is still owed with none in flight", i);
        if (sc->hung_mask >> i & 1 && c->ipis > 1)
            violation("cpu%u: %u NMIs sent to a CPU that never answered (one is in flight)", i,
                      c->ipis);
    }
    sim_me = NULL;
    if (!sim.fail[0] && (W.sd.completed != W.runs_ok || W.sd.timeouts != W.runs_to))
        violation("counters: completed %llu (runs %llu), timeouts %llu (runs %llu)",
                  (unsigned long long)W.sd.completed, (unsigned long long)W.runs_ok,
                  (unsigned long long)W.sd.timeouts, (unsigned long long)W.runs_to);
    return sim.fail[0] ? sim.fail : NULL;
}

/* ---- direct tests of the API -------------------------------------------- */

struct fake {
    unsigned flushes, ipis[SMP_MAX_CPUS];
    uint64_t t;
    struct shootdown *s;
    int nested_gen; /* flush_local bumps gen and catches up, as an NMI would */
};

static void f_ipi(void *ctx, unsigned cpu)
{
    ((struct fake *)ctx)->ipis[cpu]++;
}
static void f_flush(void *ctx);
static uint64_t f_now(void *ctx)
{
    return ((struct fake *)ctx)->t++;
}
static void f_relax(void *ctx) {}

static void test_one_cpu(void **state)
{
    static struct shootdown s;
    struct fake f = {0};
    struct sd_ops ops = {&f, f_ipi, f_flush, f_now, f_relax};
    sd_init(&s, 1);
    sd_set_state(&s, 0, SD_CPU_ACTIVE, &ops);
    assert_int_equal(f.flushes, 0); /* nothing to catch up with */
    uint64_t missing = 1;
    assert_int_equal(sd_run(&s, 0, &ops, 10, &missing), 0);
    assert_int_equal(missing, 0);
    assert_int_equal(f.flushes, 1);
    assert_int_equal(f.ipis[0], 0);
    assert_int_equal(s.completed, 1);
    assert_int_equal(s.last_ticks, 1);    /* the fake clock ticks once per now() */
    assert_false(sd_on_nmi(&s, 0, &ops)); /* nothing owed: the guest's */
}

static void test_timeout_and_nmi(void **state)
{
    static struct shootdown s;
    struct fake f = {0};
    struct sd_ops ops = {&f, f_ipi, f_flush, f_now, f_relax};
    sd_init(&s, 4);
    for (unsigned i = 0; i < 4; i++)
        sd_set_state(&s, i, SD_CPU_ACTIVE, &ops);
    sd_set_state(&s, 3, SD_CPU_WAIT_SIPI, &ops); /* never waited for */
    uint64_t missing = 0;
    assert_int_equal(sd_run(&s, 0, &ops, 50, &missing), -1);
    assert_int_equal(missing, 0x6);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.completed, 0);
    assert_true(s.last_ticks >= 50);
    assert_int_equal(f.ipis[1] + f.ipis[2] + f.ipis[3], 2);
    assert_int_equal(f.ipis[3], 0);
    /* cpu1 polls; cpu2 still silent: a second run sends no second NMI */
    sd_catch_up(&s, 1, &ops);
    assert_int_equal(s.cpu[1].answered, 1);
    assert_int_equal(sd_run(&s, 0, &ops, 50, &missing), -1);
    assert_int_equal(missing, 0x6); /* cpu1 lags again (new generation) */
    assert_int_equal(f.ipis[1], 1);
    assert_int_equal(f.ipis[2], 1);
    /* the NMIs arrive: the VMM's, not the guest's; the next ones are the guest's */
    assert_true(sd_on_nmi(&s, 1, &ops));
    assert_true(sd_on_nmi(&s, 2, &ops));
    assert_false(sd_on_nmi(&s, 2, &ops));
    assert_int_equal(s.cpu[2].seen, s.gen);
    assert_int_equal(s.cpu[2].answered, 1); /* two generations, one flush */
    /* cpu3 leaves WAIT_SIPI: it flushes before it runs guest code */
    unsigned before = f.flushes;
    sd_set_state(&s, 3, SD_CPU_ACTIVE, &ops);
    assert_int_equal(f.flushes, before + 1);
    assert_int_equal(s.cpu[3].seen, s.gen);
    assert_int_equal(sd_run(&s, 0, &ops, 50, &missing), -1); /* all lag again: fresh NMIs */
    assert_int_equal(missing, 0xe);
    for (unsigned i = 1; i < 4; i++)
        assert_true(sd_on_nmi(&s, i, &ops));
}

static void f_flush(void *ctx)
{
    struct fake *f = ctx;
    f->flushes++;
    if (f->nested_gen-- > 0) { /* an NMI between the flush and the publication of seen */
        __atomic_add_fetch(&f->s->gen, 1, __ATOMIC_SEQ_CST);
        struct sd_ops ops = {f, f_ipi, f_flush, f_now, f_relax};
        sd_catch_up(f->s, 1, &ops);
    }
}

static void test_seen_monotonic(void **state)
{
    static struct shootdown s;
    struct fake f = {.s = &s};
    struct sd_ops ops = {&f, f_ipi, f_flush, f_now, f_relax};
    sd_init(&s, 2);
    sd_set_state(&s, 1, SD_CPU_ACTIVE, &ops);
    s.gen = 1;
    f.nested_gen = 1;
    sd_catch_up(&s, 1, &ops); /* outer reads gen 1; the nested one raises seen to 2 */
    assert_int_equal(s.cpu[1].seen, 2);
    assert_int_equal(f.flushes, 2);
    assert_int_equal(s.cpu[1].answered, 1);
}

/* ---- the models ---------------------------------------------------------- */

static uint64_t seeds(uint64_t dflt)
{
    const char *e = getenv("SD_SEEDS");
    return e ? strtoull(e, NULL, 0) : dflt;
}

static void test_model_correct(void **state)
{
    uint64_t n = seeds(1000), steps = 0, runs = 0, to = 0, two = 0;
    for (uint64_t seed = 1; seed <= n; seed++) {
        struct scenario sc = {.seed = seed, .n = 2 + seed % 3, .acts = 8, .model = true};
        uint64_t st;
        const char *why = run_world(&sc, &st);
        if (why)
            fail_msg("step model, seed %llu, %u CPUs: %s", (unsigned long long)seed, sc.n, why);
        steps += st;
        runs += W.runs_ok;
        to += W.runs_to;
        two += W.overlaps > 0;
    }
    assert_int_equal(to, 0);
    printf("[ model ] %llu interleavings (seeded schedules, 2-4 CPUs), %llu steps, %llu "
           "shootdowns (two initiators at once in %llu schedules), all invariants held\n",
           (unsigned long long)n, (unsigned long long)steps, (unsigned long long)runs,
           (unsigned long long)two);
}

static void test_model_timeout(void **state)
{
    uint64_t n = seeds(1000) / 3, steps = 0, runs = 0;
    for (uint64_t seed = 1; seed <= n; seed++) {
        struct scenario sc = {.seed = seed, .n = 3 + seed % 2, .acts = 6, .model = true};
        sc.hung_mask = (seed >> 1) % ((1u << (sc.n - 1)) - 1) + 1; /* never all, never cpu0 */
        sc.hung_mask <<= 1;
        uint64_t st;
        const char *why = run_world(&sc, &st);
        if (why)
            fail_msg("timeout model, seed %llu, hung %#llx: %s", (unsigned long long)seed,
                     (unsigned long long)sc.hung_mask, why);
        steps += st;
        runs += W.runs_to;
    }
    assert_true(runs > 0);
    printf("[ model ] %llu timeout schedules: %llu timed-out shootdowns, missing mask exact\n",
           (unsigned long long)n, (unsigned long long)runs);
}

static void test_mutations(void **state)
{
    uint64_t n = seeds(1000);
    for (int m = MUT_NONE + 1; m < MUT_NR; m++) {
        uint64_t caught = 0, first = 0;
        const char *why1 = NULL;
        static char msg[256];
        for (uint64_t seed = 1; seed <= n; seed++) {
            struct scenario sc = {
                .seed = seed, .n = 2 + seed % 3, .acts = 8, .mut = (enum mutation)m, .model = true};
            uint64_t st;
            const char *why = run_world(&sc, &st);
            if (why && !caught++) {
                first = seed;
                snprintf(msg, sizeof(msg), "%s", why);
                why1 = msg;
            }
        }
        printf("[ mutant] %-40s caught in %5llu/%llu schedules (first: seed %llu: %s)\n",
               mut_name[m], (unsigned long long)caught, (unsigned long long)n,
               (unsigned long long)first, why1 ? why1 : "-");
        if (!caught)
            fail_msg("mutation '%s' was not caught", mut_name[m]);
    }
}

static void test_pthreads(void **state)
{
    uint64_t n = seeds(1000) / 100 + 4, runs = 0;
    for (uint64_t seed = 1; seed <= n; seed++) {
        struct scenario sc = {.seed = seed, .n = 2 + seed % 3, .acts = MAX_ACTS - 2};
        uint64_t st;
        const char *why = run_world(&sc, &st);
        if (why)
            fail_msg("pthreads, seed %llu, %u CPUs: %s", (unsigned long long)seed, sc.n, why);
        runs += W.runs_ok;
    }
    struct scenario sc = {.seed = 7, .n = 3, .acts = 6, .hung_mask = 4};
    uint64_t st;
    const char *why = run_world(&sc, &st);
    if (why)
        fail_msg("pthreads with a hung CPU: %s", why);
    printf("[pthread] %llu free-running runs, %llu shootdowns, invariants held\n",
           (unsigned long long)n, (unsigned long long)runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_cpu),        cmocka_unit_test(test_timeout_and_nmi),
        cmocka_unit_test(test_seen_monotonic), cmocka_unit_test(test_model_correct),
        cmocka_unit_test(test_model_timeout),  cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_pthreads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
