// SPDX-License-Identifier: MIT
/*
 * attack.efi group "cpu": CPU state the VMM emulates.
 * The guest runs instructions that always exit (CPUID, MOV CR0 that touches a
 * VMM-owned bit, VMX instructions) in corners where the emulation must match
 * hardware: RIP wrap at 4 GiB outside 64-bit mode, TF / RF around the emulated
 * instruction, RF in the frame of an injected fault, every #GP rule of MOV CR0.
 */
#include "attack.h"
#include "ptv/vmcall.h"
#include "user.h"

#define HIDDEN __attribute__((visibility("hidden")))
extern HIDDEN char atk_compat_code[], atk_compat_back[], atk_tf_after[], atk_rf_after[],
    atk_bp_target[];
extern HIDDEN uint32_t atk_compat_regs[4];
HIDDEN void atk_compat_cpuid(uint64_t sel32, void *farptr);
HIDDEN void atk_tf_cpuid(void);
HIDDEN void atk_rf_cpuid(void);
HIDDEN void atk_bp_nop(void);
HIDDEN void atk_cr3_run(uint64_t cr3_in, uint64_t cr3_back, uint64_t n);

#define CR0_NE (1ull << 5)
#define CR0_NW (1ull << 29)
#define CR0_CD (1ull << 30)
#define CR0_PG (1ull << 31)
#define CR0_PE (1ull << 0)
#define DR6_BS (1ull << 14)
#define DR6_B0 (1ull << 0)
#define VEC_DB 1
#define VEC_UD 6
#define VEC_GP 13

struct __attribute__((packed)) dtr {
    uint16_t limit;
    uint64_t base;
};

static uint64_t read_cr0(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr0, %0" : "=r"(v));
    return v;
}

static void write_cr0_fn(void *arg)
{
    __asm__ volatile("mov %0, %%cr0" ::"r"(*(uint64_t *)arg) : "memory");
}

/* ---- item 7: RIP wraps at 4 GiB after an emulated instruction in compatibility mode ---- */

static uint64_t gdt_copy[64] __attribute__((aligned(16)));
static struct __attribute__((packed)) {
    uint32_t off;
    uint16_t sel;
} farptr;

struct compat_arg {
    uint16_t sel32;
};

static void compat_fn(void *arg)
{
    atk_compat_cpuid(((struct compat_arg *)arg)->sel32, &farptr);
}

static void atk_rip_wrap(void)
{
    struct dtr gdtr, mine;
    uint16_t cs;
    __asm__ volatile("sgdt %0" : "=m"(gdtr));
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    unsigned n = (gdtr.limit + 1) / 8;
    uint64_t code = (uint64_t)atk_compat_code;
    if (n + 1 > 64 || code >> 32 || (uint64_t)atk_compat_back >> 32 || (uint64_t)&farptr >> 32) {
        report_skip("compat-mode CPUID: GDT too large or code above 4 GiB");
        return;
    }
    for (unsigned i = 0; i < n; i++)
        gdt_copy[i] = ((uint64_t *)gdtr.base)[i];
    /* 32-bit code, DPL 0, G, limit 4 GiB - 1, base = code + 2: EIP 0xfffffffe is `code` */
    uint32_t base = (uint32_t)code + 2;
    gdt_copy[n] = 0xffffull | ((uint64_t)(base & 0xffffff) << 16) | (0x9aull << 40) |
                  (0xcfull << 48) | ((uint64_t)(base >> 24) << 56);
    mine = (struct dtr){(uint16_t)((n + 1) * 8 - 1), (uint64_t)gdt_copy};
    farptr.off = (uint32_t)(uint64_t)atk_compat_back;
    farptr.sel = cs;
    struct cpuid_regs want = cpuid(0, 0);
    struct compat_arg a = {.sel32 = (uint16_t)(n * 8)};
    __asm__ volatile("lgdt %0" ::"m"(mine) : "memory");
    int v = atk_try(compat_fn, &a);
    __asm__ volatile("lgdt %0" ::"m"(gdtr) : "memory");
    report(v == ATK_NONE && atk_compat_regs[0] == want.eax && atk_compat_regs[1] == want.ebx,
           "CPUID at EIP 0xfffffffe (compat) goes on at EIP 0 (vector %d)", v);
}

/* ---- item 7: TF single-step over an emulated instruction ---- */

static void tf_fn(void *arg)
{
    atk_tf_cpuid();
}

static void atk_tf_step(void)
{
    int v = atk_try(tf_fn, 0);
    uint64_t dr6;
    __asm__ volatile("mov %%dr6, %0" : "=r"(dr6));
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    report(v == VEC_DB && atk_fault.rip == (uint64_t)atk_tf_after && (dr6 & DR6_BS),
           "TF over CPUID: #DB right after it (vector %d, %s, DR6 0x%lx)", v,
           atk_fault.rip == (uint64_t)atk_tf_after ? "at next insn" : "elsewhere", dr6);
}

/* ---- item 7: RF cleared by the emulated instruction ---- */

static void bp_fn(void *arg)
{
    atk_bp_nop();
}

static void rf_fn(void *arg)
{
    atk_rf_cpuid();
}

static int run_with_dr0(void (*fn)(void *), uint64_t addr, uint64_t *dr6)
{
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    __asm__ volatile("mov %0, %%dr0" ::"r"(addr));
    __asm__ volatile("mov %0, %%dr7" ::"r"(0x401ull)); /* L0, execute, 1 byte */
    int v = atk_try(fn, 0);
    __asm__ volatile("mov %0, %%dr7" ::"r"(0x400ull));
    __asm__ volatile("mov %%dr6, %0" : "=r"(*dr6));
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    return v;
}

static void atk_rf_clear(void)
{
    uint64_t dr6;
    /* control: does this CPU (model) honour execute breakpoints at all? */
    int c = run_with_dr0(bp_fn, (uint64_t)atk_bp_target, &dr6);
    if (c != VEC_DB) {
        report_skip("RF after CPUID: DR0 execute breakpoints do not fire here (vector %d)", c);
        return;
    }
    int v = run_with_dr0(rf_fn, (uint64_t)atk_rf_after, &dr6);
    report(v == VEC_DB && atk_fault.rip == (uint64_t)atk_rf_after && (dr6 & DR6_B0),
           "RF=1 on CPUID: cleared, breakpoint after it hits (vector %d)", v);
}

/* ---- item 9: faults the VMM injects push RF = 1, as native faults do ---- */

static void native_gp_fn(void *arg)
{
    __asm__ volatile("movq (%0), %%rax" ::"r"(0x8000000000000000ull) : "rax", "memory");
}

static void vmx_msr_fn(void *arg)
{
    uint32_t lo, hi;
    __asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(0x480) : "memory");
}

static void vmxoff_fn(void *arg)
{
    __asm__ volatile("vmxoff" ::: "cc", "memory");
}

static void atk_rf_injected(void)
{
    int n = atk_try(native_gp_fn, 0);
    uint64_t native = atk_fault.rflags;
    int g = atk_try(vmx_msr_fn, 0);
    uint64_t gp = atk_fault.rflags;
    int u = atk_try(vmxoff_fn, 0);
    uint64_t ud = atk_fault.rflags;
    report(n == VEC_GP && g == VEC_GP && u == VEC_UD,
           "native #GP, injected #GP and #UD raised (%d %d %d)", n, g, u);
    report((native & X86_RFLAGS_RF) == (gp & X86_RFLAGS_RF) && (gp & X86_RFLAGS_RF) &&
               (ud & X86_RFLAGS_RF),
           "injected #GP/#UD push RF=1 like native #GP (%lx %lx %lx)", native & X86_RFLAGS_RF,
           gp & X86_RFLAGS_RF, ud & X86_RFLAGS_RF);
}

/* ---- item 8: MOV CR0 rules when the write exits (it touches CR0.NE, which VMX owns) ---- */

static void cr0_case(const char *what, uint64_t val, bool gp)
{
    uint64_t before = read_cr0();
    int v = atk_try(write_cr0_fn, &val);
    uint64_t after = read_cr0();
    if (after != before) /* put it back whatever happened */
        atk_try(write_cr0_fn, &before);
    if (gp)
        report(v == VEC_GP && after == before, "MOV CR0 %s: #GP, CR0 kept (vector %d)", what, v);
    else
        report(v == ATK_NONE && after == (val | (1ull << 4)), "MOV CR0 %s: accepted (vector %d)",
               what, v);
}

static void atk_cr0_bit32(void)
{
    cr0_case("bit 32 set", (read_cr0() & ~CR0_NE) | (1ull << 32), true);
}

static void atk_cr0_pg_no_pe(void)
{
    cr0_case("PG without PE", read_cr0() & ~(CR0_NE | CR0_PE), true);
}

static void atk_cr0_nw_no_cd(void)
{
    cr0_case("NW without CD", (read_cr0() & ~(CR0_NE | CR0_CD)) | CR0_NW, true);
}

static void atk_cr0_pg_off_64(void)
{
    cr0_case("PG cleared in 64-bit mode", read_cr0() & ~(CR0_NE | CR0_PG), true);
}

static void atk_cr0_ne_off(void)
{
    cr0_case("NE cleared (legal)", read_cr0() & ~CR0_NE, false);
}

static void atk_cr4_reserved(void)
{
    uint64_t cr4 = read_cr4();
    int v = write_cr4_trap(cr4 | (1ull << 31));
    uint64_t after = read_cr4();
    if (after != cr4)
        write_cr4(cr4);
    report(v == TRAP_GP && after == cr4, "MOV CR4 reserved bit 31: #GP, CR4 kept (vector %d)", v);
}

/* after the trace windows (attacks_vmcall, attacks_mode), where sw_trace = tf
 * left #DB intercepted, a DR0 breakpoint still reaches the guest with DR6.B0 set */
static void atk_db_after_windows(void)
{
    uint64_t dr6;
    int v = run_with_dr0(bp_fn, (uint64_t)atk_bp_target, &dr6);
    report(v == VEC_DB && atk_fault.rip == (uint64_t)atk_bp_target && (dr6 & DR6_B0) &&
               !(dr6 & DR6_BS),
           "breakpoint after trace windows: #DB at it, DR6 0x%lx (B0 set, BS clear)", dr6);
}

/* inside a window the guest's own trap flag still single-steps it: the #DB right after the next
 * instruction, DR6.BS (sw_trace = tf steps with TF too, and keeps the guest's apart) */
static void atk_tf_in_window(void)
{
    struct vmcall_regs r;
    int64_t rc = (int64_t)atk_vmcall(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, &r);
    if (rc != PTV_VMCALL_OK) {
        report_skip("TF single step in a trace window: no window (rax %lld)", (long long)rc);
        return;
    }
    int v = atk_try(tf_fn, 0);
    uint64_t dr6;
    __asm__ volatile("mov %%dr6, %0" : "=r"(dr6));
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    atk_vmcall(PTV_VMCALL_TRACE_STOP, 0, 0, 0, &r);
    report(v == VEC_DB && atk_fault.rip == (uint64_t)atk_tf_after && (dr6 & DR6_BS),
           "TF single step in a trace window: #DB right after CPUID (vector %d, %s, DR6 0x%lx)", v,
           atk_fault.rip == (uint64_t)atk_tf_after ? "at next insn" : "elsewhere", dr6);
}

/* a data breakpoint the guest set, hit by an instruction the tracer steps with its trap flag:
 * one #DB carries both (B0 and the tracer's BS); the guest must see its breakpoint alone, as
 * without the tracer (with MTF steps the #DB never exits: the same answer) */
static volatile uint8_t atk_watched;

static void watch_fn(void *arg)
{
    atk_watched = 1;
}

static void atk_db_data_in_window(void)
{
    struct vmcall_regs r;
    int64_t rc = (int64_t)atk_vmcall(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, &r);
    if (rc != PTV_VMCALL_OK) {
        report_skip("data breakpoint in a trace window: no window (rax %lld)", (long long)rc);
        return;
    }
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    __asm__ volatile("mov %0, %%dr0" ::"r"((uint64_t)&atk_watched));
    __asm__ volatile("mov %0, %%dr7" ::"r"(0x10401ull)); /* L0, data writes, 1 byte */
    int v = atk_try(watch_fn, 0);
    __asm__ volatile("mov %0, %%dr7" ::"r"(0x400ull));
    uint64_t dr6;
    __asm__ volatile("mov %%dr6, %0" : "=r"(dr6));
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    atk_vmcall(PTV_VMCALL_TRACE_STOP, 0, 0, 0, &r);
    report(v == VEC_DB && (dr6 & DR6_B0) && !(dr6 & DR6_BS) && atk_watched == 1,
           "data breakpoint in a trace window: #DB (vector %d), DR6 0x%lx (B0 set, BS clear)", v,
           dr6);
}

/* after the trace windows, the guest's own trap flag single-steps as on bare metal: the #DB
 * right after the next instruction reaches it with DR6.BS (sw_trace = tf kept #DB intercepted
 * after a window and took every single step for a leftover TF of its own) */
static void atk_tf_after_windows(void)
{
    int v = atk_try(tf_fn, 0);
    uint64_t dr6;
    __asm__ volatile("mov %%dr6, %0" : "=r"(dr6));
    __asm__ volatile("mov %0, %%dr6" ::"r"(0xffff0ff0ull));
    report(v == VEC_DB && atk_fault.rip == (uint64_t)atk_tf_after && (dr6 & DR6_BS),
           "TF single step after trace windows: #DB right after CPUID (vector %d, %s, DR6 0x%lx)",
           v, atk_fault.rip == (uint64_t)atk_tf_after ? "at next insn" : "elsewhere", dr6);
}

/*
 * Free running (trace_step.c): a window on another CR3 lets the vCPU run unstepped,
 * every MOV to CR3 exiting for the VMM to complete.  Attacked: the MOV keeps its rules there
 * (bit 63 without CR4.PCIDE and an address beyond MAXPHYADDR #GP, CR3 kept), and the way into
 * the window's CR3 is seen: a stretch under it (a copy of this PML4, so the same mappings) is
 * stepped instruction for instruction -- the window counts exactly those -- while the 200,000
 * instructions of a loop under this CR3 before it are not stepped at all.
 */
static uint64_t atk_pml4_copy[512] __attribute__((aligned(4096)));

/* interrupts off, then TRACE_START (RBX = flags, RCX = CR3; R8 = 0: no budget): true with the
 * window open, *flags the RFLAGS before (atk_irq_back); else interrupts back and `what` SKIPs */
static bool atk_window_cli(uint64_t rbx, uint64_t rcx, uint64_t *flags, const char *what)
{
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(*flags)::"memory");
    struct vmcall6 start = {.rax = PTV_VMCALL_TRACE_START, .rbx = rbx, .rcx = rcx};
    vmcall6(&start);
    int64_t rc = (int64_t)start.rax;
    if (rc == PTV_VMCALL_OK)
        return true;
    if (*flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    report_skip("%s: no window (rax %lld)", what, (long long)rc);
    return false;
}

static void atk_irq_back(uint64_t flags)
{
    if (flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
}

static void atk_cr3_free(void)
{
    const uint64_t n = 1000, spin = 100000;
    uint64_t cr3 = read_cr3(), maxphy = cpuid(0x80000008, 0).eax & 0xff;
    if (read_cr4() & (1ull << 17)) {
        report_skip("MOV CR3 while running free: the firmware runs with CR4.PCIDE");
        return;
    }
    const uint64_t *pml4 = (const uint64_t *)(cr3 & 0x000ffffffffff000ull);
    for (unsigned i = 0; i < 512; i++)
        atk_pml4_copy[i] = pml4[i];
    uint64_t in = (uint64_t)atk_pml4_copy | (cr3 & 0x18); /* PWT, PCD as this CR3 */
    /* interrupts off for the whole window: an instruction the VMM completes counts as stepped
     * under any CR3 (the VMCALL below does), so a firmware timer interrupt taken in the window
     * adds its handler's exiting instructions (2014 stepped for 2004: 6 CPUID, an I/O and a MOV
     * CR exit more in the window, measured with EXIT_STATS; nested:kvm, and bochs:attacks in
     * some layouts of attack.efi) */
    uint64_t flags;
    if (!atk_window_cli(PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER | PTV_TRACE_F_CR3, in, &flags,
                        "MOV CR3 while running free"))
        return;
    for (volatile uint64_t i = 0; i < spin; i++)
        ;
    int v63 = write_cr3_trap(cr3 | 1ull << 63);
    int vphy = maxphy < 52 ? write_cr3_trap(cr3 | 1ull << maxphy) : TRAP_GP;
    uint64_t kept = read_cr3();
    struct vmcall6 mid = {.rax = PTV_VMCALL_TRACE_STATUS};
    vmcall6(&mid); /* RSI: stepped so far, none if the spin and the #GPs ran free; the call
                    * itself is one more, an instruction the VMM completes */
    atk_cr3_run(in, cr3, n);
    uint64_t back = read_cr3();
    struct vmcall6 stop = {.rax = PTV_VMCALL_TRACE_STOP};
    vmcall6(&stop);
    atk_irq_back(flags);
    uint64_t stepped = stop.rcx, gaps = stop.rsi;
    report_info("free: %lu stepped before, %lu in all (want %lu), %lu gaps", mid.rsi, stepped,
                2 * n + 3 + 1, gaps);
    report_info("free: MOV CR3 bit 63: vector %d, bit %lu: vector %d, CR3 %s", v63, maxphy, vphy,
                kept == cr3 && back == cr3 ? "kept" : "CHANGED");
    report(v63 == TRAP_GP && vphy == TRAP_GP && kept == cr3 && back == cr3 &&
               stepped == 2 * n + 3 + 1 && gaps == 0,
           "MOV CR3 free: #GP, CR3 kept, %lu stepped", stepped);
}

/*
 * Free running at CPL 0 (trace_step.c): a user-only window lets CPL 0 run unstepped where EPT's
 * mode-based execute control makes every user-mode fetch exit.  Attacked: the way back to CPL 3
 * is seen -- a trip to CPL 3 in the window (user.c: VMCALL VERSION, then the #UD back) is
 * stepped and in the stream (bytes written, the #UD as the one event, no gap) -- while a loop
 * of 100,000 iterations at CPL 0 before it is not stepped at all.  The trip also runs CPL 0
 * code on pages it made user-mode (no SMEP here): the VMM steps those one by one and goes on.
 */
static void atk_cpl_free(void)
{
    uint64_t flags;
    if (!atk_window_cli(PTV_TRACE_F_USER, 0, &flags, "CPL 0 free"))
        return;
    struct vmcall6 st0 = {.rax = PTV_VMCALL_TRACE_STATUS};
    vmcall6(&st0);
    /* where CPL 0 is stepped (no mode-based control: nested KVM, where every step is a nested
     * exit) a short loop shows it as well */
    const uint64_t spin = st0.rbx & PTV_TRACE_ST_FREE_CPL ? 100000 : 1000;
    for (volatile uint64_t i = 0; i < spin; i++)
        ;
    struct vmcall6 st1 = {.rax = PTV_VMCALL_TRACE_STATUS};
    vmcall6(&st1);
    struct user_result u;
    const char *why = user_vmcall(PTV_VMCALL_VERSION, &u);
    struct vmcall6 st2 = {.rax = PTV_VMCALL_TRACE_STATUS};
    vmcall6(&st2);
    struct vmcall6 stop = {.rax = PTV_VMCALL_TRACE_STOP};
    vmcall6(&stop);
    atk_irq_back(flags);
    bool free_cpl = st0.rbx & PTV_TRACE_ST_FREE_CPL;
    uint64_t spun = st1.rsi - st0.rsi, trip = st2.rsi - st1.rsi, bytes = st2.rdx - st1.rdx,
             events = st2.r8 - st1.r8;
    report_info("free-cpl: CPL 0 %s, loop %lu stepped", free_cpl ? "free" : "stepped", spun);
    report_info("free-cpl: trip %lu stepped, %lu bytes, %lu events, %lu gaps", trip, bytes, events,
                stop.rsi);
    if (why) {
        report(false, "CPL 3 trip in a user-only window: no ring 3 (%s)", why);
        return;
    }
    /* the stream has the trip only if the tracer saw CPL 3: its TIP.PGE at least */
    report(u.vector == 6 && trip >= 3 && bytes > 0 && events <= 1 && stop.rsi == 0,
           "CPL 3 trip, user-only window: %lu stepped, %lu bytes", trip, bytes);
    if (!free_cpl)
        report_skip("CPL 0 free: no EPT mode-based execute control (%lu stepped for %lu)", spun,
                    spin);
    else
        report(spun <= 2, "CPL 0 free, user-only window: loop %lu stepped", spun);
}

const struct attack attacks_cpu_late[] = {
    {"MOV CR3 while the tracer runs the vCPU free: rules kept, the way in seen", atk_cr3_free},
    {"CPL 0 runs free in a user-only window: the way back to CPL 3 seen", atk_cpl_free},
    {"DR0 breakpoint after trace windows: DR6 as on bare metal", atk_db_after_windows},
    {"TF single step after trace windows: the guest's own", atk_tf_after_windows},
    {"DR0 data breakpoint inside a trace window: the guest's alone", atk_db_data_in_window},
    {"TF single step inside a trace window: the guest's own", atk_tf_in_window},
    {0},
};

const struct attack attacks_cpu[] = {
    {"compat-mode CPUID at EIP 0xfffffffe", atk_rip_wrap},
    {"TF single-step over CPUID", atk_tf_step},
    {"RF=1 on CPUID then a breakpoint", atk_rf_clear},
    {"RF in injected fault frames", atk_rf_injected},
    {"MOV CR0 bit 32", atk_cr0_bit32},
    {"MOV CR0 PG without PE", atk_cr0_pg_no_pe},
    {"MOV CR0 NW without CD", atk_cr0_nw_no_cd},
    {"MOV CR0 PG off in 64-bit mode", atk_cr0_pg_off_64},
    {"MOV CR0 NE off (legal)", atk_cr0_ne_off},
    {"MOV CR4 reserved bit", atk_cr4_reserved},
    {0},
};
