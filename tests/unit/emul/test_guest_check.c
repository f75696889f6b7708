/* SPDX-License-Identifier: MIT */
/* Software VM-entry guest-state checks (vmm/emul/guest_check.c, SDM Vol. 3C 27.3.1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include "emul/guest_check.h"

/* the state OVMF hands the blue pill (values seen in the Bochs VMCS dump) */
static struct vmx_guest_state ovmf(void)
{
    struct vmx_seg data = {0x30, 0, 0xffffffff, 0xc093};
    struct vmx_guest_state g = {
        .seg = {data,
                {0x38, 0, 0xffffffff, 0xa09b},
                data,
                data,
                data,
                data,
                {0, 0, 0, 0x10000},
                {0x48, 0x1f715800, 0x67, 0x8b}},
        .cr0 = 0x80010033,
        .cr4 = 0x2668,
        .efer = 0xd00,
        .rflags = 0x206,
        .ia32e = true,
        .unrestricted = true,
        .cr0_fixed0 = 0x80000021, /* PE, NE, PG */
        .cr0_fixed1 = 0xffffffff,
        .cr4_fixed0 = 0x2000, /* VMXE */
        .cr4_fixed1 = 0x3767ff,
    };
    return g;
}

static void test_ovmf_state_passes(void **state)
{
    struct vmx_guest_state g = ovmf();
    assert_null(vmx_guest_state_check(&g));
    g.seg[VSEG_SS].ar = 0x10003; /* null SS in 64-bit mode */
    assert_null(vmx_guest_state_check(&g));
}

#define EXPECT_FAIL(field_change)                                                                  \
    do {                                                                                           \
        struct vmx_guest_state g = ovmf();                                                         \
        field_change;                                                                              \
        assert_non_null(vmx_guest_state_check(&g));                                                \
    } while (0)

static void test_each_rule_fails(void **state)
{
    EXPECT_FAIL(g.cr4 &= ~0x2000ull);                /* CR4.VMXE fixed to 1 */
    EXPECT_FAIL(g.cr0 &= ~0x20ull);                  /* CR0.NE fixed to 1 */
    EXPECT_FAIL(g.cr0 &= ~1ull);                     /* PG without PE */
    EXPECT_FAIL(g.efer &= ~0x400ull);                /* LMA != IA-32e mode */
    EXPECT_FAIL(g.cr4 &= ~0x20ull);                  /* IA-32e without PAE */
    EXPECT_FAIL(g.rflags &= ~2ull);                  /* RFLAGS bit 1 */
    EXPECT_FAIL(g.rflags |= 1ull << 15);             /* RFLAGS reserved */
    EXPECT_FAIL(g.seg[VSEG_CS].ar = 0xa09a);         /* CS not accessed */
    EXPECT_FAIL(g.seg[VSEG_CS].ar = 0xe09b);         /* L and D/B */
    EXPECT_FAIL(g.seg[VSEG_CS].ar |= 0x10000);       /* CS unusable */
    EXPECT_FAIL(g.seg[VSEG_CS].ar = 0xa0fb);         /* CS.DPL 3 != SS.DPL 0 */
    EXPECT_FAIL(g.seg[VSEG_SS].ar = 0xc091);         /* SS read-only */
    EXPECT_FAIL(g.seg[VSEG_DS].ar = 0xc092);         /* DS not accessed */
    EXPECT_FAIL(g.seg[VSEG_ES].ar = 0xc013);         /* ES not present */
    EXPECT_FAIL(g.seg[VSEG_FS].limit = 0xfffff000);  /* G=1 needs limit[11:0]=0xfff */
    EXPECT_FAIL(g.seg[VSEG_TR].ar = 0x10000);        /* TR unusable (OVMF's TR=0) */
    EXPECT_FAIL(g.seg[VSEG_TR].ar = 0x89);           /* TSS not busy */
    EXPECT_FAIL(g.seg[VSEG_TR].sel = 0x4c);          /* TR in the LDT */
    EXPECT_FAIL(g.seg[VSEG_LDTR].ar = 0x83);         /* usable LDTR of the wrong type */
    EXPECT_FAIL(g.seg[VSEG_GS].ar = 0xc093 | 0x100); /* reserved AR bit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ovmf_state_passes),
        cmocka_unit_test(test_each_rule_fails),
    };
    return cmocka_run_group_tests_name("guest_check", tests, NULL, NULL);
}
