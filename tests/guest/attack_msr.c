// SPDX-License-Identifier: MIT
/*
 * attack.efi group "msr" (and the VMX-instruction exits): MSRs and instructions a hostile CPL 0
 * guest uses to reach the VMM's own execution environment; and the "lbr:" checks: what a guest
 * reads of the last branch records, natively and under the VMM.  After each attack the
 * driver's SELFCHECK confirms the real APIC base, MTRRs, IA32_XSS, PERF_GLOBAL_CTRL and DEBUGCTL
 * the VMM runs with are as they must be.
 */
#include "ptv/vmcall.h"

#include "attack.h"

#define VEC_GP 13
#define VEC_UD 6

static uint64_t rd(uint32_t msr, int *vec)
{
    uint64_t v = 0;
    *vec = rdmsr_trap(msr, &v);
    return v;
}

static void atk_oc_mailbox(void)
{
    int r, w = wrmsr_trap(0x150, 0x8000001100000000ull); /* "write voltage offset" */
    rd(0x150, &r);
    report(r == TRAP_GP && w == TRAP_GP, "MSR 0x150 (OC mailbox) #GP both ways (%d %d)", r, w);
}

static void atk_ucode(void)
{
    int a, b;
    uint64_t sig = rd(0x8b, &a);
    int w = wrmsr_trap(0x79, atk_canary_pa); /* "microcode" from VMM memory */
    uint64_t sig2 = rd(0x8b, &b);
    report(w == TRAP_NONE && a == b && sig == sig2,
           "WRMSR BIOS_UPDT_TRIG = VMM page: ignored (vector %d)", w);
}

static uint64_t mtrr_cap(void)
{
    int v;
    uint64_t cap = rd(0xfe, &v);
    return v == TRAP_NONE ? cap : 0;
}

static void atk_mtrr_uc(void)
{
    if (!mtrr_cap()) {
        report_skip("MTRRs: none on this CPU");
        return;
    }
    int v;
    uint64_t def = rd(0x2ff, &v);
    uint64_t uc = def & ~0xffull; /* default type UC: the VMM's memory would go uncached */
    int w = wrmsr_trap(0x2ff, uc);
    uint64_t back = rd(0x2ff, &v);
    struct vmcall_regs r;
    atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &r);
    int w2 = wrmsr_trap(0x2ff, def);
    report(w == TRAP_NONE && back == uc && w2 == TRAP_NONE && (r.rcx & PTV_SELFCHECK_MTRR) &&
               !(r.rbx & PTV_SELFCHECK_MTRR),
           "MTRR_DEF_TYPE = UC: guest's own, host MTRRs kept (%d, sc %lx/%lx)", w, r.rbx, r.rcx);
}

static void atk_mtrr_invalid(void)
{
    uint64_t cap = mtrr_cap();
    if (!cap) {
        report_skip("MTRRs: none on this CPU");
        return;
    }
    int v;
    uint64_t def = rd(0x2ff, &v);
    int t2 = wrmsr_trap(0x2ff, (def & ~0xffull) | 2); /* type 2 is reserved */
    int hi = wrmsr_trap(0x2ff, def | (1ull << 12));   /* reserved bit */
    int fx = (cap & (1u << 8)) ? wrmsr_trap(0x250, 0x0707070707070707ull) : VEC_GP;
    uint64_t after = rd(0x2ff, &v);
    report(t2 == VEC_GP && hi == VEC_GP && fx == VEC_GP && after == def,
           "MTRR invalid type / reserved bits: #GP (%d %d %d)", t2, hi, fx);
}

static void atk_mtrr_absent(void)
{
    uint64_t cap = mtrr_cap();
    unsigned n = cap & 0xff;
    if (!cap || n >= 16) {
        report_skip("MTRRs: none, or all 16 variable pairs exist");
        return;
    }
    int r, w = wrmsr_trap(0x200 + 2 * n, 6);
    rd(0x200 + 2 * n + 1, &r);
    report(w == VEC_GP && r == VEC_GP, "variable MTRR pair %u of %u: #GP (%d %d)", n, n, w, r);
}

#define APIC_BASE_MSR 0x1b
#define APIC_EN       (1ull << 11)
#define APIC_EXTD     (1ull << 10)

static void atk_apic_sinkhole(void)
{
    int v;
    uint64_t base = rd(APIC_BASE_MSR, &v);
    if (v != TRAP_NONE || !(base & APIC_EN) || (base & APIC_EXTD)) {
        report_skip("APIC relocation: no xAPIC enabled (base 0x%lx, vector %d)", base, v);
        return;
    }
    volatile uint32_t *apic = (volatile uint32_t *)(base & ~0xfffull);
    uint32_t ver = apic[0x30 / 4], id = apic[0x20 / 4];
    uint64_t moved = atk_vmm_base | (base & 0xfff); /* the APIC over VMM memory */
    int w = wrmsr_trap(APIC_BASE_MSR, moved);
    uint64_t back = rd(APIC_BASE_MSR, &v);
    volatile uint32_t *win = (volatile uint32_t *)atk_vmm_base;
    uint32_t ver2 = win[0x30 / 4], id2 = win[0x20 / 4];
    struct vmcall_regs r;
    atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &r);
    int w2 = wrmsr_trap(APIC_BASE_MSR, base);
    uint32_t ver3 = apic[0x30 / 4];
    report(w == TRAP_NONE && back == moved && w2 == TRAP_NONE,
           "APIC_BASE moved onto VMM memory and back (%d %d)", w, w2);
    report(ver2 == ver && id2 == id && ver3 == ver,
           "moved window shows the APIC (ver %x/%x id %x/%x)", ver, ver2, id, id2);
    report((r.rcx & PTV_SELFCHECK_APIC_BASE) && !(r.rbx & PTV_SELFCHECK_APIC_BASE),
           "the real APIC never moved (selfcheck %lx/%lx)", r.rbx, r.rcx);
}

static void atk_apic_reserved(void)
{
    int v;
    uint64_t base = rd(APIC_BASE_MSR, &v);
    int a = wrmsr_trap(APIC_BASE_MSR, base | 1);                      /* bit 0 */
    int b = wrmsr_trap(APIC_BASE_MSR, base | (1ull << 9));            /* bit 9 */
    int c = wrmsr_trap(APIC_BASE_MSR, base | (1ull << 51));           /* above MAXPHYADDR */
    int d = wrmsr_trap(APIC_BASE_MSR, (base & ~APIC_EN) | APIC_EXTD); /* invalid state */
    uint64_t after = rd(APIC_BASE_MSR, &v);
    report(a == VEC_GP && b == VEC_GP && c == VEC_GP && d == VEC_GP && after == base,
           "APIC_BASE reserved bits / invalid mode: #GP (%d %d %d %d)", a, b, c, d);
}

static void atk_xss_pt(void)
{
    struct cpuid_regs d1 = cpuid(0xd, 1);
    int w = wrmsr_trap(0xda0, 1ull << 8);
    int v;
    uint64_t xss = rd(0xda0, &v);
    report(!(d1.ecx & (1u << 8)) && w == VEC_GP && !(v == TRAP_NONE && (xss & (1ull << 8))),
           "IA32_XSS PT bit: hidden (CPUID) and #GP (vector %d)", w);
}

static uint8_t xarea[4096] __attribute__((aligned(64)));

static void xrstors_fn(void *arg)
{
    __asm__ volatile("xrstors64 (%0)" ::"r"(xarea), "a"(1u << 8), "d"(0) : "memory");
}

static void atk_xrstors_pt(void)
{
    struct cpuid_regs d1 = cpuid(0xd, 1);
    if (!(cpuid(1, 0).ecx & (1u << 26)) || !(d1.eax & (1u << 3))) {
        report_skip("XRSTORS of PT state: no XSAVES on this CPU");
        return;
    }
    uint64_t cr4 = read_cr4();
    write_cr4(cr4 | (1ull << 18));
    for (unsigned i = 0; i < sizeof(xarea); i++)
        xarea[i] = 0;
    *(uint64_t *)(xarea + 512) = 1ull << 8;                  /* XSTATE_BV: PT */
    *(uint64_t *)(xarea + 520) = (1ull << 63) | (1ull << 8); /* XCOMP_BV: compacted, PT */
    *(uint64_t *)(xarea + 576) = 1;                          /* "RTIT_CTL = TraceEn" */
    int v = atk_try(xrstors_fn, 0);
    write_cr4(cr4);
    report(v == VEC_GP, "XRSTORS of a PT state area: #GP (vector %d)", v);
}

static void atk_pmu_root(void)
{
    struct cpuid_regs a = cpuid(0, 0).eax >= 0xa ? cpuid(0xa, 0) : (struct cpuid_regs){0};
    if ((a.eax & 0xff) < 2) {
        report_skip("PMU in root: no architectural perfmon v2 (version %u)", a.eax & 0xff);
        return;
    }
    int v;
    uint64_t ds = rd(0x600, &v), fixed = rd(0x38d, &v), glob = rd(0x38f, &v);
    uint64_t pebs = rd(0x3f1, &v);
    unsigned ngp = (a.eax >> 8) & 0xff;
    wrmsr_trap(0x600, atk_vmm_base); /* DS_AREA: VMM memory */
    wrmsr_trap(0x3f1, 1);            /* PEBS on counter 0 */
    wrmsr_trap(0x38d, 0x333);        /* fixed counters 0-2, all rings */
    int g = wrmsr_trap(0x38f, (7ull << 32) | ((1ull << ngp) - 1));
    struct vmcall_regs r;
    atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &r);
    wrmsr_trap(0x38f, glob);
    wrmsr_trap(0x38d, fixed);
    wrmsr_trap(0x3f1, pebs);
    wrmsr_trap(0x600, ds);
    report((r.rcx & PTV_SELFCHECK_PERF_GLOBAL) && !(r.rbx & PTV_SELFCHECK_PERF_GLOBAL),
           "counters + PEBS at VMM memory: root counts nothing (%d, sc %lx/%lx)", g, r.rbx, r.rcx);
}

static void atk_debugctl_root(void)
{
    int v;
    uint64_t old = rd(0x1d9, &v);
    if (v != TRAP_NONE) {
        report_skip("DEBUGCTL in root: RDMSR IA32_DEBUGCTL faults here (vector %d)", v);
        return;
    }
    int w = wrmsr_trap(0x1d9, 1); /* LBR on */
    struct vmcall_regs r;
    atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &r);
    wrmsr_trap(0x1d9, old);
    report(!(r.rbx & PTV_SELFCHECK_DEBUGCTL) &&
               (w != TRAP_NONE || (r.rcx & PTV_SELFCHECK_DEBUGCTL)),
           "DEBUGCTL.LBR in the guest: root records nothing (%d, sc %lx)", w, r.rbx);
}

static uint8_t vmx_region[4096] __attribute__((aligned(4096)));

static void vmxon_fn(void *arg)
{
    uint64_t pa = (uint64_t)vmx_region;
    __asm__ volatile("vmxon %0" ::"m"(pa) : "cc", "memory");
}
static void vmptrld_fn(void *arg)
{
    uint64_t pa = (uint64_t)vmx_region;
    __asm__ volatile("vmptrld %0" ::"m"(pa) : "cc", "memory");
}
/* (INVEPT is left out: Bochs 2.7 raises #GP for it in non-root before the VM exit that
 * hardware takes, so the guest would not see the VMM's answer at all) */
static void vmread_fn(void *arg)
{
    uint64_t v;
    __asm__ volatile("vmread %1, %0" : "=r"(v) : "r"(0x681eull) : "cc", "memory");
}
static void getsec_fn(void *arg)
{
    __asm__ volatile("getsec" ::"a"(0) : "ebx", "ecx", "memory");
}

static void atk_vmx_insns(void)
{
    uint64_t before = atk_vmm_log_lines();
    unsigned bad = 0;
    int last[4] = {0, 0, 0, 0};
    for (unsigned i = 0; i < 250; i++) {
        last[0] = atk_try(vmxon_fn, 0);
        last[1] = atk_try(vmptrld_fn, 0);
        last[2] = atk_try(vmread_fn, 0);
        last[3] = atk_try(getsec_fn, 0);
        for (unsigned k = 0; k < 4; k++)
            bad += last[k] != VEC_UD;
    }
    uint64_t lines = atk_vmm_log_lines() - before;
    report(bad == 0 && lines <= 20,
           "VMXON/VMPTRLD/VMREAD/GETSEC x250: #UD (%d %d %d %d), %lu lines", last[0], last[1],
           last[2], last[3], lines);
}

/*
 * ---- lbr: the guest's last branch records (docs/lbr.md) ----
 * What a guest reads of LBR, checked by rules that hold on bare hardware and under the VMM
 * alike, so the same lines pass natively (verified by booting these checks without the VMM)
 * and under it:
 *  - an MSR a CPU does not have #GPs (SDM Vol. 4: "reserved ... #GP"), except on a CPU that
 *    ignores unknown MSRs (Bochs' default ignore_bad_msrs=1: reads 0, drops writes), which
 *    lbr_lenient() recognises by an index no CPU defines;
 *  - IA32_PERF_CAPABILITIES exists iff CPUID.1:ECX.PDCM and is read-only; its LBR_FMT
 *    (bits 5:0) says whether the model's stack may be used: the VMM shows the host's format
 *    only where it passes the stack through, else 0 with the stack #GP (Linux's check_msr()
 *    probe then turns LBR off);
 *  - IA32_DEBUGCTL reserved bits #GP, and its value survives VM exits (VMCS debug controls);
 *  - no arch LBR (CPUID.7:EDX[19] = 0): IA32_LBR_CTL / DEPTH / entries absent, XSS[15] and
 *    CPUID.(0DH,1):ECX[15] clear; leaf 1CH zero, or above the largest basic leaf the data of
 *    that leaf (SDM Vol. 2A CPUID: "data for the highest basic information leaf is returned").
 * Under ptvisor the answers the VMM gives itself are checked exactly (a hidden stack #GPs,
 * PERF_CAPABILITIES is read-only): a VMM that passed them to a lenient CPU fails here.
 * Checks that need an LBR to record into say SKIP (Bochs 2.7 has none); the branch records
 * themselves are the on-box self-test's (docs/lbr.md).
 */
#define MSR_DEBUGCTL    0x1d9
#define MSR_PERF_CAPS   0x345
#define MSR_LBR_SELECT  0x1c8
#define MSR_LBR_TOS     0x1c9
#define MSR_LBR_FROM    0x680
#define MSR_LBR_TO      0x6c0
#define MSR_LBR_INFO    0xdc0
#define MSR_LBR_CTL     0x14ce
#define MSR_LBR_DEPTH   0x14cf
#define MSR_XSS         0xda0
#define MSR_NONE        0x2fffffffu /* no CPU defines an MSR here */
#define DEBUGCTL_BTF    (1ull << 1)
#define LBR_FMT_MASK    0x3full
#define LBR_FMT_INFO    5 /* 32 entries, FROM/TO/INFO (Skylake class) */
#define CPUID7_ARCH_LBR (1u << 19)

static bool lbr_lenient(void)
{
    uint64_t v;
    int w = wrmsr_trap(MSR_NONE, 0), r = rdmsr_trap(MSR_NONE, &v);
    return w == TRAP_NONE && r == TRAP_NONE && v == 0;
}

/* An MSR this CPU does not have: #GP both ways (ABSENT_GP), or inert where unknown MSRs are
 * ignored (ABSENT_INERT: reads 0, a write does not stick); else ABSENT_NOT. */
enum absent { ABSENT_NOT, ABSENT_GP, ABSENT_INERT };
static enum absent msr_absent(uint32_t msr, bool lenient)
{
    uint64_t a = 0, b = 0;
    int r = rdmsr_trap(msr, &a);
    int w = wrmsr_trap(msr, 1);
    int r2 = rdmsr_trap(msr, &b);
    if (r == VEC_GP && w == VEC_GP && r2 == VEC_GP)
        return ABSENT_GP;
    if (lenient && r == TRAP_NONE && w == TRAP_NONE && r2 == TRAP_NONE && a == 0 && b == 0)
        return ABSENT_INERT;
    return ABSENT_NOT;
}

/* ptvisor below (VMCALL VERSION answered): its own answers are checked exactly */
static bool under_vmm(void)
{
    struct vmcall_regs r;
    return atk_vmcall(PTV_VMCALL_VERSION, 0, 0, 0, &r) == PTV_VMCALL_OK;
}

/* family 6 models with the Skylake-class stack: 32 x FROM 0x680, TO 0x6c0, INFO 0xdc0
 * (SDM Vol. 3B 17.12; Vol. 4 tables of 06_4EH/5EH/55H/8EH/9EH ... Ice Lake, Tiger Lake) */
static bool lbr_skylake_class(void)
{
    static const uint8_t models[] = {0x4e, 0x5e, 0x55, 0x8e, 0x9e, 0xa5, 0xa6, 0x66,
                                     0x7d, 0x7e, 0x6a, 0x6c, 0x8c, 0x8d, 0xa7};
    uint32_t a = cpuid(1, 0).eax;
    uint32_t fam = (a >> 8) & 0xf, model = ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4);
    if (fam != 6)
        return false;
    for (unsigned i = 0; i < sizeof(models); i++)
        if (models[i] == model)
            return true;
    return false;
}

/* LBR_FMT of IA32_PERF_CAPABILITIES, or -1 when the MSR cannot be read */
static int lbr_format(void)
{
    uint64_t v;
    return rdmsr_trap(MSR_PERF_CAPS, &v) == TRAP_NONE ? (int)(v & LBR_FMT_MASK) : -1;
}

static void atk_lbr_cpuid(void)
{
    uint32_t max = cpuid(0, 0).eax;
    struct cpuid_regs l7 = max >= 7 ? cpuid(7, 0) : (struct cpuid_regs){0};
    bool arch = l7.edx & CPUID7_ARCH_LBR;
    struct cpuid_regs l1c = cpuid(0x1c, 0), top = cpuid(max, 0);
    report_info("lbr: max basic leaf %#x, CPUID.7:EDX[19] %u, leaf 1CH %x %x %x %x", max, arch,
                l1c.eax, l1c.ebx, l1c.ecx, l1c.edx);
    if (max < 0x1c) {
        /* the CPU answers leaf 1CH with its largest basic leaf: the VMM may not make one up */
        report(!arch && l1c.eax == top.eax && l1c.ebx == top.ebx && l1c.ecx == top.ecx &&
                   l1c.edx == top.edx,
               "lbr: no arch LBR; leaf 1CH = leaf %#x (above the max)", max);
    } else if (!arch) {
        report(!l1c.eax && !l1c.ebx && !l1c.ecx && !l1c.edx, "lbr: no arch LBR, leaf 1CH zero");
    } else {
        /* shown: at least one depth, and IA32_LBR_DEPTH holds one of them */
        uint64_t depth = 0;
        int r = rdmsr_trap(MSR_LBR_DEPTH, &depth);
        bool listed = r == TRAP_NONE && depth && depth <= 64 && !(depth & 7) &&
                      (l1c.eax & (1u << (depth / 8 - 1)));
        report((l1c.eax & 0xff) && listed, "lbr: arch LBR shown, depth %lu of %#x", depth,
               l1c.eax & 0xff);
    }
    struct cpuid_regs d1 = max >= 0xd ? cpuid(0xd, 1) : (struct cpuid_regs){0};
    if (arch)
        report_skip("lbr: XSS[15] hidden-state check: this CPU shows arch LBR");
    else
        report(!(d1.ecx & (1u << 15)), "lbr: no arch LBR, CPUID.(0DH,1):ECX[15] = 0");
}

static void atk_lbr_perf_caps(void)
{
    bool pdcm = cpuid(1, 0).ecx & (1u << 15), lenient = lbr_lenient();
    uint64_t a = 0, b = 0, c = 0;
    int r = rdmsr_trap(MSR_PERF_CAPS, &a), r2 = rdmsr_trap(MSR_PERF_CAPS, &b);
    int w = wrmsr_trap(MSR_PERF_CAPS, a ^ 1); /* read-only: LBR_FMT is not the guest's */
    int r3 = rdmsr_trap(MSR_PERF_CAPS, &c);
    report_info("lbr: PDCM %u, unknown MSRs %s, PERF_CAPABILITIES %#lx (vector %d)", pdcm,
                lenient ? "ignored" : "#GP", a, r);
    if (!pdcm) {
        report((r == VEC_GP && w == VEC_GP) || (lenient && r == TRAP_NONE && a == 0),
               "lbr: no PDCM: PERF_CAPABILITIES absent (%d %d)", r, w);
        return;
    }
    if (r != TRAP_NONE) {
        report_skip("lbr: PERF_CAPABILITIES #GP although PDCM = 1 (an emulator's)");
        return;
    }
    /* read-only (SDM Vol. 4 table 2-2): #GP under ptvisor, which answers it; natively as
     * the CPU answers (bare Bochs drops the write) */
    report(r2 == TRAP_NONE && r3 == TRAP_NONE && b == a && c == a &&
               (w == VEC_GP || (lenient && !under_vmm() && w == TRAP_NONE)),
           "lbr: PERF_CAPABILITIES %#lx steady, WRMSR vector %d", a, w);
}

static void atk_lbr_debugctl(void)
{
    bool lenient = lbr_lenient();
    uint64_t old = 0, back;
    int v = rdmsr_trap(MSR_DEBUGCTL, &old);
    if (v != TRAP_NONE) {
        report_skip("lbr: RDMSR IA32_DEBUGCTL faults here (vector %d)", v);
        return;
    }
    /* bits 3-5, 16-63 are reserved on every family 6 core (SDM Vol. 4 table 2-2) */
    static const unsigned rsvd[] = {3, 4, 5, 16, 31, 32, 63};
    unsigned bad = 0, gp = 0;
    for (unsigned i = 0; i < sizeof(rsvd) / sizeof(rsvd[0]); i++) {
        int w = wrmsr_trap(MSR_DEBUGCTL, old | (1ull << rsvd[i]));
        int r = rdmsr_trap(MSR_DEBUGCTL, &back);
        gp += w == VEC_GP;
        if (!(w == VEC_GP || (lenient && w == TRAP_NONE)) || r != TRAP_NONE || back != old) {
            bad++;
            wrmsr_trap(MSR_DEBUGCTL, old);
        }
    }
    report(bad == 0, "lbr: DEBUGCTL reserved bits: %u of 7 #GP, value kept (%u bad)", gp, bad);

    /* LBR set: kept across exits (CPUID, an MSR exit, VMCALL) exactly as written -- or, on a
     * CPU without a model-specific stack, dropped (arch LBR spec: reads return 0) */
    int w = wrmsr_trap(MSR_DEBUGCTL, old | 1);
    uint64_t b1 = 0, b2 = 0, pc;
    int r1 = rdmsr_trap(MSR_DEBUGCTL, &b1);
    for (unsigned i = 0; i < 8; i++) {
        cpuid(0, 0);
        rdmsr_trap(MSR_PERF_CAPS, &pc);
        atk_vmcall(PTV_VMCALL_VERSION, 0, 0, 0, NULL);
    }
    int r2 = rdmsr_trap(MSR_DEBUGCTL, &b2);
    wrmsr_trap(MSR_DEBUGCTL, old);
    report(w == TRAP_NONE && r1 == TRAP_NONE && r2 == TRAP_NONE && b2 == b1 &&
               (b1 & ~1ull) == (old & ~1ull),
           "lbr: DEBUGCTL.LBR %#lx -> %#lx, same after 24 exits", old | 1, b1);
}

/* TF with DEBUGCTL.BTF steps on branches only (SDM Vol. 3B 18.4.3): POPF sets TF, CPUID (an
 * exit the VMM emulates), NOP, POPF clears TF -- no branch, so no #DB at all.  Without BTF the
 * same code traps right after CPUID (attack "TF single-step over CPUID"). */
__attribute__((visibility("hidden"))) void atk_tf_cpuid(void); /* attack_cpu_asm.S */

static void btf_fn(void *arg)
{
    atk_tf_cpuid();
}

static void atk_lbr_btf(void)
{
    uint64_t old = 0, back = 0;
    if (rdmsr_trap(MSR_DEBUGCTL, &old) != TRAP_NONE ||
        wrmsr_trap(MSR_DEBUGCTL, old | DEBUGCTL_BTF) != TRAP_NONE ||
        rdmsr_trap(MSR_DEBUGCTL, &back) != TRAP_NONE || !(back & DEBUGCTL_BTF)) {
        wrmsr_trap(MSR_DEBUGCTL, old);
        report_skip("lbr: DEBUGCTL.BTF does not stick here (%#lx): TF+BTF untested", back);
        return;
    }
    int v = atk_try(btf_fn, 0);
    wrmsr_trap(MSR_DEBUGCTL, old);
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    report(v == ATK_NONE, "lbr: TF+BTF over CPUID (no branch): no #DB (vector %d)", v);
}

static void atk_lbr_stack(void)
{
    bool lenient = lbr_lenient();
    int fmt = lbr_format();
    if (!lbr_skylake_class()) {
        report_skip("lbr: stack layout of this model not in the test (Skylake class only)");
        return;
    }
    uint64_t lines = atk_vmm_log_lines();
    if (fmt == 0 || fmt == -1) {
        /* hidden (or no PERF_CAPABILITIES): the whole layout absent, as a CPU without it */
        unsigned n = 0, gp = 0, inert = 0;
        uint32_t first_bad = 0;
        for (unsigned i = 0; i < 32 + 32 + 32 + 2; i++) {
            uint32_t m = i < 32    ? MSR_LBR_FROM + i
                         : i < 64  ? MSR_LBR_TO + i - 32
                         : i < 96  ? MSR_LBR_INFO + i - 64
                         : i == 96 ? MSR_LBR_SELECT
                                   : MSR_LBR_TOS;
            n++;
            enum absent a = msr_absent(m, lenient);
            gp += a == ABSENT_GP;
            inert += a == ABSENT_INERT;
            if (a == ABSENT_NOT && !first_bad)
                first_bad = m;
        }
        uint64_t more = atk_vmm_log_lines() - lines;
        /* under ptvisor the hidden stack #GPs (the VMM answers, docs/lbr.md); natively the
         * CPU answers: #GP, or inert where unknown MSRs are ignored (bare Bochs) */
        bool vmm = under_vmm();
        report(vmm ? gp == n : gp + inert == n,
               "lbr: LBR_FMT %d: %u stack MSRs: %u #GP, %u inert (bad %#x)", fmt, n, gp, inert,
               first_bad);
        report(more <= 4, "lbr: %u x3 hidden-MSR accesses: %lu VMM log lines", n, more);
        report_skip("lbr: branch records: no LBR to record into (LBR_FMT %d)", fmt);
        return;
    }
    if (fmt != LBR_FMT_INFO) {
        report_skip("lbr: LBR_FMT %d on a Skylake-class model: layout unknown here", fmt);
        return;
    }
    /* shown: every MSR of the layout readable, TOS an index, LBR_SELECT bits 9:0 */
    unsigned readable = 0;
    uint64_t v, tos = 0, sel = 0;
    for (unsigned i = 0; i < 32; i++)
        readable += rdmsr_trap(MSR_LBR_FROM + i, &v) == TRAP_NONE &&
                    rdmsr_trap(MSR_LBR_TO + i, &v) == TRAP_NONE &&
                    rdmsr_trap(MSR_LBR_INFO + i, &v) == TRAP_NONE;
    int rt = rdmsr_trap(MSR_LBR_TOS, &tos), rs = rdmsr_trap(MSR_LBR_SELECT, &sel);
    report(readable == 32 && rt == TRAP_NONE && tos < 32 && rs == TRAP_NONE,
           "lbr: LBR_FMT 5: 32 entries readable, TOS %lu", tos);
    report_skip("lbr: branch records: checked by the on-box self-test");
}

static void atk_lbr_arch_msrs(void)
{
    uint32_t max = cpuid(0, 0).eax;
    if (max >= 7 && (cpuid(7, 0).edx & CPUID7_ARCH_LBR)) {
        report_skip("lbr: arch LBR present: the absent-MSR checks do not apply");
        return;
    }
    bool lenient = lbr_lenient();
    static const uint32_t msrs[] = {MSR_LBR_CTL, MSR_LBR_DEPTH, 0x1500, 0x153f,
                                    0x1600,      0x163f,        0x1200, 0x123f};
    unsigned gp = 0, inert = 0, n = sizeof(msrs) / sizeof(msrs[0]);
    for (unsigned i = 0; i < n; i++) {
        enum absent a = msr_absent(msrs[i], lenient);
        gp += a == ABSENT_GP;
        inert += a == ABSENT_INERT;
    }
    /* as the CPU answers, with or without ptvisor (a CPU without arch LBR: nothing to hide) */
    report(gp + inert == n, "lbr: no arch LBR: LBR_CTL/DEPTH/entries: %u #GP, %u inert", gp, inert);
    /* XSS[15] (arch LBR state) cannot be set where CPUID does not list it */
    struct cpuid_regs d1 = max >= 0xd ? cpuid(0xd, 1) : (struct cpuid_regs){0};
    uint64_t xss;
    if (!(d1.eax & (1u << 3)) || rdmsr_trap(MSR_XSS, &xss) != TRAP_NONE) {
        report_skip("lbr: IA32_XSS: no XSAVES on this CPU");
        return;
    }
    int w = wrmsr_trap(MSR_XSS, xss | (1ull << 15));
    uint64_t after = 0;
    rdmsr_trap(MSR_XSS, &after);
    if (w == TRAP_NONE)
        wrmsr_trap(MSR_XSS, xss);
    report(w == VEC_GP && after == xss, "lbr: IA32_XSS[15] (arch LBR state) #GP (%d)", w);
}

const struct attack attacks_msr[] = {
    {"overclocking mailbox MSR 0x150", atk_oc_mailbox},
    {"microcode load from VMM memory", atk_ucode},
    {"MTRR default type UC", atk_mtrr_uc},
    {"MTRR invalid types", atk_mtrr_invalid},
    {"MTRR pair that does not exist", atk_mtrr_absent},
    {"APIC base over VMM memory", atk_apic_sinkhole},
    {"APIC base reserved bits", atk_apic_reserved},
    {"IA32_XSS PT component", atk_xss_pt},
    {"XRSTORS of PT state", atk_xrstors_pt},
    {"PMU counters + PEBS into root", atk_pmu_root},
    {"DEBUGCTL.LBR across exits", atk_debugctl_root},
    {"VMX instructions x1000", atk_vmx_insns},
    {"lbr: CPUID arch LBR, leaf 1CH", atk_lbr_cpuid},
    {"lbr: IA32_PERF_CAPABILITIES", atk_lbr_perf_caps},
    {"lbr: IA32_DEBUGCTL", atk_lbr_debugctl},
    {"lbr: DEBUGCTL.BTF over an exit", atk_lbr_btf},
    {"lbr: model-specific stack MSRs", atk_lbr_stack},
    {"lbr: arch LBR MSRs, XSS[15]", atk_lbr_arch_msrs},
    {0},
};
