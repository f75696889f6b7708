// SPDX-License-Identifier: MIT
/*
 * attack.efi group "msr" (issue 7 items 1, 2, 5, 12 and the VMX-instruction
 * exits of item 11): MSRs and instructions a hostile CPL 0 guest uses to reach
 * the VMM's own execution environment.  After each attack the driver's
 * SELFCHECK confirms the real APIC base, MTRRs, IA32_XSS, PERF_GLOBAL_CTRL and
 * DEBUGCTL the VMM runs with are as they must be.
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
    {0},
};
