/* SPDX-License-Identifier: MIT */
/*
 * System mode: the VMM's trace set-up and its ToPA ring (see pt_sys.h).  Sources: SDM Vol. 3C
 * ch. 33 (33.2.4 filtering, 33.2.7 ToPA, the RTIT MSR tables); docs/pt-facts.md B, C, D.
 */
#include "pt/pt_sys.h"

#include <stddef.h>

#include "lib/ptv_string.h"
#include "pt/rtit.h"

void pt_sys_cfg_from_config(const struct ptv_config *in, struct pt_sys_cfg *out)
{
    memset(out, 0, sizeof(*out));
    out->ring_size = in->trace_buf_size;
    out->wrap = in->trace_wrap != 0;
    out->filter = in->trace_filter;
    out->cr3 = in->trace_cr3;
    out->nranges = in->trace_nranges;
    for (unsigned i = 0; i < PT_MAX_ADDR_RANGES && i < PTV_CFG_TRACE_RANGES; i++) {
        out->range[i].lo = in->trace_range[i].lo;
        out->range[i].hi = in->trace_range[i].hi;
    }
    out->psb_period = in->psb_period;
}

void pt_sys_view(const struct pt_caps *host, struct pt_gcaps *g)
{
    unsigned ranges = pt_cap_num_ranges(host->leaf14);

    memset(g, 0, sizeof(*g));
    g->present = true;
    g->maxphyaddr = host->maxphyaddr ? host->maxphyaddr : 36;
    g->vaddr_bits = host->vaddr_bits ? host->vaddr_bits : 48;
    memcpy(g->leaf14, host->leaf14, sizeof(g->leaf14));
    if (!host->leaf14[0][PT_EAX]) { /* no subleaf 1: no ranges, no frequency bitmaps */
        memset(g->leaf14[1], 0, sizeof(g->leaf14[1]));
        return;
    }
    /* RTIT_CTL has ADDR0..3_CFG only (pt-facts B.2); ranges need IP filtering (C, EBX[2]) */
    if (ranges > PT_MAX_ADDR_RANGES)
        ranges = PT_MAX_ADDR_RANGES;
    if (!pt_cap(host->leaf14, PT_EBX, PT_CAP_EBX_IP_FILTER))
        ranges = 0;
    g->leaf14[1][PT_EAX] = (host->leaf14[1][PT_EAX] & ~7u) | ranges;
}

static bool pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static bool canonical(uint64_t a, unsigned bits)
{
    uint64_t top = a >> (bits - 1);
    return top == 0 || top == (~0ull >> (bits - 1));
}

const char *pt_sys_check(const struct pt_gcaps *g, const struct pt_sys_cfg *cfg)
{
    if (!g->present)
        return "no Intel PT";
    if (!pow2(cfg->ring_size) || cfg->ring_size < PTV_CFG_TRACE_BUF_MIN ||
        cfg->ring_size > PTV_CFG_TRACE_BUF_MAX)
        return "pt_buffer: not a power of two in 4K..1G";
    if (!pt_cap(g->leaf14, PT_ECX, PT_CAP_ECX_TOPA))
        return "CPUID.14.0:ECX[0]=0: no ToPA output";
    if (!pt_cap(g->leaf14, PT_ECX, PT_CAP_ECX_TOPA_MULTI) && cfg->ring_size != PT_SYS_REGION)
        return "CPUID.14.0:ECX[1]=0: single-entry ToPA only, pt_buffer must be 4K";
    if (!cfg->filter || (cfg->filter & ~PTV_CFG_TRACE_ALL))
        return "pt_filter: neither os nor user";
    if (cfg->cr3 && !pt_cap(g->leaf14, PT_EBX, PT_CAP_EBX_CR3_FILTER))
        return "pt_cr3: CPUID.14.0:EBX[0]=0, no CR3 filtering";
    if (cfg->cr3 & PTV_CFG_CR3_RSVD_MASK)
        return "pt_cr3: reserved bits (CR3_MATCH[4:0], bits above 51)";
    if (cfg->nranges > PT_MAX_ADDR_RANGES)
        return "pt_range: more than 4 ranges";
    if (cfg->nranges > pt_cap_num_ranges(g->leaf14))
        return pt_cap_num_ranges(g->leaf14)
                   ? "pt_range: more ranges than CPUID.14.1:EAX[2:0] address ranges"
                   : "pt_range: the CPU has no IP filtering (CPUID.14.0:EBX[2] / 14.1:EAX[2:0])";
    for (unsigned i = 0; i < cfg->nranges; i++) {
        if (cfg->range[i].lo > cfg->range[i].hi)
            return "pt_range: a range ends below its start";
        if (!canonical(cfg->range[i].lo, g->vaddr_bits) ||
            !canonical(cfg->range[i].hi, g->vaddr_bits))
            return "pt_range: a bound is not canonical";
    }
    if (cfg->psb_period && !pow2(cfg->psb_period))
        return "psb_period: not a power of two";
    /* MTCFreq / CycThresh / PSBFreq must be encodings CPUID lists, even 0 (pt_ctl_policy.c) */
    if (pt_cap(g->leaf14, PT_EBX, PT_CAP_EBX_MTC) && !pt_cap_mtc_periods(g->leaf14))
        return "CPUID.14.0:EBX[3]=1 but no MTCFreq encoding in CPUID.14.1:EAX[31:16]";
    if (pt_cap(g->leaf14, PT_EBX, PT_CAP_EBX_PSB_CYC) &&
        (!pt_cap_cyc_thresholds(g->leaf14) || !pt_cap_psb_periods(g->leaf14)))
        return "CPUID.14.0:EBX[1]=1 but no CycThresh / PSBFreq encoding in CPUID.14.1:EBX";
    return NULL;
}

/* The encoding n of the field whose CPUID bitmap is `allowed` nearest below `want` (n <= want),
 * or the smallest allowed one; -1 when the bitmap is empty. */
static int pick(uint32_t allowed, unsigned want)
{
    for (int n = (int)(want < 15 ? want : 15); n >= 0; n--)
        if (allowed & (1u << n))
            return n;
    for (int n = 0; n < 16; n++)
        if (allowed & (1u << n))
            return n;
    return -1;
}

/* PSBFreq n: a PSB every 2^(n + 11) bytes of output (SDM 33.2.8.2, IA32_RTIT_CTL[27:24]). */
static unsigned psb_freq_want(uint32_t period)
{
    unsigned n = 0;

    while (period > (2048u << n) && n < 15)
        n++;
    return n;
}

static uint64_t trace_ctl(const struct pt_gcaps *g, const struct pt_sys_cfg *cfg)
{
    const uint32_t(*l)[4] = g->leaf14;
    uint64_t ctl = RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_TSC_EN;
    int n;

    if (cfg->filter & PTV_TRACE_OS)
        ctl |= RTIT_CTL_OS;
    if (cfg->filter & PTV_TRACE_USER)
        ctl |= RTIT_CTL_USR;
    if (cfg->cr3)
        ctl |= RTIT_CTL_CR3EN;
    for (unsigned i = 0; i < cfg->nranges; i++)
        ctl |= (uint64_t)RTIT_ADDR_CFG_FILTER << RTIT_CTL_ADDR_SHIFT(i);
    if (pt_cap(l, PT_EBX, PT_CAP_EBX_MTC) &&
        (n = pick(pt_cap_mtc_periods(l), PT_SYS_MTC_FREQ_WANT)) >= 0)
        ctl |= RTIT_CTL_MTC_EN | (uint64_t)n << RTIT_CTL_MTC_RANGE_SHIFT;
    if (pt_cap(l, PT_EBX, PT_CAP_EBX_PSB_CYC)) {
        if ((n = pick(pt_cap_cyc_thresholds(l), PT_SYS_CYC_THRESH_MAX)) >= 0)
            ctl |= RTIT_CTL_CYCLEACC | (uint64_t)n << RTIT_CTL_CYC_THRESH_SHIFT;
        /* PSBFreq is checked against the bitmap whatever it is: always one listed */
        if ((n = pick(pt_cap_psb_periods(l),
                      cfg->psb_period ? psb_freq_want(cfg->psb_period) : 0)) >= 0)
            ctl |= (uint64_t)n << RTIT_CTL_PSB_FREQ_SHIFT;
    }
    return ctl;
}

const char *pt_sys_program(const struct pt_gcaps *g, const struct pt_sys_cfg *cfg, uint64_t base,
                           uint64_t mask, struct pt_msr_file *out)
{
    struct pt_msr_file f;
    struct pt_msr_result res;
    const char *why = pt_sys_check(g, cfg);

    if (why)
        return why;
    pt_msr_file_init(&f);
    /* TraceEn = 0 while the others are written (they lock at TraceEn = 1, pt-facts B.3) */
    if (pt_msr_write(g, &f, MSR_IA32_RTIT_OUTPUT_BASE, base, &res) != PT_MSR_OK ||
        pt_msr_write(g, &f, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, mask, &res) != PT_MSR_OK)
        return "ring address refused by the RTIT MSR rules";
    if (pt_msr_present(g, MSR_IA32_RTIT_CR3_MATCH) &&
        pt_msr_write(g, &f, MSR_IA32_RTIT_CR3_MATCH, cfg->cr3, &res) != PT_MSR_OK)
        return "pt_cr3 refused by the RTIT MSR rules (CR3_MATCH)";
    for (unsigned i = 0; i < cfg->nranges; i++)
        if (pt_msr_write(g, &f, MSR_IA32_RTIT_ADDR_A(i), cfg->range[i].lo, &res) != PT_MSR_OK ||
            pt_msr_write(g, &f, MSR_IA32_RTIT_ADDR_B(i), cfg->range[i].hi, &res) != PT_MSR_OK)
            return "pt_range refused by the RTIT MSR rules (ADDRn_A/B)";
    if (pt_msr_write(g, &f, MSR_IA32_RTIT_CTL, trace_ctl(g, cfg), &res) != PT_MSR_OK)
        return res.reason ? res.reason : "RTIT_CTL refused by the RTIT MSR rules";
    *out = f;
    return NULL;
}

/* --- the ring --- */

static uint64_t *va_of(const struct pt_sys_ring *r, uint64_t hpa)
{
    return (uint64_t *)(uintptr_t)(hpa + r->delta);
}

static uint64_t table_hpa(const struct pt_sys_ring *r, uint32_t t)
{
    return r->dir[t / PT_SYS_DIR_PER_PAGE][t % PT_SYS_DIR_PER_PAGE];
}

static uint32_t regions_in(const struct pt_sys_ring *r, uint32_t t)
{
    return t + 1 < r->ntables ? PT_SYS_TABLE_REGIONS
                              : r->nregions - (r->ntables - 1) * PT_SYS_TABLE_REGIONS;
}

/* A page of the ring; its va must sit at the ring's one va - hpa distance. */
static void *ring_page(struct pt_sys_ring *r, const struct pt_page_alloc *a, bool first,
                       uint64_t *hpa, const char **why)
{
    void *va = a->alloc(a->ctx, hpa);

    if (!va) {
        *why = "VMM pool too small for pt_buffer (vmm_pool)";
        return NULL;
    }
    if (first)
        r->delta = (uint64_t)(uintptr_t)va - *hpa;
    if ((uint64_t)(uintptr_t)va - *hpa != r->delta || (*hpa & (PT_PAGE_SIZE - 1))) {
        a->free(a->ctx, va, *hpa);
        *why = "VMM pages are not one linear map";
        return NULL;
    }
    return va;
}

void pt_sys_ring_free(struct pt_sys_ring *r, const struct pt_page_alloc *a)
{
    for (uint32_t t = 0; t < r->ntables; t++) {
        uint64_t th = table_hpa(r, t);
        uint64_t *tv;
        if (!th)
            continue;
        tv = va_of(r, th);
        for (uint32_t e = 0; e < PT_SYS_TABLE_REGIONS; e++) {
            uint64_t rh = tv[e] & TOPA_BASE_MASK(52);
            if (!tv[e] || (tv[e] & TOPA_END))
                break;
            a->free(a->ctx, va_of(r, rh), rh);
        }
        a->free(a->ctx, tv, th);
    }
    for (unsigned d = 0; d < PT_SYS_DIR_PAGES; d++)
        if (r->dir[d])
            a->free(a->ctx, r->dir[d], r->dir_hpa[d]);
    memset(r, 0, sizeof(*r));
}

int pt_sys_ring_build(struct pt_sys_ring *r, uint64_t size, bool wrap,
                      const struct pt_page_alloc *a, const char **why)
{
    bool first = true;
    uint64_t hpa;

    memset(r, 0, sizeof(*r));
    if (!pow2(size) || size < PT_SYS_REGION || size > PTV_CFG_TRACE_BUF_MAX) {
        *why = "pt_buffer: not a power of two in 4K..1G";
        return -1;
    }
    r->size = size;
    r->nregions = (uint32_t)(size / PT_SYS_REGION);
    r->ntables = (r->nregions + PT_SYS_TABLE_REGIONS - 1) / PT_SYS_TABLE_REGIONS;
    for (unsigned d = 0; d * PT_SYS_DIR_PER_PAGE < r->ntables; d++) {
        if (!(r->dir[d] = ring_page(r, a, first, &r->dir_hpa[d], why)))
            goto fail;
        first = false;
    }
    for (uint32_t t = 0; t < r->ntables; t++) {
        uint64_t *tv = ring_page(r, a, false, &hpa, why);
        if (!tv)
            goto fail;
        r->dir[t / PT_SYS_DIR_PER_PAGE][t % PT_SYS_DIR_PER_PAGE] = hpa;
        for (uint32_t e = 0; e < regions_in(r, t); e++) {
            if (!ring_page(r, a, false, &hpa, why))
                goto fail;
            tv[e] = hpa; /* Size = 0 (4 KiB), no INT, no STOP */
        }
    }
    /* END of every table to the next one, the last back to the first (pt-facts D.1, D.3) */
    for (uint32_t t = 0; t < r->ntables; t++)
        va_of(r, table_hpa(r, t))[regions_in(r, t)] =
            table_hpa(r, t + 1 < r->ntables ? t + 1 : 0) | TOPA_END;
    pt_sys_ring_set_wrap(r, wrap);
    return 0;
fail:
    pt_sys_ring_free(r, a);
    return -1;
}

void pt_sys_ring_set_wrap(struct pt_sys_ring *r, bool wrap)
{
    uint32_t t = r->ntables - 1;
    uint64_t *last = &va_of(r, table_hpa(r, t))[regions_in(r, t) - 1];

    r->wrap = wrap;
    *last = wrap ? *last & ~TOPA_STOP : *last | TOPA_STOP;
}

uint64_t pt_sys_ring_base(const struct pt_sys_ring *r)
{
    return table_hpa(r, 0);
}

bool pt_sys_ring_pos(struct pt_sys_ring *r, uint64_t base, uint64_t mask, uint64_t *pos)
{
    uint32_t idx = (uint32_t)PTV_FIELD(mask, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
    uint64_t off = mask >> RTIT_MASK_OUTPUT_OFFSET_SHIFT;
    uint32_t t = r->hint;

    /* the CPU moves forward: the same table as last time, or the next one, almost always */
    if (t >= r->ntables || table_hpa(r, t) != base) {
        t = t + 1 < r->ntables ? t + 1 : 0;
        if (table_hpa(r, t) != base)
            for (t = 0; t < r->ntables && table_hpa(r, t) != base; t++)
                ;
    }
    if (t >= r->ntables || idx > regions_in(r, t) || off > PT_SYS_REGION ||
        (off == PT_SYS_REGION && (r->wrap || t + 1 != r->ntables || idx + 1 != regions_in(r, t))) ||
        (idx == regions_in(r, t) && off))
        return false; /* offset = size only in the full STOP region; END has no offset */
    r->hint = t;
    /* an END entry (idx = regions_in) is the first byte of the next table: same number */
    *pos = ((uint64_t)t * PT_SYS_TABLE_REGIONS + idx) * PT_SYS_REGION + off;
    if (*pos == r->size && r->wrap)
        *pos = 0;
    return true;
}

void pt_sys_ring_copy(const struct pt_sys_ring *r, uint64_t from, void *buf, uint64_t len)
{
    uint8_t *out = buf;

    from &= r->size - 1;
    while (len) {
        uint32_t reg = (uint32_t)(from / PT_SYS_REGION);
        uint64_t in = from % PT_SYS_REGION, n = PT_SYS_REGION - in;
        uint64_t rh =
            va_of(r, table_hpa(r, reg / PT_SYS_TABLE_REGIONS))[reg % PT_SYS_TABLE_REGIONS] &
            TOPA_BASE_MASK(52);
        if (n > len)
            n = len;
        memcpy(out, (const uint8_t *)va_of(r, rh) + in, n);
        out += n;
        len -= n;
        from = (from + n) & (r->size - 1);
    }
}
