/* SPDX-License-Identifier: MIT */
/* The bare-metal differential: see diff.h. */
#include "model/diff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "model/ptgen.h"
#include "model/ptm.h"
#include "model/ptm_cpu.h"
#include "model/twin.h"
#include "pt/pt_ctrl.h"
#include "pt/pt_eptv.h"
#include "pt/rtit.h"
#include "emul/guest_policy.h"
#include "hw/vmx.h"

#define TABLE_GPA   0x10000ull /* guest ToPA tables: 16 pages from here */
#define TABLE_SLOTS 16
#define DATA_GPA    (1ull << 20) /* output regions: [1 MiB, 16 MiB) */
#define MAXPA       39
#define HOST_XSS    0x0000000000019d00ull /* a Skylake-SP-like CPUID.(0xD,1):EDX:ECX incl. PT */
#define CTL_GOOD    (RTIT_CTL_BRANCH_EN | RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_TSC_EN)

struct diff {
    enum diff_mode mode;
    uint64_t rng;
    /* (a) bare metal */
    uint8_t *flat;
    uint8_t *now; /* scratch for RAM comparisons */
    struct ptm ref;
    struct ptm_cpu rcpu;
    struct ptgen gref;
    uint64_t ref_xss, ref_xss_supported;
    /* (b) through the VMM */
    struct fake_world *fw;
    struct twin tw;
    struct pt_caps host;
    struct pt_decision d;
    struct pt_ctrl c;
    struct pt_shadow *sh;
    struct pt_shadow_scratch *scr;
    struct pt_topa_region *regions;
    struct ptgen ghw;
    /* the program */
    bool checked; /* the current set-up must run identically on both */
    bool built;   /* output registers and tables come from build_topa() */
    uint64_t ops, exits, bytes, episodes;
    char why[512];
};

static uint64_t rnd(struct diff *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return x->rng;
}

static bool failf(struct diff *x, const char *fmt, ...)
{
    va_list ap;
    if (x->why[0])
        return false;
    va_start(ap, fmt);
    vsnprintf(x->why, sizeof(x->why), fmt, ap);
    va_end(ap);
    return false;
}

/* --- the VMM side: exits and entries on the twin --- */

static void vm_exit(struct diff *x)
{
    twin_exit(&x->tw);
    pt_ctrl_after_exit(&x->c);
    x->exits++;
}

static void vm_entry(struct diff *x)
{
    pt_ctrl_before_entry(&x->c);
    twin_entry(&x->tw);
}

static bool twin_ok(struct diff *x)
{
    const struct twin *t = &x->tw;
    if (t->entry_failures || t->vmx_aborts || t->root_tracing || t->list_overflows)
        return failf(x, "CPU twin: %s", t->why);
    if (t->pt.wild || (x->ref.wild > 0 && x->checked))
        return failf(x, "trace bytes outside memory (vmm %lu, bare %lu)", (unsigned long)t->pt.wild,
                     (unsigned long)x->ref.wild);
    return true;
}

/* A PT-caused EPT violation the twin recorded: exit, let the controller decide, enter. */
static void deliver_eptv(struct diff *x)
{
    if (!x->tw.pt.eptv)
        return;
    vm_exit(x);
    if (pt_ctrl_ept_violation(&x->c, x->tw.pt.eptv_gpa, EPT_VIOLATION_ASYNC | 2) !=
        PT_CTRL_EPTV_RESUME)
        failf(x, "PT-caused EPT violation at %#lx not handled", (unsigned long)x->tw.pt.eptv_gpa);
    x->tw.pt.eptv = false;
    vm_entry(x);
}

static int vmm_wrmsr(struct diff *x, uint32_t msr, uint64_t val)
{
    struct pt_msr_result r;
    int gp;

    vm_exit(x);
    if (msr == MSR_IA32_XSS) {
        gp = !xss_policy(val, HOST_XSS);
        if (!gp)
            x->tw.xss = val;
    } else {
        gp = pt_ctrl_wrmsr(&x->c, msr, val, &r) != PT_MSR_OK;
    }
    vm_entry(x);
    return gp;
}

static int vmm_rdmsr(struct diff *x, uint32_t msr, uint64_t *val)
{
    struct pt_msr_result r;
    int gp;

    vm_exit(x);
    gp = pt_ctrl_rdmsr(&x->c, msr, val, &r) != PT_MSR_OK;
    vm_entry(x);
    return gp;
}

/* --- bare metal --- */

static int ref_wrmsr(struct diff *x, uint32_t msr, uint64_t val)
{
    int gp;

    if (msr == MSR_IA32_XSS) {
        if (val & ~x->ref_xss_supported)
            return 1;
        x->ref_xss = val;
        return 0;
    }
    gp = ptm_cpu_wrmsr(&x->rcpu, msr, val) != 0;
    if (!gp && msr == MSR_IA32_RTIT_CTL)
        ptm_touch(&x->ref); /* PSB+ at enable: the current entry is read at once */
    return gp;
}

static void resync(struct diff *x);

/* Both machines run the same guest WRMSR; verdicts must agree. */
static bool both_wrmsr(struct diff *x, uint32_t msr, uint64_t val, bool shaped)
{
    bool was = x->c.guest.ctl & RTIT_CTL_TRACEEN;
    int a = ref_wrmsr(x, msr, val), b = vmm_wrmsr(x, msr, val);
    bool now = x->c.guest.ctl & RTIT_CTL_TRACEEN;

    if (a != b)
        return failf(x, "WRMSR %#x = %#lx: bare metal %s, VMM %s (RTIT_CTL %#lx)", msr,
                     (unsigned long)val, a ? "#GP" : "ok", b ? "#GP" : "ok",
                     (unsigned long)x->ref.ctl);
    if (a)
        return true;
    if (!shaped && (msr == MSR_IA32_RTIT_OUTPUT_BASE || msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS ||
                    (msr == MSR_IA32_RTIT_CTL && now && !was)))
        x->checked = false; /* a set-up nobody built: VMM rules may differ (diff.h) */
    if (msr == MSR_IA32_RTIT_STATUS && !shaped)
        x->checked = false;
    if (now && !was) {
        x->episodes++;
        /* a documented VMM limit (not a hardware rule) refused the set-up: unchecked */
        if (x->c.last_refusal &&
            (strstr(x->c.last_refusal, "VMM") || strstr(x->c.last_refusal, "host memory")))
            x->checked = false;
    }
    if (was && !now && !x->checked)
        resync(x);
    return true;
}

static bool compare_msrs(struct diff *x)
{
    for (unsigned i = 0; i < PTM_NR_RTIT_MSRS; i++) {
        uint32_t msr = ptm_rtit_msrs[i];
        uint64_t a = 0, b = 0;
        int ga = ptm_cpu_rdmsr(&x->rcpu, msr, &a) != 0, gb = vmm_rdmsr(x, msr, &b);
        bool moving = msr == MSR_IA32_RTIT_STATUS || msr == MSR_IA32_RTIT_OUTPUT_BASE ||
                      msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS;
        if (ga != gb)
            return failf(x, "RDMSR %#x: bare metal %s, VMM %s", msr, ga ? "#GP" : "ok",
                         gb ? "#GP" : "ok");
        if (!ga && a != b && (x->checked || !moving))
            return failf(x, "RDMSR %#x: bare metal %#lx, VMM %#lx (RTIT_CTL %#lx)", msr,
                         (unsigned long)a, (unsigned long)b, (unsigned long)x->ref.ctl);
    }
    if (x->checked &&
        (x->ref.pmis != x->tw.pt.pmis || x->ref.global_status != x->tw.pt.global_status))
        return failf(x, "PMIs: bare metal %u (GLOBAL_STATUS %#lx), VMM %u (%#lx)", x->ref.pmis,
                     (unsigned long)x->ref.global_status, x->tw.pt.pmis,
                     (unsigned long)x->tw.pt.global_status);
    return twin_ok(x);
}

static bool compare_ram(struct diff *x)
{
    uint8_t *now = x->now;
    bool same;

    fw_guest_snapshot(x->fw, now);
    same = !memcmp(now, x->flat, FW_GRAM_SIZE);
    if (!same && x->checked) {
        for (uint64_t i = 0; i < FW_GRAM_SIZE; i++) {
            if (now[i] != x->flat[i]) {
                failf(x, "guest RAM differs at GPA %#lx: bare metal %#x, VMM %#x", (unsigned long)i,
                      x->flat[i], now[i]);
                break;
            }
        }
    }
    if (!fw_canaries_ok(x->fw))
        return failf(x, "host memory outside guest RAM changed");
    return same || !x->checked ? twin_ok(x) : false;
}

/* After an unchecked episode: bare metal takes the VMM's guest-visible state. */
static void resync(struct diff *x)
{
    uint64_t v, seed = rnd(x);

    fw_guest_snapshot(x->fw, x->flat);
    if (!vmm_rdmsr(x, MSR_IA32_RTIT_STATUS, &v))
        x->ref.status = v & ~RTIT_STATUS_TRIGGEREN;
    if (!vmm_rdmsr(x, MSR_IA32_RTIT_OUTPUT_BASE, &v))
        x->ref.output_base = v;
    if (!vmm_rdmsr(x, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, &v))
        x->ref.output_mask_ptrs = v;
    x->ref.pmis = x->tw.pt.pmis;
    x->ref.global_status = x->tw.pt.global_status;
    x->ref.cached = false;
    ptgen_init(&x->gref, seed, 4096);
    ptgen_init(&x->ghw, seed, 4096);
    x->checked = false; /* until the next built set-up */
    x->built = false;
}

/* --- guest operations --- */

static void guest_store(struct diff *x, uint64_t gpa, uint64_t val)
{
    memcpy(x->flat + gpa, &val, 8);
    if (!fw_guest_store64(x->fw, gpa, val)) {
        /* write-protected (shadow ToPA table): EPT violation exit */
        vm_exit(x);
        if (pt_ctrl_ept_violation(&x->c, gpa, 2) != PT_CTRL_EPTV_RESUME)
            failf(x, "EPT violation on a guest store to %#lx not resolved", (unsigned long)gpa);
        vm_entry(x);
        if (!fw_guest_store64(x->fw, gpa, val))
            failf(x, "guest store to %#lx still blocked", (unsigned long)gpa);
    }
}

static uint64_t topa_entry(uint64_t base, unsigned size_code, uint64_t flags)
{
    return base | ((uint64_t)size_code << TOPA_SIZE_SHIFT) | flags;
}

/* A built set-up from now on (checked on both machines): STATUS = 0, OUTPUT_BASE = table,
 * MASK_PTRS = 0x7f. */
static bool program_output(struct diff *x, uint64_t table)
{
    x->checked = true;
    x->built = true;
    x->ref.wild = 0;
    return both_wrmsr(x, MSR_IA32_RTIT_STATUS, 0, true) &&
           both_wrmsr(x, MSR_IA32_RTIT_OUTPUT_BASE, table, true) &&
           both_wrmsr(x, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x7f, true);
}

/* A legal ToPA ring (or, without ToPA multi, a single-entry table) + OUTPUT_BASE/MASK. */
static bool build_topa(struct diff *x, uint64_t a)
{
    bool multi = x->d.guest.leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA_MULTI;
    unsigned ntab = multi ? 1 + a % 3 : 1, first = (unsigned)(a >> 8) % (TABLE_SLOTS - 3);
    uint64_t used[64];
    unsigned nused = 0;

    if (x->c.guest.ctl & RTIT_CTL_TRACEEN && !both_wrmsr(x, MSR_IA32_RTIT_CTL, 0, true))
        return false;
    for (unsigned t = 0; t < ntab; t++) {
        uint64_t tg = TABLE_GPA + 4096ull * (first + t);
        unsigned n = multi ? 1 + (unsigned)(rnd(x) % 6) : 1, k;
        for (k = 0; k < n; k++) {
            /* 4 KiB .. 1 MiB; a single-entry host needs host-contiguous regions (a VMM
             * limit, diff.h): mostly one page there */
            unsigned code = (unsigned)(rnd(x) % 9);
            if (!multi && rnd(x) % 4)
                code = 0;
            uint64_t size = 4096ull << code, base;
            bool clash;
            int tries = 0;
            do { /* regions do not overlap each other (legal, but keeps RAM compare simple) */
                base = DATA_GPA + (rnd(x) % ((FW_GRAM_SIZE - DATA_GPA) / size)) * size;
                clash = false;
                for (unsigned u = 0; u < nused; u++)
                    clash |= base < (used[u] >> 12 << 12) + (1ull << (used[u] & 63)) &&
                             (used[u] >> 12 << 12) < base + size;
            } while (clash && ++tries < 8);
            used[nused++ % 64] = base | (12 + code);
            uint64_t flags = rnd(x) % 4 == 0 ? TOPA_INT : 0;
            if (k == n - 1 && t == ntab - 1 && rnd(x) % 16 == 0)
                flags |= TOPA_STOP;
            guest_store(x, tg + 8ull * k, topa_entry(base, code, flags));
        }
        guest_store(x, tg + 8ull * k, (TABLE_GPA + 4096ull * (first + (t + 1) % ntab)) | TOPA_END);
    }
    return program_output(x, TABLE_GPA + 4096ull * first);
}

static uint64_t shaped_ctl(struct diff *x, uint64_t a)
{
    uint64_t v = CTL_GOOD | RTIT_CTL_TOPA;
    if (a & 1)
        v |= RTIT_CTL_MTC_EN;
    if (a & 2)
        v |= (uint64_t)((a >> 8) & 15) << RTIT_CTL_MTC_RANGE_SHIFT;
    if (a & 4)
        v |= RTIT_CTL_CYCLEACC | ((uint64_t)((a >> 12) & 15) << RTIT_CTL_CYC_THRESH_SHIFT);
    if (a & 8)
        v |= (uint64_t)((a >> 16) & 15) << RTIT_CTL_PSB_FREQ_SHIFT;
    if (a & 16)
        v |= (uint64_t)((a >> 20) & 3) << RTIT_CTL_ADDR_SHIFT((a >> 22) & 3);
    if (a & 32)
        v |= 1ull << ((a >> 24) % 64); /* any one bit, reserved ones included */
    if (a & 64)
        v &= ~RTIT_CTL_TOPA;
    return v;
}

static uint64_t shaped_value(struct diff *x, uint32_t msr, uint64_t a, uint64_t b)
{
    switch (msr) {
    case MSR_IA32_RTIT_CTL:
        return shaped_ctl(x, a) | (b & 1);
    case MSR_IA32_RTIT_STATUS:
        return (a & 0xf7) | ((b & 0x1ffff) << 32) | (b & 2 ? 1ull << (b >> 8) % 64 : 0);
    case MSR_IA32_RTIT_OUTPUT_BASE:
        return b & 1 ? TABLE_GPA + 4096 * (a % TABLE_SLOTS) : a & ((1ull << (MAXPA + 1)) - 1);
    case MSR_IA32_RTIT_CR3_MATCH:
        return a & (b & 1 ? ~0x1full : ~0ull);
    default:
        return b & 1 ? a : (uint64_t)((int64_t)(a << 16) >> 16); /* canonical or not */
    }
}

bool diff_step(struct diff *x, uint8_t op, uint64_t a, uint64_t b)
{
    bool tracing = x->c.guest.ctl & RTIT_CTL_TRACEEN;

    x->ops++;
    switch (op % 16) {
    case 0:
    case 1:
    case 2:
    case 3: /* a traced burst, split by exits */
        if (tracing) {
            uint64_t n = 1 + a % (64 << 10);
            ptgen_run(&x->gref, &x->ref, n);
            ptgen_run(&x->ghw, &x->tw.pt, n);
            x->bytes += n;
            deliver_eptv(x);
        }
        break;
    case 4:
    case 5: /* an exit of another kind (CPUID, HLT, an interrupt...) */
        vm_exit(x);
        vm_entry(x);
        break;
    case 6: /* a guest RDMSR of every RTIT MSR */
        if (!compare_msrs(x))
            return false;
        break;
    case 7:
    case 8: { /* a guest WRMSR, shaped or raw */
        uint32_t msr = ptm_rtit_msrs[a % PTM_NR_RTIT_MSRS];
        uint64_t v = b & 4 ? b : shaped_value(x, msr, a >> 8, b >> 3);
        if (!both_wrmsr(x, msr, v, false))
            return false;
        break;
    }
    case 9: /* a fresh ToPA */
        if (!build_topa(x, a))
            return false;
        break;
    case 10:
    case 11: /* TraceEn 0->1 with a plain RTIT_CTL, or 1->0 */
        if (!both_wrmsr(x, MSR_IA32_RTIT_CTL,
                        tracing ? 0 : (CTL_GOOD | RTIT_CTL_TOPA | RTIT_CTL_TRACEEN), x->built))
            return false;
        if (tracing && x->checked && !compare_ram(x))
            return false;
        break;
    case 12: { /* a guest edit of a table page (undefined while tracing: unchecked) */
        uint64_t gpa = TABLE_GPA + 8 * (a % (TABLE_SLOTS * 512));
        uint64_t v = b & 1 ? topa_entry(DATA_GPA + ((b >> 1) % 0xf00) * 4096, 0, 0) : b;
        if (tracing)
            x->checked = false;
        else if (!(b & 1))
            x->checked = false; /* garbage entry: a VMM rule may refuse what hardware takes */
        guest_store(x, gpa & ~7ull, v);
        break;
    }
    case 13: /* the memory map changes: two guest pages swap host pages */
        vm_exit(x);
        fw_swap_pages(x->fw, (uint32_t)(a % FW_GRAM_PAGES), (uint32_t)(b % FW_GRAM_PAGES));
        pt_ctrl_mem_changed(&x->c, (a % FW_GRAM_PAGES) << 12, 4096);
        pt_ctrl_mem_changed(&x->c, (b % FW_GRAM_PAGES) << 12, 4096);
        vm_entry(x);
        break;
    case 14: { /* IA32_XSS and XRSTORS of the PT state component */
        uint64_t area[5] = {CTL_GOOD | RTIT_CTL_TOPA | RTIT_CTL_TRACEEN, FW_GPA_VMM, 0x7f, 0, 0};
        if (a & 1) {
            if (!both_wrmsr(x, MSR_IA32_XSS, b & 1 ? XFEATURE_PT : (b & HOST_XSS), true))
                return false;
        } else {
            int ra = !(x->ref_xss & XFEATURE_PT), rb = twin_xrstors_pt(&x->tw, area) != 0;
            if (ra != rb)
                return failf(x, "XRSTORS of PT state: bare metal %s, VMM %s", ra ? "#GP" : "ok",
                             rb ? "#GP" : "ok");
            if (!ra)
                return failf(x, "XRSTORS loaded PT state behind the VMM");
        }
        break;
    }
    default: /* 15: compare everything */
        if (!compare_msrs(x) || (!tracing && !compare_ram(x)))
            return false;
        break;
    }
    return !x->why[0] && twin_ok(x);
}

bool diff_run(struct diff *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = rnd(x);
        if (!diff_step(x, (uint8_t)(r % 16), rnd(x), rnd(x)))
            return false;
    }
    return true;
}

bool diff_finish(struct diff *x)
{
    if (x->c.guest.ctl & RTIT_CTL_TRACEEN) {
        if (!both_wrmsr(x, MSR_IA32_RTIT_CTL, 0, true))
            return false;
    }
    return compare_msrs(x) && compare_ram(x);
}

static void host_caps(enum diff_mode mode, struct pt_caps *h)
{
    memset(h, 0, sizeof(*h));
    h->cpuid7_ebx = 1u << 25;
    h->leaf14[0][PT_EAX] = 1;
    h->leaf14[0][PT_EBX] = 0xf;
    h->leaf14[0][PT_ECX] = mode == DIFF_SHADOW_1E ? 0x5 : 0x7;
    h->leaf14[1][PT_EAX] = (0x249u << 16) | 2;
    h->leaf14[1][PT_EBX] = (0x3fu << 16) | 0x1fff;
    h->vmx_misc = VMX_MISC_INTEL_PT;
    h->maxphyaddr = MAXPA;
    h->vaddr_bits = 48;
    if (mode == DIFF_SHADOW_LC || mode == DIFF_HW_GPA) {
        h->entry_allowed1 = VM_ENTRY_LOAD_IA32_RTIT_CTL;
        h->exit_allowed1 = VM_EXIT_CLEAR_IA32_RTIT_CTL;
    }
    if (mode == DIFF_HW_GPA)
        h->secondary_allowed1 = SECONDARY_EXEC_PT_USE_GPA;
}

struct diff *diff_new(enum diff_mode mode, uint64_t seed)
{
    struct diff *x = calloc(1, sizeof(*x));
    struct ptm_cpu_caps hc, gc;
    struct pt_ctrl_mem m;
    uint32_t r[4] = {0, 0, (uint32_t)HOST_XSS, (uint32_t)(HOST_XSS >> 32)};

    x->mode = mode;
    x->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    x->fw = fw_new(1);
    host_caps(mode, &x->host);
    pt_decide(&x->host, PTV_PT_HOST_GUEST, &x->d);
    if (!pt_mode_guest_owns(x->d.mode)) {
        failf(x, "mode decision: %s", x->d.reason);
        return x;
    }
    hc = (struct ptm_cpu_caps){.pt = true, .maxphyaddr = MAXPA, .vaddr_bits = 48};
    memcpy(hc.leaf14, x->host.leaf14, sizeof(hc.leaf14));
    gc = (struct ptm_cpu_caps){.pt = x->d.guest.present,
                               .maxphyaddr = x->d.guest.maxphyaddr,
                               .vaddr_bits = x->d.guest.vaddr_bits};
    memcpy(gc.leaf14, x->d.guest.leaf14, sizeof(gc.leaf14));
    twin_init(&x->tw, x->fw, &hc, x->d.load_clear, x->d.mode == PT_ENGINE_HOST_GUEST_HW);
    x->sh = calloc(1, sizeof(*x->sh));
    x->scr = calloc(1, sizeof(*x->scr));
    x->regions = calloc(PT_CTRL_MAX_REGIONS, sizeof(*x->regions));
    m = (struct pt_ctrl_mem){x->sh, x->scr, x->regions, PT_CTRL_MAX_REGIONS};
    if (pt_ctrl_init(&x->c, &x->d, &x->host, &x->tw.ops, &x->fw->mem, &x->fw->alloc, &m))
        failf(x, "pt_ctrl_init failed");
    /* bare metal: the guest's CPUID view, guest RAM as it is now */
    x->flat = malloc(FW_GRAM_SIZE);
    x->now = malloc(FW_GRAM_SIZE);
    fw_guest_snapshot(x->fw, x->flat);
    ptm_init(&x->ref, x->flat, FW_GRAM_SIZE, gc.maxphyaddr,
             gc.leaf14[0][PT_ECX] & PT_CAP_ECX_TOPA_MULTI);
    x->rcpu.pt = &x->ref;
    x->rcpu.caps = gc;
    cpuid_policy(&x->d, GUEST_FEAT_XSAVES, 0xd, 1, 0, r);
    x->ref_xss_supported = (uint64_t)r[3] << 32 | r[2];
    ptgen_init(&x->gref, seed, 4096);
    ptgen_init(&x->ghw, seed, 4096);
    vm_entry(x); /* the first launch */
    return x;
}

void diff_free(struct diff *x)
{
    if (x->sh)
        pt_shadow_destroy(x->sh, &x->c.env);
    free(x->sh);
    free(x->scr);
    free(x->regions);
    free(x->flat);
    free(x->now);
    fw_free(x->fw);
    free(x);
}

const char *diff_why(const struct diff *x)
{
    return x->why;
}

void diff_counts(const struct diff *x, uint64_t *ops, uint64_t *exits, uint64_t *traced_exits,
                 uint64_t *bytes, uint64_t *episodes)
{
    *ops = x->ops;
    *exits = x->exits;
    *traced_exits = x->c.stats.traced_exits;
    *bytes = x->bytes;
    *episodes = x->episodes;
}

bool diff_setup_topa(struct diff *x, const uint64_t *entries, unsigned n)
{
    if (x->c.guest.ctl & RTIT_CTL_TRACEEN && !both_wrmsr(x, MSR_IA32_RTIT_CTL, 0, true))
        return false;
    for (unsigned i = 0; i < n; i++)
        guest_store(x, TABLE_GPA + 8ull * i, entries[i]);
    return program_output(x, TABLE_GPA) && !x->why[0];
}

uint64_t diff_table_gpa(void)
{
    return TABLE_GPA;
}

uint64_t diff_data_gpa(void)
{
    return DATA_GPA;
}

bool diff_rdmsr(struct diff *x, uint32_t msr, uint64_t *val, bool compare)
{
    uint64_t a = 0;
    int gb = vmm_rdmsr(x, msr, val), ga = compare ? ptm_cpu_rdmsr(&x->rcpu, msr, &a) != 0 : gb;
    if (compare && (ga != gb || (!ga && a != *val)))
        return failf(x, "RDMSR %#x: bare metal %s %#lx, VMM %s %#lx", msr, ga ? "#GP" : "ok",
                     (unsigned long)a, gb ? "#GP" : "ok", (unsigned long)*val);
    return !gb && twin_ok(x);
}

bool diff_wrmsr(struct diff *x, uint32_t msr, uint64_t val)
{
    return both_wrmsr(x, msr, val, true) && !x->why[0] && twin_ok(x);
}

void diff_guest_store(struct diff *x, uint64_t gpa, uint64_t val)
{
    guest_store(x, gpa, val);
}

void diff_guest_read(struct diff *x, uint64_t gpa, void *buf, uint64_t n)
{
    fw_guest_read(x->fw, gpa, buf, n);
}

struct pt_ctrl *diff_ctrl(struct diff *x)
{
    return &x->c;
}

struct twin *diff_twin(struct diff *x)
{
    return &x->tw;
}
