/* SPDX-License-Identifier: MIT */
/*
 * Host tests of one remapping unit's sequence (vmm/iommu/vtd.c) against a fake register file
 * that behaves as VT-d 11.4 says: GCMD commands confirmed in GSTS after some reads, CCMD/IOTLB
 * invalidations that complete later (and are ignored while queued invalidation is on), write-1-
 * to-clear fault status and records.  The fake checks the rules the sequence must keep: one
 * command per GCMD write with the other enables kept, translation switched on only once our
 * root table is in effect and both caches were invalidated after it was set, translation the
 * firmware left on never dropped.  Plus probing, the walk choice and fault polling.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "iommu/vtd.h"
#include "fakes/vtd_fake.h"

#define ROOT 0x1234000ull

static struct fake F;
static const struct vtd_regs regs = {fake_rd32, fake_rd64, fake_wr32, fake_wr64, &F};

static void unit_reset(unsigned latency)
{
    fake_reset(&F, latency);
    F.expect_root = ROOT;
}

static enum vtd_step_result run(struct vtd_prog *p, struct vtd_caps *c)
{
    char err[VTD_ERR_MAX];
    assert_true(vtd_probe(&regs, REG_SIZE, c, err, sizeof(err)));
    vtd_prog_init(p, c, ROOT);
    return vtd_enable(p, &regs);
}

static void expect_translating(void)
{
    if (F.violations)
        fail_msg("%u rule violations, first: %s", F.violations, F.first_violation);
    assert_false(F.bad_access);
    assert_true(F.gsts & VTD_GSTS_TES);
    assert_int_equal(F.root_in_effect, ROOT);
    assert_int_equal(F.fectl, VTD_FECTL_IM); /* faults are polled, never an interrupt */
    assert_false(F.te_dropped);
}

static void test_clean_unit(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    for (unsigned lat = 0; lat < 5; lat++) {
        unit_reset(lat);
        assert_int_equal(run(&p, &c), VTD_DONE);
        expect_translating();
        assert_int_equal(F.gcmd_writes, 2); /* SRTP, TE */
        assert_false(p.te_was_on);
        assert_int_equal(vtd_step(&p, &regs), VTD_DONE); /* stays done */
    }
}

static void test_write_buffer_flush(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    unit_reset(2);
    F.cap |= VTD_CAP_RWBF;
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_int_equal(F.gcmd_writes, 3); /* SRTP, WBF, TE */
}

static void test_firmware_left_translation_on(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    unit_reset(1);
    F.gsts = VTD_GSTS_TES | VTD_GSTS_RTPS;
    F.root_in_effect = F.rtaddr = 0xfee1000; /* the firmware's tables */
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_true(p.te_was_on);
}

static void test_firmware_left_qi_on(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    unit_reset(2);
    F.gsts = VTD_GSTS_QIES;
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_false(F.gsts & VTD_GSTS_QIES);
    /* with interrupt remapping over it, the unit is refused and nothing is written */
    unit_reset(2);
    F.gsts = VTD_GSTS_QIES | VTD_GSTS_IRES;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "interrupt remapping"));
    assert_int_equal(F.gcmd_writes, 0);
}

static void test_protected_memory_regions_off(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    unit_reset(2);
    F.cap |= VTD_CAP_PLMR;
    F.pmen = VTD_PMEN_EPM | VTD_PMEN_PRS;
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_int_equal(F.pmen, 0);
}

static void test_unit_that_never_answers(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    unit_reset(0);
    F.never_rtps = true;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "GSTS.RTPS"));
    assert_false(F.gsts & VTD_GSTS_TES); /* never switched on over a root it did not take */
    unit_reset(0);
    F.iaig_zero = true;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "IOTLB invalidation not performed"));
    assert_false(F.gsts & VTD_GSTS_TES);
}

static void test_probe(void **state)
{
    struct vtd_caps c;
    char err[VTD_ERR_MAX];
    unit_reset(0);
    assert_true(vtd_probe(&regs, REG_SIZE, &c, err, sizeof(err)));
    assert_int_equal(c.sagaw, 6);
    assert_int_equal(c.mgaw, 48);
    assert_true(c.has_2m && c.has_1g && c.coherent);
    assert_int_equal(c.fro, FRO);
    assert_int_equal(c.nfr, NFR);
    assert_int_equal(c.iro, IRO);
    F.ver = 0xffffffff;
    assert_false(vtd_probe(&regs, REG_SIZE, &c, err, sizeof(err)));
    assert_non_null(strstr(err, "no remapping unit"));
    unit_reset(0);
    assert_false(vtd_probe(&regs, FRO + 16, &c, err, sizeof(err)));
    assert_non_null(strstr(err, "fault records"));
    F.cap &= ~(0x1full << 8);
    assert_false(vtd_probe(&regs, REG_SIZE, &c, err, sizeof(err)));
    assert_non_null(strstr(err, "SAGAW"));
}

static void test_choose(void **state)
{
    struct vtd_caps c[2] = {{.sagaw = 6, .mgaw = 48, .has_2m = true, .has_1g = true},
                            {.sagaw = 4, .mgaw = 39, .has_2m = true, .has_1g = false}};
    unsigned levels;
    bool m2, g1;
    char err[VTD_ERR_MAX];
    assert_true(vtd_choose(c, 1, 4ull << 30, &levels, &m2, &g1, err, sizeof(err)));
    assert_int_equal(levels, 3);
    assert_true(m2 && g1);
    assert_true(vtd_choose(c, 1, 1ull << 40, &levels, &m2, &g1, err, sizeof(err)));
    assert_int_equal(levels, 4);
    /* both units: only 4 levels in common, 1 GiB pages not */
    assert_true(vtd_choose(c, 2, 4ull << 30, &levels, &m2, &g1, err, sizeof(err)));
    assert_int_equal(levels, 4);
    assert_true(m2 && !g1);
    assert_false(vtd_choose(c, 2, 1ull << 40, &levels, &m2, &g1, err, sizeof(err)));
    assert_non_null(strstr(err, "39-bit guest address width"));
    c[0].sagaw = 2;
    assert_false(vtd_choose(c, 2, 4ull << 30, &levels, &m2, &g1, err, sizeof(err)));
    assert_non_null(strstr(err, "SAGAW"));
}

static void test_faults(void **state)
{
    struct vtd_caps c;
    struct vtd_fault f[4];
    bool ovf;
    char err[VTD_ERR_MAX];
    unit_reset(0);
    assert_true(vtd_probe(&regs, REG_SIZE, &c, err, sizeof(err)));
    assert_int_equal(vtd_faults_poll(&regs, &c, f, 4, &ovf), 0);
    assert_false(ovf);
    /* an edu-like device at 00:03.0 wrote page 0x1f400000 (reason 5: write not allowed), then
     * read one (reason 6) */
    F.frcd[1][0] = 0x1f400123;
    F.frcd[1][1] = VTD_FRCD_HI_F | (5ull << 32) | 0x18;
    F.frcd[2][0] = 0x1f401000;
    F.frcd[2][1] = VTD_FRCD_HI_F | VTD_FRCD_HI_T | (6ull << 32) | 0x18;
    F.fsts = VTD_FSTS_PPF | (1u << 8) | VTD_FSTS_PFO;
    assert_int_equal(vtd_faults_poll(&regs, &c, f, 4, &ovf), 2);
    assert_true(ovf);
    assert_int_equal(f[0].addr, 0x1f400000);
    assert_int_equal(f[0].sid, 0x18);
    assert_int_equal(f[0].reason, 5);
    assert_true(f[0].write);
    assert_false(f[1].write);
    assert_false(F.frcd[1][1] & VTD_FRCD_HI_F);
    assert_false(F.frcd[2][1] & VTD_FRCD_HI_F);
    assert_false(F.fsts & VTD_FSTS_PFO);
    /* more records than room: counted, all cleared */
    for (unsigned i = 0; i < NFR; i++)
        F.frcd[i][1] = VTD_FRCD_HI_F;
    F.fsts = VTD_FSTS_PPF;
    assert_int_equal(vtd_faults_poll(&regs, &c, f, 1, &ovf), NFR);
    for (unsigned i = 0; i < NFR; i++)
        assert_false(F.frcd[i][1] & VTD_FRCD_HI_F);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_unit),
        cmocka_unit_test(test_write_buffer_flush),
        cmocka_unit_test(test_firmware_left_translation_on),
        cmocka_unit_test(test_firmware_left_qi_on),
        cmocka_unit_test(test_protected_memory_regions_off),
        cmocka_unit_test(test_unit_that_never_answers),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
