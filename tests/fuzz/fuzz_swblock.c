/* SPDX-License-Identifier: MIT */
/*
 * Block stepping (vmm/trace/swblock.c) over guest code the fuzzer writes: two pages of code
 * bytes (paging off: linear = physical), a code size, a start IP, then a sequence of exits,
 * each one taken at the block's end or at a chosen instruction of it (an interrupt), with
 * the RFLAGS and the return address the next block is predicted from.  The same exits go to
 * a tracer with the block table and one without.  Checks, for every block:
 *   - its instructions are what a fresh x86_classify of the bytes says: every length, plain
 *     instructions only, but for the direct JMP / CALL ending each run, whose target is the
 *     next run's first IP; at most SWTRACE_BLOCK_MAX of them, in at most SWTRACE_BLOCK_SEGS runs;
 *   - its IPs are distinct, the breakpoint (its end) and the lead's IP are none of them, but
 *     for a loop's Jcc / JMP leading the block that ends at it (lead_rf);
 *   - a lead that is an indirect JMP / CALL in 64-bit code goes where Zydis says the vCPU
 *     would from the registers the fuzzer gives (its operand's register, or the 8 bytes at
 *     the address Zydis computes);
 *   - with and without the block table (and its successor table): the very same block, the
 *     same settle result, the same packets, byte for byte, also where a byte of the code is
 *     rewritten while a block runs;
 * and ASan / UBSan on all of it (the ring is an exact-size heap block).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "trace/swtrace.h"

#define RAM_SIZE 0x4000u
#include "fakes/fake_ram.h"

#define CODE 0x1000u /* two pages of code at 0x1000 and 0x2000 */
#define RING 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct in {
    const uint8_t *p;
    size_t n;
};

static unsigned take(struct in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

struct tracer {
    struct swtrace t;
    struct swpt_ring ring;
    struct swtrace_block b;
    bool out;
};

static uint8_t blk_table[64 * sizeof(struct bc_blk_entry)];
static struct bc_insn_entry insn_table[2][256];

static void open_tracer(struct tracer *k, bool table, bool small, const struct swtrace_cpu *c)
{
    static const struct swpt_cfg cfg = {.filter = {.user = true, .kernel = true},
                                        .psb_period = 256};
    memset(&k->t, 0, sizeof(k->t));
    if (!small) /* small: the 64 instructions inside struct swtrace (slots collide in a block) */
        swtrace_cache_mem(&k->t, insn_table[table], sizeof(insn_table[0]));
    if (table)
        swtrace_block_mem(&k->t, blk_table, sizeof(blk_table));
    k->ring.head = k->ring.dropped = 0;
    k->ring.stopped = false;
    k->out = false;
    swtrace_start(&k->t, &cfg, &k->ring, &mem_map, c, 0);
}

/* the block against a fresh decode of the bytes (the invariants above) */
static void check_block(const struct swtrace_block *b, const struct swtrace_cpu *c)
{
    enum x86_code_size cs = c->ctx.cs;
    if (b->n > SWTRACE_BLOCK_MAX || b->nseg < 1 || b->nseg > SWTRACE_BLOCK_SEGS)
        abort();
    uint64_t ips[SWTRACE_BLOCK_MAX + 1];
    unsigned s = 0;
    for (unsigned i = 0; i <= b->n; i++) {
        ips[i] = swtrace_block_ip(b, i, cs);
        for (unsigned j = 0; j < i; j++)
            if (ips[j] == ips[i])
                abort(); /* two places of the block at one IP (or the breakpoint on one) */
        if (b->lead && ips[i] == b->lead_ip && !(i == b->n && b->lead_rf))
            abort(); /* the lead on the block: only a loop's, at its end, with RF */
        if (i == b->n)
            break;
        uint8_t code[X86_MAX_INSN];
        unsigned got = 0;
        struct x86_insn in;
        gw_read(&mem, &c->paging, (c->cs_base + ips[i]) & 0xffffffffu, code, sizeof(code), &got);
        if (!got || x86_classify(code, got, cs, &in) != 0 || in.len != b->len[i])
            abort();
        bool last_of_run = s + 1 < b->nseg && b->seg[s + 1].first == i + 1;
        if (last_of_run) {
            if ((in.branch != X86_BR_JMP_DIRECT && in.branch != X86_BR_CALL_DIRECT) ||
                b->seg[s].jmp != ips[i] || x86_direct_target(ips[i], &in, cs) != b->seg[s + 1].ip)
                abort();
            s++;
        } else if (in.branch != X86_BR_NONE ||
                   (in.flags &
                    (X86_F_MOV_CR | X86_F_MOV_CR3 | X86_F_INVLPG | X86_F_HLT | X86_F_NOBLOCK)))
            abort();
    }
    if (s + 1 != b->nseg)
        abort();
    if (b->lead_rf) { /* a Jcc or a direct JMP at the block's end leads it */
        uint8_t code[X86_MAX_INSN];
        unsigned got = 0;
        struct x86_insn in;
        gw_read(&mem, &c->paging, (c->cs_base + b->lead_ip) & 0xffffffffu, code, sizeof(code),
                &got);
        if (!b->lead || b->lead_ip != b->end || !got || x86_classify(code, got, cs, &in) != 0 ||
            (in.branch != X86_BR_JCC && in.branch != X86_BR_JMP_DIRECT))
            abort();
    }
}

/*
 * A block led by an indirect JMP / CALL in 64-bit code goes where Zydis says the vCPU would:
 * the register, or the 8 bytes at the address ZydisCalcAbsoluteAddressEx computes from the
 * same registers (an oracle independent of x86_indirect_operand and of the tracer's sum).
 */
static void check_indirect(const struct swtrace_block *b, const struct swtrace_cpu *c,
                           const uint64_t *gpr)
{
    static ZydisDecoder dec;
    static bool ready;
    if (!b->lead || c->ctx.cs != X86_CODE64 || b->lead_ip + X86_MAX_INSN > RAM_SIZE)
        return;
    if (!ready) {
        ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        ready = true;
    }
    ZydisDecodedInstruction z;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, ram + b->lead_ip, X86_MAX_INSN, &z, ops)) ||
        (z.mnemonic != ZYDIS_MNEMONIC_JMP && z.mnemonic != ZYDIS_MNEMONIC_CALL) ||
        z.raw.imm[0].is_relative || z.operand_count_visible != 1 ||
        ops[0].type == ZYDIS_OPERAND_TYPE_POINTER || z.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
        return; /* not a near indirect JMP / CALL */
    static const ZydisRegister r64[16] = {
        ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_RBX,
        ZYDIS_REGISTER_RSP, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI,
        ZYDIS_REGISTER_R8,  ZYDIS_REGISTER_R9,  ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
        ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R15};
    static ZydisRegisterContext ctx;
    for (unsigned i = 0; i < 16; i++)
        ctx.values[r64[i]] = i == 4 ? c->rsp : gpr[i];
    uint64_t want;
    if (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
        want = ctx.values[ops[0].reg.value];
    } else {
        ZyanU64 ea;
        if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddressEx(&z, &ops[0], b->lead_ip, &ctx, &ea)) ||
            ea > RAM_SIZE - 8)
            abort(); /* the tracer read a target where the vCPU could not */
        memcpy(&want, ram + ea, 8);
    }
    if (b->ip != want)
        abort();
}

static void same_block(const struct swtrace_block *a, const struct swtrace_block *b)
{
    if (a->n != b->n || a->nseg != b->nseg || a->ip != b->ip || a->end != b->end ||
        a->lead != b->lead || memcmp(a->len, b->len, a->n))
        abort();
    for (unsigned s = 0; s < a->nseg; s++)
        if (a->seg[s].ip != b->seg[s].ip || a->seg[s].first != b->seg[s].first)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tracer k[2];
    static uint8_t *ring[2];
    struct in in = {data, size};
    if (size < 16)
        return 0;
    for (int i = 0; i < 2; i++)
        if (!ring[i])
            k[i].ring.buf = ring[i] = malloc(RING);
    for (int i = 0; i < 2; i++)
        k[i].ring.size = RING;
    /* the code: the input's bytes repeated over both pages, a few patched to branches */
    memset(ram, 0, RAM_SIZE);
    unsigned head = 16 + take(&in) % 48;
    for (unsigned i = 0; i < 0x2000; i++)
        ram[CODE + i] = data[1 + i % head % (size - 1)];
    unsigned pick = take(&in), cs_pick = pick % 3;
    struct swtrace_cpu c = {
        .rip = CODE + (take(&in) << 4 | take(&in)) % 0x1ff0,
        .rsp = 0x3800,
        .cs_sel = 8,
        .ctx = {.cr3 = 0, .cpl = 0, .cs = (enum x86_code_size)cs_pick},
        .paging = {.cr0 = 1},
    };
    /* the return address a RET is predicted from, written once before any decode: the stack
     * may be reachable as code (a block stepped through it would be code changed under the
     * tracer, its documented limit) */
    put64(c.rsp, CODE + ((take(&in) << 8 | take(&in)) % 0x2000));
    open_tracer(&k[0], true, pick & 0x80, &c);
    open_tracer(&k[1], false, false, &c);
    /* registers an indirect JMP / CALL may take its target or address from: inside the
     * RAM (often the code) or anywhere */
    uint64_t gpr[16];
    for (unsigned i = 0; i < 16; i++) {
        unsigned v = take(&in) << 8 | take(&in);
        gpr[i] = v & 0x8000 ? (uint64_t)v * 0x9e3779b97f4a7c15ull : v % RAM_SIZE;
    }
    for (unsigned round = 0; round < 64 && in.n; round++) {
        struct swtrace_regs r = {.rflags = take(&in) | (uint64_t)take(&in) << 8, .gpr = gpr};
        unsigned cut = take(&in);
        bool ok[2];
        for (int i = 0; i < 2; i++)
            ok[i] = k[i].out ? swtrace_block_next(&k[i].t, &mem_map, &c, &r, &k[i].b)
                             : swtrace_block_plan(&k[i].t, &mem_map, &c, &k[i].b) > 0;
        if (ok[0] != ok[1])
            abort();
        if (!ok[0]) { /* a step: the instruction runs as the recording of a CPU would say; here
                       * the tracer only learns where the vCPU is now (a fresh place) */
            c.rip = CODE + (take(&in) << 4 | take(&in)) % 0x1ff0;
            for (int i = 0; i < 2; i++) {
                swtrace_observe(&k[i].t, &mem_map, &c, true);
                k[i].out = false;
            }
            continue;
        }
        check_block(&k[0].b, &c);
        check_indirect(&k[0].b, &c, gpr);
        same_block(&k[0].b, &k[1].b);
        /* code rewritten while the block ran (the guest, or another vCPU): a byte at or after
         * the block's start, so the next block (and a kept one after this lead) must be read
         * from the bytes as they are then */
        unsigned patch = take(&in);
        if (patch & 0x80)
            ram[CODE + (k[0].b.ip - CODE + (patch & 0x7f)) % 0x2000] = (uint8_t)take(&in);
        /* the exit: at the end, or cut at a chosen instruction of the block (or at the lead) */
        unsigned at = cut < 128 ? k[0].b.n : cut % (k[0].b.n + 1);
        c.rip =
            cut >= 250 && k[0].b.lead ? k[0].b.lead_ip : swtrace_block_ip(&k[0].b, at, c.ctx.cs);
        c.rf = cut >= 250 && k[0].b.lead; /* stopped before the lead: RF still set */
        int st[2];
        for (int i = 0; i < 2; i++) {
            st[i] = swtrace_block_settle(&k[i].t, &mem_map, &c, &k[i].b);
            k[i].out = st[i] == SWTRACE_SETTLED && c.rip == k[i].b.end;
        }
        if (st[0] != st[1] || st[0] != SWTRACE_SETTLED)
            abort();
    }
    for (int i = 0; i < 2; i++)
        swtrace_stop(&k[i].t);
    if (k[0].ring.head != k[1].ring.head || k[0].ring.dropped != k[1].ring.dropped ||
        memcmp(ring[0], ring[1], k[0].ring.head < RING ? k[0].ring.head : RING))
        abort();
    return 0;
}
