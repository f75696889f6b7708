/* SPDX-License-Identifier: MIT */
/*
 * The software tracer in the VMM (issue 9): a thin shim.  It reads the vCPU state
 * the pure stepping logic needs from the VMCS, gives it guest memory through EPT,
 * keeps the monitor trap flag on while a window is open, and answers the trace
 * VMCALLs.  What ran and which packets that makes is decided in vmm/trace/
 * (swtrace.c, swpt.c, x86_class.c, gwalk.c), which the host tests run unchanged.
 *
 * A window opens at the instruction after TRACE_START's VMCALL: the VMCALL's
 * handler only arms it (pending_start), and the first look before the next entry
 * starts it, with RIP already past the VMCALL.
 */
#include "vmx/trace_vmx.h"
#include "vmx/trace_dump.h"
#include "trace/codepages.h"
#include "trace/frame.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmx.h"
#include "trace/swtrace.h"
#include "trace/treq.h"
#include "cpu.h"
#include "log.h"
#include "palloc.h"
#include "vmm.h"
#include "handoff.h"
#include "lib/ptv_string.h"
#include "vmx/pt_vmx.h"
#include "smp/smp.h"
#include "vmx/emul_policy.h"
#include "pt/pt_sys.h"
#include <ptv/vmcall.h>

struct trace_vcpu {
    struct swtrace sw;
    struct swpt_ring ring;
    struct swpt_cfg cfg;
    uint64_t budget;
    bool pending_start;
    bool budget_logged;
    bool nomem_said;
    bool boot_window; /* this window is trace_boot's: dump_on = boot dumps it when it closes */
    bool cache_sized; /* the decode cache got its larger table (or the pool had none) */
    /* the last guest page read_gpa found readable (guest RAM, identity in EPT), valid while
     * no EPT narrowing happened since (vmm_sd.gen: every narrowing is a shootdown) */
    bool ok_valid;
    uint64_t ok_page, ok_gen;
    /* the last code pages note_code found in the window's set (linear page + 1, CR3; page 0:
     * empty): the steps on them skip the set, which only grows while the window is open */
    struct {
        uint64_t page1, cr3;
    } noted[4];
    unsigned noted_next, noted_hit; /* the next slot to fill, the slot the last step hit */
    struct code_store *code;        /* the bytes of the first code pages the window ran */
    uint64_t windows;
    /* the code pages the window ran (the dump's snapshots) and the paging they ran under */
    struct codepages cp;
    struct gw_paging paging;
};

/*
 * The bytes of the first CODE_COPIES code pages a window runs, copied when they first run:
 * a dump sends these (the bytes that ran) even after the process exited or the page changed;
 * the other pages are read at dump time and sent only if their CRC still matches.
 */
#define CODE_COPIES 64
struct code_store {
    struct {
        uint64_t cr3, va; /* cp_key()'s: CP_CR3_ANY for kernel pages */
    } key[CODE_COPIES];
    unsigned n;
    uint8_t scratch[CP_PAGE] __attribute__((aligned(4096))); /* this vCPU's page reads */
    uint8_t page[CODE_COPIES][CP_PAGE];
};
#define CODE_PAGES ((sizeof(struct code_store) + PAGE_SIZE - 1) / PAGE_SIZE)

#define CP_SLOTS 1024 /* code pages a window remembers: 768 (codepages.h keeps it 3/4 full) */
#define CP_PAGES ((CP_SLOTS * sizeof(struct cp_entry) + PAGE_SIZE - 1) / PAGE_SIZE)

/* --- guest memory over EPT --- */

/* the host address of guest-physical [gpa, gpa + len) inside one 4 KiB page, or 0 */
static uint64_t guest_page(struct vcpu *v, uint64_t gpa, uint64_t len, bool write)
{
    uint64_t hpa;
    unsigned level;
    uint32_t type = vm_mem_type(v->handoff, gpa, len);
    /* code may run from firmware-reserved memory; the VMM reads no device and
     * writes only guest RAM */
    if (type != PTV_MEM_RAM && (write || (type != PTV_MEM_RESERVED && type != PTV_MEM_ACPI)))
        return 0;
    vm_ept_lock();
    int rc = ept_translate(v->ept, gpa, &hpa, NULL, NULL, &level);
    vm_ept_unlock();
    if (rc || hpa != gpa) /* guest memory is identity-mapped; the sink page is not */
        return 0;
    return hpa;
}

static bool read_gpa(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    uint64_t hpa = guest_page(ctx, gpa, len, false);
    if (!hpa)
        return false;
    memcpy(buf, (const void *)(uintptr_t)hpa, len);
    return true;
}

/* read_gpa for the stepping vCPU's own CPU (it owns t->ok_*): the tracer reads the code of
 * every step, so the memory map's search and the EPT walk run once per page, not once per
 * instruction */
static bool read_gpa_step(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    struct vcpu *v = ctx;
    struct trace_vcpu *t = v->trace;
    uint64_t page = gpa & ~0xfffull, gen = __atomic_load_n(&vmm_sd.gen, __ATOMIC_ACQUIRE);
    if ((gpa & 0xfff) + len > 0x1000)
        return read_gpa(ctx, gpa, buf, len);
    if (!(t->ok_valid && t->ok_page == page && t->ok_gen == gen)) {
        if (!guest_page(v, gpa, len, false))
            return false;
        t->ok_valid = vm_mem_type(v->handoff, page, 0x1000) == PTV_MEM_RAM;
        t->ok_page = page;
        t->ok_gen = gen;
    }
    memcpy(buf, (const void *)(uintptr_t)gpa, len); /* guest RAM is identity-mapped */
    return true;
}

/* gw_mem.map for the stepping vCPU: a guest RAM page read in place (identity-mapped), good
 * until vmm_sd.gen moves (every EPT narrowing is a shootdown: the caller's gw_mem.gen) */
static const uint8_t *map_step(void *ctx, uint64_t gpa)
{
    struct vcpu *v = ctx;
    if (!guest_page(v, gpa, 0x1000, false) || vm_mem_type(v->handoff, gpa, 0x1000) != PTV_MEM_RAM)
        return NULL;
    return (const uint8_t *)(uintptr_t)gpa;
}

/* --- the vCPU as the stepping logic sees it --- */

static void observe(struct swtrace_cpu *c)
{
    uint32_t cs_ar = vmcs_read32(GUEST_CS_AR_BYTES);
    bool lma = vmcs_read32(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE;
    c->rip = vmcs_readl(GUEST_RIP);
    c->rsp = vmcs_readl(GUEST_RSP);
    c->cs_sel = vmcs_read16(GUEST_CS_SELECTOR);
    /* 64-bit code ignores the CS base (linear IP = RIP, as swtrace's lin_of) */
    c->cs_base = lma && (cs_ar & VMX_AR_L) ? 0 : vmcs_readl(GUEST_CS_BASE);
    c->ctx.cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    c->ctx.cr3 = vmcs_readl(GUEST_CR3);
    c->ctx.cs = lma && (cs_ar & VMX_AR_L) ? X86_CODE64
                : (cs_ar & VMX_AR_DB)     ? X86_CODE32
                                          : X86_CODE16;
    c->paging = (struct gw_paging){
        .cr0 = vmcs_readl(GUEST_CR0),
        .cr3 = c->ctx.cr3,
        .cr4 = vmcs_readl(GUEST_CR4),
        .efer = lma ? 1ull << 10 : 0,
    };
    c->tsc = rdtsc();
}

/* sw_trace = auto: whether this CPU delivers MTF exits, measured at the BSP's first entries
 * (-1: not measured, 0: it does not, 1: it does) */
static int mtf_delivered = -1;

static bool have_mtf(void)
{
    return vmx_caps.proc >> 32 & CPU_BASED_MONITOR_TRAP_FLAG;
}

bool trace_vmx_available(const char **why)
{
    if (vmm_cfg->trace_sw == PTV_SW_TRACE_OFF) {
        *why = "sw_trace = off in the configuration";
        return false;
    }
    if (!trace_vmx_tf() && !have_mtf()) {
        *why = "the CPU has no monitor trap flag (VMX procbased control bit 27)";
        return false;
    }
    return true;
}

/*
 * The MTF probe (sw_trace = auto).  Some CPUs offer the monitor trap flag and never deliver
 * it (Bochs 2.7: cpu/todo "MTF is not implemented yet"); the tracer then steps with the trap
 * flag, as sw_trace = tf (what that costs the guest: include/ptv/config.h).  Measured, never
 * assumed: MTF is armed for the BSP's first entries; an MTF exit proves it works, an exit at
 * another RIP than the entry's (an instruction completed without an MTF exit) proves it does
 * not.  An exit at the entry's RIP (the first instruction exited itself) tries again.
 */
#define PROBE_TRIES 64

void trace_vmx_probe_start(struct vcpu *v)
{
    if (vmm_cfg->trace_sw != PTV_SW_TRACE_AUTO || !have_mtf()) {
        if (vmm_cfg->trace_sw == PTV_SW_TRACE_AUTO) {
            mtf_delivered = 0; /* no MTF at all: the trap flag is the only way */
            pr_info("trace", "this CPU has no monitor trap flag: the software tracer steps with "
                             "the trap flag (sw_trace = auto)");
        }
        return;
    }
    v->mtf_probe = true;
    v->probe_rip = vmcs_readl(GUEST_RIP);
    vcpu_mtf_update(v);
}

void trace_vmx_probe(struct vcpu *v, uint32_t reason, uint64_t exit_rip)
{
    if (reason == EXIT_REASON_MONITOR_TRAP_FLAG)
        mtf_delivered = 1;
    else if (exit_rip != v->probe_rip)
        mtf_delivered = 0;
    else if (++v->probe_tries < PROBE_TRIES) {
        v->probe_rip = vmcs_readl(GUEST_RIP); /* where the next entry resumes */
        return;
    }
    v->mtf_probe = false;
    vcpu_mtf_update(v);
    if (mtf_delivered == 0)
        pr_info("trace",
                "this CPU offers the monitor trap flag but delivered no MTF exit (%s at "
                "%#lx): the software tracer steps with the trap flag (sw_trace = auto)",
                vmx_exit_reason_name(reason), exit_rip);
    if (v->boot_pending) { /* the loader handed off while the probe ran */
        v->boot_pending = false;
        trace_vmx_boot(v);
    }
}

/* BOOT_HANDOFF: the loader starts the guest OS next; trace_boot = N opens its window here */
int trace_vmx_handoff(struct vcpu *v)
{
    static bool done;
    if (__atomic_exchange_n(&done, true, __ATOMIC_SEQ_CST))
        return PTV_VMCALL_EBUSY;
    if (v->mtf_probe)
        v->boot_pending = true; /* opens when the probe has decided how to step */
    else
        trace_vmx_boot(v);
    return 0;
}

/* the tracer's state once per vCPU, the ring (contiguous pool pages) until it fits: a guest
 * that asks again after ENOMEM costs no further page and no further log line */
static int ring_alloc(struct vcpu *v)
{
    _Static_assert(sizeof(struct trace_vcpu) <= PAGE_SIZE, "trace_vcpu fits one page");
    uint64_t pa;
    if (!v->trace && !(v->trace = palloc_page(&pa)))
        return PTV_VMCALL_ENOMEM;
    struct trace_vcpu *t = v->trace;
    if (t->ring.buf)
        return 0;
    /* the small parts first, each kept once it is there, the ring last: a failure at any step
     * leaves nothing allocated for nothing (the pool has no free), and a retry goes on */
    if (!t->cache_sized) { /* a 1024-entry decode cache (74% hits on real programs), else 64 */
        void *bc = palloc_pages(8, &pa);
        if (bc)
            swtrace_cache_mem(&t->sw, bc, 8 * PAGE_SIZE);
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

/*
 * sw_trace = tf (include/ptv/config.h): the step is the trap flag's #DB, caught by the
 * exception bitmap (vcpu_mtf_update).  TF is set before every entry (POPF / IRET may have
 * cleared it), and the single-step bit a VM exit may leave in the pending debug exceptions
 * (an emulated instruction retired with TF = 1; Bochs 2.7 saves it at every exit) is dropped:
 * the tracer counts an emulated instruction itself, a second #DB before the next instruction
 * would read as a step that did not move.
 */
bool trace_vmx_tf(void)
{
    return vmm_cfg->trace_sw == PTV_SW_TRACE_TF ||
           (vmm_cfg->trace_sw == PTV_SW_TRACE_AUTO && mtf_delivered == 0);
}

#define DEBUGCTL_BTF (1ull << 1)

static void tf_arm(struct vcpu *v)
{
    if (!trace_vmx_tf())
        return;
    /* with DEBUGCTL.BTF the trap flag single-steps on branches only (SDM Vol. 3B 18.4.3):
     * off while the window steps, the guest's value back at its end (stepping_off) */
    uint64_t dc = vmcs_read64(GUEST_IA32_DEBUGCTL);
    if (dc & DEBUGCTL_BTF) {
        v->trace_btf = true;
        vmcs_write64(GUEST_IA32_DEBUGCTL, dc & ~DEBUGCTL_BTF);
    }
    uint64_t fl = vmcs_readl(GUEST_RFLAGS);
    if (!(fl & RFLAGS_TF))
        vmcs_writel(GUEST_RFLAGS, fl | RFLAGS_TF);
    uint64_t dbg = vmcs_readl(GUEST_PENDING_DBG_EXCEPTIONS);
    if (dbg & PENDING_DBG_BS)
        vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, dbg & ~PENDING_DBG_BS);
}

static void stepping_off(struct vcpu *v)
{
    v->trace_stepping = false;
    if (trace_vmx_tf())
        vmcs_writel(GUEST_RFLAGS, vmcs_readl(GUEST_RFLAGS) & ~RFLAGS_TF);
    if (v->trace_btf) {
        v->trace_btf = false;
        vmcs_write64(GUEST_IA32_DEBUGCTL, vmcs_read64(GUEST_IA32_DEBUGCTL) | DEBUGCTL_BTF);
    }
    vcpu_mtf_update(v);
}

bool trace_vmx_db_exit(struct vcpu *v, uint64_t qual)
{
    if (!v->trace_tf_used || !db_qual_single_step(qual))
        return false; /* not a single step, or a hardware breakpoint too: the guest's */
    if (v->trace_stepping && trace_vmx_tf()) {
        v->trace_mtf_seen = true; /* one instruction ran: as an MTF exit */
        return true;
    }
    /* TF from a frame pushed inside a past window came back (IRET, POPF): the guest never
     * set it; clear it and go on */
    vmcs_writel(GUEST_RFLAGS, vmcs_readl(GUEST_RFLAGS) & ~RFLAGS_TF);
    return true;
}

static int sw_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget)
{
    const char *why;
    if (v->trace && (v->trace->sw.on || v->trace->pending_start))
        return PTV_VMCALL_EBUSY;
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
    t->boot_window = false;
    cp_reset(&t->cp);
    memset(t->noted, 0, sizeof(t->noted));
    t->code->n = 0;
    t->pending_start = true; /* starts after this VMCALL (trace_vmx_before_entry) */
    v->trace_stepping = true;
    if (trace_vmx_tf() && !v->trace_tf_used) {
        /* once: from now on a TF a pushed frame carried out of a window is cleared at its #DB */
        v->trace_tf_used = true;
        vmcs_write32(EXCEPTION_BITMAP, 1u << DB_VECTOR);
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
    if (t->sw.on)
        swtrace_stop(&t->sw);
    t->pending_start = false;
    stepping_off(v);
    /* the first windows are named; a guest that opens thousands goes quiet */
    if (++t->windows <= 8)
        pr_info("trace", "window closed: %lu instructions, %lu bytes, %lu events, %lu gaps",
                t->sw.st.steps, t->ring.head, t->sw.st.events, t->sw.st.lost);
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
                (t->sw.budget_used ? PTV_TRACE_ST_BUDGET : 0);
    st->written = t->ring.head;
    st->insns = t->sw.st.steps;
    st->gaps = t->sw.st.lost;
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

/* the page of the instruction about to run (and the next one, for an instruction that may
 * cross into it) joins the window's code pages, with the CRC of its bytes now */
static void note_code(struct vcpu *v, struct trace_vcpu *t, const struct swtrace_cpu *c)
{
    uint64_t lin = c->cs_base + c->rip;
    t->paging = c->paging;
    bool one_page = (lin & (CP_PAGE - 1)) <= CP_PAGE - 16;
    uint64_t page1 = (lin & ~(CP_PAGE - 1)) + 1;
    if (one_page && t->noted[t->noted_hit].page1 == page1 &&
        t->noted[t->noted_hit].cr3 == c->ctx.cr3)
        return; /* the page of the last step */
    if (one_page)
        for (unsigned i = 0; i < 4; i++)
            if (t->noted[i].page1 == page1 && t->noted[i].cr3 == c->ctx.cr3) {
                t->noted_hit = i;
                return; /* a page of the last steps, in the set already */
            }
    for (uint64_t va = lin; va <= lin + 15; va = (va | (CP_PAGE - 1)) + 1) {
        int in_set = cp_note(&t->cp, c->ctx.cr3, va);
        if (in_set >= 0 && one_page) {
            t->noted[t->noted_next].page1 = page1;
            t->noted[t->noted_next].cr3 = c->ctx.cr3;
            t->noted_hit = t->noted_next;
            t->noted_next = (t->noted_next + 1) % 4;
        }
        if (in_set == 1) {
            struct code_store *cs = t->code;
            uint8_t *page = cs->n < CODE_COPIES ? cs->page[cs->n] : cs->scratch;
            uint64_t kcr3, kva;
            cp_key(c->ctx.cr3, va, &kcr3, &kva);
            if (!trace_vmx_code_read(v, c->ctx.cr3, kva, page, CP_PAGE))
                continue;
            cp_set_crc(&t->cp, c->ctx.cr3, va, frame_crc32(0, page, CP_PAGE));
            if (page != cs->scratch) { /* published after its bytes: a dump on another CPU
                                        * reads only whole copies */
                cs->key[cs->n].cr3 = kcr3;
                cs->key[cs->n].va = kva;
                __atomic_store_n(&cs->n, cs->n + 1, __ATOMIC_RELEASE);
            }
        }
    }
}

/* the window closed at its budget */
static void budget_closed(struct vcpu *v, struct trace_vcpu *t)
{
    stepping_off(v);
    if (!t->budget_logged && ++t->windows <= 8)
        pr_info("trace", "window closed at its budget: %lu instructions, %lu bytes", t->sw.st.steps,
                t->ring.head);
    t->budget_logged = true;
    if (t->boot_window) {
        t->boot_window = false;
        if (vmm_cfg->dump_on & PTV_DUMP_BOOT)
            trace_dump_start(v, FRAME_REASON_BOOT);
    }
}

/* what ran since the last look goes into the trace; the vCPU is then armed for the next step */
static void step(struct vcpu *v, struct trace_vcpu *t, bool mtf)
{
    struct gw_mem m = {.ctx = v,
                       .read = read_gpa_step,
                       .map = map_step,
                       .gen = __atomic_load_n(&vmm_sd.gen, __ATOMIC_ACQUIRE)};
    struct swtrace_cpu c;

    observe(&c);
    if (t->pending_start) {
        t->pending_start = false;
        swtrace_start(&t->sw, &t->cfg, &t->ring, &m, &c, t->budget);
        note_code(v, t, &c); /* the page the window opens on, traced or not */
        tf_arm(v);
        return;
    }
    if (!swtrace_observe(&t->sw, &m, &c, mtf)) {
        budget_closed(v, t);
        return;
    }
    if (t->sw.pt.pkt_en) /* only pages the trace will need to be decoded */
        note_code(v, t, &c);
    tf_arm(v);
}

void trace_vmx_before_entry(struct vcpu *v)
{
    bool mtf = v->trace_mtf_seen;
    v->trace_mtf_seen = false;
    step(v, v->trace, mtf);
}

/*
 * The single-step fast path (sw_trace = tf): vmx_run calls it at an exception exit while the
 * tracer steps, before decoding the exit any further.  A single step of the tracer's own
 * trap flag (trace_vmx_db_exit's test, no NMI-unblocking bit, no event being delivered:
 * db_exit_plain_step) is traced here at once, as trace_vmx_before_entry would have traced it
 * after the exit handler noted it -- that handler does nothing else with it -- and the exit
 * needs nothing more: true.  false: nothing was changed, the exit goes the whole way.
 */
bool trace_vmx_step_exit(struct vcpu *v, uint32_t intr_info)
{
    struct trace_vcpu *t = v->trace;
    if (!v->trace_stepping || !v->trace_tf_used || v->mtf_probe || v->trace_mtf_seen ||
        t->pending_start || !trace_vmx_tf() ||
        !db_exit_plain_step(intr_info, vmcs_readl(EXIT_QUALIFICATION),
                            vmcs_read32(IDT_VECTORING_INFO_FIELD)))
        return false;
    step(v, t, true);
    return true;
}

/* --- the two sources behind one ABI: system-mode PT where this vCPU has it, else software --- */

static bool hw_source(const struct vcpu *v)
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
    pt_vmx_sys_status(v, &st);
    if (st.on)
        return PTV_VMCALL_EBUSY;
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
    /* the engine checks every field against the CPU's PT (pt_sys_check) */
    if (pt_vmx_sys_set_filter(v, &cfg, &why) || pt_vmx_sys_start(v, true, &why))
        return PTV_VMCALL_EINVAL;
    return 0;
}

static void hw_status(struct vcpu *v, struct trace_status *st)
{
    struct pt_sys_status s;
    pt_vmx_sys_status(v, &s);
    *st = (struct trace_status){
        .flags = (s.on ? PTV_TRACE_ST_ON : 0) | (s.wrapped ? PTV_TRACE_ST_WRAPPED : 0) |
                 (s.stopped ? PTV_TRACE_ST_STOPPED : 0),
        .ring_size = s.ring_size,
        .written = s.bytes,
    };
}

int trace_vmx_start(struct vcpu *v, const struct trace_req *rq, uint64_t budget, uint32_t *src)
{
    *src = hw_source(v) ? PTV_TRACE_SRC_HARDWARE : PTV_TRACE_SRC_SOFTWARE;
    return hw_source(v) ? hw_start(v, rq, budget) : sw_start(v, rq, budget);
}

int trace_vmx_stop(struct vcpu *v)
{
    if (hw_source(v)) {
        pt_vmx_sys_stop(v);
        return 0;
    }
    return sw_stop(v);
}

void trace_vmx_status(struct vcpu *v, struct trace_status *st)
{
    if (hw_source(v))
        hw_status(v, st);
    else
        sw_status(v, st);
    if (v->dumping)
        st->flags |= PTV_TRACE_ST_DUMPING;
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
    if (hw_source(v))
        return pt_vmx_sys_read(v, off - oldest, buf, len);
    const struct trace_vcpu *t = traced(v);
    if (!t)
        return 0;
    sw_copy(t, off, buf, len);
    return len;
}

int trace_vmx_read(struct vcpu *v, uint64_t gpa, uint64_t len, uint64_t off, uint64_t *copied,
                   uint64_t *oldest, uint64_t *written)
{
    struct trace_status st;
    trace_vmx_status(v, &st);
    *copied = 0;
    *written = st.written;
    *oldest = st.written > st.ring_size ? st.written - st.ring_size : 0;
    if (off < *oldest || gpa + len < gpa)
        return PTV_VMCALL_EINVAL;
    if (off >= st.written)
        return 0;
    if (len > st.written - off)
        len = st.written - off;
    /* validate the whole destination before writing a byte of it */
    for (uint64_t p = gpa & ~0xfffull; p < gpa + len; p += PAGE_SIZE)
        if (!guest_page(v, p, PAGE_SIZE, true))
            return PTV_VMCALL_EINVAL;
    for (uint64_t done = 0; done < len;) {
        uint64_t n = len - done, in_page = PAGE_SIZE - ((gpa + done) & 0xfff);
        if (n > in_page)
            n = in_page;
        if (trace_vmx_bytes(v, off + done, (void *)(uintptr_t)guest_page(v, gpa + done, n, true),
                            n) != n)
            return PTV_VMCALL_EINVAL; /* cannot happen: the range was checked above */
        done += n;
    }
    *copied = len;
    return 0;
}

/*
 * trace_boot = N: the guest OS's first N instructions from its loader's hand-off
 * (BOOT_HANDOFF, right before StartImage), before the guest could ask for anything.  Software: a
 * window with a budget of N and the configured filters.  Hardware counts no instructions: the
 * system trace starts at the first entry and the ring keeps the first (trace_wrap = off) or the
 * last ring-full of it.
 */
void trace_vmx_boot(struct vcpu *v)
{
    uint32_t src;
    if (!vmm_cfg->trace_boot)
        return;
    const struct trace_req rq = {0}; /* the configured filters */
    int rc = trace_vmx_start(v, &rq, hw_source(v) ? 0 : vmm_cfg->trace_boot, &src);
    if (rc)
        pr_warn("trace", "trace_boot = %lu: no boot trace (error %d)", vmm_cfg->trace_boot, rc);
    else if (src == PTV_TRACE_SRC_SOFTWARE)
        v->trace->boot_window = true;
    if (!rc)
        pr_info("trace",
                "trace_boot: tracing the guest OS's first %lu instructions from the "
                "loader's hand-off (%s)",
                vmm_cfg->trace_boot,
                src == PTV_TRACE_SRC_HARDWARE ? "Intel PT"
                : trace_vmx_tf()              ? "software tracer, trap-flag steps"
                                              : "software tracer, MTF steps");
}

/* --- what a dump reads (vmx/trace_dump.c) --- */

bool trace_vmx_window(struct vcpu *v, struct trace_window *w)
{
    struct trace_status st;
    trace_vmx_status(v, &st);
    *w = (struct trace_window){
        .hardware = hw_source(v),
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

bool trace_vmx_code_read(struct vcpu *v, uint64_t cr3, uint64_t va, void *buf, unsigned len)
{
    const struct trace_vcpu *t = v->trace;
    struct gw_mem m = {.ctx = v, .read = read_gpa};
    unsigned got;
    uint64_t kcr3, kva;
    if (!t)
        return false;
    cp_key(cr3 == CP_CR3_ANY ? t->paging.cr3 : cr3, va, &kcr3, &kva);
    unsigned ncopies = t->code ? __atomic_load_n(&t->code->n, __ATOMIC_ACQUIRE) : 0;
    for (unsigned i = 0; i < ncopies; i++) /* the bytes as they ran */
        if (t->code->key[i].va == kva && t->code->key[i].cr3 == kcr3 &&
            (va & (CP_PAGE - 1)) + len <= CP_PAGE) {
            memcpy(buf, t->code->page[i] + (va & (CP_PAGE - 1)), len);
            return true;
        }
    struct gw_paging p = t->paging;
    if (cr3 != CP_CR3_ANY)
        p.cr3 = cr3;
    return gw_read(&m, &p, va, buf, len, &got) == 0 && got == len;
}
