/* SPDX-License-Identifier: MIT */
/* A model of architectural performance monitoring (see pmu_model.h). */
#include <string.h>

#include "model/pmu_model.h"

#define BIT(n) (1ull << (n))

#define M_PMC       0x0c1
#define M_EVTSEL    0x186
#define M_FIXED     0x309
#define M_FIXED_CTL 0x38d
#define M_STATUS    0x38e
#define M_CTRL      0x38f
#define M_RESET     0x390
#define M_SET       0x391
#define M_INUSE     0x392
#define M_A_PMC     0x4c1

#define ST_LBR_FRZ  BIT(58)
#define ST_CTR_FRZ  BIT(59)
#define ST_OVF_BUF  BIT(62)
#define ST_COND_CHG BIT(63)
#define DBG_FRZ_LBR BIT(11)
#define DBG_FRZ_PMU BIT(12)

static uint64_t ones(unsigned w)
{
    return w >= 64 ? ~0ull : BIT(w) - 1;
}

static unsigned n_gp(const struct pmum_cpu *c)
{
    if (!c->version)
        return 0;
    return c->n_gp < PMUM_GP ? c->n_gp : PMUM_GP;
}

bool pmum_has_fixed(const struct pmum_cpu *c, unsigned i)
{
    /* SDM Vol. 3B 20.2.2: fixed counters from v2, EDX[4:0] of them from 0; 20.2.5 (v5): also
     * every counter whose ECX bit is set */
    if (c->version < 2 || i >= PMUM_FIXED)
        return false;
    return i < c->n_fixed || (c->version >= 5 && (c->fixed_ecx & BIT(i)));
}

static uint64_t fixed_bits(const struct pmum_cpu *c)
{
    uint64_t b = 0;
    for (unsigned i = 0; i < PMUM_FIXED; i++)
        if (pmum_has_fixed(c, i))
            b |= BIT(32 + i);
    return b;
}

/* every counter's bit in the GLOBAL_* layout (20.2.2, figures 20-3 .. 20-5) */
static uint64_t counter_bits(const struct pmum_cpu *c)
{
    return ones(n_gp(c)) | fixed_bits(c);
}

uint64_t pmum_global_ctrl_valid(const struct pmum_cpu *c)
{
    return c->version >= 2 ? counter_bits(c) : 0;
}

/* OVF_CTRL (v2/v3) / STATUS_RESET (v4): write 1 to clear; OvfBuf and CondChgd always, v4 adds
 * LBR_Frz and CTR_Frz (20.2.4.2) [I: ToPA, ASCI, uncore bits left out of the model] */
static uint64_t reset_valid(const struct pmum_cpu *c)
{
    return counter_bits(c) | ST_OVF_BUF | ST_COND_CHG |
           (c->version >= 4 ? ST_LBR_FRZ | ST_CTR_FRZ : 0);
}

/* STATUS_SET (v4, 20.2.4.2): the same bits except CondChgd [I] */
static uint64_t set_valid(const struct pmum_cpu *c)
{
    return counter_bits(c) | ST_OVF_BUF | ST_LBR_FRZ | ST_CTR_FRZ;
}

/* PERFEVTSELx: bits 31:0 (AnyThread only on v3/v4: deprecated in v5) [I: bits 63:32 taken as
 * reserved: the TSX qualifiers of some models are not modelled] */
static uint64_t evtsel_valid(const struct pmum_cpu *c)
{
    uint64_t v = 0xffffffffull;
    if (c->version < 3 || c->version >= 5)
        v &= ~BIT(21);
    return v;
}

static uint64_t fixed_ctl_valid(const struct pmum_cpu *c)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < PMUM_FIXED; i++)
        if (pmum_has_fixed(c, i))
            v |= (uint64_t)(c->version == 3 || c->version == 4 ? 0xf : 0xb) << (4 * i);
    return v;
}

void pmum_init(struct pmum *m, const struct pmum_cpu *c, struct lbrm *lbr)
{
    memset(m, 0, sizeof(*m));
    m->c = *c;
    m->lbr = lbr;
    m->lvtpc = 1u << 16; /* masked */
}

void pmum_cpuid(const struct pmum *m, uint32_t r[4])
{
    const struct pmum_cpu *c = &m->c;
    r[0] = r[1] = r[2] = r[3] = 0;
    if (!c->version)
        return;
    r[0] = c->version | (uint32_t)c->n_gp << 8 | (uint32_t)c->gp_width << 16 | 7u << 24;
    if (c->version >= 2)
        r[3] = c->n_fixed | (uint32_t)c->fixed_width << 5;
    if (c->version >= 5)
        r[2] = c->fixed_ecx;
}

static uint64_t inuse(const struct pmum *m)
{
    /* 20.2.4.3 (v4) [I]: PERFEVTSELn in use when its event select is non-zero, FIXED_CTRn
     * when its enable field is, bit 63 when any counter asks for a PMI */
    uint64_t v = 0;
    bool pmi = false;
    for (unsigned i = 0; i < n_gp(&m->c); i++) {
        if (m->evtsel[i] & 0xff)
            v |= BIT(i);
        pmi |= (m->evtsel[i] & BIT(20)) != 0;
    }
    for (unsigned i = 0; i < PMUM_FIXED; i++) {
        if ((m->fixed_ctrl >> (4 * i)) & 3)
            v |= BIT(32 + i);
        pmi |= ((m->fixed_ctrl >> (4 * i)) & 8) != 0;
    }
    return v | (pmi ? BIT(63) : 0);
}

int pmum_rdmsr(const struct pmum *m, uint32_t msr, uint64_t *val)
{
    const struct pmum_cpu *c = &m->c;
    unsigned n = n_gp(c);
    if (msr >= M_EVTSEL && msr < M_EVTSEL + PMUM_GP) {
        if (msr - M_EVTSEL >= n)
            return -1;
        *val = m->evtsel[msr - M_EVTSEL];
        return 0;
    }
    if ((msr >= M_PMC && msr < M_PMC + PMUM_GP) || (msr >= M_A_PMC && msr < M_A_PMC + PMUM_GP)) {
        unsigned i = msr >= M_A_PMC ? msr - M_A_PMC : msr - M_PMC;
        if (i >= n || (msr >= M_A_PMC && !c->fw_write))
            return -1;
        *val = m->pmc[i]; /* reads give the full width (20.2.6) */
        return 0;
    }
    if (msr >= M_FIXED && msr < M_FIXED + PMUM_FIXED) {
        if (!pmum_has_fixed(c, msr - M_FIXED))
            return -1;
        *val = m->fixed[msr - M_FIXED];
        return 0;
    }
    switch (msr) {
    case M_FIXED_CTL:
    case M_CTRL:
    case M_STATUS:
    case M_RESET:
        if (c->version < 2)
            return -1;
        *val = msr == M_FIXED_CTL ? m->fixed_ctrl
               : msr == M_CTRL    ? m->global_ctrl
               : msr == M_STATUS  ? m->status | (m->lbr->global_status & ST_LBR_FRZ)
                                  : 0; /* [I] the reset MSR reads 0 */
        return 0;
    case M_SET:
    case M_INUSE:
        if (c->version < 4)
            return -1;
        *val = msr == M_SET ? 0 : inuse(m);
        return 0;
    }
    return 1;
}

int pmum_wrmsr(struct pmum *m, uint32_t msr, uint64_t val)
{
    const struct pmum_cpu *c = &m->c;
    unsigned n = n_gp(c);
    if (msr >= M_EVTSEL && msr < M_EVTSEL + PMUM_GP) {
        if (msr - M_EVTSEL >= n || (val & ~evtsel_valid(c)))
            return -1;
        m->evtsel[msr - M_EVTSEL] = val;
        return 0;
    }
    if (msr >= M_PMC && msr < M_PMC + PMUM_GP) {
        if (msr - M_PMC >= n)
            return -1;
        /* 20.2.6 / 20.2.1.1: a write to IA32_PMCx sets bits 31:0 and sign-extends bit 31
         * into the upper bits of the counter's width */
        m->pmc[msr - M_PMC] = (uint64_t)(int64_t)(int32_t)(uint32_t)val & ones(c->gp_width);
        return 0;
    }
    if (msr >= M_A_PMC && msr < M_A_PMC + PMUM_GP) {
        /* 20.2.6: IA32_A_PMCx take all bits of the width [I: a bit above it #GPs] */
        if (msr - M_A_PMC >= n || !c->fw_write || (val & ~ones(c->gp_width)))
            return -1;
        m->pmc[msr - M_A_PMC] = val;
        return 0;
    }
    if (msr >= M_FIXED && msr < M_FIXED + PMUM_FIXED) {
        if (!pmum_has_fixed(c, msr - M_FIXED) || (val & ~ones(c->fixed_width)))
            return -1; /* [I] as IA32_A_PMCx */
        m->fixed[msr - M_FIXED] = val;
        return 0;
    }
    switch (msr) {
    case M_FIXED_CTL:
        if (c->version < 2 || (val & ~fixed_ctl_valid(c)))
            return -1;
        m->fixed_ctrl = val;
        return 0;
    case M_CTRL:
        if (c->version < 2 || (val & ~pmum_global_ctrl_valid(c)))
            return -1;
        m->global_ctrl = val;
        return 0;
    case M_STATUS:
        return -1; /* read-only (Vol. 4 table 2-2) */
    case M_RESET:
        if (c->version < 2 || (val & ~reset_valid(c)))
            return -1;
        m->status &= ~val;
        if (val & ST_LBR_FRZ)
            m->lbr->global_status &= ~ST_LBR_FRZ;
        return 0;
    case M_SET:
        if (c->version < 4 || (val & ~set_valid(c)))
            return -1;
        /* 20.2.4.2: setting a bit does not request a PMI [I] */
        m->status |= val & ~ST_LBR_FRZ;
        if (val & ST_LBR_FRZ)
            m->lbr->global_status |= ST_LBR_FRZ;
        return 0;
    case M_INUSE:
        return -1; /* read-only */
    }
    return 1;
}

/* --- counting --- */

static bool frozen(const struct pmum *m)
{
    return m->c.version >= 4 && (m->status & ST_CTR_FRZ); /* 20.2.4.1 streamlined freeze */
}

/* does counter k (GLOBAL layout) count this kind of event at cpl? */
static bool counts(const struct pmum *m, unsigned k, bool insns, unsigned cpl)
{
    if (frozen(m))
        return false;
    if (m->c.version >= 2 && !(m->global_ctrl & BIT(k)))
        return false;
    if (k < 32) {
        uint64_t e = m->evtsel[k];
        if (!(e & BIT(22)) || (e & (0xffull << 24 | BIT(23) | BIT(18))))
            return false;
        if ((e & 0xffff) != (insns ? 0x00c0u : 0x003cu))
            return false;
        return cpl ? (e & BIT(16)) != 0 : (e & BIT(17)) != 0;
    }
    unsigned f = k - 32;
    if (!pmum_has_fixed(&m->c, f) || (insns ? f != 0 : f != 1 && f != 2))
        return false;
    return (m->fixed_ctrl >> (4 * f)) & (cpl ? 2 : 1);
}

static uint64_t *slot(struct pmum *m, unsigned k)
{
    return k < 32 ? &m->pmc[k] : &m->fixed[k - 32];
}

static unsigned width(const struct pmum *m, unsigned k)
{
    return k < 32 ? m->c.gp_width : m->c.fixed_width;
}

static bool wants_pmi(const struct pmum *m, unsigned k)
{
    return k < 32 ? (m->evtsel[k] & BIT(20)) != 0 : ((m->fixed_ctrl >> (4 * (k - 32))) & 8) != 0;
}

/*
 * A PMI request: 20.2.4.1 / 17.4.7 (FREEZE_PERFMON_ON_PMI: before v4 the processor clears
 * IA32_PERF_GLOBAL_CTRL, from v4 it sets CTR_Frz), FREEZE_LBRS_ON_PMI through the LBR model
 * (LBR_Frz from v4, else DEBUGCTL.LBR cleared).  The freezes happen at the request, whatever the
 * LVT entry then does with it [I].
 */
static void pmi_request(struct pmum *m)
{
    m->pmi_req = true;
    m->pmis++;
    if (m->lbr->debugctl & DBG_FRZ_PMU) {
        if (m->c.version >= 4)
            m->status |= ST_CTR_FRZ;
        else
            m->global_ctrl = 0;
    }
    lbrm_pmi(m->lbr);
}

static void count(struct pmum *m, uint64_t n, bool insns, unsigned cpl)
{
    while (n) {
        uint64_t active = 0, step = n;
        for (unsigned k = 0; k < 64; k++) {
            if ((k >= (unsigned)n_gp(&m->c) && k < 32) || k >= 32 + PMUM_FIXED)
                continue;
            if (!counts(m, k, insns, cpl))
                continue;
            active |= BIT(k);
            uint64_t left = ones(width(m, k)) - (*slot(m, k) & ones(width(m, k))) + 1;
            if (left < step)
                step = left;
        }
        if (!active)
            return;
        uint64_t pmi = 0;
        for (unsigned k = 0; k < 64; k++) {
            if (!(active & BIT(k)))
                continue;
            uint64_t v = (*slot(m, k) & ones(width(m, k))) + step;
            if (v > ones(width(m, k)) || (width(m, k) >= 64 && v == 0)) {
                v = 0; /* wraps: the overflow sets the counter's status bit (20.2.2) */
                m->status |= BIT(k);
                m->overflows++;
                pmi |= wants_pmi(m, k) ? BIT(k) : 0;
            }
            *slot(m, k) = v;
        }
        if (pmi) {
            m->pmi_src |= pmi;
            pmi_request(m); /* freezes act before the rest of the stream counts */
        }
        n -= step;
    }
}

void pmum_retire(struct pmum *m, uint64_t n, unsigned cpl)
{
    count(m, n, true, cpl);
}

void pmum_cycles(struct pmum *m, uint64_t n, unsigned cpl)
{
    lbrm_tick(m->lbr, n);
    count(m, n, false, cpl);
}

unsigned pmum_boundary(struct pmum *m)
{
    if (!m->pmi_req)
        return 0;
    m->pmi_req = false;
    m->pmi_src = 0;
    /* SDM Vol. 3A "Local Vector Table" (10.5.1 before 2022): a masked LVT entry drops the request;
     * delivery mode NMI (100b) or fixed (000b, the entry's vector) [I: the model does not set the
     * mask bit on delivery] */
    if (m->lvtpc & (1u << 16))
        return 0;
    if (((m->lvtpc >> 8) & 7) == 4)
        return 2;
    return 0x100 | (m->lvtpc & 0xff);
}
