/* SPDX-License-Identifier: MIT */
/* Guest LBR policy: decision, hardware rules, the answers the VMM gives (see lbr_policy.h). */
#include "lbr/lbr_policy.h"
#include "lib/fmt.h"

/*
 * Model-specific LBR stacks ptvisor knows, by family 6 model (SDM Vol. 3B 17.6-17.12: the LBR
 * stack of each microarchitecture; model numbers as Linux's intel_pmu_init() lists them).
 *   Nehalem .. Ivy Bridge: 16 entries at 0x680/0x6c0, FROM bit 63 = mispredicted (format 3),
 *     no call-stack mode (LBR_SELECT bits 8:0).
 *   Haswell, Broadwell: 16 entries, format 4 (+ TSX flags in FROM), call-stack mode (bit 9).
 *   Skylake and its successors up to Ice Lake / Tiger Lake / Rocket Lake (client and server):
 *     32 entries, FROM 0x680, TO 0x6c0, LBR_INFO 0xdc0 (format 5), call-stack mode.
 * Atom-class cores (8 entries at 0x40/0x60, Goldmont's 32 with format 6) and Core 2 (4 at
 * 0x40/0x60) are not listed: their LBR is hidden with the reason in the boot log.
 */
static const struct lbr_layout lay_nhm = {
    "Nehalem..Ivy Bridge", 16, LBR_FORMAT_EIP_FLAGS, MSR_LBR_NHM_FROM, MSR_LBR_NHM_TO, 0, false};
static const struct lbr_layout lay_hsw = {
    "Haswell/Broadwell", 16, LBR_FORMAT_EIP_FLAGS2, MSR_LBR_NHM_FROM, MSR_LBR_NHM_TO, 0, true};
static const struct lbr_layout lay_skl = {
    "Skylake..Tiger Lake", 32,  LBR_FORMAT_INFO, MSR_LBR_NHM_FROM, MSR_LBR_NHM_TO,
    MSR_LBR_INFO_0,        true};

static const struct {
    uint8_t model;
    const struct lbr_layout *lay;
} lbr_models[] = {
    {0x1a, &lay_nhm}, {0x1e, &lay_nhm}, {0x1f, &lay_nhm}, {0x2e, &lay_nhm}, /* Nehalem */
    {0x25, &lay_nhm}, {0x2c, &lay_nhm}, {0x2f, &lay_nhm},                   /* Westmere */
    {0x2a, &lay_nhm}, {0x2d, &lay_nhm}, {0x3a, &lay_nhm}, {0x3e, &lay_nhm}, /* SNB, IVB */
    {0x3c, &lay_hsw}, {0x3f, &lay_hsw}, {0x45, &lay_hsw}, {0x46, &lay_hsw}, /* Haswell */
    {0x3d, &lay_hsw}, {0x47, &lay_hsw}, {0x4f, &lay_hsw}, {0x56, &lay_hsw}, /* Broadwell */
    {0x4e, &lay_skl}, {0x5e, &lay_skl}, {0x55, &lay_skl},                   /* Skylake, SKX */
    {0x8e, &lay_skl}, {0x9e, &lay_skl}, {0xa5, &lay_skl}, {0xa6, &lay_skl}, /* KBL/CFL, CML */
    {0x66, &lay_skl}, {0x7d, &lay_skl}, {0x7e, &lay_skl}, {0x6a, &lay_skl}, /* CNL, ICL */
    {0x6c, &lay_skl}, {0x8c, &lay_skl}, {0x8d, &lay_skl}, {0xa7, &lay_skl}, /* ICX, TGL, RKL */
};

const struct lbr_layout *lbr_layout_of(uint32_t family, uint32_t model)
{
    if (family != 6)
        return NULL;
    for (unsigned i = 0; i < sizeof(lbr_models) / sizeof(lbr_models[0]); i++)
        if (lbr_models[i].model == model)
            return lbr_models[i].lay;
    return NULL;
}

/*
 * IA32_DEBUGCTL bits this CPU lets software set; every other bit is reserved and a WRMSR with
 * it #GPs (SDM Vol. 4 table 2-2, IA32_DEBUGCTL, and Vol. 3B 17.4.1):
 *   LBR (0), BTF (1), TR (6): every family 6 processor;
 *   BUS_LOCK_DETECT (2): CPUID.(7,0):ECX[24];
 *   BTS (7), BTINT (8): the DS feature, CPUID.1:EDX[21], and BTS not marked unavailable in
 *     IA32_MISC_ENABLE[11] [I: the MSR table gives no other condition];
 *   BTS_OFF_OS (9), BTS_OFF_USR (10): CPL-qualified DS, CPUID.1:ECX[4];
 *   FREEZE_LBRS_ON_PMI (11), FREEZE_PERFMON_ON_PMI (12): CPUID.1:ECX[15] (PDCM) and
 *     architectural PMU version > 1;
 *   FREEZE_WHILE_SMM (14): IA32_PERF_CAPABILITIES[12];
 *   RTM_DEBUG (15): RTM, CPUID.(7,0):EBX[11].
 * Bit 13 (ENABLE_UNCORE_PMI) exists on model 06_1AH only; it is treated as reserved here.
 */
uint64_t lbr_debugctl_valid(const struct lbr_host *h)
{
    uint64_t v = DEBUGCTLMSR_LBR | DEBUGCTLMSR_BTF | DEBUGCTLMSR_TR;
    if (h->cpuid7_ecx & CPUID_7_ECX_BUS_LOCK_DETECT)
        v |= DEBUGCTLMSR_BUS_LOCK_DETECT;
    if ((h->cpuid1_edx & CPUID_1_EDX_DS) &&
        !(h->misc_enable_ok && (h->misc_enable & MISC_ENABLE_BTS_UNAVAIL)))
        v |= DEBUGCTLMSR_BTS | DEBUGCTLMSR_BTINT;
    if (h->cpuid1_ecx & CPUID_1_ECX_DS_CPL)
        v |= DEBUGCTLMSR_BTS_OFF_OS | DEBUGCTLMSR_BTS_OFF_USR;
    if ((h->cpuid1_ecx & CPUID_1_ECX_PDCM) && h->pmu_version > 1)
        v |= DEBUGCTLMSR_FREEZE_LBRS_ON_PMI | DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI;
    if (h->perf_caps_ok && (h->perf_caps & PERF_CAP_FREEZE_WHILE_SMM))
        v |= DEBUGCTLMSR_FREEZE_IN_SMM;
    if (h->cpuid7_ebx & CPUID_7_EBX_RTM)
        v |= DEBUGCTLMSR_RTM_DEBUG;
    return v;
}

/* MSR_LBR_SELECT: bits 8:0 filter, bit 9 EN_CALL_STACK where the core has it, 63:10 reserved
 * (SDM Vol. 3B table 17-13 / 17-16; Vol. 4 "MSR_LBR_SELECT") */
bool lbr_select_ok(const struct lbr_layout *l, uint64_t val)
{
    uint64_t ok = 0x1ff | (l->call_stack ? LBR_SEL_EN_CALL_STACK : 0);
    return !(val & ~ok);
}

/* MSR_LASTBRANCH_TOS: an index into the stack (bits 3:0 for 16 entries, 4:0 for 32); the
 * others reserved (SDM Vol. 4, "MSR_LASTBRANCH_TOS ... R/W") [I: reserved bits #GP] */
bool lbr_tos_ok(const struct lbr_layout *l, uint64_t val)
{
    return val < l->nr;
}

/*
 * IA32_LBR_CTL (pt-facts F.2): bits outside LBREn, OS, USR, CALL_STACK and the branch-type
 * filter 22:16 are reserved; OS/USR need CPL filtering (CPUID.1CH:EBX[0]), the filter needs
 * branch filtering (EBX[1]), CALL_STACK needs call-stack mode (EBX[2]) (the arch-LBR VMX series
 * KVM-ARCHLBR checks exactly these).
 */
bool arch_lbr_ctl_ok(const uint32_t leaf1c[3], uint64_t val)
{
    uint32_t ebx = leaf1c[1];
    if (val & ~ARCH_LBR_CTL_MASK)
        return false;
    if ((val & ARCH_LBR_CTL_CPLS) && !(ebx & CPUID_1C_EBX_CPL_FILTER))
        return false;
    if ((val & ARCH_LBR_CTL_FILTER) && !(ebx & CPUID_1C_EBX_BRANCH_FILTER))
        return false;
    if ((val & ARCH_LBR_CTL_CALL_STACK) && !(ebx & CPUID_1C_EBX_CALL_STACK))
        return false;
    return true;
}

/* IA32_LBR_DEPTH: one of the depths CPUID.1CH:EAX[7:0] lists, bit n = 8 * (n + 1) entries;
 * anything else #GPs (pt-facts F.2) */
bool arch_lbr_depth_ok(const uint32_t leaf1c[3], uint64_t val)
{
    if (val == 0 || val > ARCH_LBR_MAX_ENTRIES || (val & 7))
        return false;
    return leaf1c[0] & (1u << (val / 8 - 1));
}

static bool in_range(uint32_t msr, uint32_t first, unsigned n)
{
    return msr - first < n;
}

static bool legacy_stack_msr(const struct lbr_layout *l, uint32_t msr)
{
    return msr == MSR_LBR_SELECT || msr == MSR_LBR_TOS || in_range(msr, l->from, l->nr) ||
           in_range(msr, l->to, l->nr) || (l->info && in_range(msr, l->info, l->nr));
}

static bool arch_msr(uint32_t msr)
{
    return msr == MSR_ARCH_LBR_CTL || msr == MSR_ARCH_LBR_DEPTH ||
           in_range(msr, MSR_ARCH_LBR_FROM_0, ARCH_LBR_MAX_ENTRIES) ||
           in_range(msr, MSR_ARCH_LBR_TO_0, ARCH_LBR_MAX_ENTRIES) ||
           in_range(msr, MSR_ARCH_LBR_INFO_0, ARCH_LBR_MAX_ENTRIES);
}

bool lbr_msr_intercepted(const struct lbr_decision *d, uint32_t msr)
{
    if (msr == MSR_IA32_PERF_CAPABILITIES)
        return true; /* read once at guest boot: the LBR_FMT the guest may see */
    if (msr == MSR_IA32_DEBUGCTLMSR)
        return d->debugctl_virtual;
    if (!d->legacy && d->lay && legacy_stack_msr(d->lay, msr))
        return true;
    return d->arch_present && !d->arch && arch_msr(msr);
}

enum lbr_verdict lbr_msr_access(const struct lbr_decision *d, uint64_t *debugctl, uint32_t msr,
                                bool write, uint64_t *val, const char **why)
{
    *why = NULL;
    if (!lbr_msr_intercepted(d, msr))
        return LBR_NOT_MINE;
    if (msr == MSR_IA32_PERF_CAPABILITIES) {
        if (!d->perf_caps_ok) {
            *why = "IA32_PERF_CAPABILITIES: this CPU has none";
            return LBR_GP;
        }
        if (write) { /* read-only (SDM Vol. 4 table 2-2: "RO") */
            *why = "IA32_PERF_CAPABILITIES is read-only";
            return LBR_GP;
        }
        *val = d->perf_caps;
        return LBR_OK;
    }
    if (msr == MSR_IA32_DEBUGCTLMSR) { /* only without save/load debug controls */
        if (!write) {
            *val = *debugctl;
            return LBR_OK;
        }
        if (*val & ~d->debugctl_valid) {
            *why = "IA32_DEBUGCTL: reserved bit set";
            return LBR_GP;
        }
        *debugctl = *val; /* kept, not in effect: the guest runs with DEBUGCTL = 0 */
        return LBR_OK;
    }
    /* a hidden stack: as a CPU without these MSRs */
    *why = arch_msr(msr) ? "architectural LBR is hidden from the guest"
                         : "model-specific LBR is hidden from the guest";
    return LBR_GP;
}

void lbr_cpuid_filter(const struct lbr_decision *d, uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    /* above the largest basic leaf the CPU answers with that leaf's data: not ours to touch */
    if (leaf > d->max_leaf)
        return;
    if (leaf == 7 && sub == 0) {
        if (!d->arch)
            r[3] &= ~CPUID_7_EDX_ARCH_LBR;
    } else if (leaf == 0x1c) { /* no subleaves: ECX is ignored */
        r[0] = d->leaf1c[0];
        r[1] = d->leaf1c[1];
        r[2] = d->leaf1c[2];
        r[3] = 0;
    } else if (leaf == 0xd && sub == 1) {
        r[2] &= ~(uint32_t)d->xss_hidden; /* IA32_XSS bits the guest may set */
        r[3] &= ~(uint32_t)(d->xss_hidden >> 32);
    } else if (leaf == 0xd && sub < 64 && ((1ull << sub) & d->xss_hidden)) {
        r[0] = r[1] = r[2] = r[3] = 0; /* a hidden component's size / offset leaf */
    }
}

uint64_t lbr_xss_filter(const struct lbr_decision *d, uint64_t host_xss)
{
    return host_xss & ~d->xss_hidden;
}

bool lbr_root_check(const struct lbr_decision *d, const struct lbr_root_view *r, bool *holds)
{
    bool arch = d->arch_present && r->lbr_ctl_ok;
    *holds = !(r->debugctl_ok && r->debugctl) && !(arch && r->lbr_ctl);
    return r->debugctl_ok || arch;
}

/* --- the decision --- */

static const char *legacy_refusal(const struct lbr_host *h, const struct lbr_decision *d, char *buf,
                                  size_t n)
{
    if (d->debugctl_virtual)
        return "no VM-exit save / VM-entry load of debug controls";
    if (!h->perf_caps_ok)
        return "IA32_PERF_CAPABILITIES unreadable";
    unsigned fmt = (unsigned)(h->perf_caps & PERF_CAP_LBR_FMT);
    if (fmt == LBR_FORMAT_ARCH)
        return "LBR_FMT 0x3f: no model-specific LBR";
    if (!d->lay) {
        ptv_snprintf(buf, n, "model %02X_%02XH not in ptvisor's LBR table", h->family, h->model);
        return buf;
    }
    if (fmt != d->lay->fmt) {
        ptv_snprintf(buf, n, "LBR_FMT %u, %s is read as format %u", fmt, d->lay->name, d->lay->fmt);
        return buf;
    }
    return NULL;
}

static const char *arch_refusal(const struct lbr_host *h)
{
    if (h->max_leaf < 0x1c)
        return "CPUID leaf 0x1C beyond the largest basic leaf";
    if (!(h->entry_allowed1 & VM_ENTRY_LOAD_IA32_LBR_CTL) ||
        !(h->exit_allowed1 & VM_EXIT_CLEAR_IA32_LBR_CTL))
        return "no VMX load/clear IA32_LBR_CTL controls";
    if (!(h->leaf1c[0] & 0xff))
        return "CPUID.1CH:EAX lists no depth";
    return NULL;
}

void lbr_decide(const struct lbr_host *h, struct lbr_decision *d)
{
    char lbuf[96];
    *d = (struct lbr_decision){0};
    d->max_leaf = h->max_leaf;
    d->debugctl_valid = lbr_debugctl_valid(h);
    d->debugctl_virtual =
        !(h->exit_ctls & LBR_VMX_EXIT_SAVE_DEBUG) || !(h->entry_ctls & LBR_VMX_ENTRY_LOAD_DEBUG);
    d->lay = lbr_layout_of(h->family, h->model);
    const char *no_legacy = legacy_refusal(h, d, lbuf, sizeof(lbuf));
    d->legacy = !no_legacy;

    d->arch_present = h->max_leaf >= 7 && (h->cpuid7_edx & CPUID_7_EDX_ARCH_LBR);
    const char *no_arch = d->arch_present ? arch_refusal(h) : "absent";
    d->arch = d->arch_present && !no_arch;
    if (d->arch) {
        d->leaf1c[0] = h->leaf1c[0];
        d->leaf1c[1] = h->leaf1c[1];
        d->leaf1c[2] = h->leaf1c[2];
        d->exit_ctls = VM_EXIT_CLEAR_IA32_LBR_CTL;
        d->entry_ctls = VM_ENTRY_LOAD_IA32_LBR_CTL;
    } else {
        d->xss_hidden = XFEATURE_ARCH_LBR; /* XRSTORS must not load an LBR_CTL the VMM hides */
    }

    /* LBR_FMT is the guest's only hint of the format: the host's exactly when it is shown */
    d->perf_caps_ok = h->perf_caps_ok;
    uint64_t fmt = h->perf_caps & PERF_CAP_LBR_FMT;
    bool show_fmt = fmt == LBR_FORMAT_ARCH ? d->arch : d->legacy;
    d->perf_caps = (h->perf_caps & ~PERF_CAP_LBR_FMT) | (show_fmt ? fmt : 0);

    int n = 0;
    if (d->legacy)
        n = ptv_snprintf(d->reason, sizeof(d->reason),
                         "model-specific LBR shown (%s, %u entries, LBR_FMT %u)", d->lay->name,
                         d->lay->nr, d->lay->fmt);
    else
        n = ptv_snprintf(d->reason, sizeof(d->reason), "model-specific LBR hidden (%s)", no_legacy);
    if (n < 0 || (size_t)n >= sizeof(d->reason))
        return;
    if (d->arch)
        n += ptv_snprintf(d->reason + n, sizeof(d->reason) - n, "; arch LBR shown (depths %#x)",
                          h->leaf1c[0] & 0xff);
    else
        n += ptv_snprintf(d->reason + n, sizeof(d->reason) - n, "; arch LBR %s%s",
                          d->arch_present ? "hidden: " : "", no_arch);
    if (n < 0 || (size_t)n >= sizeof(d->reason))
        return;
    ptv_snprintf(d->reason + n, sizeof(d->reason) - n, "; DEBUGCTL %s",
                 d->debugctl_virtual ? "kept by the VMM (not in effect)"
                                     : "switched by the VMCS debug controls");
}
