/* SPDX-License-Identifier: MIT */
/*
 * The INIT / SIPI state and decisions (vmm/emul/vcpu_reset.c): every SDM Vol. 3A
 * 9.1.1 Table 9-1 value field by field, the INIT/SIPI action matrix, and the
 * joint test: the state of every kind, for all 256 SIPI vectors, made into a
 * VMCS guest state with the Bochs fixed bits passes vmx_guest_state_check()
 * (vmm/emul/guest_check.c) and the Vol. 3C 27.3.1 rules that file does not model
 * (extra_entry_check() below).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "emul/vcpu_reset.h"
#include "emul/guest_check.h"
#include "vmx/vcpu.h" /* GPR_* */

#define SIG_SKX 0x00050654u /* CPUID.1:EAX of a Skylake-SP, family 6 model 0x55 */

/* Bochs corei7_skylake_x (values of tests/unit/emul/test_guest_check.c; VMX_MISC from
 * docs/TEST-VEHICLES.md: bits 6/7/8 = HLT, shutdown, wait-for-SIPI supported) */
#define BOCHS_CR0_FIXED0 0x80000021ull /* PE, NE, PG */
#define BOCHS_CR0_FIXED1 0xffffffffull
#define BOCHS_CR4_FIXED0 0x2000ull /* VMXE */
#define BOCHS_CR4_FIXED1 0x3767ffull
#define BOCHS_VMX_MISC   0x600401e0ull

#define CR0_PE (1ull << 0)
#define CR0_PG (1ull << 31)

static void assert_seg(const struct vmx_seg *s, uint16_t sel, uint64_t base, uint32_t limit,
                       uint32_t ar)
{
    assert_int_equal(s->sel, sel);
    assert_int_equal(s->base, base);
    assert_int_equal(s->limit, limit);
    assert_int_equal(s->ar, ar);
}

/* field by field (struct padding is not part of the state) */
static void assert_state_equal(const struct vreset_state *a, const struct vreset_state *b)
{
    assert_memory_equal(a->gpr, b->gpr, sizeof(a->gpr));
    assert_int_equal(a->rip, b->rip);
    assert_int_equal(a->rflags, b->rflags);
    assert_int_equal(a->cr0, b->cr0);
    assert_int_equal(a->cr3, b->cr3);
    assert_int_equal(a->cr4, b->cr4);
    assert_int_equal(a->efer, b->efer);
    assert_int_equal(a->dr7, b->dr7);
    const struct vmx_seg *sa[] = {&a->es, &a->cs, &a->ss, &a->ds, &a->fs, &a->gs, &a->ldtr, &a->tr};
    const struct vmx_seg *sb[] = {&b->es, &b->cs, &b->ss, &b->ds, &b->fs, &b->gs, &b->ldtr, &b->tr};
    for (unsigned i = 0; i < 8; i++)
        assert_seg(sa[i], sb[i]->sel, sb[i]->base, sb[i]->limit, sb[i]->ar);
    assert_int_equal(a->gdtr_base, b->gdtr_base);
    assert_int_equal(a->idtr_base, b->idtr_base);
    assert_int_equal(a->gdtr_limit, b->gdtr_limit);
    assert_int_equal(a->idtr_limit, b->idtr_limit);
    assert_int_equal(a->activity, b->activity);
    assert_int_equal(a->interruptibility, b->interruptibility);
    assert_int_equal(a->pending_dbg, b->pending_dbg);
    assert_int_equal(a->cr2, b->cr2);
    assert_memory_equal(a->dr, b->dr, sizeof(a->dr));
    assert_int_equal(a->dr6, b->dr6);
}

/* every Table 9-1 ("INIT" column) register; cs_sel/cs_base/rip differ for SIPI */
static void assert_init_registers(const struct vreset_state *s, uint32_t sig, uint64_t cr0,
                                  uint16_t cs_sel, uint64_t cs_base, uint64_t rip)
{
    /* Table 9-1: EAX 0 (BIST only on power-up/RESET), EDX = 000n06xxH, the
     * processor signature; EBX, ECX, ESI, EDI, EBP, ESP 0; R8-R15 0 */
    for (unsigned i = 0; i < NR_GPRS; i++)
        assert_int_equal(s->gpr[i], i == GPR_RDX ? sig : 0);
    /* Table 9-1: EIP 0000FFF0H (SIPI: 0), EFLAGS 00000002H */
    assert_int_equal(s->rip, rip);
    assert_int_equal(s->rflags, 0x2);
    /* Table 9-1: CR0 60000010H with note 2 (CD/NW unchanged), CR2/CR3/CR4 0 */
    assert_int_equal(s->cr0, cr0);
    assert_int_equal(s->cr2, 0);
    assert_int_equal(s->cr3, 0);
    assert_int_equal(s->cr4, 0);
    /* real mode: EFER.LMA must be 0; the rest cleared as KVM/Xen do */
    assert_int_equal(s->efer, 0);
    /* Table 9-1: DR0-DR3 0, DR6 FFFF0FF0H, DR7 00000400H */
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(s->dr[i], 0);
    assert_int_equal(s->dr6, 0xffff0ff0);
    assert_int_equal(s->dr7, 0x400);
    /* Table 9-1: CS F000H/FFFF0000H/FFFFH (SIPI: VV00H/000VV000H), "Present,
     * R/W, Accessed" = 0x93 */
    assert_seg(&s->cs, cs_sel, cs_base, 0xffff, 0x93);
    /* Table 9-1: SS, DS, ES, FS, GS selector 0 base 0 limit FFFFH, "Present, R/W,
     * Accessed" */
    assert_seg(&s->ss, 0, 0, 0xffff, 0x93);
    assert_seg(&s->ds, 0, 0, 0xffff, 0x93);
    assert_seg(&s->es, 0, 0, 0xffff, 0x93);
    assert_seg(&s->fs, 0, 0, 0xffff, 0x93);
    assert_seg(&s->gs, 0, 0, 0xffff, 0x93);
    /* Table 9-1: LDTR, TR selector 0 base 0 limit FFFFH, present: LDT (type 2)
     * and busy 32-bit TSS (type 11), the types VM entry accepts */
    assert_seg(&s->ldtr, 0, 0, 0xffff, 0x82);
    assert_seg(&s->tr, 0, 0, 0xffff, 0x8b);
    /* Table 9-1: GDTR, IDTR base 0 limit FFFFH */
    assert_int_equal(s->gdtr_base, 0);
    assert_int_equal(s->gdtr_limit, 0xffff);
    assert_int_equal(s->idtr_base, 0);
    assert_int_equal(s->idtr_limit, 0xffff);
    /* INIT leaves no blocking and no pending debug exception behind */
    assert_int_equal(s->interruptibility, 0);
    assert_int_equal(s->pending_dbg, 0);
}

static void test_init_bsp(void **state)
{
    struct vreset_state s;
    vreset_state(&s, VRESET_INIT_BSP, 0x12, SIG_SKX, 0x80050033); /* a paging OS's CR0 */
    assert_init_registers(&s, SIG_SKX, 0x10, 0xf000, 0xffff0000, 0xfff0);
    assert_int_equal(s.activity, GUEST_ACTIVITY_ACTIVE); /* the vector is ignored */
}

static void test_init_ap(void **state)
{
    struct vreset_state s;
    vreset_state(&s, VRESET_INIT_AP, 0x12, SIG_SKX, 0x80050033);
    assert_init_registers(&s, SIG_SKX, 0x10, 0xf000, 0xffff0000, 0xfff0);
    /* Vol. 3C 25.4.2: an AP waits for SIPI after INIT */
    assert_int_equal(s.activity, GUEST_ACTIVITY_WAIT_SIPI);
}

static void test_sipi_every_vector(void **state)
{
    for (unsigned v = 0; v < 256; v++) {
        struct vreset_state s;
        vreset_state(&s, VRESET_SIPI, (uint8_t)v, SIG_SKX, 0x10);
        /* MP Spec B.4.2: CS:IP = VV00:0000h, base 000VV000h; the rest is INIT */
        assert_init_registers(&s, SIG_SKX, 0x10, (uint16_t)(v << 8), (uint64_t)v << 12, 0);
        assert_int_equal(s.activity, GUEST_ACTIVITY_ACTIVE);
    }
}

/* SIPI after INIT = the wait-for-SIPI state with only CS, RIP and activity changed */
static void test_sipi_patches_only_cs_rip(void **state)
{
    struct vreset_state w, r;
    vreset_state(&w, VRESET_INIT_AP, 0, SIG_SKX, 0x60000033);
    vreset_state(&r, VRESET_SIPI, 0x9a, SIG_SKX, w.cr0);
    w.cs.sel = 0x9a00;
    w.cs.base = 0x9a000;
    w.rip = 0;
    w.activity = GUEST_ACTIVITY_ACTIVE;
    assert_state_equal(&w, &r);
}

/* Table 9-1 note 2: INIT keeps CD and NW, sets ET, clears everything else */
static void test_cr0_keeps_cd_nw(void **state)
{
    static const struct {
        uint64_t old, want;
    } cases[] = {
        {0, 0x10},
        {0x60000010, 0x60000010}, /* power-up value stays */
        {0x80050033, 0x10},       /* PG AM WP NE ET MP PE: all cleared but ET */
        {0xe005003b, 0x60000010}, /* same with CD NW: CD NW kept */
        {0x40000011, 0x40000010}, /* CD alone */
        {0x20000000, 0x20000010}, /* NW alone (not reachable by MOV, kept as is) */
        {0xffffffffffffffffull, 0x60000010},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (unsigned k = VRESET_INIT_BSP; k <= VRESET_SIPI; k++) {
            struct vreset_state s;
            vreset_state(&s, (enum vreset_kind)k, 0x10, SIG_SKX, cases[i].old);
            assert_int_equal(s.cr0, cases[i].want);
        }
}

/* Table 9-1: EDX is the signature, zero-extended into RDX; nothing else of it leaks */
static void test_edx_signature(void **state)
{
    static const uint32_t sigs[] = {0, 0x600, SIG_SKX, 0x000906ea, 0xffffffffu};
    for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct vreset_state s;
        vreset_state(&s, VRESET_INIT_AP, 0, sigs[i], 0);
        assert_int_equal(s.gpr[GPR_RDX], (uint64_t)sigs[i]);
        assert_int_equal(s.gpr[GPR_RAX], 0);
    }
}

/* the output does not depend on what was in *s before */
static void test_overwrites_everything(void **state)
{
    struct vreset_state a, b;
    memset(&a, 0x00, sizeof(a));
    memset(&b, 0xa5, sizeof(b));
    vreset_state(&a, VRESET_SIPI, 0x42, SIG_SKX, 0x60000010);
    vreset_state(&b, VRESET_SIPI, 0x42, SIG_SKX, 0x60000010);
    assert_state_equal(&a, &b);
}

static const uint32_t activities[] = {GUEST_ACTIVITY_ACTIVE, GUEST_ACTIVITY_HLT,
                                      GUEST_ACTIVITY_SHUTDOWN, GUEST_ACTIVITY_WAIT_SIPI};

static void test_on_init(void **state)
{
    /* Vol. 3C 26.2: INIT exits in active, HLT and shutdown; blocked in wait-for-SIPI */
    for (unsigned i = 0; i < 4; i++) {
        uint32_t a = activities[i];
        bool wfs = a == GUEST_ACTIVITY_WAIT_SIPI;
        assert_int_equal(vreset_on_init(true, a), wfs ? VRESET_DO_NOTHING : VRESET_RESET_VECTOR);
        assert_int_equal(vreset_on_init(false, a), wfs ? VRESET_DO_NOTHING : VRESET_WAIT_SIPI);
    }
}

static void test_on_sipi(void **state)
{
    /* Vol. 3C 26.2: SIPI exits only in wait-for-SIPI, at every vector (A0h-BFh
     * reserved by the MP Spec but delivered) */
    for (unsigned v = 0; v < 256; v++)
        for (unsigned i = 0; i < 4; i++)
            assert_int_equal(vreset_on_sipi(activities[i], (uint8_t)v),
                             activities[i] == GUEST_ACTIVITY_WAIT_SIPI ? VRESET_START
                                                                       : VRESET_DO_NOTHING);
}

/* INIT-SIPI-SIPI to an AP, INITs in a row, a SIPI to a running AP: the sequence
 * of actions a guest can cause, with the activity the VMM enters each time */
static uint32_t apply(enum vreset_action act, uint32_t activity, uint8_t vec,
                      struct vreset_state *s)
{
    switch (act) {
    case VRESET_DO_NOTHING:
        return activity;
    case VRESET_RESET_VECTOR:
        vreset_state(s, VRESET_INIT_BSP, 0, SIG_SKX, s->cr0);
        break;
    case VRESET_WAIT_SIPI:
        vreset_state(s, VRESET_INIT_AP, 0, SIG_SKX, s->cr0);
        break;
    case VRESET_START:
        vreset_state(s, VRESET_SIPI, vec, SIG_SKX, s->cr0);
        break;
    }
    return s->activity;
}

static void test_sequences(void **state)
{
    struct vreset_state s = {.cr0 = 0x80050033};
    uint32_t a = GUEST_ACTIVITY_ACTIVE; /* an AP running its OS */
    a = apply(vreset_on_init(false, a), a, 0, &s);
    assert_int_equal(a, GUEST_ACTIVITY_WAIT_SIPI);
    a = apply(vreset_on_sipi(a, 0x9a), a, 0x9a, &s); /* first SIPI starts it */
    assert_int_equal(a, GUEST_ACTIVITY_ACTIVE);
    assert_int_equal(s.cs.base, 0x9a000);
    a = apply(vreset_on_sipi(a, 0x11), a, 0x11, &s); /* second SIPI: discarded */
    assert_int_equal(s.cs.base, 0x9a000);
    for (int i = 0; i < 1000; i++) /* the INIT storm: always back to wait-for-SIPI */
        a = apply(vreset_on_init(false, a), a, 0, &s);
    assert_int_equal(a, GUEST_ACTIVITY_WAIT_SIPI);
    a = apply(vreset_on_sipi(a, 0x01), a, 0x01, &s); /* and restartable */
    assert_int_equal(a, GUEST_ACTIVITY_ACTIVE);
    assert_int_equal(s.cs.sel, 0x0100);
    /* INIT to the BSP (to itself too): the reset vector, never wait-for-SIPI */
    a = apply(vreset_on_init(true, GUEST_ACTIVITY_HLT), GUEST_ACTIVITY_HLT, 0, &s);
    assert_int_equal(a, GUEST_ACTIVITY_ACTIVE);
    assert_int_equal(s.rip, 0xfff0);
}

/* --- the joint test ------------------------------------------------------ */

struct entry_profile {
    uint64_t cr0_fixed0, cr0_fixed1, cr4_fixed0, cr4_fixed1, vmx_misc;
    bool unrestricted;
};

static const struct entry_profile bochs = {
    BOCHS_CR0_FIXED0, BOCHS_CR0_FIXED1, BOCHS_CR4_FIXED0, BOCHS_CR4_FIXED1, BOCHS_VMX_MISC, true,
};

/* what exit_fault.c writes: guest CR0/CR4 with the fixed bits (PE/PG free under
 * unrestricted guest), "IA-32e mode guest" off */
static struct vmx_guest_state to_vmcs(const struct vreset_state *s, const struct entry_profile *p)
{
    uint64_t fixed0 = p->cr0_fixed0;
    if (p->unrestricted)
        fixed0 &= ~(CR0_PE | CR0_PG);
    struct vmx_seg seg[NR_VSEGS];
    const struct vmx_seg *src[NR_VSEGS] = {
        [VSEG_ES] = &s->es, [VSEG_CS] = &s->cs, [VSEG_SS] = &s->ss,     [VSEG_DS] = &s->ds,
        [VSEG_FS] = &s->fs, [VSEG_GS] = &s->gs, [VSEG_LDTR] = &s->ldtr, [VSEG_TR] = &s->tr,
    };
    for (unsigned i = 0; i < NR_VSEGS; i++)
        seg[i] = (struct vmx_seg){src[i]->sel, src[i]->base, src[i]->limit, src[i]->ar};
    struct vmx_guest_state g = {
        .cr0 = (s->cr0 | fixed0) & p->cr0_fixed1,
        .cr4 = (s->cr4 | p->cr4_fixed0) & p->cr4_fixed1,
        .efer = s->efer,
        .rflags = s->rflags,
        .ia32e = false,
        .unrestricted = p->unrestricted,
        .cr0_fixed0 = p->cr0_fixed0,
        .cr0_fixed1 = p->cr0_fixed1,
        .cr4_fixed0 = p->cr4_fixed0,
        .cr4_fixed1 = p->cr4_fixed1,
    };
    memcpy(g.seg, seg, sizeof(seg));
    return g;
}

#define AR_TYPE(ar) ((ar)&0xfu)
#define AR_DPL(ar)  (((ar) >> 5) & 3u)

static bool canonical(uint64_t a)
{
    return (uint64_t)((int64_t)(a << 16) >> 16) == a;
}

/*
 * Vol. 3C 27.3.1 rules vmm/emul/guest_check.c does not model (reported to the
 * lead; guest_check.c says "real mode is never launched", which SMP changes):
 * 27.3.1.1 DR7[63:32]; 27.3.1.2 real-mode SS/CS DPL and base widths; 27.3.1.3
 * GDTR/IDTR; 27.3.1.4 RIP and RFLAGS.VM; 27.3.1.5 activity, interruptibility,
 * pending debug exceptions.
 */
static const char *extra_entry_check(const struct vreset_state *s, const struct vmx_guest_state *g,
                                     const struct entry_profile *p)
{
    const struct vmx_seg *cs = &g->seg[VSEG_CS], *ss = &g->seg[VSEG_SS];
    bool pe = g->cr0 & CR0_PE;
    if (s->dr7 >> 32)
        return "DR7[63:32] set (load debug controls)";
    if (AR_TYPE(cs->ar) == 3 && AR_DPL(cs->ar) != 0)
        return "CS of type 3 with DPL != 0";
    if ((AR_TYPE(cs->ar) == 3 || !pe) && AR_DPL(ss->ar) != 0)
        return "SS.DPL != 0 with CR0.PE = 0 or a type-3 CS";
    if (cs->base >> 32)
        return "CS.base[63:32] set";
    for (unsigned i = VSEG_ES; i <= VSEG_DS; i++)
        if (i != VSEG_CS && !(g->seg[i].ar & 0x10000u) && (g->seg[i].base >> 32))
            return "SS/DS/ES base[63:32] set";
    if (!canonical(g->seg[VSEG_FS].base) || !canonical(g->seg[VSEG_GS].base) ||
        !canonical(g->seg[VSEG_TR].base) || !canonical(g->seg[VSEG_LDTR].base))
        return "FS/GS/TR/LDTR base not canonical";
    if (!canonical(s->gdtr_base) || !canonical(s->idtr_base) || (s->gdtr_limit >> 16) ||
        (s->idtr_limit >> 16))
        return "GDTR/IDTR base not canonical or limit[31:16] set";
    if (s->rip >> 32)
        return "RIP[63:32] set outside 64-bit mode";
    if (!pe && (g->rflags & (1ull << 17)))
        return "RFLAGS.VM with CR0.PE = 0";
    if (s->activity > GUEST_ACTIVITY_WAIT_SIPI ||
        (s->activity != GUEST_ACTIVITY_ACTIVE && !(p->vmx_misc & (1ull << (5 + s->activity)))))
        return "activity state not supported (IA32_VMX_MISC bits 8:6)";
    if (s->activity == GUEST_ACTIVITY_HLT && AR_DPL(ss->ar) != 0)
        return "HLT with SS.DPL != 0";
    if (s->interruptibility & ~0x1fu)
        return "interruptibility reserved bits";
    if ((s->interruptibility & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS)) &&
        s->activity != GUEST_ACTIVITY_ACTIVE)
        return "STI/MOV-SS blocking outside the active state";
    if ((s->interruptibility & GUEST_INTR_STATE_STI) && !(g->rflags & (1ull << 9)))
        return "STI blocking with IF = 0";
    if (s->interruptibility & (1u << 2))
        return "SMI blocking outside SMM";
    if (s->pending_dbg & ~0x1500full)
        return "pending debug exceptions reserved bits";
    return NULL;
}

static const char *entry_verdict(const struct vreset_state *s, const struct entry_profile *p)
{
    struct vmx_guest_state g = to_vmcs(s, p);
    const char *why = vmx_guest_state_check(&g);
    return why ? why : extra_entry_check(s, &g, p);
}

static void test_joint_every_kind_every_vector(void **state)
{
    static const uint64_t old_cr0s[] = {0, 0x60000010, 0x80050033, 0xe005003b, 0x40000011};
    unsigned checked = 0;
    for (unsigned k = VRESET_INIT_BSP; k <= VRESET_SIPI; k++)
        for (unsigned v = 0; v < 256; v++)
            for (unsigned c = 0; c < sizeof(old_cr0s) / sizeof(old_cr0s[0]); c++) {
                struct vreset_state s;
                vreset_state(&s, (enum vreset_kind)k, (uint8_t)v, SIG_SKX, old_cr0s[c]);
                const char *why = entry_verdict(&s, &bochs);
                if (why)
                    fail_msg("kind %u vector %#x old CR0 %#llx: %s", k, v,
                             (unsigned long long)old_cr0s[c], why);
                checked++;
            }
    assert_int_equal(checked, 3 * 256 * 5);
}

/* the oracle can fail: the same checks refuse broken variants of the state */
static void test_joint_oracle_fails(void **state)
{
    struct vreset_state s;
    struct entry_profile restricted = bochs;
    restricted.unrestricted = false;
    vreset_state(&s, VRESET_INIT_BSP, 0, SIG_SKX, 0);
    assert_non_null(entry_verdict(&s, &restricted)); /* real mode needs unrestricted guest */

    struct entry_profile no_wfs = bochs;
    no_wfs.vmx_misc &= ~(1ull << 8);
    vreset_state(&s, VRESET_INIT_AP, 0, SIG_SKX, 0);
    assert_non_null(entry_verdict(&s, &no_wfs)); /* wait-for-SIPI needs VMX_MISC[8] */
    vreset_state(&s, VRESET_INIT_BSP, 0, SIG_SKX, 0);
    assert_null(entry_verdict(&s, &no_wfs)); /* the BSP state does not */

#define BROKEN(kind, change)                                                                       \
    do {                                                                                           \
        vreset_state(&s, kind, 0x9a, SIG_SKX, 0);                                                  \
        assert_null(entry_verdict(&s, &bochs));                                                    \
        change;                                                                                    \
        assert_non_null(entry_verdict(&s, &bochs));                                                \
    } while (0)
    BROKEN(VRESET_INIT_AP, s.interruptibility = GUEST_INTR_STATE_MOV_SS);
    BROKEN(VRESET_SIPI, s.interruptibility = GUEST_INTR_STATE_STI); /* IF = 0 */
    BROKEN(VRESET_SIPI, s.ss.ar = 0xf3);                            /* SS.DPL 3 in real mode */
    BROKEN(VRESET_SIPI, s.cs.ar = 0xf3);                            /* type-3 CS, DPL 3 */
    BROKEN(VRESET_SIPI, s.cs.ar = 0x92);                            /* CS not accessed */
    BROKEN(VRESET_SIPI, s.cs.base = 1ull << 32);
    BROKEN(VRESET_SIPI, s.rip = 1ull << 32);
    BROKEN(VRESET_SIPI, s.rflags |= 1ull << 17); /* VM in real mode */
    BROKEN(VRESET_SIPI, s.efer = 0x500);         /* LMA without IA-32e mode guest */
    BROKEN(VRESET_SIPI, s.tr.ar = 0x89);         /* TSS not busy */
    BROKEN(VRESET_SIPI, s.ldtr.ar = 0x83);
    BROKEN(VRESET_SIPI, s.gdtr_limit = 0x10000);
    BROKEN(VRESET_SIPI, s.pending_dbg = 1ull << 13);
    BROKEN(VRESET_SIPI, s.activity = 4);
    BROKEN(VRESET_SIPI, s.cr0 = 0x80000010); /* PG without PE */
#undef BROKEN
}

/* the Bochs 2.7 INIT re-delivery: only INITs at the untouched SIPI start point are
 * ignored, a run of VRESET_REDELIVERY_MAX gives the vCPU up, anything else is real */
static void test_init_redelivery(void **state)
{
    struct vreset_sipi_start st = {.fresh = true, .cs_base = 0x87000};
    for (unsigned i = 1; i < VRESET_REDELIVERY_MAX; i++)
        assert_int_equal(vreset_init_redelivery(&st, 0, 0x87000), VRESET_INIT_IGNORE);
    assert_int_equal(vreset_init_redelivery(&st, 0, 0x87000), VRESET_INIT_GIVE_UP);
    /* the AP retired an instruction: a later INIT is the guest's */
    st = (struct vreset_sipi_start){.fresh = true, .cs_base = 0x87000};
    assert_int_equal(vreset_init_redelivery(&st, 2, 0x87000), VRESET_INIT_REAL);
    /* another code segment, or no SIPI start (the AP exited for something else since) */
    st = (struct vreset_sipi_start){.fresh = true, .cs_base = 0x87000};
    assert_int_equal(vreset_init_redelivery(&st, 0, 0x88000), VRESET_INIT_REAL);
    st = (struct vreset_sipi_start){.fresh = false, .cs_base = 0x87000};
    assert_int_equal(vreset_init_redelivery(&st, 0, 0x87000), VRESET_INIT_REAL);
    /* a real INIT in between restarts the count */
    st = (struct vreset_sipi_start){.fresh = true, .cs_base = 0};
    for (unsigned i = 1; i < VRESET_REDELIVERY_MAX; i++)
        assert_int_equal(vreset_init_redelivery(&st, 0, 0), VRESET_INIT_IGNORE);
    assert_int_equal(vreset_init_redelivery(&st, 4, 0), VRESET_INIT_REAL);
    assert_int_equal(st.redelivered, 0);
    assert_int_equal(vreset_init_redelivery(&st, 0, 0), VRESET_INIT_IGNORE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_bsp),
        cmocka_unit_test(test_init_ap),
        cmocka_unit_test(test_sipi_every_vector),
        cmocka_unit_test(test_sipi_patches_only_cs_rip),
        cmocka_unit_test(test_cr0_keeps_cd_nw),
        cmocka_unit_test(test_edx_signature),
        cmocka_unit_test(test_overwrites_everything),
        cmocka_unit_test(test_on_init),
        cmocka_unit_test(test_on_sipi),
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_init_redelivery),
        cmocka_unit_test(test_joint_every_kind_every_vector),
        cmocka_unit_test(test_joint_oracle_fails),
    };
    return cmocka_run_group_tests_name("vcpu_reset", tests, NULL, NULL);
}
