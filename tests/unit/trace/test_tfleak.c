/* SPDX-License-Identifier: MIT */
/*
 * The table of event frames that carry the tracer's trap flag (vmm/trace/tfleak.c): a single
 * step that comes back to a recorded frame is the tracer's and takes it; every other single
 * step -- another context, another stack, another place, or the same place after its record
 * was taken -- is the guest's own.  The table is bounded and forgets the oldest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "trace/tfleak.h"

/* the instruction at every frame's return IP: a 3-byte plain one, or a RET (goes anywhere) */
static bool ret_is_ret;

static bool reach(void *ctx, const struct tfl_frame *f, uint64_t to)
{
    (void)ctx;
    struct x86_insn in = {.len = 3, .branch = ret_is_ret ? X86_BR_RET : X86_BR_NONE};
    return tfl_insn_reaches(&in, f->ret, X86_CODE64, to);
}

static struct tfl l;

static const struct tfl_frame user = {
    .cr3 = 0x1234000, .ret = 0x401000, .rsp = 0x7ffc0000, .cs = 0x33};

static void test_after_return(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    tfl_record(&l, &user);
    /* another process, another code segment, another stack, a place one instruction cannot
     * reach: the guest's own */
    assert_false(tfl_take(&l, 0x5678000, 0x33, 0x401003, 0x7ffc0000, reach, 0));
    assert_false(tfl_take(&l, 0x1234000, 0x10, 0x401003, 0x7ffc0000, reach, 0));
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x7ff00000, reach, 0));
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401004, 0x7ffc0000, reach, 0));
    /* one instruction after its return, RSP moved by a push, the PCID of KPTI's user half
     * in CR3: the tracer's TF, and the record goes */
    assert_true(tfl_take(&l, 0x1234801, 0x33, 0x401003, 0x7ffbfff8, reach, 0));
    assert_true(tfl_empty(&l));
    /* the guest's own single step at the same place now reaches it */
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x7ffc0000, reach, 0));
    assert_int_equal(l.taken, 1);
}

static void test_at_return(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    tfl_record(&l, &user);
    /* the frame's IRET was stepped: the step lands on its return IP with its stack, exactly */
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401000, 0x7ffc0008, reach, 0));
    assert_true(tfl_take(&l, 0x1234000, 0x33, 0x401000, 0x7ffc0000, reach, 0));
    assert_true(tfl_empty(&l));
}

static void test_branch_at_return(void **state)
{
    (void)state;
    ret_is_ret = true; /* a RET at the return IP may go anywhere */
    tfl_init(&l);
    tfl_record(&l, &user);
    assert_true(tfl_take(&l, 0x1234000, 0x33, 0x499999, 0x7ffc0008, reach, 0));
}

static void test_same_frame_once(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    for (int i = 0; i < 5; i++)
        tfl_record(&l, &user); /* a loop interrupted at one place, one stack */
    assert_int_equal(l.n, 1);
    assert_true(tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x7ffc0000, reach, 0));
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x7ffc0000, reach, 0));
}

static void test_newest_first(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    struct tfl_frame a = user, b = user;
    b.rsp -= 0x100; /* a nested frame lower on the same stack, returning to the same code */
    tfl_record(&l, &a);
    tfl_record(&l, &b);
    assert_true(tfl_take(&l, 0x1234000, 0x33, 0x401003, b.rsp, reach, 0));
    assert_int_equal(l.n, 1);
    assert_int_equal(l.f[0].rsp, a.rsp);
}

static void test_bounded(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    for (unsigned i = 0; i < TFL_MAX + 10; i++) {
        struct tfl_frame f = user;
        f.rsp = 0x10000000ull + i * 0x100000ull; /* each on its own stack */
        tfl_record(&l, &f);
    }
    assert_int_equal(l.n, TFL_MAX);
    assert_int_equal(l.dropped, 10);
    /* the oldest ten are gone: their TF is the guest's to see */
    assert_false(tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x10000000ull, reach, 0));
    assert_true(
        tfl_take(&l, 0x1234000, 0x33, 0x401003, 0x10000000ull + 10 * 0x100000ull, reach, 0));
}

/* one frame's answer, as the shim asks it of a frame another vCPU has not recorded yet */
/* a flood of one context's frames pushes out its own records, never another context's */
static void test_flood_evicts_its_own(void **state)
{
    (void)state;
    ret_is_ret = false;
    tfl_init(&l);
    struct tfl_frame victim = user;
    victim.cr3 = 0x7777000;
    tfl_record(&l, &victim); /* the oldest record of all */
    for (unsigned i = 0; i < 1000; i++) {
        struct tfl_frame f = user;
        f.rsp = 0x10000000ull + i * 0x100000ull;
        tfl_record(&l, &f);
    }
    assert_int_equal(l.n, TFL_MAX);
    assert_int_equal(l.dropped, 1000 - (TFL_MAX - 1));
    assert_true(tfl_take(&l, victim.cr3, 0x33, 0x401003, victim.rsp, reach, 0));
    /* the flood kept its newest */
    assert_true(
        tfl_take(&l, user.cr3, 0x33, 0x401003, 0x10000000ull + 999 * 0x100000ull, reach, 0));
    assert_false(tfl_take(&l, user.cr3, 0x33, 0x401003, 0x10000000ull, reach, 0));
}

static void test_explains(void **state)
{
    (void)state;
    ret_is_ret = false;
    assert_true(tfl_explains(&user, 0x1234000, 0x33, 0x401000, 0x7ffc0000, reach, 0));
    assert_true(tfl_explains(&user, 0x1234801, 0x33, 0x401003, 0x7ffbfff8, reach, 0));
    assert_false(tfl_explains(&user, 0x1235000, 0x33, 0x401003, 0x7ffc0000, reach, 0));
    assert_false(tfl_explains(&user, 0x1234000, 0x2b, 0x401003, 0x7ffc0000, reach, 0));
    assert_false(tfl_explains(&user, 0x1234000, 0x33, 0x401003, 0x7ff00000, reach, 0));
    assert_false(tfl_explains(&user, 0x1234000, 0x33, 0x401000, 0x7ffc0008, reach, 0));
}

static void test_reaches(void **state)
{
    (void)state;
    struct x86_insn jcc = {.len = 2, .branch = X86_BR_JCC, .rel = 0x10};
    assert_true(tfl_insn_reaches(&jcc, 0x1000, X86_CODE64, 0x1002));
    assert_true(tfl_insn_reaches(&jcc, 0x1000, X86_CODE64, 0x1012));
    assert_false(tfl_insn_reaches(&jcc, 0x1000, X86_CODE64, 0x1013));
    struct x86_insn nop = {.len = 1};
    assert_true(tfl_insn_reaches(&nop, 0xffff, X86_CODE16, 0)); /* IP wraps in 16-bit code */
    struct x86_insn ud = {.len = 2, .branch = X86_BR_UD};
    assert_false(tfl_insn_reaches(&ud, 0x1000, X86_CODE64, 0x1002));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_after_return),
        cmocka_unit_test(test_at_return),
        cmocka_unit_test(test_branch_at_return),
        cmocka_unit_test(test_same_frame_once),
        cmocka_unit_test(test_newest_first),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_reaches),
        cmocka_unit_test(test_explains),
        cmocka_unit_test(test_flood_evicts_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
