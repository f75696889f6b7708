/* SPDX-License-Identifier: MIT */
/*
 * trace.efi: the software tracer seen from inside.  Runs as the VMM's
 * guest in Bochs (tests/system/bochs-trace.sh).
 *
 *  1. The reference: the workload single-stepped by the guest itself with
 *     RFLAGS.TF (a #DB handler records every IP) -- what bare metal ran.
 *  2. The same workload inside a TRACE_START / TRACE_STOP window; the ring is
 *     read back with TRACE_READ and printed with the code pages the reference
 *     touched.  The host decodes it with libipt (tests/guest/trace_check.c) and
 *     requires the decoded instructions == the reference, one by one.
 *  3. An IP-range window around a UD2 whose handler lies outside the range:
 *     the decode must show the event at the UD2 and resume after it.
 *  4. TRACE_DUMP of window 2: the VMM sends it as frame lines (docs/serial-protocol.md)
 *     in slices while this guest keeps printing; the host extracts the dump from the
 *     serial log and requires its trace stream == the bytes TRACE_READ gave here, and
 *     its code snapshots == the pages printed here.
 *  5. An instruction budget, the ABI's refusals (EBUSY, EINVAL, a TRACE_READ into
 *     VMM memory), SELFCHECK afterwards.
 *  6. After the summary, a triple fault: the VMM's crash dump (report + trace window)
 *     must come out and be extracted on the host.
 * Output for the host: "TRACE-PT", "TRACE-CODE", "TRACE-REF", "TRACE-RANGE" lines.
 */
#include <efi.h>
#include <efilib.h>
#include "libtest.h"
#include "trap.h"
#include "x86.h"
#include <ptv/vmcall.h>

typedef int (*work_fn)(int);
extern char trace_rt_lo[], trace_rt_hi[], trace_db_handler[];
extern char trace_ev_lo[], trace_ev_ud[], trace_ev_after[], trace_ev_hi[];
extern uint64_t trace_tf_ips[], trace_tf_n, trace_tf_max;
uint64_t trace_tf_run(work_fn fn, int arg);
int trace_mtf_run(work_fn fn, int arg, uint64_t flags, uint64_t budget, int64_t *rc);
void trace_ev_run(int64_t *rc);

/* ---- the workload: loops, indirect calls, a jump table, recursion, a CPUID exit,
 * a REP string instruction ---- */

static volatile int sink;
static __attribute__((noinline)) int op_a(int x)
{
    return x * 3 + 1;
}
static __attribute__((noinline)) int op_b(int x)
{
    return x ^ 0x5a;
}
static __attribute__((noinline)) int op_c(int x)
{
    return x > 7 ? x - 7 : x + 11;
}
static int (*volatile ops[3])(int) = {op_a, op_b, op_c};

static __attribute__((noinline)) int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static __attribute__((noinline)) int workload(int n)
{
    int acc = 0;
    uint8_t buf[64];
    for (int i = 0; i < n; i++) {
        acc += ops[i % 3](i);
        switch (i & 7) { /* a jump table at -O2 */
        case 0:
            acc += 3;
            break;
        case 1:
            acc ^= 0x11;
            break;
        case 2:
            acc -= 5;
            break;
        case 3:
            acc += acc >> 3;
            break;
        case 4:
            acc |= 0x40;
            break;
        case 5:
            acc = acc * 5;
            break;
        default:
            acc += i;
            break;
        }
        if (acc & 1)
            acc ^= 0x55;
    }
    acc += fib(7);
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    acc += (int)(a & 0xff);
    void *dst = buf;
    size_t cnt = sizeof(buf);
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(cnt) : "a"(acc & 0xff) : "memory");
    sink = buf[5];
    return acc;
}

/* ---- VMCALLs ---- */

static struct vmcall6 call(uint64_t fn, uint64_t rbx, uint64_t rcx, uint64_t rdx, uint64_t rsi,
                           uint64_t r8)
{
    struct vmcall6 r = {.rax = fn, .rbx = rbx, .rcx = rcx, .rdx = rdx, .rsi = rsi, .r8 = r8};
    vmcall6(&r);
    return r;
}

/* ---- output for the host ---- */

static void hex_line(const char *tag, uint64_t addr, const uint8_t *p, unsigned n)
{
    char line[16 + 2 * 32 + 1];
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        line[2 * i] = hx[p[i] >> 4];
        line[2 * i + 1] = hx[p[i] & 15];
    }
    line[2 * n] = 0;
    test_printf("%s %lx %s\n", tag, addr, line);
}

static uint8_t ring_copy[256 << 10];
static bool nomtf; /* the CPU delivered no MTF exit: the instruction checks cannot run */

/* read this vCPU's whole stream back and print it; the byte count */
static uint64_t dump_ring(unsigned window)
{
    struct vmcall6 st = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0);
    uint64_t head = st.rdx, got = 0;
    if (head > sizeof(ring_copy)) {
        report(false, "window %u: %lu trace bytes fit the copy buffer", window, head);
        return 0;
    }
    while (got < head) {
        struct vmcall6 r =
            call(PTV_VMCALL_TRACE_READ, (uint64_t)(ring_copy + got), 4096, got, 0, 0);
        if ((int64_t)r.rax != PTV_VMCALL_OK || r.rbx == 0)
            break;
        got += r.rbx;
    }
    report(got == head, "window %u: TRACE_READ returned all %lu bytes", window, head);
    for (uint64_t o = 0; o < got; o += 32)
        hex_line(window == 1 ? "TRACE-PT1" : "TRACE-PT2", o, ring_copy + o,
                 got - o < 32 ? (unsigned)(got - o) : 32);
    return got;
}

static void dump_page(uint64_t page)
{
    for (unsigned o = 0; o < 4096; o += 32)
        hex_line("TRACE-CODE", page + o, (const uint8_t *)(page + o), 32);
}

/* the code pages the reference ran (each once), and the range pages */
static void dump_code(void)
{
    uint64_t pages[64];
    unsigned np = 0;
    for (uint64_t i = 0; i <= trace_tf_n; i++) {
        uint64_t ip = i < trace_tf_n ? trace_tf_ips[i] : (uint64_t)trace_ev_lo;
        for (uint64_t pg = ip & ~0xfffull; pg <= ((ip + 15) & ~0xfffull); pg += 4096) {
            unsigned k = 0;
            while (k < np && pages[k] != pg)
                k++;
            if (k == np && np < 64) {
                pages[np++] = pg;
                dump_page(pg);
            }
        }
    }
    report_info("%u code pages dumped", np);
}

/* TRACE_DUMP of this vCPU's window: started, refused while going out, done while the guest
 * prints between the VMM's frame lines */
static void dump_out(void)
{
    struct vmcall6 x0 = call(PTV_VMCALL_EXIT_STATS, 52 /* PREEMPTION_TIMER */, 0, 0, 0, 0);
    struct vmcall6 r = call(PTV_VMCALL_TRACE_DUMP, 0, 0, 0, 0, 0);
    struct vmcall6 again = call(PTV_VMCALL_TRACE_DUMP, 0, 0, 0, 0, 0);
    unsigned polls = 0, lines = 0, busy = 0, started = 0, other = 0;
    struct vmcall6 log0 = call(PTV_VMCALL_VMM_STATS, 0, 0, 0, 0, 0);
    for (; polls < 200000; polls++) {
        struct vmcall6 st = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0);
        if (!(st.rbx & PTV_TRACE_ST_DUMPING))
            break;
        /* hostile: a storm of TRACE_DUMPs while one goes out (before this poll's guest line:
         * a line takes the UART long enough for the rest of a dump to go out meanwhile) */
        for (unsigned k = 0; k < 20 && polls < 50; k++) {
            int64_t d = (int64_t)call(PTV_VMCALL_TRACE_DUMP, 0, 0, 0, 0, 0).rax;
            busy += d == PTV_VMCALL_EBUSY;
            started += d == PTV_VMCALL_OK; /* the previous one was out: a new one starts */
            other += d != PTV_VMCALL_EBUSY && d != PTV_VMCALL_OK;
        }
        if (polls % 3 == 0)
            test_printf("TRACE-GUESTLINE %u while the dump goes out\n", lines++);
    }
    struct vmcall6 log1 = call(PTV_VMCALL_VMM_STATS, 0, 0, 0, 0, 0);
    /* reported after the storm: the guest's lines before it could let the dump go out before
     * the first poll */
    report(r.rax == PTV_VMCALL_OK && r.rbx >= 1, "TRACE_DUMP: dump %lu started (%ld)", r.rbx,
           (int64_t)r.rax);
    /* dump_stall = 1us in trace.cfg: one line per slice, so the dump is still going out */
    report((int64_t)again.rax == PTV_VMCALL_EBUSY,
           "a second TRACE_DUMP while one goes out: EBUSY (%ld)", (int64_t)again.rax);
    /* two VMM lines per dump (its start and its end), nothing per refused call; the dump is
     * paced by time (dump_stall), so how many calls meet it in flight depends on how long each
     * exit takes: at least half of the first round's 20 */
    report(busy >= 10 && other == 0 && log1.rdx - log0.rdx <= 2 * (started + 1) + 1,
           "%u TRACE_DUMPs while a dump went out: EBUSY (%u started after one ended), %lu VMM "
           "log lines meanwhile",
           busy, started, log1.rdx - log0.rdx);
    /* a dump that was started meanwhile (after the first finished) must end too */
    for (unsigned k = 0; k < 200000; k++)
        if (!(call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0).rbx & PTV_TRACE_ST_DUMPING))
            break;
    struct vmcall6 x1 = call(PTV_VMCALL_EXIT_STATS, 52, 0, 0, 0, 0);
    /* one frame line per slice and a slice per exit: ~30 lines need ~30 exits; without the
     * pacing the whole dump would go out at the first one */
    report(polls < 200000 && x1.rbx - x0.rbx >= 20,
           "the dump went out paced: %lu exits meanwhile (%lu from the preemption timer), %u "
           "status polls, %u guest lines between",
           x1.rbx - x0.rbx, x1.rcx - x0.rcx, polls, lines);
    test_printf("TRACE-DUMPED %lu\n", r.rbx);
}

/* the host asks for a dump over the serial line (tests/system/bochs-trace.sh sends ESC [9788~
 * when it sees TRACE-WAIT-INPUT): the firmware's console reads the bytes from the UART, the VMM
 * sees them go by and starts a dump of every CPU that traced */
static EFI_SYSTEM_TABLE *sys;

static void serial_request(void)
{
    uint64_t before = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0).r10;
    test_printf("TRACE-WAIT-INPUT the host may ask for a dump now\n");
    uint64_t polls = 0, now = before;
    for (uint64_t t0 = rdtsc(); rdtsc() - t0 < 1000000000ull && now == before; polls++) {
        EFI_INPUT_KEY key;
        uefi_call_wrapper(sys->ConIn->ReadKeyStroke, 2, sys->ConIn, &key); /* drives the reads */
        now = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0).r10;
    }
    report(now == before + 1,
           "a dump asked for from the host over the serial line: dump %lu (%lu polls)", now, polls);
    for (unsigned k = 0; k < 2000000; k++)
        if (!(call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0).rbx & PTV_TRACE_ST_DUMPING))
            break;
    test_printf("TRACE-SERIAL-DUMPED %lu\n", now);
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    sys = systab;
    test_printf("trace: the software tracer seen from inside\n");
    struct vmcall6 v = call(PTV_VMCALL_VERSION, 0, 0, 0, 0, 0);
    if (v.rax != PTV_VMCALL_OK || v.rbx != PTV_VMCALL_ABI_VERSION) {
        report(false, "VMCALL ABI %d answered (got %lu)", PTV_VMCALL_ABI_VERSION, v.rbx);
        report_summary();
        return EFI_ABORTED;
    }
    const int arg = 40;
    test_printf("TRACE-RANGE rt %lx %lx\n", (uint64_t)trace_rt_lo, (uint64_t)trace_rt_hi);
    test_printf("TRACE-RANGE ev %lx %lx %lx %lx\n", (uint64_t)trace_ev_lo, (uint64_t)trace_ev_ud,
                (uint64_t)trace_ev_after, (uint64_t)trace_ev_hi);

    /* 1. the reference, single-stepped by the guest */
    uint64_t flags, db_gate[2];
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    trace_tf_max = 16384;
    trace_tf_n = 0;
    trap_gate_swap(1, trace_db_handler, db_gate); /* #DB */
    int ref = (int)trace_tf_run(workload, arg);
    trap_gate_restore(1, db_gate);
    report(trace_tf_n > 500 && trace_tf_n < trace_tf_max, "TF reference: %lu instructions stepped",
           trace_tf_n);
    for (uint64_t i = 0; i < trace_tf_n; i += 8) {
        test_printf("TRACE-REF");
        for (uint64_t k = i; k < i + 8 && k < trace_tf_n; k++)
            test_printf(" %lx", trace_tf_ips[k]);
        test_printf("\n");
    }

    /* 2. the same workload in a trace window */
    int64_t rc = 0;
    int got = trace_mtf_run(workload, arg, PTV_TRACE_F_KERNEL, 0, &rc);
    report(rc == PTV_VMCALL_OK, "TRACE_START answered OK (%ld)", rc);
    report(got == ref, "the traced workload computed what the stepped one did (%d)", got);
    struct vmcall6 st = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0);
    report(!(st.rbx & PTV_TRACE_ST_ON) && (st.rbx & PTV_TRACE_ST_SOFTWARE),
           "TRACE_STATUS: window closed, software source (flags %#lx)", st.rbx);
    /* the steps: MTF exits, or #DB exits where sw_trace = tf steps with the trap flag */
    struct vmcall6 mtf = call(PTV_VMCALL_EXIT_STATS, 37 /* MONITOR_TRAP_FLAG */, 0, 0, 0, 0);
    struct vmcall6 db = call(PTV_VMCALL_EXIT_STATS, 0 /* EXCEPTION_NMI */, 0, 0, 0, 0);
    nomtf = mtf.rcx + db.rcx == 0;
    test_printf("TRACE-STEPS mtf %lu db %lu\n", mtf.rcx, db.rcx);
    if (nomtf) {
        /* measured, never assumed: the emulator advertises MTF but gave no MTF exit */
        report_skip(
            "no MTF VM exit (nor a #DB step) in a %lu-instruction window: stepping unproven",
            trace_tf_n);
        test_printf("TRACE-NOMTF %lu\n", st.rsi);
    } else {
        /* the trap flag steps each iteration of a REP string instruction (SDM Vol. 3B
         * 17.3.1.4), the tracer counts the instruction once (its iterations apart): the
         * reference's repeats of one IP count once (the workload has no jump to itself) */
        uint64_t ref_insns = 0;
        for (uint64_t i = 0; i < trace_tf_n; i++)
            ref_insns += i == 0 || trace_tf_ips[i] != trace_tf_ips[i - 1];
        report(st.rsi >= ref_insns && st.rsi < ref_insns + 40,
               "the tracer stepped %lu instructions (reference %lu, REP iterations counted once, "
               "+ the wrapper)",
               st.rsi, ref_insns);
        report(st.rdi == 0, "no gaps (OVF) in the window (%lu)", st.rdi);
    }
    report_info("trace: %lu bytes for %lu instructions, %lu events", st.rdx, st.rsi, st.r8);
    dump_ring(1);
    dump_code();

    /* 3. an IP-range window around a UD2 handled outside the range */
    trap_arm();
    trace_ev_run(&rc);
    int vec = trap_disarm();
    report(rc == PTV_VMCALL_OK && vec == TRAP_UD, "range window: START OK, the UD2 trapped");
    st = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0);
    if (!nomtf)
        report(st.r8 >= 1 && st.rdi == 0, "range window: %lu event(s), %lu gaps", st.r8, st.rdi);
    dump_ring(2);

    /* 4. the serial dump of window 2 */
    dump_out();
    serial_request();

    /* 5. budget and refusals */
    trace_mtf_run(workload, arg, PTV_TRACE_F_KERNEL, 100, &rc);
    st = call(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, 0, 0);
    if (!nomtf)
        report(rc == PTV_VMCALL_OK && (st.rbx & PTV_TRACE_ST_BUDGET) && st.rsi == 100,
               "a budget of 100 instructions closes the window at 100 (%lu)", st.rsi);
    struct vmcall6 r = call(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, 0, 0);
    struct vmcall6 r2 = call(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, 0, 0);
    struct vmcall6 r3 = call(PTV_VMCALL_TRACE_STOP, 0, 0, 0, 0, 0);
    report(r.rax == PTV_VMCALL_OK && (int64_t)r2.rax == PTV_VMCALL_EBUSY && r3.rax == PTV_VMCALL_OK,
           "a second TRACE_START while tracing: EBUSY (%ld)", (int64_t)r2.rax);
    r = call(PTV_VMCALL_TRACE_START, 1u << 7, 0, 0, 0, 0);
    report((int64_t)r.rax == PTV_VMCALL_EINVAL, "unknown filter flags: EINVAL");
    r = call(PTV_VMCALL_TRACE_START, PTV_TRACE_F_RANGE | PTV_TRACE_F_KERNEL, 0, 0x2000, 0x1000, 0);
    report((int64_t)r.rax == PTV_VMCALL_EINVAL, "an IP range with lo > hi: EINVAL");
    struct vmcall6 span = call(PTV_VMCALL_VMM_RANGE, 0, 0, 0, 0, 0);
    r = call(PTV_VMCALL_TRACE_READ, span.rdx, 64, 0, 0, 0);
    report((int64_t)r.rax == PTV_VMCALL_EINVAL && r.rbx == 0,
           "TRACE_READ into the VMM's canary page: EINVAL, nothing copied");
    r = call(PTV_VMCALL_TRACE_READ, span.rbx + span.rcx - 8, 64, 0, 0, 0);
    report((int64_t)r.rax == PTV_VMCALL_EINVAL, "TRACE_READ across the VMM's end: EINVAL");
    r = call(PTV_VMCALL_TRACE_READ, (uint64_t)ring_copy, 64, 1ull << 40, 0, 0);
    report(r.rax == PTV_VMCALL_OK && r.rbx == 0, "TRACE_READ past the end: 0 bytes");
    r = call(PTV_VMCALL_SELFCHECK, 0, 0, 0, 0, 0);
    report(r.rbx == 0, "SELFCHECK after the windows: all invariants hold (%#lx)", r.rbx);
    __asm__ volatile("pushq %0; popfq" ::"r"(flags) : "memory", "cc");
    unsigned failed = report_summary();
    /* 6. the crash, with a dump still going out (one line per slice): the crash dump takes
     * over; then an IDT that holds no gate and a breakpoint: #GP, #DF, triple fault */
    struct vmcall6 inflight = call(PTV_VMCALL_TRACE_DUMP, 0, 0, 0, 0, 0);
    test_printf("TRACE-INFLIGHT %ld %lu\n", (int64_t)inflight.rax, inflight.rbx);
    test_printf("TRACE-CRASH the guest triple-faults now: the VMM's crash dump follows\n");
    static const struct {
        uint16_t limit;
        uint64_t base;
    } __attribute__((packed)) no_idt = {0, 0};
    __asm__ volatile("cli; lidt %0; int3" ::"m"(no_idt) : "memory");
    return failed ? EFI_ABORTED : EFI_SUCCESS;
}
