/* SPDX-License-Identifier: MIT */
/*
 * Fuzz system mode's config -> RTIT set-up validation (vmm/pt/pt_sys.c) and its ring positions.
 *
 * Input: raw CPUID 0x14 subleaves 0/1 (32 bytes), MAXPHYADDR / linear-width byte, then a
 * struct pt_sys_cfg shaped from the bytes that follow (ring size, wrap, pt_filter, pt_cr3, up to
 * 5 pt_range ranges, psb_period), then (base, mask) pairs for the ring position decoder.
 * Invariants (abort on violation):
 *  - pt_sys_program accepts exactly what pt_sys_check accepts (for a legal ring address);
 *  - an accepted set-up is what the config says (OS/User, CR3Filter iff pt_cr3, ADDRn_CFG = 1
 *    for the configured ranges only, TraceEn + ToPA + BranchEn) and the bare-metal RTIT MSR
 *    rules (tests/model/ptm_cpu.c, written from the SDM, no code shared with the engine) take
 *    every value in the order the VM entry loads them: no WRMSR #GP, no failed VM entry;
 *  - the ring decoder maps any (OUTPUT_BASE, OUTPUT_MASK_PTRS) to a position inside the ring or
 *    refuses it, and maps the ring's own start to 0.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "model/ptm.h"
#include "model/ptm_cpu.h"
#include "pt/pt_sys.h"
#include "pt/rtit.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct in {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < bytes; i++) {
        v |= (uint64_t)(in->n ? *in->p : 0) << (8 * i);
        if (in->n) {
            in->p++;
            in->n--;
        }
    }
    return v;
}

static struct fake_world *fw;
static uint8_t *ptm_mem;

static void check_on_bare_metal(const struct pt_gcaps *g, const struct pt_msr_file *f,
                                unsigned nranges)
{
    struct ptm pt;
    struct ptm_cpu cpu;
    struct ptm_cpu_caps caps = {
        .pt = true, .maxphyaddr = g->maxphyaddr, .vaddr_bits = g->vaddr_bits};

    memcpy(caps.leaf14, g->leaf14, sizeof(caps.leaf14));
    ptm_init(&pt, ptm_mem, 1 << 20, g->maxphyaddr, g->leaf14[0][2] & PT_CAP_ECX_TOPA_MULTI);
    ptm_cpu_init(&cpu, &pt, &caps);
    CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_OUTPUT_BASE, f->output_base));
    CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, f->output_mask));
    if (g->leaf14[0][1] & PT_CAP_EBX_CR3_FILTER)
        CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_CR3_MATCH, f->cr3_match));
    for (unsigned i = 0; i < nranges; i++) {
        CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_ADDR_A(i), f->addr[i][0]));
        CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_ADDR_B(i), f->addr[i][1]));
    }
    CHECK(!ptm_cpu_wrmsr(&cpu, MSR_IA32_RTIT_CTL, f->ctl));
    CHECK(pt.ctl & RTIT_CTL_TRACEEN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    struct pt_caps host;
    struct pt_gcaps view;
    struct pt_sys_cfg cfg;
    struct pt_msr_file f;
    const char *chk, *prog;
    uint8_t shape;

    if (!fw) {
        fw = fw_new(1);
        ptm_mem = calloc(1, 1 << 20);
    }
    memset(&host, 0, sizeof(host));
    host.cpuid7_ebx = CPUID_7_EBX_INTEL_PT;
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < 4; r++)
            host.leaf14[s][r] = (uint32_t)take(&in, 4);
    shape = (uint8_t)take(&in, 1);
    host.maxphyaddr = (uint8_t)(36 + shape % 17);
    host.vaddr_bits = shape & 0x80 ? 57 : 48;
    pt_sys_view(&host, &view);

    memset(&cfg, 0, sizeof(cfg));
    shape = (uint8_t)take(&in, 1);
    cfg.ring_size = shape & 0x40 ? take(&in, 8) : 1ull << (shape % 32);
    cfg.wrap = shape & 0x80;
    cfg.filter = (uint32_t)take(&in, 1) % 5;
    shape = (uint8_t)take(&in, 1);
    cfg.cr3 = shape & 1 ? take(&in, 8) : shape & 2 ? (take(&in, 4) << 12) : 0;
    cfg.nranges = (shape >> 2) % 6;
    for (unsigned i = 0; i < PT_MAX_ADDR_RANGES; i++) {
        uint8_t k = (uint8_t)take(&in, 1);
        cfg.range[i].lo = k & 1 ? take(&in, 8) : 0xffffffff81000000ull + (take(&in, 2) << 12);
        cfg.range[i].hi = k & 2 ? take(&in, 8) : cfg.range[i].lo + take(&in, 2);
    }
    cfg.psb_period = (uint32_t)(shape & 0x80 ? take(&in, 4) : 256u << (take(&in, 1) % 14));

    chk = pt_sys_check(&view, &cfg);
    memset(&f, 0x5a, sizeof(f));
    prog = pt_sys_program(&view, &cfg, 0x200000, RTIT_MASK_LOWER, &f);
    if (!chk != !prog)
        fprintf(stderr, "check: %s, program: %s\n", chk ? chk : "ok", prog ? prog : "ok");
    CHECK(!chk == !prog); /* the SDM rules refuse nothing the check let through */
    if (!prog) {
        CHECK(f.ctl & RTIT_CTL_TRACEEN);
        CHECK(f.ctl & RTIT_CTL_TOPA);
        CHECK(f.ctl & RTIT_CTL_BRANCH_EN);
        CHECK(!!(f.ctl & RTIT_CTL_OS) == !!(cfg.filter & PTV_TRACE_OS));
        CHECK(!!(f.ctl & RTIT_CTL_USR) == !!(cfg.filter & PTV_TRACE_USER));
        CHECK(!!(f.ctl & RTIT_CTL_CR3EN) == !!cfg.cr3);
        for (unsigned i = 0; i < PT_MAX_ADDR_RANGES; i++) {
            CHECK(PTV_FIELD(f.ctl, RTIT_CTL_ADDR_SHIFT(i), 0xf) ==
                  (i < cfg.nranges ? RTIT_ADDR_CFG_FILTER : 0));
            if (i < cfg.nranges) {
                CHECK(f.addr[i][0] == cfg.range[i].lo && f.addr[i][1] == cfg.range[i].hi);
                CHECK(cfg.range[i].lo <= cfg.range[i].hi);
            }
        }
        CHECK(f.cr3_match == cfg.cr3);
        check_on_bare_metal(&view, &f, cfg.nranges);
    } else {
        uint8_t *b = (uint8_t *)&f;
        for (size_t i = 0; i < sizeof(f); i++)
            CHECK(b[i] == 0x5a); /* a refusal changes nothing */
    }

    /* ring positions: a small ring (the fake pool is 4 MiB) and arbitrary register values */
    if (!chk && cfg.ring_size <= (1u << 20)) {
        struct pt_sys_ring r;
        const char *why;
        uint64_t pos;
        CHECK(!pt_sys_ring_build(&r, cfg.ring_size, cfg.wrap, &fw->alloc, &why));
        CHECK(pt_sys_ring_pos(&r, pt_sys_ring_base(&r), PT_SYS_RING_MASK0, &pos) && pos == 0);
        while (in.n >= 9) {
            uint8_t k = (uint8_t)take(&in, 1);
            uint64_t t = k % (r.ntables + 1);
            uint64_t base = t < r.ntables ? r.dir[t / PT_SYS_DIR_PER_PAGE][t % PT_SYS_DIR_PER_PAGE]
                                          : take(&in, 8);
            uint64_t mask = take(&in, 8) | RTIT_MASK_LOWER;
            if (k & 0x80)
                mask = RTIT_MASK_LOWER | (((mask >> 7) % 513) << 7) | ((mask >> 32) % 4097) << 32;
            if (pt_sys_ring_pos(&r, base, mask, &pos))
                CHECK(pos < r.size || (pos == r.size && !r.wrap));
        }
        pt_sys_ring_free(&r, &fw->alloc);
        CHECK(fw->pool_in_use == 0 && fw->free_errors == 0);
    }
    return 0;
}
