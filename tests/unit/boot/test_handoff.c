/* SPDX-License-Identifier: MIT */
/*
 * Host tests for the loader/VMM handoff: ptv_handoff_check() (vmm/base/handoff.c),
 * one test per rejection, and the loader's memory map builder
 * (boot/memmap.c), whose output must always pass the check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/handoff.h"
#include "../../../boot/config.h"
#include "../../../boot/memmap.h"

#define MiB       (1ull << 20)
#define VMM_BASE  (16 * MiB)
#define VMM_IMAGE 0x5000ull
#define HANDOFF_P 0x2000ull

static struct ptv_handoff *h;

static int setup(void **state)
{
    h = calloc(1, sizeof(*h));
    h->magic = PTV_HANDOFF_MAGIC;
    h->version = PTV_HANDOFF_VERSION;
    h->size = sizeof(*h);
    h->vmm_base = VMM_BASE;
    h->vmm_size = VMM_IMAGE;
    h->pool_base = VMM_BASE + VMM_IMAGE + HANDOFF_P;
    h->pool_size = 2 * MiB;
    h->mem[0] = (struct ptv_mem_range){0, 0x9f000, PTV_MEM_RAM, 0};
    h->mem[1] = (struct ptv_mem_range){0x100000, VMM_BASE - 0x100000, PTV_MEM_RAM, 0};
    h->mem[2] = (struct ptv_mem_range){VMM_BASE, VMM_IMAGE + HANDOFF_P + 2 * MiB, PTV_MEM_VMM, 0};
    h->mem[3] = (struct ptv_mem_range){0xfec00000, 0x1000, PTV_MEM_MMIO, 0};
    h->nr_mem = 4;
    ptv_config_defaults(&h->cfg);
    return 0;
}

static int teardown(void **state)
{
    free(h);
    return 0;
}

static void rejected(const char *want)
{
    const char *why = NULL;
    assert_int_equal(ptv_handoff_check(h, &why), -1);
    assert_non_null(why);
    assert_string_equal(why, want);
    teardown(NULL);
    setup(NULL);
}

static void test_valid(void **state)
{
    const char *why = NULL;
    assert_int_equal(ptv_handoff_check(h, &why), 0);
    assert_null(why);
}

static void test_header(void **state)
{
    h->magic ^= 1;
    rejected("handoff: bad magic");
    h->version = PTV_HANDOFF_VERSION + 1;
    rejected("handoff: version mismatch between loader and VMM");
    h->size -= 8;
    rejected("handoff: size mismatch between loader and VMM");
    h->nr_mem = 0;
    rejected("handoff: nr_mem out of range");
    h->nr_mem = PTV_HANDOFF_MAX_MEM + 1;
    rejected("handoff: nr_mem out of range");
}

static void test_ranges(void **state)
{
    h->mem[1].base += 0x800;
    rejected("handoff: memory range not 4 KiB aligned");
    h->mem[3].size = 0x1800;
    rejected("handoff: memory range not 4 KiB aligned");
    h->mem[3].size = 0;
    rejected("handoff: memory range empty or wrapping");
    h->mem[3].size = 0ull - 0xfec00000ull + 0x1000;
    rejected("handoff: memory range empty or wrapping");
    h->mem[0].type = 0;
    rejected("handoff: memory range of unknown type");
    h->mem[0].type = PTV_MEM_VMM + 1;
    rejected("handoff: memory range of unknown type");
    h->mem[0].size = 0x101000;
    rejected("handoff: memory ranges unsorted or overlapping");
    struct ptv_mem_range t = h->mem[0];
    h->mem[0] = h->mem[1];
    h->mem[1] = t;
    rejected("handoff: memory ranges unsorted or overlapping");
}

static void test_vmm_and_pool(void **state)
{
    h->vmm_base += 8;
    rejected("handoff: VMM image not 4 KiB aligned or empty");
    h->vmm_size = 0;
    rejected("handoff: VMM image not 4 KiB aligned or empty");
    h->vmm_base = 0x1000; /* in RAM, not in a VMM range */
    rejected("handoff: VMM image outside the PTV_MEM_VMM ranges");
    h->mem[2].type = PTV_MEM_RESERVED;
    rejected("handoff: VMM image outside the PTV_MEM_VMM ranges");
    h->pool_size += 0x1000; /* one page past the VMM range */
    rejected("handoff: pool outside the PTV_MEM_VMM ranges");
    h->pool_base += 0x10;
    rejected("handoff: pool not 4 KiB aligned");
    h->pool_size = MiB - 0x1000;
    rejected("handoff: pool smaller than 1 MiB");
    h->pool_base = VMM_BASE;
    rejected("handoff: pool overlaps the VMM image");
}

static void test_mem_type_at(void **state)
{
    uint64_t end;
    assert_int_equal(ptv_mem_type_at(h, 0x1234, &end), PTV_MEM_RAM);
    assert_int_equal(end, 0x9f000);
    assert_int_equal(ptv_mem_type_at(h, VMM_BASE + 8, &end), PTV_MEM_VMM);
    assert_int_equal(ptv_mem_type_at(h, 0xfec00010, &end), PTV_MEM_MMIO);
    assert_int_equal(ptv_mem_type_at(h, 0xa0123, &end), PTV_MEM_MMIO); /* a hole */
    assert_int_equal(end, 0xa1000);
    /* the search against a scan of every range, at every range's edges */
    for (unsigned i = 0; i < h->nr_mem; i++) {
        const struct ptv_mem_range *r = &h->mem[i];
        uint64_t probes[] = {r->base - 1, r->base, r->base + r->size - 1, r->base + r->size};
        for (unsigned k = 0; k < 4; k++) {
            uint64_t pa = probes[k], want_end = (pa | 0xfff) + 1;
            uint32_t want = PTV_MEM_MMIO;
            for (unsigned j = 0; j < h->nr_mem; j++)
                if (pa - h->mem[j].base < h->mem[j].size) {
                    want = h->mem[j].type;
                    want_end = h->mem[j].base + h->mem[j].size;
                }
            assert_int_equal(ptv_mem_type_at(h, pa, &end), want);
            assert_int_equal(end, want_end);
        }
    }
}

static void test_config(void **state)
{
    static const struct {
        size_t off, width;
        uint64_t bad;
        const char *why;
    } cases[] = {
#define F(field) offsetof(struct ptv_config, field), sizeof(((struct ptv_config *)0)->field)
        {F(serial_port), 0xfff9, "config: serial_port out of range"},
        {F(serial_baud), 0, "config: serial_baud does not divide 115200"},
        {F(serial_baud), 100000, "config: serial_baud does not divide 115200"},
        {F(serial_baud), 230400, "config: serial_baud does not divide 115200"},
        {F(pt_mode), PTV_PT_HOST_GUEST + 1, "config: pt_mode out of range"},
        {F(trace_filter), 0, "config: pt_filter empty or unknown bits"},
        {F(trace_filter), 4, "config: pt_filter empty or unknown bits"},
        {F(trace_buf_size), 3 << 20, "config: pt_buffer not a power of two in 4K..1G"},
        {F(trace_buf_size), 2048, "config: pt_buffer not a power of two in 4K..1G"},
        {F(trace_buf_size), 2ull << 30, "config: pt_buffer not a power of two in 4K..1G"},
        {F(trace_buf_size), 0, "config: pt_buffer not a power of two in 4K..1G"},
        {F(trace_cr3), 0x1010, "config: pt_cr3 has reserved bits"},
        {F(trace_cr3), 1ull << 52, "config: pt_cr3 has reserved bits"},
        {F(dump_on), 8, "config: dump_on has unknown bits"},
        {F(dump_window), 2048, "config: dump_window out of range"},
        {F(dump_window), 2ull << 30, "config: dump_window out of range"},
        {F(dump_stall_us), 0, "config: dump_stall out of range"},
        {F(dump_stall_us), PTV_CFG_DUMP_STALL_MAX + 1, "config: dump_stall out of range"},
        {F(log_level), PTV_LOG_DEBUG + 1, "config: log_level out of range"},
        {F(pool_size), MiB + 8, "config: vmm_pool not a multiple of 4K in 1M..1G"},
        {F(pool_size), MiB - 4096, "config: vmm_pool not a multiple of 4K in 1M..1G"},
        {F(pool_size), 2ull << 30, "config: vmm_pool not a multiple of 4K in 1M..1G"},
        {F(on_no_vmx), PTV_NO_VMX_HALT + 1, "config: on_no_vmx out of range"},
        {F(crash_action), PTV_CRASH_POWEROFF + 1, "config: on_crash out of range"},
        {F(start_vmm), 2, "config: vmm out of range"},
        {F(vmcall_user), PTV_VMCALL_USER_TRACE + 1, "config: vmcall_user out of range"},
        {F(trace_sw), PTV_SW_TRACE_TF + 1, "config: sw_trace out of range"},
        {F(trace_wrap), 2, "config: trace_wrap out of range"},
        {F(trace_free), 3, "config: trace_free out of range"},
        {F(psb_period), 128, "config: psb_period not a power of two in 256..1M"},
        {F(psb_period), 3000, "config: psb_period not a power of two in 256..1M"},
        {F(psb_period), 2u << 20, "config: psb_period not a power of two in 256..1M"},
        {F(trace_nranges), 5, "config: more than 4 pt_range ranges"},
        {F(trace_boot), PTV_CFG_TRACE_BOOT_MAX + 1, "config: trace_boot out of range"},
#undef F
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy((char *)&h->cfg + cases[i].off, &cases[i].bad, cases[i].width);
        rejected(cases[i].why);
    }
    memset(h->cfg.guest_path, 'a', sizeof(h->cfg.guest_path));
    rejected("config: guest path not NUL-terminated");
    memset(h->cfg.cmdline, 'a', sizeof(h->cfg.cmdline));
    rejected("config: cmdline not NUL-terminated");
    h->cfg.trace_nranges = 1;
    h->cfg.trace_range[0].lo = 0x2000;
    h->cfg.trace_range[0].hi = 0x1fff;
    rejected("config: pt_range with lo > hi");
    /* the last byte being the NUL is enough */
    memset(h->cfg.cmdline, 'a', sizeof(h->cfg.cmdline) - 1);
    const char *why;
    assert_int_equal(ptv_handoff_check(h, &why), 0);
}

/* ---- memory map builder ---- */

static void build_ok(struct ptv_mem_range *in, unsigned n, uint64_t vb, uint64_t vs,
                     struct ptv_mem_range *out, unsigned max, unsigned *n_out)
{
    char err[PTV_MEMMAP_ERR_MAX] = "";
    int rc = ptv_memmap_build(in, n, vb, vs, out, max, n_out, err, sizeof(err));
    if (rc)
        fail_msg("ptv_memmap_build: %s", err);
}

static void test_memmap_carve_and_merge(void **state)
{
    /* an OVMF-like map, unsorted, with the VMM allocation inside conventional memory */
    struct ptv_mem_range in[] = {
        {0x100000, 0x700000, PTV_MEM_RAM, 0}, /* loader data etc., already RAM */
        {0, 0xa0000, PTV_MEM_RAM, 0},
        {0x800000, 0x8000, PTV_MEM_ACPI, 0},
        {0x808000, 0x8000, PTV_MEM_ACPI, 0}, /* merges with the one before */
        {0x810000, 0x1000000 - 0x810000, PTV_MEM_RAM, 0},
        {0x1000000, 0x400000, PTV_MEM_RESERVED, 0}, /* the VMM allocation */
        {0x1400000, 0x1000000, PTV_MEM_RAM, 0},
        {0xe0000000, 0x10000000, PTV_MEM_MMIO, 0},
        {0x3000000, 0, PTV_MEM_RAM, 0}, /* empty: ignored */
    };
    struct ptv_mem_range out[16];
    unsigned n;

    build_ok(in, 9, 0x1000000, 0x400000, out, 16, &n);
    assert_int_equal(n, 7);
    assert_int_equal(out[0].base, 0);
    assert_int_equal(out[0].size, 0xa0000);
    assert_int_equal(out[1].base, 0x100000);
    assert_int_equal(out[1].size, 0x700000);
    assert_int_equal(out[2].base, 0x800000);
    assert_int_equal(out[2].size, 0x10000);
    assert_int_equal(out[2].type, PTV_MEM_ACPI);
    assert_int_equal(out[3].base, 0x810000);
    assert_int_equal(out[3].type, PTV_MEM_RAM);
    assert_int_equal(out[4].base, 0x1000000);
    assert_int_equal(out[4].size, 0x400000);
    assert_int_equal(out[4].type, PTV_MEM_VMM);
    assert_int_equal(out[5].type, PTV_MEM_RAM);
    assert_int_equal(out[5].base, 0x1400000);
    assert_int_equal(out[5].size, 0x1000000);
    assert_int_equal(out[6].base, 0xe0000000);
    assert_int_equal(out[6].type, PTV_MEM_MMIO);
}

static void test_memmap_feeds_a_valid_handoff(void **state)
{
    struct ptv_mem_range in[] = {
        {0, 0x9f000, PTV_MEM_RAM, 0},
        {0x100000, 0x3f00000, PTV_MEM_RAM, 0}, /* the VMM span sits in the middle */
        {0xfec00000, 0x1000, PTV_MEM_MMIO, 0},
    };
    const char *why = NULL;
    unsigned n;

    build_ok(in, 3, VMM_BASE, VMM_IMAGE + HANDOFF_P + 2 * MiB, h->mem, PTV_HANDOFF_MAX_MEM, &n);
    h->nr_mem = n;
    assert_int_equal(n, 5); /* RAM, RAM below, VMM, RAM above, MMIO */
    assert_int_equal(h->mem[2].type, PTV_MEM_VMM);
    assert_int_equal(h->mem[3].base, VMM_BASE + VMM_IMAGE + HANDOFF_P + 2 * MiB);
    assert_int_equal(ptv_handoff_check(h, &why), 0);
}

static void test_memmap_vmm_outside_any_range(void **state)
{
    struct ptv_mem_range in[] = {{0, 0x1000, PTV_MEM_RAM, 0}, {0x10000, 0x1000, PTV_MEM_RAM, 0}};
    struct ptv_mem_range out[4];
    unsigned n;
    build_ok(in, 2, 0x4000, 0x2000, out, 4, &n);
    assert_int_equal(n, 3);
    assert_int_equal(out[1].base, 0x4000);
    assert_int_equal(out[1].type, PTV_MEM_VMM);
    build_ok(in, 2, 0x20000, 0x2000, out, 4, &n); /* above everything */
    assert_int_equal(n, 3);
    assert_int_equal(out[2].base, 0x20000);
}

static void test_memmap_errors(void **state)
{
    struct ptv_mem_range in[3], out[2];
    char err[PTV_MEMMAP_ERR_MAX];
    unsigned n = 77;

    in[0] = (struct ptv_mem_range){0, 0x2000, PTV_MEM_RAM, 0};
    in[1] = (struct ptv_mem_range){0x1000, 0x2000, PTV_MEM_ACPI, 0};
    assert_int_equal(ptv_memmap_build(in, 2, 0x10000, 0x1000, out, 2, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "memory map entries overlap at 0x1000");
    in[1].base = 0x2800;
    assert_int_equal(ptv_memmap_build(in, 2, 0x10000, 0x1000, out, 2, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "memory map entry not 4 KiB aligned at 0x2800");
    in[1] = (struct ptv_mem_range){0xfffffffffffff000ull, 0x2000, PTV_MEM_MMIO, 0};
    assert_int_equal(ptv_memmap_build(in, 2, 0x10000, 0x1000, out, 2, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "memory map entry wraps around at 0xfffffffffffff000");
    assert_int_equal(ptv_memmap_build(in, 1, 0x10800, 0x1000, out, 2, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "VMM span not 4 KiB aligned or empty at 0x10800");
    assert_int_equal(ptv_memmap_build(in, 1, 0x10000, 0, out, 2, &n, err, sizeof(err)), -1);
    /* three ranges of different types do not fit into two */
    in[1] = (struct ptv_mem_range){0x3000, 0x1000, PTV_MEM_ACPI, 0};
    in[2] = (struct ptv_mem_range){0x5000, 0x1000, PTV_MEM_MMIO, 0};
    assert_int_equal(ptv_memmap_build(in, 3, 0x10000, 0x1000, out, 2, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "memory map needs 4 ranges after merging, the handoff holds 2");
    assert_int_equal(n, 77); /* untouched on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vmm_and_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config, setup, teardown),
        cmocka_unit_test(test_memmap_carve_and_merge),
        cmocka_unit_test_setup_teardown(test_memmap_feeds_a_valid_handoff, setup, teardown),
        cmocka_unit_test(test_memmap_vmm_outside_any_range),
        cmocka_unit_test(test_memmap_errors),
        cmocka_unit_test_setup_teardown(test_mem_type_at, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
