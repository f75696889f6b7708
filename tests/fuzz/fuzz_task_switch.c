/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: random guest memory (GDT, LDT, TSSes, stack: every byte the guest's) and a random
 * current state, selector and source through vmm/emul/task_switch.c.  Invariants:
 *  - it terminates within TS_MAX_ACCESSES accessor calls, each of at most TS_MAX_LEN bytes
 *    that do not wrap past 4 GiB;
 *  - the accessor is asked for memory outside the fake RAM only by reads that fail (the
 *    emulator then faults): nothing outside it is ever written;
 *  - every write lands in bytes that an earlier successful read probed for writing (validate,
 *    then commit: a write cannot fail half way);
 *  - a fault before the commit leaves the RAM byte for byte and the state as they were;
 *  - a committed switch (success or a fault in the new task) yields a state that passes the
 *    VM-entry guest-state model (vmm/emul/guest_check.c) with TR = the new TSS, busy, and
 *    CR0.TS set.
 * Seeds (tests/fuzz/seeds/fuzz_task_switch): a GDT, two TSSes, an LDT and a stack laid out as
 * in test_task_switch.c, one per source, so the fuzzer starts past the descriptor checks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emul/task_switch.h"
#include "emul/guest_check.h"
#include "fakes/ts_entry.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

#define RAM_BASE 0x10000u /* the fake RAM is [RAM_BASE, RAM_BASE + RAM_SIZE) */
#define RAM_SIZE 0x2000u
static uint8_t ram[RAM_SIZE], before[RAM_SIZE];

static struct {
    unsigned calls, writes, nprobe;
    struct {
        uint64_t cr3;
        uint32_t lin, len;
    } probe[TS_MAX_ACCESSES];
} acc;

static bool in_ram(uint32_t lin, unsigned len)
{
    return lin >= RAM_BASE && lin - RAM_BASE < RAM_SIZE && len <= RAM_SIZE - (lin - RAM_BASE);
}

static void access_ok(uint32_t lin, unsigned len)
{
    CHECK(++acc.calls <= TS_MAX_ACCESSES);
    CHECK(len >= 1 && len <= TS_MAX_LEN);
    CHECK((uint64_t)lin + len <= (1ull << 32));
}

static bool f_read(void *ctx, uint64_t cr3, uint32_t lin, void *buf, unsigned len, bool w)
{
    (void)ctx;
    access_ok(lin, len);
    if (!in_ram(lin, len))
        return false;
    memcpy(buf, ram + (lin - RAM_BASE), len);
    if (w && acc.nprobe < TS_MAX_ACCESSES)
        acc.probe[acc.nprobe++] = (__typeof__(acc.probe[0])){cr3, lin, len};
    return true;
}

static bool f_write(void *ctx, uint64_t cr3, uint32_t lin, const void *buf, unsigned len)
{
    (void)ctx;
    access_ok(lin, len);
    CHECK(in_ram(lin, len));
    bool probed = false;
    for (unsigned i = 0; i < acc.nprobe && !probed; i++)
        probed = acc.probe[i].cr3 == cr3 && lin >= acc.probe[i].lin &&
                 (uint64_t)lin + len <= (uint64_t)acc.probe[i].lin + acc.probe[i].len;
    CHECK(probed);
    acc.writes++;
    memcpy(ram + (lin - RAM_BASE), buf, len);
    return true;
}

static bool cr3_refused;
static bool f_cr3_ok(void *ctx, uint64_t cr3)
{
    (void)ctx;
    (void)cr3;
    return !cr3_refused;
}

static const struct ts_mem mem = {.read = f_read, .write = f_write, .cr3_ok = f_cr3_ok};

static const char *entry_check(const struct ts_state *s)
{
    return ts_entry_check(s, (s->cr0 | 0x21) & 0xffffffffull & ~(1ull << 31));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct {
        uint16_t sel, tr_sel;
        uint8_t source, flags, insn_len, gdt_lim_hi;
        uint32_t error, eflags, tr_limit, cr3;
        uint16_t gdt_off, tr_off;
        uint8_t tr_type, gdt_lim;
    } h = {0};
    memcpy(&h, data, size < sizeof(h) ? size : sizeof(h)); /* short inputs: zero-padded */
    memset(ram, 0, sizeof(ram));
    if (size > sizeof(h))
        memcpy(ram, data + sizeof(h), size - sizeof(h) < RAM_SIZE ? size - sizeof(h) : RAM_SIZE);
    memset(&acc, 0, sizeof(acc));
    cr3_refused = h.flags & 0x40;

    struct ts_in in = {
        .sel = h.sel,
        .source = (enum ts_source)(h.source & 3),
        .event = (h.flags & 1)      ? TS_EV_SOFT
                 : (h.flags & 0x80) ? TS_EV_ICEBP
                                    : TS_EV_HW,
        .has_error = h.flags & 2,
        .error = h.error,
        .insn_len = h.insn_len & 15,
    };
    struct ts_state *c = &in.cur;
    c->cr0 = 0x11 | ((h.flags & 4) ? 1ull << 31 : 0);
    c->cr3 = h.cr3;
    c->dr7 = 0x400 | h.error;
    c->eip = h.error ^ h.eflags;
    c->eflags = h.eflags;
    for (unsigned i = 0; i < 8; i++)
        c->gpr[i] = h.eflags * (i + 1);
    /* the GDT mostly inside the RAM, sometimes straddling its end or anywhere */
    c->gdtr_base =
        (h.flags & 8) ? (uint32_t)h.gdt_off << 16 | h.gdt_off : RAM_BASE + (h.gdt_off % RAM_SIZE);
    c->gdtr_limit = (uint32_t)h.gdt_lim_hi << 8 | h.gdt_lim;
    for (unsigned i = 0; i < 6; i++)
        c->seg[i] =
            (struct vmx_seg){.sel = h.tr_sel ^ (uint16_t)i, .limit = 0xffffffff, .ar = 0xc093};
    c->seg[VSEG_LDTR] = (struct vmx_seg){.ar = (h.flags & 0x10) ? 0x82 : 0x10000,
                                         .base = RAM_BASE + h.tr_off % RAM_SIZE,
                                         .limit = h.tr_limit & 0xffff};
    c->seg[VSEG_TR] =
        (struct vmx_seg){.sel = h.tr_sel,
                         .base = (h.flags & 0x20) ? h.cr3 : RAM_BASE + h.tr_off % RAM_SIZE,
                         .limit = h.tr_limit,
                         .ar = h.tr_type & 0x8f};
    memcpy(before, ram, RAM_SIZE);

    struct ts_out o;
    memset(&o, 0xa5, sizeof(o)); /* stale contents must not leak through */
    enum ts_result r = task_switch(&in, &mem, &o);
    CHECK(r == TS_OK || r == TS_FAULT);
    if (r == TS_FAULT) {
        CHECK(o.why != NULL);
        CHECK(o.vector == TS_VEC_TS || o.vector == TS_VEC_NP || o.vector == TS_VEC_SS ||
              o.vector == TS_VEC_GP);
    }
    if (r == TS_FAULT && !o.committed) {
        CHECK(acc.writes == 0);
        CHECK(memcmp(before, ram, RAM_SIZE) == 0);
        CHECK(memcmp(&o.next, c, sizeof(o.next)) == 0);
        return 0;
    }
    CHECK(o.committed);
    CHECK(entry_check(&o.next) == NULL);
    CHECK(o.next.seg[VSEG_TR].sel == in.sel);
    CHECK((o.next.seg[VSEG_TR].ar & 0xd) == 0x1 || (o.next.seg[VSEG_TR].ar & 0xf) == 0xb);
    CHECK(o.next.cr0 & 8);
    CHECK(!(o.next.dr7 & 0x155));
    CHECK((o.next.eflags & 2) && !(o.next.eflags & 0xffc08028u));
    CHECK(o.cr3_loaded ? (c->cr0 >> 31) != 0 : o.next.cr3 == c->cr3);
    return 0;
}
