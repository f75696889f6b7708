/* SPDX-License-Identifier: MIT */
/*
 * The on-box self-test of the VMM's trace of its guest, part of
 * pt-selftest.efi: a trace window (TRACE_START, an IP range around tests/guest/pt_seq.S, kernel
 * only) over the known sequence, TRACE_STOP, the ring read back with TRACE_READ, and
 * pt_seq_check() must find exactly the sequence's branches.  The source is whatever the VMM has:
 * hardware system-mode PT (pt_mode = system: the selftest-system image) or the software tracer
 * (no PT-in-VMX: Bochs here, nested KVM), and the PASS line names it.  No source: SKIP.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "libtest.h"
#include "x86.h"
#include "pt_seq_check.h"
#include "vmm_trace_selftest.h"

uint64_t ptv_pt_seq(void);
extern const char ptv_pt_seq_t4[], ptv_pt_seq_end[];

#define RING_COPY (64u << 10)

static int64_t vc(struct vmcall6 *r)
{
    vmcall6(r);
    return (int64_t)r->rax;
}

void vmm_trace_selftest(EFI_SYSTEM_TABLE *st)
{
    uint64_t start = (uint64_t)(uintptr_t)ptv_pt_seq, end = (uint64_t)(uintptr_t)ptv_pt_seq_end;
    struct vmcall6 r = {.rax = PTV_VMCALL_TRACE_START,
                        .rbx = PTV_TRACE_F_KERNEL | PTV_TRACE_F_RANGE,
                        .rdx = start,
                        .rsi = end - 1};
    int64_t rc = vc(&r);
    if (rc == PTV_VMCALL_ENODEV || rc == PTV_VMCALL_ENOSYS) {
        report_skip("vmm trace: the VMM has no trace source here (no PT for system mode, "
                    "sw_trace off or no way to step): rc %ld",
                    (long)rc);
        return;
    }
    if (rc != PTV_VMCALL_OK) {
        report(false, "vmm trace: TRACE_START over the known sequence: rc %ld", (long)rc);
        return;
    }
    struct vmcall6 how = {.rax = PTV_VMCALL_TRACE_STATUS};
    (void)vc(&how);
    const char *src = r.rbx == PTV_TRACE_SRC_HARDWARE   ? "hardware system-mode PT"
                      : r.rbx != PTV_TRACE_SRC_SOFTWARE ? "unknown source"
                      : (how.rbx & PTV_TRACE_ST_TF)     ? "software tracer/TF" /* trap flag */
                                                        : "software tracer/MTF";
    report(true, "vmm trace (%s): TRACE_START over the known sequence", src);
    (void)ptv_pt_seq();
    struct vmcall6 s = {.rax = PTV_VMCALL_TRACE_STOP};
    rc = vc(&s);
    uint64_t written = s.rbx;
    if (!report(rc == PTV_VMCALL_OK && written > 0,
                "vmm trace (%s): TRACE_STOP, %lu bytes, %lu gaps", src, (unsigned long)written,
                (unsigned long)s.rsi))
        return;
    EFI_PHYSICAL_ADDRESS pa = 0;
    if (uefi_call_wrapper(st->BootServices->AllocatePages, 4, AllocateAnyPages, EfiLoaderData,
                          (UINTN)(RING_COPY / 4096), &pa) != EFI_SUCCESS) {
        report(false, "vmm trace: allocate %u KiB for the ring copy", RING_COPY >> 10);
        return;
    }
    uint8_t *copy = (uint8_t *)(uintptr_t)pa;
    /* the oldest bytes still in the ring: a window this short never wraps a ring */
    struct vmcall6 q = {.rax = PTV_VMCALL_TRACE_READ, .rbx = pa, .rcx = 0, .rdx = 0};
    (void)vc(&q);
    uint64_t from = q.rcx, got = 0;
    while (got < RING_COPY && from + got < written) {
        struct vmcall6 t = {
            .rax = PTV_VMCALL_TRACE_READ, .rbx = pa + got, .rcx = 4096, .rdx = from + got};
        if (vc(&t) != PTV_VMCALL_OK || t.rbx == 0)
            break;
        got += t.rbx;
    }
    report(from == 0 && from + got == written, "vmm trace (%s): TRACE_READ gave all %lu bytes", src,
           (unsigned long)written);
    struct pt_seq_expect e = {.start = start,
                              .lo = start,
                              .hi = end - 1,
                              .tnt = "TTTTNTN",
                              .tips = {(uint64_t)(uintptr_t)ptv_pt_seq_t4},
                              .n_tips = 1};
    struct pt_seq_seen seen;
    report(pt_seq_check(copy, got, &e, &seen), "vmm trace (%s): %s", src, seen.why);
    (void)uefi_call_wrapper(st->BootServices->FreePages, 2, pa, (UINTN)(RING_COPY / 4096));
}
