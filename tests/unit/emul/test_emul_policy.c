/* SPDX-License-Identifier: MIT */
/*
 * vmm/emul/emul_policy.c: the architectural rules of emulated CPU state, case by
 * case against the SDM (each table row names its rule).  Every case here fails
 * on the exit handlers as they once were (no RIP wrap, no RF, any CR0
 * accepted, APIC base and MTRRs passed through).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "emul/emul_policy.h"

static void test_retire(void **state)
{
    (void)state;
    /* compat-mode CPUID in the last two bytes below 4 GiB: next EIP is 0 */
    struct retire_state s = {.rip = 0xfffffffeull, .rflags = 0x2};
    insn_retire(&s, 2, false);
    assert_int_equal(s.rip, 0);
    /* 64-bit mode: no wrap */
    s = (struct retire_state){.rip = 0xfffffffeull};
    insn_retire(&s, 2, true);
    assert_int_equal(s.rip, 0x100000000ull);
    /* RF cleared, TF owes a single-step trap, STI / MOV SS shadow ends, NMI blocking stays */
    s = (struct retire_state){.rip = 0x1000,
                              .rflags = RFLAGS_RF | RFLAGS_TF | 0x2,
                              .intr = GUEST_INTR_STATE_STI | GUEST_INTR_STATE_NMI};
    insn_retire(&s, 3, true);
    assert_int_equal(s.rip, 0x1003);
    assert_int_equal(s.rflags, RFLAGS_TF | 0x2);
    assert_int_equal(s.pending_dbg, PENDING_DBG_BS);
    assert_int_equal(s.intr, GUEST_INTR_STATE_NMI);
    s = (struct retire_state){.rip = 0x1000, .rflags = 0x2, .intr = GUEST_INTR_STATE_MOV_SS};
    insn_retire(&s, 2, false);
    assert_int_equal(s.pending_dbg, 0);
    assert_int_equal(s.intr, 0);
    /* DEBUGCTL.BTF with TF: single-step on branches only (SDM Vol. 3B 18.4.3); an emulated
     * CPUID / RDMSR / VMCALL is no branch and owes no #DB; RF still clears */
    s = (struct retire_state){
        .rip = 0x1000, .rflags = RFLAGS_TF | RFLAGS_RF | 0x2, .debugctl = DEBUGCTL_BTF | 1};
    insn_retire(&s, 2, true);
    assert_int_equal(s.pending_dbg, 0);
    assert_int_equal(s.rflags, RFLAGS_TF | 0x2);
    assert_int_equal(s.rip, 0x1002);
    /* the other DEBUGCTL bits (LBR, FREEZE_*) leave single-step as it is */
    s = (struct retire_state){.rip = 0x1000, .rflags = RFLAGS_TF | 0x2, .debugctl = ~DEBUGCTL_BTF};
    insn_retire(&s, 2, true);
    assert_int_equal(s.pending_dbg, PENDING_DBG_BS);
    /* BTF without TF: nothing owed either */
    s = (struct retire_state){.rip = 0x1000, .rflags = 0x2, .debugctl = DEBUGCTL_BTF};
    insn_retire(&s, 2, true);
    assert_int_equal(s.pending_dbg, 0);
}

/* the exit path's shortcut: where insn_retire_mode_matters() says no, the mode taken from RIP
 * gives the RIP the real mode gives, for every mode RIP allows (bits 63:32 set: 64-bit mode) */
static void test_insn_retire_mode_shortcut(void **state)
{
    (void)state;
    static const uint64_t rips[] = {0,
                                    0x1000,
                                    0x7ffffff0ull,
                                    0xfffffff0ull,
                                    0xfffffff1ull,
                                    0xfffffffeull,
                                    0xffffffffull,
                                    0x100000000ull,
                                    0x100000001ull,
                                    0xffffffff81000000ull,
                                    0xfffffffffffffff8ull};
    unsigned mattered = 0;
    for (unsigned i = 0; i < sizeof(rips) / sizeof(rips[0]); i++)
        for (unsigned len = 1; len <= 15; len++)
            for (int code64 = 0; code64 <= 1; code64++) {
                uint64_t rip = rips[i];
                if (!code64 && rip > 0xffffffffull)
                    continue; /* no such state: VM entry refuses it, no exit saves it */
                struct retire_state real = {.rip = rip}, fast = {.rip = rip};
                insn_retire(&real, len, code64);
                if (insn_retire_mode_matters(rip, len)) {
                    mattered++;
                    continue; /* the exit path reads the mode from the VMCS */
                }
                insn_retire(&fast, len, insn_retire_code64(rip));
                assert_int_equal(fast.rip, real.rip);
            }
    /* ... and it does read it exactly at the wrap */
    assert_true(insn_retire_mode_matters(0xfffffffeull, 2));
    assert_true(insn_retire_mode_matters(0xffffffffull, 1));
    assert_false(insn_retire_mode_matters(0xfffffffeull, 1));
    assert_false(insn_retire_mode_matters(0x100000000ull, 2));
    /* both modes of 0xfffffff1 (len 15), 0xfffffffe (len 2-15), 0xffffffff (len 1-15) */
    assert_int_equal(mattered, 2 * (1 + 14 + 15));
}

static void test_fault_class(void **state)
{
    (void)state;
    static const unsigned faults[] = {0, 5, 6, 7, 10, 11, 12, 13, 14, 16, 17, 19, 20, 21};
    static const unsigned others[] = {1, 2, 3, 4, 8, 9, 15, 18, 22, 31, 32, 255};
    for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        assert_true(exception_is_fault(faults[i]));
    for (unsigned i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        assert_false(exception_is_fault(others[i]));
}

#define LONG_CTX                                                                                   \
    {                                                                                              \
        .cr0 = 0x80050033, .cr3 = 0x1000, .cr4 = 0x3606f0, .efer = 0xd01, .code64 = true,          \
        .cr4_supported = 0x3f77ff                                                                  \
    }

/* access rights, VMCS format: 32-bit and 16-bit ring-0 code, a busy 32-bit TSS */
#define CS32  0xc09bu
#define CS16  0x809bu
#define TSS32 0x8bu

static void test_cr0(void **state)
{
    (void)state;
    static const struct {
        struct cr_ctx c;
        uint64_t val;
        bool gp;
        const char *rule;
    } cases[] = {
        {LONG_CTX, 0x80050033, false, "unchanged"},
        {LONG_CTX, 0x80050013, false, "NE cleared is legal"},
        {LONG_CTX, 0x180050033ull, true, "bit 32 (MOV CR0: 63:32 reserved)"},
        {LONG_CTX, 0x80000000ull << 32, true, "bit 63"},
        {LONG_CTX, 0x00050033, true, "PG cleared in 64-bit mode"},
        {LONG_CTX, 0xa0050033, true, "NW without CD"},
        {LONG_CTX, 0xe0050033, false, "NW with CD"},
        {LONG_CTX, 0x80050032, true, "PG without PE"},
        {{.cr0 = 0x33, .cr4 = 0, .efer = 0x100, .cs_ar = CS32, .tr_ar = TSS32},
         0x80000011,
         true,
         "LME + PG without PAE"},
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS32, .tr_ar = TSS32},
         0x80000011,
         false,
         "LME + PG with PAE"},
        /* the other 64-bit mode consistency checks of IA-32e activation (SDM Vol. 3A 10.8.5):
         * on the code before these checks the first three made VM entry fail (TR type 3, CS L and
         * D) and the fourth entered 64-bit mode (CS L, D = 0) where hardware #GPs */
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS32, .tr_ar = 0x83},
         0x80000011,
         true,
         "LME + PG with a busy 16-bit TSS in TR"},
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS32, .tr_ar = 0x81},
         0x80000011,
         true,
         "LME + PG with an available 16-bit TSS in TR"},
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS32 | VMX_AR_L, .tr_ar = TSS32},
         0x80000011,
         true,
         "LME + PG from a CS with L = 1, D = 1"},
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS16 | VMX_AR_L, .tr_ar = TSS32},
         0x80000011,
         true,
         "LME + PG from a CS with L = 1, D = 0"},
        {{.cr0 = 0x33, .cr4 = 0x20, .efer = 0x100, .cs_ar = CS16, .tr_ar = TSS32},
         0x80000011,
         false,
         "LME + PG from 16-bit code, 32-bit TSS"},
        {{.cr0 = 0x30, .cr4 = 0x20, .efer = 0x100, .cs_ar = 0x93, .tr_ar = TSS32},
         0x80000031,
         false,
         "LME + PG + PE at once from real mode (unrestricted guest)"},
        /* no activation: legacy paging ignores CS.L; TR is only checked when LMA would be set */
        {{.cr0 = 0x33, .cr4 = 0x20, .cs_ar = CS32 | VMX_AR_L, .tr_ar = 0x83},
         0x80000011,
         false,
         "PG without LME: CS.L and a 16-bit TSS are legacy mode's business"},
        {{.cr0 = 0x80000011, .cr4 = 0x20, .efer = 0x500, .code64 = false, .tr_ar = 0x83},
         0x80000031,
         false,
         "PG already set: no activation, TR not checked"},
        {{.cr0 = 0x80000011, .cr4 = 0x20000, .efer = 0x500}, 0x11, true, "PG cleared, PCIDE"},
        {{.cr0 = 0x80010011, .cr4 = 0x800000, .efer = 0x500}, 0x80000011, true, "WP cleared, CET"},
        {{.cr0 = 0x80000011, .cr4 = 0x20, .efer = 0x500, .code64 = false},
         0x11,
         false,
         "PG cleared in compatibility mode"},
        {{.cr0 = 0x10}, 0x80000001, false, "PG with PE, from real mode"},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = cases[i].val;
        const char *why = cr0_write_check(&cases[i].c, &v);
        if (!!why != cases[i].gp)
            fail_msg("case %u (%s): verdict %s", i, cases[i].rule, why ? why : "ok");
    }
    /* undefined low bits are ignored, ET reads 1 */
    struct cr_ctx c = LONG_CTX;
    uint64_t v = 0x80050033 | (1u << 8) | (1u << 28);
    assert_null(cr0_write_check(&c, &v));
    assert_int_equal(v, 0x80050033);
    v = 0x80050023;
    assert_null(cr0_write_check(&c, &v));
    assert_int_equal(v, 0x80050033);
}

static void test_cr4(void **state)
{
    (void)state;
    struct cr_ctx c = LONG_CTX;
    assert_null(cr4_write_check(&c, c.cr4));
    assert_non_null(cr4_write_check(&c, c.cr4 | CR4_VMXE));
    assert_non_null(cr4_write_check(&c, c.cr4 | (1ull << 31))); /* not supported */
    assert_non_null(cr4_write_check(&c, c.cr4 & ~CR4_PAE));     /* PAE off in long mode */
    c.cr4_supported |= CR4_LA57;
    assert_non_null(cr4_write_check(&c, c.cr4 | CR4_LA57)); /* LA57 in long mode */
    c.cr4 &= ~CR4_PCIDE;
    c.cr3 = 0x1001;
    assert_non_null(cr4_write_check(&c, c.cr4 | CR4_PCIDE)); /* PCID with CR3[11:0] */
    c.cr3 = 0x1000;
    assert_null(cr4_write_check(&c, c.cr4 | CR4_PCIDE));
    c.cr0 &= ~CR0_WP;
    c.cr4_supported |= CR4_CET;
    assert_non_null(cr4_write_check(&c, c.cr4 | CR4_CET)); /* CET without WP */
    struct cr_ctx legacy = {.cr0 = 0x80000011, .cr4 = 0x20, .cr4_supported = 0x3f77ff};
    assert_non_null(cr4_write_check(&legacy, 0x20 | CR4_PCIDE)); /* PCIDE outside IA-32e */
    assert_null(cr4_write_check(&legacy, 0));                    /* PAE off: legal here */
}

/* MOV to CR3: operand size, PCID no-flush, reserved bits, PDPTE loads (cr3_write_check) */
static void test_cr3(void **state)
{
    (void)state;
    struct cr_ctx c = LONG_CTX;
    struct cr3_write w;
    c.cr4 &= ~CR4_PCIDE;
    assert_null(cr3_write_check(&c, 0x123456018ull, 46, &w)); /* PWT/PCD and ignored bits kept */
    assert_int_equal(w.cr3, 0x123456018ull);
    assert_true(w.flush);
    assert_false(w.pdptes);
    assert_non_null(cr3_write_check(&c, 1ull << 63 | 0x1000, 46, &w)); /* bit 63 without PCIDs */
    assert_non_null(cr3_write_check(&c, 1ull << 46 | 0x1000, 46, &w)); /* beyond MAXPHYADDR */
    assert_null(cr3_write_check(&c, (1ull << 46) - 0x1000, 46, &w));
    c.cr4 |= CR4_PCIDE;
    assert_null(cr3_write_check(&c, 1ull << 63 | 0x5000 | 0x801, 46, &w)); /* no-flush */
    assert_int_equal(w.cr3, 0x5801);
    assert_false(w.flush);
    assert_null(cr3_write_check(&c, 0x5801, 46, &w));
    assert_true(w.flush);
    assert_non_null(cr3_write_check(&c, 1ull << 63 | 1ull << 50, 46, &w)); /* bit 63 goes first */
    assert_null(cr3_write_check(&c, 1ull << 63 | 1ull << 50, 52, &w));
    /* LAM's user bits: reserved without LAM, CR3's with it (Linux 6.4+ sets them per process) */
    assert_non_null(cr3_write_check(&c, 1ull << 61 | 0x5000, 46, &w));
    assert_non_null(cr3_write_check(&c, 1ull << 62 | 0x5000, 46, &w));
    c.lam = true;
    assert_null(cr3_write_check(&c, 1ull << 63 | 3ull << 61 | 0x5000, 46, &w));
    assert_int_equal(w.cr3, 3ull << 61 | 0x5000);
    assert_non_null(cr3_write_check(&c, 1ull << 60 | 0x5000, 46, &w));
    c.lam = false;
    /* compatibility mode: a 32-bit operand, CR3[63:32] cleared, no bit 63 to ask for no flush */
    c.code64 = false;
    assert_null(cr3_write_check(&c, 0xffffffff00003000ull | 1ull << 63, 46, &w));
    assert_int_equal(w.cr3, 0x3000);
    assert_true(w.flush);
    /* outside IA-32e mode: PAE paging loads the PDPTEs, 32-bit paging and no paging do not */
    struct cr_ctx pae = {.cr0 = 0x80000011, .cr4 = 0x20};
    assert_null(cr3_write_check(&pae, 0xabcd00000001f000ull, 36, &w));
    assert_int_equal(w.cr3, 0x1f000);
    assert_true(w.pdptes);
    struct cr_ctx legacy = {.cr0 = 0x80000011};
    assert_null(cr3_write_check(&legacy, 0x2000, 36, &w));
    assert_false(w.pdptes);
    legacy.cr0 = 0x11;
    pae.cr0 = 0x11;
    assert_null(cr3_write_check(&pae, 0x2000, 36, &w));
    assert_false(w.pdptes);
}

static void test_pdptes(void **state)
{
    (void)state;
    struct cr_ctx c = {.cr0 = 0x11, .cr4 = 0x20};
    assert_true(cr_write_loads_pdptes(&c, 0x80000011, 0x20)); /* PAE paging turned on */
    assert_false(cr_write_loads_pdptes(&c, 0x11, 0x20));      /* no paging */
    c.efer = 0x100;
    assert_false(cr_write_loads_pdptes(&c, 0x80000011, 0x20)); /* IA-32e: PML4, no PDPTEs */
    struct cr_ctx on = {.cr0 = 0x80000011, .cr4 = 0x20};
    assert_true(cr_write_loads_pdptes(&on, 0x80000011, 0xa0));  /* PGE changed */
    assert_false(cr_write_loads_pdptes(&on, 0x80000019, 0x20)); /* TS only */
    uint64_t ok[4] = {0x1001, 0, 0x2001, 0x3000 | 0x6};         /* not present: ignored */
    assert_null(pdptes_check(ok, 36));
    uint64_t bad[4] = {0x1001 | (1u << 5), 0, 0, 0};
    assert_non_null(pdptes_check(bad, 36));
    uint64_t high[4] = {0, (1ull << 36) | 1, 0, 0};
    assert_non_null(pdptes_check(high, 36));
    assert_null(pdptes_check(high, 40));
}

static void test_apic_base(void **state)
{
    (void)state;
    const uint64_t x = 0xfee00000 | APIC_BASE_EN | APIC_BASE_BSP;
    assert_null(apic_base_check(x, x, 39, true));
    assert_null(apic_base_check(x, 0xfed00000 | APIC_BASE_EN | APIC_BASE_BSP, 39, true));
    assert_non_null(apic_base_check(x, x | 1, 39, true));                   /* bit 0 */
    assert_non_null(apic_base_check(x, x | (1u << 9), 39, true));           /* bit 9 */
    assert_non_null(apic_base_check(x, x | (1ull << 39), 39, true));        /* > MAXPHYADDR */
    assert_non_null(apic_base_check(x, x | APIC_BASE_EXTD, 39, false));     /* no x2APIC */
    assert_null(apic_base_check(x, x | APIC_BASE_EXTD, 39, true));          /* xAPIC -> x2APIC */
    assert_non_null(apic_base_check(x | APIC_BASE_EXTD, x, 39, true));      /* x2APIC -> xAPIC */
    assert_null(apic_base_check(x | APIC_BASE_EXTD, 0xfee00000, 39, true)); /* -> disabled */
    assert_non_null(apic_base_check(0xfee00000, x | APIC_BASE_EXTD, 39, true));
    assert_non_null(apic_base_check(x, 0xfee00000 | APIC_BASE_EXTD, 39, true)); /* invalid */
}

/* a guest RDMSR reports the CPU's value (read after the write), with the
 * guest's window as the base; before, it reported the value the guest wrote */
static void test_apic_base_view(void **state)
{
    (void)state;
    const uint64_t home = 0xfee00000, bsp = APIC_BASE_BSP;
    /* the CPU ignored a re-enable (Bochs keeps a disabled APIC off until reset): EN reads 0 */
    assert_int_equal(apic_base_guest_view(home | bsp, home | bsp | APIC_BASE_EN), home | bsp);
    /* a moved window: its base, the CPU's bits */
    assert_int_equal(apic_base_guest_view(home | bsp | APIC_BASE_EN, 0x80000000 | APIC_BASE_EN),
                     0x80000000 | bsp | APIC_BASE_EN);
    /* an AP: no BSP bit whatever the guest wrote; x2APIC as the CPU holds it */
    assert_int_equal(
        apic_base_guest_view(home | APIC_BASE_EN | APIC_BASE_EXTD, home | bsp | APIC_BASE_EN),
        home | APIC_BASE_EN | APIC_BASE_EXTD);
    /* bits 51:12 are the window's, every other bit the CPU's */
    assert_int_equal(apic_base_guest_view(0xfff00000000fffffull, 0x000ffffffffff000ull), ~0ull);
    assert_int_equal(apic_base_guest_view(0, ~0ull), 0x000ffffffffff000ull);
}

static void test_mtrr(void **state)
{
    (void)state;
    const uint64_t cap = 0x508; /* 8 variable, fixed, WC */
    assert_true(mtrr_is_msr(0x2ff) && mtrr_is_msr(0x250) && mtrr_is_msr(0x26f) &&
                mtrr_is_msr(0x200) && mtrr_is_msr(0xfe));
    assert_false(mtrr_is_msr(0x251) || mtrr_is_msr(0x277) || mtrr_is_msr(0x260));
    assert_non_null(mtrr_write_check(0xfe, cap, cap, 39));
    assert_null(mtrr_write_check(0x2ff, 0xc06, cap, 39));
    assert_non_null(mtrr_write_check(0x2ff, 0xc02, cap, 39));   /* type 2 */
    assert_non_null(mtrr_write_check(0x2ff, 0x1c06, cap, 39));  /* bit 12 */
    assert_non_null(mtrr_write_check(0x2ff, 0xc01, 0x108, 39)); /* WC not offered */
    assert_null(mtrr_write_check(0x250, 0x0606060606060606ull, cap, 39));
    assert_non_null(mtrr_write_check(0x250, 0x0606060606060706ull, cap, 39));
    assert_null(mtrr_write_check(0x200, 0x80000006, cap, 39));
    assert_non_null(mtrr_write_check(0x200, 0x80000106, cap, 39)); /* bits 11:8 */
    assert_non_null(mtrr_write_check(0x200, (1ull << 39) | 6, cap, 39));
    assert_null(mtrr_write_check(0x201, 0x7f80000800ull, cap, 39));
    assert_non_null(mtrr_write_check(0x201, 0x7f80000801ull, cap, 39));
    assert_non_null(mtrr_write_check(0x210, 6, cap, 39)); /* pair 8 of 8 */
}

/* which #DB exits are the tracer's own steps, and which of those the exit loop may trace
 * without the exit handler (trace/shim/trace_step.c, vcpu/vcpu_loop.c) */
/* which exits a block ends how (blk_exit_action) */
static void test_blk_exit(void **state)
{
    (void)state;
    const uint32_t hw = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION, own = 1u << DB_VECTOR;
    const uint32_t db = hw | DB_VECTOR, pf = hw | INTR_INFO_DELIVER_CODE | 14;
    /* the breakpoint: B0 alone */
    assert_int_equal(blk_exit_action(0, db, 1, 0, own), BLK_BREAKPOINT);
    assert_int_equal(blk_exit_action(0, db, 1 | 0x4000, 0, own), BLK_DISPATCH); /* and BS */
    assert_int_equal(blk_exit_action(0, db, 2, 0, own), BLK_DISPATCH);          /* B1: not ours */
    /* B1-B3 may be set for breakpoints not enabled (SDM Vol. 3B 18.2.3): still ours */
    assert_int_equal(blk_exit_action(0, db, 1 | 2 | 8, 0, own), BLK_BREAKPOINT);
    assert_int_equal(blk_exit_action(0, db, 1 | 0x2000, 0, own), BLK_DISPATCH); /* BD */
    assert_int_equal(blk_exit_action(0, db, 1, INTR_INFO_VALID | 0x20, own), BLK_DISPATCH);
    assert_int_equal(blk_exit_action(0, db | INTR_INFO_UNBLOCK_NMI, 1, 0, own), BLK_DISPATCH);
    /* faults the VMM does not intercept happen again; the ones it does are its own */
    assert_int_equal(blk_exit_action(0, pf, 0x1234, 0, own), BLK_REENTER);
    assert_int_equal(blk_exit_action(0, hw | 13 | INTR_INFO_DELIVER_CODE, 0, 0, own), BLK_REENTER);
    assert_int_equal(blk_exit_action(0, hw | 6, 0, 0, own), BLK_REENTER);
    assert_int_equal(blk_exit_action(0, hw | 6, 0, 0, own | 1u << 6), BLK_DISPATCH);
    assert_int_equal(blk_exit_action(0, pf, 0, INTR_INFO_VALID | 0x20, own), BLK_DISPATCH);
    /* traps, aborts, software exceptions and NMIs are not re-run */
    assert_int_equal(blk_exit_action(0, hw | 3, 0, 0, own), BLK_DISPATCH); /* #BP */
    assert_int_equal(blk_exit_action(0, hw | 8 | INTR_INFO_DELIVER_CODE, 0, 0, own),
                     BLK_DISPATCH);                                         /* #DF */
    assert_int_equal(blk_exit_action(0, hw | 18, 0, 0, own), BLK_DISPATCH); /* #MC */
    assert_int_equal(blk_exit_action(0, INTR_INFO_VALID | INTR_TYPE_SOFT_EXCEPTION | 3, 0, 0, own),
                     BLK_DISPATCH);
    assert_int_equal(blk_exit_action(0, INTR_INFO_VALID | INTR_TYPE_NMI_INTR | 2, 0, 0, own),
                     BLK_DISPATCH);
    /* an external interrupt is taken by the guest at the next entry */
    assert_int_equal(blk_exit_action(EXIT_REASON_EXTERNAL_INTERRUPT, 0, 0, 0, own), BLK_REENTER);
    assert_int_equal(
        blk_exit_action(EXIT_REASON_EXTERNAL_INTERRUPT, 0, 0, INTR_INFO_VALID | 0x30, own),
        BLK_DISPATCH);
    /* every other exit */
    assert_int_equal(blk_exit_action(10 /* CPUID */, 0, 0, 0, own), BLK_DISPATCH);
    assert_int_equal(blk_exit_action(48 /* EPT violation */, 0, 0, 0, own), BLK_DISPATCH);
}

/* when a block may go out (blk_entry_allowed), and the DR7 it runs with (blk_dr7) */
static void test_blk_entry(void **state)
{
    (void)state;
    const uint64_t fl = 0x202; /* IF */
    assert_true(blk_entry_allowed(fl, 0, GUEST_ACTIVITY_ACTIVE, 0x400));
    assert_false(blk_entry_allowed(0x2, 0, GUEST_ACTIVITY_ACTIVE, 0x400)); /* IF = 0 */
    assert_false(blk_entry_allowed(fl, GUEST_INTR_STATE_STI, GUEST_ACTIVITY_ACTIVE, 0x400));
    assert_false(blk_entry_allowed(fl, GUEST_INTR_STATE_MOV_SS, GUEST_ACTIVITY_ACTIVE, 0x400));
    assert_false(blk_entry_allowed(fl, 0, GUEST_ACTIVITY_HLT, 0x400));
    for (unsigned b = 0; b < 8; b++) /* any of the guest's L0-L3 / G0-G3 */
        assert_false(blk_entry_allowed(fl, 0, GUEST_ACTIVITY_ACTIVE, 0x400 | 1u << b));
    assert_false(blk_entry_allowed(fl, 0, GUEST_ACTIVITY_ACTIVE, 0x400 | 1u << 13)); /* GD */
    /* R/W and LEN of disabled breakpoints do not matter */
    assert_true(blk_entry_allowed(fl, 0, GUEST_ACTIVITY_ACTIVE, 0x400 | 0xfu << 20));
    /* DR0 becomes an enabled 1-byte instruction breakpoint, the rest of DR7 the guest's */
    assert_int_equal(blk_dr7(0x400), 0x401);
    assert_int_equal(blk_dr7(0x400 | 0xfull << 16 | 0xfull << 28), 0x401 | 0xfull << 28);
}

/* a loop block's lead (blk_lead_pending): RF still set at an exit on it says it did not run */
static void test_blk_lead(void **state)
{
    (void)state;
    const uint64_t lead = 0x401000, fl = 0x202;
    assert_true(blk_lead_pending(false, lead, lead, fl | RFLAGS_RF)); /* an event came first */
    assert_false(blk_lead_pending(false, lead, lead, fl));            /* a full iteration ran */
    assert_false(blk_lead_pending(true, lead, lead, fl | RFLAGS_RF)); /* the breakpoint: it ran */
    assert_false(blk_lead_pending(false, lead + 2, lead, fl | RFLAGS_RF)); /* inside the body */
}

static void test_db_step(void **state)
{
    const uint32_t db = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | DB_VECTOR;
    (void)state;
    assert_true(db_qual_single_step(PENDING_DBG_BS));
    /* BD (the guest's general-detect fault) with it: the guest's to see */
    assert_false(db_qual_single_step(PENDING_DBG_BS | (1u << 13)));
    assert_false(db_qual_single_step(0));
    for (unsigned b = 0; b < 4; b++) /* a breakpoint hit as well: the guest's #DB */
        assert_false(db_qual_single_step(PENDING_DBG_BS | 1u << b));
    assert_false(db_qual_single_step(1)); /* a breakpoint alone */

    assert_true(db_exit_plain_step(db, PENDING_DBG_BS, 0));
    assert_false(db_exit_plain_step(db, PENDING_DBG_BS | 2, 0));
    assert_false(db_exit_plain_step(db, 0, 0));
    /* an IRET that unblocked NMIs faulted: the handler re-blocks them */
    assert_false(db_exit_plain_step(db | INTR_INFO_UNBLOCK_NMI, PENDING_DBG_BS, 0));
    /* not a hardware #DB: an ICEBP (privileged software exception), #BP, an NMI, no info */
    assert_false(db_exit_plain_step(INTR_INFO_VALID | INTR_TYPE_PRIV_SW_EXCEPTION | DB_VECTOR,
                                    PENDING_DBG_BS, 0));
    assert_false(
        db_exit_plain_step(INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | 3, PENDING_DBG_BS, 0));
    assert_false(db_exit_plain_step(INTR_INFO_VALID | INTR_TYPE_NMI_INTR | 2, PENDING_DBG_BS, 0));
    assert_false(db_exit_plain_step(DB_VECTOR, PENDING_DBG_BS, 0));
    /* during event delivery: the event must be delivered again */
    assert_false(db_exit_plain_step(db, PENDING_DBG_BS, INTR_INFO_VALID | INTR_TYPE_EXT_INTR | 32));
    assert_true(db_exit_plain_step(db, PENDING_DBG_BS, INTR_TYPE_EXT_INTR | 32)); /* not valid */
}

/* the oracle, written from the SDM apart from the code under test: VM entry's rule for the
 * single-step trap (Vol. 3C 27.3.1.5, pending debug exceptions) -- with blocking by STI or
 * MOV SS, or activity state HLT, BS must be 1 when RFLAGS.TF = 1 and DEBUGCTL.BTF = 0, and 0
 * when TF = 0 or BTF = 1.  true: the state passes. */
static bool dbg_entry_consistent(uint64_t rflags, uint64_t debugctl, uint64_t pending_dbg,
                                 uint32_t intr, uint32_t activity)
{
    if (!(intr & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS)) &&
        activity != GUEST_ACTIVITY_HLT)
        return true;
    bool step = (rflags & RFLAGS_TF) && !(debugctl & DEBUGCTL_BTF);
    return !!(pending_dbg & PENDING_DBG_BS) == step;
}

/* trap-flag stepping always enters with a state VM entry accepts (SDM Vol. 3C 27.3.1.5; the
 * STI case is XSA-308's failure), arming drops the pending step only where that is allowed,
 * disarming always */
static void test_tf_step(void **state)
{
    (void)state;
    /* the rule itself */
    assert_true(dbg_entry_consistent(RFLAGS_TF, 0, PENDING_DBG_BS, GUEST_INTR_STATE_STI, 0));
    assert_false(dbg_entry_consistent(RFLAGS_TF, 0, 0, GUEST_INTR_STATE_STI, 0));
    assert_false(dbg_entry_consistent(RFLAGS_TF, 0, 0, GUEST_INTR_STATE_MOV_SS, 0));
    assert_false(dbg_entry_consistent(RFLAGS_TF, 0, 0, 0, GUEST_ACTIVITY_HLT));
    assert_false(dbg_entry_consistent(0, 0, PENDING_DBG_BS, GUEST_INTR_STATE_MOV_SS, 0));
    assert_false(dbg_entry_consistent(RFLAGS_TF, DEBUGCTL_BTF, PENDING_DBG_BS, 1, 0));
    assert_true(dbg_entry_consistent(RFLAGS_TF, DEBUGCTL_BTF, 0, GUEST_INTR_STATE_STI, 0));
    assert_true(dbg_entry_consistent(RFLAGS_TF, 0, 0, 0, 0)); /* no blocking: anything goes */
    assert_true(dbg_entry_consistent(0, 0, PENDING_DBG_BS, 0, 0));

    const uint32_t intrs[] = {0, GUEST_INTR_STATE_STI, GUEST_INTR_STATE_MOV_SS,
                              GUEST_INTR_STATE_NMI, GUEST_INTR_STATE_STI | GUEST_INTR_STATE_NMI};
    for (unsigned i = 0; i < sizeof(intrs) / sizeof(intrs[0]); i++)
        for (uint32_t act = 0; act < 2; act++)
            for (unsigned k = 0; k < 4; k++) {
                struct tf_step_state in = {.rflags = 2 | (k & 1 ? RFLAGS_TF : 0),
                                           .pending_dbg = k & 2 ? PENDING_DBG_BS : 0,
                                           .intr = intrs[i],
                                           .activity = act};
                struct tf_step_state s = in;
                tf_step_arm(&s);
                assert_true(s.rflags & RFLAGS_TF);
                assert_true(dbg_entry_consistent(s.rflags, 0, s.pending_dbg, s.intr, s.activity));
                assert_false(s.intr & GUEST_INTR_STATE_STI); /* the step's #DB ended it */
                assert_int_equal(s.intr & ~GUEST_INTR_STATE_STI, in.intr & ~GUEST_INTR_STATE_STI);
                /* the pending step is dropped unless entry needs it */
                bool needed = (in.intr & GUEST_INTR_STATE_MOV_SS) || act == GUEST_ACTIVITY_HLT;
                assert_int_equal(!!(s.pending_dbg & PENDING_DBG_BS), needed);
                s = in;
                tf_step_disarm(&s);
                assert_false(s.rflags & RFLAGS_TF);
                assert_false(s.pending_dbg & PENDING_DBG_BS); /* the tracer's step, never owed */
                assert_true(dbg_entry_consistent(s.rflags, 0, s.pending_dbg, s.intr, s.activity));
                struct tf_step_state off = s;
                tf_guest_restore(&s, false); /* the guest's own TF back at a window's close */
                assert_true(s.rflags & RFLAGS_TF);
                assert_true(dbg_entry_consistent(s.rflags, 0, s.pending_dbg, s.intr, s.activity));
                assert_int_equal(s.intr, in.intr);
                s = off; /* and with its DEBUGCTL.BTF */
                tf_guest_restore(&s, true);
                assert_true(dbg_entry_consistent(s.rflags, DEBUGCTL_BTF, s.pending_dbg, s.intr,
                                                 s.activity));
                assert_int_equal(s.intr, in.intr);
            }
}

/* a #DB that exited reaches the guest with DR6 as the CPU would have set it */
static void test_dr6_deliver(void **state)
{
    (void)state;
    const uint64_t init = 0xffff0ff0ull;                                 /* DR6 after reset */
    assert_int_equal(db_dr6_deliver(init, 0x1), 0xffff0ff1ull);          /* B0: DR0 hit */
    assert_int_equal(db_dr6_deliver(init, 0x4000), 0xffff4ff0ull);       /* BS: single step */
    assert_int_equal(db_dr6_deliver(init, 0x2000), 0xffff2ff0ull);       /* BD */
    assert_int_equal(db_dr6_deliver(init | 0x2, 0x1), 0xffff0ff1ull);    /* stale B1 replaced */
    assert_int_equal(db_dr6_deliver(init | 0x4000, 0x1), 0xffff4ff1ull); /* BS kept (sticky) */
    assert_int_equal(db_dr6_deliver(init, 0x4009), 0xffff4ff9ull);       /* B0, B3 and BS */
    /* bits the qualification does not define never come from it */
    assert_int_equal(db_dr6_deliver(init, 0xffffffffffff0ff0ull), init);
}

/* the tracer's single step and a guest breakpoint in one #DB: the guest is told its breakpoint,
 * not a single step it never asked for; a step alone is nothing of the guest's */
static void test_db_guest_part(void **state)
{
    (void)state;
    const uint64_t init = 0xffff0ff0ull;
    assert_int_equal(db_qual_guest_part(0x4000), 0);          /* the tracer's step alone */
    assert_int_equal(db_qual_guest_part(0x4001), 0x1);        /* + a DR0 data breakpoint */
    assert_int_equal(db_qual_guest_part(0x400c), 0xc);        /* + B2, B3 */
    assert_int_equal(db_qual_guest_part(0x6000), 0x2000);     /* + BD */
    assert_int_equal(db_qual_guest_part(0x5002), 0x1002);     /* + B1, enabled-bp bit */
    assert_int_equal(db_qual_guest_part(0x1000 | 0x4000), 0); /* no condition of its own */
    assert_int_equal(db_dr6_deliver(init, db_qual_guest_part(0x4001)), 0xffff0ff1ull); /* no BS */
}

/* a #PF the tracer's exception bitmap made exit reaches the guest with CR2 = the faulting address
 * (the exit qualification), as if it had not exited; nothing else writes CR2 */
static void test_pf_cr2(void **state)
{
    (void)state;
    uint64_t cr2 = 0x1234;
    const uint32_t pf = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | PF_VECTOR;
    assert_true(pf_reflect_cr2(pf, 0x7ffd1000ull, &cr2));
    assert_int_equal(cr2, 0x7ffd1000ull);
    assert_true(pf_reflect_cr2(pf | INTR_INFO_DELIVER_CODE | INTR_INFO_UNBLOCK_NMI,
                               0xffff888000000000ull, &cr2));
    assert_int_equal(cr2, 0xffff888000000000ull);
    cr2 = 0x1234;
    assert_false(pf_reflect_cr2(pf & ~INTR_INFO_VALID, 0x5000, &cr2));
    assert_false(
        pf_reflect_cr2(INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | GP_VECTOR, 0x5000, &cr2));
    assert_false(
        pf_reflect_cr2(INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | DB_VECTOR, 0x5000, &cr2));
    /* INT 14 from software is not a page fault: CR2 untouched */
    assert_false(pf_reflect_cr2(INTR_INFO_VALID | INTR_TYPE_SOFT_INTR | PF_VECTOR, 0x5000, &cr2));
    assert_int_equal(cr2, 0x1234);
}

static void test_nmi(void **state)
{
    (void)state;
    for (int w = 0; w < 2; w++) { /* with and without NMI-window exiting */
        assert_int_equal(nmi_owed_action(false, false, 0, 0, w), NMI_NONE);
        assert_int_equal(nmi_owed_action(true, false, 0, 0, w), NMI_INJECT);
        assert_int_equal(nmi_owed_action(true, false, 1, 0, w), NMI_INJECT); /* wakes a HLT */
        assert_int_equal(nmi_owed_action(true, false, 0, GUEST_INTR_STATE_NMI, w), NMI_WAIT);
        /* STI alone: one step, not the NMI window a CPU may deliver at once (attacker review) */
        assert_int_equal(nmi_owed_action(true, false, 0, GUEST_INTR_STATE_STI, w), NMI_WAIT_STEP);
        assert_int_equal(
            nmi_owed_action(true, false, 0, GUEST_INTR_STATE_STI | GUEST_INTR_STATE_NMI, w),
            NMI_WAIT);
        assert_int_equal(nmi_owed_action(true, false, 0, GUEST_INTR_STATE_MOV_SS, w), NMI_WAIT);
        assert_int_equal(nmi_owed_action(true, false, 3, 0, w), NMI_LATER); /* wait-for-SIPI */
        assert_int_equal(nmi_owed_action(true, true, 3, 0, w), NMI_LATER);
        assert_int_equal(nmi_owed_action(true, false, 2, 0, w), NMI_LATER); /* shutdown */
    }
    /* behind an event being injected: the window opens after its delivery
     * (without it the NMI waited for an unrelated later exit) */
    assert_int_equal(nmi_owed_action(true, true, 0, 0, true), NMI_WAIT);
    assert_int_equal(nmi_owed_action(true, true, 0, 0, false), NMI_LATER);
    /* a HLT inside the guest's NMI handler: the window opens at its IRET after an interrupt
     * woke it; MTF would only spin there */
    assert_int_equal(nmi_owed_action(true, false, 1, GUEST_INTR_STATE_NMI, true), NMI_WAIT);
    assert_int_equal(nmi_owed_action(true, false, 1, GUEST_INTR_STATE_NMI, false), NMI_LATER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retire),
        cmocka_unit_test(test_insn_retire_mode_shortcut),
        cmocka_unit_test(test_fault_class),
        cmocka_unit_test(test_cr0),
        cmocka_unit_test(test_cr4),
        cmocka_unit_test(test_cr3),
        cmocka_unit_test(test_pdptes),
        cmocka_unit_test(test_apic_base),
        cmocka_unit_test(test_mtrr),
        cmocka_unit_test(test_nmi),
        cmocka_unit_test(test_dr6_deliver),
        cmocka_unit_test(test_pf_cr2),
        cmocka_unit_test(test_db_guest_part),
        cmocka_unit_test(test_db_step),
        cmocka_unit_test(test_blk_exit),
        cmocka_unit_test(test_blk_entry),
        cmocka_unit_test(test_blk_lead),
        cmocka_unit_test(test_tf_step),
        cmocka_unit_test(test_apic_base_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
