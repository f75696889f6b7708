/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: random VMX capability MSRs and CPUID facts through the VMX set-up decision
 * (vmm/vmx/vmx_caps_policy.c), the AP decision and the PT mode decision (vmm/pt/pt_caps.c).
 * The input starts from one of the real profiles (tests/fakes/vmx_profiles.h), then overwrites or
 * flips its fields, so both near-real and wholly random capability sets are reached.
 * Invariants:
 *   - never crashes; a refusal carries a one-line, NUL-terminated reason;
 *   - every accepted control word respects its MSR's allowed-0 and allowed-1 settings;
 *   - an accepted set has what the VMM cannot run without (MSR bitmaps, secondary controls, EPT,
 *     unrestricted guest, 64-bit host, EFER/PAT switching), a usable EPT (4-level, WB, INVEPT),
 *     no PT control, VPID only with INVVPID, and load-PERF_GLOBAL_CTRL on exit and entry
 *     together, only with PMU v2+;
 *   - vmx_caps_same() is 1 for equal caps and 0 (with a reason) when any field differs;
 *   - the PT engine's controls fit the MSRs on top of the accepted controls.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fakes/vmx_profiles.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static void check_within(uint64_t cap, uint32_t v)
{
    CHECK((v & (uint32_t)cap) == (uint32_t)cap);
    CHECK((v & ~(uint32_t)(cap >> 32)) == 0);
}

static void check_reason(const char *r, size_t max)
{
    size_t n = strnlen(r, max);
    CHECK(n > 0 && n < max);
    CHECK(!memchr(r, '\n', n));
}

static void check_accepted(const struct vmx_cpu_profile *p, const struct vmx_ctl_decision *d)
{
    const struct vmx_caps *c = &p->caps;
    const struct vmx_controls *k = &d->ctls;
    check_within(c->pin, k->pin);
    check_within(c->proc, k->proc);
    check_within(c->proc2, k->proc2);
    check_within(c->exit, k->exit);
    check_within(c->entry, k->entry);
    CHECK((k->proc & (CPU_BASED_USE_MSR_BITMAPS | CPU_BASED_ACTIVATE_SECONDARY_CONTROLS)) ==
          (CPU_BASED_USE_MSR_BITMAPS | CPU_BASED_ACTIVATE_SECONDARY_CONTROLS));
    CHECK(k->proc2 & SECONDARY_EXEC_ENABLE_EPT);
    CHECK(k->proc2 & SECONDARY_EXEC_UNRESTRICTED_GUEST);
    CHECK(!(k->proc2 & (SECONDARY_EXEC_PT_USE_GPA | SECONDARY_EXEC_PT_CONCEAL_VMX)));
    uint32_t exit_req = VM_EXIT_HOST_ADDR_SPACE_SIZE | VM_EXIT_SAVE_IA32_EFER |
                        VM_EXIT_LOAD_IA32_EFER | VM_EXIT_SAVE_IA32_PAT | VM_EXIT_LOAD_IA32_PAT;
    CHECK((k->exit & exit_req) == exit_req);
    CHECK((k->entry & (VM_ENTRY_LOAD_IA32_EFER | VM_ENTRY_LOAD_IA32_PAT)) ==
          (VM_ENTRY_LOAD_IA32_EFER | VM_ENTRY_LOAD_IA32_PAT));
    CHECK((c->ept_vpid & VMX_EPT_PAGE_WALK_4_BIT) && (c->ept_vpid & VMX_EPTP_WB_BIT) &&
          (c->ept_vpid & VMX_EPT_INVEPT_BIT));
    CHECK(!(k->proc2 & SECONDARY_EXEC_ENABLE_VPID) || (c->ept_vpid & VMX_VPID_INVVPID_BIT));
    bool pg_exit = k->exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL;
    bool pg_entry = k->entry & VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL;
    CHECK(pg_exit == pg_entry);
    CHECK(!pg_exit || p->pmu_version >= 2);
    CHECK(!d->perf_global_unswitched || (p->pmu_version >= 2 && !pg_exit));
    CHECK(c->maxphyaddr >= 32 && c->maxphyaddr <= 52);
    CHECK(d->reason[0] == '\0');
}

/* Field n of a profile as a 64-bit slot (fields 12 and 13: MAXPHYADDR, PMU version). */
static void set_field(struct cpu_profile *p, unsigned n, uint64_t v, int flip)
{
    struct vmx_caps *c = &p->vmx.caps;
    uint64_t *f[] = {&c->basic,      &c->misc,       &c->ept_vpid,   &c->pin,
                     &c->proc,       &c->proc2,      &c->exit,       &c->entry,
                     &c->cr0_fixed0, &c->cr0_fixed1, &c->cr4_fixed0, &c->cr4_fixed1};
    if (n < 12) {
        *f[n] = flip ? *f[n] ^ v : v;
    } else if (n == 12) {
        c->maxphyaddr = (unsigned)(flip ? c->maxphyaddr ^ (v & 0xff) : v & 0xff);
    } else if (n == 13) {
        p->vmx.pmu_version = (uint8_t)(flip ? p->vmx.pmu_version ^ v : v);
    } else if (n == 14) {
        p->cpuid7_ebx = (uint32_t)(flip ? p->cpuid7_ebx ^ v : v);
    } else {
        unsigned i = n - 15; /* leaf14: 8 words */
        uint32_t *w = &p->leaf14[i / 4 % 2][i % 4];
        *w = (uint32_t)(flip ? *w ^ v : v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct cpu_profile p = vmx_profiles[data[0] % PROFILE_COUNT];
    uint8_t requested = 0;
    size_t i = 1;
    if (i < size)
        requested = data[i++];
    while (i + 9 <= size) {
        uint64_t v;
        memcpy(&v, data + i + 1, 8);
        set_field(&p, data[i] % 23u, v, data[i] & 0x80);
        i += 9;
    }

    struct vmx_ctl_decision d;
    memset(&d, 0xa5, sizeof(d)); /* the decision must fill everything it returns */
    int st = vmx_decide_controls(&p.vmx, &d);
    if (st == 0) {
        check_accepted(&p.vmx, &d);
    } else {
        CHECK(st == PTV_ENTRY_MISSING_CONTROL);
        check_reason(d.reason, sizeof(d.reason));
    }
    CHECK(vmx_decide_controls(&p.vmx, &d) == st); /* deterministic */

    const char *why = NULL;
    /* APs need wait-for-SIPI and, for the shootdown NMIs, NMI exiting + virtual NMIs */
    uint32_t nmi = PIN_BASED_NMI_EXITING | PIN_BASED_VIRTUAL_NMIS;
    bool ap_ok =
        (p.vmx.caps.misc & VMX_MISC_ACTIVITY_WAIT_SIPI) && ((p.vmx.caps.pin >> 32) & nmi) == nmi;
    if (!vmx_can_virtualize_aps(&p.vmx, &why)) {
        check_reason(why, 200);
        CHECK(!ap_ok);
    } else {
        CHECK(ap_ok);
    }
    struct vmx_caps ap = p.vmx.caps;
    CHECK(vmx_caps_same(&p.vmx.caps, &ap, &why) == 1);
    unsigned bit = requested % 64;
    ap.misc ^= 1ull << bit;
    why = NULL;
    CHECK(vmx_caps_same(&p.vmx.caps, &ap, &why) == 0);
    check_reason(why, 200);

    struct pt_caps pc = profile_pt_caps(&p);
    struct pt_decision pd;
    enum pt_engine_mode m = pt_decide(&pc, requested % 5, &pd);
    check_reason(pd.reason, sizeof(pd.reason));
    if (st == 0 && pt_mode_guest_owns(m)) {
        check_within(p.vmx.caps.proc2, d.ctls.proc2 | pd.secondary_ctls);
        check_within(p.vmx.caps.exit, d.ctls.exit | pd.exit_ctls);
        check_within(p.vmx.caps.entry, d.ctls.entry | pd.entry_ctls);
    }
    return 0;
}
