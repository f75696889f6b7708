/* SPDX-License-Identifier: MIT */
/*
 * The guest's LBR stack in the crash report (see lbr_report.h).
 *
 * Why the stack is the guest's, frozen: the report is written in root after a VM exit, and
 * every VM exit clears IA32_DEBUGCTL (SDM Vol. 3C 28.5.1, "Loading Host Control Registers,
 * Debug Registers, MSRs": "The IA32_DEBUGCTL MSR is cleared to 00000000_00000000H"), after
 * "save debug controls" stored the guest's value in GUEST_IA32_DEBUGCTL (28.3.1); with arch
 * LBR shown the "clear IA32_LBR_CTL" exit control clears IA32_LBR_CTL likewise (pt-facts A.2),
 * the guest's value in GUEST_IA32_LBR_CTL [I: saved as IA32_RTIT_CTL is, docs/lbr.md].  So
 * LBR is off in root from the exit on: the VMM's own branches (this report included) record
 * nothing, and LBR_TOS and the FROM/TO/INFO MSRs still hold the guest's last records.  The
 * enables shown are the guest's (the VMCS fields), not the MSRs, which read 0 here.  Where the
 * VMM stops before its first VM entry the stack is whatever ran before the VMM (lbr_vmx.h,
 * lbr_vmx_root_enter), which is why d is NULL then and nothing is read.
 */
#include "lbr/lbr_report.h"
#include "lbr/lbr_policy.h"
#include "lib/fmt.h"
#include <stdarg.h>

#define MSR_PERF_GLOBAL_STATUS 0x38e
#define GLOBAL_STATUS_LBR_FRZ  (1ull << 58) /* PMU v4 / arch LBR freeze (SDM Vol. 3B 17.4.7) */

struct out {
    char *p;
    size_t cap, len;
    bool full;
};

/* one whole line or nothing; after the first refusal nothing more (the text stays a prefix) */
static void line(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    size_t room = o->cap - o->len;
    va_list ap;
    va_start(ap, fmt);
    int n = ptv_vsnprintf(o->p + o->len, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        o->p[o->len] = '\0';
        o->full = true;
        return;
    }
    o->len += (size_t)n;
}

/* the names of the set bits of v, from a table, into buf ("" when none) */
struct bitname {
    uint64_t bit;
    const char *name;
};

static const char *bit_names(uint64_t v, const struct bitname *t, unsigned n, char *buf,
                             size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        if (!(v & t[i].bit))
            continue;
        int k = ptv_snprintf(buf + len, size - len, " %s", t[i].name);
        if (k < 0 || (size_t)k >= size - len)
            break;
        len += (size_t)k;
    }
    return buf;
}

static const struct bitname debugctl_bits[] = {
    {DEBUGCTLMSR_LBR, "LBR"},
    {DEBUGCTLMSR_BTF, "BTF"},
    {DEBUGCTLMSR_BUS_LOCK_DETECT, "BLD"},
    {DEBUGCTLMSR_TR, "TR"},
    {DEBUGCTLMSR_BTS, "BTS"},
    {DEBUGCTLMSR_BTINT, "BTINT"},
    {DEBUGCTLMSR_BTS_OFF_OS, "BTS_OFF_OS"},
    {DEBUGCTLMSR_BTS_OFF_USR, "BTS_OFF_USR"},
    {DEBUGCTLMSR_FREEZE_LBRS_ON_PMI, "FREEZE_LBRS_ON_PMI"},
    {DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI, "FREEZE_PERFMON_ON_PMI"},
    {DEBUGCTLMSR_FREEZE_IN_SMM, "FREEZE_WHILE_SMM"},
    {DEBUGCTLMSR_RTM_DEBUG, "RTM_DEBUG"},
};

static const struct bitname lbr_ctl_bits[] = {
    {ARCH_LBR_CTL_LBREN, "LBREn"},
    {ARCH_LBR_CTL_OS, "OS"},
    {ARCH_LBR_CTL_USR, "USR"},
    {ARCH_LBR_CTL_CALL_STACK, "CALL_STACK"},
    {ARCH_LBR_CTL_FILTER, "branch-filter"},
};

/* "(a, b, c)" from the fields that apply, "" when none */
struct flags {
    char s[96];
    size_t len;
};

static void flag(struct flags *f, bool on, const char *name)
{
    if (!on || f->len >= sizeof(f->s))
        return;
    int k = ptv_snprintf(f->s + f->len, sizeof(f->s) - f->len, "%s%s", f->len ? ", " : " (", name);
    f->len = k < 0 ? sizeof(f->s) : f->len + (size_t)k;
}

static const char *cycles(char *buf, size_t n, uint64_t info)
{
    ptv_snprintf(buf, n, "cycles %u", (unsigned)(info & LBR_INFO_CYC_CNT));
    return buf;
}

static const char *flags_end(struct flags *f)
{
    if (f->len && f->len + 1 < sizeof(f->s)) {
        f->s[f->len++] = ')';
        f->s[f->len] = '\0';
    }
    return f->s;
}

#define NBITS(t) (unsigned)(sizeof(t) / sizeof((t)[0]))

static uint64_t sext(uint64_t v, unsigned top) /* sign-extend from bit top */
{
    unsigned s = 63 - top;
    return (uint64_t)((int64_t)(v << s) >> s);
}

/* the DEBUGCTL line, then LBR_Frz where the PMU has IA32_PERF_GLOBAL_STATUS */
static void report_debugctl(struct out *o, const struct lbr_decision *d,
                            const struct lbr_crash_view *v)
{
    char names[160];
    if (!v->debugctl_ok)
        line(o, "  DEBUGCTL       n/a (VMREAD failed)\n");
    else
        line(o, "  DEBUGCTL       0x%lx%s%s\n", (unsigned long)v->debugctl,
             bit_names(v->debugctl, debugctl_bits, NBITS(debugctl_bits), names, sizeof(names)),
             d->debugctl_virtual ? " (the VMM's copy, not in effect)" : "");
    uint64_t gs;
    if (v->rdmsr(v->ctx, MSR_PERF_GLOBAL_STATUS, &gs))
        line(o, "  GLOBAL_STATUS  LBR_Frz %u\n", (unsigned)!!(gs & GLOBAL_STATUS_LBR_FRZ));
}

static void report_empty(struct out *o, unsigned shown, unsigned empty)
{
    line(o, "  (%u records, %u empty entries not listed)\n", shown, empty);
}

/*
 * Model-specific LBR: TOS is the newest entry, older ones below it, modulo the depth (SDM Vol.
 * 3B 17.9-17.12).  FROM of formats 3 and 4 carries the flags in its top bits (bit 63
 * mispredicted; 62/61 in TSX / TSX abort for format 4), the address is the sign extension of
 * the rest; format 5 keeps them in LBR_INFO (bit 63/62/61, cycles 15:0) and its FROM's bits
 * 62:61 may hold TSX bits too [I: Linux reads format 5 FROM as bits 60:0 sign-extended].
 */
static void report_legacy(struct out *o, const struct lbr_decision *d,
                          const struct lbr_crash_view *v)
{
    const struct lbr_layout *l = d->lay;
    uint64_t tos, sel;
    line(o, "---- guest LBR: model-specific, %s, %u entries, LBR_FMT %u ----\n", l->name, l->nr,
         l->fmt);
    report_debugctl(o, d, v);
    if (v->rdmsr(v->ctx, MSR_LBR_SELECT, &sel))
        line(o, "  LBR_SELECT     0x%lx\n", (unsigned long)sel);
    else
        line(o, "  LBR_SELECT     #GP\n");
    if (!v->rdmsr(v->ctx, MSR_LBR_TOS, &tos)) {
        line(o, "  LBR_TOS        #GP: the stack cannot be ordered, not listed\n");
        return;
    }
    line(o, "  LBR_TOS        %lu\n", (unsigned long)tos);
    unsigned shown = 0, empty = 0;
    for (unsigned i = 0; i < l->nr; i++) {
        unsigned k = (unsigned)((tos + l->nr - i) % l->nr); /* i = 0: the newest */
        uint64_t from, to, info = 0;
        if (!v->rdmsr(v->ctx, l->from + k, &from) || !v->rdmsr(v->ctx, l->to + k, &to) ||
            (l->info && !v->rdmsr(v->ctx, l->info + k, &info))) {
            line(o, "  lbr[%2u] #GP reading entry %u\n", i, k);
            continue;
        }
        if (!from && !to && !info) {
            empty++;
            continue;
        }
        shown++;
        struct flags f = {.len = 0};
        char cyc[24];
        if (l->fmt == LBR_FORMAT_INFO) {
            flag(&f, info & LBR_INFO_MISPRED, "mispred");
            flag(&f, info & LBR_INFO_IN_TX, "in_tx");
            flag(&f, info & LBR_INFO_ABORT, "abort");
            flag(&f, true, cycles(cyc, sizeof(cyc), info));
            line(o, "  lbr[%2u] from 0x%016lx to 0x%016lx info 0x%016lx%s\n", i,
                 (unsigned long)sext(from, 60), (unsigned long)to, (unsigned long)info,
                 flags_end(&f));
        } else {
            bool tsx = l->fmt == LBR_FORMAT_EIP_FLAGS2;
            flag(&f, from & (1ull << 63), "mispred");
            flag(&f, tsx && (from & (1ull << 62)), "in_tx");
            flag(&f, tsx && (from & (1ull << 61)), "abort");
            line(o, "  lbr[%2u] from 0x%016lx to 0x%016lx%s\n", i,
                 (unsigned long)sext(from, tsx ? 60 : 62), (unsigned long)to, flags_end(&f));
        }
    }
    report_empty(o, shown, empty);
}

/* IA32_LBR_x_INFO.BR_TYPE (pt-facts F.2): 0 COND, 1 JMP indirect, 2 JMP direct, 3 CALL
 * indirect, 4 CALL direct, 5 RET, 6-7 reserved, 8-15 other branch */
static const char *br_type_name(unsigned t)
{
    static const char *const n[] = {"jcc", "jmp ind", "jmp", "call ind", "call", "ret"};
    return t < 6 ? n[t] : t >= 8 ? "other" : "reserved";
}

/*
 * Architectural LBR: entry 0 is the newest, up to IA32_LBR_DEPTH entries (pt-facts F.2).  Which
 * INFO fields hold data is CPUID.1CH:ECX's: [0] MISPRED (bit 63), [1] timed LBR (CYC_CNT 15:0
 * valid when bit 60), [2] BR_TYPE (59:56); IN_TSX / TSX_ABORT are bits 62 / 61.
 */
static void report_arch(struct out *o, const struct lbr_decision *d, const struct lbr_crash_view *v)
{
    char names[96];
    uint64_t depth;
    uint32_t ecx = d->leaf1c[2];
    line(o, "---- guest LBR: architectural (CPUID.1CH 0x%x 0x%x 0x%x) ----\n", d->leaf1c[0],
         d->leaf1c[1], d->leaf1c[2]);
    report_debugctl(o, d, v);
    if (v->lbr_ctl_ok)
        line(o, "  LBR_CTL        0x%lx%s\n", (unsigned long)v->lbr_ctl,
             bit_names(v->lbr_ctl, lbr_ctl_bits, NBITS(lbr_ctl_bits), names, sizeof(names)));
    else
        line(o, "  LBR_CTL        n/a (VMREAD failed)\n");
    if (!v->rdmsr(v->ctx, MSR_ARCH_LBR_DEPTH, &depth)) {
        line(o, "  LBR_DEPTH      #GP: the stack is not listed\n");
        return;
    }
    line(o, "  LBR_DEPTH      %lu\n", (unsigned long)depth);
    unsigned n = depth > ARCH_LBR_MAX_ENTRIES ? ARCH_LBR_MAX_ENTRIES : (unsigned)depth;
    unsigned shown = 0, empty = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t from, to, info;
        if (!v->rdmsr(v->ctx, MSR_ARCH_LBR_FROM_0 + i, &from) ||
            !v->rdmsr(v->ctx, MSR_ARCH_LBR_TO_0 + i, &to) ||
            !v->rdmsr(v->ctx, MSR_ARCH_LBR_INFO_0 + i, &info)) {
            line(o, "  lbr[%2u] #GP reading entry %u\n", i, i);
            continue;
        }
        if (!from && !to && !info) {
            empty++;
            continue;
        }
        shown++;
        struct flags f = {.len = 0};
        char cyc[24];
        flag(&f, (ecx & 1) && (info & LBR_INFO_MISPRED), "mispred");
        flag(&f, info & LBR_INFO_IN_TX, "in_tx");
        flag(&f, info & LBR_INFO_ABORT, "abort");
        flag(&f, (ecx & 2) && (info & LBR_INFO_CYC_CNT_VALID), cycles(cyc, sizeof(cyc), info));
        if (ecx & 4)
            flag(&f, true, br_type_name((unsigned)(info >> LBR_INFO_BR_TYPE_SHIFT) & 0xf));
        line(o, "  lbr[%2u] from 0x%016lx to 0x%016lx info 0x%016lx%s\n", i, (unsigned long)from,
             (unsigned long)to, (unsigned long)info, flags_end(&f));
    }
    report_empty(o, shown, empty);
}

size_t lbr_crash_text(const struct lbr_decision *d, const struct lbr_crash_view *v, char *buf,
                      size_t cap)
{
    if (!cap)
        return 0;
    struct out o = {.p = buf, .cap = cap};
    buf[0] = '\0';
    if (!d)
        line(&o, "guest LBR: none on this CPU (the VMM stopped before its LBR set-up)\n");
    else if (!d->legacy && !d->arch)
        line(&o, "guest LBR: none on this CPU (%s)\n", d->reason);
    else {
        if (d->legacy)
            report_legacy(&o, d, v);
        if (d->arch)
            report_arch(&o, d, v);
    }
    if (o.full && o.cap - o.len > sizeof(LBR_REPORT_CUT) - 1) {
        o.full = false;
        line(&o, "%s", LBR_REPORT_CUT);
    }
    return o.len;
}
