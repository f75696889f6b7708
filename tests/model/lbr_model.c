/* SPDX-License-Identifier: MIT */
/* The LBR hardware model (see lbr_model.h).  Test code only. */
#include "model/lbr_model.h"
#include <string.h>

#define M_DEBUGCTL  0x1d9
#define M_SELECT    0x1c8
#define M_TOS       0x1c9
#define M_PERF_CAPS 0x345
#define M_LBR_CTL   0x14ce
#define M_LBR_DEPTH 0x14cf
#define M_AFROM     0x1500
#define M_ATO       0x1600
#define M_AINFO     0x1200
#define BIT(n)      (1ull << (n))

/* --- the MSR rules --- */

/*
 * IA32_DEBUGCTL, bit by bit, with the condition under which the SDM's MSR table (Vol. 4
 * table 2-2) lists it; every bit not listed is reserved.
 */
uint64_t lbrm_debugctl_writable(const struct lbrm_cpu *c)
{
    const struct {
        unsigned bit;
        bool present;
    } bits[] = {
        {0, true},                            /* LBR */
        {1, true},                            /* BTF */
        {2, c->bus_lock},                     /* BUS_LOCK_DETECT: CPUID.(7,0):ECX[24] */
        {6, true},                            /* TR */
        {7, c->ds && !c->bts_unavail},        /* BTS */
        {8, c->ds && !c->bts_unavail},        /* BTINT */
        {9, c->ds_cpl},                       /* BTS_OFF_OS */
        {10, c->ds_cpl},                      /* BTS_OFF_USR */
        {11, c->pdcm && c->pmu_version >= 2}, /* FREEZE_LBRS_ON_PMI */
        {12, c->pdcm && c->pmu_version >= 2}, /* FREEZE_PERFMON_ON_PMI */
        {14, c->freeze_smm},                  /* FREEZE_WHILE_SMM: PERF_CAPABILITIES[12] */
        {15, c->rtm},                         /* RTM_DEBUG */
    };
    uint64_t w = 0;
    for (unsigned i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
        if (bits[i].present)
            w |= BIT(bits[i].bit);
    return w;
}

bool lbrm_select_ok(const struct lbrm_cpu *c, uint64_t val)
{
    unsigned width = c->call_stack ? 10 : 9; /* EN_CALL_STACK is bit 9 */
    return (val >> width) == 0;
}

bool lbrm_tos_ok(const struct lbrm_cpu *c, uint64_t val)
{
    for (unsigned i = 0; i < c->nr; i++)
        if (val == i)
            return true;
    return false;
}

bool lbrm_ctl_ok(const struct lbrm_cpu *c, uint64_t val)
{
    uint64_t ok = BIT(0); /* LBREn */
    if (c->leaf1c[1] & 1)
        ok |= BIT(1) | BIT(2); /* OS, USR: CPL filtering */
    if (c->leaf1c[1] & 2)
        for (unsigned b = 16; b <= 22; b++)
            ok |= BIT(b); /* branch-type filter */
    if (c->leaf1c[1] & 4)
        ok |= BIT(3); /* CALL_STACK */
    return !(val & ~ok);
}

bool lbrm_depth_ok(const struct lbrm_cpu *c, uint64_t val)
{
    for (unsigned n = 0; n < 8; n++)
        if ((c->leaf1c[0] & BIT(n)) && val == 8 * (n + 1))
            return true;
    return false;
}

static unsigned max_depth(const struct lbrm_cpu *c)
{
    unsigned d = 0;
    for (unsigned n = 0; n < 8; n++)
        if (c->leaf1c[0] & BIT(n))
            d = 8 * (n + 1);
    return d;
}

void lbrm_init(struct lbrm *m, const struct lbrm_cpu *c)
{
    memset(m, 0, sizeof(*m));
    m->c = *c;
    m->depth = max_depth(c);
}

static bool idx(uint32_t msr, uint32_t base, unsigned n, unsigned *i)
{
    if (!base || msr < base || msr >= base + n)
        return false;
    *i = msr - base;
    return true;
}

/* the MSR's storage, or NULL if this CPU has no such LBR MSR */
static uint64_t *stack_slot(struct lbrm *m, uint32_t msr)
{
    unsigned i;
    if (m->c.legacy) {
        if (idx(msr, m->c.from, m->c.nr, &i))
            return &m->from[i];
        if (idx(msr, m->c.to, m->c.nr, &i))
            return &m->to[i];
        if (idx(msr, m->c.info, m->c.nr, &i))
            return &m->info[i];
    }
    /* arch LBR entries at or beyond IA32_LBR_DEPTH #GP [U] */
    if (m->c.arch) {
        if (idx(msr, M_AFROM, (unsigned)m->depth, &i))
            return &m->afrom[i];
        if (idx(msr, M_ATO, (unsigned)m->depth, &i))
            return &m->ato[i];
        if (idx(msr, M_AINFO, (unsigned)m->depth, &i))
            return &m->ainfo[i];
    }
    return NULL;
}

int lbrm_rdmsr(const struct lbrm *m, uint32_t msr, uint64_t *val)
{
    const struct lbrm_cpu *c = &m->c;
    switch (msr) {
    case M_DEBUGCTL:
        if (!c->has_debugctl)
            return -1;
        *val = m->debugctl;
        return 0;
    case M_PERF_CAPS:
        if (!c->perf_caps_ok)
            return -1;
        *val = c->perf_caps;
        return 0;
    case M_SELECT:
    case M_TOS:
        if (!c->legacy)
            return -1;
        *val = msr == M_SELECT ? m->select : m->tos;
        return 0;
    case M_LBR_CTL:
    case M_LBR_DEPTH:
        if (!c->arch)
            return -1;
        *val = msr == M_LBR_CTL ? m->ctl : m->depth;
        return 0;
    case LBRM_MSR_GLOBAL_STATUS:
        if (c->pmu_version < 2)
            return -1;
        *val = m->global_status;
        return 0;
    case LBRM_MSR_GLOBAL_OVF_CTRL:
        if (c->pmu_version < 2)
            return -1;
        *val = 0;
        return 0;
    case LBRM_MSR_XSS:
        *val = m->xss;
        return 0;
    }
    uint64_t *s = stack_slot((struct lbrm *)m, msr);
    if (!s)
        return -1;
    *val = *s;
    return 0;
}

int lbrm_wrmsr(struct lbrm *m, uint32_t msr, uint64_t val)
{
    const struct lbrm_cpu *c = &m->c;
    switch (msr) {
    case M_DEBUGCTL:
        if (!c->has_debugctl || (val & ~lbrm_debugctl_writable(c)))
            return -1;
        m->debugctl = val;
        return 0;
    case M_PERF_CAPS:
        return -1; /* read-only */
    case M_SELECT:
        if (!c->legacy || !lbrm_select_ok(c, val))
            return -1;
        m->select = val;
        return 0;
    case M_TOS:
        if (!c->legacy || !lbrm_tos_ok(c, val))
            return -1;
        m->tos = val;
        return 0;
    case M_LBR_CTL:
        if (!c->arch || !lbrm_ctl_ok(c, val))
            return -1;
        m->ctl = val;
        return 0;
    case M_LBR_DEPTH:
        if (!c->arch || !lbrm_depth_ok(c, val))
            return -1;
        /* a write of the depth resets every entry (pt-facts F.2) */
        memset(m->afrom, 0, sizeof(m->afrom));
        memset(m->ato, 0, sizeof(m->ato));
        memset(m->ainfo, 0, sizeof(m->ainfo));
        m->depth = val;
        return 0;
    case LBRM_MSR_GLOBAL_STATUS:
        return -1; /* read-only */
    case LBRM_MSR_GLOBAL_OVF_CTRL:
        if (c->pmu_version < 2)
            return -1;
        if (val & LBRM_LBR_FRZ) /* writing 1 clears the status bit (SDM Vol. 3B 17.4.7) */
            m->global_status &= ~LBRM_LBR_FRZ;
        return 0;
    case LBRM_MSR_XSS:
        if (val & ~c->xss_supported)
            return -1;
        m->xss = val;
        return 0;
    }
    uint64_t *s = stack_slot(m, msr);
    if (!s)
        return -1;
    *s = val; /* entries are writable (context switch restore) [I: any value accepted] */
    return 0;
}

/* --- recording --- */

static uint64_t canon(uint64_t a)
{
    return (uint64_t)((int64_t)(a << 16) >> 16);
}

static uint64_t cycles_since(struct lbrm *m)
{
    uint64_t d = m->now - m->last;
    m->last = m->now;
    return d > 0xffff ? 0xffff : d; /* saturating 16-bit count */
}

/* model-specific LBR: LBR_SELECT bit that suppresses each class */
static const unsigned sel_bit[LBRM_NTYPES] = {
    [LBRM_JCC] = 2,     [LBRM_REL_CALL] = 3, [LBRM_IND_CALL] = 4, [LBRM_RET] = 5,
    [LBRM_IND_JMP] = 6, [LBRM_REL_JMP] = 7,  [LBRM_FAR] = 8,      [LBRM_EVENT] = 8,
};

static void legacy_record(struct lbrm *m, uint64_t from, uint64_t to, enum lbrm_br t, unsigned cpl,
                          bool mispred)
{
    if (!m->c.legacy || !(m->debugctl & BIT(0)) || m->c.debugctl_inert ||
        (m->global_status & LBRM_LBR_FRZ))
        return;
    if (m->select & BIT(sel_bit[t]))
        return;
    if ((cpl == 0 && (m->select & BIT(0))) || (cpl > 0 && (m->select & BIT(1))))
        return;
    unsigned nr = m->c.nr;
    if (m->c.call_stack && (m->select & BIT(9)) && t == LBRM_RET) {
        m->tos = (m->tos + nr - 1) % nr; /* a return pops its call (SDM Vol. 3B 17.11) [I] */
        return;
    }
    m->tos = (m->tos + 1) % nr;
    uint64_t f = canon(from);
    if (m->c.fmt == 3) /* FROM bit 63 = mispredicted, 62:48 sign extension */
        f = (f & ~BIT(63)) | (mispred ? BIT(63) : 0);
    else if (m->c.fmt == 4) /* + bits 62/61 TSX flags (0 here: no transactions modelled) */
        f = (f & (BIT(61) - 1)) | (mispred ? BIT(63) : 0);
    m->from[m->tos] = f;
    m->to[m->tos] = canon(to);
    if (m->c.info)
        m->info[m->tos] = (mispred ? BIT(63) : 0) | cycles_since(m);
    m->records++;
}

static const unsigned ctl_bit[LBRM_NTYPES] = {
    [LBRM_JCC] = 16,      [LBRM_IND_JMP] = 17, [LBRM_REL_JMP] = 18, [LBRM_IND_CALL] = 19,
    [LBRM_REL_CALL] = 20, [LBRM_RET] = 21,     [LBRM_FAR] = 22,     [LBRM_EVENT] = 22,
};
/* LBR_INFO.BR_TYPE encodings: COND 0, JMP indirect 1, JMP direct 2, CALL indirect 3,
 * CALL direct 4, RET 5, other 8 */
static const unsigned br_type[LBRM_NTYPES] = {
    [LBRM_JCC] = 0,      [LBRM_IND_JMP] = 1, [LBRM_REL_JMP] = 2, [LBRM_IND_CALL] = 3,
    [LBRM_REL_CALL] = 4, [LBRM_RET] = 5,     [LBRM_FAR] = 8,     [LBRM_EVENT] = 8,
};

static void arch_record(struct lbrm *m, uint64_t from, uint64_t to, enum lbrm_br t, unsigned cpl,
                        bool mispred)
{
    const uint32_t *l = m->c.leaf1c;
    if (!m->c.arch || !(m->ctl & BIT(0)) || (m->global_status & LBRM_LBR_FRZ))
        return;
    if ((l[1] & 1) && !(m->ctl & BIT(cpl == 0 ? 1 : 2)))
        return; /* OS records branches ending at CPL 0, USR the others */
    if ((l[1] & 2) && !(m->ctl & BIT(ctl_bit[t])))
        return;
    unsigned d = (unsigned)m->depth;
    if ((m->ctl & BIT(3)) && t == LBRM_RET) { /* call stack: the return pops [I] */
        for (unsigned i = 0; i + 1 < d; i++) {
            m->afrom[i] = m->afrom[i + 1];
            m->ato[i] = m->ato[i + 1];
            m->ainfo[i] = m->ainfo[i + 1];
        }
        m->afrom[d - 1] = m->ato[d - 1] = m->ainfo[d - 1] = 0;
        return;
    }
    for (unsigned i = d - 1; i > 0; i--) { /* entry 0 is the newest */
        m->afrom[i] = m->afrom[i - 1];
        m->ato[i] = m->ato[i - 1];
        m->ainfo[i] = m->ainfo[i - 1];
    }
    uint64_t info = 0, cyc = cycles_since(m);
    if ((l[2] & 1) && mispred)
        info |= BIT(63);
    if (l[2] & 2)
        info |= BIT(60) | cyc;
    if (l[2] & 4)
        info |= (uint64_t)br_type[t] << 56;
    m->afrom[0] = canon(from);
    m->ato[0] = canon(to);
    m->ainfo[0] = info;
    m->records++;
}

void lbrm_branch(struct lbrm *m, uint64_t from, uint64_t to, enum lbrm_br t, unsigned to_cpl,
                 bool mispred)
{
    legacy_record(m, from, to, t, to_cpl, mispred);
    arch_record(m, from, to, t, to_cpl, mispred);
}

void lbrm_tick(struct lbrm *m, uint64_t clocks)
{
    m->now += clocks;
}

void lbrm_pmi(struct lbrm *m)
{
    if (!(m->debugctl & BIT(11)) || m->c.debugctl_inert) /* FREEZE_LBRS_ON_PMI */
        return;
    /* PMU v4 and arch LBR: LBR_Frz, DEBUGCTL untouched; before v4 the LBR flag is cleared
     * (SDM Vol. 3B 17.4.7, table 17-17) */
    if (m->c.arch || m->c.pmu_version >= 4)
        m->global_status |= LBRM_LBR_FRZ;
    else
        m->debugctl &= ~BIT(0);
}

void lbrm_db(struct lbrm *m)
{
    if (!m->c.debugctl_inert)
        m->debugctl &= ~BIT(0); /* SDM Vol. 3B 17.4.2: #DB clears the LBR flag */
    m->ctl &= ~BIT(0);          /* arch LBR: LBREn likewise [I] */
}

void lbrm_cpuid(const struct lbrm *m, uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    r[0] = r[1] = r[2] = r[3] = 0;
    bool xss_lbr = m->c.arch && (m->c.xss_supported & BIT(15));
    if (leaf == 7 && sub == 0)
        r[3] = m->c.arch ? BIT(19) : 0;
    else if (leaf == 0x1c && m->c.arch) {
        r[0] = m->c.leaf1c[0];
        r[1] = m->c.leaf1c[1];
        r[2] = m->c.leaf1c[2];
    } else if (leaf == 0xd && sub == 1) {
        r[2] = (uint32_t)m->c.xss_supported;
        r[3] = (uint32_t)(m->c.xss_supported >> 32);
    } else if (leaf == 0xd && sub == 15 && xss_lbr) {
        r[0] = 8 + 24 * (unsigned)max_depth(&m->c); /* size: CTL/DEPTH + 3 MSRs per entry */
        r[2] = 1;                                   /* a supervisor (IA32_XSS) component */
    }
}
