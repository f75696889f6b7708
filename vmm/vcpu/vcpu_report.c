/* SPDX-License-Identifier: MIT */
/*
 * Crash reports: the guest registers, the VMCS by field name, the ring of recent exits, the
 * exit statistics and the guest's LBR stack, written as text into a buffer, so the same report goes
 * to the console (plain lines) and into the serial dump's crash stream (trace/shim/trace_dump.c),
 * where `ptvisor-trace extract` finds it as crash.txt.
 */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "trace/shim/trace_dump.h"
#include "lbr/shim/lbr_vmx.h"
#include "dev/uart_console.h"
#include "base/vmm_state.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "base/handoff.h"
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include <stdarg.h>

/* text appended to a buffer; what does not fit is cut and counted */
struct report {
    char *p;
    size_t cap, len;
    bool cut;
};

static void rp(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rp(struct report *r, const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    int n = ptv_vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    if (r->len + len > r->cap) {
        r->cut = true;
        return;
    }
    memcpy(r->p + r->len, line, len);
    r->len += len;
}

static void report_vmcs(struct report *r)
{
    rp(r, "---- VMCS ----\n");
    for (unsigned i = 0; i < vmcs_field_count; i++) {
        const struct vmcs_field_info *f = &vmcs_field_table[i];
        uint64_t val;
        if (__vmread(f->encoding, &val))
            rp(r, "  %-30s        n/a\n", f->name);
        else
            rp(r, "  %-30s %016lx\n", f->name, val);
    }
}

static void report_exits(struct report *r, const struct vcpu *v)
{
    rp(r, "---- last exits (oldest first) ----\n");
    unsigned n = v->ring_next < EXIT_RING_SIZE ? v->ring_next : EXIT_RING_SIZE;
    for (unsigned i = 0; i < n; i++) {
        const struct exit_record *e = &v->ring[(v->ring_next - n + i) % EXIT_RING_SIZE];
        rp(r, "  #%-6lu %-20s qual %016lx rip %016lx tsc %lu\n",
           (unsigned long)(v->ring_next - n + i), vmx_exit_reason_name(e->reason), e->qual, e->rip,
           e->tsc);
    }
    rp(r, "---- exit statistics ----\n");
    rp(r, "  %lu VM exits in total\n", v->exits_total);
    for (unsigned k = 0; k <= EXIT_REASON_MAX; k++)
        if (v->exits_by_reason[k])
            rp(r, "  exits %-20s %lu\n", k < EXIT_REASON_MAX ? vmx_exit_reason_name(k) : "OTHER",
               v->exits_by_reason[k]);
}

size_t crash_report(struct vcpu *v, const char *why, char *buf, size_t cap)
{
    static const char *const names[NR_GPRS] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                               "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                               "r12", "r13", "r14", "r15"};
    struct report r = {.p = buf, .cap = cap};
    rp(&r, "ptvisor crash report: cpu %u, guest stopped: %s\n", v->id, why);
    rp(&r, "---- guest registers ----\n");
    for (unsigned i = 0; i < NR_GPRS; i++)
        if (i != GPR_RSP) /* RSP is in the VMCS */
            rp(&r, "  %-3s %016lx\n", names[i], v->regs.gpr[i]);
    report_vmcs(&r);
    report_exits(&r, v);
    if (!r.cut) /* this CPU's guest LBR stack, frozen since the exit (vmm/lbr/lbr_report.c) */
        r.len += lbr_vmx_crash_text(r.p + r.len, r.cap - r.len);
    if (r.cut && r.len + 32 <= cap) {
        memcpy(r.p + r.len, "(report cut: buffer full)\n", 26);
        r.len += 26;
    }
    return r.len;
}

/* text of whole lines to the console, now (urgent: a dying guest's open line is ended) */
static void print_text(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j] != '\n')
            j++;
        console_write(p + i, j < n ? j - i + 1 : j - i, true);
        i = j + 1;
    }
}

/* one report at a time: the buffer is the crash stream of the dump that follows */
static char report_buf[32768];
static volatile int report_busy;

void exit_stats_print(const struct vcpu *v)
{
    pr_info("stats", "%lu VM exits in total", v->exits_total);
    for (unsigned r = 0; r <= EXIT_REASON_MAX; r++)
        if (v->exits_by_reason[r])
            pr_info("stats", "exits %-20s %lu",
                    r < EXIT_REASON_MAX ? vmx_exit_reason_name(r) : "OTHER", v->exits_by_reason[r]);
}

/* the crash report on the console and, with dump (and dump_on = crash), in a dump with every
 * CPU's window */
static void report_and_dump(struct vcpu *v, const char *why, bool dump)
{
    if (__atomic_exchange_n(&report_busy, 1, __ATOMIC_ACQUIRE)) {
        pr_err("vmx", "cpu %u: another CPU is writing its crash report", v->id);
        return;
    }
    size_t n = crash_report(v, why, report_buf, sizeof(report_buf));
    print_text(report_buf, n);
    if (dump && (vmm_cfg->dump_on & PTV_DUMP_CRASH))
        trace_dump_crash(v, report_buf, n); /* the report, every CPU's trace, code pages */
    __atomic_store_n(&report_busy, 0, __ATOMIC_RELEASE);
}

/* a VMM panic (panic.c's hook): the report only, the VMM's state is in doubt */
void vcpu_dump(struct vcpu *v)
{
    report_and_dump(v, "VMM panic", false);
}

void vcpu_stop_guest(struct vcpu *v, const char *why)
{
    pr_err("vmx", "guest stopped: %s", why);
    report_and_dump(v, why, true);
    pr_err("vmx", "crash dump complete; on_crash action follows");
    machine_crash_action(vmm_cfg->crash_action);
}

/*
 * Linux's panic line went out (exit_io.c).  The report and dump go out at once, holding this
 * vCPU: a panicking kernel resets right after (panic=-1, or panic=N seconds later) and a
 * reset never reaches the VMM, so a paced dump would die with it.  What keeps a spoofed line
 * from costing much is the trigger (dev/uart_mux.h, UART_GUEST_PANIC): only a line printk's
 * polled console path wrote at a line's start counts, within a budget of UART_PANIC_BURST
 * refilled one per UART_PANIC_REFILL ticks, and there is no once -- a line that passes the
 * gate and is not a panic (root writing /dev/kmsg) holds this vCPU for one dump and leaves
 * the real panic its own.
 */
void vcpu_guest_panicked(struct vcpu *v)
{
    pr_err("vmx", "the guest's console says its kernel panicked: crash report and dump");
    report_and_dump(v, "guest kernel panic (its console line)", true);
    pr_err("vmx", "panic dump complete; the guest goes on (its panic= setting decides)");
}
