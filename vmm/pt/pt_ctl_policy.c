/* SPDX-License-Identifier: MIT */
/*
 * Policy: when does a guest WRMSR to an RTIT MSR #GP?  One table row per rule, with the
 * source it comes from.  pt_msr.c holds the mechanism (decode, commit); tests/unit/pt/test_pt_msr.c
 * proves each row with one legal and one illegal write.
 *
 * Rows are checked in order and the first rule violated decides the #GP; the order only
 * matters for which reason is reported (every row is a #GP on its own).
 */
#include "pt/pt_msr.h"

#include <stddef.h>

/* RTIT_CTL bits reserved on every CPU (pt-facts B.2: 18, 23, 30:28, 54:48, 63:57). */
#define RTIT_CTL_RESERVED                                                                          \
    (PTV_BIT(18) | PTV_BIT(23) | (0x7ull << 28) | (0x7full << 48) | (0x7full << 57))
#define RTIT_CTL_ADDR_ALL (0xffffull << 32)
#define RTIT_STATUS_BASE_WRITABLE                                                                  \
    (RTIT_STATUS_FILTEREN | RTIT_STATUS_CONTEXTEN | RTIT_STATUS_TRIGGEREN | RTIT_STATUS_ERROR |    \
     RTIT_STATUS_STOPPED | RTIT_STATUS_BYTECNT)

/* Which MSRs a rule applies to. */
#define M_CTL    (1u << 0)
#define M_STATUS (1u << 1)
#define M_BASE   (1u << 2)
#define M_MASK   (1u << 3)
#define M_CR3    (1u << 4)
#define M_ADDR   (1u << 5)
#define M_OTHER  (M_STATUS | M_BASE | M_MASK | M_CR3 | M_ADDR)
#define M_ALL    (M_CTL | M_OTHER)

struct wctx {
    const struct pt_gcaps *g;
    const struct pt_msr_file *f;
    uint32_t msr;
    uint64_t v;
};

struct rule_def {
    enum pt_rule id;
    unsigned msrs;
    bool (*violated)(const struct rule_def *r, const struct wctx *c);
    const char *name;
    const char *cite;
    /* For CPUID-gated RTIT_CTL bits: the bits and the CPUID.14.0 register/bit they need. */
    uint64_t bits;
    int reg;
    uint32_t cap;
};

static unsigned msr_class(uint32_t msr)
{
    switch (msr) {
    case MSR_IA32_RTIT_CTL:
        return M_CTL;
    case MSR_IA32_RTIT_STATUS:
        return M_STATUS;
    case MSR_IA32_RTIT_OUTPUT_BASE:
        return M_BASE;
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        return M_MASK;
    case MSR_IA32_RTIT_CR3_MATCH:
        return M_CR3;
    }
    if (msr >= MSR_IA32_RTIT_ADDR0_A && msr <= MSR_IA32_RTIT_ADDR3_B)
        return M_ADDR;
    return 0;
}

static bool has(const struct pt_gcaps *g, int reg, uint32_t bit)
{
    return pt_cap(g->leaf14, reg, bit);
}

static unsigned field(uint64_t v, unsigned shift)
{
    return (unsigned)((v >> shift) & 0xf);
}

bool pt_msr_present(const struct pt_gcaps *g, uint32_t msr)
{
    switch (msr_class(msr)) {
    case M_CTL:
    case M_STATUS:
        return g->present;
    case M_BASE:
    case M_MASK:
        return g->present && has(g, PT_ECX, PT_CAP_ECX_TOPA | PT_CAP_ECX_SINGLE_RANGE);
    case M_CR3:
        return g->present && has(g, PT_EBX, PT_CAP_EBX_CR3_FILTER);
    case M_ADDR:
        return g->present && (msr - MSR_IA32_RTIT_ADDR0_A) / 2 < pt_cap_num_ranges(g->leaf14);
    }
    return false;
}

/* --- checks --- */

static bool no_pt(const struct rule_def *r, const struct wctx *c)
{
    return !c->g->present;
}

static bool absent(const struct rule_def *r, const struct wctx *c)
{
    return !pt_msr_present(c->g, c->msr);
}

static bool others_locked(const struct rule_def *r, const struct wctx *c)
{
    return (c->f->ctl & RTIT_CTL_TRACEEN) != 0;
}

static bool ctl_reserved(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & RTIT_CTL_RESERVED) != 0;
}

static bool feature_missing(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & r->bits) && !has(c->g, r->reg, r->cap);
}

static bool addr_range(const struct rule_def *r, const struct wctx *c)
{
    for (unsigned n = pt_cap_num_ranges(c->g->leaf14); n < PT_MAX_ADDR_RANGES; n++)
        if (field(c->v, RTIT_CTL_ADDR_SHIFT(n)))
            return true;
    return false;
}

static bool addr_encoding(const struct rule_def *r, const struct wctx *c)
{
    for (unsigned n = 0; n < PT_MAX_ADDR_RANGES; n++)
        if (field(c->v, RTIT_CTL_ADDR_SHIFT(n)) > RTIT_ADDR_CFG_STOP)
            return true;
    return false;
}

static bool mtc_freq(const struct rule_def *r, const struct wctx *c)
{
    unsigned f = field(c->v, RTIT_CTL_MTC_RANGE_SHIFT);

    /* SDM Vol. 3C RTIT_CTL "MTCFreq": an encoding CPUID.14.1:EAX[31:16] does not list
     * #GPs on write whatever MTCEn is (pt-facts B.3 rule 4, corrected) */
    return has(c->g, PT_EBX, PT_CAP_EBX_MTC) && !(pt_cap_mtc_periods(c->g->leaf14) & (1u << f));
}

static bool cyc_thresh(const struct rule_def *r, const struct wctx *c)
{
    unsigned f = field(c->v, RTIT_CTL_CYC_THRESH_SHIFT);

    return has(c->g, PT_EBX, PT_CAP_EBX_PSB_CYC) &&
           !(pt_cap_cyc_thresholds(c->g->leaf14) & (1u << f));
}

static bool psb_freq(const struct rule_def *r, const struct wctx *c)
{
    unsigned f = field(c->v, RTIT_CTL_PSB_FREQ_SHIFT);

    return has(c->g, PT_EBX, PT_CAP_EBX_PSB_CYC) && !(pt_cap_psb_periods(c->g->leaf14) & (1u << f));
}

static bool single_range(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & RTIT_CTL_TRACEEN) && !(c->v & (RTIT_CTL_TOPA | RTIT_CTL_FABRIC_EN)) &&
           !has(c->g, PT_ECX, PT_CAP_ECX_SINGLE_RANGE);
}

/*
 * SDM-p1703 (36.2.7.3, "Other Writes to IA32_RTIT_CTL"; KVM quotes it): "Any attempt to modify
 * IA32_RTIT_CTL while TraceEn is set will result in a #GP unless the same write also clears
 * TraceEn"; writing the same value back is allowed.  So a write that clears TraceEn may change
 * other bits too (writing 0 stops tracing): KVM's first check was stricter than hardware and was
 * fixed by Adrian Hunter, "KVM: x86: Fix Intel PT IA32_RTIT_CTL MSR validation" (kvm@vger, Oct
 * 2024).  pt-facts B.3 rule 2 quotes the old check.
 */
static bool ctl_locked(const struct rule_def *r, const struct wctx *c)
{
    return (c->f->ctl & RTIT_CTL_TRACEEN) && (c->v & RTIT_CTL_TRACEEN) && c->v != c->f->ctl;
}

static bool status_reserved(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & ~pt_status_writable_mask(c->g)) != 0;
}

static bool base_reserved(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & 0x7f) != 0;
}

static bool base_maxphyaddr(const struct rule_def *r, const struct wctx *c)
{
    return c->g->maxphyaddr < 64 && (c->v >> c->g->maxphyaddr) != 0;
}

static bool cr3_reserved(const struct rule_def *r, const struct wctx *c)
{
    return (c->v & 0x1f) != 0;
}

static bool addr_canonical(const struct rule_def *r, const struct wctx *c)
{
    unsigned bits = c->g->vaddr_bits ? c->g->vaddr_bits : 48;
    unsigned sh = 64 - bits;

    return bits < 64 && (uint64_t)((int64_t)(c->v << sh) >> sh) != c->v;
}

/* --- the table --- */

#define FEAT(id_, bits_, reg_, cap_, name_, cite_)                                                 \
    {                                                                                              \
        .id = id_, .msrs = M_CTL, .violated = feature_missing, .name = name_, .cite = cite_,       \
        .bits = bits_, .reg = reg_, .cap = cap_                                                    \
    }

#define RULE(id_, msrs_, fn_, name_, cite_)                                                        \
    {                                                                                              \
        .id = id_, .msrs = msrs_, .violated = fn_, .name = name_, .cite = cite_                    \
    }

static const struct rule_def rules[] = {
    RULE(PT_RULE_NO_PT, M_ALL, no_pt, "guest has no Intel PT",
         "CPUID.7:EBX[25]=0 shown: MSRs absent (pt-facts C, SDM 3C 33.5.2.1; ARCHITECTURE 3)"),
    RULE(PT_RULE_MSR_ABSENT, M_ALL, absent, "MSR absent for the CPUID 0x14 shown",
         "pt-facts A.7 (KVM: CR3_MATCH needs EBX[0]; OUTPUT_* need ECX[0]|ECX[2]; ADDRn n<ranges)"),
    RULE(PT_RULE_LOCKED, M_OTHER, others_locked, "TraceEn=1 locks the other RTIT MSRs",
         "pt-facts B.3 / B.5 (SDM 3C 33.2.7.2: writes to PT MSRs while TraceEn=1 #GP)"),
    RULE(PT_RULE_CTL_RESERVED, M_CTL, ctl_reserved, "RTIT_CTL reserved bit",
         "pt-facts B.2 (bits 18, 23, 30:28, 54:48, 63:57), B.3 (SDM 3C 33.2.7.2)"),
    FEAT(PT_RULE_CTL_CYC, RTIT_CTL_CYCLEACC | RTIT_CTL_CYC_THRESH | RTIT_CTL_PSB_FREQ, PT_EBX,
         PT_CAP_EBX_PSB_CYC, "CYCEn/CycThresh/PSBFreq need CPUID.14.0:EBX[1]",
         "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_PWR_EVT, RTIT_CTL_PWR_EVT_EN, PT_EBX, PT_CAP_EBX_POWER_EVENT,
         "PwrEvtEn needs CPUID.14.0:EBX[5]", "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_PTW, RTIT_CTL_PTW_EN | RTIT_CTL_FUP_ON_PTW, PT_EBX, PT_CAP_EBX_PTWRITE,
         "PTWEn/FUPonPTW need CPUID.14.0:EBX[4]", "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_FABRIC, RTIT_CTL_FABRIC_EN, PT_ECX, PT_CAP_ECX_TRANSPORT,
         "FabricEn needs CPUID.14.0:ECX[3]", "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_CR3EN, RTIT_CTL_CR3EN, PT_EBX, PT_CAP_EBX_CR3_FILTER,
         "CR3Filter needs CPUID.14.0:EBX[0]", "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_TOPA, RTIT_CTL_TOPA, PT_ECX, PT_CAP_ECX_TOPA, "ToPA needs CPUID.14.0:ECX[0]",
         "pt-facts B.3 (SDM 3C 33.2.7.2)"),
    FEAT(PT_RULE_CTL_MTC, RTIT_CTL_MTC_EN | RTIT_CTL_MTC_RANGE, PT_EBX, PT_CAP_EBX_MTC,
         "MTCEn/MTCFreq need CPUID.14.0:EBX[3]", "pt-facts B.2, B.3 bitmask table"),
    FEAT(PT_RULE_CTL_EVENT_EN, RTIT_CTL_EVENT_EN, PT_EBX, PT_CAP_EBX_EVENT_TRACE,
         "EventEn needs CPUID.14.0:EBX[7]", "pt-facts B.2 (newer SDM)"),
    FEAT(PT_RULE_CTL_NOTNT, RTIT_CTL_NOTNT, PT_EBX, PT_CAP_EBX_TNT_DISABLE,
         "DisTNT needs CPUID.14.0:EBX[8]", "pt-facts B.2 (newer SDM)"),
    FEAT(PT_RULE_CTL_INJ_PSB_PMI, RTIT_CTL_INJ_PSB_PMI, PT_EBX, PT_CAP_EBX_PSB_PMI_PRESERVE,
         "InjectPsbPmiOnEnable needs CPUID.14.0:EBX[6]", "pt-facts B.2 (newer SDM)"),
    RULE(PT_RULE_CTL_ADDR_RANGE, M_CTL, addr_range, "ADDRn_CFG set for n >= CPUID.14.1:EAX[2:0]",
         "pt-facts B.3 rule 6"),
    RULE(PT_RULE_CTL_ADDR_ENCODING, M_CTL, addr_encoding, "ADDRn_CFG encoding > 2 is reserved",
         "pt-facts B.2 (3-15 reserved), B.3 rule 6"),
    RULE(PT_RULE_CTL_MTC_FREQ, M_CTL, mtc_freq, "MTCFreq not in CPUID.14.1:EAX[31:16] (any MTCEn)",
         "pt-facts B.3 rule 4"),
    RULE(PT_RULE_CTL_CYC_THRESH, M_CTL, cyc_thresh, "CycThresh not in CPUID.14.1:EBX[15:0]",
         "pt-facts B.3 rule 5"),
    RULE(PT_RULE_CTL_PSB_FREQ, M_CTL, psb_freq, "PSBFreq not in CPUID.14.1:EBX[31:16]",
         "pt-facts B.3 rule 5"),
    RULE(PT_RULE_CTL_SINGLE_RANGE, M_CTL, single_range,
         "TraceEn=1 with ToPA=0, FabricEn=0 needs CPUID.14.0:ECX[2]", "pt-facts B.3 rule 3"),
    RULE(PT_RULE_CTL_LOCKED, M_CTL, ctl_locked,
         "TraceEn=1: a write that keeps TraceEn=1 must keep the value",
         "SDM-p1703 36.2.7.3, SDM-p1700 (same value ok); corrects pt-facts B.3 rule 2"),
    RULE(PT_RULE_STATUS_RESERVED, M_STATUS, status_reserved,
         "STATUS write outside FilterEn/ContextEn/TriggerEn/Error/Stopped/PacketByteCnt",
         "pt-facts A.7, B.4; PacketByteCnt needs CPUID.14.0:EBX[1] (SDM-p1710)"),
    RULE(PT_RULE_BASE_RESERVED, M_BASE, base_reserved, "OUTPUT_BASE bits 6:0 reserved",
         "pt-facts A.7, B.5"),
    RULE(PT_RULE_BASE_MAXPHYADDR, M_BASE, base_maxphyaddr, "OUTPUT_BASE beyond MAXPHYADDR",
         "pt-facts A.7 (legal GPA), B.5 (bits MAXPHYADDR-1:7)"),
    RULE(PT_RULE_CR3_RESERVED, M_CR3, cr3_reserved, "CR3_MATCH bits 4:0 reserved", "pt-facts B.1"),
    RULE(PT_RULE_ADDR_CANONICAL, M_ADDR, addr_canonical, "ADDRn_A/B must be canonical",
         "pt-facts A.7"),
};

_Static_assert(sizeof(rules) / sizeof(rules[0]) == PT_RULE_COUNT - 1,
               "one table row per enum pt_rule");

static const struct rule_def *rule_def(enum pt_rule r)
{
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (rules[i].id == r)
            return &rules[i];
    return NULL;
}

uint64_t pt_ctl_allowed_mask(const struct pt_gcaps *g)
{
    uint64_t allowed = ~RTIT_CTL_RESERVED;

    if (!g->present)
        return 0;
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (rules[i].violated == feature_missing && !has(g, rules[i].reg, rules[i].cap))
            allowed &= ~rules[i].bits;
    allowed &= ~RTIT_CTL_ADDR_ALL;
    for (unsigned n = 0; n < pt_cap_num_ranges(g->leaf14) && n < PT_MAX_ADDR_RANGES; n++)
        allowed |= RTIT_CTL_ADDR(n);
    return allowed;
}

uint64_t pt_status_writable_mask(const struct pt_gcaps *g)
{
    uint64_t m = RTIT_STATUS_BASE_WRITABLE;

    /* CPUID.14.0:EBX[1]=0: a non-zero PacketByteCnt write #GPs (SDM-p1710, CPUID 14H table) */
    if (!has(g, PT_EBX, PT_CAP_EBX_PSB_CYC))
        m &= ~RTIT_STATUS_BYTECNT;
    if (has(g, PT_EBX, PT_CAP_EBX_PSB_PMI_PRESERVE))
        m |= RTIT_STATUS_PENDPSB | RTIT_STATUS_PENDTOPAPMI;
    return m;
}

enum pt_rule pt_policy_check_write(const struct pt_gcaps *g, const struct pt_msr_file *f,
                                   uint32_t msr, uint64_t value)
{
    const struct wctx c = {.g = g, .f = f, .msr = msr, .v = value};
    unsigned cls = msr_class(msr);

    if (!cls)
        return PT_RULE_MSR_ABSENT;
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if ((rules[i].msrs & cls) && rules[i].violated(&rules[i], &c))
            return rules[i].id;
    return PT_RULE_NONE;
}

const char *pt_rule_name(enum pt_rule r)
{
    const struct rule_def *d = rule_def(r);

    return r == PT_RULE_NONE ? "ok" : d ? d->name : "?";
}

const char *pt_rule_cite(enum pt_rule r)
{
    const struct rule_def *d = rule_def(r);

    return d ? d->cite : "";
}
