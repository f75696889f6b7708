/* SPDX-License-Identifier: MIT */
/* Software VM-entry checks on guest state (SDM Vol. 3C 27.3.1.1, 27.3.1.2, 27.3.1.4). */
#include "emul/guest_check.h"
#include <stddef.h>

#define AR_TYPE(ar)   ((ar)&0xfu)
#define AR_S          (1u << 4)
#define AR_DPL(ar)    (((ar) >> 5) & 3u)
#define AR_P          (1u << 7)
#define AR_L          (1u << 13)
#define AR_DB         (1u << 14)
#define AR_G          (1u << 15)
#define AR_UNUSABLE   (1u << 16)
#define AR_RESERVED   (0xf00u | 0xfffe0000u) /* bits 11:8 and 31:17 */
#define CR0_PE        (1ull << 0)
#define CR0_PG        (1ull << 31)
#define CR4_PAE       (1ull << 5)
#define EFER_LME      (1ull << 8)
#define EFER_LMA      (1ull << 10)
#define RFLAGS_FIXED1 (1ull << 1)
#define RFLAGS_VM     (1ull << 17)

/* limit vs. granularity (27.3.1.2): G=0 needs limit[31:20] = 0, G=1 needs limit[11:0] = 0xfff */
static bool limit_ok(const struct vmx_seg *s)
{
    if ((s->limit & 0xfff) != 0xfff && (s->ar & AR_G))
        return false;
    if ((s->limit & 0xfff00000u) && !(s->ar & AR_G))
        return false;
    return true;
}

static const char *data_seg_check(const struct vmx_seg *s)
{
    if (s->ar & AR_UNUSABLE)
        return NULL;
    if (!(AR_TYPE(s->ar) & 1))
        return "a data segment is not marked accessed";
    if ((AR_TYPE(s->ar) & 8) && !(AR_TYPE(s->ar) & 2))
        return "a data-segment register holds an execute-only code segment";
    if (!(s->ar & AR_S) || !(s->ar & AR_P))
        return "a data segment is a system descriptor or not present";
    if (s->ar & AR_RESERVED)
        return "a data segment has reserved access-right bits set";
    if (!limit_ok(s))
        return "a data segment's limit does not match its granularity";
    return NULL;
}

const char *vmx_guest_state_check(const struct vmx_guest_state *g)
{
    /* 27.3.1.1: control registers and IA32_EFER */
    uint64_t fixed0 = g->cr0_fixed0;
    if (g->unrestricted)
        fixed0 &= ~(CR0_PE | CR0_PG);
    if ((g->cr0 & fixed0) != fixed0 || (g->cr0 & ~g->cr0_fixed1))
        return "CR0 violates the VMX fixed bits";
    if ((g->cr4 & g->cr4_fixed0) != g->cr4_fixed0 || (g->cr4 & ~g->cr4_fixed1))
        return "CR4 violates the VMX fixed bits";
    if ((g->cr0 & CR0_PG) && !(g->cr0 & CR0_PE))
        return "CR0.PG without CR0.PE";
    if (g->ia32e && (!(g->cr0 & CR0_PG) || !(g->cr4 & CR4_PAE)))
        return "IA-32e mode guest without CR0.PG and CR4.PAE";
    if (!!(g->efer & EFER_LMA) != g->ia32e ||
        ((g->cr0 & CR0_PG) && !!(g->efer & EFER_LME) != g->ia32e))
        return "IA32_EFER.LMA/LME disagree with the IA-32e mode guest control";
    /* 27.3.1.4: RFLAGS */
    if (!(g->rflags & RFLAGS_FIXED1) || (g->rflags & 0xffffffffffc08028ull))
        return "RFLAGS reserved bits";
    if (g->ia32e && (g->rflags & RFLAGS_VM))
        return "RFLAGS.VM in IA-32e mode";

    /* 27.3.1.2: segment registers (protected/long mode; real mode is never launched) */
    const struct vmx_seg *cs = &g->seg[VSEG_CS], *ss = &g->seg[VSEG_SS], *tr = &g->seg[VSEG_TR];
    const struct vmx_seg *ldtr = &g->seg[VSEG_LDTR];
    if (cs->ar & AR_UNUSABLE)
        return "CS is unusable";
    unsigned cst = AR_TYPE(cs->ar);
    if (!(cst == 9 || cst == 11 || cst == 13 || cst == 15 || (g->unrestricted && cst == 3)))
        return "CS is not an accessed code segment";
    if (!(cs->ar & AR_S) || !(cs->ar & AR_P) || (cs->ar & AR_RESERVED))
        return "CS is a system descriptor, not present or has reserved bits";
    if (g->ia32e && (cs->ar & AR_L) && (cs->ar & AR_DB))
        return "CS has both L and D/B set";
    if (!limit_ok(cs))
        return "CS limit does not match its granularity";
    if ((cst == 9 || cst == 11) && AR_DPL(cs->ar) != AR_DPL(ss->ar))
        return "CS.DPL differs from SS.DPL";
    if (!(ss->ar & AR_UNUSABLE)) {
        unsigned t = AR_TYPE(ss->ar);
        if (t != 3 && t != 7)
            return "SS is not a read/write accessed data segment";
        if ((ss->sel & 3) != (cs->sel & 3) && !g->unrestricted)
            return "SS.RPL differs from CS.RPL";
    }
    for (unsigned i = 0; i < NR_VSEGS; i++) {
        if (i == VSEG_CS || i == VSEG_LDTR || i == VSEG_TR)
            continue;
        const char *why = data_seg_check(&g->seg[i]);
        if (why)
            return why;
    }
    if ((tr->sel & 4) || (tr->ar & AR_UNUSABLE))
        return "TR is unusable or in the LDT (a 64-bit guest needs a busy TSS)";
    if (AR_TYPE(tr->ar) != 11 && !(AR_TYPE(tr->ar) == 3 && !g->ia32e))
        return "TR is not a busy TSS";
    if ((tr->ar & AR_S) || !(tr->ar & AR_P) || (tr->ar & AR_RESERVED) || !limit_ok(tr))
        return "TR descriptor is malformed";
    if (!(ldtr->ar & AR_UNUSABLE) &&
        ((ldtr->sel & 4) || AR_TYPE(ldtr->ar) != 2 || (ldtr->ar & AR_S) || !(ldtr->ar & AR_P) ||
         (ldtr->ar & AR_RESERVED) || !limit_ok(ldtr)))
        return "LDTR descriptor is malformed";
    return NULL;
}
