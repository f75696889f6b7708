/* SPDX-License-Identifier: MIT */
/*
 * vmm/trace/codepages.c: the set of code pages a trace window executed, against a plain
 * reference (a linear list) over random page streams; kernel pages kept once for every CR3;
 * bounded: a full set refuses (and counts) new pages, never evicts or overwrites a known one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "trace/codepages.h"

static struct cp_entry mem[256];

static void test_kernel_pages_shared(void **state)
{
    (void)state;
    struct codepages s;
    cp_init(&s, mem, 256);
    assert_int_equal(cp_note(&s, 0x1000, 0xffffffff81000123ull), 1);
    assert_int_equal(cp_note(&s, 0x2000, 0xffffffff81000fffull), 0); /* another CR3: same page */
    assert_int_equal(cp_note(&s, 0x1000, 0x401000), 1);
    assert_int_equal(cp_note(&s, 0x2000, 0x401000), 1); /* user page: per address space */
    assert_int_equal(s.n, 3);
    cp_set_crc(&s, 0x3000, 0xffffffff81000000ull, 0xdeadbeef);
    unsigned found = 0;
    for (uint32_t i = 0; i < s.cap; i++) {
        const struct cp_entry *e = cp_slot(&s, i);
        if (e && e->cr3 == CP_CR3_ANY) {
            assert_int_equal(e->va, 0xffffffff81000000ull);
            assert_int_equal(e->crc, 0xdeadbeef);
            assert_int_equal(e->seen, 1);
            found++;
        }
    }
    assert_int_equal(found, 1);
}

static void test_random_vs_reference(void **state)
{
    (void)state;
    srandom(7);
    for (int round = 0; round < 50; round++) {
        struct codepages s;
        uint64_t ref_va[256], ref_cr3[256];
        unsigned nref = 0;
        uint64_t refused = 0;
        cp_init(&s, mem, 256);
        for (int k = 0; k < 2000; k++) {
            uint64_t cr3 = (uint64_t)(random() % 4) << 12;
            uint64_t va = random() % 3 ? (uint64_t)(random() % 300) << 12 | (random() & 0xfff)
                                       : 0xffffffff80000000ull + ((uint64_t)(random() % 50) << 12);
            uint64_t kc, kv;
            cp_key(cr3, va, &kc, &kv);
            unsigned i = 0;
            while (i < nref && !(ref_va[i] == kv && ref_cr3[i] == kc))
                i++;
            int want = i < nref ? 0 : (nref < 192 && (kv || kc)) ? 1 : -1;
            int got = cp_note(&s, cr3, va);
            assert_int_equal(got, want);
            if (want == 1) {
                ref_va[nref] = kv;
                ref_cr3[nref++] = kc;
            }
            refused += want < 0;
        }
        assert_int_equal(s.n, nref);
        assert_int_equal(s.overflow, refused);
        unsigned used = 0;
        for (uint32_t i = 0; i < s.cap; i++) {
            const struct cp_entry *e = cp_slot(&s, i);
            if (!e)
                continue;
            used++;
            unsigned j = 0;
            while (j < nref && !(ref_va[j] == e->va && ref_cr3[j] == e->cr3))
                j++;
            assert_true(j < nref); /* every slot is a page that ran */
        }
        assert_int_equal(used, nref);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_pages_shared),
        cmocka_unit_test(test_random_vs_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
