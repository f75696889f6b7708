// SPDX-License-Identifier: MIT
/*
 * attack.efi group "mem": EPT on-demand maps, VMM
 * memory, the VMM's own page tables, the pool.
 *
 * Addresses above RAM are reached through a private window: a copy of the
 * firmware's PML4 plus two PML4 slots in the upper half whose 1 GiB pages map
 * GPA [0, 1 TiB) (Bochs: MAXPHYADDR 40).  CR3 is restored after each act.
 *
 * Expected values: Bochs (attack.cfg, 512 MiB, i440fx, no 64-bit BAR) has
 * nothing between RAM and 2^MAXPHYADDR; its memory model answers reads of
 * unbacked physical addresses with 0xff bytes and ignores writes there, as a
 * bare-metal bus does (master abort).  QEMU (nested:kvm) answers them with 0
 * (its unassigned memory) and ignores writes.  The VMM identity maps such
 * addresses on demand, so the guest must see exactly that: the first read
 * gives the platform's "nothing here" value, which must be all ones or 0, and
 * every read, and the read-back of every write, must give it too.  (Not
 * compared with a run without the VMM: this suite needs the VMM's VMCALLs.)
 */
#include "ptv/vmcall.h"

#include "attack.h"

#define GiB            (1ull << 30)
#define ABOVE_RAM      (8 * GiB) /* well above Bochs' 512 MiB and the 4 GiB MMIO hole */
#define OD_BOUND       16u       /* EPT_OD_MAX_TABLES (vmm/ept/ept_ondemand.h) */
#define PAGE           4096ull
#define PTE_P          (1ull << 0)
#define PTE_W          (1ull << 1)
#define PTE_PS         (1ull << 7)
#define WIN_SLOT       256u /* PML4 slots 256, 257: linear 0xffff800000000000 + GPA */
#define WIN_BASE       0xffff800000000000ull
#define LOG_LINE_BOUND 40u /* 8 + log2(N) per rate-limited line, a few lines each */

static uint8_t pages_raw[4 * PAGE + PAGE];
static uint64_t *win_pml4, *win_pdpt[2];
static uint64_t saved_cr3;
static unsigned maxphy;

/* build the window once; false (with a reason) where it cannot be built */
static const char *window_setup(void)
{
    if (win_pml4)
        return NULL;
    if (!(cpuid(0x80000001, 0).edx & (1u << 26)))
        return "no 1 GiB guest pages";
    maxphy = cpuid(0x80000008, 0).eax & 0xff;
    if (maxphy < 36 || maxphy > 40)
        return "MAXPHYADDR outside 36..40: the 1 TiB window does not cover it";
    uint8_t *p = (uint8_t *)(((uint64_t)pages_raw + PAGE - 1) & ~(PAGE - 1));
    uint64_t *fw = (uint64_t *)(cr3_read() & 0x000ffffffffff000ull);
    if (fw[WIN_SLOT] || fw[WIN_SLOT + 1])
        return "the firmware uses PML4 slots 256/257";
    win_pml4 = (uint64_t *)p;
    win_pdpt[0] = (uint64_t *)(p + PAGE);
    win_pdpt[1] = (uint64_t *)(p + 2 * PAGE);
    for (unsigned i = 0; i < 512; i++) {
        win_pml4[i] = fw[i];
        win_pdpt[0][i] = ((uint64_t)i * GiB) | PTE_P | PTE_W | PTE_PS;
        win_pdpt[1][i] = (512ull * GiB + (uint64_t)i * GiB) | PTE_P | PTE_W | PTE_PS;
    }
    /* UEFI runs identity mapped: the pages' addresses are physical */
    win_pml4[WIN_SLOT] = (uint64_t)win_pdpt[0] | PTE_P | PTE_W;
    win_pml4[WIN_SLOT + 1] = (uint64_t)win_pdpt[1] | PTE_P | PTE_W;
    return NULL;
}

static volatile uint64_t *gpa_ptr(uint64_t gpa)
{
    return (volatile uint64_t *)(WIN_BASE + gpa);
}

/* run fn with the window's CR3 (and the firmware's again afterwards, fault or not) */
static int with_window(void (*fn)(void *), void *arg)
{
    saved_cr3 = cr3_read();
    int v = atk_try(fn, arg);
    if (cr3_read() != saved_cr3)
        cr3_write(saved_cr3);
    return v;
}

struct stats {
    uint64_t free_pages, ept_pages, lines;
};

static struct stats vmm_stats(void)
{
    struct vmcall_regs r;
    struct stats s = {0, 0, 0};
    if (atk_vmcall(PTV_VMCALL_VMM_STATS, 0, 0, 0, &r) == PTV_VMCALL_OK)
        s = (struct stats){r.rbx, r.rcx, r.rdx};
    return s;
}

/* what the platform answers where nothing is: all ones (Bochs, a bare-metal master abort) or 0
 * (QEMU's unassigned memory); learnt by the first read above RAM (reads_fn) */
static uint64_t nothing = ~0ull;

struct reads {
    unsigned long n, not_nothing;
};

static void reads_fn(void *arg)
{
    struct reads *r = arg;
    uint64_t span = (1ull << maxphy) - ABOVE_RAM, off = 0;
    cr3_write((uint64_t)win_pml4);
    nothing = *gpa_ptr(ABOVE_RAM);
    for (unsigned long i = 0; i < r->n; i++) {
        if (*gpa_ptr(ABOVE_RAM + off % span) != nothing)
            r->not_nothing++;
        off += GiB;
    }
    cr3_write(saved_cr3);
}

/* item 3: reads at 1 GiB strides above RAM grow nothing without bound */
static void atk_reads_above_ram(void)
{
    const char *why = window_setup();
    if (why) {
        report_skip("100000 reads above RAM: %s", why);
        return;
    }
    struct stats before = vmm_stats();
    struct reads r = {100000, 0};
    int v = with_window(reads_fn, &r);
    struct stats after = vmm_stats();
    report_info("pool: %lu free pages before, %lu after; EPT pages %lu -> %lu; %lu log lines",
                before.free_pages, after.free_pages, before.ept_pages, after.ept_pages,
                after.lines - before.lines);
    report(v == ATK_NONE && (nothing == ~0ull || nothing == 0) && r.not_nothing == 0,
           "100000 reads at 1 GiB strides above RAM: all %#lx (%lu not, vector %d)", nothing,
           r.not_nothing, v);
    report(after.ept_pages <= before.ept_pages + OD_BOUND &&
               before.free_pages - after.free_pages <= OD_BOUND,
           "... VMM pool use bounded: +%lu EPT pages, -%lu free (bound %u)",
           after.ept_pages - before.ept_pages, before.free_pages - after.free_pages, OD_BOUND);
    report(after.lines - before.lines <= LOG_LINE_BOUND, "... log lines bounded (%lu)",
           after.lines - before.lines);
}

static const uint64_t write_gpas[] = {ABOVE_RAM + 0x1000, 100 * GiB + 0x123000, 600 * GiB + 8,
                                      (1ull << 36) - PAGE};

static void writes_fn(void *arg)
{
    unsigned *bad = arg;
    cr3_write((uint64_t)win_pml4);
    nothing = *gpa_ptr(write_gpas[0]); /* before any write there */
    for (unsigned i = 0; i < sizeof(write_gpas) / sizeof(write_gpas[0]); i++) {
        *gpa_ptr(write_gpas[i]) = 0x1234567812345678ull;
        if (*gpa_ptr(write_gpas[i]) != nothing)
            (*bad)++;
    }
    cr3_write(saved_cr3);
}

/* item 3: a write where nothing answers is dropped, the read-back is all ones */
static void atk_writes_above_ram(void)
{
    const char *why = window_setup();
    if (why) {
        report_skip("writes above RAM: %s", why);
        return;
    }
    unsigned bad = 0;
    int v = with_window(writes_fn, &bad);
    report(v == ATK_NONE && bad == 0 && (nothing == ~0ull || nothing == 0),
           "writes above RAM dropped, read back as %#lx (%u not, vector %d)", nothing, bad, v);
}

static const uint64_t canary_word = 0x2d726f7369767470ull; /* "ptvisor-" little endian */

static void read_fn(void *arg)
{
    *(uint64_t *)arg = *(volatile uint64_t *)atk_canary_pa;
}

/* item 2/3: a read of the canary page sees no VMM data */
static void atk_read_canary(void)
{
    uint64_t val = canary_word;
    int v = atk_try(read_fn, &val);
    report(v == ATK_NONE && val != canary_word, "read of the VMM canary page blocked (0x%lx)", val);
}

static void write_fn(void *arg)
{
    for (unsigned i = 0; i < 512; i++)
        ((volatile uint64_t *)atk_canary_pa)[i] = 0x5a5a5a5a5a5a5a5aull;
}

static void atk_write_canary(void)
{
    struct vmcall_regs r;
    int v = atk_try(write_fn, 0);
    bool ok = atk_vmcall(PTV_VMCALL_CHECK_CANARY, 0, 0, 0, &r) == PTV_VMCALL_OK && r.rbx == 1;
    report(v == ATK_NONE && ok, "write over the VMM canary page dropped (canary intact: %d)", ok);
}

static void fetch_fn(void *arg)
{
    ((void (*)(void))atk_canary_pa)();
}

static void atk_fetch_canary(void)
{
    struct vmcall_regs r;
    uint64_t before = atk_vmcall(PTV_VMCALL_EPT_BLOCKED, 0, 0, 0, &r) == PTV_VMCALL_OK ? r.rbx : 0;
    int v = atk_try(fetch_fn, 0);
    uint64_t after = atk_vmcall(PTV_VMCALL_EPT_BLOCKED, 0, 0, 0, &r) == PTV_VMCALL_OK ? r.rbx : 0;
    /* #GP from the VMM (EPT), or #PF where the firmware's tables already say NX */
    report((v == 13 && after > before) || v == 14,
           "jump into the VMM canary page faults (vector %d, %lu blocked)", v, after - before);
}

/* item 6: the VMM's page tables map nothing writable and executable */
static void atk_host_wx(void)
{
    struct vmcall_regs r;
    bool ok = atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &r) == PTV_VMCALL_OK;
    report(ok && (r.rcx & PTV_SELFCHECK_HOST_WX) && !(r.rbx & PTV_SELFCHECK_HOST_WX),
           "SELFCHECK: host page tables W^X (checked 0x%lx failed 0x%lx)", ok ? r.rcx : 0,
           ok ? r.rbx : ~0ul);
}

static void span_fn(void *arg)
{
    unsigned long *n = arg;
    for (uint64_t p = atk_vmm_base; p < atk_vmm_base + atk_vmm_size; p += PAGE, (*n)++)
        (void)*(volatile uint64_t *)p;
}

/* pool: every page of the VMM span read once (a violation and a sink map each) */
static void atk_span_flood(void)
{
    struct stats before = vmm_stats();
    unsigned long n = 0;
    int v = atk_try(span_fn, &n);
    struct stats after = vmm_stats();
    /* a sink map takes at most one 4 KiB table per 2 MiB of the span */
    uint64_t bound = atk_vmm_size / (2ull << 20) + 2;
    report(v == ATK_NONE && before.free_pages - after.free_pages <= bound,
           "read of all %lu VMM pages: guest runs on, pool -%lu pages (bound %lu)", n,
           before.free_pages - after.free_pages, bound);
    report(after.lines - before.lines <= LOG_LINE_BOUND, "... log lines bounded (%lu for %lu)",
           after.lines - before.lines, n);
}

const struct attack attacks_mem[] = {
    {"100000 reads at 1 GiB strides above RAM", atk_reads_above_ram},
    {"writes above RAM", atk_writes_above_ram},
    {"read of the VMM canary page", atk_read_canary},
    {"write over the VMM canary page", atk_write_canary},
    {"jump into the VMM canary page", atk_fetch_canary},
    {"host page tables W^X", atk_host_wx},
    {"read of every VMM page", atk_span_flood},
    {0},
};
