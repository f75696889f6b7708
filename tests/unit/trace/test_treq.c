/* SPDX-License-Identifier: MIT */
/*
 * The trace VMCALLs' rules (vmm/trace/treq.c):
 *  - defect 2, the CPL 3 rule: every TRACE_START a guest process can make (all flag
 *    combinations, CR3 masks, budgets) is either refused or a window on the caller's own
 *    process in user mode; only a window's owner (its CR3, the PCID aside) may stop, dump or
 *    read it from CPL 3; and what the owner is told (vmm/trace/swpt.c's traced / win_events)
 *    is what its stream shows, nothing of the kernel or another process;
 *  - defect 7, TRACE_READ's copy: the destination is resolved once, and the copy writes where
 *    it resolved, even when a page's lookup would answer 0 afterwards (another vCPU moved its
 *    xAPIC window onto it: the old code looked up again and copied to host address 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ptv/config.h>
#include <ptv/vmcall.h>

#include "trace/swpt.h"
#include "trace/treq.h"

#define CALLER 0x41803ull /* a process's CR3 with its PCID (0x803) */

/* ---- defect 2: TRACE_START from CPL 3 ---- */

/* a request the CPL 3 rule let through opens a window on the caller's process, user mode only */
static void assert_own_window(const struct trace_req *rq, const struct ptv_config *pc)
{
    struct swpt_cfg c;
    const char *why;
    if (trace_req_swpt(rq, pc, &c, &why) != 0)
        return; /* refused for another reason (EINVAL): no window at all */
    assert_true(c.filter.user);
    assert_false(c.filter.kernel);
    assert_true(c.filter.cr3_match);
    assert_int_equal(c.filter.cr3, rq->caller_cr3);
    assert_int_equal(c.filter.cr3_ignore & ~PTV_TRACE_CR3_PCID, 0);
}

static void test_user_start(void **state)
{
    (void)state;
    /* a configuration that would trace everything: kernel, user, no CR3 */
    const struct ptv_config pc = {.psb_period = 4096,
                                  .trace_filter = PTV_TRACE_OS | PTV_TRACE_USER};
    const char *why;
    const uint32_t own = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF;
    static const struct {
        uint32_t flags;
        uint64_t ignore, budget;
        int ok;
        const char *why;
    } cases[] = {
        /* what ptvisor-ctl trace and ptt-work ask */
        {own | PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_START_IP, PTV_TRACE_CR3_PCID, 0, 1, NULL},
        {own | PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_START_IP | PTV_TRACE_F_RANGE, 0xfff, 0, 1, NULL},
        {own, 0, 0, 1, NULL},
        {own | PTV_TRACE_F_RANGE, 0, 0, 1, NULL}, /* a range only narrows it */
        /* the attacks on the CPL 3 trace rule */
        {0, 0, 0, 0, "PTV_TRACE_F_USER and PTV_TRACE_F_CR3_SELF"}, /* the configured filter */
        {PTV_TRACE_F_KERNEL, 0, 0, 0, "user mode only"},
        {PTV_TRACE_F_KERNEL | own, 0, 0, 0, "user mode only"},
        {PTV_TRACE_F_USER, 0, 0, 0, "PTV_TRACE_F_CR3_SELF"},                     /* any CR3 */
        {PTV_TRACE_F_USER | PTV_TRACE_F_CR3, 0, 0, 0, "own process"},            /* one named */
        {PTV_TRACE_F_USER | PTV_TRACE_F_RANGE, 0, 0, 0, "PTV_TRACE_F_CR3_SELF"}, /* kernel text */
        {PTV_TRACE_F_KERNEL | PTV_TRACE_F_RANGE, 0, 0, 0, "user mode only"},
        {PTV_TRACE_F_USER | PTV_TRACE_F_START_IP, 0, 0, 0, "PTV_TRACE_F_CR3_SELF"},
        {PTV_TRACE_F_CR3_SELF, 0, 0, 0, "PTV_TRACE_F_USER"},
        /* bit 12: another page table where no PTI pairs them */
        {own | PTV_TRACE_F_CR3_MASK, 0x1fff, 0, 0, "only the PCID"},
        {own | PTV_TRACE_F_CR3_MASK, 0x1000, 0, 0, "only the PCID"},
        {own, 0, 1, 0, "no budget"},
        {own, 0, ~0ull, 0, "no budget"},
        {own | (1u << 7), 0, 0, 0, "unknown"},
        {own | 0x80000000u, 0, 0, 0, "unknown"},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct trace_req rq = {.flags = cases[i].flags,
                               .cr3 = 0x9000,
                               .caller_cr3 = CALLER,
                               .cr3_ignore = cases[i].ignore,
                               .lo = 0xffffffff81000000ull,
                               .hi = 0xffffffff81ffffffull,
                               .start_ip = 0x401000,
                               .user = true};
        int rc = trace_req_user_check(&rq, cases[i].budget, &why);
        if ((rc == 0) != cases[i].ok)
            fail_msg("case %u (flags %#x): %s, want %s", i, cases[i].flags,
                     rc ? "refused" : "accepted", cases[i].ok ? "accepted" : "refused");
        if (!cases[i].ok && !strstr(why, cases[i].why))
            fail_msg("case %u: '%s' does not say '%s'", i, why, cases[i].why);
        if (cases[i].ok)
            assert_own_window(&rq, &pc);
        /* CPL 0 keeps full control */
        rq.user = false;
        assert_int_equal(trace_req_user_check(&rq, cases[i].budget, &why), 0);
    }
}

/* every flag combination, mask and budget: accepted from CPL 3 means the caller's own window */
static void test_user_start_sweep(void **state)
{
    (void)state;
    const struct ptv_config pcs[] = {
        {.psb_period = 4096, .trace_filter = PTV_TRACE_OS | PTV_TRACE_USER},
        {.psb_period = 4096, .trace_filter = PTV_TRACE_OS, .trace_cr3 = 0x7000},
        {.psb_period = 4096,
         .trace_filter = PTV_TRACE_USER,
         .trace_nranges = 1,
         .trace_range = {{.lo = 0xffffffff80000000ull, .hi = ~0ull}}},
    };
    static const uint64_t masks[] = {0, 0xfff, 0x800, 0x1000, 0x1fff, ~0ull};
    const char *why;
    unsigned accepted = 0;
    for (uint32_t f = 0; f < 0x100; f++)
        for (unsigned m = 0; m < sizeof(masks) / sizeof(masks[0]); m++)
            for (uint64_t budget = 0; budget < 2; budget++) {
                struct trace_req rq = {.flags = f,
                                       .cr3 = 0x9000,
                                       .caller_cr3 = CALLER,
                                       .cr3_ignore = masks[m],
                                       .lo = 0x1000,
                                       .hi = ~0ull,
                                       .start_ip = 0xffffffff81000000ull,
                                       .user = true};
                if (trace_req_user_check(&rq, budget, &why))
                    continue;
                accepted++;
                assert_int_equal(budget, 0);
                for (unsigned p = 0; p < sizeof(pcs) / sizeof(pcs[0]); p++)
                    assert_own_window(&rq, &pcs[p]);
                /* its owner is the caller's process */
                struct trace_owner o = trace_owner_of(&rq);
                assert_true(o.user);
                assert_int_equal(o.cr3, CALLER);
            }
    /* USER | CR3_SELF, with or without RANGE and START_IP (4): every mask goes without
     * CR3_MASK (ignored), the 3 within the PCID with it */
    assert_int_equal(accepted, 4 * 6 + 4 * 3);
}

/* ---- defect 2: who may stop, dump or read a window ---- */

static void test_owner(void **state)
{
    (void)state;
    const struct trace_req by_proc = {
        .flags = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF, .caller_cr3 = CALLER, .user = true};
    const struct trace_req by_kernel = {.flags = PTV_TRACE_F_KERNEL, .caller_cr3 = CALLER};
    struct trace_owner p = trace_owner_of(&by_proc), k = trace_owner_of(&by_kernel),
                       boot = {0}; /* trace_boot's window, or none opened yet */

    /* CPL 0: every window */
    assert_true(trace_owner_allows(&p, 0, 0x5000));
    assert_true(trace_owner_allows(&k, 0, CALLER));
    assert_true(trace_owner_allows(&boot, 0, 0));
    /* CPL 3: the opener's process, whatever PCID the kernel gives it now */
    assert_true(trace_owner_allows(&p, 3, CALLER));
    assert_true(trace_owner_allows(&p, 3, CALLER & ~0xfffull));
    assert_true(trace_owner_allows(&p, 3, (CALLER & ~0xfffull) | 0x005));
    assert_true(trace_owner_allows(&p, 1, CALLER));
    /* not another process, not the other page table of a pair, not the kernel's window */
    assert_false(trace_owner_allows(&p, 3, CALLER + 0x2000));
    assert_false(trace_owner_allows(&p, 3, CALLER ^ 0x1000));
    assert_false(trace_owner_allows(&p, 3, CALLER | (1ull << 40)));
    assert_false(trace_owner_allows(&k, 3, CALLER));
    assert_false(trace_owner_allows(&boot, 3, 0));
    assert_false(trace_owner_allows(&boot, 3, CALLER));
}

/* ---- defect 2: what the owner is told is its stream's ---- */

static const struct swpt_ctx USER_A = {.cr3 = CALLER, .cpl = 3, .cs = X86_CODE64};
static const struct swpt_ctx USER_B = {.cr3 = 0x52000, .cpl = 3, .cs = X86_CODE64};
static const struct swpt_ctx KERN = {.cr3 = CALLER, .cpl = 0, .cs = X86_CODE64};
static const struct x86_insn PLAIN = {.len = 1, .branch = X86_BR_NONE};
static const struct x86_insn SYSCALL = {.len = 2, .branch = X86_BR_SYSCALL};
static const struct x86_insn SYSRET = {.len = 3, .branch = X86_BR_SYSRET};
static const struct x86_insn MOVCR3 = {.len = 3, .branch = X86_BR_NONE};

/* the caller's window: n of its instructions, a system call whose kernel side runs k
 * instructions and takes e interrupts, a switch to another process that runs k more */
static void run(struct swpt *t, struct swpt_ring *r, unsigned n, unsigned k, unsigned e)
{
    struct swpt_cfg cfg = {.filter = {.user = true,
                                      .cr3_match = true,
                                      .cr3 = CALLER,
                                      .cr3_ignore = PTV_TRACE_CR3_PCID},
                           .psb_period = 1u << 20};
    uint64_t ip = 0x401000, kip = 0xffffffff81000000ull;
    r->head = 0;
    swpt_start(t, &cfg, r, &USER_A, ip, 0);
    for (unsigned i = 0; i < n; i++, ip++)
        swpt_insn(t, ip, &PLAIN, ip + 1, &USER_A, 0);
    swpt_insn(t, ip, &SYSCALL, kip, &KERN, 0);
    for (unsigned i = 0; i < k; i++, kip++) {
        if (i % 4 == 0 && e) { /* an interrupt in the kernel: not the window's */
            swpt_event(t, kip, 0xffffffff82000000ull, &KERN, 0);
            swpt_insn(t, 0xffffffff82000000ull, &PLAIN, kip, &KERN, 0);
            e--;
        }
        swpt_insn(t, kip, &PLAIN, kip + 1, &KERN, 0);
    }
    /* the kernel switches to another process, which runs and makes a system call */
    swpt_insn(t, kip, &MOVCR3, kip + 3,
              &(struct swpt_ctx){.cr3 = USER_B.cr3, .cpl = 0, .cs = X86_CODE64}, 0);
    swpt_insn(t, kip + 3, &SYSRET, 0x401000, &USER_B, 0);
    for (unsigned i = 0; i < k; i++)
        swpt_insn(t, 0x401000 + i, &PLAIN, 0x401001 + i, &USER_B, 0);
    swpt_event(t, 0x401000 + k, 0xffffffff82000000ull, &KERN, 0);
    swpt_stop(t, 0xffffffff82000000ull);
}

static void test_owner_figures(void **state)
{
    (void)state;
    static uint8_t buf[1 << 16];
    struct swpt_ring r = {.buf = buf, .size = sizeof(buf)};
    struct swpt a, b;

    run(&a, &r, 50, 10, 0);
    uint64_t bytes_a = r.head;
    run(&b, &r, 50, 1000, 30); /* the kernel and the other process do much more */
    /* the window's own: 50 instructions and its system call, one event (none of its own: the
     * interrupts are the kernel's), and the same bytes */
    assert_int_equal(a.traced, 51);
    assert_int_equal(b.traced, 51);
    assert_int_equal(a.win_events, 0);
    assert_int_equal(b.win_events, 0);
    assert_int_equal(r.head, bytes_a);
    /* what TRACE_STATUS told everyone before: every step and every event of every context */
    assert_true(b.insns > a.insns + 1000);
    assert_int_equal(b.events, a.events + 30);
    /* an interrupt in the window's own code is its event */
    struct swpt_cfg cfg = {.filter = {.user = true, .cr3_match = true, .cr3 = CALLER},
                           .psb_period = 1u << 20};
    swpt_start(&a, &cfg, &r, &USER_A, 0x401000, 0);
    swpt_event(&a, 0x401000, 0xffffffff82000000ull, &KERN, 0);              /* out of its code */
    swpt_event(&a, 0xffffffff82000000ull, 0xffffffff82000100ull, &KERN, 0); /* kernel's */
    swpt_event(&a, 0xffffffff82000100ull, 0x401000, &USER_A, 0);            /* back into it */
    assert_int_equal(a.win_events, 2);
    assert_int_equal(a.events, 3);
}

/* ---- defect 7: TRACE_READ's destination resolved once ---- */

#define NPAGES 6
#define GPA0   0x100000ull /* guest RAM pages GPA0 .. GPA0 + NPAGES pages */

struct mem {
    uint8_t *ram; /* host memory behind the guest pages: identity, as EPT maps guest RAM */
    unsigned lookups[NPAGES + 2];
    int apic_page;       /* -1, or the page another vCPU moves its xAPIC window onto ... */
    unsigned apic_after; /* ... once it was looked up this many times */
    uint64_t wrote_lo, wrote_hi;
    uint64_t stream_off;
};

static uint64_t resolve(void *ctx, uint64_t page)
{
    struct mem *m = ctx;
    assert_int_equal(page & 0xfff, 0);
    if (page < GPA0 || page >= GPA0 + NPAGES * 4096ull)
        return 0; /* not guest RAM */
    unsigned i = (unsigned)((page - GPA0) >> 12);
    if ((int)i == m->apic_page && m->lookups[i] >= m->apic_after)
        return 0; /* the xAPIC window covers it now: EPT maps the APIC-access page there */
    m->lookups[i]++;
    return (uint64_t)(uintptr_t)(m->ram + (page - GPA0));
}

/* the stream's byte at offset o */
static uint8_t stream(uint64_t o)
{
    return (uint8_t)(o * 7 + 3);
}

static uint64_t bytes(void *ctx, uint64_t off, void *dst, uint64_t n)
{
    struct mem *m = ctx;
    uint64_t lo = (uint64_t)(uintptr_t)m->ram, at = (uint64_t)(uintptr_t)dst;
    /* only ever into the guest RAM the lookups gave: never host address 0 + something */
    if (at < lo || at + n > lo + NPAGES * 4096ull)
        fail_msg("a copy to host %#lx, outside the guest RAM at %#lx", (unsigned long)at,
                 (unsigned long)lo);
    for (uint64_t i = 0; i < n; i++)
        ((uint8_t *)dst)[i] = stream(off + i);
    m->wrote_lo = at - lo;
    m->wrote_hi = at - lo + n;
    m->stream_off = off;
    return n;
}

static void mem_init(struct mem *m, uint8_t *ram)
{
    memset(m, 0, sizeof(*m));
    m->ram = ram;
    m->apic_page = -1;
    memset(ram, 0xee, NPAGES * 4096);
}

static void test_read_once(void **state)
{
    (void)state;
    static uint8_t ram[NPAGES * 4096];
    const struct trace_read_io io = {.resolve = resolve, .bytes = bytes};
    struct trace_read_io x = io;
    struct mem m;
    uint64_t copied;

    /* three pages from an odd offset; the middle page becomes the xAPIC window right after
     * the check looked it up: the copy still goes where the check resolved (guest RAM), each
     * page looked up once */
    for (unsigned moved = 0; moved < 4; moved++) {
        mem_init(&m, ram);
        m.apic_page = (int)moved;
        m.apic_after = 1;
        x.ctx = &m;
        const uint64_t gpa = GPA0 + 0x123, len = 2 * 4096 + 100;
        assert_int_equal(trace_read_copy(&x, gpa, len, 5000, &copied), 0);
        assert_int_equal(copied, len);
        for (unsigned i = 0; i < NPAGES; i++)
            assert_int_equal(m.lookups[i], i < 3 ? 1 : 0);
        assert_int_equal(m.wrote_lo, 0x123);
        assert_int_equal(m.wrote_hi, 0x123 + len);
        for (uint64_t i = 0; i < len; i++)
            if (ram[0x123 + i] != stream(5000 + i))
                fail_msg("byte %lu not the stream's", (unsigned long)i);
        assert_int_equal(ram[0x122], 0xee);
        assert_int_equal(ram[0x123 + len], 0xee);
    }
    /* a destination page that is the xAPIC window (or not RAM) when checked: nothing copied */
    mem_init(&m, ram);
    m.apic_page = 2;
    m.apic_after = 0;
    x.ctx = &m;
    assert_int_equal(trace_read_copy(&x, GPA0, 4 * 4096, 0, &copied), -1);
    assert_int_equal(copied, 0);
    assert_int_equal(m.wrote_hi, 0);
    assert_int_equal(ram[0], 0xee);
    assert_int_equal(trace_read_copy(&x, GPA0 + (NPAGES - 1) * 4096ull, 8192, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
    /* no length: nothing looked up, nothing written */
    mem_init(&m, ram);
    x.ctx = &m;
    assert_int_equal(trace_read_copy(&x, 0, 0, 0, &copied), 0);
    assert_int_equal(m.lookups[0], 0);
    /* a range past the top of the physical space, or ending at it (no RAM there): refused,
     * and the walk ends (lib/range.h: never an address that wraps to 0) */
    assert_int_equal(trace_read_copy(&x, ~0ull - 10, 100, 0, &copied), -1);
    assert_int_equal(trace_read_copy(&x, ~0ull - 4095, 4096, 0, &copied), -1);
    assert_int_equal(trace_read_copy(&x, 1, ~0ull, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
}

/* pages that do not make one host range (a resolver that is not the identity): refused before
 * a byte is written */
static uint64_t resolve_scattered(void *ctx, uint64_t page)
{
    struct mem *m = ctx;
    unsigned i = (unsigned)((page - GPA0) >> 12);
    return (uint64_t)(uintptr_t)(m->ram + ((i * 2) % NPAGES) * 4096ull);
}

static void test_read_scattered(void **state)
{
    (void)state;
    static uint8_t ram[NPAGES * 4096];
    struct mem m;
    mem_init(&m, ram);
    const struct trace_read_io io = {.ctx = &m, .resolve = resolve_scattered, .bytes = bytes};
    uint64_t copied;
    assert_int_equal(trace_read_copy(&io, GPA0, 2 * 4096, 0, &copied), -1);
    assert_int_equal(m.wrote_hi, 0);
    assert_int_equal(trace_read_copy(&io, GPA0 + 8, 4000, 0, &copied), 0); /* one page */
    assert_int_equal(copied, 4000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_start), cmocka_unit_test(test_user_start_sweep),
        cmocka_unit_test(test_owner),      cmocka_unit_test(test_owner_figures),
        cmocka_unit_test(test_read_once),  cmocka_unit_test(test_read_scattered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
