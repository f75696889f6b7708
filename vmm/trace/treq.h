/* SPDX-License-Identifier: MIT */
/*
 * The trace VMCALLs' rules (include/ptv/vmcall.h), pure: compiled into vmm.elf
 * (vmm/trace/shim/trace_vmx.c, exit_vmcall.c) and into test_swpt, test_treq and fuzz_swpt, which
 * give them every flag combination.
 *  - A TRACE_START request as the software tracer's configuration: the call's filter flags and
 *    registers over the configured defaults (ptvisor.cfg's pt_filter, pt_cr3, pt_range,
 *    psb_period).
 *  - The CPL 3 rule: what a guest process may ask (its own process, user mode only), and who
 *    may act on a window (its owner).
 *  - TRACE_READ's copy into guest RAM: the destination resolved once.
 */
#ifndef PTV_TREQ_H
#define PTV_TREQ_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/swpt.h"

struct ptv_config;

struct trace_req {
    uint32_t flags;      /* PTV_TRACE_F_* (RBX) */
    uint64_t cr3;        /* RCX: the CR3 to match (PTV_TRACE_F_CR3) */
    uint64_t caller_cr3; /* the CR3 the VMCALL ran under (PTV_TRACE_F_CR3_SELF) */
    uint64_t cr3_ignore; /* R9 (PTV_TRACE_F_CR3_MASK) */
    uint64_t lo, hi;     /* RDX, RSI (PTV_TRACE_F_RANGE) */
    uint64_t start_ip;   /* RDI (PTV_TRACE_F_START_IP) */
    bool user;           /* the call came from CPL > 0: the CPL 3 rule applies */
};

/* 0 and *out, or -1 with a one-line reason in *why (the VMCALL answers EINVAL) */
int trace_req_swpt(const struct trace_req *rq, const struct ptv_config *cfg, struct swpt_cfg *out,
                   const char **why);

/* the CR3 a request matches: RCX's with PTV_TRACE_F_CR3, else the caller's */
uint64_t trace_req_cr3(const struct trace_req *rq);

/* the request as system-mode PT can take it: 0, or -1 with a reason (RTIT_CR3_MATCH compares
 * CR3[63:5], so no ignored bits above 4; PT has no start trigger and counts no instructions) */
int trace_req_hw_check(const struct trace_req *rq, uint64_t budget, const char **why);

/*
 * The CPL 3 rule for TRACE_START (README, Security).  From guest user space a window is the
 * caller's own process in user mode and nothing else: PTV_TRACE_F_USER and
 * PTV_TRACE_F_CR3_SELF; PTV_TRACE_F_CR3_MASK only with PCID bits (bit 12 pairs two page tables
 * only under PTI, which the VMM cannot see: elsewhere it names another process's); an IP
 * range and a start IP only narrow it; no PTV_TRACE_F_KERNEL, no PTV_TRACE_F_CR3 (any CR3),
 * no flags (the configured filter), no flag this rule does not know, and no budget (it counts
 * every instruction the vCPU steps, the kernel's and other processes' too, so where the window
 * closed would tell how much they ran).  0 (and always for a CPL 0 request), or -1 with the
 * reason: the VMCALL answers EACCES.
 */
int trace_req_user_check(const struct trace_req *rq, uint64_t budget, const char **why);

/* who opened a vCPU's window: the kernel (a CPL 0 call, trace_boot), or one process (user) */
struct trace_owner {
    bool user;
    uint64_t cr3; /* the CR3 its TRACE_START ran under */
};

/* the owner of a window a request opened */
struct trace_owner trace_owner_of(const struct trace_req *rq);

/* may a caller at cpl, running under cr3, stop, dump or read the status of the window o owns?
 * CPL 0 always; CPL 3 only the process that opened it (its CR3, the PCID aside: the kernel may
 * give a process another one) -- not the kernel's window, not another process's */
bool trace_owner_allows(const struct trace_owner *o, unsigned cpl, uint64_t cr3);

/*
 * TRACE_READ's copy: stream bytes [off, off + len) into guest-physical [gpa, gpa + len), which
 * must be guest RAM the VMM may write.  Every 4 KiB page of it is resolved once, before a byte
 * is written, and the pages must make one contiguous host range (guest RAM is identity-mapped
 * in EPT): the copy writes that range, what was resolved, and never asks again -- another vCPU
 * may move its xAPIC window onto a page in between, and a second lookup would answer 0.
 */
struct trace_read_io {
    void *ctx;
    /* the host address of the guest-physical 4 KiB page at page_gpa, 0: not writable RAM */
    uint64_t (*resolve)(void *ctx, uint64_t page_gpa);
    /* stream bytes [off, off + n) into host memory at dst: n, or fewer where they are gone */
    uint64_t (*bytes)(void *ctx, uint64_t off, void *dst, uint64_t n);
};
/* 0 with *copied = len, or -1 (EINVAL: the range does not fit below 2^64, a page is not guest
 * RAM, the pages are not one host range, or the bytes are gone) with nothing written but what
 * *copied says.  The pages are walked with lib/range.h */
int trace_read_copy(const struct trace_read_io *io, uint64_t gpa, uint64_t len, uint64_t off,
                    uint64_t *copied);

#endif
