// SPDX-License-Identifier: MIT
/*
 * The VMM's own memory, seen from its guest (ARCHITECTURE.md section 2: "the
 * VMM's own ranges are not mapped for the guest").  The VMM tells where it is
 * (PTV_VMCALL_VMM_RANGE); the guest then reads its canary page and writes into
 * its first, middle and last pages.  The VMM must block all of it (EPT), stay
 * alive, and report its canary intact.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "conformance.h"
#include "libtest.h"

#define PAGE_SIZE  4096ull
#define PAGE_MASK  (PAGE_SIZE - 1)
#define GUEST_MARK 0x6b6f6f6c2d747367ull /* "gst-look" */

struct vmm_range {
    uint64_t base, size, canary;
};

static bool range_valid(const struct vmm_range *m)
{
    return !(m->base & PAGE_MASK) && m->size >= PAGE_SIZE && !(m->size & PAGE_MASK) &&
           m->base + m->size > m->base && !(m->canary & PAGE_MASK) && m->canary >= m->base &&
           m->canary + PAGE_SIZE <= m->base + m->size;
}

/* The loader hides the VMM from the OS as EfiReservedMemoryType (ARCHITECTURE.md 1.2). */
static void check_memory_map(const struct vmm_range *m)
{
    UINTN n = 0, key, dsize = 0;
    UINT32 dver;
    EFI_MEMORY_DESCRIPTOR *map = LibMemoryMap(&n, &key, &dsize, &dver);
    uint64_t covered = 0;
    unsigned wrong = 0, wrong_type = 0;

    if (!map) {
        report(false, "UEFI memory map readable");
        return;
    }
    for (UINTN i = 0; i < n; i++) {
        EFI_MEMORY_DESCRIPTOR *d = (EFI_MEMORY_DESCRIPTOR *)((char *)map + i * dsize);
        uint64_t s = d->PhysicalStart, e = s + d->NumberOfPages * PAGE_SIZE;
        uint64_t lo = s > m->base ? s : m->base;
        uint64_t hi = e < m->base + m->size ? e : m->base + m->size;
        if (lo >= hi)
            continue;
        covered += hi - lo;
        if (d->Type != EfiReservedMemoryType && !wrong++)
            wrong_type = d->Type;
    }
    FreePool(map);
    report(covered == m->size && !wrong,
           "UEFI map: VMM range reserved (covered 0x%lx/0x%lx, %u other, type %u)", covered,
           m->size, wrong, wrong_type);
}

/* Does the 4 KiB page at pa show PTV_CANARY_PATTERN at any 16-byte slot? */
static bool page_shows_pattern(uint64_t pa, int *vector)
{
    uint64_t want[2];
    bool found = false;

    __builtin_memcpy(want, PTV_CANARY_PATTERN, sizeof(want));
    *vector = TRAP_NONE;
    for (uint64_t off = 0; off < PAGE_SIZE; off += sizeof(want)) {
        uint64_t got[2];
        int v0 = load64_trap(pa + off, &got[0]);
        int v1 = load64_trap(pa + off + 8, &got[1]);
        if (v0 != TRAP_NONE || v1 != TRAP_NONE)
            *vector = v0 != TRAP_NONE ? v0 : v1;
        else if (got[0] == want[0] && got[1] == want[1])
            found = true;
    }
    return found;
}

void check_vmm_memory(void)
{
    struct vmcall_regs r;
    struct vmm_range m;

    _Static_assert(sizeof(PTV_CANARY_PATTERN) == 16, "canary pattern is 16 bytes");
    if (!ptv_call(PTV_VMCALL_VMM_RANGE, &r, "VMM_RANGE"))
        return;
    m = (struct vmm_range){r.rbx, r.rcx, r.rdx};
    if (!report(range_valid(&m), "VMM_RANGE base 0x%lx size 0x%lx canary 0x%lx well-formed", m.base,
                m.size, m.canary))
        return; /* never write to an address the VMM did not vouch for */
    check_memory_map(&m);

    if (!ptv_call(PTV_VMCALL_EPT_BLOCKED, &r, "EPT_BLOCKED"))
        return;
    uint64_t blocked_before = r.rbx;

    int vr;
    bool shows = page_shows_pattern(m.canary, &vr);
    report(!shows, "canary page reads without the VMM pattern (vec %d)", vr);

    const uint64_t pages[] = {m.base, m.base + ((m.size / 2) & ~PAGE_MASK),
                              m.base + m.size - PAGE_SIZE, m.canary};
    int vw[2 * sizeof(pages) / sizeof(pages[0])];
    for (unsigned i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        vw[2 * i] = store64_trap(pages[i], GUEST_MARK);
        vw[2 * i + 1] = store64_trap(pages[i] + PAGE_SIZE - 8, GUEST_MARK);
    }
    /* How the VMM answered each write (none, or an injected fault): informational. */
    report_info("writes to VMM pages raised vectors %d %d %d %d %d %d %d %d", vw[0], vw[1], vw[2],
                vw[3], vw[4], vw[5], vw[6], vw[7]);

    if (ptv_call(PTV_VMCALL_CHECK_CANARY, &r, "CHECK_CANARY"))
        report(r.rbx == 1, "VMM canary intact after guest writes (rbx %lu)", r.rbx);
    if (ptv_call(PTV_VMCALL_EPT_BLOCKED, &r, "EPT_BLOCKED"))
        report(r.rbx > blocked_before, "EPT violations blocked: %lu before, %lu after",
               blocked_before, r.rbx);
    if (ptv_call(PTV_VMCALL_VERSION, &r, "VERSION after writes"))
        report(r.rbx == PTV_VMCALL_ABI_VERSION, "VMM still answers VERSION after the writes");

    /*
     * A jump into VMM memory: the fetch must come back to the guest as a fault
     * (nothing the guest may execute lives there).  Opt-in with the load-option
     * word "fetch-vmm": a VMM that resumes the fetch without making it
     * executable loops on EPT violations forever and the run ends in its timeout.
     */
    if (!test_option("fetch-vmm")) {
        report_skip("fetch from VMM memory (load option fetch-vmm not given)");
        return;
    }
    int vf = fetch_trap(m.base + PAGE_SIZE);
    report(vf != TRAP_NONE, "jump into VMM memory faults in the guest (vector %d)", vf);
}
