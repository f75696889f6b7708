/* SPDX-License-Identifier: MIT */
/*
 * Serial trace dumps from the VMM: a thin shim.  What goes out in which order, the
 * window cut at a PSB and the frame lines are vmm/trace/dump.c + frame.c (host-tested); here:
 * which CPUs a dump holds, their BEGIN metadata, the code snapshots (pages the window ran,
 * sent only when their bytes still match what ran), reading the rings and guest memory, and
 * when a line may go out.
 *
 * Pacing.  A TRACE_DUMP or a closing trace_boot window starts a dump; it goes out in slices
 * right before the dumping CPU's VM entries.  A slice sends lines until dump_stall has passed
 * (at least one line: ~17 ms at 115200 baud), and only while the guest's console line is
 * closed and the multiplexer has nothing queued, so frame lines never wait in (or overflow)
 * its ring and never split a guest line; a guest line open for longer than HOLD_TICKS (the
 * multiplexer's own patience) is ended by the multiplexer and the lines go out urgently.  While a
 * dump goes out the VMX-preemption timer (where the CPU has it) makes an exit every dump_stall, so
 * a guest that makes no exits still lets the dump progress; the guest runs between slices.
 *
 * The dump's owner is the vCPU it was started on (trace/dump.h, struct dump_pacer).  One that stops
 * entering the guest (an AP parked in wait-for-SIPI) would hold it for good and make every later
 * TRACE_DUMP or host request EBUSY: a request that finds the dump going out
 * takes it over once the owner has not come for a slice in ORPHAN_SLICES stall budgets, and the
 * rest goes out from the requester's entries, paced as before.
 *
 * A crash dump goes out at once: the guest is dead.
 */
#include "trace/shim/trace_dump.h"
#include "trace/shim/trace_vmx.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "trace/dump.h"
#include "trace/codepages.h"
#include "dev/uart_console.h"
#include "hw/spinlock.h"
#include "smp/smp.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "hw/percpu.h"
#include "base/handoff.h"
#include "base/vmm_state.h"
#include "lib/ptv_string.h"
#include "lib/range.h"
#include <ptv/vmcall.h>

#define SNAP_RUN_MAX (64u << 10)
#define HOLD_TICKS                                                                                 \
    (1ull << 31) /* as CONSOLE_HOLD_TICKS (dev/uart_console.c) */ /* adjacent code pages join one  \
                                                                     snapshot up to this size */

static struct dump_job job; /* ~23 KiB */
static struct dump_sect sects[PTV_MAX_CPUS];
static struct vcpu *sect_vcpu[PTV_MAX_CPUS];
static struct frame_range ranges[PTV_MAX_CPUS][FRAME_MAX_RANGES];
static struct frame_snap snaps[FRAME_MAX_SNAPS]; /* shared by the sections, in order */
static uint64_t cr3s[FRAME_MAX_CR3S];
static const char *crash_text;
static size_t crash_len;
static struct spinlock lock; /* the job: one CPU in it at a time */
static uint32_t dumps, boot_id;
static uint64_t tsc_hz, stall_ticks, started;
static uint64_t blocked; /* TSC when a slice first found the guest's line open (0: not) */
static bool urgent;
static struct dump_pacer pacer; /* whose entries send the paced dump's slices */
/* a paced dump whose owner has not come for a slice in this many stall budgets is orphaned: the
 * next request takes it over (an owner that enters the guest comes at least once per budget
 * while the VMX-preemption timer runs) */
#define ORPHAN_SLICES 8u

/* --- reading --- */

static size_t read_trace(void *ctx, uint64_t off, uint8_t *buf, size_t len)
{
    return trace_vmx_bytes(ctx, off, buf, len);
}

static size_t read_stream(void *ctx, unsigned s, unsigned stream, uint64_t off, uint8_t *buf,
                          size_t len)
{
    (void)ctx;
    struct vcpu *v = sect_vcpu[s];
    if (stream == FRAME_STREAM_TRACE)
        return trace_vmx_bytes(v, off, buf, len);
    if (stream == FRAME_STREAM_CRASH) {
        if (!crash_text || off >= crash_len)
            return 0;
        if (len > crash_len - off)
            len = crash_len - off;
        memcpy(buf, crash_text + off, len);
        return len;
    }
    const struct frame_snap *sn = &sects[s].b.snaps[stream - FRAME_STREAM_SNAP(0)];
    size_t done = 0;
    struct range_walk w; /* page by page: a page that is gone ends the read short */
    range_for_each(&w, sn->va + off, len, CP_PAGE, RANGE_SPACE64)
    {
        if (!trace_vmx_code_read(v, sn->cr3 == FRAME_CR3_ANY ? CP_CR3_ANY : sn->cr3, w.addr,
                                 buf + done, (unsigned)w.len))
            break;
        done += w.len;
    }
    return done;
}

/* --- lines --- */

static void line_out(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    console_write(s, n, urgent);
}

/* --- the plan: sections and their metadata --- */

static uint64_t tsc_frequency(void)
{
    if (cpuid_count(0, 0).eax >= 0x15) {
        struct cpuid_regs r = cpuid_count(0x15, 0);
        if (r.eax && r.ebx && r.ecx)
            return (uint64_t)r.ecx * r.ebx / r.eax;
    }
    if (cpuid_count(0, 0).eax >= 0x16) {
        uint32_t mhz = cpuid_count(0x16, 0).eax & 0xffff;
        if (mhz)
            return (uint64_t)mhz * 1000000;
    }
    return 0;
}

/* code pages of a window in (cr3, va) order: insertion sort of a bounded set */
static unsigned sorted_pages(const struct codepages *cp, const struct cp_entry **out, unsigned max)
{
    unsigned n = 0;
    for (uint32_t i = 0; cp && i < cp->cap && n < max; i++) {
        const struct cp_entry *e = cp_slot(cp, i);
        if (!e)
            continue;
        unsigned k = n++;
        while (k && (out[k - 1]->cr3 > e->cr3 ||
                     (out[k - 1]->cr3 == e->cr3 && out[k - 1]->va > e->va))) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = e;
    }
    return n;
}

/* the snapshots of v's window from *nsnap on: pages whose bytes still match what ran */
static void plan_snapshots(struct vcpu *v, const struct trace_window *w, unsigned *nsnap,
                           uint64_t *changed, uint64_t *gone)
{
    const unsigned first = *nsnap; /* this section's snapshots start here */
    static const struct cp_entry *pages[1024];
    static uint8_t page[CP_PAGE];
    unsigned n = sorted_pages(w->code, pages, 1024);
    for (unsigned i = 0; i < n; i++) {
        const struct cp_entry *e = pages[i];
        if (!e->seen || !trace_vmx_code_read(v, e->cr3, e->va, page, CP_PAGE)) {
            (*gone)++; /* unreadable now (an exited process) and not among the copies */
            continue;
        }
        if (frame_crc32(0, page, CP_PAGE) != e->crc) {
            (*changed)++; /* never send bytes that did not run: the host reports them missing */
            continue;
        }
        uint64_t cr3 = e->cr3 == CP_CR3_ANY ? FRAME_CR3_ANY : e->cr3;
        struct frame_snap *last = *nsnap > first ? &snaps[*nsnap - 1] : NULL;
        if (last && last->cr3 == cr3 && last->va + last->len == e->va && last->len < SNAP_RUN_MAX) {
            last->len += CP_PAGE;
            continue;
        }
        if (*nsnap == FRAME_MAX_SNAPS) {
            (*gone)++;
            continue;
        }
        snaps[(*nsnap)++] = (struct frame_snap){.va = e->va, .cr3 = cr3, .len = CP_PAGE};
    }
}

static unsigned add_cr3(unsigned n, uint64_t cr3)
{
    for (unsigned i = 0; i < n; i++)
        if (cr3s[i] == cr3)
            return n;
    if (n < FRAME_MAX_CR3S)
        cr3s[n++] = cr3;
    return n;
}

/* section i: v's window */
static void plan_section(unsigned i, struct vcpu *v, enum frame_reason why, unsigned ncpus,
                         unsigned *nsnap, unsigned *ncr3, uint64_t *changed, uint64_t *gone)
{
    struct trace_window w;
    struct dump_sect *s = &sects[i];
    bool traced = trace_vmx_window(v, &w);
    unsigned snap0 = *nsnap, cr30 = *ncr3;

    sect_vcpu[i] = v;
    *s = (struct dump_sect){0};
    if (traced) {
        s->t_start = dump_trace_start(read_trace, v, w.oldest, w.written, vmm_cfg->dump_window);
        s->b.trace_len = w.written - s->t_start;
        for (unsigned r = 0; r < w.nranges && r < FRAME_MAX_RANGES; r++)
            ranges[i][r] = (struct frame_range){w.range[r].lo, w.range[r].hi};
        s->b.nranges = w.nranges < FRAME_MAX_RANGES ? w.nranges : FRAME_MAX_RANGES;
        plan_snapshots(v, &w, nsnap, changed, gone);
        if (w.code) {
            for (uint32_t k = 0; k < w.code->cap; k++) {
                const struct cp_entry *e = cp_slot(w.code, k);
                if (e && e->cr3 != CP_CR3_ANY)
                    *ncr3 = add_cr3(*ncr3, e->cr3);
            }
            *ncr3 = add_cr3(*ncr3, w.last_cr3);
        }
    }
    s->b.boot_id = boot_id;
    s->b.dump_id = dumps;
    s->b.cpu = v->id;
    s->b.ncpus = ncpus;
    s->b.reason = why;
    s->b.source = w.hardware ? FRAME_SRC_HARDWARE : FRAME_SRC_SOFTWARE;
    s->b.filter = (w.user ? FRAME_FILTER_USER : 0) | (w.kernel ? FRAME_FILTER_KERNEL : 0) |
                  (w.cr3_match ? FRAME_FILTER_CR3 : 0);
    s->b.filter_cr3 = w.cr3_match ? w.cr3 : 0;
    s->b.ranges = ranges[i];
    s->b.ring_size = w.ring_size;
    s->b.wrapped = w.wrapped;
    s->b.overflows = w.gaps;
    s->b.tsc_hz = tsc_hz;
    uint64_t lstar; /* the guest's SYSCALL entry: with vmlinux it gives KASLR's offset */
    if (!rdmsr_safe(MSR_LSTAR, &lstar))
        s->b.syscall_entry = lstar;
    s->b.cr3s = cr3s + cr30;
    s->b.ncr3 = *ncr3 - cr30;
    s->b.snaps = snaps + snap0;
    s->b.nsnap = *nsnap - snap0;
    if (v == sect_vcpu[0] && crash_text)
        s->b.crash_len = crash_len;
}

/* the dump of `list` (the first one is the CPU that asked or crashed); 0 or -1 (logged) */
static int plan(struct vcpu **list, unsigned n, enum frame_reason why)
{
    const struct dump_ops ops = {.read = read_stream};
    const struct frame_out out = {.line = line_out};
    unsigned nsnap = 0, ncr3 = 0;
    uint64_t changed = 0, gone = 0, bytes = 0;

    if (!boot_id) {
        boot_id = (uint32_t)rdtsc() | 1;
        tsc_hz = tsc_frequency();
        /* without the TSC frequency (CPUID 0x15 / 0x16) a tick is taken as 1 ns */
        stall_ticks = (tsc_hz ? tsc_hz : 1000000000ull) / 1000000 * vmm_cfg->dump_stall_us;
    }
    dumps++;
    for (unsigned i = 0; i < n; i++)
        plan_section(i, list[i], why, n, &nsnap, &ncr3, &changed, &gone);
    if (dump_start(&job, sects, n, &ops, &out)) {
        pr_warn("dump", "dump %u refused: %s", dumps, job.err);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        bytes += sects[i].b.trace_len + sects[i].b.crash_len;
        for (unsigned k = 0; k < sects[i].b.nsnap; k++)
            bytes += sects[i].b.snaps[k].len;
    }
    started = rdtsc();
    blocked = 0;
    /* wire bytes ~ 0.6 per PT byte (docs/serial-protocol.md): a progress line to wait by */
    pr_info("dump",
            "dump %u (%s): %u CPU(s), %lu bytes (%u code snapshots; code pages not sent: %lu "
            "changed since they ran, %lu gone), ~%lu s at %u baud",
            dumps,
            why == FRAME_REASON_CRASH  ? "crash"
            : why == FRAME_REASON_BOOT ? "boot"
                                       : "vmcall",
            n, bytes, nsnap, changed, gone,
            bytes * 6 / 10 / (vmm_cfg->serial_baud / 10 ? vmm_cfg->serial_baud / 10 : 1) + 1,
            vmm_cfg->serial_baud);
    return 0;
}

static void finished(void)
{
    pr_info("dump", "dump %u done: %lu frame lines, %lu bytes sent, %lu lost, %lu ticks%s", dumps,
            job.lines, job.bytes, job.lost, rdtsc() - started,
            job.err ? " (stopped: encoder error)" : "");
}

/* --- paced dumps --- */

static void timer(bool on)
{
    if (!(vmx_caps.pin >> 32 & PIN_BASED_PREEMPT_TIMER))
        return;
    uint32_t pin = vmcs_read32(PIN_BASED_VM_EXEC_CONTROL);
    pin = on ? pin | PIN_BASED_PREEMPT_TIMER : pin & ~PIN_BASED_PREEMPT_TIMER;
    vmcs_write32(PIN_BASED_VM_EXEC_CONTROL, pin);
    if (on) { /* the timer counts TSC >> IA32_VMX_MISC[4:0] */
        uint64_t t = stall_ticks >> (vmx_caps.misc & 0x1f);
        vmcs_write32(VMX_PREEMPTION_TIMER_VALUE, t > 0xffffffffull ? 0xffffffffu
                                                 : t               ? (uint32_t)t
                                                                   : 1);
    }
}

/* the sections of a dump, v first: v if it traced (always, for a crash: its report), then
 * with all every other vCPU that traced; the count */
static unsigned gather(struct vcpu *v, bool v_always, bool all, struct vcpu **list)
{
    struct trace_window w;
    unsigned n = 0;
    if (v_always || trace_vmx_window(v, &w))
        list[n++] = v;
    for (unsigned i = 0; all && i < PTV_MAX_CPUS; i++) {
        struct vcpu *o = percpu_area[i].vcpu;
        if (o && o != v && trace_vmx_window(o, &w))
            list[n++] = o;
    }
    return n;
}

/* a paced dump, going out from v's entries */
static int start_paced(struct vcpu *v, enum frame_reason why, bool all)
{
    static struct vcpu *list[PTV_MAX_CPUS];
    static unsigned long said;
    if (!spin_trylock(&lock))
        return PTV_VMCALL_EBUSY;
    int rc = 0;
    if (!dump_done(&job) && job.sect) { /* one dump at a time */
        rc = PTV_VMCALL_EBUSY;
        unsigned from = pacer.owner - 1;
        if (dump_pacer_adopt(&pacer, v->id, rdtsc(), ORPHAN_SLICES * stall_ticks)) {
            v->dumping = true; /* the rest goes out from this vCPU's entries */
            if (log_ratelimit(&said))
                pr_info("dump",
                        "dump %u: cpu %u stopped sending it (no VM entry since "
                        "%u stall budgets); cpu %u sends the rest",
                        dumps, from, ORPHAN_SLICES, v->id);
        }
        spin_unlock(&lock);
        return rc;
    }
    unsigned n = gather(v, false, all, list);
    if (!n)
        rc = PTV_VMCALL_EINVAL; /* nothing traced */
    else if (plan(list, n, why))
        rc = PTV_VMCALL_EINVAL;
    else {
        v->dumping = true;
        urgent = false;
        dump_pacer_start(&pacer, v->id, rdtsc());
    }
    spin_unlock(&lock);
    return rc;
}

int trace_dump_start(struct vcpu *v, enum frame_reason why)
{
    return start_paced(v, why, false);
}

void trace_dump_serial(struct vcpu *v)
{
    static uint64_t taken;
    static unsigned long said;
    uint64_t n = console_dump_requests();
    if (n == __atomic_load_n(&taken, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&taken, n, __ATOMIC_RELAXED);
    int rc = start_paced(v, FRAME_REASON_SERIAL, true); /* every CPU that traced */
    if (rc && log_ratelimit(&said))
        pr_info("dump", "dump asked for over the serial line: %s",
                rc == PTV_VMCALL_EBUSY ? "a dump is going out already" : "nothing traced yet");
}

int trace_dump_request(struct vcpu *v, uint32_t *id)
{
    int rc = trace_dump_start(v, FRAME_REASON_VMCALL);
    *id = rc ? 0 : dumps;
    return rc;
}

uint32_t trace_dump_count(void)
{
    return __atomic_load_n(&dumps, __ATOMIC_RELAXED);
}

bool trace_dump_busy(const struct vcpu *v)
{
    return v->dumping;
}

void trace_dump_slice(struct vcpu *v)
{
    if (!spin_trylock(&lock))
        return; /* a crash dump on another CPU has the job */
    uint64_t t0 = rdtsc();
    /* finished here, taken over by a crash dump, or by a request while v was away */
    if (dump_done(&job) || !dump_pacer_turn(&pacer, v->id, t0)) {
        v->dumping = false;
        timer(false);
        spin_unlock(&lock);
        return;
    }
    if (!console_frame_ready()) {
        if (!blocked)
            blocked = t0;
        if (t0 - blocked < HOLD_TICKS) {
            timer(true);
            spin_unlock(&lock);
            return;
        }
    }
    urgent = blocked != 0;
    bool more;
    do
        more = dump_step(&job);
    while (more && rdtsc() - t0 < stall_ticks && (urgent || console_frame_ready()));
    blocked = 0;
    if (!more) {
        finished();
        dump_pacer_end(&pacer);
        v->dumping = false;
    }
    timer(more);
    spin_unlock(&lock);
}

void trace_dump_timer_exit(struct vcpu *v)
{
    if (!v->dumping)
        timer(false);
}

/* --- crash --- */

void trace_dump_crash(struct vcpu *v, const char *text, size_t len)
{
    static struct vcpu *list[PTV_MAX_CPUS];
    spin_lock(&lock);
    if (job.sect && !dump_done(&job))
        pr_warn("dump", "dump %u abandoned for the crash dump", dumps);
    crash_text = text;
    crash_len = len;
    unsigned n = gather(v, true, true, list);
    urgent = true;
    if (!plan(list, n, FRAME_REASON_CRASH)) {
        while (dump_step(&job))
            ;
        finished();
    }
    dump_pacer_end(&pacer); /* a paced dump's owner finds it done at its next entry */
    crash_text = NULL;
    spin_unlock(&lock);
}
