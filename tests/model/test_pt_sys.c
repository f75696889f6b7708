/* SPDX-License-Identifier: MIT */
/*
 * System mode on the CPU twin: the real controller (vmm/pt/pt_ctrl.c + pt_sys.c) runs the VMM's
 * trace of its guest through VM entries and exits of the twin (tests/model/twin.c), whose trace
 * unit is the PT output model (ptm.c) with the SDM's packet filtering (ptm_cpu_exec).  The guest
 * "executes" packets of the test generator (ptgen.c) at a chosen CPL / CR3 / IP between entry
 * and exit; the VMM "executes" packets between exit and entry.  Checked: nothing reaches the
 * ring in VMX root; the output position never rewinds; a circular ring keeps the newest bytes, a
 * stop-on-full ring stops; the config's filters reach RTIT_CTL / CR3_MATCH / ADDRn exactly and
 * include and exclude what the SDM says; the guest sees no PT (CPUID, RTIT MSRs, XSS); the steady
 * state costs no WRMSR per exit; and the ring, read in stream order, decodes with libipt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <intel-pt.h>
#include <stdlib.h>
#include <string.h>

#include "model/ptgen.h"
#include "model/twin.h"
#include "pt/pt_ctrl.h"
#include "pt/rtit.h"
#include "emul/guest_policy.h"
#include "emul/msr_owner.h"

#define MAXPA   39
#define KERNEL  0xffffffff81000000ull
#define USER_IP 0x401000ull
#define CR3_A   0x1234000ull
#define CR3_B   0x5678000ull
#define REC_MAX (8u << 20)

struct sx {
    struct fake_world *fw;
    struct twin tw;
    struct pt_caps host;
    struct pt_decision d;
    struct pt_ctrl c;
    struct pt_sys_cfg cfg;
    struct ptgen g;
    uint8_t *rec; /* every byte the guest's trace wrote, in order */
    uint64_t nrec;
    uint64_t given; /* packet bytes the guest "executed" */
};

static void host_caps(struct pt_caps *h, bool load_clear, unsigned ranges)
{
    memset(h, 0, sizeof(*h));
    h->cpuid7_ebx = CPUID_7_EBX_INTEL_PT;
    h->leaf14[0][PT_EAX] = 1;
    h->leaf14[0][PT_EBX] =
        PT_CAP_EBX_CR3_FILTER | PT_CAP_EBX_PSB_CYC | PT_CAP_EBX_IP_FILTER | PT_CAP_EBX_MTC;
    h->leaf14[0][PT_ECX] = PT_CAP_ECX_TOPA | PT_CAP_ECX_TOPA_MULTI | PT_CAP_ECX_SINGLE_RANGE;
    h->leaf14[1][PT_EAX] = (0x249u << 16) | ranges;
    h->leaf14[1][PT_EBX] = (0x3fu << 16) | 0x1fff;
    h->vmx_misc = VMX_MISC_INTEL_PT;
    h->maxphyaddr = MAXPA;
    h->vaddr_bits = 48;
    if (load_clear) {
        h->entry_allowed1 = VM_ENTRY_LOAD_IA32_RTIT_CTL;
        h->exit_allowed1 = VM_EXIT_CLEAR_IA32_RTIT_CTL;
    }
}

static void default_cfg(struct pt_sys_cfg *cfg, uint64_t size, bool wrap)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->ring_size = size;
    cfg->wrap = wrap;
    cfg->filter = PTV_TRACE_OS | PTV_TRACE_USER;
    cfg->psb_period = 4096;
}

static struct sx *sx_new(bool load_clear, const struct pt_sys_cfg *cfg)
{
    struct sx *x = calloc(1, sizeof(*x));
    struct ptm_cpu_caps hc = {.pt = true, .maxphyaddr = MAXPA, .vaddr_bits = 48};
    const char *why = NULL;

    x->fw = fw_new(1);
    x->rec = malloc(REC_MAX);
    host_caps(&x->host, load_clear, 2);
    assert_int_equal(pt_decide(&x->host, PTV_PT_SYSTEM, &x->d), PT_ENGINE_SYSTEM);
    memcpy(hc.leaf14, x->host.leaf14, sizeof(hc.leaf14));
    twin_init(&x->tw, x->fw, &hc, load_clear, false);
    assert_int_equal(
        pt_ctrl_init(&x->c, &x->d, &x->host, &x->tw.ops, &x->fw->mem, &x->fw->alloc, NULL), 0);
    assert_false(x->c.active); /* nothing is switched before the ring exists */
    x->cfg = *cfg;
    if (pt_ctrl_sys_setup(&x->c, cfg, &x->fw->alloc, &why))
        fail_msg("setup: %s", why);
    assert_true(x->c.active);
    ptgen_init(&x->g, 7, 4096);
    return x;
}

static void sx_free(struct sx *x)
{
    pt_ctrl_sys_teardown(&x->c);
    assert_int_equal(x->fw->pool_in_use, 0);
    assert_int_equal(x->fw->free_errors, 0);
    assert_true(fw_canaries_ok(x->fw));
    fw_free(x->fw);
    free(x->rec);
    free(x);
}

static void no_failures(const struct sx *x)
{
    if (x->tw.entry_failures || x->tw.vmx_aborts || x->tw.root_tracing || x->tw.list_overflows)
        fail_msg("twin: %s", x->tw.why);
}

static void entry(struct sx *x)
{
    pt_ctrl_before_entry(&x->c);
    twin_entry(&x->tw);
    no_failures(x);
    assert_true(x->tw.in_guest);
}

static void vm_exit(struct sx *x)
{
    twin_exit(&x->tw);
    pt_ctrl_after_exit(&x->c);
    no_failures(x);
    assert_int_equal(x->tw.pt.ctl & RTIT_CTL_TRACEEN, 0);
}

/*
 * The guest executes nbytes of packets at (cpl, cr3, ip); the ones the CPU writes are recorded.
 * The packets come from one generator while the context is traced (a PSB+ every 4 KiB of
 * output, as PSBFreq counts output bytes) and from a throwaway one while it is filtered out.
 */
static uint64_t guest_runs(struct sx *x, uint64_t nbytes, unsigned cpl, uint64_t cr3, uint64_t ip)
{
    uint8_t b[PTGEN_MAX_PACKET];
    uint64_t written = 0;
    struct ptgen out;
    static const uint8_t probe[1];
    bool in = ptm_cpu_exec(&x->tw.cpu, cpl, cr3, ip, probe, 0, false); /* traced here? */

    ptgen_init(&out, 1234, 4096);
    for (uint64_t g = 0; g < nbytes;) {
        bool psb;
        size_t n = ptgen_next(in ? &x->g : &out, b, &psb);
        uint64_t before = x->tw.pt.bytes;
        if (ptm_cpu_exec(&x->tw.cpu, cpl, cr3, ip, b, n, psb)) {
            uint64_t w = x->tw.pt.bytes - before;
            assert_true(x->nrec + w <= REC_MAX);
            memcpy(x->rec + x->nrec, b, w); /* a STOP region may cut a packet */
            x->nrec += w;
            written += w;
        }
        g += n;
    }
    x->given += nbytes;
    return written;
}

/* The VMM executes in VMX root: its code is never traced, the ring never changes. */
static void root_runs(struct sx *x)
{
    static uint8_t before[FW_POOL_PAGES * 4096];
    uint8_t b[PTGEN_MAX_PACKET];
    struct ptgen g;

    memcpy(before, x->fw->hmem + FW_POOL_BASE, sizeof(before));
    ptgen_init(&g, 99, 4096);
    for (int i = 0; i < 64; i++) {
        bool psb;
        size_t n = ptgen_next(&g, b, &psb);
        assert_int_equal(ptm_cpu_exec(&x->tw.cpu, 0, 0, KERNEL, b, n, psb), 0);
        ptm_packet(&x->tw.pt, b, n, psb);
    }
    assert_memory_equal(before, x->fw->hmem + FW_POOL_BASE, sizeof(before));
}

static void one_round(struct sx *x, uint64_t nbytes, unsigned cpl, uint64_t cr3, uint64_t ip)
{
    entry(x);
    guest_runs(x, nbytes, cpl, cr3, ip);
    vm_exit(x);
    root_runs(x);
}

static void status(const struct sx *x, struct pt_sys_status *st)
{
    pt_ctrl_sys_status(&x->c, st);
}

/* libipt packet decoder over the ring in stream order: from the first PSB every byte parses. */
static int decode(const uint8_t *buf, uint64_t n, uint64_t *first_psb, int *packets)
{
    struct pt_config config;
    struct pt_packet_decoder *dec;
    uint64_t off = 0;
    int err;

    pt_config_init(&config);
    config.begin = (uint8_t *)buf;
    config.end = (uint8_t *)buf + n;
    dec = pt_pkt_alloc_decoder(&config);
    assert_non_null(dec);
    *packets = 0;
    err = pt_pkt_sync_forward(dec);
    if (err >= 0) {
        assert_int_equal(pt_pkt_get_sync_offset(dec, first_psb), 0);
    }
    while (err >= 0) {
        struct pt_packet pkt;
        err = pt_pkt_next(dec, &pkt, sizeof(pkt));
        if (err >= 0) {
            (*packets)++;
            assert_int_equal(pt_pkt_get_offset(dec, &off), 0);
        }
    }
    pt_pkt_free_decoder(dec);
    assert_int_equal(off, n); /* the last packet ends exactly at the ring's newest byte */
    return err == -pte_eos ? 0 : err;
}

static void decode_ring(struct sx *x)
{
    struct pt_sys_status st;
    uint8_t *buf;
    uint64_t psb = 0;
    int packets = 0;

    status(x, &st);
    buf = malloc(st.avail + 1);
    assert_int_equal(pt_ctrl_sys_read(&x->c, 0, buf, st.avail + 1), st.avail);
    assert_int_equal(decode(buf, st.avail, &psb, &packets), 0);
    assert_true(packets > 0);
    assert_true(psb < 4096 + 32); /* a PSB+ every 4 KiB of the stream */
    free(buf);
}

/* The ring read back in stream order is the newest bytes the guest's trace wrote. */
static void ring_is_newest(struct sx *x)
{
    struct pt_sys_status st;
    uint8_t *buf;

    status(x, &st);
    buf = malloc(st.avail ? st.avail : 1);
    assert_int_equal(pt_ctrl_sys_read(&x->c, 0, buf, st.avail), st.avail);
    assert_true(st.avail <= x->nrec);
    assert_memory_equal(buf, x->rec + x->nrec - st.avail, st.avail);
    free(buf);
    /* offsets inside the stream: a window read equals the same window of the whole */
    if (st.avail > 100) {
        uint8_t w[64];
        assert_int_equal(pt_ctrl_sys_read(&x->c, st.avail - 100, w, 64), 64);
        assert_memory_equal(w, x->rec + x->nrec - 100, 64);
        assert_int_equal(pt_ctrl_sys_read(&x->c, st.avail, w, 64), 0);
    }
}

/* Rounds of guest execution: the position moves forward only, bytes = what the CPU wrote. */
static void position_never_rewinds(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        struct pt_sys_cfg cfg;
        struct sx *x;
        uint64_t last = 0;

        default_cfg(&cfg, 256 << 10, true);
        x = sx_new(lc, &cfg);
        for (int r = 0; r < 40; r++) {
            struct pt_sys_status st;
            one_round(x, 1000 + 37 * r, r % 2 ? 3 : 0, CR3_A, r % 2 ? USER_IP : KERNEL);
            status(x, &st);
            assert_true(st.on);
            assert_false(st.wrapped);
            assert_int_equal(st.bytes, x->nrec);
            assert_true(st.bytes > last);
            last = st.bytes;
            /* what the CPU holds in root is where the next entry continues */
            assert_int_equal(x->c.sys.f.output_base, x->tw.pt.output_base);
            assert_int_equal(x->c.sys.f.output_mask, x->tw.pt.output_mask_ptrs);
        }
        ring_is_newest(x);
        decode_ring(x);
        sx_free(x);
    }
}

/* A circular ring of 2 tables (513 regions... 512: 511 + 1) wraps and keeps the newest bytes. */
static void circular_keeps_newest(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        for (int big = 0; big < 2; big++) {
            struct pt_sys_cfg cfg;
            struct pt_sys_status st;
            struct sx *x;
            uint64_t size = big ? 2u << 20 : 16u << 10;

            default_cfg(&cfg, size, true);
            x = sx_new(lc, &cfg);
            assert_int_equal(x->c.sys.ring.ntables, big ? 2 : 1);
            for (int r = 0; x->nrec < 3 * size + 777; r++) {
                one_round(x, size / 5 + 13 * r, 0, CR3_A, KERNEL);
                status(x, &st);
                assert_int_equal(st.bytes, x->nrec); /* each run < size: wraps are exact */
                assert_false(st.stopped);
                assert_false(st.error);
            }
            status(x, &st);
            assert_true(st.wrapped);
            assert_int_equal(st.wraps, x->nrec / size);
            assert_int_equal(st.offset, x->nrec % size);
            assert_int_equal(st.avail, size);
            assert_int_equal(st.lost, x->nrec - size);
            ring_is_newest(x);
            decode_ring(x);
            sx_free(x);
        }
    }
}

/* trace_wrap = off: STOP on the last region; the CPU stops, the guest runs on untraced. */
static void stop_on_full(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        struct pt_sys_cfg cfg;
        struct pt_sys_status st;
        struct sx *x;
        uint64_t size = 16u << 10;
        const char *why;

        default_cfg(&cfg, size, false);
        x = sx_new(lc, &cfg);
        for (int r = 0; r < 10; r++)
            one_round(x, 5000, 0, CR3_A, KERNEL);
        status(x, &st);
        assert_true(st.stopped);
        assert_false(st.on);
        assert_false(st.wrapped);
        assert_int_equal(st.offset, size);
        assert_int_equal(st.avail, size);
        assert_int_equal(x->nrec, size); /* the CPU wrote exactly the ring, then stopped */
        assert_true(st.untraced > 0);
        assert_int_equal(x->tw.pt.ctl & RTIT_CTL_TRACEEN, 0); /* the CPU is out of it */
        /* the ring holds the oldest bytes: everything from the start */
        ring_is_newest(x);
        decode_ring(x);
        /* start without rewind: still full, nothing written */
        assert_int_equal(pt_ctrl_sys_start(&x->c, false, &why), 0);
        one_round(x, 3000, 0, CR3_A, KERNEL);
        assert_int_equal(x->nrec, size);
        /* rewind: empty again, traced from the start */
        assert_int_equal(pt_ctrl_sys_start(&x->c, true, &why), 0);
        x->nrec = 0;
        one_round(x, 3000, 0, CR3_A, KERNEL);
        status(x, &st);
        assert_true(st.on);
        assert_int_equal(st.bytes, x->nrec);
        assert_true(x->nrec > 0);
        sx_free(x);
    }
}

/* What the CPU holds while the guest runs, for a config. */
static void in_guest_regs(struct sx *x, uint64_t *ctl)
{
    entry(x);
    *ctl = x->tw.pt.ctl;
    assert_true(*ctl & RTIT_CTL_TRACEEN);
    assert_true(*ctl & RTIT_CTL_TOPA);
    assert_true(*ctl & RTIT_CTL_BRANCH_EN);
    assert_true(*ctl & RTIT_CTL_TSC_EN);
    assert_true(*ctl & RTIT_CTL_MTC_EN);
    assert_int_equal(PTV_FIELD(*ctl, RTIT_CTL_MTC_RANGE_SHIFT, 0xf), 3);
    assert_true(*ctl & RTIT_CTL_CYCLEACC);
    assert_int_equal(PTV_FIELD(*ctl, RTIT_CTL_PSB_FREQ_SHIFT, 0xf), 1); /* 4K = 2^(1+11) */
    assert_int_equal(x->tw.pt.output_base, x->c.sys.f.output_base);
}

/* Run packets at a context inside and one outside the filter: only the inside ones land. */
static void include_exclude(struct sx *x, unsigned cpl_in, uint64_t cr3_in, uint64_t ip_in,
                            unsigned cpl_out, uint64_t cr3_out, uint64_t ip_out)
{
    uint64_t w;

    w = guest_runs(x, 2000, cpl_out, cr3_out, ip_out);
    assert_int_equal(w, 0);
    assert_true((x->tw.pt.status & (RTIT_STATUS_CONTEXTEN | RTIT_STATUS_FILTEREN)) !=
                (RTIT_STATUS_CONTEXTEN | RTIT_STATUS_FILTEREN));
    w = guest_runs(x, 2000, cpl_in, cr3_in, ip_in);
    assert_true(w >= 2000);
    vm_exit(x);
}

static void filters(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        struct pt_sys_cfg cfg;
        struct sx *x;
        uint64_t ctl;
        struct pt_sys_status st;

        /* pt_filter = os: CPL 0 in, CPL 3 out */
        default_cfg(&cfg, 64 << 10, true);
        cfg.filter = PTV_TRACE_OS;
        x = sx_new(lc, &cfg);
        in_guest_regs(x, &ctl);
        assert_int_equal(ctl & (RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_CR3EN), RTIT_CTL_OS);
        assert_int_equal(ctl & (RTIT_CTL_ADDR(0) | RTIT_CTL_ADDR(1)), 0);
        include_exclude(x, 0, CR3_A, KERNEL, 3, CR3_A, USER_IP);
        sx_free(x);

        /* pt_filter = user: CPL 3 in, CPL 0 out */
        cfg.filter = PTV_TRACE_USER;
        x = sx_new(lc, &cfg);
        in_guest_regs(x, &ctl);
        assert_int_equal(ctl & (RTIT_CTL_OS | RTIT_CTL_USR | RTIT_CTL_CR3EN), RTIT_CTL_USR);
        include_exclude(x, 3, CR3_A, USER_IP, 0, CR3_A, KERNEL);
        sx_free(x);

        /* pt_cr3: CR3Filter + CR3_MATCH; another address space is out */
        cfg.filter = PTV_TRACE_OS | PTV_TRACE_USER;
        cfg.cr3 = CR3_B;
        x = sx_new(lc, &cfg);
        in_guest_regs(x, &ctl);
        assert_true(ctl & RTIT_CTL_CR3EN);
        assert_int_equal(x->tw.cpu.cr3_match, CR3_B);
        include_exclude(x, 3, CR3_B, USER_IP, 3, CR3_A, USER_IP);
        sx_free(x);

        /* pt_range: ADDR0/1_CFG = 1 (FilterEn), ADDRn_A/B; an IP outside both is out */
        cfg.cr3 = 0;
        cfg.nranges = 2;
        cfg.range[0].lo = KERNEL;
        cfg.range[0].hi = KERNEL + 0xfff;
        cfg.range[1].lo = USER_IP;
        cfg.range[1].hi = USER_IP + 0x10;
        x = sx_new(lc, &cfg);
        in_guest_regs(x, &ctl);
        assert_int_equal(PTV_FIELD(ctl, RTIT_CTL_ADDR_SHIFT(0), 0xf), RTIT_ADDR_CFG_FILTER);
        assert_int_equal(PTV_FIELD(ctl, RTIT_CTL_ADDR_SHIFT(1), 0xf), RTIT_ADDR_CFG_FILTER);
        assert_int_equal(x->tw.cpu.addr[0][0], KERNEL);
        assert_int_equal(x->tw.cpu.addr[0][1], KERNEL + 0xfff);
        assert_int_equal(x->tw.cpu.addr[1][0], USER_IP);
        assert_int_equal(x->tw.cpu.addr[1][1], USER_IP + 0x10);
        include_exclude(x, 0, CR3_A, KERNEL + 0x800, 0, CR3_A, KERNEL + 0x1000);
        entry(x);
        include_exclude(x, 3, CR3_A, USER_IP + 0x10, 3, CR3_A, USER_IP - 1);
        /* a filter change at run time: validated, in force from the next entry */
        cfg.nranges = 0;
        cfg.filter = PTV_TRACE_USER;
        {
            const char *why;
            struct pt_sys_cfg bad = cfg;
            uint64_t before = x->c.sys.f.ctl;
            bad.nranges = 3; /* the CPU has 2 */
            /* the check alone says the same and changes nothing either (TRACE_START asks it
             * before it looks whether a window is open) */
            assert_int_equal(pt_ctrl_sys_check_filter(&x->c, &bad, &why), -1);
            assert_non_null(why);
            assert_int_equal(pt_ctrl_sys_check_filter(&x->c, &cfg, &why), 0);
            assert_int_equal(x->c.sys.f.ctl, before);
            assert_int_equal(pt_ctrl_sys_set_filter(&x->c, &bad, &why), -1);
            assert_non_null(why);
            assert_int_equal(x->c.sys.f.ctl, before); /* nothing changed */
            assert_int_equal(pt_ctrl_sys_set_filter(&x->c, &cfg, &why), 0);
        }
        entry(x);
        ctl = x->tw.pt.ctl;
        assert_int_equal(ctl & (RTIT_CTL_OS | RTIT_CTL_USR), RTIT_CTL_USR);
        assert_int_equal(ctl & (RTIT_CTL_ADDR(0) | RTIT_CTL_ADDR(1)), 0);
        include_exclude(x, 3, CR3_A, 0x7000, 0, CR3_A, KERNEL);
        status(x, &st);
        assert_int_equal(st.bytes, x->nrec);
        ring_is_newest(x);
        decode_ring(x);
        sx_free(x);
    }
}

/* Steady state: no WRMSR and no MSR-load-list change per exit; 3 RDMSRs read the progress. */
static void steady_state(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        struct pt_sys_cfg cfg;
        struct sx *x;
        uint64_t wr, rd, ent, msrw;
        const int rounds = 1000;
        unsigned lists_entry, lists_exit;

        default_cfg(&cfg, 1u << 20, true);
        x = sx_new(lc, &cfg);
        for (int r = 0; r < 3; r++)
            one_round(x, 300, 0, CR3_A, KERNEL);
        wr = x->tw.vmm_wrmsrs;
        rd = x->tw.vmm_rdmsrs;
        ent = x->tw.entries;
        msrw = x->c.stats.msr_writes;
        lists_entry = x->tw.n_entry;
        lists_exit = x->tw.n_exit;
        for (int r = 0; r < rounds; r++) {
            entry(x);
            guest_runs(x, 300, 0, CR3_A, KERNEL);
            vm_exit(x);
        }
        print_message("load/clear %d: per exit %.2f WRMSR, %.2f RDMSR, MSR-load lists %u+%u "
                      "entries (CPU loads, no VMM work), %.2f entries per exit\n",
                      lc, (double)(x->tw.vmm_wrmsrs - wr) / rounds,
                      (double)(x->tw.vmm_rdmsrs - rd) / rounds, x->tw.n_entry, x->tw.n_exit,
                      (double)(x->tw.entries - ent) / rounds);
        assert_int_equal(x->tw.vmm_wrmsrs - wr, 0);
        assert_int_equal(x->c.stats.msr_writes - msrw, 0);
        assert_int_equal(x->tw.vmm_rdmsrs - rd, 3 * rounds);
        assert_int_equal(x->tw.entries - ent, rounds); /* no exit or entry of the VMM's own */
        assert_int_equal(x->tw.n_entry, lc ? 0 : 1);
        assert_int_equal(x->tw.n_exit, lc ? 0 : 1);
        assert_int_equal(x->tw.n_entry, lists_entry);
        assert_int_equal(x->tw.n_exit, lists_exit);
        if (!lc) {
            assert_int_equal(x->tw.entry_list[0].index, MSR_IA32_RTIT_CTL);
            assert_int_equal(x->tw.entry_list[0].value, x->c.sys.f.ctl);
            assert_int_equal(x->tw.exit_list[0].value, 0);
        }
        decode_ring(x);
        sx_free(x);
    }
}

/* The guest sees no PT: CPUID, RTIT MSRs #GP (nothing changes on the CPU), XSS[8] refused. */
static void guest_sees_no_pt(void **state)
{
    struct pt_sys_cfg cfg;
    struct sx *x;
    uint32_t r[4];

    default_cfg(&cfg, 64 << 10, true);
    x = sx_new(true, &cfg);
    assert_false(x->d.guest.present);
    r[0] = 0;
    r[1] = 0xffffffff;
    r[2] = r[3] = 0;
    cpuid_policy(&x->d, GUEST_FEAT_XSAVES, 7, 0, 0, r);
    assert_int_equal(r[1] & CPUID_7_EBX_INTEL_PT, 0);
    for (uint32_t sub = 0; sub < 3; sub++) {
        uint32_t l[4] = {1, 0xf, 7, 0};
        cpuid_policy(&x->d, GUEST_FEAT_XSAVES, PT_CPUID_LEAF, sub, 0, l);
        assert_int_equal(l[0] | l[1] | l[2] | l[3], 0);
    }
    r[0] = r[1] = 0;
    r[2] = 0x1ff; /* the host's XSS bits, PT (8) among them */
    r[3] = 0;
    cpuid_policy(&x->d, GUEST_FEAT_XSAVES, 0xd, 1, 0, r);
    assert_int_equal(r[2] & XFEATURE_PT, 0);
    assert_false(xss_policy(XFEATURE_PT, 0x1ff));
    entry(x);
    vm_exit(x);
    for (unsigned i = 0; i < PTM_NR_RTIT_MSRS; i++) {
        uint32_t msr = ptm_rtit_msrs[i];
        struct pt_msr_result res;
        uint64_t v = 0, wr = x->tw.vmm_wrmsrs;
        struct pt_msr_file before = x->c.sys.f;
        assert_int_equal(msr_owner(msr), MSR_OWNER_PT);
        assert_int_equal(pt_ctrl_rdmsr(&x->c, msr, &v, &res), PT_MSR_GP);
        assert_int_equal(pt_ctrl_wrmsr(&x->c, msr, 0, &res), PT_MSR_GP);
        assert_int_equal(pt_ctrl_wrmsr(&x->c, msr, RTIT_CTL_TRACEEN, &res), PT_MSR_GP);
        assert_int_equal(x->tw.vmm_wrmsrs, wr);
        assert_memory_equal(&before, &x->c.sys.f, sizeof(before));
    }
    /* a PT-looking EPT violation is never the engine's in system mode */
    assert_int_equal(pt_ctrl_ept_violation(&x->c, 0x1000, 1ull << 16), PT_CTRL_EPTV_NOT_PT);
    one_round(x, 1000, 0, CR3_A, KERNEL);
    sx_free(x);
}

/* A WRMSR of the VMM's own set-up refused by the CPU: one reason, tracing off, guest runs on. */
static void refused_wrmsr(void **state)
{
    for (int lc = 0; lc < 2; lc++) {
        struct pt_sys_cfg cfg;
        struct pt_sys_status st;
        struct sx *x;
        const char *why = NULL;

        default_cfg(&cfg, 64 << 10, true);
        x = sx_new(lc, &cfg);
        one_round(x, 1000, 0, CR3_A, KERNEL);
        /* at the entry that loads a new position */
        x->tw.inject_fault_msr = MSR_IA32_RTIT_OUTPUT_MASK_PTRS;
        assert_int_equal(pt_ctrl_sys_start(&x->c, true, &why), 0);
        one_round(x, 1000, 0, CR3_A, KERNEL);
        status(x, &st);
        assert_true(st.error);
        assert_false(st.on);
        assert_non_null(st.reason);
        assert_non_null(x->c.last_refusal);
        one_round(x, 1000, 0, CR3_A, KERNEL); /* the guest runs on, untraced */
        assert_true(st.untraced > 0 || x->c.sys.acct.untraced > 0);
        /* the CPU refuses RTIT_CTL itself: start says why, nothing reaches an entry */
        x->tw.inject_fault_msr = MSR_IA32_RTIT_CTL;
        assert_int_equal(pt_ctrl_sys_start(&x->c, true, &why), -1);
        assert_non_null(why);
        one_round(x, 1000, 0, CR3_A, KERNEL);
        x->tw.inject_fault_msr = 0;
        assert_int_equal(pt_ctrl_sys_start(&x->c, true, &why), 0);
        x->nrec = 0;
        one_round(x, 1000, 0, CR3_A, KERNEL);
        status(x, &st);
        assert_true(st.on);
        assert_int_equal(st.bytes, x->nrec);
        sx_free(x);
    }
}

/* Boot-time refusals: each with a reason, nothing allocated. */
static void boot_refusals(void **state)
{
    struct pt_caps h;
    struct pt_gcaps view;
    struct pt_sys_cfg cfg;

    host_caps(&h, true, 2);
    pt_sys_view(&h, &view);
    default_cfg(&cfg, 4u << 20, true);
    assert_null(pt_sys_check(&view, &cfg));
    cfg.nranges = 3;
    cfg.range[0].hi = cfg.range[1].hi = cfg.range[2].hi = 1;
    assert_non_null(pt_sys_check(&view, &cfg));
    cfg.nranges = 0;
    cfg.ring_size = 3 << 12;
    assert_non_null(pt_sys_check(&view, &cfg));
    cfg.ring_size = 4096;
    cfg.filter = 0;
    assert_non_null(pt_sys_check(&view, &cfg));
    cfg.filter = PTV_TRACE_OS;
    cfg.cr3 = 0x1001;
    assert_non_null(pt_sys_check(&view, &cfg));
    h.leaf14[0][PT_EBX] &= ~PT_CAP_EBX_CR3_FILTER;
    pt_sys_view(&h, &view);
    cfg.cr3 = 0x1000;
    assert_non_null(pt_sys_check(&view, &cfg));
    /* out of VMM memory: refused, every page given back */
    {
        struct fake_world *fw = fw_new(1);
        struct twin tw;
        struct ptm_cpu_caps hc = {.pt = true, .maxphyaddr = MAXPA, .vaddr_bits = 48};
        struct pt_decision d;
        struct pt_ctrl c;
        const char *why = NULL;

        host_caps(&h, false, 2);
        assert_int_equal(pt_decide(&h, PTV_PT_SYSTEM, &d), PT_ENGINE_SYSTEM);
        memcpy(hc.leaf14, h.leaf14, sizeof(hc.leaf14));
        twin_init(&tw, fw, &hc, false, false);
        assert_int_equal(pt_ctrl_init(&c, &d, &h, &tw.ops, &fw->mem, &fw->alloc, NULL), 0);
        default_cfg(&cfg, 16u << 20, true); /* more than the fake pool */
        assert_int_equal(pt_ctrl_sys_setup(&c, &cfg, &fw->alloc, &why), -1);
        assert_non_null(why);
        assert_false(c.active);
        assert_int_equal(fw->pool_in_use, 0);
        fw->alloc_fail_after = 40;
        default_cfg(&cfg, 1u << 20, true);
        assert_int_equal(pt_ctrl_sys_setup(&c, &cfg, &fw->alloc, &why), -1);
        assert_int_equal(fw->pool_in_use, 0);
        assert_int_equal(fw->free_errors, 0);
        fw_free(fw);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(position_never_rewinds), cmocka_unit_test(circular_keeps_newest),
        cmocka_unit_test(stop_on_full),           cmocka_unit_test(filters),
        cmocka_unit_test(steady_state),           cmocka_unit_test(guest_sees_no_pt),
        cmocka_unit_test(refused_wrmsr),          cmocka_unit_test(boot_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
