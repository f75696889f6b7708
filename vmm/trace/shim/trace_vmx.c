/* SPDX-License-Identifier: MIT */
/*
 * The software tracer in the VMM, its VMCALL side: TRACE_START/STOP/STATUS/READ
 * on this vCPU's source (system-mode PT where the vCPU has it, else the software tracer),
 * the ring and the code-page copies a window needs, trace_boot's window, and what a dump
 * reads.  Stepping the vCPU and tracing each step is trace/shim/trace_step.c; what ran and which
 * packets that makes is decided in vmm/trace/ (swtrace.c, swpt.c, x86_class.c, gwalk.c),
 * which the host tests run unchanged.
 *
 * A window opens at the instruction after TRACE_START's VMCALL: the VMCALL's
 * handler only arms it (pending_start), and the first look before the next entry
 * starts it, with RIP already past the VMCALL.
 */
#include "trace/shim/trace_vmx.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "hw/vmx.h"
#include "pt/pt_sys.h"
#include "base/handoff.h"
#include "vmx/vmx_cpu.h"
#include "trace/treq.h"
#include "base/log.h"
#include "base/palloc.h"
#include "base/vmm_state.h"
#include "lib/ptv_string.h"
#include "lib/range.h"
#include <ptv/vmcall.h>
#include "trace/shim/trace_vcpu.h"

#define BLOCK_PAGES 32 /* swtrace_block_mem: a third to the block table, the rest successors */

/* the tracer's state once per vCPU, the ring (contiguous pool pages) until it fits: a guest
 * that asks again after ENOMEM costs no further page and no further log line */
static int ring_alloc(struct vcpu *v)
{
    _Static_assert(sizeof(struct trace_vcpu) <= 2 * PAGE_SIZE, "trace_vcpu fits two pages");
    uint64_t pa;
    if (!v->trace && !(v->trace = palloc_pages(2, &pa)))
        return PTV_VMCALL_ENOMEM;
    struct trace_vcpu *t = v->trace;
    if (t->ring.buf)
        return 0;
    /* the small parts first, each kept once it is there, the ring last: a failure at any step
     * leaves nothing allocated for nothing (the pool has no free), and a retry goes on */
    if (!t->cache_sized) { /* a 1024-entry decode cache (74% hits on real programs), else 64;
                            * 256 blocks and 256 blocks after leads for block stepping, else
                            * none */
        void *bc = palloc_pages(8, &pa), *blk = palloc_pages(BLOCK_PAGES, &pa);
        if (bc)
            swtrace_cache_mem(&t->sw, bc, 8 * PAGE_SIZE);
        if (blk)
            swtrace_block_mem(&t->sw, blk, BLOCK_PAGES * PAGE_SIZE);
        t->cache_sized = true;
    }
    if (!t->code && !(t->code = palloc_pages(CODE_PAGES, &pa))) {
        if (!t->nomem_said)
            pr_warn("trace", "no room for the code-page copies in the VMM pool (vmm_pool)");
        t->nomem_said = true;
        return PTV_VMCALL_ENOMEM;
    }
    if (!t->cp.e) {
        struct cp_entry *e = palloc_pages(CP_PAGES, &pa);
        if (!e) {
            if (!t->nomem_said)
                pr_warn("trace", "no room for the code-page set in the VMM pool (vmm_pool)");
            t->nomem_said = true;
            return PTV_VMCALL_ENOMEM;
        }
        cp_init(&t->cp, e, CP_SLOTS);
    }
    uint64_t size = vmm_cfg->trace_buf_size;
    uint8_t *buf = palloc_pages(size / PAGE_SIZE, &pa);
    if (!buf) {
        if (!t->nomem_said)
            pr_warn("trace", "no room for a %lu KiB trace ring in the VMM pool (vmm_pool)",
                    size >> 10);
        t->nomem_said = true;
        return PTV_VMCALL_ENOMEM;
    }
    t->ring = (struct swpt_ring){.buf = buf, .size = size};
    return 0;
}

static int sw_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget)
{
    const char *why;
    /* what is wrong with the request itself first, and only then whether the vCPU is busy:
     * a caller is told "busy" only for a window it could have had (trace_start_answer) */
    if (!trace_vmx_available(&why)) {
        static bool said; /* once: a guest must not fill the VMM's log */
        if (!said)
            pr_warn("trace", "TRACE_START refused: %s", why);
        said = true;
        return PTV_VMCALL_ENODEV;
    }
    struct swpt_cfg cfg;
    if (trace_req_swpt(rq, vmm_cfg, &cfg, &why))
        return PTV_VMCALL_EINVAL;
    if (v->trace && (v->trace->sw.on || v->trace->pending_start))
        return PTV_VMCALL_EBUSY;
    int rc = ring_alloc(v);
    if (rc)
        return rc;
    struct trace_vcpu *t = v->trace;
    t->cfg = cfg;
    t->budget = budget;
    t->budget_logged = false;
    t->ring.head = t->ring.dropped = 0;
    t->ring.stopped = false;
    t->ring.stop_on_full = !vmm_cfg->trace_wrap;
    t->closed_hook = NULL;
    cp_reset(&t->cp);
    memset(t->noted, 0, sizeof(t->noted));
    t->code->n = 0;
    t->pending_start = true; /* starts after this VMCALL (trace_vmx_before_entry) */
    v->trace_stepping = true;
    if (trace_vmx_tf()) {
        v->trace_tf_used = true;
        trace_vmx_db_update(v); /* the trap flag's steps are #DB exits */
    }
    v->trace_mtf_seen = false;
    vcpu_mtf_update(v);
    return 0;
}

/* the tracer of a vCPU that has a ring (NULL: it never traced) */
static struct trace_vcpu *traced(const struct vcpu *v)
{
    return v->trace && v->trace->ring.buf ? v->trace : NULL;
}

static int sw_stop(struct vcpu *v)
{
    struct trace_vcpu *t = traced(v);
    if (!t)
        return PTV_VMCALL_EINVAL; /* never traced: nothing to stop */
    if (!t->sw.on && !t->pending_start)
        return 0; /* closed already (its budget): the ring keeps the window */
    if (t->sw.on) {
        trace_vmx_stop_observe(v); /* a frame it left since its last step, if any */
        swtrace_stop(&t->sw);
    }
    t->pending_start = false;
    trace_stepping_off(v);
    /* the first windows are named; a guest that opens thousands goes quiet */
    if (++t->windows <= 8)
        pr_info("trace", "window closed: %lu instructions, %lu bytes, %lu events, %lu gaps",
                t->sw.st.steps, t->ring.head, t->sw.st.events, swtrace_gaps(&t->sw));
    return 0;
}

static void sw_status(const struct vcpu *v, struct trace_status *st)
{
    const struct trace_vcpu *t = traced(v);
    *st = (struct trace_status){.ring_size = vmm_cfg->trace_buf_size};
    if (!t)
        return;
    st->flags = PTV_TRACE_ST_SOFTWARE | (t->sw.on || t->pending_start ? PTV_TRACE_ST_ON : 0) |
                (t->ring.head > t->ring.size ? PTV_TRACE_ST_WRAPPED : 0) |
                (t->ring.stopped ? PTV_TRACE_ST_STOPPED : 0) |
                (t->sw.budget_used ? PTV_TRACE_ST_BUDGET : 0) |
                (trace_vmx_tf() ? PTV_TRACE_ST_TF : 0) |
                (trace_vmx_free_cpl(v) ? PTV_TRACE_ST_FREE_CPL : 0);
    st->written = t->ring.head;
    st->insns = t->sw.st.steps;
    st->gaps = swtrace_gaps(&t->sw);
    st->events = t->sw.st.events;
    st->unreadable = t->sw.st.unreadable;
}

/* bytes [off, off + len) of the software ring (absolute stream offsets, all kept) */
static void sw_copy(const struct trace_vcpu *t, uint64_t off, uint8_t *buf, uint64_t len)
{
    for (uint64_t done = 0; done < len;) {
        uint64_t pos = (off + done) % t->ring.size;
        uint64_t n = len - done;
        if (n > t->ring.size - pos)
            n = t->ring.size - pos;
        memcpy(buf + done, t->ring.buf + pos, n);
        done += n;
    }
}

/* --- the two sources behind one ABI: system-mode PT where this vCPU has it, else software --- */

bool trace_vmx_hw_source(const struct vcpu *v)
{
    return v->pt.system && vmm_cfg->trace_sw != PTV_SW_TRACE_ON &&
           vmm_cfg->trace_sw != PTV_SW_TRACE_TF;
}

/* the system-mode filter of a TRACE_START: the configured one, then the call's */
static int hw_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget)
{
    struct pt_sys_status st;
    struct pt_sys_cfg cfg;
    const char *why;
    const uint32_t flags = rq->flags;
    if (trace_req_hw_check(rq, budget, &why)) /* RTIT_CR3_MATCH, no start trigger, no budget */
        return PTV_VMCALL_EINVAL;
    pt_sys_cfg_from_config(vmm_cfg, &cfg);
    if (flags & (PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER))
        cfg.filter = (flags & PTV_TRACE_F_KERNEL ? PTV_TRACE_OS : 0) |
                     (flags & PTV_TRACE_F_USER ? PTV_TRACE_USER : 0);
    if (flags & (PTV_TRACE_F_CR3 | PTV_TRACE_F_CR3_SELF))
        cfg.cr3 = trace_req_cr3(rq);
    if (flags & PTV_TRACE_F_RANGE) {
        cfg.nranges = 1;
        cfg.range[0].lo = rq->lo;
        cfg.range[0].hi = rq->hi;
    }
    /* the engine checks every field against the CPU's PT (pt_sys_check), before the busy
     * test as in sw_start */
    if (pt_ctrl_sys_check_filter(&v->pt, &cfg, &why))
        return PTV_VMCALL_EINVAL;
    pt_ctrl_sys_status(&v->pt, &st);
    if (st.on)
        return PTV_VMCALL_EBUSY;
    if (pt_ctrl_sys_set_filter(&v->pt, &cfg, &why))
        return PTV_VMCALL_EINVAL;
    int rc = pt_ctrl_sys_start(&v->pt, true, &why);
    v->pt.last_refusal = NULL; /* the VMCALL's status reports the refusal */
    return rc ? PTV_VMCALL_EINVAL : 0;
}

static void hw_status(struct vcpu *v, struct trace_status *st)
{
    struct pt_sys_status s;
    pt_ctrl_sys_status(&v->pt, &s);
    *st = (struct trace_status){
        .flags = (s.on ? PTV_TRACE_ST_ON : 0) | (s.wrapped ? PTV_TRACE_ST_WRAPPED : 0) |
                 (s.stopped ? PTV_TRACE_ST_STOPPED : 0),
        .ring_size = s.ring_size,
        .written = s.bytes,
    };
}

/* who opened each vCPU's window (trace/treq.h): the kernel until a process does */
static struct trace_owner owner[PTV_MAX_CPUS];

int trace_vmx_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget, uint32_t *src)
{
    const char *why;
    if (trace_req_user_check(rq, budget, &why)) /* the CPL 3 rule; no line: a user calls it */
        return PTV_VMCALL_EACCES;
    *src = trace_vmx_hw_source(v) ? PTV_TRACE_SRC_HARDWARE : PTV_TRACE_SRC_SOFTWARE;
    int rc = trace_vmx_hw_source(v) ? hw_start(v, rq, budget) : sw_start(v, rq, budget);
    if (!rc)
        owner[v->id] = trace_owner_of(rq);
    return rc;
}

bool trace_vmx_owned_by(const struct vcpu *v, unsigned cpl, uint64_t cr3)
{
    return trace_owner_allows(&owner[v->id], cpl, cr3);
}

int trace_vmx_stop(struct vcpu *v)
{
    if (trace_vmx_hw_source(v)) {
        pt_ctrl_sys_stop(&v->pt);
        return 0;
    }
    return sw_stop(v);
}

void trace_vmx_status(struct vcpu *v, struct trace_status *st)
{
    if (trace_vmx_hw_source(v))
        hw_status(v, st);
    else
        sw_status(v, st);
    if (v->dumping)
        st->flags |= PTV_TRACE_ST_DUMPING;
}

void trace_vmx_status_own(struct vcpu *v, struct trace_status *st)
{
    trace_vmx_status(v, st);
    const struct trace_vcpu *t = traced(v);
    if (trace_vmx_hw_source(v) || !t)
        return; /* system-mode PT: only bytes, of the filter's own contexts */
    /* the steps, events, gaps and failed reads of every context the vCPU ran are not the
     * window's: what its stream shows instead */
    st->insns = t->sw.pt.traced;
    st->gaps = swtrace_gaps(&t->sw);
    st->events = t->sw.pt.win_events;
    st->unreadable = t->sw.st.unreadable_in;
}

/* stream bytes [off, off + len), off >= the oldest kept, into a VMM buffer: bytes copied */
uint64_t trace_vmx_bytes(struct vcpu *v, uint64_t off, void *buf, uint64_t len)
{
    struct trace_status st;
    trace_vmx_status(v, &st);
    uint64_t oldest = st.written > st.ring_size ? st.written - st.ring_size : 0;
    if (off < oldest || off >= st.written)
        return 0;
    if (len > st.written - off)
        len = st.written - off;
    if (trace_vmx_hw_source(v))
        return pt_ctrl_sys_read(&v->pt, off - oldest, buf, len);
    const struct trace_vcpu *t = traced(v);
    if (!t)
        return 0;
    sw_copy(t, off, buf, len);
    return len;
}

/* TRACE_READ's destination (trace_read_copy): a 4 KiB page of guest RAM the VMM may write */
static uint64_t read_dest_page(void *ctx, uint64_t page)
{
    return trace_guest_page(ctx, page, PAGE_SIZE, true);
}

static uint64_t read_bytes(void *ctx, uint64_t off, void *dst, uint64_t n)
{
    return trace_vmx_bytes(ctx, off, dst, n);
}

int trace_vmx_read(struct vcpu *v, uint64_t gpa, uint64_t len, uint64_t off, uint64_t *copied,
                   uint64_t *oldest, uint64_t *written)
{
    struct trace_status st;
    trace_vmx_status(v, &st);
    *copied = 0;
    *written = st.written;
    *oldest = st.written > st.ring_size ? st.written - st.ring_size : 0;
    if (off < *oldest || !range_fits(gpa, len, RANGE_SPACE64)) /* physical: no wrap */
        return PTV_VMCALL_EINVAL;
    if (off >= st.written)
        return 0;
    if (len > st.written - off)
        len = st.written - off;
    /* the whole destination resolved once before a byte is written, then written where it
     * resolved: never looked up again (another vCPU may move its APIC window onto it) */
    const struct trace_read_io io = {.ctx = v, .resolve = read_dest_page, .bytes = read_bytes};
    return trace_read_copy(&io, gpa, len, off, copied) ? PTV_VMCALL_EINVAL : 0;
}

/*
 * trace_boot = N: the guest OS's first N instructions from its loader's hand-off
 * (BOOT_HANDOFF, right before StartImage), before the guest could ask for anything.  Software: a
 * window with a budget of N and the configured filters.  Hardware counts no instructions: the
 * system trace starts at the first entry and the ring keeps the first (trace_wrap = off) or the
 * last ring-full of it.
 */
/* --- what a dump reads (trace/shim/trace_dump.c) --- */

bool trace_vmx_window(struct vcpu *v, struct trace_window *w)
{
    struct trace_status st;
    trace_vmx_status(v, &st);
    *w = (struct trace_window){
        .hardware = trace_vmx_hw_source(v),
        .ring_size = st.ring_size,
        .written = st.written,
        .oldest = st.written > st.ring_size ? st.written - st.ring_size : 0,
        .wrapped = st.written > st.ring_size,
        .gaps = st.gaps,
    };
    if (w->hardware) { /* the configured filter: TRACE_START may have narrowed it */
        w->kernel = vmm_cfg->trace_filter & PTV_TRACE_OS;
        w->user = vmm_cfg->trace_filter & PTV_TRACE_USER;
        w->cr3 = vmm_cfg->trace_cr3;
        w->cr3_match = w->cr3 != 0;
        return st.written != 0;
    }
    const struct trace_vcpu *t = traced(v);
    if (!t)
        return false;
    w->kernel = t->cfg.filter.kernel;
    w->user = t->cfg.filter.user;
    w->cr3_match = t->cfg.filter.cr3_match;
    w->cr3 = t->cfg.filter.cr3;
    w->nranges = t->cfg.filter.nranges;
    for (unsigned i = 0; i < w->nranges && i < SWPT_MAX_RANGES; i++) {
        w->range[i].lo = t->cfg.filter.range[i].lo;
        w->range[i].hi = t->cfg.filter.range[i].hi;
    }
    w->code = &t->cp;
    w->last_cr3 = t->paging.cr3;
    return st.written != 0;
}
