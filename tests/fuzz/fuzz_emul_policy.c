/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: guest-controlled CR0/CR4 values, RIP/RFLAGS/interruptibility, APIC
 * base and MTRR values through vmm/emul/emul_policy.c.  Invariants: a value the
 * policy accepts can never make VM entry fail or break an architectural rule
 * (RIP[63:32] = 0 outside 64-bit mode, PG implies PE, NW implies CD, IA-32e
 * activation only with PAE, CS.L = 0 and a 32-bit TSS in TR -- so a legacy-mode TR
 * (type 3 or 11, what VM entry allowed) is the busy 32-bit TSS IA-32e VM entry wants and CS
 * is never L with D --, no VMXE, no unsupported CR4 bit, no reserved APIC
 * base bit or invalid APIC mode, only valid MTRR memory types; a #DB that is the tracer's
 * step and a guest breakpoint at once tells the guest its breakpoint, never the step).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emul/emul_policy.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static bool type_ok(unsigned t)
{
    return t == 0 || t == 1 || t == 4 || t == 5 || t == 6;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct {
        uint64_t cr0, cr3, cr4, efer, sup, val, val4, rip, rflags, old_apic, apic, mtrr;
        uint32_t intr, msr;
        uint8_t len, flags, maxphy;
        uint32_t cs_ar, tr_ar;
    } in;
    if (size < sizeof(in))
        return 0;
    memcpy(&in, data, sizeof(in));
    unsigned maxphy = 32 + in.maxphy % 21;
    uint64_t debugctl = (in.flags & 32) ? DEBUGCTL_BTF : 0;
    struct retire_state s = {
        .rip = in.rip, .rflags = in.rflags, .debugctl = debugctl, .intr = in.intr};
    bool code64 = in.flags & 1;
    insn_retire(&s, in.len % 16, code64);
    if (!code64)
        CHECK(s.rip >> 32 == 0);
    CHECK(!(s.rflags & RFLAGS_RF));
    CHECK(!(s.intr & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS)));
    /* single-step on instructions: TF; on branches (BTF): never after an emulated one */
    CHECK(!!(s.pending_dbg & PENDING_DBG_BS) == (!!(in.rflags & RFLAGS_TF) && !debugctl));

    struct cr_ctx c = {.cr0 = in.cr0,
                       .cr3 = in.cr3,
                       .cr4 = in.cr4,
                       .efer = in.efer,
                       .code64 = in.flags & 2,
                       .cr4_supported = in.sup & ~CR4_VMXE,
                       .cs_ar = in.cs_ar,
                       .tr_ar = in.tr_ar};
    uint64_t v = in.val;
    if (!cr0_write_check(&c, &v)) {
        CHECK(v >> 32 == 0 && (v & CR0_ET));
        CHECK(!(v & CR0_PG) || (v & CR0_PE));
        CHECK(!(v & CR0_NW) || (v & CR0_CD));
        if ((v & CR0_PG) && !(c.cr0 & CR0_PG) && (c.efer & EFER_LME_)) {
            CHECK(c.cr4 & CR4_PAE);
            /* SDM Vol. 3A 10.8.5: never from a CS with L set, never with a 16-bit TSS */
            CHECK(!(c.cs_ar & VMX_AR_L));
            unsigned tr_type = c.tr_ar & 0xf;
            if (tr_type == 3 || tr_type == 11) /* the TR types VM entry let in legacy mode */
                CHECK(tr_type == 11);          /* the one it lets in IA-32e mode */
            CHECK(!((c.cs_ar & VMX_AR_L) && (c.cs_ar & VMX_AR_DB)));
        }
        if (!(v & CR0_PG))
            CHECK(!(c.cr4 & CR4_PCIDE) && !(c.code64 && (c.cr0 & CR0_PG)));
    }
    if (!cr4_write_check(&c, in.val4)) {
        CHECK(!(in.val4 & CR4_VMXE) && !(in.val4 & ~c.cr4_supported));
        if (c.efer & EFER_LMA_)
            CHECK(in.val4 & CR4_PAE);
    }
    bool x2 = in.flags & 4;
    if (!apic_base_check(in.old_apic, in.apic, maxphy, x2)) {
        CHECK(!(in.apic & 0x2ff) && !(in.apic >> maxphy));
        CHECK(x2 || !(in.apic & APIC_BASE_EXTD));
        CHECK(!(in.apic & APIC_BASE_EXTD) || (in.apic & APIC_BASE_EN));
    }
    /* a guest RDMSR: every bit the CPU's but the window's base (bits 51:12) */
    uint64_t view = apic_base_guest_view(in.old_apic, in.apic);
    CHECK(((view ^ in.old_apic) & ~0x000ffffffffff000ull) == 0);
    CHECK(((view ^ in.apic) & 0x000ffffffffff000ull) == 0);
    uint32_t msr = 0x1f0 + in.msr % 0x120;
    if (mtrr_is_msr(msr) && !mtrr_write_check(msr, in.mtrr, 0x508, maxphy)) {
        CHECK(msr != MSR_MTRR_CAP);
        if (msr == MSR_MTRR_DEF_TYPE || (msr < 0x210 && !(msr & 1)))
            CHECK(type_ok(in.mtrr & 0xff));
        if (msr >= 0x250 && msr <= 0x26f)
            for (unsigned i = 0; i < 8; i++)
                CHECK(type_ok((in.mtrr >> (8 * i)) & 0xff));
    }
    {
        uint32_t act = in.intr % 4;
        enum nmi_action a =
            nmi_owed_action(in.flags & 8, in.flags & 16, act, in.intr, in.flags & 32);
        /* never an NMI injected into blocking, behind another event or into an activity state
         * that holds NMIs (VM entry would fail: SDM Vol. 3C 27.3.1.5) */
        if (a == NMI_INJECT)
            CHECK(!(in.flags & 16) && act <= 1 &&
                  !(in.intr &
                    (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS | GUEST_INTR_STATE_NMI)));
        /* a window or MTF is armed only where the guest can reach an instruction boundary */
        if (a == NMI_WAIT)
            CHECK(act <= 1 && ((in.flags & 32) || act == 0));
        /* the NMI window is never armed for blocking by STI alone */
        if ((in.intr & 3u) == GUEST_INTR_STATE_STI && !(in.intr & GUEST_INTR_STATE_NMI) &&
            act == 0 && !(in.flags & 16) && (in.flags & 8))
            CHECK(a == NMI_WAIT_STEP);
        if (!(in.flags & 8))
            CHECK(a == NMI_NONE);
    }
    {
        /* a #DB with the tracer's BS: the guest is told only conditions of its own (never BS),
         * the tracer consumes it only when there are none, and DR6 as delivered has no bit
         * the qualification does not define (SDM Vol. 3C table 28-1) */
        uint64_t q = in.val, g = db_qual_guest_part(q);
        CHECK(!(g & PENDING_DBG_BS));
        CHECK(!g || (g & (0xfull | 1ull << 13)));
        CHECK(db_qual_single_step(q) == (!!(q & PENDING_DBG_BS) && !g));
        uint64_t dr6 = db_dr6_deliver(in.val4, g);
        CHECK((dr6 & ~0xfull) == ((in.val4 & ~0xfull) | (g & 1ull << 13))); /* no new BS */
        CHECK((dr6 & 0xf) == (g & 0xf));
    }
    return 0;
}
