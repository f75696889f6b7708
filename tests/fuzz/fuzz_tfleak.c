/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: records and single steps the input chooses through the frame table
 * (vmm/trace/tfleak.c).  Invariants: the table never holds more than TFL_MAX records nor the
 * same frame twice; a take removes exactly one record and only one that explains the step
 * (same context and code segment, at its return IP on its stack, or reachable from it within
 * the slack); counters add up.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "trace/tfleak.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static bool reach(void *ctx, const struct tfl_frame *f, uint64_t to)
{
    uint8_t len = *(const uint8_t *)ctx % 16;
    struct x86_insn in = {.len = len ? len : 1, .branch = len == 15 ? X86_BR_RET : X86_BR_NONE};
    return tfl_insn_reaches(&in, f->ret, X86_CODE64, to);
}

static struct tfl l;

static bool same(const struct tfl_frame *a, const struct tfl_frame *b)
{
    return a->cr3 == b->cr3 && a->ret == b->ret && a->rsp == b->rsp && a->cs == b->cs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfl_init(&l);
    struct op {
        uint8_t kind, len;
        uint16_t cs;
        uint32_t cr3, ret, rsp;
    } op;
    while (size >= sizeof(op)) {
        memcpy(&op, data, sizeof(op));
        data += sizeof(op);
        size -= sizeof(op);
        /* small value ranges, so records and steps meet */
        struct tfl_frame f = {.cr3 = (op.cr3 & 0x3fff),
                              .ret = op.ret & 0xff,
                              .rsp = op.rsp & 0x3ffff,
                              .cs = op.cs & 3};
        unsigned n = l.n;
        if (op.kind & 1) {
            /* a record that goes for a full table is of the context that holds the most */
            unsigned most = 0;
            for (unsigned i = 0; i < l.n; i++) {
                unsigned c = 0;
                for (unsigned j = 0; j < l.n; j++)
                    c += l.f[j].cr3 == l.f[i].cr3;
                most = c > most ? c : most;
            }
            struct tfl before = l;
            tfl_record(&l, &f);
            CHECK(l.n == n || l.n == n + 1);
            if (l.dropped != before.dropped) { /* which context lost one */
                for (unsigned i = 0; i < before.n; i++) {
                    bool kept = false;
                    for (unsigned j = 0; j < l.n && !kept; j++)
                        kept = same(&l.f[j], &before.f[i]);
                    if (!kept) {
                        unsigned c = 0;
                        for (unsigned j = 0; j < before.n; j++)
                            c += before.f[j].cr3 == before.f[i].cr3;
                        CHECK(c == most);
                    }
                }
            }
        } else {
            struct tfl before = l;
            bool t = tfl_take(&l, f.cr3, f.cs, f.ret, f.rsp, reach, &op.len);
            CHECK(l.n == (t ? n - 1 : n));
            if (t) { /* the record that went explains the step */
                bool found = false;
                for (unsigned i = 0; i < before.n && !found; i++) {
                    const struct tfl_frame *g = &before.f[i];
                    bool gone = true;
                    for (unsigned j = 0; j < l.n; j++)
                        if (same(&l.f[j], g))
                            gone = false;
                    if (gone)
                        found = g->cr3 == (f.cr3 & ~0xfffull) && g->cs == f.cs &&
                                ((g->ret == f.ret && g->rsp == f.rsp) ||
                                 (f.rsp - g->rsp + TFL_RSP_SLACK <= 2 * TFL_RSP_SLACK &&
                                  reach(&op.len, g, f.ret)));
                }
                CHECK(found);
            }
        }
        CHECK(l.n <= TFL_MAX);
        for (unsigned i = 0; i < l.n; i++)
            for (unsigned j = i + 1; j < l.n; j++)
                CHECK(!same(&l.f[i], &l.f[j]));
        CHECK(l.taken + l.n + l.dropped <= l.recorded);
    }
    return 0;
}
