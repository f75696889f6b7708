// SPDX-License-Identifier: MIT
/* The on-box LBR self-test's verdicts (see lbr_check.h).  Pure: runs in the guest and on the host.
 */
#include "lbr_check.h"

#include "lib/fmt.h"

#define CPUID_1_ECX_PDCM     (1u << 15)
#define CPUID_7_EDX_ARCH_LBR (1u << 19)
#define PERF_CAPS_LBR_FMT    0x3full
#define LBR_FMT_ARCH         0x3f /* "use CPUID 0x1C" (docs/lbr.md [U]) */

/* SDM Vol. 3B 17.9 (Nehalem .. Ivy Bridge: 16 entries, FROM bit 63 = mispredict), 17.10
 * (Haswell, Broadwell: + TSX flags in FROM 62:61), 17.12 (Skylake and later: 32 entries with
 * MSR_LBR_INFO_x); MSR addresses from Vol. 4 (MSR_LASTBRANCH_x_FROM_IP 680H, _TO_IP 6C0H,
 * MSR_LBR_INFO_x DC0H). */
static const struct lbrc_layout nhm = {"Nehalem..Ivy Bridge", 16, 3, 0x680, 0x6c0, 0};
static const struct lbrc_layout hsw = {"Haswell/Broadwell", 16, 4, 0x680, 0x6c0, 0};
static const struct lbrc_layout skl = {"Skylake..Tiger Lake", 32, 5, 0x680, 0x6c0, 0xdc0};

static const struct {
    uint8_t model;
    const struct lbrc_layout *lay;
} models[] = {
    {0x1a, &nhm}, {0x1e, &nhm}, {0x1f, &nhm}, {0x2e, &nhm}, {0x25, &nhm}, {0x2c, &nhm},
    {0x2f, &nhm}, {0x2a, &nhm}, {0x2d, &nhm}, {0x3a, &nhm}, {0x3e, &nhm}, /* NHM..IVB */
    {0x3c, &hsw}, {0x3f, &hsw}, {0x45, &hsw}, {0x46, &hsw}, {0x3d, &hsw}, {0x47, &hsw},
    {0x4f, &hsw}, {0x56, &hsw}, /* Haswell, Broadwell */
    {0x4e, &skl}, {0x5e, &skl}, {0x55, &skl}, {0x8e, &skl}, {0x9e, &skl}, {0xa5, &skl},
    {0xa6, &skl}, {0x66, &skl}, {0x7d, &skl}, {0x7e, &skl}, {0x6a, &skl}, {0x6c, &skl},
    {0x8c, &skl}, {0x8d, &skl}, {0xa7, &skl}, /* Skylake .. Ice Lake, Tiger Lake, Rocket Lake */
};

const struct lbrc_layout *lbrc_layout_of(uint32_t eax)
{
    /* display family / model (SDM Vol. 2A, CPUID leaf 1) */
    uint32_t fam = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
    if (fam == 0xf)
        fam += (eax >> 20) & 0xff;
    if (fam == 6 || fam == 0xf)
        model |= ((eax >> 16) & 0xf) << 4;
    if (fam != 6)
        return NULL;
    for (unsigned i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (models[i].model == model)
            return models[i].lay;
    return NULL;
}

enum lbrc_plan lbrc_legacy_plan(const struct lbrc_view *v, const struct lbrc_layout **lay,
                                char *why, size_t cap)
{
    *lay = NULL;
    /* IA32_PERF_CAPABILITIES exists iff CPUID.1:ECX.PDCM (SDM Vol. 4 table 2-2) */
    if (!(v->cpuid1_ecx & CPUID_1_ECX_PDCM)) {
        ptv_snprintf(why, cap, "no PDCM: no IA32_PERF_CAPABILITIES, LBR_FMT unknown");
        return LBRC_SKIP;
    }
    if (!v->perf_caps_ok) {
        ptv_snprintf(why, cap, "RDMSR IA32_PERF_CAPABILITIES faults");
        return LBRC_SKIP;
    }
    unsigned fmt = (unsigned)(v->perf_caps & PERF_CAPS_LBR_FMT);
    if (fmt == 0) {
        ptv_snprintf(why, cap, "LBR_FMT 0 (none on this CPU, or the VMM hides it)");
        return LBRC_SKIP;
    }
    if (fmt == LBR_FMT_ARCH) {
        ptv_snprintf(why, cap, "LBR_FMT 0x3f: architectural LBR instead");
        return LBRC_SKIP;
    }
    const struct lbrc_layout *l = lbrc_layout_of(v->cpuid1_eax);
    if (!l) {
        /* the VMM shows LBR_FMT only for the models of its own table (docs/lbr.md) */
        ptv_snprintf(why, cap, "LBR_FMT %u shown on CPUID.1:EAX %#x, a model not in this test", fmt,
                     v->cpuid1_eax);
        return LBRC_FAIL;
    }
    if (l->fmt != fmt) {
        ptv_snprintf(why, cap, "LBR_FMT %u shown, %s has format %u", fmt, l->name, l->fmt);
        return LBRC_FAIL;
    }
    *lay = l;
    ptv_snprintf(why, cap, "%s, %u entries, LBR_FMT %u", l->name, l->nr, fmt);
    return LBRC_RUN;
}

enum lbrc_plan lbrc_arch_plan(const struct lbrc_view *v, uint64_t *ctl, char *why, size_t cap)
{
    *ctl = 0;
    if (v->max_leaf < 7 || !(v->cpuid7_edx & CPUID_7_EDX_ARCH_LBR)) {
        ptv_snprintf(why, cap, "no arch LBR (CPUID.7:EDX[19] = 0)");
        return LBRC_SKIP;
    }
    if (v->max_leaf < 0x1c || !(v->leaf1c[0] & 0xff)) {
        ptv_snprintf(why, cap, "CPUID.7:EDX[19] = 1 but leaf 1CH lists no depth");
        return LBRC_FAIL;
    }
    /* IA32_LBR_CTL: LBREn; OS only where CPUID.1CH:EBX[0] (CPL filtering) says the bit exists
     * and then it must be set for ring 0 to record; all branch types where EBX[1] gives the
     * filter (SDM Vol. 3B 18.1.2.2 / ch. "Architectural Last Branch Records"; pt-facts F.2) */
    uint64_t c = 1;
    if (v->leaf1c[1] & 1)
        c |= 1ull << 1;
    if (v->leaf1c[1] & 2)
        c |= 0x7full << 16;
    *ctl = c;
    ptv_snprintf(why, cap, "arch LBR, depths %#x, LBR_CTL %#llx", v->leaf1c[0] & 0xff,
                 (unsigned long long)c);
    return LBRC_RUN;
}

static uint64_t sext(uint64_t v, unsigned top) /* sign-extend from bit top */
{
    unsigned sh = 63 - top;
    return (uint64_t)((int64_t)(v << sh) >> sh);
}

uint64_t lbrc_from_addr(const struct lbrc_stack *s, uint64_t raw)
{
    if (s->arch)
        return raw; /* arch LBR: FROM is the linear address, no flags */
    if (s->fmt == 3)
        return sext(raw, 62); /* bit 63 = mispredicted */
    if (s->fmt == 4 || s->fmt == 5)
        return sext(raw, 60); /* 63 mispred, 62 in TSX, 61 abort [I: as Linux reads fmt 5] */
    return raw;
}

static bool in_vmm(uint64_t a, uint64_t base, uint64_t size)
{
    return size && a >= base && a - base < size;
}

/* newest-first index i -> the entry it is in */
static unsigned slot(const struct lbrc_stack *s, unsigned i)
{
    return s->arch ? i : (unsigned)((s->tos + s->nr - i) % s->nr);
}

static int seq_index(const struct lbrc_seq *q, uint64_t from, uint64_t to)
{
    for (unsigned k = 0; k < q->n; k++)
        if (q->from[k] == from && q->to[k] == to)
            return (int)k;
    return -1;
}

bool lbrc_check(const struct lbrc_stack *s, const struct lbrc_seq *q, uint64_t vmm_base,
                uint64_t vmm_size, char *why, size_t cap)
{
    if (!s->nr || s->nr > LBRC_MAX || !q->n || q->n > LBRC_SEQ_MAX || q->n >= s->nr ||
        q->nexits > LBRC_EXITS) {
        ptv_snprintf(why, cap, "bad input: %u entries, %u branches", s->nr, q->n);
        return false;
    }
    if (!s->arch && s->tos >= s->nr) {
        ptv_snprintf(why, cap, "LBR_TOS %llu out of %u entries", (unsigned long long)s->tos, s->nr);
        return false;
    }
    /* 1. the VMM's own branches: root runs with LBR off (SDM Vol. 3C 28.5.1) */
    for (unsigned i = 0; i < s->nr; i++) {
        unsigned e = slot(s, i);
        uint64_t f = lbrc_from_addr(s, s->from[e]), t = s->to[e];
        if (in_vmm(f, vmm_base, vmm_size) || in_vmm(t, vmm_base, vmm_size)) {
            ptv_snprintf(why, cap, "lbr[%u] %#llx->%#llx: VMM address", i, (unsigned long long)f,
                         (unsigned long long)t);
            return false;
        }
    }
    /* 2. a VM exit recorded as a branch: a record from an exiting instruction (docs/lbr.md [U]) */
    for (unsigned i = 0; i < s->nr; i++) {
        unsigned e = slot(s, i);
        uint64_t f = lbrc_from_addr(s, s->from[e]);
        for (unsigned x = 0; x < q->nexits; x++)
            if (f == q->exit[x]) {
                ptv_snprintf(why, cap, "lbr[%u] from the %s at %#llx: exit recorded", i,
                             q->exit_name[x] ? q->exit_name[x] : "exit", (unsigned long long)f);
                return false;
            }
    }
    /* 3. the n newest records are the sequence, newest first */
    for (unsigned i = 0; i < q->n; i++) {
        unsigned e = slot(s, i), want = q->n - 1 - i;
        uint64_t f = lbrc_from_addr(s, s->from[e]), t = s->to[e];
        if (f == q->from[want] && t == q->to[want])
            continue;
        int k = seq_index(q, f, t);
        if (!f && !t)
            ptv_snprintf(why, cap, "lbr[%u] empty: branch %u not recorded", i, want);
        else if (k < 0)
            ptv_snprintf(why, cap, "lbr[%u] %#llx->%#llx: a branch not taken", i,
                         (unsigned long long)f, (unsigned long long)t);
        else
            ptv_snprintf(why, cap, "lbr[%u] is branch %d, not %u (order/TOS)", i, k, want);
        return false;
    }
    /* 4. nothing else: the guest zeroed every entry before LBR went on */
    for (unsigned i = q->n; i < s->nr; i++) {
        unsigned e = slot(s, i);
        if (s->from[e] || s->to[e]) {
            ptv_snprintf(why, cap, "lbr[%u] %#llx->%#llx: an extra record", i,
                         (unsigned long long)lbrc_from_addr(s, s->from[e]),
                         (unsigned long long)s->to[e]);
            return false;
        }
    }
    /* 5. legacy: LBR_TOS advanced once per record (SDM Vol. 3B 17.9.1, a ring of nr entries) */
    if (!s->arch && s->tos != (s->tos_before + q->n) % s->nr) {
        ptv_snprintf(why, cap, "LBR_TOS %llu, want %llu (%llu + %u)", (unsigned long long)s->tos,
                     (unsigned long long)((s->tos_before + q->n) % s->nr),
                     (unsigned long long)s->tos_before, q->n);
        return false;
    }
    ptv_snprintf(why, cap, "%u branches in order, %u exits unrecorded, no VMM address", q->n,
                 q->nexits);
    return true;
}
