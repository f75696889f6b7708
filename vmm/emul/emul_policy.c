/* SPDX-License-Identifier: MIT */
/* Architectural rules of emulated CPU state (pure; see emul_policy.h). */
#include "emul/emul_policy.h"

uint64_t db_qual_guest_part(uint64_t qual)
{
    const uint64_t bd = 1ull << 13;
    uint64_t g = qual & ~PENDING_DBG_BS;
    return g & (0xf | bd) ? g : 0;
}

bool db_qual_single_step(uint64_t qual)
{
    return (qual & PENDING_DBG_BS) && !db_qual_guest_part(qual);
}

uint64_t db_dr6_deliver(uint64_t dr6, uint64_t qual)
{
    const uint64_t bd = 1ull << 13, bs = PENDING_DBG_BS;
    return (dr6 & ~0xfull) | (qual & (0xfull | bd | bs));
}

bool pf_reflect_cr2(uint32_t intr_info, uint64_t qual, uint64_t *cr2)
{
    if ((intr_info & (INTR_INFO_VALID | INTR_INFO_INTR_TYPE_MASK | INTR_INFO_VECTOR_MASK)) !=
        (INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | PF_VECTOR))
        return false;
    *cr2 = qual;
    return true;
}

bool db_exit_plain_step(uint32_t intr_info, uint64_t qual, uint32_t idt_vec_info)
{
    return intr_info == (INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | DB_VECTOR) &&
           db_qual_single_step(qual) && !(idt_vec_info & INTR_INFO_VALID);
}

#define DR7_L0     (1ull << 0)
#define DR7_BPS    0xffull /* L0-L3, G0-G3 */
#define DR7_GD     (1ull << 13)
#define DR7_RWLEN0 (0xfull << 16) /* R/W0, LEN0 */

bool blk_entry_allowed(uint64_t rflags, uint32_t interruptibility, uint32_t activity, uint64_t dr7)
{
    return (rflags & RFLAGS_IF) && !interruptibility && !activity && !(dr7 & (DR7_BPS | DR7_GD));
}

uint64_t blk_dr7(uint64_t guest_dr7)
{
    return (guest_dr7 & ~DR7_RWLEN0) | DR7_L0;
}

enum blk_action blk_exit_action(uint32_t reason, uint32_t intr_info, uint64_t qual,
                                uint32_t idt_vec_info, uint32_t own_exc)
{
    if (idt_vec_info & INTR_INFO_VALID)
        return BLK_DISPATCH; /* an event to deliver again: the handler's (SDM Vol. 3C 28.2.4) */
    if (reason == EXIT_REASON_EXTERNAL_INTERRUPT)
        return BLK_REENTER;
    unsigned vec = intr_info & INTR_INFO_VECTOR_MASK;
    uint32_t type = intr_info & INTR_INFO_INTR_TYPE_MASK;
    if (reason != EXIT_REASON_EXCEPTION_NMI || !(intr_info & INTR_INFO_VALID) ||
        type != INTR_TYPE_HARD_EXCEPTION || (intr_info & INTR_INFO_UNBLOCK_NMI))
        return BLK_DISPATCH; /* NMIs, software exceptions, every other exit */
    /* DR6 format (SDM Vol. 3C table 28-1): B0 without BD or BS is the block's instruction
     * breakpoint; B1-B3 may be set for breakpoints that are not enabled (SDM Vol. 3B 18.2.3),
     * and the guest's are all off while a block is out */
    if (vec == DB_VECTOR && (qual & 0x6001) == 1)
        return BLK_BREAKPOINT;
    if (vec != DB_VECTOR && exception_is_fault(vec) && !((own_exc >> vec) & 1))
        return BLK_REENTER;
    return BLK_DISPATCH;
}

bool blk_lead_pending(bool breakpoint, uint64_t rip, uint64_t lead_ip, uint64_t rflags)
{
    return !breakpoint && rip == lead_ip && (rflags & RFLAGS_RF);
}

bool exception_is_fault(unsigned vector)
{
    /* SDM Vol. 3A table 6-1: #DE #BR #UD #NM #TS #NP #SS #GP #PF #MF #AC #XM #VE #CP.
     * #DB is a fault or a trap depending on its cause, #BP/#OF are traps, #DF/#MC aborts. */
    static const uint32_t faults = (1u << 0) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 10) |
                                   (1u << 11) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 16) |
                                   (1u << 17) | (1u << 19) | (1u << 20) | (1u << 21);
    return vector < 32 && (faults >> vector) & 1;
}

const char *cr0_write_check(const struct cr_ctx *c, uint64_t *val)
{
    uint64_t v = *val;
    if (v >> 32)
        return "CR0 bits 63:32 set";
    if ((v & CR0_NW) && !(v & CR0_CD))
        return "CR0.NW = 1 with CR0.CD = 0";
    if ((v & CR0_PG) && !(v & CR0_PE))
        return "CR0.PG = 1 with CR0.PE = 0";
    bool paging = c->cr0 & CR0_PG;
    if ((v & CR0_PG) && !paging && (c->efer & EFER_LME_)) {
        /* activating IA-32e mode: the 64-bit mode consistency checks (SDM Vol. 3A 10.8.5
         * "Initializing IA-32e Mode", 9.8.5 in older editions) #GP(0) it when PAE is off, when
         * the current CS has L set (with D = 1 VM entry would refuse the guest, with D = 0 the
         * guest would run 64-bit code) and when TR holds a 16-bit TSS (VM entry wants a 64-bit
         * busy TSS, type 11, in IA-32e mode).  CR4.PCIDE is 0 here: it can be set only in
         * IA-32e mode (cr4_write_check), and PG cannot be cleared while it is set. */
        if (!(c->cr4 & CR4_PAE))
            return "IA-32e activation (EFER.LME, CR0.PG) with CR4.PAE = 0";
        if (c->cs_ar & VMX_AR_L)
            return "IA-32e activation with CS.L = 1";
        if (!(c->tr_ar & AR_TYPE_TSS32))
            return "IA-32e activation with a 16-bit TSS in TR";
    }
    if (!(v & CR0_PG) && paging && c->code64)
        return "CR0.PG cleared in 64-bit mode";
    if (!(v & CR0_PG) && (c->cr4 & CR4_PCIDE))
        return "CR0.PG cleared with CR4.PCIDE = 1";
    if (!(v & CR0_WP) && (c->cr4 & CR4_CET))
        return "CR0.WP cleared with CR4.CET = 1";
    /* ET is fixed to 1 on every CPU with VMX; undefined bits in 31:0 are ignored */
    *val = (v & CR0_DEFINED) | CR0_ET;
    return 0;
}

const char *cr4_write_check(const struct cr_ctx *c, uint64_t val)
{
    if (val & CR4_VMXE)
        return "CR4.VMXE: VMX is hidden from the guest";
    if (val & ~c->cr4_supported)
        return "CR4 bit this CPU does not have";
    bool lma = c->efer & EFER_LMA_;
    if (lma && !(val & CR4_PAE))
        return "CR4.PAE cleared in IA-32e mode";
    if (lma && ((val ^ c->cr4) & CR4_LA57))
        return "CR4.LA57 changed in IA-32e mode";
    if ((val & CR4_PCIDE) && !(c->cr4 & CR4_PCIDE)) {
        if (!lma)
            return "CR4.PCIDE set outside IA-32e mode";
        if (c->cr3 & 0xfff)
            return "CR4.PCIDE set with CR3[11:0] != 0";
    }
    if ((val & CR4_CET) && !(c->cr0 & CR0_WP))
        return "CR4.CET set with CR0.WP = 0";
    return 0;
}

bool cr_write_loads_pdptes(const struct cr_ctx *c, uint64_t new_cr0, uint64_t new_cr4)
{
    bool pae_paging = (new_cr0 & CR0_PG) && (new_cr4 & CR4_PAE) && !(c->efer & EFER_LME_);
    bool changed = ((new_cr0 ^ c->cr0) & (CR0_PG | CR0_CD | CR0_NW)) ||
                   ((new_cr4 ^ c->cr4) & (CR4_PAE | CR4_PGE | CR4_PSE | CR4_SMEP));
    return pae_paging && changed;
}

const char *cr3_write_check(const struct cr_ctx *c, uint64_t val, unsigned maxphyaddr,
                            struct cr3_write *out)
{
    const bool pcide = c->cr4 & CR4_PCIDE; /* only ever set in IA-32e mode (cr4_write_check) */
    bool noflush = false;
    if (!c->code64)
        val &= 0xffffffffull; /* a 32-bit operand outside 64-bit mode */
    else if (pcide) {
        noflush = val >> 63;
        val &= ~(1ull << 63);
    }
    if (c->efer & EFER_LMA_) {
        uint64_t rsvd = maxphyaddr < 64 ? ~0ull << maxphyaddr : 0;
        if (c->lam)
            rsvd &= ~(3ull << 61); /* LAM_U57, LAM_U48 (SDM Vol. 3A 4.4) */
        if (val & rsvd)
            return val >> 63 ? "CR3 bit 63 set without CR4.PCIDE" : "CR3 bits beyond MAXPHYADDR";
    }
    out->cr3 = val;
    out->flush = !noflush;
    out->pdptes = (c->cr0 & CR0_PG) && (c->cr4 & CR4_PAE) && !(c->efer & EFER_LMA_);
    return 0;
}

const char *pdptes_check(const uint64_t pdpte[4], unsigned maxphyaddr)
{
    uint64_t rsvd = 0x1e6ull; /* bits 2:1 and 8:5 (table 4-8) */
    if (maxphyaddr < 64)
        rsvd |= ~0ull << maxphyaddr; /* the address beyond MAXPHYADDR, and bit 63 */
    for (unsigned i = 0; i < 4; i++)
        if ((pdpte[i] & 1) && (pdpte[i] & rsvd))
            return "PDPTE with reserved bits set";
    return 0;
}

enum apic_mode { APIC_DISABLED, APIC_INVALID, APIC_XAPIC, APIC_X2APIC };

static enum apic_mode apic_mode(uint64_t v)
{
    bool en = v & APIC_BASE_EN, x2 = v & APIC_BASE_EXTD;
    return !en ? (x2 ? APIC_INVALID : APIC_DISABLED) : x2 ? APIC_X2APIC : APIC_XAPIC;
}

const char *apic_base_check(uint64_t old, uint64_t val, unsigned maxphyaddr, bool has_x2apic)
{
    uint64_t rsvd = 0x2ffull; /* bits 7:0 and 9 */
    if (maxphyaddr < 64)
        rsvd |= ~0ull << maxphyaddr;
    if (!has_x2apic)
        rsvd |= APIC_BASE_EXTD;
    if (val & rsvd)
        return "IA32_APIC_BASE reserved bits set";
    enum apic_mode from = apic_mode(old), to = apic_mode(val);
    /* SDM Vol. 3A 11.12.5, figure 11-27: the transitions the local APIC refuses */
    if (to == APIC_INVALID)
        return "IA32_APIC_BASE EXTD = 1 with EN = 0";
    if (from == APIC_X2APIC && to == APIC_XAPIC)
        return "x2APIC to xAPIC without disabling first";
    if (from == APIC_DISABLED && to == APIC_X2APIC)
        return "disabled to x2APIC without xAPIC first";
    return 0;
}

static const uint16_t fixed_mtrrs[11] = {0x250, 0x258, 0x259, 0x268, 0x269, 0x26a,
                                         0x26b, 0x26c, 0x26d, 0x26e, 0x26f};

/* index of a fixed-range MTRR, or -1 */
static int fixed_mtrr_index(uint32_t msr)
{
    for (int i = 0; i < 11; i++)
        if (msr == fixed_mtrrs[i])
            return i;
    return -1;
}

static bool fixed_mtrr(uint32_t msr)
{
    return fixed_mtrr_index(msr) >= 0;
}

bool mtrr_is_msr(uint32_t msr)
{
    return msr == MSR_MTRR_CAP || msr == MSR_MTRR_DEF_TYPE || fixed_mtrr(msr) ||
           (msr >= MSR_MTRR_PHYS_BASE && msr < MSR_MTRR_PHYS_BASE + 2 * 0x10);
}

bool mtrr_exists(uint32_t msr, uint64_t cap, unsigned *slot)
{
    int f = fixed_mtrr_index(msr);
    if (msr == MSR_MTRR_DEF_TYPE)
        *slot = 0;
    else if (f >= 0 && (cap & (1u << 8)))
        *slot = 1 + (unsigned)f;
    else if (msr >= MSR_MTRR_PHYS_BASE && (msr - MSR_MTRR_PHYS_BASE) / 2 < (cap & 0xff) &&
             (msr - MSR_MTRR_PHYS_BASE) / 2 < 16)
        *slot = 12 + (msr - MSR_MTRR_PHYS_BASE);
    else
        return false;
    return true;
}

static bool valid_type(unsigned t, uint64_t cap)
{
    /* UC, WC (if MTRRCAP.WC), WT, WP, WB (SDM Vol. 3A table 12-8) */
    return t == 0 || (t == 1 && (cap & (1u << 10))) || t == 4 || t == 5 || t == 6;
}

const char *mtrr_write_check(uint32_t msr, uint64_t val, uint64_t cap, unsigned maxphyaddr)
{
    uint64_t phys_rsvd = maxphyaddr < 64 ? ~0ull << maxphyaddr : 0;
    if (msr == MSR_MTRR_CAP)
        return "IA32_MTRRCAP is read-only";
    if (msr == MSR_MTRR_DEF_TYPE) {
        if (val & ~0xcffull)
            return "IA32_MTRR_DEF_TYPE reserved bits set";
        if ((val & (1u << 10)) && !(cap & (1u << 8)))
            return "IA32_MTRR_DEF_TYPE.FE without fixed-range MTRRs";
        return valid_type(val & 0xff, cap) ? 0 : "IA32_MTRR_DEF_TYPE invalid memory type";
    }
    if (fixed_mtrr(msr)) {
        if (!(cap & (1u << 8)))
            return "no fixed-range MTRRs";
        for (unsigned i = 0; i < 8; i++)
            if (!valid_type((val >> (8 * i)) & 0xff, cap))
                return "fixed-range MTRR invalid memory type";
        return 0;
    }
    unsigned n = (msr - MSR_MTRR_PHYS_BASE) / 2;
    if (n >= (cap & 0xff))
        return "no such variable-range MTRR";
    if (!(msr & 1)) {
        if (val & (phys_rsvd | 0xf00))
            return "IA32_MTRR_PHYSBASE reserved bits set";
        return valid_type(val & 0xff, cap) ? 0 : "IA32_MTRR_PHYSBASE invalid memory type";
    }
    if (val & (phys_rsvd | 0x7ff))
        return "IA32_MTRR_PHYSMASK reserved bits set";
    return 0;
}

enum nmi_action nmi_owed_action(bool pending, bool event_queued, uint32_t activity, uint32_t intr,
                                bool window)
{
    if (!pending)
        return NMI_NONE;
    /* shutdown and wait-for-SIPI hold NMIs: the next exit decides again */
    if (activity != GUEST_ACTIVITY_ACTIVE && activity != GUEST_ACTIVITY_HLT)
        return NMI_LATER;
    /* the NMI-window exit comes after the queued event is delivered (SDM Vol. 3C 26.7.6),
     * before the handler's first instruction: the NMI is taken there, as on bare metal an NMI
     * pending during a delivery is taken at the next boundary */
    if (event_queued)
        return window ? NMI_WAIT : NMI_LATER;
    /* VM entry may not inject an NMI into STI / MOV SS / NMI blocking (Vol. 3C 27.3.1.5); the
     * NMI window opens when it ends (the IRET of the guest's NMI handler, the instruction
     * after STI / MOV SS), also from HLT.  Without it, MTF steps the guest -- but not in a
     * HLT, where stepping would only spin: the next exit decides again */
    /* blocking by STI alone ends after one instruction, but a CPU may or may not hold the
     * NMI-window exit back for it (SDM Vol. 3C 26.7.6): one that does not would exit at once,
     * again and again, and the instruction after STI would never run.  One MTF step instead */
    if ((intr & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS | GUEST_INTR_STATE_NMI)) ==
            GUEST_INTR_STATE_STI &&
        activity == GUEST_ACTIVITY_ACTIVE)
        return NMI_WAIT_STEP;
    if (intr & (GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS | GUEST_INTR_STATE_NMI))
        return window || activity != GUEST_ACTIVITY_HLT ? NMI_WAIT : NMI_LATER;
    return NMI_INJECT;
}
