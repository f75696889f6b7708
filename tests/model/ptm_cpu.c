/* SPDX-License-Identifier: MIT */
/*
 * Bare-metal reference for RDMSR/WRMSR of the RTIT MSRs.  See ptm_cpu.h.
 *
 * Written from the SDM text only (no engine code).  Citations, as numbered in the edition read
 * (Intel SDM Vol. 3C chapter 36 "Intel Processor Trace", 325384-06x; later editions number the
 * chapter 32/33 and "Enabling and Configuration MSRs" 33.2.8, same section and table titles):
 *   [GEN]   36.2.7.1 "General Considerations": reserved bits and reserved encodings #GP;
 *           writing back the same IA32_RTIT_CTL value does not #GP even with TraceEn=1.
 *   [CTL]   Table 36-6 "IA32_RTIT_CTL MSR" (36.2.7.2), bit by bit.
 *   [TEN]   36.2.7.3 "Enabling and Disabling Packet Generation with TraceEn", paragraph
 *           "Other Writes to IA32_RTIT_CTL": any attempt to modify IA32_RTIT_CTL while
 *           TraceEn=1 #GPs unless the same write also clears TraceEn.
 *   [STS]   Table 36-7 "IA32_RTIT_STATUS MSR" (36.2.7.4).
 *   [ADR]   36.2.7.5 "IA32_RTIT_ADDRn_A and IA32_RTIT_ADDRn_B MSRs".
 *   [CR3]   36.2.7.6 "IA32_RTIT_CR3_MATCH MSR".
 *   [BASE]  36.2.7.7 "IA32_RTIT_OUTPUT_BASE MSR", Table 36-8.
 *   [MASK]  36.2.7.8 "IA32_RTIT_OUTPUT_MASK_PTRS MSR", Table 36-9.
 *   [C14]   Table 36-11 "CPUID Leaf 14H Enumeration of Intel Processor Trace Capabilities".
 *   [C14.1] Table 36-12 "CPUID Leaf 14H, sub-leaf 1H Enumeration ...".
 *   [CPUID] Vol. 2A CPUID, leaf 14H (EBX[6] PSB/PMI preservation, EBX[7] event trace, EBX[8]
 *           TNT disable: newer than the Vol. 3C edition above, so cited from the CPUID page).
 *   [MSRT]  Vol. 4 Table 2-2 "IA-32 Architectural MSRs", rows 560H-587H (existence conditions).
 */
#include "model/ptm_cpu.h"

#include <string.h>

#include "pt/rtit.h"

enum { R_EAX = 0, R_EBX = 1, R_ECX = 2, R_EDX = 3 };

#define MTC_FREQ_MASK   0xfull
#define CYC_THRESH_MASK 0xfull
#define PSB_FREQ_MASK   0xfull
#define ADDR_CFG_MASK   0xfull
#define ADDR_CFG_MAX    2u
#define MAX_RANGES      4u

static bool cap0(const struct ptm_cpu *c, int reg, uint64_t bit)
{
    return (c->caps.leaf14[0][reg] & bit) != 0;
}

/* [C14] "If CPUID.(EAX=14H, ECX=0):EAX reports a non-zero value, additional capabilities ... are
 * described in the sub-leaves": sub-leaf 1 counts only when 14.0:EAX >= 1. */
static uint32_t cap1(const struct ptm_cpu *c, int reg)
{
    return c->caps.leaf14[0][R_EAX] >= 1 ? c->caps.leaf14[1][reg] : 0;
}

/* [C14.1] EAX[2:0]: number of ADDRn_CFG fields and ADDRn_A/B pairs.  "Currently, no processors
 * support more than 4 address ranges", and only 4 pairs of MSRs exist: clamp to 4. */
static unsigned num_ranges(const struct ptm_cpu *c)
{
    unsigned n = cap1(c, R_EAX) & 7u;
    return n > MAX_RANGES ? MAX_RANGES : n;
}

/* [MSRT] every RTIT MSR exists only if CPUID.(7,0):EBX[25] = 1.  "leaf14 absent" (CPUID returns
 * all-zero leaf 14H, as for an unsupported leaf) is taken as no PT as well. */
static bool has_pt(const struct ptm_cpu *c)
{
    uint32_t any = 0;

    for (int s = 0; s < 2; s++)
        for (int r = 0; r < 4; r++)
            any |= c->caps.leaf14[s][r];
    return c->caps.pt && any != 0;
}

static bool is_addr_msr(uint32_t msr)
{
    return msr >= MSR_IA32_RTIT_ADDR0_A && msr <= MSR_IA32_RTIT_ADDR3_B;
}

static bool msr_exists(const struct ptm_cpu *c, uint32_t msr)
{
    if (!has_pt(c))
        return false;
    switch (msr) {
    case MSR_IA32_RTIT_CTL:    /* [MSRT] 570H: PT */
    case MSR_IA32_RTIT_STATUS: /* [MSRT] 571H: PT */
        return true;
    case MSR_IA32_RTIT_CR3_MATCH:
        /* [C14] EBX[0]=0: "any access to IA32_RTIT_CR3_MATCH will #GP fault" */
        return cap0(c, R_EBX, PT_CAP_EBX_CR3_FILTER);
    case MSR_IA32_RTIT_OUTPUT_BASE:
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        /* [BASE]/[MASK]: "Accesses to this MSR are supported only if ... ECX[bit 0] or ECX[bit 2]
         * are set. Otherwise WRMSR or RDMSR cause a #GP"; [MSRT] rows 560H/561H */
        return cap0(c, R_ECX, PT_CAP_ECX_TOPA) || cap0(c, R_ECX, PT_CAP_ECX_SINGLE_RANGE);
    default:
        /* [ADR]: "Processors that enumerate support for N ranges support ADDR0..ADDR(N-1)";
         * [MSRT] 580H+2n/581H+2n: "If CPUID.(EAX=14H,ECX=1):EAX[2:0] > n" */
        if (is_addr_msr(msr))
            return (msr - MSR_IA32_RTIT_ADDR0_A) / 2 < num_ranges(c);
        return false; /* not an RTIT MSR: outside this model */
    }
}

/* The IA32_RTIT_CTL bits this CPU lets software set at all ([CTL], [C14], [CPUID]). */
static uint64_t ctl_settable(const struct ptm_cpu *c)
{
    /* [CTL] TraceEn(0), OS(2), User(3), TSCEn(10), DisRETC(11), BranchEn(13) carry no CPUID
     * condition.  BranchEn: the CPUID page words EBX[3] as "MTC ... and suppression of COFI-based
     * packets", but Table 36-6 gives BranchEn no condition and Table 36-11 EBX[3]=0 names only
     * MTCEn/MTCFreq as #GP; Linux KVM follows that reading (BranchEn always settable). */
    uint64_t m = RTIT_CTL_TRACEEN | RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_TSC_EN |
                 RTIT_CTL_DISRETC | RTIT_CTL_BRANCH_EN;

    /* [C14] EBX[1]=0: "Any attempt to set IA32_RTIT_CTL.PSBFreq, to set IA32_RTIT_CTL.CYCEn ...
     * will #GP"; [CTL] CycThresh/PSBFreq "reserved if ... EBX.CPSB_CAM[bit 1] = 0" */
    if (cap0(c, R_EBX, PT_CAP_EBX_PSB_CYC))
        m |= RTIT_CTL_CYCLEACC | RTIT_CTL_CYC_THRESH | RTIT_CTL_PSB_FREQ;
    /* [CPUID] EBX[5]: "Writes can set IA32_RTIT_CTL[4] (PwrEvtEn)" */
    if (cap0(c, R_EBX, PT_CAP_EBX_POWER_EVENT))
        m |= RTIT_CTL_PWR_EVT_EN;
    /* [CPUID] EBX[4]: "Writes can set IA32_RTIT_CTL[12] (PTWEn) and IA32_RTIT_CTL[5] (FUPonPTW)" */
    if (cap0(c, R_EBX, PT_CAP_EBX_PTWRITE))
        m |= RTIT_CTL_PTW_EN | RTIT_CTL_FUP_ON_PTW;
    /* [C14] EBX[0]=0: "writes that set IA32_RTIT_CTL.CR3Filter to 1 ... will #GP" */
    if (cap0(c, R_EBX, PT_CAP_EBX_CR3_FILTER))
        m |= RTIT_CTL_CR3EN;
    /* [CTL] MTCEn, MTCFreq: "reserved if CPUID.(EAX=14H, ECX=0):EBX.MTC[bit 3] = 0" */
    if (cap0(c, R_EBX, PT_CAP_EBX_MTC))
        m |= RTIT_CTL_MTC_EN | RTIT_CTL_MTC_RANGE;
    /* [CTL] ToPA: "WRMSR ... that sets this bit causes #GP, if ... ECX.TOPA[bit 0] = 0" */
    if (cap0(c, R_ECX, PT_CAP_ECX_TOPA))
        m |= RTIT_CTL_TOPA;
    /* [C14] ECX[3]=0: "IA32_RTIT_CTL.FabricEn is reserved. Write 1 ... will #GP fault" */
    if (cap0(c, R_ECX, PT_CAP_ECX_TRANSPORT))
        m |= RTIT_CTL_FABRIC_EN;
    /* [CPUID] EBX[7]: "writes can set IA32_RTIT_CTL[31] (EventEn)"; else bit 31 is reserved */
    if (cap0(c, R_EBX, PT_CAP_EBX_EVENT_TRACE))
        m |= RTIT_CTL_EVENT_EN;
    /* [CPUID] EBX[8]: "writes can set IA32_RTIT_CTL[55] (DisTNT)" */
    if (cap0(c, R_EBX, PT_CAP_EBX_TNT_DISABLE))
        m |= RTIT_CTL_NOTNT;
    /* [CPUID] EBX[6]: "Writes can set IA32_RTIT_CTL[56] (InjectPsbPmiOnEnable)" */
    if (cap0(c, R_EBX, PT_CAP_EBX_PSB_PMI_PRESERVE))
        m |= RTIT_CTL_INJ_PSB_PMI;
    /* [CTL] ADDRn_CFG "reserved if CPUID.(EAX=14H, ECX=1):EAX.RANGECNT[2:0] <= n" (the table
     * prints ">= 0", an obvious typo; [MSRT] reads "If ... EAX[2:0] > n" for the field) */
    for (unsigned n = 0; n < num_ranges(c); n++)
        m |= RTIT_CTL_ADDR(n);
    /* Everything else -- bits 18, 23, 30:28, 54:48, 63:57 -- is "Reserved, MBZ" [CTL]. */
    return m;
}

static bool in_bitmap(uint32_t bitmap, uint64_t enc)
{
    return ((bitmap >> enc) & 1u) != 0;
}

/* All the value checks of an IA32_RTIT_CTL write; true if it may be written. */
static bool ctl_value_ok(const struct ptm_cpu *c, uint64_t v)
{
    /* [GEN] "any MSR write that attempts to change bits marked reserved ... will cause a #GP" */
    if (v & ~ctl_settable(c))
        return false;
    /* [C14.1] EAX[31:16]: "A write to IA32_RTIT_CTL.MTCFreq with unsupported encoding will cause
     * #GP" -- the check is on the field, whatever MTCEn is; "applies only if ... EBX.MTC[bit 3] =
     * 1 ..., otherwise the MTCFreq field is reserved to 0" (caught by the mask above). */
    if (cap0(c, R_EBX, PT_CAP_EBX_MTC) &&
        !in_bitmap(cap1(c, R_EAX) >> 16, PTV_FIELD(v, RTIT_CTL_MTC_RANGE_SHIFT, MTC_FREQ_MASK)))
        return false;
    /* [C14.1] EBX[15:0] CycThresh and EBX[31:16] PSBFreq bitmaps: unsupported encoding #GP;
     * only when EBX.CPSB_CAM[bit 1] = 1 (else the fields are reserved, caught above).  The SDM
     * puts no CYCEn condition on the CycThresh check, so it applies whatever CYCEn is. */
    if (cap0(c, R_EBX, PT_CAP_EBX_PSB_CYC)) {
        if (!in_bitmap(cap1(c, R_EBX) & 0xffff,
                       PTV_FIELD(v, RTIT_CTL_CYC_THRESH_SHIFT, CYC_THRESH_MASK)))
            return false;
        if (!in_bitmap(cap1(c, R_EBX) >> 16, PTV_FIELD(v, RTIT_CTL_PSB_FREQ_SHIFT, PSB_FREQ_MASK)))
            return false;
    }
    /* [CTL] ADDRn_CFG "3..15: Reserved (#GP)"; [C14] EBX[2]: "Each ADDRn_CFG field accepts a
     * value in the range of 0:2 inclusive".  Fields n >= ranges are already forced to 0. */
    for (unsigned n = 0; n < MAX_RANGES; n++)
        if (PTV_FIELD(v, RTIT_CTL_ADDR_SHIFT(n), ADDR_CFG_MASK) > ADDR_CFG_MAX)
            return false;
    /* [CTL] ToPA: "WRMSR to IA32_RTIT_CTL that sets TraceEn but clears this bit and FabricEn
     * would cause #GP, if CPUID.(EAX=14H, ECX=0):ECX.SNGLRGNOUT[bit 2] = 0" */
    if ((v & RTIT_CTL_TRACEEN) && !(v & (RTIT_CTL_TOPA | RTIT_CTL_FABRIC_EN)) &&
        !cap0(c, R_ECX, PT_CAP_ECX_SINGLE_RANGE))
        return false;
    return true;
}

/* [STS] the bits software may write (when TraceEn = 0). */
static uint64_t status_writable(const struct ptm_cpu *c)
{
    /* [STS] Error(4), Stopped(5): "When TraceEn is cleared, software can write this bit" */
    uint64_t m = RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED;

    /* [CPUID] EBX[6]: "Writes can also set PendToPAPMI and PendPSB" (bits 7, 6); without it the
     * bits are reserved (the older Table 36-7 has bits 31:6 "Reserved, MBZ"). */
    if (cap0(c, R_EBX, PT_CAP_EBX_PSB_PMI_PRESERVE))
        m |= RTIT_STATUS_PENDPSB | RTIT_STATUS_PENDTOPAPMI;
    /* [STS] PacketByteCnt (48:32) is software-writable, but [C14] EBX[1]=0: "Any attempt to ...
     * write a non-zero value to IA32_RTIT_STATUS.PacketByteCnt ... will #GP fault" ([MSRT] row
     * 571H gives the field the EBX[1] condition too). */
    if (cap0(c, R_EBX, PT_CAP_EBX_PSB_CYC))
        m |= RTIT_STATUS_BYTECNT;
    return m;
}

/* [STS] FilterEn(0), ContextEn(1), TriggerEn(2): "Writes are ignored" (no #GP, no change). */
#define STATUS_IGNORED (RTIT_STATUS_FILTEREN | RTIT_STATUS_CONTEXTEN | RTIT_STATUS_TRIGGEREN)

/* [ADR] "Writes must ensure that the address is properly sign-extended, otherwise a #GP fault
 * will result" ([MSRT]: 47:0 Virtual Address, 63:48 SignExt_VA; 57-bit CPUs sign-extend bit 56). */
static bool canonical(uint64_t v, unsigned bits)
{
    unsigned sh = 64 - bits;
    return (uint64_t)((int64_t)(v << sh) >> sh) == v;
}

void ptm_cpu_init(struct ptm_cpu *c, struct ptm *pt, const struct ptm_cpu_caps *caps)
{
    /* [GEN] "All configuration MSRs for Intel PT are cleared on a cold RESET" */
    memset(c, 0, sizeof(*c));
    c->pt = pt;
    c->caps = *caps;
    pt->ctl = 0;
    pt->status = 0;
    pt->output_base = 0;
    pt->output_mask_ptrs = RTIT_MASK_LOWER; /* [MASK] 6:0 read as 1 */
}

int ptm_cpu_wrmsr(struct ptm_cpu *c, uint32_t msr, uint64_t val)
{
    struct ptm *p = c->pt;
    bool tracing = (p->ctl & RTIT_CTL_TRACEEN) != 0;

    if (!msr_exists(c, msr))
        return -1; /* [MSRT], [C14]: no PT / absent MSR: WRMSR #GPs */

    if (msr == MSR_IA32_RTIT_CTL) {
        /* [TEN] "Any attempt to modify IA32_RTIT_CTL while TraceEn is set will result in a #GP
         * unless the same write also clears TraceEn"; [GEN] the same value may be written back */
        if (tracing && (val & RTIT_CTL_TRACEEN) && val != p->ctl)
            return -1;
        if (!ctl_value_ok(c, val))
            return -1;
        if (!tracing && (val & RTIT_CTL_TRACEEN))
            ptm_enable(p, val, p->status, p->output_base, p->output_mask_ptrs);
        else if (tracing && !(val & RTIT_CTL_TRACEEN)) {
            ptm_disable(p);
            p->ctl = val;
        } else
            p->ctl = val;
        return 0;
    }

    /* Every other RTIT MSR can be written only while TraceEn = 0: [STS] (Error/Stopped "When
     * TraceEn is cleared, software can write this bit"), [ADR]/[CR3]/[BASE]/[MASK] ("This MSR can
     * be written only when IA32_RTIT_CTL.TraceEn is 0; otherwise WRMSR causes a #GP"). */
    if (tracing)
        return -1;

    switch (msr) {
    case MSR_IA32_RTIT_STATUS:
        /* [STS]: bit 3, 31:8 (31:6 without EBX[6]), 63:49 reserved, MBZ */
        if (val & ~(status_writable(c) | STATUS_IGNORED))
            return -1;
        p->status = (p->status & STATUS_IGNORED) | (val & ~STATUS_IGNORED);
        return 0;
    case MSR_IA32_RTIT_OUTPUT_BASE:
        /* [BASE] Table 36-8: 6:0 "Reserved, Must be 0"; 63:MAXPHYADDR reserved.  (Bits 11:7 set
         * with ToPA=1 do not #GP: "will not cause a #GP, but an operational error".) */
        if (val & RTIT_MASK_LOWER)
            return -1;
        if (c->caps.maxphyaddr < 64 && (val >> c->caps.maxphyaddr) != 0)
            return -1;
        p->output_base = val;
        return 0;
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        /* [MASK] Table 36-9: LowerMask 6:0 "Forced to 1, writes are ignored"; 31:7
         * MaskOrTableOffset and 63:32 Output Offset are plain R/W: no #GP. */
        p->output_mask_ptrs = val | RTIT_MASK_LOWER;
        return 0;
    case MSR_IA32_RTIT_CR3_MATCH:
        /* [CR3] "IA32_RTIT_CR3_MATCH[4:0] are reserved and must be 0; an attempt to set those
         * bits using WRMSR causes a #GP."  Bits 63:5 "hold the CR3 address value to match": the
         * SDM names no MAXPHYADDR limit here (unsure what silicon does with bits >= MAXPHYADDR;
         * the text says they are value bits, so they are accepted). */
        if (val & 0x1full)
            return -1;
        c->cr3_match = val;
        return 0;
    default: /* ADDRn_A/B, existence checked above */
        if (!canonical(val, c->caps.vaddr_bits ? c->caps.vaddr_bits : 48))
            return -1;
        c->addr[(msr - MSR_IA32_RTIT_ADDR0_A) / 2][(msr - MSR_IA32_RTIT_ADDR0_A) % 2] = val;
        return 0;
    }
}

int ptm_cpu_rdmsr(const struct ptm_cpu *c, uint32_t msr, uint64_t *val)
{
    const struct ptm *p = c->pt;

    if (!msr_exists(c, msr))
        return -1; /* [MSRT], [C14], [BASE], [MASK]: RDMSR of an absent MSR #GPs */
    switch (msr) {
    case MSR_IA32_RTIT_CTL:
        *val = p->ctl;
        break;
    case MSR_IA32_RTIT_STATUS:
        *val = p->status; /* as the output model holds it (TriggerEn, Error, ... set by it) */
        break;
    case MSR_IA32_RTIT_OUTPUT_BASE:
        *val = p->output_base;
        break;
    case MSR_IA32_RTIT_OUTPUT_MASK_PTRS:
        *val = p->output_mask_ptrs | RTIT_MASK_LOWER; /* [MASK] 6:0 forced to 1 */
        break;
    case MSR_IA32_RTIT_CR3_MATCH:
        *val = c->cr3_match;
        break;
    default:
        *val = c->addr[(msr - MSR_IA32_RTIT_ADDR0_A) / 2][(msr - MSR_IA32_RTIT_ADDR0_A) % 2];
        break;
    }
    return 0;
}

const uint32_t ptm_rtit_msrs[PTM_NR_RTIT_MSRS] = {
    MSR_IA32_RTIT_OUTPUT_BASE, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, MSR_IA32_RTIT_CTL,
    MSR_IA32_RTIT_STATUS,      MSR_IA32_RTIT_CR3_MATCH,        MSR_IA32_RTIT_ADDR_A(0),
    MSR_IA32_RTIT_ADDR_B(0),   MSR_IA32_RTIT_ADDR_A(1),        MSR_IA32_RTIT_ADDR_B(1),
    MSR_IA32_RTIT_ADDR_A(2),   MSR_IA32_RTIT_ADDR_B(2),        MSR_IA32_RTIT_ADDR_A(3),
    MSR_IA32_RTIT_ADDR_B(3)};

/*
 * Packet filtering (SDM Vol. 3C 33.2.4 "Trace Filtering"): ContextEn = TraceEn and the CPL is
 * enabled (OS for CPL 0, User for CPL > 0) and, with CR3Filter, CR3[63:5] = CR3_MATCH[63:5];
 * FilterEn = no ADDRn_CFG is 1 (FilterEn), or the IP is in [ADDRn_A, ADDRn_B] for one that is.
 * Both go into STATUS bits 1 and 0 while TraceEn = 1; packets are generated only with both set.
 */
int ptm_cpu_exec(struct ptm_cpu *c, unsigned cpl, uint64_t cr3, uint64_t ip, const uint8_t *pkt,
                 size_t n, bool psb)
{
    struct ptm *m = c->pt;
    uint64_t ctl = m->ctl;
    bool ctx, filt = true, any = false;

    if (!(ctl & RTIT_CTL_TRACEEN))
        return 0;
    ctx = cpl == 0 ? (ctl & RTIT_CTL_OS) != 0 : (ctl & RTIT_CTL_USR) != 0;
    if ((ctl & RTIT_CTL_CR3EN) && (cr3 & ~0x1full) != (c->cr3_match & ~0x1full))
        ctx = false;
    for (unsigned i = 0; i < 4; i++) {
        if (PTV_FIELD(ctl, RTIT_CTL_ADDR_SHIFT(i), 0xf) != RTIT_ADDR_CFG_FILTER)
            continue;
        if (!any)
            filt = false;
        any = true;
        if (ip >= c->addr[i][0] && ip <= c->addr[i][1])
            filt = true;
    }
    m->status &= ~(RTIT_STATUS_CONTEXTEN | RTIT_STATUS_FILTEREN);
    m->status |= (ctx ? RTIT_STATUS_CONTEXTEN : 0) | (filt ? RTIT_STATUS_FILTEREN : 0);
    if (!ctx || !filt || !ptm_active(m))
        return 0;
    ptm_packet(m, pkt, n, psb);
    return 1;
}
