/* SPDX-License-Identifier: MIT */
/*
 * The task-switch emulator (vmm/emul/task_switch.c) over a fake guest RAM of 64 KiB holding a
 * GDT, an LDT, two 32-bit TSSes (A current, B the target) and a 16-bit one.  Each source (JMP,
 * CALL, IRET, task gate for a hardware event with an error code, for INT n) is checked field
 * by field: the old TSS's saved state, busy bits, NT, the back link, TR, CR0.TS, DR7, the
 * pushed error code, and the new state passes the VM-entry guest-state model
 * (vmm/emul/guest_check.c).  Every refusal before the commit leaves the RAM byte for byte as it
 * was; faults after the commit (a bad data segment, the error code off the stack) load the new
 * task and report the fault.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "emul/task_switch.h"
#include "emul/guest_check.h"
#include "fakes/ts_entry.h"

#define RAM_SIZE 0x10000u
static uint8_t ram[RAM_SIZE];

/* the accessor: linear = physical (any CR3); the last CR3 of each kind of access recorded */
struct fake {
    unsigned reads, writes;
    uint64_t cs_read_cr3; /* CR3 of the read of the new CS's descriptor */
    uint32_t cs_desc_lin;
    bool cr3_refuse;
};
static struct fake fk;

static bool f_read(void *ctx, uint64_t cr3, uint32_t lin, void *buf, unsigned len, bool w)
{
    (void)ctx;
    (void)w;
    fk.reads++;
    if (lin == fk.cs_desc_lin && len == 8)
        fk.cs_read_cr3 = cr3;
    if (lin >= RAM_SIZE || len > RAM_SIZE - lin)
        return false;
    memcpy(buf, ram + lin, len);
    return true;
}
static bool f_write(void *ctx, uint64_t cr3, uint32_t lin, const void *buf, unsigned len)
{
    (void)ctx;
    (void)cr3;
    fk.writes++;
    if (lin >= RAM_SIZE || len > RAM_SIZE - lin)
        return false;
    memcpy(ram + lin, buf, len);
    return true;
}
static bool f_cr3_ok(void *ctx, uint64_t cr3)
{
    (void)ctx;
    (void)cr3;
    return !fk.cr3_refuse;
}
static const struct ts_mem mem = {.read = f_read, .write = f_write, .cr3_ok = f_cr3_ok};

#define GDT     0x1000u
#define TSS_A   0x2000u
#define TSS_B   0x3000u
#define TSS_16  0x3800u
#define LDT     0x4000u
#define STACK_B 0x8000u

#define SEL_CS    0x08
#define SEL_DS    0x10
#define SEL_A     0x18
#define SEL_B     0x20
#define SEL_LDT   0x28
#define SEL_T16   0x30
#define SEL_CS3   0x3b /* RPL 3 */
#define SEL_DS3   0x43
#define SEL_CS_NA 0x48 /* code, not yet accessed */
#define SEL_FAR   0x50 /* TSS beyond the RAM */
#define SEL_DS_NP 0x58 /* data, not present */
#define SEL_SMALL 0x60 /* TSS with limit 0x66 */
#define SEL_LDTD  0x0c /* LDT entry 1: data */

static void desc(uint16_t sel, uint32_t base, uint32_t limit, uint8_t access, uint8_t flags)
{
    uint8_t *d = ram + GDT + (sel & ~7u);
    if (sel & 4)
        d = ram + LDT + (sel & ~7u);
    d[0] = (uint8_t)limit;
    d[1] = (uint8_t)(limit >> 8);
    d[2] = (uint8_t)base;
    d[3] = (uint8_t)(base >> 8);
    d[4] = (uint8_t)(base >> 16);
    d[5] = access;
    d[6] = (uint8_t)((flags << 4) | ((limit >> 16) & 0xf));
    d[7] = (uint8_t)(base >> 24);
}
static uint8_t desc_type(uint16_t sel)
{
    return ram[GDT + (sel & ~7u) + 5] & 0xf;
}
static uint32_t rd32(uint32_t a)
{
    uint32_t v;
    memcpy(&v, ram + a, 4);
    return v;
}
static uint16_t rd16(uint32_t a)
{
    uint16_t v;
    memcpy(&v, ram + a, 2);
    return v;
}
static void wr32(uint32_t a, uint32_t v)
{
    memcpy(ram + a, &v, 4);
}
static void wr16(uint32_t a, uint16_t v)
{
    memcpy(ram + a, &v, 2);
}

/* a 32-bit TSS holding a flat ring-0 task at eip, registers 0x100*i */
static void tss32(uint32_t at, uint32_t eip, uint32_t eflags)
{
    memset(ram + at, 0, 0x68);
    wr32(at + 0x1c, 0x7000);
    wr32(at + 0x20, eip);
    wr32(at + 0x24, eflags);
    for (unsigned i = 0; i < 8; i++)
        wr32(at + 0x28 + 4 * i, 0x100 * (i + 1));
    wr32(at + 0x38, STACK_B); /* ESP */
    uint16_t segs[6] = {SEL_DS, SEL_CS, SEL_DS, SEL_DS, SEL_DS, 0};
    for (unsigned i = 0; i < 6; i++)
        wr16(at + 0x48 + 4 * i, segs[i]);
    wr16(at + 0x60, SEL_LDT);
}

static struct vmx_seg flat(uint16_t sel, uint32_t ar)
{
    return (struct vmx_seg){.sel = sel, .base = 0, .limit = 0xffffffff, .ar = ar};
}

/* the current task: A, flat ring 0, at EIP 0x500 */
static struct ts_in setup(uint16_t target, enum ts_source src)
{
    memset(ram, 0, sizeof(ram));
    memset(&fk, 0, sizeof(fk));
    desc(SEL_CS, 0, 0xfffff, 0x9b, 0xc);
    desc(SEL_DS, 0, 0xfffff, 0x93, 0xc);
    desc(SEL_A, TSS_A, 0x67, 0x8b, 0);
    desc(SEL_B, TSS_B, 0x67, 0x89, 0);
    desc(SEL_LDT, LDT, 0x17, 0x82, 0);
    desc(SEL_T16, TSS_16, 0x2b, 0x81, 0);
    desc(SEL_CS3, 0, 0xfffff, 0xfb, 0xc);
    desc(SEL_DS3, 0, 0xfffff, 0xf3, 0xc);
    desc(SEL_CS_NA, 0, 0xfffff, 0x9a, 0xc);
    desc(SEL_FAR, 0x00f00000, 0x67, 0x89, 0);
    desc(SEL_DS_NP, 0, 0xfffff, 0x13, 0xc);
    desc(SEL_SMALL, TSS_B, 0x66, 0x89, 0);
    desc(SEL_LDTD, 0, 0xfffff, 0x93, 0xc);
    tss32(TSS_A, 0xaaaa, 0x2);
    tss32(TSS_B, 0x1234, 0x202);
    memset(ram + TSS_16, 0, 0x2c);
    wr16(TSS_16 + 0x0e, 0x4321);
    wr16(TSS_16 + 0x10, 0x0046);
    for (unsigned i = 0; i < 8; i++)
        wr16(TSS_16 + 0x12 + 2 * i, (uint16_t)(0x11 * (i + 1)));
    wr16(TSS_16 + 0x12 + 8, 0x9000); /* SP */
    wr16(TSS_16 + 0x22, SEL_DS);
    wr16(TSS_16 + 0x24, SEL_CS);
    wr16(TSS_16 + 0x26, SEL_DS);
    wr16(TSS_16 + 0x28, SEL_DS);
    struct ts_in in = {
        .cur =
            {
                .cr0 = 0x11, /* PE, ET */
                .cr3 = 0x6000,
                .dr7 = 0x7ff,
                .eip = 0x500,
                .eflags = 0x4202, /* IF, NT */
                .gpr = {1, 2, 3, 4, 0x7ff0, 6, 7, 8},
                .gdtr_base = GDT,
                .gdtr_limit = 0xff,
            },
        .sel = target,
        .source = src,
        .insn_len = 7,
    };
    in.cur.seg[VSEG_ES] = flat(SEL_DS, 0xc093);
    in.cur.seg[VSEG_CS] = flat(SEL_CS, 0xc09b);
    in.cur.seg[VSEG_SS] = flat(SEL_DS, 0xc093);
    in.cur.seg[VSEG_DS] = flat(SEL_DS, 0xc093);
    in.cur.seg[VSEG_FS] = flat(0, 0x10000);
    in.cur.seg[VSEG_GS] = flat(SEL_DS, 0xc093);
    in.cur.seg[VSEG_LDTR] = (struct vmx_seg){.sel = 0, .ar = 0x10000};
    in.cur.seg[VSEG_TR] = (struct vmx_seg){.sel = SEL_A, .base = TSS_A, .limit = 0x67, .ar = 0x8b};
    fk.cs_desc_lin = GDT + SEL_CS;
    return in;
}

static void entry_ok(const struct ts_state *s)
{
    const char *why = ts_entry_check(s, s->cr0 | 0x20); /* NE: a VMX fixed bit */
    if (why)
        fail_msg("VM entry would fail: %s", why);
}

/* the old task A as saved by the switch */
static void assert_saved_a(uint32_t eip, uint32_t eflags)
{
    assert_int_equal(rd32(TSS_A + 0x20), eip);
    assert_int_equal(rd32(TSS_A + 0x24), eflags);
    static const uint32_t gpr[8] = {1, 2, 3, 4, 0x7ff0, 6, 7, 8};
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(rd32(TSS_A + 0x28 + 4 * i), gpr[i]);
    static const uint16_t seg[6] = {SEL_DS, SEL_CS, SEL_DS, SEL_DS, 0, SEL_DS};
    for (unsigned i = 0; i < 6; i++)
        assert_int_equal(rd16(TSS_A + 0x48 + 4 * i), seg[i]);
    assert_int_equal(rd32(TSS_A + 0x1c), 0x7000);  /* CR3 is not saved */
    assert_int_equal(rd16(TSS_A + 0x60), SEL_LDT); /* nor LDTR */
}

/* the new task B as loaded */
static void assert_loaded_b(const struct ts_out *o)
{
    const struct ts_state *n = &o->next;
    assert_int_equal(n->eip, 0x1234);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(n->gpr[i], i == 4 ? STACK_B : 0x100 * (i + 1));
    assert_int_equal(n->seg[VSEG_CS].sel, SEL_CS);
    assert_int_equal(n->seg[VSEG_CS].ar, 0xc09b);
    assert_int_equal(n->seg[VSEG_CS].limit, 0xffffffff);
    assert_int_equal(n->seg[VSEG_SS].ar, 0xc093);
    assert_int_equal(n->seg[VSEG_GS].ar, 0x10000); /* null: unusable */
    assert_int_equal(n->seg[VSEG_LDTR].sel, SEL_LDT);
    assert_int_equal(n->seg[VSEG_LDTR].base, LDT);
    assert_int_equal(n->seg[VSEG_LDTR].ar, 0x82);
    assert_int_equal(n->seg[VSEG_TR].sel, SEL_B);
    assert_int_equal(n->seg[VSEG_TR].base, TSS_B);
    assert_int_equal(n->seg[VSEG_TR].limit, 0x67);
    assert_int_equal(n->seg[VSEG_TR].ar, 0x8b); /* busy */
    assert_int_equal(n->cr0, 0x11 | 0x8);       /* CR0.TS */
    assert_int_equal(n->cr3, 0x6000);           /* paging off: CR3 kept */
    assert_false(o->cr3_loaded);
    assert_int_equal(n->dr7, 0x7ff & ~0x155ull); /* local enables cleared */
    entry_ok(n);
}

static void test_jmp(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_true(o.committed);
    assert_loaded_b(&o);
    assert_int_equal(o.next.eflags, 0x202);  /* NT as the TSS has it */
    assert_saved_a(0x507, 0x4202);           /* EIP past the JMP, NT kept in the image */
    assert_int_equal(desc_type(SEL_A), 0x9); /* old: busy cleared */
    assert_int_equal(desc_type(SEL_B), 0xb); /* new: busy */
    assert_int_equal(rd16(TSS_B), 0);        /* no back link */
}

static void test_call(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_CALL);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_loaded_b(&o);
    assert_int_equal(o.next.eflags, 0x202 | 0x4000); /* NT set */
    assert_saved_a(0x507, 0x4202);
    assert_int_equal(desc_type(SEL_A), 0xb); /* old stays busy */
    assert_int_equal(desc_type(SEL_B), 0xb);
    assert_int_equal(rd16(TSS_B), SEL_A); /* back link */
}

static void test_gate_hw_error(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_GATE);
    in.event = TS_EV_HW;
    in.has_error = true;
    in.error = 0xbeef;
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_int_equal(o.next.eflags, 0x4202);
    assert_saved_a(0x500, 0x4202); /* the faulting EIP: no instruction length */
    assert_int_equal(rd16(TSS_B), SEL_A);
    assert_int_equal(desc_type(SEL_A), 0xb);
    assert_int_equal(o.next.gpr[4], STACK_B - 4); /* error code pushed */
    assert_int_equal(rd32(STACK_B - 4), 0xbeef);
    entry_ok(&o.next);
}

static void test_gate_soft(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_GATE);
    in.event = TS_EV_SOFT;
    in.insn_len = 2;
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_saved_a(0x502, 0x4202); /* INT n: EIP past the instruction */
    assert_int_equal(o.next.gpr[4], STACK_B);
}

/* after the commit, the first bad data segment ends the loads (Bochs, KVM): the segments after
 * it stay unusable and the event's error code is not pushed */
static void test_data_fault_stops_loads(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_GATE);
    in.event = TS_EV_HW;
    in.has_error = true;
    in.error = 0xbeef;
    wr16(TSS_B + 0x54, SEL_DS_NP); /* DS: after ES, before FS and GS */
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
    assert_true(o.committed);
    assert_int_equal(o.vector, TS_VEC_NP);
    assert_int_equal(o.error, SEL_DS_NP | 1); /* EXT: a hardware event caused the switch */
    assert_int_equal(o.next.seg[VSEG_ES].sel, SEL_DS);
    assert_int_not_equal(o.next.seg[VSEG_ES].ar, 0x10000); /* loaded before the fault */
    assert_int_equal(o.next.seg[VSEG_FS].ar, 0x10000);     /* after it: unusable */
    assert_int_equal(o.next.seg[VSEG_GS].ar, 0x10000);
    assert_int_equal(o.next.gpr[4], STACK_B); /* nothing pushed */
    assert_int_equal(rd32(STACK_B - 4), 0);
}

/* the new SS: present is checked before its DPL (SDM Vol. 3A table 7-1, items 8 and 9) */
static void test_ss_present_before_dpl(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    desc(0x68, 0, 0xfffff, 0x73, 0xc); /* writable data, DPL 3, not present */
    wr16(TSS_B + 0x50, 0x68);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
    assert_int_equal(o.vector, TS_VEC_SS);
    assert_int_equal(o.error, 0x68);
}

/* ICEBP (INT1) through a task gate: EIP past the instruction as INT n, but EXT = 1 in error
 * codes, as for a hardware event (SDM Vol. 3A 6.13) */
static void test_gate_icebp_ext(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        struct ts_in in = setup(SEL_B, TS_GATE);
        in.event = k ? TS_EV_ICEBP : TS_EV_SOFT;
        in.insn_len = 1;
        wr16(TSS_B + 0x54, SEL_DS_NP);
        struct ts_out o;
        assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
        assert_saved_a(0x501, 0x4202);
        assert_int_equal(o.error, SEL_DS_NP | (k ? 1 : 0));
    }
}

/* CALL A -> B, then IRET from B back to A through the back link */
static void test_iret(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_CALL);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    struct ts_in back = in;
    back.cur = o.next;
    back.cur.eip = 0x1300;
    back.sel = rd16(TSS_B);
    back.source = TS_IRET;
    back.insn_len = 1;
    struct ts_out o2;
    assert_int_equal(task_switch(&back, &mem, &o2), TS_OK);
    assert_int_equal(rd32(TSS_B + 0x20), 0x1301);
    assert_int_equal(rd32(TSS_B + 0x24), 0x202); /* NT cleared in B's image */
    assert_int_equal(desc_type(SEL_B), 0x9);     /* B no longer busy */
    assert_int_equal(desc_type(SEL_A), 0xb);     /* A stays busy */
    assert_int_equal(o2.next.eip, 0x507);        /* A resumes past its CALL */
    assert_int_equal(o2.next.eflags, 0x4202);    /* A's own EFLAGS, NT included */
    assert_int_equal(o2.next.seg[VSEG_TR].sel, SEL_A);
    assert_int_equal(o2.next.seg[VSEG_TR].ar, 0x8b);
    entry_ok(&o2.next);
}

/* IRET whose back link names the current task: the load sees what the save just wrote */
static void test_iret_to_itself(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_A, TS_IRET);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_int_equal(o.next.eip, 0x507);
    assert_int_equal(o.next.eflags, 0x0202); /* the saved image, NT cleared */
    assert_int_equal(o.next.gpr[0], 1);
    assert_int_equal(desc_type(SEL_A), 0x9); /* cleared as the old, not set again as the new */
}

static void test_paging_loads_cr3(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    in.cur.cr0 |= 1ull << 31;
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_true(o.cr3_loaded);
    assert_int_equal(o.next.cr3, 0x7000);
    assert_int_equal(fk.cs_read_cr3, 0x7000); /* descriptors read through the new CR3 */
}

/* a refusal before the commit: the fault, and the RAM byte for byte as it was */
static void refused(struct ts_in *in, unsigned vector, uint32_t error)
{
    static uint8_t before[RAM_SIZE];
    memcpy(before, ram, RAM_SIZE);
    struct ts_out o;
    assert_int_equal(task_switch(in, &mem, &o), TS_FAULT);
    assert_false(o.committed);
    assert_non_null(o.why);
    assert_int_equal(o.vector, vector);
    assert_int_equal(o.error, error);
    assert_memory_equal(before, ram, RAM_SIZE);
    assert_int_equal(fk.writes, 0);
    assert_memory_equal(&o.next, &in->cur, sizeof(o.next));
}

static void test_refusals(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    ram[GDT + SEL_B + 5] &= 0x7f; /* not present */
    refused(&in, TS_VEC_NP, SEL_B);

    in = setup(SEL_A, TS_JMP); /* busy target */
    refused(&in, TS_VEC_GP, SEL_A);
    in = setup(SEL_B, TS_IRET); /* IRET to an available TSS */
    refused(&in, TS_VEC_TS, SEL_B);
    in = setup(SEL_CS, TS_CALL); /* not a TSS */
    refused(&in, TS_VEC_GP, SEL_CS);
    in = setup(SEL_LDT, TS_GATE);
    refused(&in, TS_VEC_GP, SEL_LDT | 1); /* a hardware event (EXT) */

    in = setup(SEL_SMALL, TS_JMP); /* limit 0x66 */
    refused(&in, TS_VEC_TS, SEL_SMALL);
    in = setup(SEL_FAR, TS_JMP); /* TSS outside guest RAM */
    refused(&in, TS_VEC_TS, SEL_FAR);
    in = setup(0x100, TS_JMP); /* beyond the GDT limit */
    refused(&in, TS_VEC_GP, 0x100);
    in = setup(0x100, TS_IRET);
    refused(&in, TS_VEC_TS, 0x100);
    in = setup(SEL_B | 4, TS_JMP); /* LDT bit */
    refused(&in, TS_VEC_GP, SEL_B | 4);
    in = setup(SEL_B | 4, TS_IRET);
    refused(&in, TS_VEC_TS, SEL_B | 4);
    in = setup(0, TS_CALL); /* null */
    refused(&in, TS_VEC_GP, 0);
    in = setup(SEL_B, TS_JMP); /* GDT itself outside guest RAM */
    in.cur.gdtr_base = 0xfffff000;
    in.cur.gdtr_limit = 0xffff;
    refused(&in, TS_VEC_TS, SEL_B);
    in = setup(SEL_B, TS_GATE); /* a hardware event: EXT set in the error code */
    in.event = TS_EV_HW;
    ram[GDT + SEL_B + 5] &= 0x7f;
    refused(&in, TS_VEC_NP, SEL_B | 1);
    in = setup(SEL_B, TS_JMP); /* the old TSS outside guest RAM */
    in.cur.seg[VSEG_TR].base = 0xfff00000;
    refused(&in, TS_VEC_TS, SEL_B);
    in = setup(SEL_B, TS_JMP); /* PDPTEs the CPU would refuse */
    in.cur.cr0 |= 1ull << 31;
    fk.cr3_refuse = true;
    refused(&in, TS_VEC_GP, 0);
}

/* the new task's LDTR, CS and SS: checked before the commit (task_switch.h) */
static void test_bad_new_task(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x4c, SEL_DS); /* CS = a data segment */
    refused(&in, TS_VEC_TS, SEL_DS);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x4c, SEL_CS3); /* CS DPL 3 with SS DPL 0 -> SS check */
    refused(&in, TS_VEC_TS, SEL_DS);
    in = setup(SEL_B, TS_JMP);
    ram[GDT + SEL_CS + 5] &= 0x7f;
    refused(&in, TS_VEC_NP, SEL_CS);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x50, SEL_DS_NP); /* SS not present */
    refused(&in, TS_VEC_SS, SEL_DS_NP);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x50, 0); /* null SS */
    refused(&in, TS_VEC_TS, 0);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x60, SEL_DS); /* LDT selector names a data segment */
    refused(&in, TS_VEC_TS, SEL_DS);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x60, SEL_LDT | 4);
    refused(&in, TS_VEC_TS, SEL_LDT | 4);
    in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x4c, 0x0f8); /* CS beyond the GDT limit */
    refused(&in, TS_VEC_TS, 0xf8);
}

/* a bad data segment faults after the commit, in the new task (SDM Vol. 3A 7.3 step 13) */
static void test_data_fault_after_commit(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x54, SEL_DS_NP); /* DS */
    wr16(TSS_B + 0x58, SEL_CS3);   /* FS: DPL 3 code not readable? readable: ok */
    wr16(TSS_B + 0x5c, 0x1f8);     /* GS beyond the GDT limit: the second failure */
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
    assert_true(o.committed);
    assert_int_equal(o.vector, TS_VEC_NP); /* the first failing one: DS */
    assert_int_equal(o.error, SEL_DS_NP);
    assert_int_equal(o.next.seg[VSEG_DS].sel, SEL_DS_NP);
    assert_int_equal(o.next.seg[VSEG_DS].ar, 0x10000);
    assert_int_equal(o.next.seg[VSEG_GS].ar, 0x10000);
    assert_int_equal(o.next.seg[VSEG_ES].ar, 0xc093);
    assert_int_equal(o.next.eip, 0x1234);
    assert_int_equal(desc_type(SEL_B), 0xb);
    assert_saved_a(0x507, 0x4202);
    entry_ok(&o.next);
}

static void test_ldt_segment_and_accessed(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x4c, SEL_CS_NA);
    wr16(TSS_B + 0x5c, SEL_LDTD); /* GS from the new LDT */
    ram[LDT + 8 + 5] = 0x92;      /* not accessed */
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_int_equal(o.next.seg[VSEG_CS].ar, 0xc09b);
    assert_int_equal(ram[GDT + SEL_CS_NA + 5], 0x9b);
    assert_int_equal(o.next.seg[VSEG_GS].sel, SEL_LDTD);
    assert_int_equal(o.next.seg[VSEG_GS].ar, 0xc093);
    assert_int_equal(ram[LDT + 8 + 5], 0x93);
    entry_ok(&o.next);
}

static void test_ring3_task(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    wr16(TSS_B + 0x4c, SEL_CS3);
    wr16(TSS_B + 0x50, SEL_DS3);
    wr16(TSS_B + 0x54, SEL_DS); /* DS DPL 0 < CPL 3: #TS after the commit */
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
    assert_true(o.committed);
    assert_int_equal(o.vector, TS_VEC_TS);
    assert_int_equal(o.error, SEL_DS);
    assert_int_equal(o.next.seg[VSEG_CS].ar, 0xc0fb);
    entry_ok(&o.next);
}

static void test_error_code_off_stack(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_GATE);
    in.event = TS_EV_HW;
    in.has_error = true;
    desc(0x68, STACK_B - 0x100, 0x10, 0x93, 0x4); /* 17-byte stack */
    wr16(TSS_B + 0x50, 0x68);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_FAULT);
    assert_true(o.committed);
    assert_int_equal(o.vector, TS_VEC_SS);
    assert_int_equal(o.error, 1); /* EXT */
}

static void test_tss16(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_T16, TS_CALL);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_int_equal(o.next.eip, 0x4321);
    assert_int_equal(o.next.eflags, 0x4046);
    assert_int_equal(o.next.gpr[0], 0x11);
    assert_int_equal(o.next.gpr[4], 0x9000);
    assert_int_equal(o.next.seg[VSEG_FS].ar, 0x10000); /* no FS/GS in a 16-bit TSS */
    assert_int_equal(o.next.seg[VSEG_TR].ar, 0x83);
    assert_int_equal(desc_type(SEL_T16), 0x3);
    assert_int_equal(rd16(TSS_16), SEL_A);
    assert_int_equal(o.next.cr3, 0x6000);
    entry_ok(&o.next);
    /* and IRET back from it: the old TSS is 16-bit now */
    struct ts_in back = in;
    back.cur = o.next;
    back.cur.eip = 0x4400;
    back.cur.gpr[0] = 0xabcd1234;
    back.sel = SEL_A;
    back.source = TS_IRET;
    back.insn_len = 1;
    assert_int_equal(task_switch(&back, &mem, &o), TS_OK);
    assert_int_equal(rd16(TSS_16 + 0x0e), 0x4401);
    assert_int_equal(rd16(TSS_16 + 0x12), 0x1234);
    assert_int_equal(desc_type(SEL_T16), 0x1);
    assert_int_equal(o.next.eip, 0x507);
}

static void test_v86_task(void **state)
{
    (void)state;
    struct ts_in in = setup(SEL_B, TS_JMP);
    wr32(TSS_B + 0x24, 0x20202);
    wr16(TSS_B + 0x4c, 0x1000);
    struct ts_out o;
    assert_int_equal(task_switch(&in, &mem, &o), TS_OK);
    assert_int_equal(o.next.seg[VSEG_CS].base, 0x10000);
    assert_int_equal(o.next.seg[VSEG_CS].ar, 0xf3);
    assert_int_equal(o.next.seg[VSEG_CS].limit, 0xffff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jmp),
        cmocka_unit_test(test_call),
        cmocka_unit_test(test_gate_hw_error),
        cmocka_unit_test(test_gate_soft),
        cmocka_unit_test(test_data_fault_stops_loads),
        cmocka_unit_test(test_ss_present_before_dpl),
        cmocka_unit_test(test_gate_icebp_ext),
        cmocka_unit_test(test_iret),
        cmocka_unit_test(test_iret_to_itself),
        cmocka_unit_test(test_paging_loads_cr3),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_new_task),
        cmocka_unit_test(test_data_fault_after_commit),
        cmocka_unit_test(test_ldt_segment_and_accessed),
        cmocka_unit_test(test_ring3_task),
        cmocka_unit_test(test_error_code_off_stack),
        cmocka_unit_test(test_tss16),
        cmocka_unit_test(test_v86_task),
    };
    return cmocka_run_group_tests_name("task_switch", tests, NULL, NULL);
}
