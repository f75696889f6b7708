/* SPDX-License-Identifier: MIT */
/*
 * One remapping unit's enable sequence and fault records (see vtd.h).  The order follows VT-d
 * 11.4.4 (GCMD: one command per write, the other enables kept, each confirmed in GSTS) and 6.5
 * (a root-table pointer set is followed by a global context-cache invalidation and then a global
 * IOTLB invalidation before the tables are relied on):
 *
 *   START       queued invalidation the firmware left on is turned off (the register-based
 *               invalidations below need it off, 6.5.2); refused if the firmware's interrupt
 *               remapping depends on it.  Interrupt remapping itself is left as it is (off on
 *               every firmware we know): see docs/ARCHITECTURE.md 2.6.
 *   SET_ROOT    RTADDR = our root table (legacy mode), GCMD.SRTP, wait GSTS.RTPS
 *   WBF         where CAP.RWBF: flush the write buffer, wait GSTS.WBFS clear
 *   CC, IOTLB   global invalidations, each waited for and checked to have been performed
 *   FAULTS      stale fault records cleared, the fault interrupt masked (faults are polled)
 *   TE          GCMD.TE, wait GSTS.TES: from here every DMA goes through the tables
 *   PMR         protected memory regions the firmware set up turned off (now redundant)
 *
 * A unit the firmware left translating (pre-boot DMA protection) keeps translating throughout:
 * its root pointer is replaced in place, never with TE off in between.
 */
#include <stdarg.h>
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include "iommu/vtd.h"

static enum vtd_step_result failed(struct vtd_prog *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum vtd_step_result failed(struct vtd_prog *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ptv_vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
    p->s = VTD_S_FAILED;
    return VTD_FAIL;
}

bool vtd_probe(const struct vtd_regs *r, uint64_t reg_size, struct vtd_caps *c, char *err,
               size_t cap)
{
    memset(c, 0, sizeof(*c));
    c->ver = r->rd32(r->ctx, VTD_REG_VER);
    if (c->ver == 0 || c->ver == UINT32_MAX || ((c->ver >> 4) & 0xf) == 0)
        return ptv_fail(err, cap, "version register reads %#x: no remapping unit there", c->ver);
    c->cap = r->rd64(r->ctx, VTD_REG_CAP);
    c->ecap = r->rd64(r->ctx, VTD_REG_ECAP);
    if (c->cap == UINT64_MAX || c->ecap == UINT64_MAX)
        return ptv_fail(err, cap, "capability registers read all ones: no remapping unit there");
    c->sagaw = VTD_CAP_SAGAW(c->cap);
    c->mgaw = VTD_CAP_MGAW(c->cap);
    c->has_2m = VTD_CAP_SLLPS(c->cap) & 1;
    c->has_1g = VTD_CAP_SLLPS(c->cap) & 2;
    c->coherent = c->ecap & VTD_ECAP_C;
    c->rwbf = c->cap & VTD_CAP_RWBF;
    c->fro = VTD_CAP_FRO(c->cap);
    c->nfr = VTD_CAP_NFR(c->cap);
    c->iro = VTD_ECAP_IRO(c->ecap);
    if (!(c->sagaw & 0xe))
        return ptv_fail(err, cap, "CAP.SAGAW %#x offers no 3-, 4- or 5-level walk", c->sagaw);
    if ((uint64_t)c->fro + 16ull * c->nfr > reg_size || c->fro < VTD_REG_PMEN + 4)
        return ptv_fail(err, cap,
                        "fault records at %#x (%u of them) lie outside the %#llx-byte registers",
                        c->fro, c->nfr, (unsigned long long)reg_size);
    if ((uint64_t)c->iro + 16 > reg_size || c->iro < VTD_REG_PMEN + 4)
        return ptv_fail(err, cap, "IOTLB registers at %#x lie outside the %#llx-byte registers",
                        c->iro, (unsigned long long)reg_size);
    return true;
}

bool vtd_choose(const struct vtd_caps *c, unsigned n, uint64_t top, unsigned *levels, bool *has_2m,
                bool *has_1g, char *err, size_t cap)
{
    unsigned sagaw = 0x1f, mgaw = 64;

    if (n == 0)
        return ptv_fail(err, cap, "no remapping unit");
    *has_2m = *has_1g = true;
    for (unsigned i = 0; i < n; i++) {
        sagaw &= c[i].sagaw;
        if (c[i].mgaw < mgaw)
            mgaw = c[i].mgaw;
        *has_2m = *has_2m && c[i].has_2m;
        *has_1g = *has_1g && c[i].has_1g;
    }
    if (mgaw < 64 && top > (1ull << mgaw))
        return ptv_fail(err, cap,
                        "memory up to %#llx is beyond a unit's %u-bit guest address width",
                        (unsigned long long)top, mgaw);
    for (unsigned l = 3; l <= 5; l++) {
        unsigned bits = l == 5 ? 57 : 12 + 9 * l;
        if ((sagaw & (1u << (l - 2))) && top <= (1ull << bits)) {
            *levels = l;
            return true;
        }
    }
    return ptv_fail(err, cap, "no walk every unit offers (SAGAW %#x) reaches memory up to %#llx",
                    sagaw, (unsigned long long)top);
}

void vtd_prog_init(struct vtd_prog *p, const struct vtd_caps *c, uint64_t root_pa)
{
    memset(p, 0, sizeof(*p));
    p->s = VTD_S_START;
    p->caps = c;
    p->root_pa = root_pa;
}

static void go(struct vtd_prog *p, enum vtd_state s)
{
    p->s = s;
    p->polls = 0;
}

/* a command: the enables GSTS shows, without the one-shot bits, plus cmd (11.4.4) */
static void command(const struct vtd_regs *r, uint32_t set, uint32_t clear)
{
    uint32_t gsts = r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_KEEP;
    r->wr32(r->ctx, VTD_REG_GCMD, (gsts | set) & ~clear);
}

/* one poll of a wait; VTD_MORE while not yet, VTD_FAIL when the budget is spent */
static enum vtd_step_result waiting(struct vtd_prog *p, bool done, enum vtd_state next,
                                    const char *what)
{
    if (done) {
        go(p, next);
        return VTD_MORE;
    }
    if (++p->polls >= VTD_POLL_MAX)
        return failed(p, "%s did not happen within %u reads", what, VTD_POLL_MAX);
    return VTD_MORE;
}

static void clear_faults(const struct vtd_caps *c, const struct vtd_regs *r)
{
    for (unsigned i = 0; i < c->nfr; i++)
        r->wr32(r->ctx, c->fro + 16 * i + 12, (uint32_t)(VTD_FRCD_HI_F >> 32));
    r->wr32(r->ctx, VTD_REG_FSTS, VTD_FSTS_W1C);
}

enum vtd_step_result vtd_step(struct vtd_prog *p, const struct vtd_regs *r)
{
    const struct vtd_caps *c = p->caps;
    uint32_t gsts;
    uint64_t v;

    switch (p->s) {
    case VTD_S_START:
        gsts = r->rd32(r->ctx, VTD_REG_GSTS);
        p->te_was_on = gsts & VTD_GSTS_TES;
        if ((gsts & VTD_GSTS_QIES) && (gsts & VTD_GSTS_IRES))
            return failed(p, "the firmware left interrupt remapping on, over queued invalidation");
        if (gsts & VTD_GSTS_QIES) {
            command(r, 0, VTD_GCMD_QIE);
            go(p, VTD_S_QI_OFF_WAIT);
            return VTD_MORE;
        }
        go(p, VTD_S_SET_ROOT);
        return VTD_MORE;
    case VTD_S_QI_OFF_WAIT:
        return waiting(p, !(r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_QIES), VTD_S_SET_ROOT,
                       "queued invalidation off (GSTS.QIES clear)");
    case VTD_S_SET_ROOT:
        r->wr64(r->ctx, VTD_REG_RTADDR, p->root_pa); /* TTM 00: legacy mode */
        command(r, VTD_GCMD_SRTP, 0);
        go(p, VTD_S_SRTP_WAIT);
        return VTD_MORE;
    case VTD_S_SRTP_WAIT:
        if (!(r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_RTPS))
            return waiting(p, false, VTD_S_SRTP_WAIT, "root table pointer set (GSTS.RTPS)");
        if (c->rwbf) {
            command(r, VTD_GCMD_WBF, 0);
            go(p, VTD_S_WBF_WAIT);
        } else {
            go(p, VTD_S_CC);
        }
        return VTD_MORE;
    case VTD_S_WBF_WAIT:
        return waiting(p, !(r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_WBFS), VTD_S_CC,
                       "write buffer flush (GSTS.WBFS clear)");
    case VTD_S_CC:
        r->wr64(r->ctx, VTD_REG_CCMD, VTD_CCMD_ICC | VTD_CCMD_GLOBAL);
        go(p, VTD_S_CC_WAIT);
        return VTD_MORE;
    case VTD_S_CC_WAIT:
        v = r->rd64(r->ctx, VTD_REG_CCMD);
        if (v & VTD_CCMD_ICC)
            return waiting(p, false, VTD_S_CC_WAIT, "context-cache invalidation (CCMD.ICC clear)");
        if (VTD_CCMD_CAIG(v) == 0)
            return failed(p, "context-cache invalidation not performed (CCMD.CAIG 0)");
        r->wr64(r->ctx, c->iro + VTD_IOTLB_OFF,
                VTD_IOTLB_IVT | VTD_IOTLB_GLOBAL | VTD_IOTLB_DR | VTD_IOTLB_DW);
        go(p, VTD_S_IOTLB_WAIT);
        return VTD_MORE;
    case VTD_S_IOTLB_WAIT:
        v = r->rd64(r->ctx, c->iro + VTD_IOTLB_OFF);
        if (v & VTD_IOTLB_IVT)
            return waiting(p, false, VTD_S_IOTLB_WAIT, "IOTLB invalidation (IOTLB.IVT clear)");
        if (VTD_IOTLB_IAIG(v) == 0)
            return failed(p, "IOTLB invalidation not performed (IOTLB.IAIG 0)");
        go(p, VTD_S_FAULTS);
        return VTD_MORE;
    case VTD_S_FAULTS:
        clear_faults(c, r);
        r->wr32(r->ctx, VTD_REG_FECTL, VTD_FECTL_IM);
        if (!(r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_TES)) /* on since the firmware: keep */
            command(r, VTD_GCMD_TE, 0);
        go(p, VTD_S_TE_WAIT);
        return VTD_MORE;
    case VTD_S_TE_WAIT:
        if (!(r->rd32(r->ctx, VTD_REG_GSTS) & VTD_GSTS_TES))
            return waiting(p, false, VTD_S_TE_WAIT, "translation enable (GSTS.TES)");
        if ((c->cap & (VTD_CAP_PLMR | VTD_CAP_PHMR)) &&
            (r->rd32(r->ctx, VTD_REG_PMEN) & VTD_PMEN_PRS)) {
            r->wr32(r->ctx, VTD_REG_PMEN, 0);
            go(p, VTD_S_PMR_WAIT);
            return VTD_MORE;
        }
        go(p, VTD_S_DONE);
        return VTD_DONE;
    case VTD_S_PMR_WAIT:
        if (r->rd32(r->ctx, VTD_REG_PMEN) & VTD_PMEN_PRS)
            return waiting(p, false, VTD_S_PMR_WAIT, "protected memory regions off (PMEN.PRS)");
        go(p, VTD_S_DONE);
        return VTD_DONE;
    case VTD_S_DONE:
        return VTD_DONE;
    case VTD_S_FAILED:
        return VTD_FAIL;
    }
    return failed(p, "state %d unknown", (int)p->s);
}

enum vtd_step_result vtd_enable(struct vtd_prog *p, const struct vtd_regs *r)
{
    enum vtd_step_result res;
    while ((res = vtd_step(p, r)) == VTD_MORE)
        ;
    return res;
}

unsigned vtd_faults_poll(const struct vtd_regs *r, const struct vtd_caps *c, struct vtd_fault *out,
                         unsigned max, bool *overflow)
{
    uint32_t fsts = r->rd32(r->ctx, VTD_REG_FSTS);
    unsigned n = 0;

    *overflow = fsts & VTD_FSTS_PFO;
    if (!(fsts & (VTD_FSTS_PPF | VTD_FSTS_PFO)))
        return 0;
    /* records fill from FRI on, round robin (7.2.1): look at every one */
    for (unsigned k = 0; k < c->nfr; k++) {
        unsigned i = (VTD_FSTS_FRI(fsts) + k) % c->nfr, off = c->fro + 16 * i;
        uint64_t hi = r->rd64(r->ctx, off + 8);
        if (!(hi & VTD_FRCD_HI_F))
            continue;
        if (n < max && out)
            out[n] = (struct vtd_fault){.addr = r->rd64(r->ctx, off) & ~0xfffull,
                                        .sid = (uint16_t)VTD_FRCD_HI_SID(hi),
                                        .reason = (uint8_t)VTD_FRCD_HI_FR(hi),
                                        .write = !(hi & VTD_FRCD_HI_T)};
        n++;
        r->wr32(r->ctx, off + 12, (uint32_t)(VTD_FRCD_HI_F >> 32));
    }
    r->wr32(r->ctx, VTD_REG_FSTS, fsts & VTD_FSTS_W1C);
    return n;
}
