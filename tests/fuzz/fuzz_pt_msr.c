/* SPDX-License-Identifier: MIT */
/*
 * Fuzz the virtual RTIT MSR file (vmm/pt/pt_msr.c + pt_ctl_policy.c) and the plans built on it.
 *
 * Input: byte 0 picks the CPUID view: one of a few fixed guest views, or (high values) a view
 * that pt_decide() derives from 48 raw capability bytes that follow, so the mode decision and the
 * guest-view filter are fuzzed too.  The view stays fixed for the whole input, as a CPU's CPUID
 * does.  Then 10-byte operations: op byte (read/write, value shaping, switch round), MSR
 * selector, 8-byte value.  After every step the invariants below must hold; a violation aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt/pt_caps.h"
#include "pt/pt_msr.h"
#include "pt/pt_switch.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const struct pt_gcaps views[] = {
    {.present = false},
    {.present = true,
     .maxphyaddr = 46,
     .vaddr_bits = 48,
     .leaf14 = {{1, 0x1ff, 0xf, 0}, {(0x249u << 16) | 4, (0x3fu << 16) | 0x1fff, 0, 0}}},
    {.present = true,
     .maxphyaddr = 39,
     .vaddr_bits = 48,
     .leaf14 = {{1, 0xf, 0x7, 0}, {(0x249u << 16) | 2, (0x3fu << 16) | 0x1fff, 0, 0}}},
    {.present = true, .maxphyaddr = 39, .vaddr_bits = 57, .leaf14 = {{1, 0, 0x1, 0}, {0}}},
    {.present = true,
     .maxphyaddr = 52,
     .vaddr_bits = 48,
     .leaf14 = {{1, 0x2, 0x4, 0}, {1, 0x1, 0, 0}}},
    {.present = true, .maxphyaddr = 36, .vaddr_bits = 48, .leaf14 = {{0, 0, 0, 0}, {0}}},
};

static const uint32_t msrs[] = {
    MSR_IA32_RTIT_CTL,
    MSR_IA32_RTIT_CTL,
    MSR_IA32_RTIT_CTL,
    MSR_IA32_RTIT_STATUS,
    MSR_IA32_RTIT_OUTPUT_BASE,
    MSR_IA32_RTIT_OUTPUT_MASK_PTRS,
    MSR_IA32_RTIT_CR3_MATCH,
    0x580,
    0x581,
    0x582,
    0x583,
    0x584,
    0x585,
    0x586,
    0x587,
    0x55f,
    0x562,
    0x573,
    0x588,
    0x38e,
};

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool canonical(uint64_t v, unsigned bits)
{
    if (bits == 0)
        bits = 48; /* as the policy reads an unset width */
    if (bits >= 64)
        return true;
    unsigned sh = 64 - bits;
    return (uint64_t)((int64_t)(v << sh) >> sh) == v;
}

/* Invariants of a file, whatever happened before. */
static void check_file(const struct pt_gcaps *g, const struct pt_msr_file *f)
{
    CHECK((f->ctl & ~pt_ctl_allowed_mask(g)) == 0);
    CHECK((f->output_mask & RTIT_MASK_LOWER) == RTIT_MASK_LOWER);
    CHECK((f->output_base & 0x7f) == 0);
    CHECK(g->maxphyaddr >= 64 || (f->output_base >> g->maxphyaddr) == 0);
    CHECK((f->cr3_match & 0x1f) == 0);
    CHECK((f->status & ~pt_status_writable_mask(g)) == 0);
    for (unsigned n = 0; n < PT_MAX_ADDR_RANGES; n++) {
        CHECK(canonical(f->addr[n][0], g->vaddr_bits));
        CHECK(canonical(f->addr[n][1], g->vaddr_bits));
    }
    if (f->ctl & RTIT_CTL_TRACEEN) { /* a legal output scheme is configured */
        if (f->ctl & RTIT_CTL_TOPA)
            CHECK(pt_cap(g->leaf14, PT_ECX, PT_CAP_ECX_TOPA));
        else if (!(f->ctl & RTIT_CTL_FABRIC_EN))
            CHECK(pt_cap(g->leaf14, PT_ECX, PT_CAP_ECX_SINGLE_RANGE));
    }
    for (unsigned n = 0; n < PT_MAX_ADDR_RANGES; n++) {
        unsigned cfg = (unsigned)((f->ctl >> RTIT_CTL_ADDR_SHIFT(n)) & 0xf);
        CHECK(cfg <= RTIT_ADDR_CFG_STOP);
        CHECK(cfg == 0 || n < pt_cap_num_ranges(g->leaf14));
    }
}

static uint64_t shape(unsigned how, uint64_t raw, uint64_t cur, const struct pt_gcaps *g)
{
    switch (how) {
    case 1:
        return raw & pt_ctl_allowed_mask(g);
    case 2:
        return raw & pt_ctl_allowed_mask(g) & ~RTIT_CTL_TRACEEN & 0xffff00000fffffffull;
    case 3:
        return cur ^ (1ull << (raw & 63));
    case 4:
        return cur;
    case 5:
        return raw & 0xff;
    case 6:
        return raw & ~0x7full & ((1ull << (g->maxphyaddr & 63)) - 1);
    case 7:
        return (uint64_t)((int64_t)(raw << 16) >> 16);
    default:
        return raw;
    }
}

static void one_op(const struct pt_gcaps *g, struct pt_msr_file *f, uint8_t op, uint32_t msr,
                   uint64_t raw)
{
    struct pt_msr_file before = *f;
    struct pt_msr_result res;
    uint64_t v, rd = 0;
    enum pt_msr_status st;

    if (op & 1) {
        v = shape((op >> 1) & 7, raw, pt_msr_is_rtit(msr) ? pt_msr_file_get(f, msr) : 0, g);
        enum pt_rule expect =
            pt_msr_is_rtit(msr) ? pt_policy_check_write(g, f, msr, v) : PT_RULE_NONE;
        st = pt_msr_write(g, f, msr, v, &res);
        CHECK(res.status == st && res.reason != NULL);
        CHECK((st == PT_MSR_NOT_PT_MSR) == !pt_msr_is_rtit(msr));
        if (st != PT_MSR_OK) {
            CHECK(memcmp(f, &before, sizeof(*f)) == 0); /* never a partial update */
            CHECK(st != PT_MSR_GP || (res.rule != PT_RULE_NONE && res.rule == expect));
        } else {
            CHECK(res.rule == PT_RULE_NONE && expect == PT_RULE_NONE);
            CHECK(g->present);
            /* reads back what was written */
            CHECK(pt_msr_read(g, f, msr, &rd, NULL) == PT_MSR_OK);
            if (msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS)
                CHECK(rd == (v | RTIT_MASK_LOWER));
            else if (msr == MSR_IA32_RTIT_STATUS)
                CHECK(rd ==
                      ((v & ~PT_STATUS_WRITE_IGNORED) | (before.status & PT_STATUS_WRITE_IGNORED)));
            else
                CHECK(rd == v);
            /* while tracing, only RTIT_CTL changes, and it keeps its value unless TraceEn clears */
            if (before.ctl & RTIT_CTL_TRACEEN) {
                struct pt_msr_file a = *f, b = before;
                a.ctl = b.ctl = 0;
                CHECK(memcmp(&a, &b, sizeof(a)) == 0);
                CHECK(!(f->ctl & RTIT_CTL_TRACEEN) || f->ctl == before.ctl);
            }
            /* the only change is the written MSR */
            struct pt_msr_file a = *f;
            pt_msr_file_set(&a, msr, pt_msr_file_get(&before, msr));
            CHECK(memcmp(&a, &before, sizeof(a)) == 0);
            CHECK(res.trace_start == (msr == MSR_IA32_RTIT_CTL && !(before.ctl & 1) && (v & 1)));
            CHECK(res.trace_stop == (msr == MSR_IA32_RTIT_CTL && (before.ctl & 1) && !(v & 1)));
        }
        if (!g->present && pt_msr_is_rtit(msr))
            CHECK(st == PT_MSR_GP && res.rule == PT_RULE_NO_PT);
    } else {
        st = pt_msr_read(g, f, msr, &rd, &res);
        CHECK((st == PT_MSR_NOT_PT_MSR) == !pt_msr_is_rtit(msr));
        CHECK(memcmp(f, &before, sizeof(*f)) == 0);
        if (st == PT_MSR_OK) {
            CHECK(pt_msr_present(g, msr));
            if (msr == MSR_IA32_RTIT_OUTPUT_MASK_PTRS)
                CHECK((rd & RTIT_MASK_LOWER) == RTIT_MASK_LOWER);
        } else if (st == PT_MSR_GP) {
            CHECK(!pt_msr_present(g, msr));
        }
    }
    check_file(g, f);
}

/* An entry/exit round: the plan is always safe and never overflows. */
static void switch_round(const struct pt_decision *d, const struct pt_msr_file *f, uint64_t raw,
                         struct pt_switch *sw)
{
    struct pt_plan p;
    uint64_t host_ctl = (raw & 1) ? PT_HOST_CTL_UNKNOWN : raw >> 1;

    CHECK(pt_switch_entry(sw, d, f, host_ctl, &p));
    CHECK(p.nsteps <= PT_PLAN_MAX_STEPS && p.nmsrs <= PT_SWITCH_MAX_MSRS);
    if (!pt_mode_guest_owns(d->mode))
        CHECK(p.nsteps == 0 && p.n_entry_load == 0);
    pt_switch_exit(sw, d, &p);
    CHECK(p.nsteps <= PT_PLAN_MAX_STEPS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pt_decision d;
    struct pt_msr_file f;
    struct pt_switch sw;
    const struct pt_gcaps *g;

    if (size < 1)
        return 0;
    memset(&d, 0, sizeof(d));
    if (data[0] < 0xc0) {
        g = &views[data[0] % (sizeof(views) / sizeof(views[0]))];
        d.guest = *g;
        d.mode = g->present ? PT_ENGINE_HOST_GUEST_SHADOW : PT_ENGINE_SYSTEM;
        d.load_clear = data[0] & 0x40;
        if (d.load_clear && g->present) {
            d.entry_ctls = VM_ENTRY_LOAD_IA32_RTIT_CTL;
            d.exit_ctls = VM_EXIT_CLEAR_IA32_RTIT_CTL;
        }
        data++, size--;
    } else {
        struct pt_caps c;
        const uint8_t *p = data + 1;
        if (size < 1 + 57)
            return 0;
        memset(&c, 0, sizeof(c));
        c.cpuid7_ebx = le32(p);
        for (int i = 0; i < 8; i++)
            c.leaf14[i / 4][i % 4] = le32(p + 4 + 4 * i);
        c.vmx_misc = le64(p + 36);
        c.secondary_allowed1 = le32(p + 44);
        c.exit_allowed1 = le32(p + 48);
        c.entry_allowed1 = le32(p + 52);
        /* byte 57: MAXPHYADDR, address width, and a bias towards CPUs that have PT in VMX */
        c.maxphyaddr = (uint8_t)(32 + (p[56] & 0x1f) % 21);
        c.vaddr_bits = p[56] & 0x20 ? 57 : 48;
        if (p[56] & 0x40) {
            c.cpuid7_ebx |= CPUID_7_EBX_INTEL_PT;
            c.vmx_misc |= VMX_MISC_INTEL_PT;
        }
        pt_decide(&c, data[0] % 5, &d);
        CHECK(d.reason[0] != '\0' && d.guest.present == pt_mode_guest_owns(d.mode));
        if (d.guest.present) { /* the guest view is a subset of the host */
            CHECK((d.guest.leaf14[0][PT_EBX] & ~c.leaf14[0][PT_EBX]) == 0);
            CHECK((d.guest.leaf14[0][PT_ECX] & ~c.leaf14[0][PT_ECX]) == 0);
            CHECK(pt_cap_num_ranges(d.guest.leaf14) <= pt_cap_num_ranges(c.leaf14));
        }
        CHECK((d.entry_ctls & ~c.entry_allowed1) == 0 && (d.exit_ctls & ~c.exit_allowed1) == 0);
        CHECK((d.secondary_ctls & ~c.secondary_allowed1) == 0);
        g = &d.guest;
        data += 58, size -= 58;
    }
    pt_msr_file_init(&f);
    pt_switch_init(&sw);
    check_file(g, &f);
    for (; size >= 10; data += 10, size -= 10) {
        uint64_t raw = le64(data + 2);
        if ((data[0] & 0xf0) == 0xf0)
            switch_round(&d, &f, raw, &sw);
        else
            one_op(g, &f, data[0], msrs[data[1] % (sizeof(msrs) / sizeof(msrs[0]))], raw);
    }
    return 0;
}
