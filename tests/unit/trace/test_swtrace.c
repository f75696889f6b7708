/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's stepping logic (vmm/trace/swtrace.c) joined to the
 * classifier, the guest page walk and the packet generator, as the VMM runs them:
 * a scripted vCPU over fake guest RAM with 4-level page tables shows the tracer
 * what MTF exits would (RIP after each step), and libipt must decode the ring
 * back to exactly the instructions that ran -- loops, call/ret, an indirect
 * jump, REP iterations, a jump to itself, an interrupt recognised from the frame
 * it pushed, an unexplained jump (OVF), unreadable code, a budget.  Every script
 * runs with the decode cache (vmm/trace/bcache.c) on and off: the same packets, byte
 * for byte.  Also the four paging modes of vmm/trace/gwalk.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <intel-pt.h>
#include <ptv/config.h>
#include <ptv/vmcall.h>
#include "trace/swtrace.h"
#include "trace/treq.h"
#include "fakes/swpt_dec.h"

#define RAM_SIZE (4u << 20)
#include "fakes/fake_ram.h"

/* 4-level: linear 0x7f0000000000 + x -> physical x for x < 2 MiB (one 2 MiB page);
 * linear [0x200000, 0x400000) identity via a 2 MiB page too; CR3 = 0x300000 */
#define LIN_BASE 0x7f0000000000ull
#define CR3      0x300000ull
static void build_tables(void)
{
    memset(ram + CR3, 0, 0x4000);
    put64(CR3 + 8 * ((LIN_BASE >> 39) & 511), (CR3 + 0x1000) | 3);
    put64(CR3 + 0x1000 + 8 * ((LIN_BASE >> 30) & 511), (CR3 + 0x2000) | 3);
    put64(CR3 + 0x2000, 0x0 | 0x83); /* 2 MiB page at physical 0 */
}

static struct gw_paging paging4 = {.cr0 = 0x80000001, .cr3 = CR3, .cr4 = 0x20, .efer = 1 << 10};

static struct swtrace_cpu cpu_at(uint64_t rip, uint64_t rsp)
{
    return (struct swtrace_cpu){.rip = rip,
                                .rsp = rsp,
                                .cs_sel = 0x10,
                                .ctx = {.cr3 = CR3, .cpl = 0, .cs = X86_CODE64},
                                .paging = paging4};
}

#define L(x) (LIN_BASE + (x))

/* the program (physical 0x1000.., linear L(0x1000)..) */
static void load_program(void)
{
    static const struct {
        uint64_t at;
        uint8_t bytes[8];
        unsigned n;
    } code[] = {
        {0x1000, {0xb9, 3, 0, 0, 0}, 5},       /* mov ecx, 3 */
        {0x1005, {0xff, 0xc9}, 2},             /* dec ecx */
        {0x1007, {0x75, 0xfc}, 2},             /* jnz 0x1005 */
        {0x1009, {0xe8, 0x12, 0, 0, 0}, 5},    /* call 0x1020 */
        {0x100e, {0xb8, 0x30, 0x10, 0, 0}, 5}, /* mov eax, imm (value irrelevant) */
        {0x1013, {0xff, 0xe0}, 2},             /* jmp rax */
        {0x1020, {0xc3}, 1},                   /* ret */
        {0x1030, {0xf3, 0xaa}, 2},             /* rep stosb */
        {0x1032, {0x75, 0xfe}, 2},             /* jnz 0x1032 (itself) */
        {0x1034, {0x90}, 1},                   /* nop: an interrupt comes before it */
        {0x1035, {0x90}, 1},                   /* nop */
        {0x1036, {0x90}, 1},                   /* nop, then an unexplained jump */
        {0x1100, {0x48, 0xcf}, 2},             /* iretq (the handler) */
        {0x1040, {0x0f, 0x05}, 2},             /* syscall */
        {0x1042, {0x90}, 1},                   /* nop */
        {0x1043, {0x90}, 1},                   /* nop */
        {0x1200, {0x90}, 1},                   /* nop */
        {0x1201, {0x90}, 1},                   /* nop */
    };
    memset(ram, 0xcc, 0x2000);
    for (unsigned i = 0; i < sizeof(code) / sizeof(code[0]); i++)
        memcpy(ram + code[i].at, code[i].bytes, code[i].n);
    /* the interrupt frame at linear L(0x8000): RIP, CS, RFLAGS, RSP, SS */
    put64(0x8000, L(0x1034));
    put64(0x8008, 0x10);
    put64(0x8010, 0x2);
    put64(0x8018, L(0x9000));
    put64(0x8020, 0x18);
}

struct seq {
    uint64_t ip[256];
    unsigned n;
};

static int read_code(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx)
{
    (void)cr3, (void)ctx;
    unsigned got = 0;
    gw_read(&mem, &paging4, ip, buf, (unsigned)size, &got);
    return got ? (int)got : -1;
}

static int on_insn(uint64_t ip, uint64_t cr3, void *ctx)
{
    (void)cr3;
    struct seq *s = ctx;
    if (s->n < 256)
        s->ip[s->n++] = ip;
    return 0;
}

static uint8_t ring_buf[1 << 16], ring_nocache[1 << 16];

static void run_once(const uint64_t *rips, const bool *mtf, const uint64_t *rsps, unsigned n,
                     uint64_t budget, struct swtrace *t, struct swpt_ring *ring, uint8_t *buf,
                     bool nocache)
{
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true}, .psb_period = 4096};
    *ring = (struct swpt_ring){.buf = buf, .size = sizeof(ring_buf)};
    memset(t, 0, sizeof(*t));
    t->nocache = nocache;
    struct swtrace_cpu c = cpu_at(rips[0], L(0x9000));
    swtrace_start(t, &cfg, ring, &mem, &c, budget);
    for (unsigned i = 1; i < n; i++) {
        c = cpu_at(rips[i], rsps && rsps[i] ? rsps[i] : L(0x9000));
        if (!swtrace_observe(t, &mem, &c, mtf ? mtf[i] : true))
            return;
    }
    swtrace_stop(t);
}

/* the script with the decode cache on (the ring the tests decode) and off: the packets
 * must be the same byte for byte, and so must the tracer's counts */
static void run_script(const uint64_t *rips, const bool *mtf, const uint64_t *rsps, unsigned n,
                       uint64_t budget, struct swtrace *t, struct swpt_ring *ring)
{
    static struct swtrace off;
    struct swpt_ring ring_off;
    run_once(rips, mtf, rsps, n, budget, &off, &ring_off, ring_nocache, true);
    run_once(rips, mtf, rsps, n, budget, t, ring, ring_buf, false);
    assert_int_equal(ring->head, ring_off.head);
    assert_memory_equal(ring_buf, ring_nocache, ring->head);
    assert_memory_equal(&t->st, &off.st, sizeof(off.st));
    assert_int_equal(off.bc.st.insn_hits + off.bc.st.tlb_hits, 0); /* it was off */
}

static void test_path_with_event(void **state)
{
    (void)state;
    build_tables();
    load_program();
    /* what the CPU showed after each step (the RIP an MTF exit would read) */
    static const uint64_t p[] = {
        0x1000, 0x1005, 0x1007, 0x1005, 0x1007, 0x1005, 0x1007, /* loop: taken, taken */
        0x1009,                                                 /* not taken */
        0x1020, 0x100e, 0x1013,                                 /* call, ret, mov */
        0x1030, 0x1030, 0x1030, 0x1032,                         /* jmp rax; 2 REP iterations */
        0x1032, 0x1034,                                         /* jnz itself: taken, not */
        0x1100,                                                 /* interrupt before 0x1034 */
        0x1034, 0x1035, 0x1036,                                 /* iretq, nop, nop */
        0x1200, 0x1201, 0x1202, /* unexplained: the nop at 0x1036 may not have run: a gap */
    };
    unsigned n = sizeof(p) / sizeof(p[0]);
    uint64_t rips[32], rsps[32] = {0};
    for (unsigned i = 0; i < n; i++)
        rips[i] = L(p[i]);
    rsps[17] = L(0x8000); /* the handler runs on the frame */
    struct swtrace t;
    struct swpt_ring ring;
    run_script(rips, NULL, rsps, n, 0, &t, &ring);

    static const uint64_t want[] = {0x1000, 0x1005, 0x1007, 0x1005, 0x1007, 0x1005, 0x1007,
                                    0x1009, 0x1020, 0x100e, 0x1013, 0x1030, 0x1032, 0x1032,
                                    0x1100, 0x1034, 0x1035, 0x1200, 0x1201};
    struct seq s = {0};
    struct swpt_dec_stats st;
    char err[200] = "";
    int rc = swpt_decode(ring_buf, ring.head, read_code, on_insn, &s, &st, err, sizeof(err));
    assert_int_equal(rc, 0);
    if (s.n != sizeof(want) / sizeof(want[0]))
        fail_msg("decoded %u instructions, want %zu", s.n, sizeof(want) / sizeof(want[0]));
    for (unsigned i = 0; i < s.n; i++)
        if (s.ip[i] != L(want[i]))
            fail_msg("instruction %u: decoded %#lx, want %#lx", i, s.ip[i], L(want[i]));
    assert_int_equal(t.st.events, 1);
    assert_int_equal(t.st.unexplained, 1);
    assert_int_equal(swtrace_gaps(&t), 1);
    assert_int_equal(st.overflow, 1);
    assert_int_equal(t.st.rep_iters, 2);
    assert_int_equal(t.st.unreadable, 0);
    assert_int_equal(t.st.steps, 21);    /* every RIP change and the self-branch */
    assert_true(t.bc.st.insn_hits >= 5); /* the loop's second and third passes, the jnz */
}

static void test_no_mtf_no_step(void **state)
{
    (void)state;
    build_tables();
    load_program();
    /* exits that resumed without running anything (mtf = false, same RIP) add nothing;
     * an emulated instruction (RIP moved without MTF) is one step */
    uint64_t rips[] = {L(0x1000), L(0x1000), L(0x1000), L(0x1005)};
    bool mtf[] = {false, false, false, false};
    struct swtrace t;
    struct swpt_ring ring;
    run_script(rips, mtf, NULL, 4, 0, &t, &ring);
    assert_int_equal(t.st.steps, 1);
    struct seq s = {0};
    struct swpt_dec_stats st;
    char err[200];
    assert_int_equal(swpt_decode(ring_buf, ring.head, read_code, on_insn, &s, &st, err, 200), 0);
    assert_int_equal(s.n, 1);
    assert_true(s.ip[0] == L(0x1000));
}

static void test_unreadable_and_budget(void **state)
{
    (void)state;
    build_tables();
    load_program();
    /* code outside every mapping: unreadable, the next step is a gap (OVF), not a guess */
    uint64_t rips[] = {L(0x1036), 0x5000000000ull, L(0x1200), L(0x1201)};
    struct swtrace t;
    struct swpt_ring ring;
    run_script(rips, NULL, NULL, 4, 0, &t, &ring);
    assert_int_equal(t.st.unreadable, 1);
    assert_int_equal(t.st.unexplained, 2); /* the jump there and the way back */
    assert_int_equal(swtrace_gaps(&t), 2);
    struct seq s = {0};
    struct swpt_dec_stats st;
    char err[200];
    assert_int_equal(swpt_decode(ring_buf, ring.head, read_code, on_insn, &s, &st, err, 200), 0);

    /* a budget of 3 instructions closes the window after the third */
    uint64_t loop[] = {L(0x1000), L(0x1005), L(0x1007), L(0x1005), L(0x1007), L(0x1005)};
    run_script(loop, NULL, NULL, 6, 3, &t, &ring);
    assert_true(t.budget_used);
    assert_false(t.on);
    assert_int_equal(t.st.steps, 3);
    memset(&s, 0, sizeof(s));
    assert_int_equal(swpt_decode(ring_buf, ring.head, read_code, on_insn, &s, &st, err, 200), 0);
    assert_int_equal(s.n, 3);
}

/* ---- gwalk: the four paging modes ---- */

static void test_gwalk_modes(void **state)
{
    (void)state;
    uint64_t gpa;
    memset(ram, 0, RAM_SIZE);
    /* no paging */
    struct gw_paging p = {.cr0 = 1};
    assert_int_equal(gw_translate(&mem, &p, 0x123456789ull, &gpa), 0);
    assert_true(gpa == 0x23456789ull);
    /* 32-bit paging: PDE 1 -> 4 MiB page at 0x800000 (PSE), PDE 2 -> table at 0x5000 */
    p = (struct gw_paging){.cr0 = 0x80000001, .cr3 = 0x4000, .cr4 = 0x10};
    uint32_t pde1 = 0x800000 | 0x83, pde2 = 0x5000 | 3, pte = 0x7000 | 3;
    memcpy(ram + 0x4000 + 4, &pde1, 4);
    memcpy(ram + 0x4000 + 8, &pde2, 4);
    memcpy(ram + 0x5000 + 4 * 3, &pte, 4);
    assert_int_equal(gw_translate(&mem, &p, 0x400123, &gpa), 0);
    assert_true(gpa == 0x800123);
    assert_int_equal(gw_translate(&mem, &p, 0x803abc, &gpa), 0);
    assert_true(gpa == 0x7abc);
    assert_int_equal(gw_translate(&mem, &p, 0xc00000, &gpa), GW_E_NOTPRESENT);
    /* PAE: PDPTE 0 -> PD at 0x9000, PDE 0 -> 2 MiB page at 0x200000 */
    p = (struct gw_paging){.cr0 = 0x80000001, .cr3 = 0x8000, .cr4 = 0x20};
    put64(0x8000, 0x9000 | 1);
    put64(0x9000, 0x200000 | 0x83);
    assert_int_equal(gw_translate(&mem, &p, 0x1234, &gpa), 0);
    assert_true(gpa == 0x201234);
    /* 5-level: one more level than 4-level */
    p = (struct gw_paging){.cr0 = 0x80000001, .cr3 = 0xa000, .cr4 = 0x20 | 0x1000, .efer = 1 << 10};
    uint64_t lin = 0x0100000000000000ull + 0x3456;
    put64(0xa000 + 8 * ((lin >> 48) & 511), 0xb000 | 3);
    put64(0xb000 + 8 * ((lin >> 39) & 511), 0xc000 | 3);
    put64(0xc000 + 8 * ((lin >> 30) & 511), 0x40000000ull | 0x83); /* 1 GiB page */
    assert_int_equal(gw_translate(&mem, &p, lin, &gpa), 0);
    assert_true(gpa == 0x40003456ull);
    /* a table outside RAM */
    put64(0xc000 + 8 * ((lin >> 30) & 511), 0x80000000ull | 3);
    assert_int_equal(gw_translate(&mem, &p, lin, &gpa), GW_E_MEM);
    /* writes as the guest could make them: 32-bit paging, PDE 2 (R/W, U) -> PTE 3 */
    p = (struct gw_paging){.cr0 = 0x80010001, .cr3 = 0x4000, .cr4 = 0x10};             /* WP */
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 3, 0, &gpa), GW_E_RIGHTS); /* PTE S */
    pte = 0x7000 | 7;
    memcpy(ram + 0x5000 + 4 * 3, &pte, 4);
    pde2 = 0x5000 | 7;
    memcpy(ram + 0x4000 + 8, &pde2, 4);
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 3, 0, &gpa), 0);
    assert_true(gpa == 0x7abc);
    pte = 0x7000 | 5; /* read-only */
    memcpy(ram + 0x5000 + 4 * 3, &pte, 4);
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 3, 0, &gpa), GW_E_RIGHTS);
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 0, 0, &gpa), GW_E_RIGHTS); /* WP */
    p.cr0 &= ~0x10000ull;
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 0, 0, &gpa), 0); /* WP = 0 */
    pte = 0x7000 | 7;
    memcpy(ram + 0x5000 + 4 * 3, &pte, 4);
    p.cr4 |= 1ull << 21; /* SMAP: a supervisor write to a user page only with AC */
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 0, 0, &gpa), GW_E_RIGHTS);
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 0, 1ull << 18, &gpa), 0);
    pde2 = 0x5000 | 5; /* a read-only directory entry makes the page read-only */
    memcpy(ram + 0x4000 + 8, &pde2, 4);
    assert_int_equal(gw_translate_write(&mem, &p, 0x803abc, 3, 0, &gpa), GW_E_RIGHTS);
    pde2 = 0x5000 | 3;
    memcpy(ram + 0x4000 + 8, &pde2, 4);
    pte = 0x7000 | 3;
    memcpy(ram + 0x5000 + 4 * 3, &pte, 4);
    /* 5-level: a supervisor 1 GiB page, read-only in its PML5 entry */
    p = (struct gw_paging){.cr0 = 0x80010001, .cr3 = 0xa000, .cr4 = 0x20 | 0x1000, .efer = 1 << 10};
    put64(0xc000 + 8 * ((lin >> 30) & 511), 0x40000000ull | 0x83);
    assert_int_equal(gw_translate_write(&mem, &p, lin, 0, 0, &gpa), 0);
    assert_int_equal(gw_translate_write(&mem, &p, lin, 3, 0, &gpa), GW_E_RIGHTS);
    put64(0xa000 + 8 * ((lin >> 48) & 511), 0xb000 | 1);
    assert_int_equal(gw_translate_write(&mem, &p, lin, 0, 0, &gpa), GW_E_RIGHTS);
    /* gw_read across a page boundary stops at the unmapped page and says how far it got */
    p = (struct gw_paging){.cr0 = 0x80000001, .cr3 = 0x4000, .cr4 = 0x10};
    uint8_t buf[16];
    unsigned got = 99;
    assert_int_equal(gw_read(&mem, &p, 0x803ff8, buf, 16, &got), GW_E_NOTPRESENT);
    assert_int_equal(got, 8);
}

/* two processes: A (traced, CR3 filter) and B; both run code of the same fake RAM */
struct obs {
    uint64_t rip; /* offset: linear L(rip) */
    bool b;       /* in process B */
    uint64_t rsp; /* 0: A's / B's usual stack */
};

static void run_two(const struct obs *o, unsigned n, struct swtrace *t, struct swpt_ring *ring,
                    struct seq *s, struct swpt_dec_stats *st)
{
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true, .cr3_match = true, .cr3 = CR3},
                           .psb_period = 4096};
    *ring = (struct swpt_ring){.buf = ring_buf, .size = sizeof(ring_buf)};
    memset(t, 0, sizeof(*t));
    for (unsigned i = 0; i < n; i++) {
        struct swtrace_cpu c =
            cpu_at(L(o[i].rip), o[i].rsp ? L(o[i].rsp) : L(o[i].b ? 0xa000 : 0x9000));
        if (o[i].b)
            c.ctx.cr3 = CR3 + 0x1000; /* only the filter tells them apart */
        if (i == 0)
            swtrace_start(t, &cfg, ring, &mem, &c, 0);
        else
            assert_true(swtrace_observe(t, &mem, &c, true));
    }
    swtrace_stop(t);
    char err[200] = "";
    *s = (struct seq){0};
    if (swpt_decode(ring_buf, ring->head, read_code, on_insn, s, st, err, sizeof(err)))
        fail_msg("%s", err);
}

static void assert_seq(const struct seq *s, const uint64_t *want, unsigned n)
{
    if (s->n != n) {
        for (unsigned i = 0; i < s->n; i++)
            print_message("  decoded %#lx\n", s->ip[i]);
        fail_msg("decoded %u instructions, want %u", s->n, n);
    }
    for (unsigned i = 0; i < n; i++)
        if (s->ip[i] != L(want[i]))
            fail_msg("instruction %u: decoded %#lx, want %#lx", i, s->ip[i], L(want[i]));
}

/*
 * Where the tracer steps with the trap flag, an interrupt the CPU delivers without a VM exit
 * takes the traced process away unseen (its handler and whatever it switches to run
 * unstepped); the next exit comes in other code.  That departure is judged when the process
 * runs again: back where it was left, or one instruction on (the first instruction after the
 * IRET runs before the single-step #DB), nothing is lost and the decode has no gap; anywhere
 * else, or on another stack (another thread), OVF.
 */
static void test_departure(void **state)
{
    struct swtrace t;
    struct swpt_ring ring;
    struct seq s;
    struct swpt_dec_stats st;

    (void)state;
    build_tables();
    load_program();
    /* A: nop 0x1034 ran; then unseen away to B (0x1200, 0x1201), back in A after 0x1035 ran */
    static const struct obs one_on[] = {{0x1034, 0, 0}, {0x1035, 0, 0}, {0x1200, 1, 0},
                                        {0x1201, 1, 0}, {0x1036, 0, 0}, {0x1037, 0, 0}};
    run_two(one_on, 6, &t, &ring, &s, &st);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1035, 0x1036}, 3);
    assert_int_equal(st.overflow, 0);
    assert_int_equal(swtrace_gaps(&t), 0);
    assert_int_equal(t.st.departures, 1);
    /* back where it was left (0x1035 had not run) */
    static const struct obs same[] = {{0x1034, 0, 0}, {0x1035, 0, 0}, {0x1200, 1, 0},
                                      {0x1201, 1, 0}, {0x1035, 0, 0}, {0x1036, 0, 0}};
    run_two(same, 6, &t, &ring, &s, &st);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1035}, 2);
    assert_int_equal(st.overflow, 0);
    /* back anywhere else: OVF, and the decode resumes there */
    static const struct obs elsewhere[] = {{0x1034, 0, 0}, {0x1035, 0, 0}, {0x1200, 1, 0},
                                           {0x1201, 1, 0}, {0x1034, 0, 0}, {0x1035, 0, 0}};
    run_two(elsewhere, 6, &t, &ring, &s, &st);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1034}, 2);
    assert_int_equal(st.overflow, 1);
    assert_int_equal(swtrace_gaps(&t), 1);
    /* one instruction on, but on another stack: another thread of A ran: OVF */
    static const struct obs thread[] = {{0x1034, 0, 0}, {0x1035, 0, 0},       {0x1200, 1, 0},
                                        {0x1201, 1, 0}, {0x1036, 0, 0x40000}, {0x1037, 0, 0x40000}};
    run_two(thread, 6, &t, &ring, &s, &st);
    assert_int_equal(st.overflow, 1);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1036}, 2);
    /* a system call the tracer saw leave; back unseen one instruction after its return */
    static const struct obs sys[] = {
        {0x1040, 0, 0}, {0x1200, 1, 0}, {0x1201, 1, 0}, {0x1043, 0, 0}, {0x1044, 0, 0}};
    run_two(sys, 5, &t, &ring, &s, &st);
    assert_seq(&s, (const uint64_t[]){0x1040, 0x1042, 0x1043}, 3);
    assert_int_equal(st.overflow, 0);
    /* B runs the same code at the same addresses: a step to B's next instruction is not A's
     * instruction running (the context changed under a plain NOP) */
    static const struct obs twin[] = {
        {0x1034, 0, 0}, {0x1035, 1, 0}, {0x1036, 1, 0}, {0x1035, 0, 0}, {0x1036, 0, 0}};
    run_two(twin, 5, &t, &ring, &s, &st);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1035}, 2);
    assert_int_equal(st.overflow, 0);
    assert_int_equal(t.st.departures, 1);
    /* B's steps in between, seen or not, leave no packet and do not settle it */
    static const struct obs b_only[] = {{0x1200, 1, 0}, {0x1201, 1, 0}, {0x1202, 1, 0}};
    run_two(b_only, 3, &t, &ring, &s, &st);
    assert_int_equal(s.n, 0);
    assert_int_equal(st.overflow, 0);
}

/*
 * What a window reports is its own stream.  Its gaps (swtrace_gaps: what TRACE_STATUS and
 * TRACE_STOP give at any CPL, the dump's ovf= and the VMM's closing line) are the OVF packets
 * in it, which is what a PT decoder finds there, packet by packet and as libipt's overflow
 * events (ptvisor-trace summary's "overflows").  A CPL 3 window: the process A (CPL 3, CR3),
 * the kernel in A's address space (CPL 0), another process B (CPL 3, another CR3).
 */
enum who { IN_A, IN_K, IN_B };
struct ob {
    uint64_t rip; /* offset: linear L(rip) */
    enum who who;
    uint64_t rsp; /* 0: the usual stack of who (no frame on it) */
};

static struct swtrace_cpu cpu_of(const struct ob *o)
{
    static const uint64_t stack[] = {[IN_A] = 0x9000, [IN_K] = 0x9800, [IN_B] = 0xa000};
    const bool k = o->who == IN_K;
    struct swtrace_cpu c = cpu_at(L(o->rip), L(o->rsp ? o->rsp : stack[o->who]));
    c.cs_sel = k ? 0x10 : 0x33;
    c.ctx.cpl = k ? 0 : 3;
    c.ctx.cr3 = o->who == IN_B ? CR3 + 0x1000 : CR3;
    return c;
}

/* the window A opens from CPL 3 (the CPL 3 rule lets it through): user mode, A's CR3 */
static struct swpt_cfg own_cfg(uint32_t flags, uint64_t start_ip)
{
    const struct ptv_config pc = {.psb_period = 4096, .trace_filter = PTV_CFG_TRACE_ALL};
    const struct trace_req rq = {.flags = PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF | flags,
                                 .caller_cr3 = CR3,
                                 .start_ip = start_ip,
                                 .user = true};
    struct swpt_cfg cfg;
    const char *why = NULL;
    assert_int_equal(trace_req_user_check(&rq, 0, &why), 0);
    assert_int_equal(trace_req_swpt(&rq, &pc, &cfg, &why), 0);
    return cfg;
}

static uint8_t own_buf[2][1 << 12];

static void run_own(const struct swpt_cfg *cfg, const struct ob *o, unsigned n, struct swtrace *t,
                    struct swpt_ring *ring, unsigned which)
{
    memset(own_buf[which], 0, sizeof(own_buf[which]));
    *ring = (struct swpt_ring){.buf = own_buf[which], .size = sizeof(own_buf[which])};
    memset(t, 0, sizeof(*t));
    for (unsigned i = 0; i < n; i++) {
        struct swtrace_cpu c = cpu_of(&o[i]);
        if (i == 0)
            swtrace_start(t, cfg, ring, &mem, &c, 0);
        else
            assert_true(swtrace_observe(t, &mem, &c, true));
    }
    swtrace_stop(t);
}

/* the gaps reported == OVF packets in the stream == libipt's overflow events; the decode */
static uint64_t gaps_agree(const struct swtrace *t, const struct swpt_ring *ring, struct seq *s)
{
    unsigned counts[SWPT_PKT_TYPES];
    struct swpt_dec_stats st;
    char err[200] = "";
    assert_true(ring->head <= ring->size);
    if (swpt_pkt_scan(ring->buf, ring->head, counts, NULL, err, sizeof(err)))
        fail_msg("%s", err);
    *s = (struct seq){0};
    if (swpt_decode(ring->buf, ring->head, read_code, on_insn, s, &st, err, sizeof(err)))
        fail_msg("%s", err);
    if (swtrace_gaps(t) != counts[ppt_ovf] || st.overflow != counts[ppt_ovf])
        fail_msg("gaps reported %lu, OVF packets in the stream %u, overflows decoded %lu",
                 (unsigned long)swtrace_gaps(t), counts[ppt_ovf], (unsigned long)st.overflow);
    assert_int_equal(t->pt.overflows, counts[ppt_ovf]);
    return swtrace_gaps(t);
}

/*
 * A loss the tracer suffers where the window is not (the kernel's, another process's steps it
 * could not explain) is not the window's: its stream, bytes and gaps are those of the same run
 * in which the tracer saw every step there.  Only where A's own code runs again by a way the
 * tracer did not see is a gap A's.
 */
static void test_loss_outside_window(void **state)
{
    static struct swtrace t, ref;
    struct swpt_ring ring, ring_ref;
    struct seq s;
    (void)state;
    build_tables();
    load_program();
    /* the frame of an interrupt after A's NOP at 0x1035 completed (saved RIP 0x1036) */
    put64(0x8100, L(0x1036));
    put64(0x8108, 0x33);
    put64(0x8110, 0x202);
    put64(0x8118, L(0x9000));
    put64(0x8120, 0x2b);
    const struct swpt_cfg cfg = own_cfg(0, 0);

    /* A is interrupted after a NOP (a trap the frame shows: no departure pending), the kernel
     * takes a step the tracer cannot explain (0x1201 -> 0x1034), then IRETs back to A */
    static const struct ob lossy[] = {{0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1200, IN_K, 0x8100},
                                      {0x1201, IN_K, 0}, {0x1034, IN_K, 0}, {0x1035, IN_K, 0},
                                      {0x1036, IN_K, 0}, {0x1037, IN_K, 0}, {0x1100, IN_K, 0},
                                      {0x1036, IN_A, 0}, {0x1037, IN_A, 0}};
    /* the same with the kernel's way seen (INT3 at 0x1202 explains any step) */
    static const struct ob seen[] = {{0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1200, IN_K, 0x8100},
                                     {0x1201, IN_K, 0}, {0x1202, IN_K, 0}, {0x1034, IN_K, 0},
                                     {0x1035, IN_K, 0}, {0x1036, IN_K, 0}, {0x1037, IN_K, 0},
                                     {0x1100, IN_K, 0}, {0x1036, IN_A, 0}, {0x1037, IN_A, 0}};
    run_own(&cfg, lossy, sizeof(lossy) / sizeof(lossy[0]), &t, &ring, 0);
    run_own(&cfg, seen, sizeof(seen) / sizeof(seen[0]), &ref, &ring_ref, 1);
    assert_int_equal(t.st.events, 1);
    assert_int_equal(ring.head, ring_ref.head);
    assert_memory_equal(own_buf[0], own_buf[1], ring.head);
    assert_int_equal(gaps_agree(&t, &ring, &s), 0);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1035, 0x1036}, 3);
    assert_int_equal(t.pt.traced, ref.pt.traced);

    /* A in a system call (a departure the tracer saw), the kernel's unexplained step, then
     * the kernel IRETs to A elsewhere (a signal handler): the IRET was seen, so A's path is
     * known; what the kernel did unseen is not A's gap */
    static const struct ob sys_lossy[] = {{0x1040, IN_A, 0}, {0x1200, IN_K, 0}, {0x1201, IN_K, 0},
                                          {0x1034, IN_K, 0}, {0x1035, IN_K, 0}, {0x1036, IN_K, 0},
                                          {0x1037, IN_K, 0}, {0x1100, IN_K, 0}, {0x1200, IN_A, 0},
                                          {0x1201, IN_A, 0}, {0x1202, IN_A, 0}};
    static const struct ob sys_seen[] = {{0x1040, IN_A, 0}, {0x1200, IN_K, 0}, {0x1201, IN_K, 0},
                                         {0x1202, IN_K, 0}, {0x1034, IN_K, 0}, {0x1035, IN_K, 0},
                                         {0x1036, IN_K, 0}, {0x1037, IN_K, 0}, {0x1100, IN_K, 0},
                                         {0x1200, IN_A, 0}, {0x1201, IN_A, 0}, {0x1202, IN_A, 0}};
    run_own(&cfg, sys_lossy, sizeof(sys_lossy) / sizeof(sys_lossy[0]), &t, &ring, 0);
    run_own(&cfg, sys_seen, sizeof(sys_seen) / sizeof(sys_seen[0]), &ref, &ring_ref, 1);
    assert_int_equal(t.st.departures, 1);
    assert_int_equal(ring.head, ring_ref.head);
    assert_memory_equal(own_buf[0], own_buf[1], ring.head);
    assert_int_equal(gaps_agree(&t, &ring, &s), 0);
    assert_seq(&s, (const uint64_t[]){0x1040, 0x1200, 0x1201}, 3);

    /* another process's unexplained steps, A back where its system call returns */
    static const struct ob other[] = {{0x1040, IN_A, 0}, {0x1200, IN_K, 0}, {0x1034, IN_B, 0},
                                      {0x1200, IN_B, 0}, {0x1036, IN_B, 0}, {0x1042, IN_A, 0},
                                      {0x1043, IN_A, 0}};
    run_own(&cfg, other, sizeof(other) / sizeof(other[0]), &t, &ring, 0);
    assert_int_equal(gaps_agree(&t, &ring, &s), 0);
    assert_seq(&s, (const uint64_t[]){0x1040, 0x1042}, 2);

    /* A's own code reached by a way the tracer did not see (the kernel's NOP cannot go to A):
     * that is A's gap, one OVF, and the kernel's unexplained step before it adds none */
    static const struct ob own_loss[] = {
        {0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1200, IN_K, 0x8100}, {0x1201, IN_K, 0},
        {0x1034, IN_K, 0}, {0x1035, IN_K, 0}, {0x1036, IN_A, 0},      {0x1037, IN_A, 0}};
    run_own(&cfg, own_loss, sizeof(own_loss) / sizeof(own_loss[0]), &t, &ring, 0);
    assert_int_equal(gaps_agree(&t, &ring, &s), 1);
    assert_seq(&s, (const uint64_t[]){0x1034, 0x1035, 0x1036}, 3);
}

/*
 * An event from traced code into code the filter leaves out (a user-only window: a page fault
 * or an interrupt whose handler is the kernel's), as hardware PT writes it: FUP at the
 * instruction it came before + TIP.PGD, then TIP.PGE at the same IP when the handler returns
 * there.  Seen two ways by the tracer, the same packets either way:
 *   - MTF steps: the handler's first instruction, its frame on the stack (saved RIP);
 *   - trap-flag steps: the handler runs unstepped (the CPU cleared TF) and is first seen at
 *     its KPTI MOV to CR3, with no frame at RSP (trace/shim/trace_step.c: CR3-load exiting is on in a
 *     one-process window); from its MOV back the way out is stepped, the IRET too.
 * Both count it as one event of the window (what its owner is told), and libipt decodes the
 * stream as one asynchronous disable at that instruction.
 */
static void test_event_two_ways(void **state)
{
    static struct swtrace t, ref;
    struct swpt_ring ring, ring_ref;
    struct seq s;
    (void)state;
    build_tables();
    load_program();
    ram[0x1202] = 0xcc; /* int3: the handler's way to its IRET, any step is explained */
    /* the fault frame before A's NOP at 0x1035: RIP, CS, RFLAGS, RSP, SS */
    put64(0x8200, L(0x1035));
    put64(0x8208, 0x33);
    put64(0x8210, 0x202);
    put64(0x8218, L(0x9000));
    put64(0x8220, 0x2b);
    /* the filters a handler can be out of: CPL (a user-only window on A's CR3, ptvisor-ctl
     * trace's), an IP range (A's code page; kernel and user).  (Out of a CR3 filter that traces
     * the kernel too, a KPTI handler begins in context, under the user CR3, and only its MOV to
     * CR3 leaves it: with trap-flag steps its first instructions run unseen, a gap.) */
    struct swpt_cfg cfg[2];
    cfg[0] = own_cfg(0, 0);
    cfg[1] = (struct swpt_cfg){.filter = {.user = true, .kernel = true, .nranges = 1},
                               .psb_period = 4096};
    cfg[1].filter.range[0].lo = L(0x1000);
    cfg[1].filter.range[0].hi = L(0x10ff);
    static const char *const name[] = {"CPL", "IP range"};
    for (unsigned f = 0; f < 2; f++) {
        const enum who k = IN_K;
        const struct ob mtf[] = {{0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1200, k, 0x8200},
                                 {0x1201, k, 0},    {0x1202, k, 0},    {0x1100, k, 0},
                                 {0x1035, IN_A, 0}, {0x1036, IN_A, 0}};
        const struct ob tf[] = {{0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1201, k, 0},
                                {0x1202, k, 0},    {0x1100, k, 0},    {0x1035, IN_A, 0},
                                {0x1036, IN_A, 0}};
        assert_int_equal(swpt_cfg_check(&cfg[f], NULL), 0);
        run_own(&cfg[f], mtf, sizeof(mtf) / sizeof(mtf[0]), &ref, &ring_ref, 1);
        run_own(&cfg[f], tf, sizeof(tf) / sizeof(tf[0]), &t, &ring, 0);
        /* out of an IP range (in context), TIP.PGD carries the handler's IP: the MTF way has it,
         * the trap-flag way first sees the handler further on and suppresses it (one byte
         * instead of three; decoders take both); the rest is the same */
        const unsigned slack = f == 1 ? 2 : 0;
        if (ref.pt.win_events != 1 || t.pt.win_events != 1 || ring.head + slack != ring_ref.head ||
            (!slack && memcmp(own_buf[0], own_buf[1], ring.head)))
            fail_msg("%s filter: the MTF way %lu events, %lu bytes; the trap-flag way %lu events, "
                     "%lu bytes, %s",
                     name[f], (unsigned long)ref.pt.win_events, (unsigned long)ring_ref.head,
                     (unsigned long)t.pt.win_events, (unsigned long)ring.head,
                     ring.head + slack == ring_ref.head ? "other bytes" : "other lengths");
        assert_int_equal(gaps_agree(&t, &ring, &s), 0);
        assert_seq(&s, (const uint64_t[]){0x1034, 0x1035}, 2); /* 0x1035 once: after it */
        struct swpt_dec_stats st;
        char err[200] = "";
        assert_int_equal(swpt_decode_ranges(ring.buf, ring.head, read_code, on_insn,
                                            &(struct seq){0}, &st, err, sizeof(err),
                                            (const uint64_t(*)[2]) & cfg[f].filter.range[0].lo,
                                            cfg[f].filter.nranges),
                         0);
        assert_int_equal(st.async_disabled, 2); /* the event, and the window closing at 0x1036 */
        assert_int_equal(st.first_async_disabled_at, L(0x1035));
        assert_int_equal(st.overflow, 0);
    }
}

/*
 * A window with a start trigger (ptvisor-ctl trace: silent until the program's entry point)
 * that the tracer could not follow while it was armed: nothing was traced then, so nothing was
 * lost; every report says 0 gaps, as the stream and its decode do.  A loss after the trigger
 * fired is one gap in each.
 */
static void test_gaps_armed_window(void **state)
{
    static struct swtrace t;
    struct swpt_ring ring;
    struct seq s;
    (void)state;
    build_tables();
    load_program();
    const struct swpt_cfg cfg = own_cfg(PTV_TRACE_F_START_IP, L(0x1200));
    /* A before its entry point (armed), an unexplained step to the kernel, back to A at the
     * entry (the trigger fires there) */
    static const struct ob armed[] = {{0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1201, IN_K, 0},
                                      {0x1202, IN_K, 0}, {0x1100, IN_K, 0}, {0x1200, IN_A, 0},
                                      {0x1201, IN_A, 0}, {0x1202, IN_A, 0}};
    run_own(&cfg, armed, sizeof(armed) / sizeof(armed[0]), &t, &ring, 0);
    assert_false(t.pt.armed);
    assert_int_equal(gaps_agree(&t, &ring, &s), 0);
    assert_seq(&s, (const uint64_t[]){0x1200, 0x1201}, 2);

    /* ... and then a step of A's the tracer cannot explain: one gap, reported and decoded */
    static const struct ob armed_then_lost[] = {
        {0x1034, IN_A, 0}, {0x1035, IN_A, 0}, {0x1201, IN_K, 0},
        {0x1202, IN_K, 0}, {0x1100, IN_K, 0}, {0x1200, IN_A, 0},
        {0x1201, IN_A, 0}, {0x1034, IN_A, 0}, {0x1035, IN_A, 0}};
    run_own(&cfg, armed_then_lost, sizeof(armed_then_lost) / sizeof(armed_then_lost[0]), &t, &ring,
            0);
    assert_int_equal(gaps_agree(&t, &ring, &s), 1);
    assert_seq(&s, (const uint64_t[]){0x1200, 0x1034}, 2); /* 0x1201 may not have run */
}

/*
 * Blocks with PacketEn 0: only where the filter leaves the context itself out.  Traced code the
 * IP range leaves out, with an unseen departure pending, is stepped: the step that runs traced
 * code again judges the departure (a block into the range would pass it unjudged).
 */
static void test_block_out_of_context(void **state)
{
    static struct swtrace t;
    static uint8_t buf[1 << 12];
    struct swpt_ring ring = {.buf = buf, .size = sizeof(buf)};
    struct swtrace_block b;
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true, .cr3_match = true, .cr3 = CR3},
                           .psb_period = 4096};
    cfg.filter.nranges = 1;
    cfg.filter.range[0].lo = L(0x1000);
    cfg.filter.range[0].hi = L(0x10ff);
    (void)state;
    build_tables();
    load_program();
    memset(&t, 0, sizeof(t));
    struct swtrace_cpu c = cpu_at(L(0x1034), L(0x9000));
    swtrace_start(&t, &cfg, &ring, &mem, &c, 0);
    c.rip = L(0x1035);
    assert_true(swtrace_observe(&t, &mem, &c, true));
    assert_true(t.pt.pkt_en);
    c.rip = L(0x1200); /* a NOP cannot go there: unseen, out of the range, in A's context */
    assert_true(swtrace_observe(&t, &mem, &c, true));
    assert_false(t.pt.pkt_en);
    assert_int_equal(t.st.departures, 1);
    assert_int_equal(swtrace_block_plan(&t, &mem, &c, &b), 0); /* stepped */
    /* the same code in B (another CR3: the context is left out): a block, the NOP to the INT3 */
    c.rip = L(0x1201);
    c.ctx.cr3 = CR3 + 0x1000;
    assert_true(swtrace_observe(&t, &mem, &c, true));
    assert_int_equal(swtrace_block_plan(&t, &mem, &c, &b), 1);
    assert_int_equal(b.end, L(0x1202));
}

/* ---- block stepping's tables (swblock.c, bcache.c), paging off: linear = physical ---- */

static const struct swpt_cfg blk_cfg = {.filter = {.user = true, .kernel = true},
                                        .psb_period = 256};

static struct swtrace_cpu flat_cpu(uint64_t rip)
{
    return (struct swtrace_cpu){.rip = rip,
                                .rsp = 0x3800,
                                .cs_sel = 8,
                                .ctx = {.cr3 = 0, .cpl = 0, .cs = X86_CODE64},
                                .paging = {.cr0 = 1}};
}

/* a block of 64 bytes kept with the 64-entry instruction table inside struct swtrace: its
 * ending RET's entry evicted its first NOP's, so the keep decodes that NOP from the block's
 * 64 bytes (ASan: the copy is of at most X86_MAX_INSN bytes) */
static void test_block_keep_decodes_long_run(void **state)
{
    (void)state;
    static uint8_t blk_table[64 * sizeof(struct bc_blk_entry)];
    static uint8_t buf[4096];
    static struct swtrace t;
    static const uint8_t nop9[9] = {0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0};
    memset(ram, 0, 0x4000);
    for (int i = 0; i < 7; i++)
        memcpy(ram + 0x1001 + 9 * i, nop9, 9);
    ram[0x1040] = 0xc3; /* ret */
    struct swtrace_cpu c = flat_cpu(0x1001);
    struct swpt_ring ring = {.buf = buf, .size = sizeof(buf)};
    struct swtrace_block b;
    memset(&t, 0, sizeof(t));
    swtrace_block_mem(&t, blk_table, sizeof(blk_table)); /* no swtrace_cache_mem */
    swtrace_start(&t, &blk_cfg, &ring, &mem_map, &c, 0);
    assert_int_equal(swtrace_block_plan(&t, &mem_map, &c, &b), 7);
    assert_int_equal(t.bc.st.blk_kept, 1);
    assert_int_equal(b.end, 0x1040);
}

/*
 * The lead's kind decides whether its block may hold it (a loop's JMP may lead the block
 * that ends at it, a CALL may not); the lead is what settle read at the breakpoint.  Another
 * vCPU writes a CALL over a loop's JMP while the block runs and the JMP back after settle
 * read it: the successor table must not give back the JMP's block for the CALL.
 */
static void test_block_kept_lead_kind(void **state)
{
    (void)state;
    static uint8_t blk_table[64 * sizeof(struct bc_blk_entry)];
    static struct bc_insn_entry it[2][256];
    static uint8_t buf[2][4096];
    static struct swtrace t[2];
    static const uint8_t jmp[5] = {0xeb, 0xfd, 0, 0, 0};           /* jmp 0x1100 */
    static const uint8_t call[5] = {0xe8, 0xfa, 0xff, 0xff, 0xff}; /* call 0x1100 */
    memset(ram, 0, 0x4000);
    ram[0x1100] = 0x90;
    memcpy(ram + 0x1101, jmp, 5);
    struct swtrace_cpu c = flat_cpu(0x1101);
    struct swtrace_regs r = {.rflags = 2};
    struct swtrace_block b[2];
    struct swpt_ring ring[2];
    for (int i = 0; i < 2; i++) { /* 0: with the tables, 1: without */
        memset(&t[i], 0, sizeof(t[i]));
        ring[i] = (struct swpt_ring){.buf = buf[i], .size = sizeof(buf[i])};
        swtrace_cache_mem(&t[i], it[i], sizeof(it[i]));
        if (i == 0)
            swtrace_block_mem(&t[i], blk_table, sizeof(blk_table));
        swtrace_start(&t[i], &blk_cfg, &ring[i], &mem_map, &c, 0);
        assert_true(swtrace_block_next(&t[i], &mem_map, &c, &r, &b[i]));
        assert_true(b[i].lead_rf); /* the loop: [nop] led by the JMP at its end */
    }
    memcpy(ram + 0x1101, call, 5);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(swtrace_block_settle(&t[i], &mem_map, &c, &b[i]), SWTRACE_SETTLED);
        assert_int_equal(t[i].insn.branch, X86_BR_CALL_DIRECT);
    }
    memcpy(ram + 0x1101, jmp, 5);
    for (int i = 0; i < 2; i++)
        assert_false(swtrace_block_next(&t[i], &mem_map, &c, &r, &b[i]));
    assert_int_equal(t[0].st.next_hits, 0);
    /* the JMP read again: the kept block serves it */
    for (int i = 0; i < 2; i++) {
        c.rip = 0x1100; /* the CALL stepped, then the NOP */
        swtrace_observe(&t[i], &mem_map, &c, true);
        c.rip = 0x1101;
        swtrace_observe(&t[i], &mem_map, &c, true);
        assert_int_equal(t[i].insn.branch, X86_BR_JMP_DIRECT);
        assert_true(swtrace_block_next(&t[i], &mem_map, &c, &r, &b[i]));
        assert_true(b[i].lead_rf);
    }
    assert_int_equal(t[0].st.next_hits, 1);
    assert_false(b[0].noted); /* nobody said its pages were noted */

    /* noted under this CR3: the next hit says so; under another, or never: it does not */
    swtrace_block_noted(&t[0], c.ctx.cr3);
    assert_int_equal(swtrace_block_settle(&t[0], &mem_map, &c, &b[0]), SWTRACE_SETTLED);
    assert_true(swtrace_block_next(&t[0], &mem_map, &c, &r, &b[0]));
    assert_true(b[0].noted);
    swtrace_block_noted(&t[0], c.ctx.cr3 + 0x1000);
    assert_int_equal(swtrace_block_settle(&t[0], &mem_map, &c, &b[0]), SWTRACE_SETTLED);
    assert_true(swtrace_block_next(&t[0], &mem_map, &c, &r, &b[0]));
    assert_false(b[0].noted);
    assert_int_equal(t[0].st.next_hits, 3);
    assert_int_equal(swtrace_block_settle(&t[1], &mem_map, &c, &b[1]), SWTRACE_SETTLED);
    swtrace_block_noted(&t[1], c.ctx.cr3); /* no successor table: nothing to say it to */
    assert_true(swtrace_block_next(&t[1], &mem_map, &c, &r, &b[1]));
    assert_false(b[1].noted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_with_event),
        cmocka_unit_test(test_no_mtf_no_step),
        cmocka_unit_test(test_unreadable_and_budget),
        cmocka_unit_test(test_gwalk_modes),
        cmocka_unit_test(test_departure),
        cmocka_unit_test(test_loss_outside_window),
        cmocka_unit_test(test_event_two_ways),
        cmocka_unit_test(test_gaps_armed_window),
        cmocka_unit_test(test_block_out_of_context),
        cmocka_unit_test(test_block_keep_decodes_long_run),
        cmocka_unit_test(test_block_kept_lead_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
