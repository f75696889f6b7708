/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: vmm/smp/shootdown.c on a single-threaded interleaving model.  The
 * input is a schedule: each byte is one event on one of 2-4 simulated CPUs
 * (guest access, VM-entry poll, NMI arrival, INIT, SIPI, start, guest NMI,
 * narrowing).  While an initiator waits in sd_run(), every relax() and every
 * flush runs the next events (the other CPUs, and NMIs nested into the
 * flushing CPU), so the real code is interleaved at its hooks.  Invariants
 * (abort on violation):
 *  - a guest access never uses a translation older than the newest narrowing
 *    whose sd_run() returned 0; when it returns 0 no ACTIVE CPU holds one;
 *  - a timeout names exactly the ACTIVE CPUs that had not flushed;
 *  - NMIs reflected to a guest never exceed, and in the end equal, the guest
 *    NMIs sent to it; no VMM NMI stays owed once all NMIs are delivered.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "smp/shootdown.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

#define NCPU 4

enum mode { M_OFF, M_ACTIVE, M_WAIT_SIPI };

static struct {
    const uint8_t *p, *end;
    unsigned n, initiator; /* initiator: NCPU when no sd_run is under way */
    struct shootdown sd;
    struct sd_ops ops[NCPU];
    uint64_t ept_ver, committed, clock;
    struct {
        enum mode mode;
        bool tlb_valid, in_nmi;
        uint64_t tlb_ver;
        unsigned pending, guest_sent, reflected;
    } c[NCPU];
} F;

static int next_byte(void)
{
    return F.p < F.end ? *F.p++ : -1;
}

static void access_page(unsigned i)
{
    CHECK(!(F.c[i].tlb_valid && F.c[i].tlb_ver < F.committed));
    if (!F.c[i].tlb_valid) {
        F.c[i].tlb_valid = true;
        F.c[i].tlb_ver = F.ept_ver;
    }
}

static void nmi(unsigned i)
{
    if (F.c[i].mode != M_ACTIVE || F.c[i].in_nmi || !F.c[i].pending)
        return;
    F.c[i].pending--;
    F.c[i].in_nmi = true;
    if (!sd_on_nmi(&F.sd, i, &F.ops[i]))
        CHECK(++F.c[i].reflected <= F.c[i].guest_sent);
    F.c[i].in_nmi = false;
    if (i != F.initiator)
        sd_catch_up(&F.sd, i, &F.ops[i]); /* VM entry */
}

static void narrow(unsigned i);

/* one event from the schedule */
static void event(int b)
{
    unsigned i = (unsigned)b % F.n, op = (unsigned)b / NCPU % 8;
    if (i == F.initiator && op != 2)
        return; /* the initiator is busy in sd_run(); only an NMI can reach it */
    switch (op) {
    case 0: /* the guest on i touches the page */
        if (F.c[i].mode == M_ACTIVE)
            access_page(i);
        break;
    case 1: /* a VM exit and re-entry on i: the entry poll */
        if (F.c[i].mode == M_ACTIVE)
            sd_catch_up(&F.sd, i, &F.ops[i]);
        break;
    case 2:
        nmi(i);
        break;
    case 3: /* INIT: the vCPU waits for SIPI */
        if (F.c[i].mode == M_ACTIVE) {
            F.c[i].mode = M_WAIT_SIPI;
            sd_set_state(&F.sd, i, SD_CPU_WAIT_SIPI, &F.ops[i]);
        }
        break;
    case 4: /* SIPI, or the CPU enters VMX */
    case 5:
        if (F.c[i].mode != M_ACTIVE) {
            sd_set_state(&F.sd, i, SD_CPU_ACTIVE, &F.ops[i]);
            F.c[i].mode = M_ACTIVE;
            access_page(i);
        }
        break;
    case 6: /* the guest sends an NMI to CPU i */
        F.c[i].pending++;
        F.c[i].guest_sent++;
        break;
    case 7:
        if (F.initiator == NCPU && F.c[i].mode == M_ACTIVE)
            narrow(i);
        break;
    }
}

static void f_send_ipi(void *ctx, unsigned cpu)
{
    CHECK(cpu < F.n && cpu != (unsigned)(uintptr_t)ctx);
    F.c[cpu].pending++;
}

static void f_flush(void *ctx)
{
    unsigned i = (unsigned)(uintptr_t)ctx;
    F.c[i].tlb_valid = false;
    int b = next_byte(); /* maybe an NMI between INVEPT and publishing seen */
    if (b >= 0 && (b & 0xf0) == 0xf0)
        nmi(i);
}

static uint64_t f_now(void *ctx)
{
    return F.clock++;
}

static void f_relax(void *ctx)
{
    int b = next_byte();
    if (b >= 0)
        event(b);
}

static void narrow(unsigned i)
{
    int t = next_byte();
    uint64_t v = ++F.ept_ver, missing = ~0ull, timeout = t < 0 ? 0 : 1 + (unsigned)t % 64;
    F.initiator = i;
    int r = sd_run(&F.sd, i, &F.ops[i], timeout, &missing);
    F.initiator = NCPU;
    if (r == 0) {
        CHECK(missing == 0);
        if (F.committed < v)
            F.committed = v;
        for (unsigned j = 0; j < F.n; j++)
            CHECK(F.c[j].mode != M_ACTIVE || !F.c[j].tlb_valid || F.c[j].tlb_ver >= v);
        return;
    }
    uint64_t expect = 0;
    for (unsigned j = 0; j < F.n; j++)
        if (j != i && F.c[j].mode == M_ACTIVE && F.sd.cpu[j].seen < F.sd.gen)
            expect |= 1ull << j;
    CHECK(r == -1 && missing == expect && expect != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    memset(&F, 0, sizeof(F));
    F.p = data + 1;
    F.end = data + size;
    F.n = 2 + data[0] % 3;
    F.initiator = NCPU;
    sd_init(&F.sd, F.n);
    for (unsigned i = 0; i < F.n; i++)
        F.ops[i] = (struct sd_ops){(void *)(uintptr_t)i, f_send_ipi, f_flush, f_now, f_relax};
    int b;
    while ((b = next_byte()) >= 0)
        event(b);

    /* the end: every CPU runs, takes its pending NMIs and enters the guest */
    for (unsigned i = 0; i < F.n; i++) {
        if (F.c[i].mode != M_ACTIVE) {
            sd_set_state(&F.sd, i, SD_CPU_ACTIVE, &F.ops[i]);
            F.c[i].mode = M_ACTIVE;
        }
        while (F.c[i].pending)
            nmi(i);
        sd_catch_up(&F.sd, i, &F.ops[i]);
        access_page(i);
        CHECK(F.c[i].reflected == F.c[i].guest_sent);
        CHECK(F.sd.cpu[i].ipi_owed == 0);
        CHECK(F.sd.cpu[i].seen == F.sd.gen);
    }
    return 0;
}
