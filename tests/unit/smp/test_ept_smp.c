/* SPDX-License-Identifier: MIT */
/*
 * The joint of vmm/ept/ept.c + ept_ondemand.c and vmm/smp/shootdown.c, wired
 * as vmm/vcpu/exit/exit_ept.c and exit_vmcall.c wire them, on two and three
 * simulated CPUs sharing ONE real struct ept + struct ept_od.
 *
 * The hardware model.  Table pages live in a host buffer (PA = PA_BASE + page
 * offset).  Each CPU has a TLB (translations) and a paging-structure cache
 * (pointers to the table pages its walks went through, SDM Vol. 3C 28.4);
 * a guest access uses a TLB entry, else walks from the deepest cached pointer
 * (so a stale pointer is always used when one exists), reading one 8-byte
 * entry per scheduling point from memory, and caches what it read.  INVEPT
 * (the CPU's flush_local) empties both.  Memory is x86-TSO (sd_sim.h;
 * sd_tso.h turns every __atomic builtin in shootdown.c, spinlock.h and ept.c into a
 * scheduling point with a per-CPU store buffer; ept.c's table stores come
 * through its ops.store hook into the same buffer).  NMI IPIs are delivered
 * at a later, scheduler-chosen step, at instruction boundaries only (never
 * inside a walk), to the VM exit that runs sd_on_nmi().
 *
 * The VMM model: a guest access that does not translate exits;
 * handle_ept_violation() under the EPT lock (waiters answer with sd_relax):
 * translated -> stale: INVEPT here + vmx_ept_sync(); else ept_od_fault() +
 * vmx_ept_sync(); PTV_VMCALL_EPT_DROP: ept_od_drop_all() + vmx_ept_sync();
 * a ToPA page write-protected or released (pt_vmx.c mem_set_wp(): ept_protect()
 * of one 4 KiB page in the identity map, which splits its 1 GiB / 2 MiB leaf
 * or merges it back, + vmx_ept_sync()); od->flush and ept.c's break-before-make
 * hook = vmx_ept_sync(); sd_catch_up() before every VM entry; INIT puts a
 * CPU in WAIT_SIPI, SIPI sets it ACTIVE.  vmx_ept_sync(): sd_run(), then
 * ept_flush_done() only when it returned 0.  A lookup may miss a TLB entry
 * the CPU holds (real TLBs keep page sizes in separate structures) and walk.
 *
 * Invariants, checked where they can change (every table store, every
 * walk read, every access, every return of vmx_ept_sync):
 *  1. a table page some ACTIVE CPU still caches a pointer to is never written
 *     for another purpose (filled or linked again once unreachable);
 *  2. once vmx_ept_sync() returned 0, no ACTIVE CPU holds a cached entry that
 *     a store made before it replaced, and none uses one later: a dropped
 *     on-demand map re-faults on every CPU; every translation is the identity;
 *  3. a CPU in WAIT_SIPI is not waited for (no timeout without a hung CPU)
 *     and flushes before its next access (2 covers its accesses);
 *  4. with a CPU that never answers, sd_run() times out naming it, retired
 *     pages stay retired (1 still holds) and nothing deadlocks (step bound);
 *  5. no CPU ever holds TLB entries of two page sizes for one GPA (a split or
 *     merge written in place lets a CPU hold both: the iTLB-multihit machine
 *     check), and a guest access in a break-before-make window is retried,
 *     never fatal.
 * Mutations of the wiring (never of vmm/ code) must each be caught.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "ept/ept_ondemand.h"
#include "ept/ept_entry.h"
#include "smp/shootdown.h"
#include "fakes/mtrr_ref.h"
#include "fakes/sd_sim.h"

#define MAX_CPUS 3
#define NPAGES   256
#define PA_BASE  0x80000000ull
#define NSLOTS   (NPAGES * EPT_ENTRIES)
#define NPS      24 /* paging-structure cache entries per CPU */
#define NTLB     16
#define MAX_ACTS 24
#define LOG_MAX  (1 << 16)
#define GiB(x)   ((uint64_t)(x) << 30)
#define MiB(x)   ((uint64_t)(x) << 20)
#define KiB(x)   ((uint64_t)(x) << 10)
#define FLOOR    GiB(4)
_Static_assert(MAX_CPUS <= SIM_MAX_CPUS, "fakes/sd_sim.h");

enum mutation {
    MUT_NONE,
    MUT_SYNC_LOCAL,     /* vmx_ept_sync: local INVEPT, then ept_flush_done(): no shootdown */
    MUT_SYNC_IGNORE_TO, /* vmx_ept_sync: ept_flush_done() although sd_run() timed out */
    MUT_OD_FLUSH_LOCAL, /* od->flush hook: local INVEPT + ept_flush_done() */
    MUT_SIPI_NO_POLL,   /* SIPI: ACTIVE stored plainly, no catch-up, no poll before entry */
    MUT_NO_ENTRY_POLL,  /* only the poll before VM entry skipped (vmx_run's smp_catch_up) */
    MUT_BBM_LOCAL,      /* ept.c's break-before-make hook: local INVEPT + ept_flush_done() */
    MUT_NR
};
static const char *const mut_name[MUT_NR] = {
    "none",
    "vmx_ept_sync flushes locally only",
    "vmx_ept_sync ignores a timed-out sd_run",
    "od_flush hook flushes locally only",
    "SIPI: no catch-up before guest code",
    "no sd_catch_up before VM entry (alone)",
    "break-before-make hook flushes locally only",
};

enum act { A_ACCESS, A_DROP, A_INIT, A_HANG, A_WP };
enum mode { M_OFF, M_ACTIVE, M_WAIT_SIPI };

/* a cached entry: the table slot it was read from and the store it read (-1: set-up) */
struct item {
    uint64_t *slot;
    int log;
};
struct ps_ent { /* entry at 'level' for GPAs with this prefix points to table 'child' */
    unsigned level;
    uint64_t prefix, child;
    struct item it;
};
struct tlb_ent {
    unsigned level;
    uint64_t base, hpa;
    struct item it;
};

struct mcpu {
    struct sim_cpu s; /* first: id, coroutine, store buffer, hung, finished */
    struct sd_ops ops;
    struct sd_waiter waiter;
    uint64_t rng;
    struct ps_ent ps[NPS];
    struct tlb_ent tlb[NTLB];
    unsigned nps, ntlb;
    enum mode mode; /* harness truth, set after sd_set_state() returns */
    bool in_guest, in_walk, in_nmi;
    unsigned pending, ipis;
    uint64_t last_flush;
    unsigned nacts;
    uint8_t acts[MAX_ACTS];
    unsigned long breaks_seen; /* W.e.nr_breaks at its last stale exit (exit_ept.c) */
};

struct pginfo {
    bool reach;     /* reachable from the root (issue order of the lock holder) */
    unsigned level; /* while reachable */
    unsigned lives; /* times it became reachable */
    uint64_t unlinked_at;
};

static struct world {
    enum mutation mut;
    bool root_nmi_blocked;
    bool reuse_only; /* the oracle without invariant 2: does invariant 1 alone catch it? */
    struct shootdown sd;
    struct spinlock lock; /* vm.ept_lock */
    struct mcpu cpu[MAX_CPUS];
    /* the table pool */
    uint8_t *arena;
    unsigned used;
    struct pginfo pg[NPAGES];
    struct ept e;
    struct ept_od od;
    struct mtrr_state mtrr;
    /* every table store that reached memory, per slot chained */
    int first_log[NSLOTS], last_log[NSLOTS];
    struct {
        unsigned slot;
        int next;
    } log[LOG_MAX];
    int nlog, committed; /* stores [0, committed) are covered by a vmx_ept_sync() == 0 */
    uint64_t hung_mask, timeout;
    /* figures */
    uint64_t syncs_ok, syncs_to, sipi_skipped, reuses, unlinks, accesses, walks, faults, drops,
        stale, enomem, wps, multihit_checks, bbm_retries;
    bool wp; /* the ToPA page below is write-protected */
    unsigned progs_left;
} W; /* the step scheduler and the failure: sim (sd_sim.h) */

static struct mcpu *mcpu(struct sim_cpu *s)
{
    return (struct mcpu *)s;
}

/* ---- table pool and the record of table stores --------------------------- */

static bool in_arena(uint64_t pa)
{
    return pa >= PA_BASE && pa < PA_BASE + (uint64_t)NPAGES * EPT_PAGE_SIZE;
}

static uint64_t *pa_va(uint64_t pa)
{
    return (uint64_t *)(W.arena + (pa - PA_BASE));
}

static void *h_alloc(void *ctx, uint64_t *pa)
{
    if (W.used == NPAGES)
        return NULL;
    *pa = PA_BASE + (uint64_t)W.used++ * EPT_PAGE_SIZE;
    memset(pa_va(*pa), 0, EPT_PAGE_SIZE);
    return pa_va(*pa);
}

static void *h_pa_to_va(void *ctx, uint64_t pa)
{
    return in_arena(pa) ? pa_va(pa) : NULL;
}

static bool slot_in_arena(const volatile void *p)
{
    return (const uint8_t *)p >= W.arena && (const uint8_t *)p < W.arena + NSLOTS * 8;
}

static unsigned slot_index(const volatile void *p)
{
    return (unsigned)(((const uint8_t *)p - W.arena) / 8);
}

/* a table store reached memory: every walker sees it from now on */
static void log_store(const volatile void *p)
{
    unsigned s = slot_index(p);
    if (W.nlog == LOG_MAX) {
        violation("store log full");
        return;
    }
    W.log[W.nlog].slot = s;
    W.log[W.nlog].next = -1;
    if (W.last_log[s] >= 0)
        W.log[W.last_log[s]].next = W.nlog;
    else
        W.first_log[s] = W.nlog;
    W.last_log[s] = W.nlog++;
}

/* the first store that replaced what the item read; -1 if none yet */
static int replaced_by(const struct item *it)
{
    return it->log < 0 ? W.first_log[slot_index(it->slot)] : W.log[it->log].next;
}

static bool stale_committed(const struct item *it)
{
    int r = replaced_by(it);
    return r >= 0 && r < W.committed;
}

/* sd_sim.h hooks: a table store reached memory; ept.c reads tables only under the
 * EPT lock, where only its own stores land: no scheduling point there (its
 * stores are, through h_store) */
static void hk_written(const volatile void *p)
{
    if (sim.model && slot_in_arena(p))
        log_store(p);
}

/* ---- invariant 1: table pages and who still points at them --------------- */

static bool is_table_ptr(uint64_t v, unsigned level)
{
    return (v & EPT_SW_USED) && level > 1 && (level >= 4 || !(v & VMX_EPT_PAGE_SIZE_MASK));
}

static unsigned page_of(uint64_t pa)
{
    return (unsigned)((pa - PA_BASE) / EPT_PAGE_SIZE);
}

/* page pg is about to serve another purpose: no ACTIVE CPU may still point at it */
static void check_reuse(unsigned pg, const char *how)
{
    uint64_t pa = PA_BASE + (uint64_t)pg * EPT_PAGE_SIZE;
    for (unsigned i = 0; i < sim.n; i++) {
        struct mcpu *c = &W.cpu[i];
        if (c->mode != M_ACTIVE) /* WAIT_SIPI: flushes before it runs (checked by 2) */
            continue;
        for (unsigned k = 0; k < c->nps; k++)
            if (c->ps[k].child == pa)
                violation("table page %u (life %u, unlinked at step %llu) %s while cpu%u%s still "
                          "caches a pointer to it (level-%u entry for GPA %#llx; its last "
                          "INVEPT at step %llu)",
                          pg, W.pg[pg].lives, (unsigned long long)W.pg[pg].unlinked_at, how, i,
                          c->s.hung ? " (hung)" : "", c->ps[k].level,
                          (unsigned long long)(c->ps[k].prefix << EPT_LEVEL_SHIFT(c->ps[k].level)),
                          (unsigned long long)c->last_flush);
    }
}

static void mark(unsigned pg, unsigned level, bool on)
{
    struct pginfo *p = &W.pg[pg];
    if (on) {
        if (!p->reach) {
            check_reuse(pg, "linked again");
            W.reuses += p->lives > 0;
            p->lives++;
        }
        p->level = level;
    } else {
        p->unlinked_at = sim.steps;
        W.unlinks++;
    }
    p->reach = on;
    uint64_t *t = pa_va(PA_BASE + (uint64_t)pg * EPT_PAGE_SIZE);
    for (unsigned i = 0; level > 1 && i < EPT_ENTRIES; i++) {
        uint64_t v = sim_own_read(&t[i], 8);
        if (is_table_ptr(v, level) && in_arena(v & EPT_ADDR_MASK))
            mark(page_of(v & EPT_ADDR_MASK), level - 1, on);
    }
}

/* ept.c's one store: tracks reachability, checks reuse, then a TSO store */
static void h_store(void *ctx, uint64_t *slot, uint64_t val)
{
    unsigned pg = slot_index(slot) / EPT_ENTRIES;
    struct pginfo *p = &W.pg[pg];
    uint64_t old = sim_own_read(slot, 8);
    /* a not-present word is the list link of a spare or retired page; any
     * other value in an unreachable page means it is being reused */
    if (!p->reach && (val & (VMX_EPT_RWX_MASK | EPT_SW_USED)))
        check_reuse(pg, "written");
    if (p->reach && old != val && is_table_ptr(old, p->level))
        mark(page_of(old & EPT_ADDR_MASK), p->level - 1, false);
    tso_store(slot, 8, val, __ATOMIC_RELEASE);
    if (p->reach && old != val && is_table_ptr(val, p->level))
        mark(page_of(val & EPT_ADDR_MASK), p->level - 1, true);
}

/* ---- the simulated CPU: TLB, paging-structure cache, walker -------------- */

static void cache_clear(struct mcpu *c)
{
    c->nps = c->ntlb = 0;
}

static void h_flush(void *ctx) /* INVEPT: serializing, forgets everything */
{
    struct mcpu *c = ctx;
    if (sim.model)
        sim_drain_all(&c->s);
    cache_clear(c);
    c->last_flush = sim.steps;
    sched_point(false);
}

/* a new entry replaces one for the same GPAs, else a free one, else a random one */
static void ps_insert(struct mcpu *c, const struct ps_ent *p)
{
    unsigned k = 0;
    while (k < c->nps && (c->ps[k].level != p->level || c->ps[k].prefix != p->prefix))
        k++;
    if (k == c->nps)
        k = c->nps < NPS ? c->nps++ : rnd(&sim.rng, NPS);
    c->ps[k] = *p;
}

static void tlb_insert(struct mcpu *c, const struct tlb_ent *t)
{
    unsigned k = 0;
    for (unsigned j = 0; j < c->ntlb; j++) {
        const struct tlb_ent *o = &c->tlb[j];
        uint64_t lo = o->base > t->base ? o->base : t->base;
        uint64_t oe = o->base + EPT_LEVEL_SIZE(o->level), te = t->base + EPT_LEVEL_SIZE(t->level);
        if (o->level != t->level && lo < (oe < te ? oe : te))
            violation("cpu%u holds a %s and a %s translation for GPA %#llx (iTLB multihit: "
                      "machine check): a page size changed with no invalidation between",
                      c->s.id, EPT_LEVEL_SIZE(o->level) >> 20 ? "large" : "4K",
                      EPT_LEVEL_SIZE(t->level) >> 20 ? "large" : "4K", (unsigned long long)lo);
    }
    W.multihit_checks += c->ntlb > 0;
    while (k < c->ntlb && (c->tlb[k].level != t->level || c->tlb[k].base != t->base))
        k++;
    if (k == c->ntlb)
        k = c->ntlb < NTLB ? c->ntlb++ : rnd(&sim.rng, NTLB);
    c->tlb[k] = *t;
}

static void use_item(struct mcpu *c, const struct item *it, const char *what, uint64_t gpa)
{
    if (!W.reuse_only && stale_committed(it))
        violation("cpu%u used a cached %s for GPA %#llx whose entry was replaced by store #%d, "
                  "covered by a vmx_ept_sync() that returned 0 (committed up to #%d)",
                  c->s.id, what, (unsigned long long)gpa, replaced_by(it), W.committed);
}

/* a guest access: true and *hpa, or false (EPT violation) */
static bool hw_access(struct mcpu *c, uint64_t gpa, uint64_t *hpa)
{
    /* one lookup in four misses what the TLB holds and walks (the structure for the other
     * page size is not consulted, or the entry lives in a level the lookup skipped) */
    for (unsigned k = 0; rnd(&c->rng, 4) && k < c->ntlb; k++) {
        struct tlb_ent *t = &c->tlb[k];
        if ((gpa & ~(EPT_LEVEL_SIZE(t->level) - 1)) == t->base) {
            use_item(c, &t->it, "translation", gpa);
            *hpa = t->hpa | (gpa & (EPT_LEVEL_SIZE(t->level) - 1));
            return true;
        }
    }
    /* the deepest cached pointer covering gpa, else the root */
    uint64_t table = W.e.root_pa;
    unsigned level = W.e.levels;
    int best = -1;
    for (unsigned k = 0; k < c->nps; k++)
        if (c->ps[k].prefix == gpa >> EPT_LEVEL_SHIFT(c->ps[k].level) &&
            (best < 0 || c->ps[k].level < c->ps[best].level))
            best = (int)k;
    if (best >= 0) {
        use_item(c, &c->ps[best].it, "paging-structure pointer", gpa);
        table = c->ps[best].child;
        level = c->ps[best].level - 1;
    }
    W.walks++;
    c->in_walk = true; /* one instruction: no NMI until it completes */
    for (;;) {
        if (!in_arena(table)) {
            violation("cpu%u: the walk for GPA %#llx left the table pool (%#llx): it read a "
                      "reused page",
                      c->s.id, (unsigned long long)gpa, (unsigned long long)table);
            return false;
        }
        uint64_t *slot = &pa_va(table)[EPT_INDEX(gpa, level)];
        sched_point(false);
        uint64_t v = sim_mem_read(slot, 8); /* the page walker reads memory */
        struct item it = {slot, W.last_log[slot_index(slot)]};
        if (!(v & VMX_EPT_RWX_MASK)) {
            c->in_walk = false;
            return false;
        }
        if (level == 1 || (level < 4 && (v & VMX_EPT_PAGE_SIZE_MASK))) {
            uint64_t size = EPT_LEVEL_SIZE(level);
            struct tlb_ent t = {level, gpa & ~(size - 1), v & EPT_ADDR_MASK & ~(size - 1), it};
            tlb_insert(c, &t);
            *hpa = t.hpa | (gpa & (size - 1));
            c->in_walk = false;
            return true;
        }
        struct ps_ent p = {level, gpa >> EPT_LEVEL_SHIFT(level), v & EPT_ADDR_MASK, it};
        ps_insert(c, &p);
        table = p.child;
        level--;
    }
}

/* ---- NMIs ---------------------------------------------------------------- */

static bool deliverable(const struct mcpu *c)
{
    return c->mode == M_ACTIVE && !c->in_nmi && !c->in_walk && !c->s.hung &&
           (c->in_guest || !W.root_nmi_blocked) && c->pending > 0;
}

static void vm_entry(struct mcpu *c)
{
    if (W.mut != MUT_SIPI_NO_POLL && W.mut != MUT_NO_ENTRY_POLL)
        sd_catch_up(&W.sd, c->s.id, &c->ops); /* vmx_run(): smp_catch_up() */
    sim_drain_all(&c->s);                     /* VM entry is serializing */
    c->in_guest = true;
}

static void deliver_nmi(struct mcpu *c)
{
    bool guest = c->in_guest;
    c->pending--;
    c->in_nmi = true;
    c->in_guest = false;
    if (!sd_on_nmi(&W.sd, c->s.id, &c->ops))
        violation("cpu%u: an NMI the VMM sent was taken for the guest's", c->s.id);
    c->in_nmi = false;
    if (guest)
        vm_entry(c);
}

static bool hk_deliverable(struct sim_cpu *s)
{
    return deliverable(mcpu(s));
}

static void hk_deliver_nmi(struct sim_cpu *s)
{
    deliver_nmi(mcpu(s));
}

static void h_send_ipi(void *ctx, unsigned cpu)
{
    W.cpu[cpu].pending++;
    W.cpu[cpu].ipis++;
    sched_point(false);
}

static uint64_t h_now(void *ctx)
{
    return sim.steps;
}

static void h_relax(void *ctx)
{
    sched_point(true);
}

/* ---- the VMM's wiring (exit_ept.c, exit_vmcall.c) ------------------------ */

/* vmx_ept_sync() returned 0 (shot: after an sd_run()): every change stored so
 * far is in force everywhere */
static void commit(struct mcpu *self, bool shot)
{
    bool skipped = false;
    W.committed = W.nlog;
    for (unsigned i = 0; i < sim.n; i++) {
        struct mcpu *c = &W.cpu[i];
        for (unsigned k = 0; c->mode == M_WAIT_SIPI && k < c->nps + c->ntlb; k++)
            skipped |= replaced_by(k < c->nps ? &c->ps[k].it : &c->tlb[k - c->nps].it) >= 0;
        if (c->mode != M_ACTIVE || W.reuse_only)
            continue;
        for (unsigned k = 0; k < c->nps; k++)
            if (replaced_by(&c->ps[k].it) >= 0)
                violation("cpu%u: vmx_ept_sync() returned 0 while cpu%u still caches a replaced "
                          "level-%u pointer",
                          self->s.id, i, c->ps[k].level);
        for (unsigned k = 0; k < c->ntlb; k++)
            if (replaced_by(&c->tlb[k].it) >= 0)
                violation("cpu%u: vmx_ept_sync() returned 0 while cpu%u still caches the dropped "
                          "translation of GPA %#llx",
                          self->s.id, i, (unsigned long long)c->tlb[k].base);
    }
    W.sipi_skipped += shot && skipped; /* not waited for: it flushes at its SIPI */
}

static int vmx_ept_sync(struct mcpu *c)
{
    if (!ept_flush_needed(&W.e)) {
        commit(c, false);
        return 0;
    }
    if (W.mut == MUT_SYNC_LOCAL) {
        c->ops.flush_local(c);
        ept_flush_done(&W.e);
        commit(c, false);
        return 0;
    }
    uint64_t missing = 0;
    if (sd_run(&W.sd, c->s.id, &c->ops, W.timeout, &missing)) {
        W.syncs_to++;
        if (!missing || (missing & ~W.hung_mask))
            violation("cpu%u: shootdown timed out missing %#llx; CPUs that hang: %#llx", c->s.id,
                      (unsigned long long)missing, (unsigned long long)W.hung_mask);
        if (W.mut == MUT_SYNC_IGNORE_TO)
            ept_flush_done(&W.e);
        return -1;
    }
    W.syncs_ok++;
    ept_flush_done(&W.e);
    commit(c, true);
    return 0;
}

static void od_flush(void *ctx, struct ept *e)
{
    if (W.mut == MUT_OD_FLUSH_LOCAL) {
        mcpu(sim_me)->ops.flush_local(mcpu(sim_me));
        ept_flush_done(e);
        return;
    }
    (void)vmx_ept_sync(mcpu(sim_me));
}

/* ept.c's break-before-make invalidation (vm_ept.c: vmx_ept_sync()); before the CPUs run
 * (the set-up's maps) there is nobody to ask */
static void ept_flush_hook(void *ctx, struct ept *e)
{
    if (!sim_me) {
        ept_flush_done(e);
        return;
    }
    if (W.mut == MUT_BBM_LOCAL) {
        mcpu(sim_me)->ops.flush_local(mcpu(sim_me));
        ept_flush_done(e);
        return;
    }
    (void)vmx_ept_sync(mcpu(sim_me));
}

static void vm_ept_lock(struct mcpu *c)
{
    spin_lock_relax(&W.lock, sd_relax, &c->waiter);
}

/* handle_ept_violation(): true when the guest gets #GP (no memory) */
static bool ept_violation(struct mcpu *c, uint64_t gpa)
{
    bool gp = false;
    unsigned perms = 0;
    vm_ept_lock(c);
    int rc = ept_translate(&W.e, gpa, NULL, &perms, NULL, NULL);
    if (rc == 0 && (perms & EPT_R)) { /* stale_violation() */
        W.stale++;
        /* met a break-before-make window another CPU opened (and closed: we hold the lock) */
        W.bbm_retries += W.e.nr_breaks != c->breaks_seen;
        c->breaks_seen = W.e.nr_breaks;
        c->ops.flush_local(c);
        (void)vmx_ept_sync(c);
    } else if (rc == EPT_ENOENT && gpa >= W.od.floor && gpa < W.od.limit) {
        struct ept_od_map m;
        rc = ept_od_fault(&W.od, &W.e, gpa, &m);
        if (rc == 0) {
            W.faults++;
            (void)vmx_ept_sync(c);
        } else if (rc == EPT_ENOMEM) {
            W.enomem++;
            gp = true;
        } else {
            violation("ept_od_fault(%#llx): %d", (unsigned long long)gpa, rc);
        }
    } else {
        violation("EPT violation at GPA %#llx the VMM cannot resolve (%d)", (unsigned long long)gpa,
                  rc);
    }
    spin_unlock(&W.lock);
    return gp;
}

#define TOPA_PAGE (GiB(1) + MiB(3)) /* a guest ToPA page the VMM write-protects (A_WP) */

static const uint64_t hot[] = {
    GiB(1) + 0x40,              /* identity map */
    TOPA_PAGE + 0x18,           /* identity map, a 4 KiB page while write-protected */
    TOPA_PAGE + KiB(4) + 8,     /* its neighbour: the same 4 KiB table */
    GiB(1) + MiB(9) + 0x30,     /* a 2 MiB leaf under the same 1 GiB while split */
    GiB(3) + 7,                 /* identity map */
    GiB(5) + 0x1234,            /* UC 1 GiB (2 MiB without 1 GiB pages) */
    GiB(16) + 8,                /* the WC 2 MiB: a PD */
    GiB(16) + MiB(2) + 0x10,    /* UC 2 MiB next to it, same PD */
    GiB(17) + MiB(6) + KiB(60), /* WT 4 KiB: PD + PT */
    GiB(17) + MiB(6) + KiB(64), /* UC 4 KiB, same PT */
    GiB(600) + 0x5000,          /* PML4E 1: a PDPT */
    GiB(700) + MiB(3),          /* PML4E 1, another PDPTE */
};

static void guest_access(struct mcpu *c, uint64_t gpa)
{
    for (unsigned tries = 0;; tries++) {
        uint64_t hpa = 0;
        if (tries > 64) {
            violation("cpu%u: GPA %#llx faults forever", c->s.id, (unsigned long long)gpa);
            return;
        }
        if (hw_access(c, gpa, &hpa)) {
            if (hpa != gpa)
                violation("cpu%u: GPA %#llx translated to %#llx: a reused table page was walked",
                          c->s.id, (unsigned long long)gpa, (unsigned long long)hpa);
            W.accesses++;
            return;
        }
        c->in_guest = false; /* VM exit */
        bool gp = ept_violation(c, gpa);
        vm_entry(c);
        if (gp)
            return;
    }
}

static void ept_drop(struct mcpu *c) /* PTV_VMCALL_EPT_DROP */
{
    c->in_guest = false;
    vm_ept_lock(c);
    int rc = ept_od_drop_all(&W.od, &W.e);
    if (rc)
        violation("ept_od_drop_all: %d", rc);
    W.drops++;
    (void)vmx_ept_sync(c);
    spin_unlock(&W.lock);
    vm_entry(c);
}

/* pt_vmx.c mem_set_wp(): the guest's ToPA page write-protected (R|X: its 1 GiB or 2 MiB leaf
 * split down to 4 KiB) or released (RWX: the tables merged back), then vmx_ept_sync() */
static void topa_wp(struct mcpu *c)
{
    c->in_guest = false;
    vm_ept_lock(c);
    int rc = ept_protect(&W.e, TOPA_PAGE, KiB(4), W.wp ? EPT_RWX : EPT_R | EPT_X, NULL);
    if (rc == 0)
        W.wp = !W.wp;
    else if (rc != EPT_ENOMEM) /* pages kept retired by a hung CPU may run the pool dry */
        violation("ept_protect: %d", rc);
    W.wps++;
    (void)vmx_ept_sync(c);
    spin_unlock(&W.lock);
    vm_entry(c);
}

static void init_sipi(struct mcpu *c)
{
    c->in_guest = false;
    sd_set_state(&W.sd, c->s.id, SD_CPU_WAIT_SIPI, &c->ops);
    c->mode = M_WAIT_SIPI;
    for (unsigned i = 1 + rnd(&c->rng, 300); i--;)
        sched_point(true); /* waiting for the SIPI, maybe longer than a timeout */
    if (W.mut == MUT_SIPI_NO_POLL)
        tso_store(&W.sd.cpu[c->s.id].state, 4, SD_CPU_ACTIVE, __ATOMIC_SEQ_CST);
    else
        sd_set_state(&W.sd, c->s.id, SD_CPU_ACTIVE, &c->ops);
    c->mode = M_ACTIVE;
    vm_entry(c);
}

static void cpu_main(int id)
{
    struct mcpu *c = &W.cpu[id];
    sim_me = &c->s;
    sd_set_state(&W.sd, c->s.id, SD_CPU_ACTIVE, &c->ops);
    c->mode = M_ACTIVE;
    vm_entry(c);
    for (unsigned k = 0; k < c->nacts; k++) {
        switch (c->acts[k]) {
        case A_ACCESS:
            guest_access(c, hot[rnd(&c->rng, sizeof(hot) / sizeof(hot[0]))]);
            break;
        case A_DROP:
            ept_drop(c);
            break;
        case A_INIT:
            init_sipi(c);
            break;
        case A_WP:
            topa_wp(c);
            break;
        case A_HANG: /* ACTIVE, in the guest, never answers again */
            c->s.hung = true;
            sim_handoff(&c->s, sim_pick_runnable(-1));
            return;
        }
    }
    W.progs_left--;
    while (W.progs_left) { /* the guest goes on touching memory until all are done */
        guest_access(c, hot[rnd(&c->rng, sizeof(hot) / sizeof(hot[0]))]);
        sched_point(true);
    }
    /* parked (the VMM's SD_CPU_OFF): not waited for, runs no guest code again */
    c->in_guest = false;
    sd_set_state(&W.sd, c->s.id, SD_CPU_OFF, &c->ops);
    c->mode = M_OFF;
    c->s.finished = true;
    sim_handoff(&c->s, sim_pick_runnable(-1)); /* never resumed */
}

/* ---- one world ----------------------------------------------------------- */

struct scenario {
    uint64_t seed;
    unsigned n;
    enum mutation mut;
    bool hang; /* the last CPU touches memory, then never answers */
    bool reuse_only;
};

static void setup_ept(uint64_t *r)
{
    static const struct ept_ops ops = {
        .alloc_page = h_alloc, .pa_to_va = h_pa_to_va, .store = h_store, .flush = ept_flush_hook};
    memset(W.pg, 0, sizeof(W.pg));
    W.used = 0;
    W.mtrr = (struct mtrr_state){.cap = MTRR_CAP_FIX | MTRR_CAP_WC | 8,
                                 .def_type = MTRR_DEF_TYPE_E | EPT_MT_UC,
                                 .maxphyaddr = 40};
    set_var(&W.mtrr, 0, GiB(16), MiB(2), EPT_MT_WC);
    set_var(&W.mtrr, 1, GiB(17) + MiB(6), KiB(64), EPT_MT_WT);
    assert_int_equal(ept_init(&W.e, &ops, rnd(r, 2), true), 0);
    W.pg[page_of(W.e.root_pa)] = (struct pginfo){.reach = true, .level = W.e.levels, .lives = 1};
    assert_int_equal(ept_set_maxphyaddr(&W.e, 40), 0);
    /* the identity map's stand-in: [0, 4 GiB) */
    assert_int_equal(ept_map(&W.e, 0, 0, FLOOR, EPT_RWX, EPT_MT_WB), 0);
    assert_int_equal(ept_reserve(&W.e, W.e.levels - 1u), 0);
    unsigned long budget = (unsigned long[]){3, 4, 6}[rnd(r, 3)];
    assert_int_equal(ept_od_init(&W.od, &W.e, &W.mtrr, FLOOR, GiB(1024), budget, od_flush, NULL),
                     0);
}

static const char *run_world(const struct scenario *sc)
{
    uint64_t r = sc->seed * 0x9e3779b97f4a7c15ull + 1;
    memset(W.cpu, 0, sizeof(W.cpu));
    memset(W.first_log, 0xff, sizeof(W.first_log));
    memset(W.last_log, 0xff, sizeof(W.last_log));
    W.nlog = W.committed = 0;
    W.mut = sc->mut;
    W.reuse_only = sc->reuse_only;
    W.hung_mask = sc->hang ? 1ull << (sc->n - 1) : 0;
    W.root_nmi_blocked = rnd(&r, 2);
    W.syncs_ok = W.syncs_to = W.sipi_skipped = W.reuses = W.unlinks = W.accesses = W.walks = 0;
    W.faults = W.drops = W.stale = W.enomem = W.wps = W.multihit_checks = W.bbm_retries = 0;
    W.wp = false;
    sim_reset(sc->n, &r, 2000000);
    sim.hooks = (struct sim_hooks){.deliverable = hk_deliverable,
                                   .deliver_nmi = hk_deliver_nmi,
                                   .quiet_load = slot_in_arena,
                                   .written = hk_written};
    W.timeout = sc->hang ? 2000 : 100000; /* steps */
    W.lock.locked = 0;
    sd_init(&W.sd, sc->n);
    setup_ept(&r);
    W.progs_left = 0;
    static const uint8_t mix[] = {A_ACCESS, A_ACCESS, A_ACCESS, A_ACCESS, A_ACCESS,
                                  A_ACCESS, A_DROP,   A_INIT,   A_WP,     A_WP};
    for (unsigned i = 0; i < sc->n; i++) {
        struct mcpu *c = &W.cpu[i];
        c->s.id = i;
        sim.cpu[i] = &c->s;
        c->rng = r + i * 7919 + 1;
        c->ops = (struct sd_ops){c, h_send_ipi, h_flush, h_now, h_relax};
        c->waiter = (struct sd_waiter){&W.sd, i, &c->ops};
        sim_make_coroutine(&c->s, cpu_main);
        if (sc->hang && i == sc->n - 1) { /* caches the on-demand tables, then hangs */
            for (unsigned k = 2 + rnd(&r, 4); k--;)
                c->acts[c->nacts++] = A_ACCESS;
            c->acts[c->nacts++] = A_HANG;
            continue;
        }
        W.progs_left++;
        for (unsigned k = 4 + rnd(&r, MAX_ACTS - 4); k--;)
            c->acts[c->nacts++] = mix[rnd(&r, sizeof(mix))];
    }
    sim.model = true;
    sim_run(); /* back when no CPU is left to run, or on a violation */
    sim.model = false;
    sim_me = NULL;
    sim_free_stacks(); /* a hung or failed CPU is abandoned: it holds nothing */
    if (!sim.fail[0] && (W.sd.completed != W.syncs_ok || W.sd.timeouts != W.syncs_to))
        violation("counters: sd completed %llu (syncs %llu), timeouts %llu (syncs %llu)",
                  (unsigned long long)W.sd.completed, (unsigned long long)W.syncs_ok,
                  (unsigned long long)W.sd.timeouts, (unsigned long long)W.syncs_to);
    if (!sim.fail[0] && !sc->hang && W.syncs_to)
        violation("%llu shootdowns timed out with every CPU responsive",
                  (unsigned long long)W.syncs_to);
    return sim.fail[0] ? sim.fail : NULL;
}

/* ---- the tests ----------------------------------------------------------- */

static uint64_t seeds(uint64_t dflt)
{
    const char *e = getenv("EPT_SMP_SEEDS");
    return e ? strtoull(e, NULL, 0) : dflt;
}

struct figures {
    uint64_t steps, syncs, timeouts, sipi_skipped, reuses, unlinks, accesses, walks, faults, drops,
        stale, enomem, kept, wps, breaks, bbm_retries, multihit_checks;
};

static void add_figures(struct figures *f)
{
    f->steps += sim.steps;
    f->syncs += W.syncs_ok;
    f->timeouts += W.syncs_to;
    f->sipi_skipped += W.sipi_skipped;
    f->reuses += W.reuses;
    f->unlinks += W.unlinks;
    f->accesses += W.accesses;
    f->walks += W.walks;
    f->faults += W.faults;
    f->drops += W.drops;
    f->stale += W.stale;
    f->enomem += W.enomem;
    f->kept += W.e.nr_retired;
    f->wps += W.wps;
    f->breaks += W.e.nr_breaks;
    f->bbm_retries += W.bbm_retries;
    f->multihit_checks += W.multihit_checks;
}

static void run_correct(unsigned ncpus, bool hang, uint64_t n)
{
    struct figures f = {0};
    for (uint64_t seed = 1; seed <= n; seed++) {
        struct scenario sc = {.seed = seed * 4 + ncpus + hang, .n = ncpus, .hang = hang};
        const char *why = run_world(&sc);
        if (why)
            fail_msg("%u CPUs%s, seed %llu: %s", ncpus, hang ? " (one hangs)" : "",
                     (unsigned long long)sc.seed, why);
        add_figures(&f);
    }
    assert_true(f.syncs > 0 && f.reuses > 0 && f.sipi_skipped > 0);
    assert_true(f.wps > 0 && f.breaks > 0 && f.bbm_retries > 0);
    if (hang)
        assert_true(f.timeouts > 0 && f.kept > 0);
    printf("[ %u CPUs%s] %llu schedules, %llu steps: %llu accesses (%llu walks), %llu on-demand "
           "maps, %llu drop-alls, %llu stale exits, %llu shootdowns ok (%llu with a CPU in "
           "WAIT_SIPI holding replaced entries), %llu "
           "timed out; %llu tables unlinked, %llu reused, %llu left retired, %llu #GP for want of "
           "pages\n",
           ncpus, hang ? ", one hung" : "", (unsigned long long)n, (unsigned long long)f.steps,
           (unsigned long long)f.accesses, (unsigned long long)f.walks,
           (unsigned long long)f.faults, (unsigned long long)f.drops, (unsigned long long)f.stale,
           (unsigned long long)f.syncs, (unsigned long long)f.sipi_skipped,
           (unsigned long long)f.timeouts, (unsigned long long)f.unlinks,
           (unsigned long long)f.reuses, (unsigned long long)f.kept, (unsigned long long)f.enomem);
    printf("[ %u CPUs%s] %llu ToPA write-protects and releases: %llu break-before-make "
           "invalidations, %llu guest accesses retried after meeting one; %llu TLB fills checked "
           "for two page sizes\n",
           ncpus, hang ? ", one hung" : "", (unsigned long long)f.wps, (unsigned long long)f.breaks,
           (unsigned long long)f.bbm_retries, (unsigned long long)f.multihit_checks);
}

static void test_two_cpus(void **state)
{
    run_correct(2, false, seeds(500) / 2);
}

static void test_three_cpus(void **state)
{
    run_correct(3, false, seeds(500) / 2);
}

static void test_hung_cpu(void **state)
{
    run_correct(3, true, seeds(500) / 5);
}

/* runs mutant m over n schedules; returns how many were caught, *msg the first */
static uint64_t run_mutant(enum mutation m, bool reuse_only, uint64_t n, char *msg, size_t len)
{
    uint64_t caught = 0;
    for (uint64_t seed = 1; seed <= n; seed++) {
        struct scenario sc = {.seed = seed,
                              .n = 2 + seed % 2,
                              .mut = m,
                              .hang = m == MUT_SYNC_IGNORE_TO,
                              .reuse_only = reuse_only};
        if (sc.hang)
            sc.n = 3;
        const char *why = run_world(&sc);
        if (why && !caught++)
            snprintf(msg, len, "seed %llu: %s", (unsigned long long)seed, why);
    }
    return caught;
}

static void test_mutations(void **state)
{
    uint64_t n = seeds(500) / 5;
    for (int m = MUT_NONE + 1; m < MUT_NR; m++) {
        static char msg[sizeof(sim.fail) + 32], msg1[sizeof(sim.fail) + 32];
        uint64_t caught = run_mutant((enum mutation)m, false, n, msg, sizeof(msg));
        printf("[ mutant] %-40s caught in %3llu/%llu schedules%s%s\n", mut_name[m],
               (unsigned long long)caught, (unsigned long long)n, caught ? "; first: " : "",
               caught ? msg : "");
        /* the poll before entry is a latency measure: the NMI answers anyway */
        if (!caught && m != MUT_NO_ENTRY_POLL)
            fail_msg("mutation '%s' was not caught", mut_name[m]);
        /* the ones that reuse pages too early: invariant 1 alone must see it; the
         * break-before-make one also leaves a CPU with two page sizes, which invariant 5
         * must see (the reuse check stays on: it sees the merged tables reused) */
        if (m != MUT_SYNC_LOCAL && m != MUT_SYNC_IGNORE_TO && m != MUT_OD_FLUSH_LOCAL &&
            m != MUT_BBM_LOCAL)
            continue;
        caught = run_mutant((enum mutation)m, true, n, msg1, sizeof(msg1));
        printf("[ mutant]   %s: caught in %3llu/%llu%s%s\n",
               m == MUT_BBM_LOCAL ? "invariants 1 and 5 alone" : "invariant 1 alone",
               (unsigned long long)caught, (unsigned long long)n, caught ? "; first: " : "",
               caught ? msg1 : "");
        if (!caught)
            fail_msg("mutation '%s' reuses pages, but invariant 1 did not see it", mut_name[m]);
    }
}

int main(void)
{
    W.arena = aligned_alloc(EPT_PAGE_SIZE, (size_t)NPAGES * EPT_PAGE_SIZE);
    if (!W.arena)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_cpus),
        cmocka_unit_test(test_three_cpus),
        cmocka_unit_test(test_hung_cpu),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
