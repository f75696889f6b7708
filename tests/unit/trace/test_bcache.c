/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's decode cache (vmm/trace/bcache.c) must never answer otherwise
 * than a fresh guest page walk and decode would, whatever the guest does to its code
 * and page tables between two steps (within the rule of bcache.h):
 *   - the decode depends on the instruction's own bytes only (the premise of keeping
 *     them in the entry): x86_classify over 15 bytes and over exactly len bytes agree;
 *   - self-modifying code: bytes changed between two fetches give the new class, in
 *     bc_fetch and in the stepping logic (swtrace), whose packets equal the uncached
 *     run's byte for byte;
 *   - a code page remapped under the same CR3: the new bytes after INVLPG, after a MOV
 *     CR3 of the same value, after a CR3 / CR4 change; an unmapped page mapped later
 *     is seen without any invalidation (failed walks are not kept);
 *   - a random mix of all of these against a fresh walk + decode after every fetch;
 *   - X86_F_INVLPG (the classifier's flag the cache flushes on) against Zydis;
 *   - the block table: a block is given back only while its bytes are the bytes there (a
 *     patched instruction, a remapped page, another code size miss), and never kept with
 *     lengths its own bytes do not decode to (code changed between the decode and the keep).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>
#include <cmocka.h>
#include "trace/bcache.h"
#include "trace/swtrace.h"

#define RAM_SIZE (8u << 20)
#include "fakes/fake_ram.h"

/* 4-level paging, 4 KiB pages: linear LIN + 4096 * i -> PTE i of the table at PT.
 * CR3 and CR3B are two PML4s sharing the lower levels (the same mappings). */
#define LIN  0x7f0000000000ull
#define CR3  0x600000ull
#define CR3B 0x604000ull
#define PDPT 0x601000ull
#define PD   0x602000ull
#define PT   0x603000ull
#define CODE 0x100000ull /* physical pages of code: CODE + 4096 * k */

static const struct gw_paging paging = {
    .cr0 = 0x80000001, .cr3 = CR3, .cr4 = 0x20, .efer = 1 << 10};

static void map(unsigned i, uint64_t phys)
{
    put64(PT + 8 * i, phys | 3);
}

static void unmap(unsigned i)
{
    put64(PT + 8 * i, 0);
}

static void build_tables(void)
{
    memset(ram + CR3, 0, 0x5000);
    put64(CR3 + 8 * ((LIN >> 39) & 511), PDPT | 3);
    put64(CR3B + 8 * ((LIN >> 39) & 511), PDPT | 3);
    put64(PDPT + 8 * ((LIN >> 30) & 511), PD | 3);
    put64(PD + 8 * ((LIN >> 21) & 511), PT | 3);
    for (unsigned i = 0; i < 16; i++)
        map(i, CODE + 4096ull * i);
}

/* what the cache reads through: `mem` (a copy per read), or `mem_map` (pages in place) for
 * the second run of every test (main) */
static const struct gw_mem *M = &mem;

/* the answer without a cache */
static bool fresh(const struct gw_paging *p, uint64_t lin, enum x86_code_size cs,
                  struct x86_insn *out)
{
    uint8_t code[X86_MAX_INSN];
    unsigned got = 0;
    gw_read(&mem, p, lin, code, sizeof(code), &got);
    return got && x86_classify(code, got, cs, out) == 0;
}

static void same_as_fresh(struct bcache *bc, const struct gw_paging *p, uint64_t lin,
                          enum x86_code_size cs, const char *what)
{
    struct x86_insn a = {0}, b = {0};
    /* as the stepping logic fetches: the inline common case, else the full fetch */
    bool va = bc_fetch_hot(bc, M, p, lin, cs, &a) || bc_fetch(bc, M, p, lin, cs, &a);
    bool vb = fresh(p, lin, cs, &b);
    if (va != vb || (va && memcmp(&a, &b, sizeof(a)) != 0))
        fail_msg("%s: at %#lx code%d cached %d len %u %s flags %#x rel %d, fresh %d len %u %s "
                 "flags %#x rel %d",
                 what, (unsigned long)lin, 16 << cs, va, a.len, x86_branch_name(a.branch), a.flags,
                 a.rel, vb, b.len, x86_branch_name(b.branch), b.flags, b.rel);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- the premise: the decode reads no byte past the instruction ---- */

static void test_decode_reads_only_its_bytes(void **state)
{
    (void)state;
    uint64_t n = 0;
    for (unsigned k = 0; k < 2000000; k++) {
        uint8_t b[X86_MAX_INSN];
        for (unsigned i = 0; i < sizeof(b); i++)
            b[i] = (uint8_t)rnd();
        /* bias towards the escapes and prefixes that make long instructions */
        if (k & 1)
            b[0] = (uint8_t[]){0x0f, 0x66, 0xc4, 0x62, 0x8f, 0xf3, 0x48, 0xc5}[k >> 1 & 7];
        enum x86_code_size cs = (enum x86_code_size)(k % 3);
        struct x86_insn full, exact;
        if (x86_classify(b, sizeof(b), cs, &full) != 0)
            continue;
        n++;
        if (x86_classify(b, full.len, cs, &exact) != 0 || memcmp(&full, &exact, sizeof(full)))
            fail_msg("code%d %02x %02x %02x %02x: 15 bytes give len %u, exactly len bytes do not",
                     16 << cs, b[0], b[1], b[2], b[3], full.len);
        /* and different bytes after the end change nothing */
        uint8_t c[X86_MAX_INSN];
        memcpy(c, b, sizeof(c));
        for (unsigned i = full.len; i < sizeof(c); i++)
            c[i] ^= 0xa5;
        if (x86_classify(c, sizeof(c), cs, &exact) != 0 || memcmp(&full, &exact, sizeof(full)))
            fail_msg("code%d %02x %02x: bytes after the instruction changed its decode", 16 << cs,
                     b[0], b[1]);
    }
    assert_true(n > 1000000);
}

/* ---- self-modifying code ---- */

static void test_self_modifying(void **state)
{
    (void)state;
    struct bcache bc;
    struct x86_insn in;
    build_tables();
    memset(ram + CODE, 0x90, 4096);
    bc_init(&bc, true, NULL, 0);

    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x10, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x10, X86_CODE64, &in));
    assert_int_equal(bc.st.insn_hits, 1);
    /* nop -> jmp rel8 (static key / alternatives patch the same way) */
    ram[CODE + 0x10] = 0xeb;
    ram[CODE + 0x11] = 0x20;
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x10, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_JMP_DIRECT);
    assert_int_equal(in.len, 2);
    assert_int_equal(in.rel, 0x20);
    assert_int_equal(bc.st.insn_stale, 1);
    /* only the displacement changes: same class, new target */
    ram[CODE + 0x11] = 0x30;
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x10, X86_CODE64, &in));
    assert_int_equal(in.rel, 0x30);
    /* a 5-byte NOP becomes a CALL (ftrace): the entry is replaced */
    memcpy(ram + CODE + 0x40, "\x0f\x1f\x44\x00\x00", 5);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x40, X86_CODE64, &in));
    assert_int_equal(in.len, 5);
    assert_int_equal(in.branch, X86_BR_NONE);
    memcpy(ram + CODE + 0x40, "\xe8\x10\x00\x00\x00", 5);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x40, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_CALL_DIRECT);
    /* the same bytes in another code size are another instruction */
    memcpy(ram + CODE + 0x80, "\x48\x90", 2); /* REX.W nop in 64-bit; dec eax; nop in 32 */
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x80, X86_CODE64, &in));
    assert_int_equal(in.len, 2);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x80, X86_CODE32, &in));
    assert_int_equal(in.len, 1);
}

/* ---- page tables changed under the same CR3 ---- */

static void test_remap_same_cr3(void **state)
{
    (void)state;
    struct bcache bc;
    struct x86_insn in;
    static const struct x86_insn invlpg = {.len = 3, .flags = X86_F_INVLPG};
    static const struct x86_insn movcr3 = {.len = 3, .flags = X86_F_MOV_CR | X86_F_MOV_CR3};
    static const struct x86_insn nop = {.len = 1};
    build_tables();
    memset(ram + CODE, 0x90, 4096);          /* page 0: nops */
    memset(ram + CODE + 0x5000, 0xc3, 4096); /* page 5: rets */
    bc_init(&bc, true, NULL, 0);

    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    /* the guest points linear page 0 at page 5 and has not invalidated yet: the
     * cached translation is used, as a CPU with the old TLB entry may (bcache.h) */
    map(0, CODE + 0x5000);
    bc_retired(&bc, &nop);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    /* INVLPG: the new mapping, the new bytes */
    bc_retired(&bc, &invlpg);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    /* back, then a MOV CR3 of the same value */
    map(0, CODE);
    bc_retired(&bc, &movcr3);
    assert_true(bc_fetch(&bc, M, &paging, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    /* a CR3 change (same lower tables here): the key differs, translations go */
    map(0, CODE + 0x5000);
    struct gw_paging pb = paging;
    pb.cr3 = CR3B;
    assert_true(bc_fetch(&bc, M, &pb, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    /* a CR4 change (PGE toggled) under the old CR3 */
    map(0, CODE);
    struct gw_paging pg = pb;
    pg.cr4 |= 0x80;
    assert_true(bc_fetch(&bc, M, &pg, LIN + 0x100, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    /* an unmapped page is never cached: mapping it needs no invalidation */
    unmap(7);
    assert_false(bc_fetch(&bc, M, &pg, LIN + 0x7000, X86_CODE64, &in));
    map(7, CODE + 0x5000);
    assert_true(bc_fetch(&bc, M, &pg, LIN + 0x7000, X86_CODE64, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    /* an instruction across two pages: the second page remapped and invalidated */
    memset(ram + CODE + 0x8000, 0x90, 4096);
    memcpy(ram + CODE + 0x8ffe, "\xe8\x00", 2); /* call rel32: 3 bytes on page 9 */
    memcpy(ram + CODE + 0x9000, "\x01\x00\x00", 3);
    memcpy(ram + CODE + 0xa000, "\x02\x00\x00", 3);
    map(8, CODE + 0x8000);
    map(9, CODE + 0x9000);
    assert_true(bc_fetch(&bc, M, &pg, LIN + 0x8ffe, X86_CODE64, &in));
    assert_int_equal(in.rel, 0x100);
    map(9, CODE + 0xa000);
    bc_retired(&bc, &invlpg);
    assert_true(bc_fetch(&bc, M, &pg, LIN + 0x8ffe, X86_CODE64, &in));
    assert_int_equal(in.rel, 0x200);
}

/* ---- the code page read in place (gw_mem.map) is a translation too ---- */

/* as the stepping logic fetches (swtrace.c fetch): the inline common case, else bc_fetch */
static bool fetch2(struct bcache *bc, const struct gw_paging *p, uint64_t lin, struct x86_insn *in)
{
    return bc_fetch_hot(bc, M, p, lin, X86_CODE64, in) || bc_fetch(bc, M, p, lin, X86_CODE64, in);
}

static void test_mapped_page(void **state)
{
    (void)state;
    struct bcache bc;
    struct x86_insn in;
    static const struct x86_insn invlpg = {.len = 3, .flags = X86_F_INVLPG};
    static const struct x86_insn nop = {.len = 1};
    build_tables();
    memset(ram + CODE, 0x90, 4096);          /* page 0: nops */
    memset(ram + CODE + 0x5000, 0xc3, 4096); /* page 5: rets */
    bc_init(&bc, true, NULL, 0);
    M = &mem_map;

    assert_true(fetch2(&bc, &paging, LIN + 0x100, &in));
    assert_true(fetch2(&bc, &paging, LIN + 0x101, &in));
    assert_int_equal(bc.st.hot_hits, 1); /* the next instruction on the same page */
    assert_int_equal(bc.st.tlb_hits + bc.st.tlb_misses, 1);
    assert_true(bc_fetch_hot(&bc, M, &paging, LIN + 0x101, X86_CODE64, &in)); /* inline hit */
    /* remapped without invalidation: the old page, as the TLB; after INVLPG the new one */
    map(0, CODE + 0x5000);
    bc_retired(&bc, &nop);
    assert_true(fetch2(&bc, &paging, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    bc_retired(&bc, &invlpg);
    assert_false(bc_fetch_hot(&bc, M, &paging, LIN + 0x101, X86_CODE64, &in));
    assert_true(fetch2(&bc, &paging, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    assert_true(fetch2(&bc, &paging, LIN + 0x101, &in)); /* kept: the inline path answers */
    assert_int_equal(in.branch, X86_BR_RET);
    /* the page stops being guest RAM (an EPT narrowing: the generation moves): not read */
    ram_hole = CODE + 0x5000;
    mem_map.gen++;
    assert_false(fetch2(&bc, &paging, LIN + 0x101, &in));
    ram_hole = ~0ull;
    mem_map.gen++;
    assert_true(fetch2(&bc, &paging, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    /* another paging key drops it: under CR3B (the same tables) after the remap back to page
     * 0 the walk finds the nop, and so under another CR0 / CR4 */
    map(0, CODE);
    struct gw_paging pb = paging;
    pb.cr3 = CR3B;
    assert_true(fetch2(&bc, &pb, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    map(0, CODE + 0x5000);
    struct gw_paging pc = pb;
    pc.cr4 |= 0x80;
    assert_true(fetch2(&bc, &pc, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_RET);
    map(0, CODE);
    pc.cr0 |= 0x10000;
    assert_true(fetch2(&bc, &pc, LIN + 0x101, &in));
    assert_int_equal(in.branch, X86_BR_NONE);
    /* the last 14 bytes of a page are read through the copy (the instruction may cross) */
    uint64_t hot = bc.st.hot_hits;
    assert_true(fetch2(&bc, &pc, LIN + 0xff2, &in));
    assert_int_equal(bc.st.hot_hits, hot);
    same_as_fresh(&bc, &pc, LIN + 0xfff, X86_CODE64, "page end");
    /* without gw_mem.map nothing is read in place */
    assert_false(bc_fetch_hot(&bc, &mem, &pc, LIN + 0x101, X86_CODE64, &in));
    M = &mem;
}

/* ---- random code changes, remaps and invalidations against a fresh walk ---- */

static void random_against_fresh(void *table, uint64_t bytes)
{
    static const struct x86_insn inv[] = {
        {.len = 3, .flags = X86_F_INVLPG},
        {.len = 3, .flags = X86_F_MOV_CR | X86_F_MOV_CR3},
        {.len = 3, .flags = X86_F_MOV_CR},
    };
    /* a few short instructions the random bytes are drawn from, so that the fetches
     * decode (and hit) often */
    static const char *const pieces[] = {"\x90",         "\xc3",
                                         "\xeb\x10",     "\x75\xf0",
                                         "\x0f\x05",     "\xe8\x01\x02\x03\x04",
                                         "\x48\x89\xe5", "\xff\xe0",
                                         "\x0f\x01\x38", "\x66\x0f\x38\x82\x00",
                                         "\xf3\xaa"};
    struct bcache bc;
    struct gw_paging p = paging;
    uint64_t lins[48];
    build_tables();
    /* the code pages, and physical [0, 32 KiB) where the linear addresses land with
     * paging off (linear = physical, 32 bits) */
    for (unsigned k = 0; k < 16 + 8; k++)
        for (unsigned o = 0; o < 4096;) {
            const char *s = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t n = strlen(s) ? strlen(s) : 1;
            uint64_t page = k < 16 ? CODE + 4096 * k : 4096 * (k - 16);
            for (size_t i = 0; i < n && o < 4096; i++)
                ram[page + o++] = (uint8_t)s[i];
        }
    for (unsigned i = 0; i < 48; i++) /* hot addresses, some near page ends */
        lins[i] = LIN + 4096 * (rnd() % 8) + (i % 4 == 0 ? 4096 - 1 - rnd() % 14 : rnd() % 4096);
    bc_init(&bc, true, table, bytes);
    for (unsigned step = 0; step < 400000; step++) {
        unsigned op = rnd() % 100;
        if (op < 5) { /* patch code */
            uint64_t a = CODE + rnd() % (16 * 4096);
            ram[a] = (uint8_t)rnd();
        } else if (op < 7) { /* remap a linear page (and invalidate as the SDM asks) */
            map(rnd() % 8, CODE + 4096 * (rnd() % 16));
            if (rnd() % 2) {
                bc_retired(&bc, &inv[rnd() % 3]);
            } else { /* seen at the next instruction boundary (a fetch), as every one is */
                p.cr3 = p.cr3 == CR3 ? CR3B : CR3;
                same_as_fresh(&bc, &p, lins[rnd() % 48], X86_CODE64, "cr3 switch");
            }
        } else if (op < 8) { /* unmap, or map back (no invalidation needed for that) */
            unsigned i = rnd() % 8;
            if (PT + 8 * i < RAM_SIZE && (ram[PT + 8 * i] & 1)) {
                unmap(i);
                bc_retired(&bc, &inv[0]);
            } else {
                map(i, CODE + 4096 * (rnd() % 16));
            }
        } else if (op < 9) { /* paging mode bit changes and back */
            p.cr4 ^= 0x80;
            same_as_fresh(&bc, &p, lins[rnd() % 48], X86_CODE64, "cr4 change");
        } else if (op < 10 && (rnd() & 1)) { /* a code page stops or starts being guest RAM
                                              * (an EPT narrowing: the generation moves) */
            ram_hole = ram_hole == ~0ull ? CODE + 4096 * (rnd() % 16) : ~0ull;
            mem_map.gen++;
            same_as_fresh(&bc, &p, lins[rnd() % 48], X86_CODE64, "hole");
        } else if (op < 10) { /* paging off and on (CR0.PG): other bytes at each address */
            p.cr0 ^= 0x80000000u;
            same_as_fresh(&bc, &p, lins[rnd() % 48], X86_CODE32, "cr0 change");
        } else {
            uint64_t lin = lins[rnd() % 48];
            same_as_fresh(&bc, &p, lin, (rnd() % 8) ? X86_CODE64 : X86_CODE32, "random");
        }
    }
    print_message(
        "random, %u entries: %lu insn hits, %lu misses, %lu stale, %lu tlb hits, %lu misses, %lu "
        "flushes\n",
        bc.insn_mask + 1, (unsigned long)bc.st.insn_hits, (unsigned long)bc.st.insn_misses,
        (unsigned long)bc.st.insn_stale, (unsigned long)bc.st.tlb_hits,
        (unsigned long)bc.st.tlb_misses, (unsigned long)bc.st.flushes);
    assert_int_equal(bc.insn_mask + 1, table ? 512 : BC_INSN_SIZE);
    /* not vacuous: hits, patched entries and flushes all happened */
    assert_true(bc.st.insn_hits > 100000);
    assert_true(bc.st.insn_stale > 1000);
    assert_true(bc.st.flushes > 1000);
    if (M->map)
        assert_true(bc.st.hot_hits > 10000);
    ram_hole = ~0ull;
}

static void test_random_against_fresh(void **state)
{
    (void)state;
    random_against_fresh(NULL, 0); /* the 64 entries inside struct bcache */
    /* a caller's table of 1000 entries and a bit: 512 used, none written past (ASan) */
    uint64_t bytes = 1000 * sizeof(struct bc_insn_entry) + 7;
    void *table = malloc(bytes);
    assert_non_null(table);
    random_against_fresh(table, bytes);
    free(table);
}

/* ---- the same through the stepping logic: packets equal the uncached run's ---- */

static uint8_t ring_a[1 << 16], ring_b[1 << 16];

/* A program that patches itself and remaps a code page, stepped as MTF would:
 *   0x200 call 0x1000      page 1: 0x1000 nop; 0x1001 ret
 *   0x205 dec ecx; 0x207 jnz 0x205 (twice taken; before its third pass the test, as
 *         another CPU would, patches it into jmp 0x219)
 *   0x219 invlpg [rax]     (the test points linear page 1 at physical page 5 before)
 *   0x21c call 0x1000      page 5: 0x1000 jmp 0x1002; 0x1002 ret
 * The stack is on nops (no event frame).  Without the cache's byte check the third
 * pass would be a jnz, without the INVLPG flush the call would land on page 1's nop:
 * either way a gap. */
static void run_patched(bool nocache, uint8_t *buf, struct swtrace *t, struct swpt_ring *ring)
{
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true}, .psb_period = 4096};
    build_tables();
    memset(ram + CODE, 0x90, 3 * 4096);
    memset(ram + CODE + 0x5000, 0xcc, 4096);
    memcpy(ram + CODE + 0x200, "\xe8\xfb\x0d\x00\x00", 5); /* call 0x1000 */
    memcpy(ram + CODE + 0x205, "\xff\xc9\x75\xfc", 4);     /* dec ecx; jnz 0x205 */
    memcpy(ram + CODE + 0x219, "\x0f\x01\x38", 3);         /* invlpg [rax] */
    memcpy(ram + CODE + 0x21c, "\xe8\xdf\x0d\x00\x00", 5); /* call 0x1000 */
    memcpy(ram + CODE + 0x1000, "\x90\xc3", 2);            /* page 1: nop; ret */
    memcpy(ram + CODE + 0x5000, "\xeb\x00\xc3", 3);        /* page 5: jmp +0; ret */
    *ring = (struct swpt_ring){.buf = buf, .size = sizeof(ring_a)};
    memset(t, 0, sizeof(*t));
    t->nocache = nocache;
    struct swtrace_cpu c = {.rip = LIN + 0x200,
                            .rsp = LIN + 0x2800,
                            .cs_sel = 0x10,
                            .ctx = {.cr3 = CR3, .cpl = 0, .cs = X86_CODE64},
                            .paging = paging};
    swtrace_start(t, &cfg, ring, M, &c, 0);
    static const uint64_t path[] = {0x1000, 0x1001, 0x205, 0x207,  0x205,  0x207, 0x205,
                                    0x207,  0x219,  0x21c, 0x1000, 0x1002, 0x221};
    for (unsigned i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
        if (i == 7) /* the jnz about to be fetched a third time is now a jmp */
            memcpy(ram + CODE + 0x207, "\xeb\x10", 2);
        if (i == 9) /* before the INVLPG completes: linear page 1 maps page 5 */
            map(1, CODE + 0x5000);
        c.rip = LIN + path[i];
        assert_true(swtrace_observe(t, M, &c, true));
        if (i == 7)
            assert_int_equal(t->insn.branch, X86_BR_JMP_DIRECT);
        if (i == 10)
            assert_int_equal(t->insn.branch, X86_BR_JMP_DIRECT);
    }
    swtrace_stop(t);
}

static void test_swtrace_patched_and_remapped(void **state)
{
    (void)state;
    struct swtrace ta, tb;
    struct swpt_ring ra, rb;
    run_patched(true, ring_a, &ta, &ra);
    run_patched(false, ring_b, &tb, &rb);
    assert_int_equal(ra.head, rb.head);
    assert_memory_equal(ring_a, ring_b, ra.head);
    assert_memory_equal(&ta.st, &tb.st, sizeof(ta.st));
    assert_int_equal(tb.st.unexplained, 0);
    assert_true(tb.bc.st.insn_hits >= 2); /* the loop's second pass */
    assert_true(tb.bc.st.insn_stale >= 1);
    assert_true(tb.bc.st.flushes >= 1);
}

/* ---- X86_F_INVLPG against Zydis ---- */

static ZydisDecoder zdec[3];

static void zydis_init(void)
{
    static const ZydisMachineMode mm[3] = {ZYDIS_MACHINE_MODE_LEGACY_16,
                                           ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
                                           ZYDIS_MACHINE_MODE_LONG_64};
    static const ZydisStackWidth sw[3] = {ZYDIS_STACK_WIDTH_16, ZYDIS_STACK_WIDTH_32,
                                          ZYDIS_STACK_WIDTH_64};
    for (int i = 0; i < 3; i++)
        assert_true(ZYAN_SUCCESS(ZydisDecoderInit(&zdec[i], mm[i], sw[i])));
}

static unsigned check_flag(const uint8_t *b, unsigned n, unsigned cs)
{
    ZydisDecodedInstruction z;
    struct x86_insn in;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zdec[cs], NULL, b, n, &z)))
        return 0;
    if (x86_classify(b, n, (enum x86_code_size)cs, &in) != 0 || in.len != z.length)
        return 0; /* length disagreements are test_x86_class's */
    bool inv = z.mnemonic == ZYDIS_MNEMONIC_INVLPG || z.mnemonic == ZYDIS_MNEMONIC_INVLPGA ||
               z.mnemonic == ZYDIS_MNEMONIC_INVLPGB || z.mnemonic == ZYDIS_MNEMONIC_INVPCID;
    if (inv != !!(in.flags & X86_F_INVLPG))
        fail_msg("code%u %02x %02x %02x %02x %02x %02x: Zydis %s, X86_F_INVLPG %d", 16 << cs, b[0],
                 b[1], b[2], b[3], b[4], b[5], ZydisMnemonicGetString(z.mnemonic),
                 !!(in.flags & X86_F_INVLPG));
    return inv;
}

static void test_invlpg_flag_vs_zydis(void **state)
{
    (void)state;
    static const uint8_t pre[][2] = {{0}, {0x66}, {0xf3}, {0xf2}, {0x67}, {0x48}, {0x2e}, {0xf0}};
    unsigned inv = 0;
    zydis_init();
    for (unsigned cs = 0; cs < 3; cs++)
        for (unsigned p = 0; p < sizeof(pre) / sizeof(pre[0]); p++)
            for (unsigned m = 0; m < 256; m++) {
                uint8_t b[16] = {0}, n = 0;
                if (pre[p][0])
                    b[n++] = pre[p][0];
                /* 0F 01 /r (INVLPG, INVLPGA, INVLPGB, and the rest of group 7) */
                memcpy(b + n, "\x0f\x01", 2);
                b[n + 2] = (uint8_t)m;
                inv += check_flag(b, 15, cs);
                /* 0F 38 82 /r (INVPCID with 66) and its neighbours 80, 81 */
                for (uint8_t op = 0x80; op <= 0x83; op++) {
                    memcpy(b + n, "\x0f\x38", 2);
                    b[n + 2] = op;
                    b[n + 3] = (uint8_t)m;
                    inv += check_flag(b, 15, cs);
                }
            }
    /* and nothing else carries the flag: random bytes */
    for (unsigned k = 0; k < 1000000; k++) {
        uint8_t b[15];
        for (unsigned i = 0; i < sizeof(b); i++)
            b[i] = (uint8_t)rnd();
        if (k & 1)
            b[0] = 0x0f;
        inv += check_flag(b, 15, k % 3);
    }
    print_message("%u INVLPG-class encodings agreed with Zydis\n", inv);
    assert_true(inv > 1000);
}

static int use_map(void **state)
{
    (void)state;
    M = &mem_map;
    return 0;
}

static int use_copy(void **state)
{
    (void)state;
    M = &mem;
    return 0;
}

/* ---- the block table (bcache.h: struct bc_blk_entry) ---- */

static void test_block_table(void **state)
{
    (void)state;
    static uint8_t table[64 * sizeof(struct bc_blk_entry)];
    struct bcache bc;
    struct x86_insn in[4];
    const uint64_t lin = LIN + 0x100;
    build_tables();
    memset(ram + CODE, 0x90, 8192);
    /* mov eax, 1; add eax, ebx; nop; jne -0x20 */
    memcpy(ram + CODE + 0x100, "\xb8\x01\x00\x00\x00\x01\xd8\x90\x75\xe0", 10);
    bc_init(&bc, true, NULL, 0);
    bc_blocks(&bc, table, sizeof(table));
    assert_int_equal(bc.blk_mask + 1, 64);
    for (unsigned i = 0, off = 0; i < 4; off += in[i++].len)
        assert_true(bc_fetch(&bc, &mem_map, &paging, lin + off, X86_CODE64, &in[i]));
    assert_int_equal(in[3].branch, X86_BR_JCC);

    /* read in place: the page of the last fetch is the block's */
    assert_true(bc_fetch(&bc, &mem_map, &paging, lin, X86_CODE64, &in[0]));
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64)); /* nothing kept yet */
    bc_blk_put(&bc, &mem_map, &paging, lin, X86_CODE64, in, 3);
    assert_int_equal(bc.st.blk_kept, 1);
    const struct bc_blk_entry *e = bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64);
    assert_non_null(e);
    assert_int_equal(e->n, 3);
    assert_int_equal(e->nbytes, 10);
    assert_int_equal(e->len[0], 5);
    assert_int_equal(e->len[1], 2);
    assert_int_equal(e->len[2], 1);
    /* another code size, another address: not this block */
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE32));
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin + 5, X86_CODE64));
    /* the ending branch patched (its last byte): a miss, until the bytes are back */
    ram[CODE + 0x109] = 0xe1;
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    ram[CODE + 0x109] = 0xe0;
    assert_non_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    /* the nop inside becomes int3 (a debugger's breakpoint): a miss */
    ram[CODE + 0x107] = 0xcc;
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    ram[CODE + 0x107] = 0x90;

    /* the page remapped (same bytes elsewhere, then other bytes): the translations in place are
     * dropped with the TLB, the page is walked and mapped again, and the bytes decide */
    memcpy(ram + CODE + 0x1000, ram + CODE, 4096);
    map(0, CODE + 0x1000);
    bc_flush(&bc);
    ram[CODE + 0x105] = 0xeb; /* the old page's bytes change: they are no longer read */
    assert_non_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64)); /* same bytes */
    ram[CODE + 0x105] = 0x01;
    ram[CODE + 0x1000 + 0x105] = 0xeb; /* add -> jmp rel8 on the new page */
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    ram[CODE + 0x1000 + 0x105] = 0x01;
    assert_true(bc_fetch(&bc, &mem_map, &paging, lin + 0x1000, X86_CODE64, &in[0]));
    assert_non_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64)); /* not the hot page */
    ram[CODE + 0x1000 + 0x105] = 0xeb;
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    ram[CODE + 0x1000 + 0x105] = 0x01;
    /* that page stops being guest RAM (the generation moves): its pointer is not used again */
    ram_hole = CODE + 0x1000;
    mem_map.gen++;
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    ram_hole = ~0ull;
    mem_map.gen++;
    assert_non_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
    map(0, CODE);
    bc_flush(&bc);

    /* code changed between the caller's decode and the keep: its instructions no longer
     * match the bytes, nothing is kept */
    assert_true(bc_fetch(&bc, &mem_map, &paging, lin, X86_CODE64, &in[0]));
    uint64_t kept = bc.st.blk_kept;
    const uint64_t lin2 = LIN + 0x200;
    memcpy(ram + CODE + 0x200, "\x90\x90\xc3", 3); /* nop; nop; ret */
    struct x86_insn b2[3];
    for (unsigned i = 0; i < 3; i++)
        assert_true(bc_fetch(&bc, &mem_map, &paging, lin2 + i, X86_CODE64, &b2[i]));
    ram[CODE + 0x201] = 0xc3; /* the second nop is now a ret */
    bc_blk_put(&bc, &mem_map, &paging, lin2, X86_CODE64, b2, 2);
    assert_int_equal(bc.st.blk_kept, kept);
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin2, X86_CODE64));
    /* too many instructions, or too many bytes, for an entry: not kept */
    struct x86_insn many[BC_BLK_INSNS + 2];
    for (unsigned i = 0; i < BC_BLK_INSNS + 2; i++)
        many[i] = (struct x86_insn){.len = 1};
    bc_blk_put(&bc, &mem_map, &paging, LIN + 0x300, X86_CODE64, many, BC_BLK_INSNS + 1);
    assert_int_equal(bc.st.blk_kept, kept);
    /* no table: nothing kept, nothing found */
    bc_init(&bc, true, NULL, 0);
    assert_true(bc_fetch(&bc, &mem_map, &paging, lin, X86_CODE64, &in[0]));
    bc_blk_put(&bc, &mem_map, &paging, lin, X86_CODE64, in, 3);
    assert_null(bc_blk_get(&bc, &mem_map, &paging, lin, X86_CODE64));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_reads_only_its_bytes),
        cmocka_unit_test(test_self_modifying),
        cmocka_unit_test(test_remap_same_cr3),
        cmocka_unit_test(test_mapped_page),
        cmocka_unit_test(test_random_against_fresh),
        cmocka_unit_test(test_swtrace_patched_and_remapped),
        cmocka_unit_test(test_invlpg_flag_vs_zydis),
        cmocka_unit_test(test_block_table),
    };
    /* the cache over copies, then over pages read in place */
    const struct CMUnitTest mapped[] = {
        cmocka_unit_test_setup_teardown(test_self_modifying, use_map, use_copy),
        cmocka_unit_test_setup_teardown(test_remap_same_cr3, use_map, use_copy),
        cmocka_unit_test_setup_teardown(test_random_against_fresh, use_map, use_copy),
        cmocka_unit_test_setup_teardown(test_swtrace_patched_and_remapped, use_map, use_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) |
           cmocka_run_group_tests_name("mapped", mapped, NULL, NULL);
}
