/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: guest-controlled exit data (CPUID leaf/subleaf + host answer + guest
 * CR4, XSETBV operands) through the guest policy (MSR indices: fuzz_msr_owner.c).  Invariants:
 * the hypervisor bit is always set and VMX always hidden on leaf 1, OSXSAVE/
 * OSPKE mirror the guest CR4, TSC deadline is the CPU's unless the VMM hides it,
 * PT is never visible unless the guest owns it,
 * hypervisor leaves never leak host data, XSETBV accepts only legal XCR0s.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emul/guest_policy.h"
#include "pt/rtit.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct {
        uint32_t leaf, sub, r[4];
        uint64_t cr4, xval, sup;
        uint32_t xidx, msr, feat;
    } in;
    if (size < sizeof(in))
        return 0;
    memcpy(&in, data, sizeof(in));
    struct pt_decision d;
    memset(&d, 0, sizeof(d));
    d.mode = PT_ENGINE_OFF;
    uint32_t r[4];
    memcpy(r, in.r, sizeof(r));
    cpuid_policy(&d, in.feat, in.leaf, in.sub, in.cr4, r);
    if (cpuid_is_hypervisor_leaf(in.leaf) && in.leaf > PTV_CPUID_MAX)
        CHECK((r[0] | r[1] | r[2] | r[3]) == 0);
    if (in.leaf == 1) {
        CHECK(r[2] & (1u << 31));
        CHECK(!(r[2] & (1u << 5)));
        CHECK(!!(r[2] & (1u << 27)) == !!(in.cr4 & (1ull << 18)));
        /* TSC deadline: the CPU's bit, or hidden where the VMM found the erratum */
        CHECK(!!(r[2] & (1u << 24)) ==
              (!(in.feat & GUEST_FEAT_NO_TSC_DEADLINE) && (in.r[2] & (1u << 24))));
    }
    if (in.leaf == 7 && in.sub == 0) {
        CHECK(!(r[1] & CPUID_7_EBX_INTEL_PT));
        CHECK(!!(r[2] & (1u << 4)) == !!(in.cr4 & (1ull << 22)));
    }
    if (in.leaf == 7 && in.sub == 0 && !(in.feat & GUEST_FEAT_WAITPKG))
        CHECK(!(r[2] & (1u << 5)));
    if (in.leaf == 0x80000001 && !(in.feat & GUEST_FEAT_RDTSCP))
        CHECK(!(r[3] & (1u << 27)));
    if (in.leaf == 0x14)
        CHECK((r[0] | r[1] | r[2] | r[3]) == 0);
    enum xsetbv_verdict x = xsetbv_policy(in.xidx, in.xval, in.sup, in.cr4);
    if (x == XSETBV_OK)
        CHECK(in.xidx == 0 && (in.xval & 1) && !(in.xval & ~in.sup) &&
              (!(in.xval & 4) || (in.xval & 2)) && (in.cr4 & (1ull << 18)));
    return 0;
}
