/* SPDX-License-Identifier: MIT */
/*
 * Host tests of the VMM's VT-d set-up (vmm/iommu/iommu_boot.c, the decisions iommu_vmm.c only
 * wires to MMIO, the pool and EPT): a handoff map, the DMAR in its ACPI memory, two fake units
 * (tests/fakes/vtd_fake.h) behind it.  Both units end up translating through the tables built
 * for that map, with every VT-d ordering rule kept; each refusal -- no DMAR, a DMAR outside
 * firmware memory or running out of it, registers in RAM, an absent unit, a pool too small, a
 * unit that never answers -- is one reason, and no unit is touched before the tables exist.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "iommu/iommu_boot.h"
#include "fakes/vtd_fake.h"
#include "fakes/dmar_build.h"

#define MiB(x)   ((uint64_t)(x) << 20)
#define GiB(x)   ((uint64_t)(x) << 30)
#define DMAR_AT  (GiB(2) - MiB(2))
#define UNIT0    0xfed90000ull
#define UNIT1    0xfed91000ull
#define PA_BASE  0x0000004200000000ull
#define VMM_BASE GiB(1)
#define VMM_SIZE MiB(16)

static const struct ptv_mem_range map[] = {
    {0, GiB(1), PTV_MEM_RAM, 0},
    {GiB(1), MiB(16), PTV_MEM_VMM, 0},
    {GiB(1) + MiB(16), GiB(1) - MiB(18), PTV_MEM_RAM, 0},
    {GiB(2) - MiB(2), MiB(2), PTV_MEM_ACPI, 0},
    {0xfed00000, 0x1000, PTV_MEM_RESERVED, 0}, /* HPET */
};

static struct dmar_buf d;
static struct fake units[2];
static uint8_t *pool;
static size_t pool_used;
static unsigned long flushed;

static const uint8_t *phys(void *ctx, uint64_t pa, size_t n)
{
    if (pa >= DMAR_AT && pa - DMAR_AT + n <= sizeof(d.b))
        return d.b + (pa - DMAR_AT);
    return NULL;
}

static struct vtd_regs unit(void *ctx, uint64_t base)
{
    if (base == UNIT0)
        return fake_regs(&units[0]);
    if (base == UNIT1)
        return fake_regs(&units[1]);
    fail_msg("a unit at %#llx", (unsigned long long)base);
    return fake_regs(&units[0]);
}

static void *page(void *ctx, uint64_t *pa)
{
    if (pool_used == 64)
        return NULL;
    *pa = PA_BASE + 4096 * pool_used;
    return pool + 4096 * pool_used++;
}

static void flush(void *ctx, const void *va, size_t n)
{
    flushed++;
}

static struct iommu_boot_in in;
static struct iommu_boot b;

/* a client platform: a graphics unit for 00:02.0 and one for all the rest, a USB RMRR */
static void platform(void)
{
    db_start(&d, 38, 0);
    db_drhd(&d, 0, 0, 0, UNIT0, 2);
    db_drhd(&d, 1, 0, 0, UNIT1, -1);
    db_rmrr(&d, 0, 0x3e000000, 0x3e0fffff);
    db_seal(&d);
    fake_reset(&units[0], 1);
    fake_reset(&units[1], 3);
    pool_used = 0;
    flushed = 0;
    in = (struct iommu_boot_in){.mem = map,
                                .n = 5,
                                .vmm_base = VMM_BASE,
                                .vmm_size = VMM_SIZE,
                                .dmar_pa = DMAR_AT,
                                .phys = phys,
                                .unit = unit,
                                .pages = {page, flush, NULL},
                                .free_pages = 8192};
}

static void untouched(void)
{
    for (int i = 0; i < 2; i++) {
        assert_int_equal(units[i].gcmd_writes, 0);
        assert_int_equal(units[i].rtaddr, 0);
    }
}

static void refused(bool ok, const char *msg)
{
    if (ok || !strstr(b.why, msg))
        fail_msg("expected a refusal naming \"%s\", got %s: \"%s\"", msg, ok ? "ok" : "refused",
                 b.why);
}

static void test_two_units_translate(void **state)
{
    platform();
    assert_true(iommu_boot_tables(&in, &b));
    untouched(); /* probing reads only */
    assert_int_equal(b.n_units, 2);
    assert_int_equal(b.regs[1].base, UNIT1);
    assert_int_equal(b.tab.top, GiB(4));
    assert_int_equal(b.tab.levels, 3);
    assert_int_equal(b.tab.pages, pool_used);
    assert_int_equal(flushed, 0); /* both units snoop */
    assert_int_equal(b.rmrr_warn, 0);
    units[0].expect_root = units[1].expect_root = b.tab.root_pa;
    assert_true(iommu_boot_enable(&in, &b));
    assert_int_equal(b.n_on, 2);
    for (int i = 0; i < 2; i++) {
        if (units[i].violations)
            fail_msg("unit %d: %s", i, units[i].first_violation);
        assert_false(units[i].bad_access);
        assert_true(units[i].gsts & VTD_GSTS_TES);
        assert_int_equal(units[i].root_in_effect, b.tab.root_pa);
    }
}

static void test_noncoherent_unit_flushes(void **state)
{
    platform();
    units[1].ecap &= ~VTD_ECAP_C;
    assert_true(iommu_boot_tables(&in, &b));
    assert_int_equal(flushed, b.tab.pages); /* every table page */
}

static void test_dmar_refusals(void **state)
{
    platform();
    in.dmar_pa = 0;
    refused(iommu_boot_tables(&in, &b), "no DMAR table");
    platform();
    in.dmar_pa = UNIT0; /* device memory */
    refused(iommu_boot_tables(&in, &b), "not in firmware memory");
    platform();
    in.dmar_pa = VMM_BASE + 0x100;
    refused(iommu_boot_tables(&in, &b), "not in firmware memory");
    platform();
    in.dmar_pa = GiB(2) - 64; /* header fits, the table runs past the ACPI range */
    memcpy(d.b + 0, "DMAR", 4);
    refused(iommu_boot_tables(&in, &b), "");
    platform();
    db_put(&d, 4, 0x20000, 4); /* 128 KiB */
    refused(iommu_boot_tables(&in, &b), "length 131072 is out of range");
    platform();
    d.b[40] ^= 1;
    refused(iommu_boot_tables(&in, &b), "DMAR: checksum wrong");
    untouched();
}

static void test_unit_refusals(void **state)
{
    static const struct ptv_mem_range ram_there[] = {
        {0, GiB(1), PTV_MEM_RAM, 0},
        {GiB(1), MiB(16), PTV_MEM_VMM, 0},
        {GiB(1) + MiB(16), GiB(1) - MiB(18), PTV_MEM_RAM, 0},
        {GiB(2) - MiB(2), MiB(2), PTV_MEM_ACPI, 0},
        {0xfed91000, 0x1000, PTV_MEM_RAM, 0},
    };
    platform();
    in.mem = ram_there;
    refused(iommu_boot_tables(&in, &b), "unit 1's registers [0xfed91000, +0x1000) are not device");
    platform();
    units[1].ver = 0xffffffff;
    refused(iommu_boot_tables(&in, &b), "unit 1 at 0xfed91000: version register reads");
    platform();
    units[0].cap &= ~(0x1full << 8);
    refused(iommu_boot_tables(&in, &b), "unit 0 at 0xfed90000: CAP.SAGAW");
    platform();
    in.free_pages = 20; /* the tables need 7 */
    refused(iommu_boot_tables(&in, &b), "more than a quarter of the pool's 20 free");
    untouched();
}

static void test_unit_that_never_answers(void **state)
{
    platform();
    units[1].never_rtps = true;
    assert_true(iommu_boot_tables(&in, &b));
    refused(iommu_boot_enable(&in, &b), "unit 1 at 0xfed91000: root table pointer set");
    assert_int_equal(b.n_on, 1); /* unit 0 translates; the shim still polls its faults */
    assert_true(units[0].gsts & VTD_GSTS_TES);
    assert_false(units[1].gsts & VTD_GSTS_TES);
}

static void test_rmrr_in_vmm_memory(void **state)
{
    platform();
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, UNIT0, -1);
    db_rmrr(&d, 0, 0x3e000000, 0x3e0fffff);
    db_rmrr(&d, 0, VMM_BASE + MiB(1), VMM_BASE + MiB(2) - 1);
    db_seal(&d);
    assert_true(iommu_boot_tables(&in, &b));
    assert_int_equal(b.rmrr_warn, 2);
    assert_int_equal(b.n_units, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_units_translate),
        cmocka_unit_test(test_noncoherent_unit_flushes),
        cmocka_unit_test(test_dmar_refusals),
        cmocka_unit_test(test_unit_refusals),
        cmocka_unit_test(test_unit_that_never_answers),
        cmocka_unit_test(test_rmrr_in_vmm_memory),
    };
    pool = aligned_alloc(4096, 64 * 4096);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(pool);
    return rc;
}
