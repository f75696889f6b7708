/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: a guest-chosen GPA and any facts the VMM could gather about it through
 * pt_mem_view() (vmm/pt/pt_mem_view.c).  Invariants: a kind the engine knows; at least the rest
 * of the 4 KiB page unless a map range ends sooner; guest RAM only for an identity translation of
 * RAM outside the VMM's span, never past the map range or the EPT page; no host address outside
 * the answer's own translation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pt/pt_mem_view.h"
#include "ptv/handoff.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

struct in {
    uint64_t gpa, hpa, map_end;
    uint8_t flags, shift, type;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in;
    if (size < sizeof(in))
        return 0;
    memcpy(&in, data, sizeof(in));
    struct pt_mem_facts f = {.in_vmm = in.flags & 1,
                             .ept_ok = in.flags & 2,
                             .hpa = in.flags & 4 ? in.gpa : in.hpa,
                             .page_shift = in.shift,
                             .map_type = in.type,
                             .map_end =
                                 in.flags & 8 ? in.gpa + (in.map_end & 0xffffffff) : in.map_end};
    struct pt_mem_xlate x;
    pt_mem_view(in.gpa, &f, &x);
    CHECK(x.kind < PT_MEM_COUNT);
    CHECK(x.len > 0);
    if (x.kind == PT_MEM_GUEST_RAM) {
        CHECK(!f.in_vmm && f.ept_ok && f.hpa == in.gpa && f.map_type == PTV_MEM_RAM);
        CHECK(f.page_shift == 12 || f.page_shift == 21 || f.page_shift == 30);
        CHECK(in.gpa + x.len <= f.map_end && in.gpa + x.len > in.gpa);
        uint64_t page = 1ull << f.page_shift;
        CHECK(x.len <= page - (in.gpa & (page - 1)));
        CHECK(x.hpa == in.gpa);
    }
    if (f.in_vmm)
        CHECK(x.kind == PT_MEM_VMM && x.hpa == 0);
    return 0;
}
