/* SPDX-License-Identifier: MIT */
/*
 * The bare-metal RTIT MSR reference (tests/model/ptm_cpu.c): one test per SDM rule (a write that
 * must pass and one that must #GP), then the differential test against the engine's
 * pt_msr_write(): the same random WRMSR stream on both, from reset, and every #GP verdict (and
 * the value read back) must agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "model/ptm.h"
#include "model/ptm_cpu.h"
#include "pt/pt_msr.h"
#include "pt/rtit.h"

#define T          RTIT_CTL_TRACEEN
#define TOPA       RTIT_CTL_TOPA
#define MTCF(f)    ((uint64_t)(f) << RTIT_CTL_MTC_RANGE_SHIFT)
#define CYCT(f)    ((uint64_t)(f) << RTIT_CTL_CYC_THRESH_SHIFT)
#define PSBF(f)    ((uint64_t)(f) << RTIT_CTL_PSB_FREQ_SHIFT)
#define ACFG(n, v) ((uint64_t)(v) << RTIT_CTL_ADDR_SHIFT(n))
#define BYTECNT(n) ((uint64_t)(n) << RTIT_STATUS_BYTECNT_SHIFT)

enum { EAX_ = 0, EBX_ = 1, ECX_ = 2 };

/* CPUID views (the brief's three, plus variants built from them). */
static const struct ptm_cpu_caps v_skl = {
    true, {{1, 0xf, 0x7, 0}, {(0x249u << 16) | 2, (0x3fu << 16) | 0x1fff, 0, 0}}, 39, 48};
static const struct ptm_cpu_caps v_full = {
    true, {{1, 0x1ff, 0xf, 0}, {(0x249u << 16) | 4, (0x3fu << 16) | 0x1fff, 0, 0}}, 46, 48};
static const struct ptm_cpu_caps v_bare = {true, {{1, 0, 0x1, 0}, {0}}, 39, 48};
/* Extra views for the differential test: single-range output only, sparse frequency bitmaps,
 * MAXPHYADDR 52, 57-bit linear addresses, one range; and no PT at all. */
static const struct ptm_cpu_caps v_srng = {
    true, {{1, 0xa, 0x4, 0}, {(0x9u << 16) | 1, (0x5u << 16) | 0x3, 0, 0}}, 52, 57};
static const struct ptm_cpu_caps v_nopt = {false, {{1, 0xf, 0x7, 0}, {0}}, 39, 48};

static struct ptm pm;
static struct ptm_cpu cpu;

static void boot(const struct ptm_cpu_caps *caps)
{
    ptm_init(&pm, NULL, 0, caps->maxphyaddr, (caps->leaf14[0][ECX_] & PT_CAP_ECX_TOPA_MULTI) != 0);
    ptm_cpu_init(&cpu, &pm, caps);
}

/* The full view without one CPUID bit of sub-leaf 0. */
static struct ptm_cpu_caps full_without(int reg, uint64_t bit)
{
    struct ptm_cpu_caps c = v_full;
    c.leaf14[0][reg] &= ~(uint32_t)bit;
    return c;
}

/* Everything RDMSR shows (a #GP read is recorded as a marker), to prove a #GP changed nothing. */
static void snapshot(uint64_t out[PTM_NR_RTIT_MSRS])
{
    for (size_t i = 0; i < PTM_NR_RTIT_MSRS; i++)
        if (ptm_cpu_rdmsr(&cpu, ptm_rtit_msrs[i], &out[i]) != 0)
            out[i] = 0xdeadbeefdeadbeefull;
}

static void wr_ok(uint32_t msr, uint64_t v)
{
    if (ptm_cpu_wrmsr(&cpu, msr, v) != 0)
        fail_msg("WRMSR 0x%x <- 0x%016llx: #GP, expected ok", msr, (unsigned long long)v);
}

static void wr_gp(uint32_t msr, uint64_t v)
{
    uint64_t before[PTM_NR_RTIT_MSRS], after[PTM_NR_RTIT_MSRS];

    snapshot(before);
    if (ptm_cpu_wrmsr(&cpu, msr, v) != -1)
        fail_msg("WRMSR 0x%x <- 0x%016llx: ok, expected #GP", msr, (unsigned long long)v);
    snapshot(after);
    assert_memory_equal(before, after, sizeof(before));
}

static uint64_t rd(uint32_t msr)
{
    uint64_t v = 0;
    assert_int_equal(ptm_cpu_rdmsr(&cpu, msr, &v), 0);
    return v;
}

static void rd_gp(uint32_t msr)
{
    uint64_t v;
    assert_int_equal(ptm_cpu_rdmsr(&cpu, msr, &v), -1);
}

/* --- one test per rule ------------------------------------------------------------------- */

static void no_pt(void **state)
{
    struct ptm_cpu_caps c = v_full;

    boot(&v_full);
    wr_ok(MSR_IA32_RTIT_CTL, TOPA);
    c.pt = false; /* CPUID.(7,0):EBX[25] = 0 */
    boot(&c);
    for (size_t i = 0; i < PTM_NR_RTIT_MSRS; i++) {
        rd_gp(ptm_rtit_msrs[i]);
        wr_gp(ptm_rtit_msrs[i], 0);
    }
    memset(c.leaf14, 0, sizeof(c.leaf14)); /* leaf 14H absent (all zero) */
    c.pt = true;
    boot(&c);
    rd_gp(MSR_IA32_RTIT_CTL);
    wr_gp(MSR_IA32_RTIT_STATUS, 0);
}

static void msr_existence(void **state)
{
    struct ptm_cpu_caps c;

    boot(&v_skl); /* CR3 filtering, ToPA + single range, 2 ranges */
    wr_ok(MSR_IA32_RTIT_CR3_MATCH, 0x1000);
    wr_ok(MSR_IA32_RTIT_OUTPUT_BASE, 0x1000);
    wr_ok(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0);
    wr_ok(MSR_IA32_RTIT_ADDR_B(1), 0x1000);
    wr_gp(MSR_IA32_RTIT_ADDR_A(2), 0x1000);
    rd_gp(MSR_IA32_RTIT_ADDR_B(2));
    rd_gp(MSR_IA32_RTIT_ADDR_A(3));

    c = full_without(EBX_, PT_CAP_EBX_CR3_FILTER);
    boot(&c);
    rd_gp(MSR_IA32_RTIT_CR3_MATCH);
    wr_gp(MSR_IA32_RTIT_CR3_MATCH, 0x1000);

    c.leaf14[0][ECX_] = PT_CAP_ECX_SINGLE_RANGE; /* single range only: the output MSRs exist */
    boot(&c);
    wr_ok(MSR_IA32_RTIT_OUTPUT_BASE, 0x1000);
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_MASK_PTRS), 0x7f);

    c.leaf14[0][ECX_] = PT_CAP_ECX_TOPA_MULTI | PT_CAP_ECX_TRANSPORT; /* no memory output */
    boot(&c);
    rd_gp(MSR_IA32_RTIT_OUTPUT_BASE);
    wr_gp(MSR_IA32_RTIT_OUTPUT_BASE, 0x1000);
    rd_gp(MSR_IA32_RTIT_OUTPUT_MASK_PTRS);
    wr_gp(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0);
    wr_ok(MSR_IA32_RTIT_CTL, RTIT_CTL_FABRIC_EN | T); /* tracing to the transport still works */
}

static void locked_other_msrs(void **state)
{
    boot(&v_full);
    wr_ok(MSR_IA32_RTIT_CTL, T | TOPA | RTIT_CTL_BRANCH_EN);
    wr_gp(MSR_IA32_RTIT_STATUS, 0);
    wr_gp(MSR_IA32_RTIT_OUTPUT_BASE, 0x2000);
    wr_gp(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0);
    wr_gp(MSR_IA32_RTIT_CR3_MATCH, 0x1000);
    wr_gp(MSR_IA32_RTIT_ADDR_A(0), 0x1000);
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_BASE), 0); /* reads are fine while tracing */
    wr_ok(MSR_IA32_RTIT_CTL, TOPA);
    wr_ok(MSR_IA32_RTIT_STATUS, 0);
    wr_ok(MSR_IA32_RTIT_OUTPUT_BASE, 0x2000);
    wr_ok(MSR_IA32_RTIT_CR3_MATCH, 0x1000);
    wr_ok(MSR_IA32_RTIT_ADDR_A(0), 0x1000);
}

static void locked_ctl(void **state)
{
    uint64_t on = T | TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS;

    boot(&v_full);
    wr_ok(MSR_IA32_RTIT_CTL, on);
    assert_true(pm.status & RTIT_STATUS_TRIGGEREN); /* ptm_enable ran */
    wr_ok(MSR_IA32_RTIT_CTL, on);                   /* same value: no #GP */
    wr_gp(MSR_IA32_RTIT_CTL, on | RTIT_CTL_USR);    /* modify, keep TraceEn */
    wr_gp(MSR_IA32_RTIT_CTL, on & ~RTIT_CTL_OS);
    wr_gp(MSR_IA32_RTIT_CTL, RTIT_CTL_USR | PTV_BIT(18));     /* clears TraceEn but reserved bit */
    wr_ok(MSR_IA32_RTIT_CTL, RTIT_CTL_USR | RTIT_CTL_MTC_EN); /* clears TraceEn, changes others */
    assert_int_equal(rd(MSR_IA32_RTIT_CTL), RTIT_CTL_USR | RTIT_CTL_MTC_EN);
    assert_false(pm.status & RTIT_STATUS_TRIGGEREN); /* ptm_disable ran */
}

static void ctl_reserved(void **state)
{
    static const unsigned rsvd[] = {18, 23, 28, 29, 30, 48, 49, 50, 51, 52,
                                    53, 54, 57, 58, 59, 60, 61, 62, 63};

    boot(&v_full);
    for (size_t i = 0; i < sizeof(rsvd) / sizeof(rsvd[0]); i++)
        wr_gp(MSR_IA32_RTIT_CTL, TOPA | PTV_BIT(rsvd[i]));
    /* OS, User, TSCEn, DisRETC, BranchEn need no CPUID bit at all */
    boot(&v_bare);
    wr_ok(MSR_IA32_RTIT_CTL, RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_TSC_EN | RTIT_CTL_DISRETC |
                                 RTIT_CTL_BRANCH_EN | T | TOPA);
}

/* `bits` need the CPUID bit (reg, cap): ok with the full view, #GP without the bit. */
static void feature(uint64_t bits, int reg, uint64_t cap)
{
    struct ptm_cpu_caps c = full_without(reg, cap);

    boot(&v_full);
    wr_ok(MSR_IA32_RTIT_CTL, bits);
    boot(&c);
    wr_gp(MSR_IA32_RTIT_CTL, bits);
    wr_ok(MSR_IA32_RTIT_CTL, 0);
}

static void ctl_cyc(void **state)
{
    feature(RTIT_CTL_CYCLEACC, EBX_, PT_CAP_EBX_PSB_CYC);
    feature(CYCT(1), EBX_, PT_CAP_EBX_PSB_CYC);
    feature(PSBF(1), EBX_, PT_CAP_EBX_PSB_CYC);
}

static void ctl_pwr_evt(void **state)
{
    feature(RTIT_CTL_PWR_EVT_EN, EBX_, PT_CAP_EBX_POWER_EVENT);
}

static void ctl_ptw(void **state)
{
    feature(RTIT_CTL_PTW_EN, EBX_, PT_CAP_EBX_PTWRITE);
    feature(RTIT_CTL_FUP_ON_PTW, EBX_, PT_CAP_EBX_PTWRITE);
}

static void ctl_cr3en(void **state)
{
    feature(RTIT_CTL_CR3EN, EBX_, PT_CAP_EBX_CR3_FILTER);
}

static void ctl_mtc(void **state)
{
    feature(RTIT_CTL_MTC_EN, EBX_, PT_CAP_EBX_MTC);
    feature(MTCF(3), EBX_, PT_CAP_EBX_MTC);
}

static void ctl_topa(void **state)
{
    feature(TOPA, ECX_, PT_CAP_ECX_TOPA);
}

static void ctl_fabric(void **state)
{
    feature(RTIT_CTL_FABRIC_EN, ECX_, PT_CAP_ECX_TRANSPORT);
}

static void ctl_event_en(void **state)
{
    feature(RTIT_CTL_EVENT_EN, EBX_, PT_CAP_EBX_EVENT_TRACE);
}

static void ctl_distnt(void **state)
{
    feature(RTIT_CTL_NOTNT, EBX_, PT_CAP_EBX_TNT_DISABLE);
}

static void ctl_inj_psb_pmi(void **state)
{
    feature(RTIT_CTL_INJ_PSB_PMI, EBX_, PT_CAP_EBX_PSB_PMI_PRESERVE);
}

static void ctl_addr_cfg(void **state)
{
    boot(&v_skl); /* 2 ranges */
    wr_ok(MSR_IA32_RTIT_CTL, ACFG(0, 2) | ACFG(1, 1));
    wr_gp(MSR_IA32_RTIT_CTL, ACFG(2, 1)); /* range 2 does not exist */
    wr_gp(MSR_IA32_RTIT_CTL, ACFG(0, 3)); /* encodings 3..15 reserved */
    wr_gp(MSR_IA32_RTIT_CTL, ACFG(1, 15));
    boot(&v_full); /* 4 ranges */
    wr_ok(MSR_IA32_RTIT_CTL, ACFG(3, 2));
    wr_gp(MSR_IA32_RTIT_CTL, ACFG(3, 4));
}

static void ctl_mtc_freq(void **state)
{
    boot(&v_full); /* MTC bitmap 0x249: encodings 0, 3, 6, 9 */
    wr_ok(MSR_IA32_RTIT_CTL, MTCF(9));
    wr_gp(MSR_IA32_RTIT_CTL, MTCF(1)); /* MTCEn = 0: still #GP */
    wr_gp(MSR_IA32_RTIT_CTL, MTCF(1) | RTIT_CTL_MTC_EN);
}

static void ctl_cyc_thresh(void **state)
{
    boot(&v_full); /* CycThresh bitmap 0x1fff: encodings 0..12 */
    wr_ok(MSR_IA32_RTIT_CTL, CYCT(12));
    wr_gp(MSR_IA32_RTIT_CTL, CYCT(13));
    wr_gp(MSR_IA32_RTIT_CTL, CYCT(15) | RTIT_CTL_CYCLEACC);
}

static void ctl_psb_freq(void **state)
{
    boot(&v_full); /* PSBFreq bitmap 0x3f: encodings 0..5 */
    wr_ok(MSR_IA32_RTIT_CTL, PSBF(5));
    wr_gp(MSR_IA32_RTIT_CTL, PSBF(6));
}

static void ctl_single_range(void **state)
{
    struct ptm_cpu_caps c = full_without(ECX_, PT_CAP_ECX_SINGLE_RANGE);

    boot(&v_bare); /* ToPA only */
    wr_ok(MSR_IA32_RTIT_CTL, 0);
    wr_gp(MSR_IA32_RTIT_CTL, T);
    wr_ok(MSR_IA32_RTIT_CTL, T | TOPA);
    boot(&c);
    wr_ok(MSR_IA32_RTIT_CTL, T | RTIT_CTL_FABRIC_EN); /* output to the transport */
    boot(&v_full);
    wr_ok(MSR_IA32_RTIT_CTL, T); /* single range */
}

static void status_rules(void **state)
{
    boot(&v_full);
    /* FilterEn, ContextEn, TriggerEn: writes ignored */
    pm.status = RTIT_STATUS_CONTEXTEN; /* as the processor left it */
    wr_ok(MSR_IA32_RTIT_STATUS, RTIT_STATUS_FILTEREN | RTIT_STATUS_TRIGGEREN);
    assert_int_equal(rd(MSR_IA32_RTIT_STATUS), RTIT_STATUS_CONTEXTEN);
    /* writable bits */
    wr_ok(MSR_IA32_RTIT_STATUS, RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED | RTIT_STATUS_PENDPSB |
                                    RTIT_STATUS_PENDTOPAPMI | BYTECNT(0x1ffff));
    assert_int_equal(rd(MSR_IA32_RTIT_STATUS), RTIT_STATUS_CONTEXTEN | RTIT_STATUS_ERROR |
                                                   RTIT_STATUS_STOPPED | RTIT_STATUS_PENDPSB |
                                                   RTIT_STATUS_PENDTOPAPMI | BYTECNT(0x1ffff));
    /* reserved: 3, 31:8, 63:49 */
    wr_gp(MSR_IA32_RTIT_STATUS, PTV_BIT(3));
    wr_gp(MSR_IA32_RTIT_STATUS, PTV_BIT(8));
    wr_gp(MSR_IA32_RTIT_STATUS, PTV_BIT(31));
    wr_gp(MSR_IA32_RTIT_STATUS, PTV_BIT(49));
    wr_gp(MSR_IA32_RTIT_STATUS, PTV_BIT(63));
    /* PendPSB / PendTopaPMI need EBX[6] */
    boot(&v_skl);
    wr_ok(MSR_IA32_RTIT_STATUS, RTIT_STATUS_ERROR | BYTECNT(5));
    wr_gp(MSR_IA32_RTIT_STATUS, RTIT_STATUS_PENDPSB);
    wr_gp(MSR_IA32_RTIT_STATUS, RTIT_STATUS_PENDTOPAPMI);
    /* a non-zero PacketByteCnt needs EBX[1] */
    boot(&v_bare);
    wr_ok(MSR_IA32_RTIT_STATUS, RTIT_STATUS_STOPPED);
    wr_gp(MSR_IA32_RTIT_STATUS, BYTECNT(1));
}

static void output_base(void **state)
{
    boot(&v_skl);                                          /* MAXPHYADDR 39 */
    wr_ok(MSR_IA32_RTIT_OUTPUT_BASE, (1ull << 38) | 0x80); /* 11:7 set: no #GP */
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_BASE), (1ull << 38) | 0x80);
    wr_gp(MSR_IA32_RTIT_OUTPUT_BASE, 1ull << 39);
    wr_gp(MSR_IA32_RTIT_OUTPUT_BASE, 0x1040);
    wr_gp(MSR_IA32_RTIT_OUTPUT_BASE, 0x1001);
}

static void output_mask(void **state)
{
    boot(&v_skl);
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_MASK_PTRS), 0x7f);
    wr_ok(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0);
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_MASK_PTRS), 0x7f);
    wr_ok(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0xffffffff00000180ull);
    assert_int_equal(rd(MSR_IA32_RTIT_OUTPUT_MASK_PTRS), 0xffffffff000001ffull);
}

static void cr3_match(void **state)
{
    boot(&v_skl);
    wr_ok(MSR_IA32_RTIT_CR3_MATCH, 0x12345000);
    wr_ok(MSR_IA32_RTIT_CR3_MATCH, 0x20);
    wr_ok(MSR_IA32_RTIT_CR3_MATCH, PTV_BIT(63) | 0x1000); /* 63:5 are value bits per the SDM */
    assert_int_equal(rd(MSR_IA32_RTIT_CR3_MATCH), PTV_BIT(63) | 0x1000);
    wr_gp(MSR_IA32_RTIT_CR3_MATCH, 0x1001);
    wr_gp(MSR_IA32_RTIT_CR3_MATCH, 0x10);
}

static void addr_canonical(void **state)
{
    struct ptm_cpu_caps c = v_full;

    boot(&v_full); /* 48-bit */
    wr_ok(MSR_IA32_RTIT_ADDR_A(3), 0x00007fffffffffffull);
    wr_ok(MSR_IA32_RTIT_ADDR_B(3), 0xffff800000000000ull);
    assert_int_equal(rd(MSR_IA32_RTIT_ADDR_B(3)), 0xffff800000000000ull);
    wr_gp(MSR_IA32_RTIT_ADDR_A(0), 0x0000800000000000ull);
    wr_gp(MSR_IA32_RTIT_ADDR_B(0), 0xfff0800000000000ull);
    c.vaddr_bits = 57;
    boot(&c);
    wr_ok(MSR_IA32_RTIT_ADDR_A(0), 0x0000800000000000ull);
    wr_ok(MSR_IA32_RTIT_ADDR_B(0), 0xff00000000000000ull);
    wr_gp(MSR_IA32_RTIT_ADDR_A(0), 0x0100000000000000ull);
}

static void reads(void **state)
{
    boot(&v_full);
    for (size_t i = 0; i < PTM_NR_RTIT_MSRS; i++)
        assert_int_equal(rd(ptm_rtit_msrs[i]),
                         ptm_rtit_msrs[i] == MSR_IA32_RTIT_OUTPUT_MASK_PTRS ? 0x7f : 0);
    wr_ok(MSR_IA32_RTIT_OUTPUT_BASE, 0x3000);
    wr_ok(MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x500000000ull);
    wr_ok(MSR_IA32_RTIT_ADDR_A(2), 0x401000);
    wr_ok(MSR_IA32_RTIT_CTL, T | TOPA);
    /* 0->1 handed the MSRs to the output model */
    assert_int_equal(pm.ctl, T | TOPA);
    assert_int_equal(pm.output_base, 0x3000);
    assert_int_equal(pm.output_mask_ptrs, 0x50000007full);
    assert_int_equal(rd(MSR_IA32_RTIT_STATUS), RTIT_STATUS_TRIGGEREN);
    assert_int_equal(rd(MSR_IA32_RTIT_ADDR_A(2)), 0x401000);
    assert_int_equal(rd(MSR_IA32_RTIT_CTL), T | TOPA);
}

/* --- differential test against the engine ------------------------------------------------- */

#define STEPS     200000
#define SHOW      10
#define MSR_SLOTS 13

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool one_in(unsigned n)
{
    return rnd() % n == 0;
}

static unsigned slot(uint32_t msr)
{
    for (unsigned i = 0; i < PTM_NR_RTIT_MSRS; i++)
        if (ptm_rtit_msrs[i] == msr)
            return i;
    return 0;
}

static uint64_t gen_ctl(uint64_t cur)
{
    static const uint64_t common[] = {RTIT_CTL_OS,      RTIT_CTL_USR,       RTIT_CTL_TSC_EN,
                                      RTIT_CTL_DISRETC, RTIT_CTL_BRANCH_EN, RTIT_CTL_TOPA};
    static const uint64_t optional[] = {
        RTIT_CTL_CYCLEACC, RTIT_CTL_PWR_EVT_EN, RTIT_CTL_FUP_ON_PTW, RTIT_CTL_FABRIC_EN,
        RTIT_CTL_CR3EN,    RTIT_CTL_MTC_EN,     RTIT_CTL_PTW_EN,     RTIT_CTL_EVENT_EN,
        RTIT_CTL_NOTNT,    RTIT_CTL_INJ_PSB_PMI};
    uint64_t v = 0;

    switch (rnd() % 8) {
    case 0:
        return cur; /* write back the same value */
    case 1:         /* clear TraceEn, maybe change one more bit */
        v = cur & ~T;
        if (one_in(2))
            v ^= one_in(2) ? common[rnd() % 6] : optional[rnd() % 10];
        return v;
    case 2: /* keep TraceEn, change one bit */
        return cur ^ (one_in(2) ? common[rnd() % 6] : optional[rnd() % 10]);
    default:
        break;
    }
    if (one_in(2))
        v |= T;
    for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
        if (one_in(2))
            v |= common[i];
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
        if (one_in(8))
            v |= optional[i];
    if (one_in(4))
        v |= MTCF(rnd() % 16);
    if (one_in(4))
        v |= CYCT(rnd() % 16);
    if (one_in(4))
        v |= PSBF(rnd() % 16);
    for (unsigned n = 0; n < 4; n++)
        if (one_in(4))
            v |= ACFG(n, 1 + rnd() % 3);
    if (one_in(16))
        v ^= PTV_BIT(rnd() % 64);
    return v;
}

static uint64_t gen_status(void)
{
    uint64_t v = rnd() & rnd() & 0xff;

    if (one_in(4))
        v |= BYTECNT(rnd() & 0x1ffff);
    if (one_in(16))
        v ^= PTV_BIT(rnd() % 64);
    return v;
}

static uint64_t gen_value(const struct ptm_cpu_caps *caps, uint32_t msr, uint64_t ctl)
{
    unsigned va = caps->vaddr_bits;
    uint64_t v;

    switch (msr) {
    case MSR_IA32_RTIT_CTL:
        return gen_ctl(ctl);
    case MSR_IA32_RTIT_STATUS:
        return gen_status();
    case MSR_IA32_RTIT_OUTPUT_BASE:
        v = rnd() & ((1ull << caps->maxphyaddr) - 1) & ~0x7full;
        if (one_in(8))
            v ^= PTV_BIT(rnd() % 64);
        return v;
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        return rnd();
    case MSR_IA32_RTIT_CR3_MATCH:
        v = rnd() & ~0x1full;
        if (one_in(2))
            v &= (1ull << caps->maxphyaddr) - 1;
        if (one_in(8))
            v |= PTV_BIT(rnd() % 5);
        return v;
    default: /* ADDRn_A/B: canonical, sometimes not */
        v = (uint64_t)((int64_t)(rnd() << (64 - va)) >> (64 - va));
        if (one_in(8))
            v ^= PTV_BIT(va - 1 + rnd() % (65 - va));
        return v;
    }
}

struct diff_stats {
    unsigned long gp_model_only[MSR_SLOTS]; /* model #GP, engine ok */
    unsigned long gp_engine_only[MSR_SLOTS];
    unsigned long read_diff[MSR_SLOTS];
    unsigned long accepted;
};

/* How often each engine rule said #GP (all views): shows that the stream reaches every rule. */
static unsigned long rule_hits[PT_RULE_COUNT];

static unsigned long shown;
static bool shown_class[MSR_SLOTS][3];

static void report(const char *view, unsigned long step, uint32_t msr, uint64_t v, uint64_t ctl,
                   int kind, const char *what)
{
    static const char *const who[] = {"model #GP, engine ok", "engine #GP, model ok",
                                      "read differs"};
    unsigned s = slot(msr);

    if (shown >= SHOW && shown_class[s][kind])
        return;
    shown_class[s][kind] = true;
    shown++;
    printf("  DISAGREE %-5s step %6lu MSR 0x%03x val 0x%016llx RTIT_CTL 0x%016llx: %s (%s)\n", view,
           step, msr, (unsigned long long)v, (unsigned long long)ctl, who[kind], what);
}

/* The STATUS bits the processor itself sets (the engine's file only holds what software wrote). */
static uint64_t hw_status_bits(bool hw_err)
{
    return RTIT_STATUS_FILTEREN | RTIT_STATUS_CONTEXTEN | RTIT_STATUS_TRIGGEREN |
           (hw_err ? RTIT_STATUS_ERROR : 0);
}

static unsigned long run_view(const char *name, const struct ptm_cpu_caps *caps)
{
    struct pt_gcaps g = {.present = caps->pt,
                         .maxphyaddr = (uint8_t)caps->maxphyaddr,
                         .vaddr_bits = (uint8_t)caps->vaddr_bits};
    struct pt_msr_file f;
    struct diff_stats st;
    unsigned long total = 0;
    bool hw_err = false;

    memcpy(g.leaf14, caps->leaf14, sizeof(g.leaf14));
    memset(&st, 0, sizeof(st));
    boot(caps);
    pt_msr_file_init(&f);

    for (unsigned long step = 0; step < STEPS; step++) {
        uint32_t msr = one_in(3) ? MSR_IA32_RTIT_CTL : ptm_rtit_msrs[rnd() % PTM_NR_RTIT_MSRS];
        uint64_t ctl = pm.ctl;
        uint64_t v = gen_value(caps, msr, ctl);
        struct ptm pm_save = pm;
        struct ptm_cpu cpu_save = cpu;
        struct pt_msr_file f_new = f;
        struct pt_msr_result res;
        bool m_gp = ptm_cpu_wrmsr(&cpu, msr, v) != 0;
        bool e_gp = pt_msr_write(&g, &f_new, msr, v, &res) != PT_MSR_OK;
        uint64_t mv = 0, ev = 0;
        bool mr_gp, er_gp;

        if (m_gp != e_gp) {
            total++;
            if (m_gp)
                st.gp_model_only[slot(msr)]++;
            else
                st.gp_engine_only[slot(msr)]++;
            report(name, step, msr, v, ctl, m_gp ? 0 : 1, e_gp ? res.reason : "-");
        }
        if (e_gp && res.rule < PT_RULE_COUNT)
            rule_hits[res.rule]++;
        if (!m_gp && !e_gp) {
            f = f_new;
            st.accepted++;
            if (msr == MSR_IA32_RTIT_CTL && (v & T) && !(ctl & T))
                hw_err |= pm.error != NULL; /* the output model raised an operational error */
            if (msr == MSR_IA32_RTIT_STATUS)
                hw_err = false;
        } else {
            pm = pm_save;
            cpu = cpu_save;
        }
        /* RDMSR of the same MSR: same verdict, same value. */
        mr_gp = ptm_cpu_rdmsr(&cpu, msr, &mv) != 0;
        er_gp = pt_msr_read(&g, &f, msr, &ev, &res) != PT_MSR_OK;
        if (msr == MSR_IA32_RTIT_STATUS) {
            mv &= ~hw_status_bits(hw_err);
            ev &= ~hw_status_bits(hw_err);
        }
        if (mr_gp != er_gp || (!mr_gp && mv != ev)) {
            char what[96];
            snprintf(what, sizeof(what), "model %s0x%llx, engine %s0x%llx", mr_gp ? "#GP " : "",
                     (unsigned long long)mv, er_gp ? "#GP " : "", (unsigned long long)ev);
            total++;
            st.read_diff[slot(msr)]++;
            report(name, step, msr, v, ctl, 2, what);
        }
    }

    printf("  view %-5s: %lu writes, %lu accepted by both, %lu disagreements\n", name,
           (unsigned long)STEPS, st.accepted, total);
    for (unsigned i = 0; i < PTM_NR_RTIT_MSRS; i++)
        if (st.gp_model_only[i] || st.gp_engine_only[i] || st.read_diff[i])
            printf("    MSR 0x%03x: model-only #GP %lu, engine-only #GP %lu, read differs %lu\n",
                   ptm_rtit_msrs[i], st.gp_model_only[i], st.gp_engine_only[i], st.read_diff[i]);
    return total;
}

static void disagreement_report(void **state)
{
    unsigned long total = 0;

    shown = 0;
    memset(shown_class, 0, sizeof(shown_class));
    printf("DISAGREEMENT REPORT (model = SDM reference, engine = pt_msr_write)\n");
    total += run_view("skl", &v_skl);
    total += run_view("full", &v_full);
    total += run_view("bare", &v_bare);
    total += run_view("srng", &v_srng);
    total += run_view("nopt", &v_nopt);
    printf("  engine #GP verdicts by rule:");
    for (int r = 1; r < PT_RULE_COUNT; r++)
        printf("%s %s=%lu", r % 4 == 1 ? "\n   " : "", pt_rule_name((enum pt_rule)r), rule_hits[r]);
    printf("\n");
    if (total)
        fail_msg("%lu verdict/value disagreements between the SDM model and the engine", total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_pt),
        cmocka_unit_test(msr_existence),
        cmocka_unit_test(locked_other_msrs),
        cmocka_unit_test(locked_ctl),
        cmocka_unit_test(ctl_reserved),
        cmocka_unit_test(ctl_cyc),
        cmocka_unit_test(ctl_pwr_evt),
        cmocka_unit_test(ctl_ptw),
        cmocka_unit_test(ctl_cr3en),
        cmocka_unit_test(ctl_mtc),
        cmocka_unit_test(ctl_topa),
        cmocka_unit_test(ctl_fabric),
        cmocka_unit_test(ctl_event_en),
        cmocka_unit_test(ctl_distnt),
        cmocka_unit_test(ctl_inj_psb_pmi),
        cmocka_unit_test(ctl_addr_cfg),
        cmocka_unit_test(ctl_mtc_freq),
        cmocka_unit_test(ctl_cyc_thresh),
        cmocka_unit_test(ctl_psb_freq),
        cmocka_unit_test(ctl_single_range),
        cmocka_unit_test(status_rules),
        cmocka_unit_test(output_base),
        cmocka_unit_test(output_mask),
        cmocka_unit_test(cr3_match),
        cmocka_unit_test(addr_canonical),
        cmocka_unit_test(reads),
        cmocka_unit_test(disagreement_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
