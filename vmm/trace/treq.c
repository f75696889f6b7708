/* SPDX-License-Identifier: MIT */
#include "trace/treq.h"

#include <ptv/config.h>
#include <ptv/vmcall.h>

#include "lib/range.h"

_Static_assert(PTV_TRACE_CR3_IGNORABLE == SWPT_CR3_IGNORABLE, "one CR3 mask in the ABI and swpt");

int trace_req_swpt(const struct trace_req *rq, const struct ptv_config *cfg, struct swpt_cfg *out,
                   const char **why)
{
    const uint32_t f = rq->flags;
    const char *w = NULL;

    *out = (struct swpt_cfg){.psb_period = cfg->psb_period, .tsc = true};
    if (f & ~PTV_TRACE_F_ALL)
        w = "unknown filter flags";
    else if ((f & PTV_TRACE_F_CR3) && (f & PTV_TRACE_F_CR3_SELF))
        w = "two CR3s to match (PTV_TRACE_F_CR3 and PTV_TRACE_F_CR3_SELF)";
    else if ((f & PTV_TRACE_F_CR3_MASK) && !(f & (PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF)))
        w = "a CR3 mask without a CR3 to match";
    if (w) {
        *why = w;
        return -1;
    }

    struct swpt_filter *flt = &out->filter;
    uint32_t cpl = f & (PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER);
    flt->kernel = cpl ? !!(f & PTV_TRACE_F_KERNEL) : !!(cfg->trace_filter & PTV_TRACE_OS);
    flt->user = cpl ? !!(f & PTV_TRACE_F_USER) : !!(cfg->trace_filter & PTV_TRACE_USER);
    if (f & (PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF)) {
        flt->cr3_match = true;
        flt->cr3 = trace_req_cr3(rq);
        flt->cr3_ignore = f & PTV_TRACE_F_CR3_MASK ? rq->cr3_ignore : 0;
    } else if (cfg->trace_cr3) {
        flt->cr3_match = true;
        flt->cr3 = cfg->trace_cr3;
    }
    if (f & PTV_TRACE_F_RANGE) {
        flt->nranges = 1;
        flt->range[0].lo = rq->lo;
        flt->range[0].hi = rq->hi;
    } else {
        flt->nranges = cfg->trace_nranges;
        for (unsigned i = 0; i < flt->nranges && i < SWPT_MAX_RANGES; i++) {
            flt->range[i].lo = cfg->trace_range[i].lo;
            flt->range[i].hi = cfg->trace_range[i].hi;
        }
    }
    if (f & PTV_TRACE_F_START_IP) {
        flt->start_at = true;
        flt->start_ip = rq->start_ip;
    }
    return swpt_cfg_check(out, why) ? -1 : 0;
}

uint64_t trace_req_cr3(const struct trace_req *rq)
{
    return rq->flags & PTV_TRACE_F_CR3 ? rq->cr3 : rq->caller_cr3;
}

int trace_req_hw_check(const struct trace_req *rq, uint64_t budget, const char **why)
{
    const uint32_t f = rq->flags;
    const char *w = NULL;

    if (f & ~(PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER | PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF |
              PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_RANGE))
        w = "a flag system-mode PT has no equivalent for (a start IP, or unknown)";
    else if ((f & PTV_TRACE_F_CR3) && (f & PTV_TRACE_F_CR3_SELF))
        w = "two CR3s to match (PTV_TRACE_F_CR3 and PTV_TRACE_F_CR3_SELF)";
    else if ((f & PTV_TRACE_F_CR3_MASK) && (rq->cr3_ignore & ~0x1full))
        w = "RTIT_CR3_MATCH compares CR3[63:5]: no ignored bits above 4";
    else if (budget)
        w = "PT counts no instructions: no budget";
    *why = w ? w : "ok";
    return w ? -1 : 0;
}

/* --- the CPL 3 rule --- */

#define USER_FLAGS                                                                                 \
    (PTV_TRACE_F_USER | PTV_TRACE_F_CR3_SELF | PTV_TRACE_F_CR3_MASK | PTV_TRACE_F_RANGE |          \
     PTV_TRACE_F_START_IP)

int trace_req_user_check(const struct trace_req *rq, uint64_t budget, const char **why)
{
    const uint32_t f = rq->flags;
    const char *w = NULL;

    *why = "ok";
    if (!rq->user)
        return 0; /* CPL 0: any window */
    if (f & PTV_TRACE_F_KERNEL)
        w = "from CPL 3 a window traces user mode only (no PTV_TRACE_F_KERNEL)";
    else if (f & PTV_TRACE_F_CR3)
        w = "from CPL 3 a window is the caller's own process (PTV_TRACE_F_CR3_SELF, not a CR3)";
    else if (f & ~USER_FLAGS)
        w = "from CPL 3 only the flags of the caller's own window (unknown flags)";
    else if (!(f & PTV_TRACE_F_USER) || !(f & PTV_TRACE_F_CR3_SELF))
        w = "from CPL 3 a window needs PTV_TRACE_F_USER and PTV_TRACE_F_CR3_SELF";
    else if ((f & PTV_TRACE_F_CR3_MASK) && (rq->cr3_ignore & ~PTV_TRACE_CR3_PCID))
        w = "from CPL 3 the CR3 match may ignore only the PCID (bits 11:0)";
    else if (budget)
        w = "from CPL 3 no budget (it counts the instructions of every context)";
    if (w)
        *why = w;
    return w ? -1 : 0;
}

struct trace_owner trace_owner_of(const struct trace_req *rq)
{
    return rq->user ? (struct trace_owner){.user = true, .cr3 = rq->caller_cr3}
                    : (struct trace_owner){0};
}

bool trace_owner_allows(const struct trace_owner *o, unsigned cpl, uint64_t cr3)
{
    if (cpl == 0)
        return true;
    return o->user && !((o->cr3 ^ cr3) & ~PTV_TRACE_CR3_PCID);
}

/* --- TRACE_READ's copy --- */

#define PAGE 4096ull

int trace_read_copy(const struct trace_read_io *io, uint64_t gpa, uint64_t len, uint64_t off,
                    uint64_t *copied)
{
    *copied = 0;
    if (!range_fits(gpa, len, RANGE_SPACE64))
        return -1; /* a physical range does not wrap */
    const uint64_t first = gpa & ~(PAGE - 1);
    uint64_t host = 0;
    struct range_walk w;
    range_for_each(&w, gpa, len, PAGE, RANGE_SPACE64)
    {
        uint64_t page = w.addr & ~(PAGE - 1), h = io->resolve(io->ctx, page);
        if (!h || (w.done && h != host + (page - first)))
            return -1; /* not guest RAM, or not where the pages before it are */
        if (!w.done)
            host = h;
    }
    if (!len)
        return 0;
    /* the copy goes where the lookups said, once each: nothing is looked up again */
    uint8_t *dst = (uint8_t *)(uintptr_t)(host + (gpa & (PAGE - 1)));
    *copied = io->bytes(io->ctx, off, dst, len);
    return *copied == len ? 0 : -1;
}
