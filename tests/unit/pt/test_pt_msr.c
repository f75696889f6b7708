/* SPDX-License-Identifier: MIT */
/*
 * Virtual RTIT MSR file (vmm/pt/pt_msr.c + pt_ctl_policy.c).
 *
 * The core is table driven: one row per #GP rule (some rules have a few rows), each with the
 * source of the rule, a legal write and an illegal write.  For every row the test proves that
 * the illegal write #GPs *by that rule* and leaves the whole file byte-identical, and that the
 * legal write succeeds and reads back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pt/pt_msr.h"

#define T   RTIT_CTL_TRACEEN
#define BR  RTIT_CTL_BRANCH_EN
#define L14 .leaf14

/* CPUID 0x14 views the tests write against. */
static const struct pt_gcaps g_off = {.present = false};
/* Every feature the architecture names; 4 ranges; QEMU's frequency bitmaps. */
static const struct pt_gcaps g_full = {
    .present = true,
    .maxphyaddr = 46,
    .vaddr_bits = 48,
    L14 = {{1, 0x1ff, 0xf, 0}, {(0x249u << 16) | 4, (0x3fu << 16) | 0x1fff, 0, 0}}};
/* A Skylake-like view (QEMU's default guest values, pt-facts C): 2 ranges. */
static const struct pt_gcaps g_skl = {
    .present = true,
    .maxphyaddr = 39,
    .vaddr_bits = 48,
    L14 = {{1, 0xf, 0x7, 0}, {(0x249u << 16) | 2, (0x3fu << 16) | 0x1fff, 0, 0}}};
/* Output schemes only: no optional RTIT_CTL feature, no ranges. */
static const struct pt_gcaps g_bare = {
    .present = true, .maxphyaddr = 39, .vaddr_bits = 48, L14 = {{1, 0, 0x7, 0}, {0, 0, 0, 0}}};
static const struct pt_gcaps g_topa_only = {
    .present = true, .maxphyaddr = 39, .vaddr_bits = 48, L14 = {{1, 0, 0x1, 0}, {0, 0, 0, 0}}};
static const struct pt_gcaps g_single_only = {
    .present = true, .maxphyaddr = 39, .vaddr_bits = 48, L14 = {{1, 0, 0x4, 0}, {0, 0, 0, 0}}};
static const struct pt_gcaps g_no_output = {
    .present = true, .maxphyaddr = 39, .vaddr_bits = 48, L14 = {{1, 0, 0, 0}, {0, 0, 0, 0}}};

struct wcase {
    const struct pt_gcaps *g;
    uint64_t ctl; /* RTIT_CTL in the file before the write */
    uint64_t v;
};

struct rule_row {
    enum pt_rule rule;
    const char *cite;
    uint32_t msr;
    struct wcase ok, bad;
};

#define TRACING         (T | RTIT_CTL_TOPA | BR)
#define ADDRCFG(n, cfg) ((uint64_t)(cfg) << RTIT_CTL_ADDR_SHIFT(n))
#define MTCF(f)         ((uint64_t)(f) << RTIT_CTL_MTC_RANGE_SHIFT)
#define CYCT(f)         ((uint64_t)(f) << RTIT_CTL_CYC_THRESH_SHIFT)
#define PSBF(f)         ((uint64_t)(f) << RTIT_CTL_PSB_FREQ_SHIFT)

static const struct rule_row rows[] = {
    {PT_RULE_NO_PT,
     "ARCHITECTURE 3: mode off/system -> RTIT MSRs #GP",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, TRACING},
     {&g_off, 0, 0}},
    {PT_RULE_NO_PT, "ARCHITECTURE 3", MSR_IA32_RTIT_ADDR_A(0), {&g_full, 0, 0}, {&g_off, 0, 0}},
    {PT_RULE_MSR_ABSENT,
     "pt-facts A.7: CR3_MATCH needs cr3_filtering",
     MSR_IA32_RTIT_CR3_MATCH,
     {&g_skl, 0, 0x1000},
     {&g_topa_only, 0, 0x1000}},
    {PT_RULE_MSR_ABSENT,
     "pt-facts A.7: ADDRn needs n < ranges",
     MSR_IA32_RTIT_ADDR_A(2),
     {&g_full, 0, 0x1000},
     {&g_skl, 0, 0x1000}},
    {PT_RULE_MSR_ABSENT,
     "pt-facts A.7/B.5: OUTPUT_* need ToPA or single-range",
     MSR_IA32_RTIT_OUTPUT_BASE,
     {&g_topa_only, 0, 0x1000},
     {&g_no_output, 0, 0x1000}},
    {PT_RULE_MSR_ABSENT,
     "pt-facts A.7/B.5",
     MSR_IA32_RTIT_OUTPUT_MASK_PTRS,
     {&g_single_only, 0, 0xfff},
     {&g_no_output, 0, 0xfff}},
    {PT_RULE_LOCKED,
     "pt-facts B.3: other PT MSRs locked while TraceEn=1",
     MSR_IA32_RTIT_STATUS,
     {&g_full, 0, RTIT_STATUS_ERROR},
     {&g_full, TRACING, 0}},
    {PT_RULE_LOCKED,
     "pt-facts B.3",
     MSR_IA32_RTIT_OUTPUT_BASE,
     {&g_full, 0, 0x2000},
     {&g_full, TRACING, 0x2000}},
    {PT_RULE_LOCKED,
     "pt-facts B.3/B.5",
     MSR_IA32_RTIT_OUTPUT_MASK_PTRS,
     {&g_full, 0, 0x80},
     {&g_full, TRACING, 0x80}},
    {PT_RULE_LOCKED,
     "pt-facts B.3",
     MSR_IA32_RTIT_CR3_MATCH,
     {&g_full, 0, 0x2000},
     {&g_full, TRACING, 0x2000}},
    {PT_RULE_LOCKED,
     "pt-facts B.3",
     MSR_IA32_RTIT_ADDR_B(1),
     {&g_full, 0, 0x2000},
     {&g_full, TRACING, 0x2000}},
    {PT_RULE_CTL_RESERVED,
     "pt-facts B.2: bit 18",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, BR},
     {&g_full, 0, PTV_BIT(18)}},
    {PT_RULE_CTL_RESERVED,
     "pt-facts B.2: bit 23",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, BR},
     {&g_full, 0, PTV_BIT(23)}},
    {PT_RULE_CTL_RESERVED,
     "pt-facts B.2: bits 30:28",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, BR},
     {&g_full, 0, PTV_BIT(29)}},
    {PT_RULE_CTL_RESERVED,
     "pt-facts B.2: bits 54:48",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, BR},
     {&g_full, 0, PTV_BIT(48)}},
    {PT_RULE_CTL_RESERVED,
     "pt-facts B.2: bits 63:57",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, BR},
     {&g_full, 0, PTV_BIT(63)}},
    {PT_RULE_CTL_CYC,
     "pt-facts B.2/B.3: psb_cyc",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_CYCLEACC},
     {&g_bare, 0, RTIT_CTL_CYCLEACC}},
    {PT_RULE_CTL_CYC,
     "pt-facts B.3: PSBFreq needs psb_cyc",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, PSBF(1)},
     {&g_bare, 0, PSBF(1)}},
    {PT_RULE_CTL_PWR_EVT,
     "pt-facts B.2/B.3: power_event_trace",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_PWR_EVT_EN},
     {&g_bare, 0, RTIT_CTL_PWR_EVT_EN}},
    {PT_RULE_CTL_PTW,
     "pt-facts B.2/B.3: ptwrite",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_PTW_EN},
     {&g_bare, 0, RTIT_CTL_PTW_EN}},
    {PT_RULE_CTL_PTW,
     "pt-facts B.2/B.3: FUPonPTW",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_FUP_ON_PTW},
     {&g_skl, 0, RTIT_CTL_FUP_ON_PTW}},
    {PT_RULE_CTL_FABRIC,
     "pt-facts B.2/B.3: output_subsys",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_FABRIC_EN},
     {&g_skl, 0, RTIT_CTL_FABRIC_EN}},
    {PT_RULE_CTL_CR3EN,
     "pt-facts B.2/B.3: cr3_filtering",
     MSR_IA32_RTIT_CTL,
     {&g_skl, 0, RTIT_CTL_CR3EN},
     {&g_bare, 0, RTIT_CTL_CR3EN}},
    {PT_RULE_CTL_TOPA,
     "pt-facts B.3: ToPA needs topa_output",
     MSR_IA32_RTIT_CTL,
     {&g_topa_only, 0, T | RTIT_CTL_TOPA},
     {&g_single_only, 0, T | RTIT_CTL_TOPA}},
    {PT_RULE_CTL_MTC,
     "pt-facts B.2/B.3: mtc",
     MSR_IA32_RTIT_CTL,
     {&g_skl, 0, RTIT_CTL_MTC_EN | MTCF(3)},
     {&g_bare, 0, RTIT_CTL_MTC_EN}},
    {PT_RULE_CTL_EVENT_EN,
     "pt-facts B.2: EventEn needs EBX[7]",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_EVENT_EN},
     {&g_skl, 0, RTIT_CTL_EVENT_EN}},
    {PT_RULE_CTL_NOTNT,
     "pt-facts B.2: DisTNT needs EBX[8]",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_NOTNT},
     {&g_skl, 0, RTIT_CTL_NOTNT}},
    {PT_RULE_CTL_INJ_PSB_PMI,
     "pt-facts B.2: needs EBX[6]",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_INJ_PSB_PMI},
     {&g_skl, 0, RTIT_CTL_INJ_PSB_PMI}},
    {PT_RULE_CTL_ADDR_RANGE,
     "pt-facts B.3 rule 6",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, ADDRCFG(3, 1)},
     {&g_skl, 0, ADDRCFG(3, 1)}},
    {PT_RULE_CTL_ADDR_RANGE,
     "pt-facts B.3 rule 6: no ranges",
     MSR_IA32_RTIT_CTL,
     {&g_skl, 0, ADDRCFG(0, 2)},
     {&g_bare, 0, ADDRCFG(0, 2)}},
    {PT_RULE_CTL_ADDR_ENCODING,
     "pt-facts B.2: 3-15 reserved",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, ADDRCFG(0, 2)},
     {&g_full, 0, ADDRCFG(0, 3)}},
    {PT_RULE_CTL_ADDR_ENCODING,
     "pt-facts B.2: 3-15 reserved",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, ADDRCFG(1, 1)},
     {&g_full, 0, ADDRCFG(1, 15)}},
    {PT_RULE_CTL_MTC_FREQ,
     "pt-facts B.3 rule 4 (0x249: 0,3,6,9)",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_MTC_EN | MTCF(9)},
     {&g_full, 0, RTIT_CTL_MTC_EN | MTCF(1)}},
    {PT_RULE_CTL_MTC_FREQ,
     "pt-facts B.3 rule 4 (corrected): checked whatever MTCEn is",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, MTCF(3)},
     {&g_full, 0, MTCF(1)}},
    {PT_RULE_CTL_CYC_THRESH,
     "pt-facts B.3 rule 5 (0x1fff)",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, RTIT_CTL_CYCLEACC | CYCT(12)},
     {&g_full, 0, CYCT(13)}},
    {PT_RULE_CTL_PSB_FREQ,
     "pt-facts B.3 rule 5 (0x3f)",
     MSR_IA32_RTIT_CTL,
     {&g_full, 0, PSBF(5)},
     {&g_full, 0, PSBF(6)}},
    {PT_RULE_CTL_SINGLE_RANGE,
     "pt-facts B.3 rule 3",
     MSR_IA32_RTIT_CTL,
     {&g_single_only, 0, T},
     {&g_topa_only, 0, T}},
    {PT_RULE_CTL_SINGLE_RANGE,
     "pt-facts B.3 rule 3: ToPA=1 is fine",
     MSR_IA32_RTIT_CTL,
     {&g_topa_only, 0, T | RTIT_CTL_TOPA},
     {&g_topa_only, 0, T | BR}},
    {PT_RULE_CTL_LOCKED,
     "SDM-p1703: a write clearing TraceEn may change other bits",
     MSR_IA32_RTIT_CTL,
     {&g_full, TRACING, RTIT_CTL_OS},
     {&g_full, TRACING, TRACING | RTIT_CTL_OS}},
    {PT_RULE_CTL_LOCKED,
     "SDM-p1700: same value allowed while TraceEn=1",
     MSR_IA32_RTIT_CTL,
     {&g_full, TRACING, TRACING},
     {&g_full, TRACING, T}},
    {PT_RULE_CTL_LOCKED,
     "SDM-p1703: writing 0 stops tracing",
     MSR_IA32_RTIT_CTL,
     {&g_full, TRACING, 0},
     {&g_full, TRACING, TRACING & ~BR}},
    {PT_RULE_STATUS_RESERVED,
     "pt-facts A.7/B.4",
     MSR_IA32_RTIT_STATUS,
     {&g_skl, 0, RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED | RTIT_STATUS_BYTECNT | 7},
     {&g_skl, 0, PTV_BIT(3)}},
    {PT_RULE_STATUS_RESERVED,
     "pt-facts B.4: PendPSB needs EBX[6]",
     MSR_IA32_RTIT_STATUS,
     {&g_full, 0, RTIT_STATUS_PENDPSB},
     {&g_skl, 0, RTIT_STATUS_PENDPSB}},
    {PT_RULE_STATUS_RESERVED,
     "SDM-p1710: PacketByteCnt != 0 needs psb_cyc (EBX[1])",
     MSR_IA32_RTIT_STATUS,
     {&g_skl, 0, 1ull << RTIT_STATUS_BYTECNT_SHIFT},
     {&g_bare, 0, 1ull << RTIT_STATUS_BYTECNT_SHIFT}},
    {PT_RULE_STATUS_RESERVED,
     "pt-facts B.4: bits 63:49",
     MSR_IA32_RTIT_STATUS,
     {&g_skl, 0, RTIT_STATUS_BYTECNT},
     {&g_skl, 0, PTV_BIT(49)}},
    {PT_RULE_BASE_RESERVED,
     "pt-facts A.7/B.5: bits 6:0",
     MSR_IA32_RTIT_OUTPUT_BASE,
     {&g_full, 0, 0x1080},
     {&g_full, 0, 0x1040}},
    {PT_RULE_BASE_MAXPHYADDR,
     "pt-facts A.7/B.5",
     MSR_IA32_RTIT_OUTPUT_BASE,
     {&g_full, 0, (1ull << 46) - 0x80},
     {&g_full, 0, 1ull << 46}},
    {PT_RULE_BASE_MAXPHYADDR,
     "pt-facts A.7/B.5",
     MSR_IA32_RTIT_OUTPUT_BASE,
     {&g_skl, 0, 1ull << 38},
     {&g_skl, 0, 1ull << 39}},
    {PT_RULE_CR3_RESERVED,
     "pt-facts B.1: bits 4:0",
     MSR_IA32_RTIT_CR3_MATCH,
     {&g_full, 0, 0x1020},
     {&g_full, 0, 0x1010}},
    {PT_RULE_ADDR_CANONICAL,
     "pt-facts A.7",
     MSR_IA32_RTIT_ADDR_A(0),
     {&g_full, 0, 0xffff800000000000ull},
     {&g_full, 0, 0x0000800000000000ull}},
    {PT_RULE_ADDR_CANONICAL,
     "pt-facts A.7",
     MSR_IA32_RTIT_ADDR_B(3),
     {&g_full, 0, 0x00007fffffffffffull},
     {&g_full, 0, 0xfffe000000000000ull}},
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

static void file_with_ctl(struct pt_msr_file *f, uint64_t ctl)
{
    pt_msr_file_init(f);
    f->ctl = ctl;
    /* some non-zero state, so "unchanged" means something */
    f->status = RTIT_STATUS_CONTEXTEN;
    f->output_base = 0x5000;
    f->output_mask = 0x3f7f;
    f->cr3_match = 0x7000;
    f->addr[0][0] = 0x1111000;
    f->addr[3][1] = 0x2222000;
}

static void rules_table(void **state)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct rule_row *r = &rows[i];
        struct pt_msr_file f, before;
        struct pt_msr_result res;
        uint64_t rd = 0;

        print_message("row %2zu %-26s %s\n", i, pt_rule_name(r->rule), r->cite);
        assert_non_null(r->cite);
        assert_true(strlen(pt_rule_cite(r->rule)) > 0);

        /* illegal: #GP by exactly this rule, file byte-identical */
        file_with_ctl(&f, r->bad.ctl);
        before = f;
        assert_int_equal(pt_msr_write(r->bad.g, &f, r->msr, r->bad.v, &res), PT_MSR_GP);
        if (res.rule != r->rule)
            fail_msg("row %zu: expected %s, got %s", i, pt_rule_name(r->rule),
                     pt_rule_name(res.rule));
        assert_memory_equal(&f, &before, sizeof(f));
        assert_int_equal(pt_policy_check_write(r->bad.g, &f, r->msr, r->bad.v), r->rule);

        /* legal: accepted, and reads back */
        file_with_ctl(&f, r->ok.ctl);
        if (pt_msr_write(r->ok.g, &f, r->msr, r->ok.v, &res) != PT_MSR_OK)
            fail_msg("row %zu: legal write refused by %s", i, pt_rule_name(res.rule));
        assert_int_equal(res.rule, PT_RULE_NONE);
        assert_int_equal(pt_msr_read(r->ok.g, &f, r->msr, &rd, NULL), PT_MSR_OK);
        if (r->msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS)
            assert_int_equal(rd, r->ok.v | RTIT_MASK_LOWER);
        else if (r->msr == MSR_IA32_RTIT_STATUS) /* processor-owned bits keep their value */
            assert_int_equal(rd, (r->ok.v & ~PT_STATUS_WRITE_IGNORED) | RTIT_STATUS_CONTEXTEN);
        else
            assert_int_equal(rd, r->ok.v);
    }
}

/* Every rule the policy knows has at least one row above. */
static void every_rule_has_a_row(void **state)
{
    for (int r = PT_RULE_NONE + 1; r < PT_RULE_COUNT; r++) {
        bool found = false;

        for (size_t i = 0; i < NROWS; i++)
            found |= rows[i].rule == (enum pt_rule)r;
        if (!found)
            fail_msg("rule %s has no test row", pt_rule_name((enum pt_rule)r));
    }
}

static void reads(void **state)
{
    struct pt_msr_file f;
    struct pt_msr_result res;
    uint64_t v = 0;

    pt_msr_file_init(&f);
    /* OUTPUT_MASK_PTRS bits 6:0 read as 1, even after writing 0 there (pt-facts B.5) */
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &v, NULL), PT_MSR_OK);
    assert_int_equal(v, 0x7f);
    assert_int_equal(
        pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x1234500000000, &res), PT_MSR_OK);
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &v, NULL), PT_MSR_OK);
    assert_int_equal(v, 0x1234500000000 | 0x7f);

    /* absent MSRs #GP on read too; beyond the range count */
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_ADDR_A(2), &v, &res), PT_MSR_GP);
    assert_int_equal(res.rule, PT_RULE_MSR_ABSENT);
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_ADDR_B(1), &v, &res), PT_MSR_OK);
    assert_int_equal(pt_msr_read(&g_bare, &f, MSR_IA32_RTIT_CR3_MATCH, &v, &res), PT_MSR_GP);
    assert_int_equal(pt_msr_read(&g_no_output, &f, MSR_IA32_RTIT_OUTPUT_BASE, &v, &res), PT_MSR_GP);

    /* mode off: everything #GPs */
    for (uint32_t m = 0x560; m <= 0x587; m++) {
        if (!pt_msr_is_rtit(m))
            continue;
        assert_int_equal(pt_msr_read(&g_off, &f, m, &v, &res), PT_MSR_GP);
        assert_int_equal(res.rule, PT_RULE_NO_PT);
    }

    /* reads are allowed while tracing */
    f.ctl = TRACING;
    f.status = RTIT_STATUS_TRIGGEREN;
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_STATUS, &v, NULL), PT_MSR_OK);
    assert_int_equal(v, RTIT_STATUS_TRIGGEREN);

    /* not ours */
    static const uint32_t others[] = {0x55f, 0x562, 0x56f, 0x573, 0x57f, 0x588, 0x38e, 0x390};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        assert_int_equal(pt_msr_read(&g_full, &f, others[i], &v, NULL), PT_MSR_NOT_PT_MSR);
        assert_int_equal(pt_msr_write(&g_full, &f, others[i], 0, NULL), PT_MSR_NOT_PT_MSR);
    }
}

/* STATUS FilterEn/ContextEn/TriggerEn: "Writes are ignored" (SDM-p1704), without #GP. */
static void status_ignored_bits(void **state)
{
    struct pt_msr_file f;
    uint64_t v = 0;

    pt_msr_file_init(&f);
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_STATUS,
                                  RTIT_STATUS_TRIGGEREN | RTIT_STATUS_ERROR, NULL),
                     PT_MSR_OK);
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_STATUS, &v, NULL), PT_MSR_OK);
    assert_int_equal(v, RTIT_STATUS_ERROR);
    /* the value the hardware left (saved at VM exit) survives a guest write of 0 there */
    pt_msr_file_set(&f, MSR_IA32_RTIT_STATUS, RTIT_STATUS_FILTEREN | RTIT_STATUS_STOPPED);
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_STATUS, 0, NULL), PT_MSR_OK);
    assert_int_equal(pt_msr_read(&g_skl, &f, MSR_IA32_RTIT_STATUS, &v, NULL), PT_MSR_OK);
    assert_int_equal(v, RTIT_STATUS_FILTEREN);
}

static void trace_transitions(void **state)
{
    struct pt_msr_file f;
    struct pt_msr_result res;

    pt_msr_file_init(&f);
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_CTL, TRACING, &res), PT_MSR_OK);
    assert_true(res.trace_start);
    assert_false(res.trace_stop);
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_CTL, TRACING, &res), PT_MSR_OK);
    assert_false(res.trace_start || res.trace_stop);
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_CTL, TRACING & ~T, &res), PT_MSR_OK);
    assert_true(res.trace_stop);
    assert_false(res.trace_start);
    /* once stopped, the other MSRs are writable again */
    assert_int_equal(pt_msr_write(&g_skl, &f, MSR_IA32_RTIT_STATUS, 0, &res), PT_MSR_OK);
}

/* The allowed-bit mask for the Skylake view, written out by hand from pt-facts B.3's table. */
static void allowed_mask(void **state)
{
    uint64_t always = T | RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_TSC_EN | RTIT_CTL_DISRETC | BR;
    uint64_t skl = always | RTIT_CTL_CR3EN | RTIT_CTL_CYCLEACC | RTIT_CTL_CYC_THRESH |
                   RTIT_CTL_PSB_FREQ | RTIT_CTL_MTC_EN | RTIT_CTL_MTC_RANGE | RTIT_CTL_TOPA |
                   RTIT_CTL_ADDR(0) | RTIT_CTL_ADDR(1);

    assert_int_equal(pt_ctl_allowed_mask(&g_skl), skl);
    assert_int_equal(pt_ctl_allowed_mask(&g_skl), 0xff0f7bef8full);
    assert_int_equal(pt_ctl_allowed_mask(&g_bare), always | RTIT_CTL_TOPA);
    assert_int_equal(pt_ctl_allowed_mask(&g_single_only), always);
    assert_int_equal(pt_ctl_allowed_mask(&g_off), 0);
    assert_int_equal(pt_ctl_allowed_mask(&g_full) & RTIT_CTL_FABRIC_EN, RTIT_CTL_FABRIC_EN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rules_table),
        cmocka_unit_test(every_rule_has_a_row),
        cmocka_unit_test(reads),
        cmocka_unit_test(trace_transitions),
        cmocka_unit_test(status_ignored_bits),
        cmocka_unit_test(allowed_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
