/* SPDX-License-Identifier: MIT */
/*
 * vmm/lib/string.c, the VMM's freestanding memcpy & co., under names of its own (the build
 * renames them: the host's libc keeps its own), against byte-by-byte references: every length
 * 0..64 at every alignment 0..7, overlapping moves both ways, sign of comparisons.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/ptv_string.h" /* memcpy -> vmm_memcpy, ... (mk/85-vmm-host.mk) */

static uint8_t a[160], b[160];

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 31 + seed * 7 + 1);
}

static void test_memcpy_memset(void **state)
{
    for (size_t n = 0; n <= 64; n++)
        for (size_t da = 0; da < 8; da++)
            for (size_t sa = 0; sa < 8; sa++) {
                fill(a, sizeof(a), 1);
                fill(b, sizeof(b), 2);
                assert_ptr_equal(memcpy(b + 16 + da, a + 16 + sa, n), b + 16 + da);
                for (size_t i = 0; i < sizeof(b); i++) {
                    uint8_t want = i >= 16 + da && i < 16 + da + n
                                       ? (uint8_t)((i - da + sa) * 31 + 7 + 1)
                                       : (uint8_t)(i * 31 + 14 + 1);
                    assert_int_equal(b[i], want);
                }
                fill(b, sizeof(b), 2);
                assert_ptr_equal(memset(b + 16 + da, 0x5a + (int)sa, n), b + 16 + da);
                for (size_t i = 0; i < sizeof(b); i++)
                    assert_int_equal(b[i], i >= 16 + da && i < 16 + da + n
                                               ? (uint8_t)(0x5a + sa)
                                               : (uint8_t)(i * 31 + 14 + 1));
            }
}

static void test_memmove_overlap(void **state)
{
    for (size_t n = 0; n <= 64; n++)
        for (int shift = -9; shift <= 9; shift++) {
            uint8_t ref[160];
            fill(a, sizeof(a), 3);
            fill(ref, sizeof(ref), 3);
            /* the reference: through a temporary */
            uint8_t tmp[64];
            for (size_t i = 0; i < n; i++)
                tmp[i] = ref[40 + i];
            for (size_t i = 0; i < n; i++)
                ref[40 + shift + i] = tmp[i];
            memmove(a + 40 + shift, a + 40, n);
            for (size_t i = 0; i < sizeof(a); i++)
                assert_int_equal(a[i], ref[i]);
        }
}

static void test_compare_and_length(void **state)
{
    assert_int_equal(memcmp("abc", "abc", 3), 0);
    assert_true(memcmp("abc", "abd", 3) < 0);
    assert_true(memcmp("abd", "abc", 3) > 0);
    assert_true(memcmp("\x80", "\x01", 1) > 0); /* unsigned bytes */
    assert_int_equal(memcmp("x", "y", 0), 0);
    assert_int_equal(strlen(""), 0);
    assert_int_equal(strlen("ptvisor"), 7);
    assert_int_equal(strnlen("ptvisor", 3), 3);
    assert_int_equal(strnlen("pt", 8), 2);
    assert_int_equal(strcmp("vmm", "vmm"), 0);
    assert_true(strcmp("vmm", "vmx") < 0);
    assert_true(strcmp("vmm", "vm") > 0);
    assert_true(strcmp("\xff", "a") > 0);
    assert_int_equal(strncmp("vmexit", "vmentry", 3), 0);
    assert_true(strncmp("vmexit", "vmentry", 4) > 0);
    assert_int_equal(strncmp("a", "b", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memcpy_memset),
        cmocka_unit_test(test_memmove_overlap),
        cmocka_unit_test(test_compare_and_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
