/* SPDX-License-Identifier: MIT */
/* What PT output may do at a GPA (vmm/pt/pt_mem_view.c): kinds, lengths, and facts that cannot be.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pt/pt_mem_view.h"
#include "ptv/handoff.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static struct pt_mem_xlate view(uint64_t gpa, struct pt_mem_facts f)
{
    struct pt_mem_xlate x = {.hpa = 0xdead, .len = 0, .kind = PT_MEM_COUNT};
    pt_mem_view(gpa, &f, &x);
    return x;
}

static struct pt_mem_facts ram(uint64_t gpa, unsigned shift, uint64_t map_end)
{
    return (struct pt_mem_facts){.ept_ok = true,
                                 .hpa = gpa,
                                 .page_shift = shift,
                                 .map_type = PTV_MEM_RAM,
                                 .map_end = map_end};
}

static void test_ram_lengths(void **state)
{
    /* a 4 KiB leaf: to the end of the page */
    struct pt_mem_xlate x = view(0x100010, ram(0x100010, 12, 64 * MIB));
    assert_int_equal(x.kind, PT_MEM_GUEST_RAM);
    assert_int_equal(x.hpa, 0x100010);
    assert_int_equal(x.len, 0x1000 - 0x10);
    /* a 2 MiB leaf inside a long RAM range: to the end of the 2 MiB page */
    x = view(0x300000, ram(0x300000, 21, 64 * MIB));
    assert_int_equal(x.len, 0x100000);
    /* a 1 GiB leaf whose RAM range ends first: the range's end, never past it */
    x = view(GIB + 0x5000, ram(GIB + 0x5000, 30, GIB + 8 * MIB));
    assert_int_equal(x.kind, PT_MEM_GUEST_RAM);
    assert_int_equal(x.len, 8 * MIB - 0x5000);
}

static void test_not_ram(void **state)
{
    struct pt_mem_facts f = ram(0x200000, 21, 0x400000);
    f.in_vmm = true; /* the VMM's span wins over anything the walk says */
    struct pt_mem_xlate x = view(0x200000, f);
    assert_int_equal(x.kind, PT_MEM_VMM);
    assert_int_equal(x.hpa, 0);
    assert_int_equal(x.len, 0x1000);

    f = ram(0x200000, 12, 0x400000);
    f.ept_ok = false;
    assert_int_equal(view(0x200000, f).kind, PT_MEM_UNMAPPED);

    /* whatever the facts say, nothing at or above 2^52 is mapped (lengths would wrap there) */
    f = ram(0xfffffffffffc0000ull, 21, 0xfffffffffffc000aull);
    assert_int_equal(view(0xfffffffffffc0000ull, f).kind, PT_MEM_UNMAPPED);

    f = ram(0x200000, 12, 0x400000);
    f.map_type = PTV_MEM_VMM;
    assert_int_equal(view(0x200000, f).kind, PT_MEM_VMM);
    f.map_type = PTV_MEM_MMIO;
    assert_int_equal(view(0x200000, f).kind, PT_MEM_MMIO);
    f.map_type = 0; /* a hole, or any type this VMM does not know */
    assert_int_equal(view(0x200000, f).kind, PT_MEM_MMIO);
    f.map_type = 77;
    assert_int_equal(view(0x200000, f).kind, PT_MEM_MMIO);
}

/* an EPT translation that is not the identity (the sink page above RAM): VMM memory, whatever
 * the map says, so no guest output ever lands on the page every such GPA shares */
static void test_sink_page_is_vmm(void **state)
{
    struct pt_mem_facts f = ram(8 * GIB, 12, 9 * GIB);
    f.hpa = 0x7654000;
    struct pt_mem_xlate x = view(8 * GIB, f);
    assert_int_equal(x.kind, PT_MEM_VMM);
}

/* facts that cannot be (a map range ending at or before gpa, a leaf size EPT has not): only
 * this 4 KiB page, and never as guest RAM */
static void test_impossible_facts(void **state)
{
    struct pt_mem_xlate x = view(0x500800, ram(0x500800, 12, 0x500000));
    assert_int_equal(x.kind, PT_MEM_MMIO);
    assert_int_equal(x.len, 0x800);
    x = view(0x500000, ram(0x500000, 39, 64 * MIB));
    assert_int_equal(x.kind, PT_MEM_MMIO);
    assert_int_equal(x.len, 0x1000);
    x = view(0x500000, ram(0x500000, 0, 64 * MIB));
    assert_int_equal(x.kind, PT_MEM_MMIO);
}

/* every answer stays inside its 4 KiB-aligned promise: len >= rest of the 4 KiB page, and
 * RAM never runs past the map range or the EPT page */
static void test_random_facts(void **state)
{
    uint64_t s = 12345;
    static const unsigned shifts[] = {12, 21, 30, 0, 39};
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t gpa = s % (64 * GIB);
        struct pt_mem_facts f = {.in_vmm = (s >> 40) % 9 == 0,
                                 .ept_ok = (s >> 44) % 7 != 0,
                                 .hpa = (s >> 50) % 5 ? gpa : gpa ^ 0x1000,
                                 .page_shift = shifts[(s >> 20) % 5],
                                 .map_type = (uint32_t)((s >> 30) % 7),
                                 .map_end = gpa - 0x10000 + (s >> 3) % (4 * GIB)};
        struct pt_mem_xlate x = view(gpa, f);
        assert_true(x.kind < PT_MEM_COUNT);
        assert_true(x.len >= 0x1000 - (gpa & 0xfff) || x.len == f.map_end - gpa);
        if (x.kind == PT_MEM_GUEST_RAM) {
            assert_false(f.in_vmm);
            assert_true(f.ept_ok && f.hpa == gpa && f.map_type == PTV_MEM_RAM);
            assert_true(gpa + x.len <= f.map_end);
            assert_true(x.len <= (1ull << f.page_shift) - (gpa & ((1ull << f.page_shift) - 1)));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ram_lengths),      cmocka_unit_test(test_not_ram),
        cmocka_unit_test(test_sink_page_is_vmm), cmocka_unit_test(test_impossible_facts),
        cmocka_unit_test(test_random_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
