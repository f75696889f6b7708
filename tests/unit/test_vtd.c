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

#define REG_SIZE 4096
#define FRO      0x220
#define NFR      4
#define IRO      0x100
#define ROOT     0x1234000ull

struct fake {
    uint32_t ver, gsts, fsts, fectl, pmen;
    uint64_t cap, ecap, rtaddr, root_in_effect, ccmd, iotlb;
    uint64_t frcd[NFR][2];
    unsigned latency; /* reads of a status before a command completes */
    unsigned busy_gsts, busy_cc, busy_iotlb, busy_pmen;
    uint32_t gsts_next; /* GSTS once busy_gsts reads passed */
    bool never_rtps, iaig_zero;
    bool cc_since_root, iotlb_since_root; /* global invalidations after the last SRTP */
    bool te_dropped;
    unsigned violations, gcmd_writes;
    char first_violation[128];
};

static void violation(struct fake *f, const char *what)
{
    if (!f->violations++)
        snprintf(f->first_violation, sizeof(f->first_violation), "%s", what);
}

static void settle(struct fake *f)
{
    if (f->busy_gsts && !--f->busy_gsts)
        f->gsts = f->gsts_next;
}

static uint32_t rd32(void *ctx, unsigned off)
{
    struct fake *f = ctx;
    switch (off) {
    case VTD_REG_VER:
        return f->ver;
    case VTD_REG_GSTS:
        settle(f);
        return f->gsts;
    case VTD_REG_FSTS:
        return f->fsts;
    case VTD_REG_FECTL:
        return f->fectl;
    case VTD_REG_PMEN:
        if (f->busy_pmen && !--f->busy_pmen)
            f->pmen = f->pmen & VTD_PMEN_EPM ? f->pmen | VTD_PMEN_PRS : 0;
        return f->pmen;
    }
    fail_msg("rd32 of %#x", off);
    return 0;
}

static uint64_t rd64(void *ctx, unsigned off)
{
    struct fake *f = ctx;
    if (off == VTD_REG_CAP)
        return f->cap;
    if (off == VTD_REG_ECAP)
        return f->ecap;
    if (off == VTD_REG_CCMD) {
        if (f->busy_cc && !--f->busy_cc)
            f->ccmd = 1ull << 59; /* done: CAIG global */
        return f->ccmd;
    }
    if (off == IRO + VTD_IOTLB_OFF) {
        if (f->busy_iotlb && !--f->busy_iotlb)
            f->iotlb = f->iaig_zero ? 0 : 1ull << 57;
        return f->iotlb;
    }
    if (off >= FRO && off < FRO + 16 * NFR && off % 8 == 0)
        return f->frcd[(off - FRO) / 16][(off % 16) / 8];
    fail_msg("rd64 of %#x", off);
    return 0;
}

static void gcmd(struct fake *f, uint32_t v)
{
    uint32_t now = f->gsts & VTD_GSTS_KEEP, diff = (v ^ now) & ~0x00ffffffu;
    f->gcmd_writes++;
    if (f->busy_gsts)
        violation(f, "GCMD written while a command is still in progress");
    if (__builtin_popcount(diff) != 1)
        violation(f, "GCMD write is not exactly one command");
    f->gsts_next = f->gsts & ~(VTD_GSTS_RTPS | VTD_GSTS_WBFS);
    if ((f->gsts & VTD_GSTS_TES) && !(v & VTD_GCMD_TE)) {
        f->te_dropped = true;
        f->gsts_next &= ~VTD_GSTS_TES;
    }
    if ((v & VTD_GCMD_TE) && !(f->gsts & VTD_GSTS_TES)) {
        if (f->root_in_effect != ROOT || !f->cc_since_root || !f->iotlb_since_root)
            violation(f, "TE before our root table is in effect and both caches invalidated");
        f->gsts_next |= VTD_GSTS_TES;
    }
    if (v & VTD_GCMD_SRTP) {
        if (!f->never_rtps)
            f->gsts_next |= VTD_GSTS_RTPS;
        f->root_in_effect = f->rtaddr;
        f->cc_since_root = f->iotlb_since_root = false;
    }
    if (v & VTD_GCMD_WBF)
        f->gsts_next &= ~VTD_GSTS_WBFS;
    if (!(v & VTD_GCMD_QIE))
        f->gsts_next &= ~VTD_GSTS_QIES;
    if (!(v & VTD_GCMD_IRE) && (f->gsts & VTD_GSTS_IRES))
        violation(f, "interrupt remapping switched off");
    f->busy_gsts = f->latency + 1;
    if (v & VTD_GCMD_WBF) /* WBFS reads set while the flush runs */
        f->gsts |= VTD_GSTS_WBFS;
}

static void wr32(void *ctx, unsigned off, uint32_t v)
{
    struct fake *f = ctx;
    switch (off) {
    case VTD_REG_GCMD:
        gcmd(f, v);
        return;
    case VTD_REG_FSTS:
        f->fsts &= ~(v & VTD_FSTS_W1C);
        return;
    case VTD_REG_FECTL:
        f->fectl = v & VTD_FECTL_IM;
        return;
    case VTD_REG_PMEN:
        f->pmen = (v & VTD_PMEN_EPM) | (f->pmen & VTD_PMEN_PRS);
        f->busy_pmen = f->latency + 1;
        return;
    }
    if (off >= FRO && off < FRO + 16 * NFR && off % 16 == 12) {
        if (v & 0x80000000u)
            f->frcd[(off - FRO) / 16][1] &= ~VTD_FRCD_HI_F;
        return;
    }
    fail_msg("wr32 of %#x", off);
}

static void wr64(void *ctx, unsigned off, uint64_t v)
{
    struct fake *f = ctx;
    bool qi = f->gsts & VTD_GSTS_QIES; /* register invalidations are ignored then */
    if (off == VTD_REG_RTADDR) {
        f->rtaddr = v;
        return;
    }
    if (off == VTD_REG_CCMD) {
        if (qi)
            return;
        f->ccmd = v;
        f->busy_cc = f->latency + 1;
        f->cc_since_root = (v & VTD_CCMD_GLOBAL) && (v & VTD_CCMD_ICC);
        return;
    }
    if (off == IRO + VTD_IOTLB_OFF) {
        if (qi)
            return;
        if (!f->cc_since_root)
            violation(f, "IOTLB invalidated before the context cache");
        f->iotlb = v;
        f->busy_iotlb = f->latency + 1;
        f->iotlb_since_root = (v & VTD_IOTLB_GLOBAL) && (v & VTD_IOTLB_IVT);
        return;
    }
    fail_msg("wr64 of %#x", off);
}

static struct fake F;
static const struct vtd_regs regs = {rd32, rd64, wr32, wr64, &F};

/* a VT-d 1.0 unit like QEMU's: 3- and 4-level walks, 2M/1G pages, 48-bit MGAW */
static void fake_reset(unsigned latency)
{
    memset(&F, 0, sizeof(F));
    F.ver = 0x10;
    F.cap = (3ull << 34) | ((uint64_t)(FRO / 16) << 24) | (47ull << 16) | (6ull << 8) |
            ((uint64_t)(NFR - 1) << 40) | 2;
    F.ecap = ((uint64_t)(IRO / 16) << 8) | VTD_ECAP_C | VTD_ECAP_QI;
    F.latency = latency;
    F.fectl = 0;
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
        fake_reset(lat);
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
    fake_reset(2);
    F.cap |= VTD_CAP_RWBF;
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_int_equal(F.gcmd_writes, 3); /* SRTP, WBF, TE */
}

static void test_firmware_left_translation_on(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    fake_reset(1);
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
    fake_reset(2);
    F.gsts = VTD_GSTS_QIES;
    assert_int_equal(run(&p, &c), VTD_DONE);
    expect_translating();
    assert_false(F.gsts & VTD_GSTS_QIES);
    /* with interrupt remapping over it, the unit is refused and nothing is written */
    fake_reset(2);
    F.gsts = VTD_GSTS_QIES | VTD_GSTS_IRES;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "interrupt remapping"));
    assert_int_equal(F.gcmd_writes, 0);
}

static void test_protected_memory_regions_off(void **state)
{
    struct vtd_prog p;
    struct vtd_caps c;
    fake_reset(2);
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
    fake_reset(0);
    F.never_rtps = true;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "GSTS.RTPS"));
    assert_false(F.gsts & VTD_GSTS_TES); /* never switched on over a root it did not take */
    fake_reset(0);
    F.iaig_zero = true;
    assert_int_equal(run(&p, &c), VTD_FAIL);
    assert_non_null(strstr(p.err, "IOTLB invalidation not performed"));
    assert_false(F.gsts & VTD_GSTS_TES);
}

static void test_probe(void **state)
{
    struct vtd_caps c;
    char err[VTD_ERR_MAX];
    fake_reset(0);
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
    fake_reset(0);
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
    fake_reset(0);
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
