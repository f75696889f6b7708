/* SPDX-License-Identifier: MIT */
/*
 * System mode (pt_mode = system, ARCHITECTURE §3/§5): the VMM traces its guest with Intel PT.
 * Pure logic, compiled into vmm.elf and unchanged into the host tests (tests/model/
 * test_pt_sys.c on the CPU twin, tests/fuzz/fuzz_pt_sys.c):
 *
 *  - the VMM's ring: one ToPA ring per CPU, pt_buffer bytes of 4 KiB output regions taken from
 *    VMM pages (struct pt_page_alloc), 511 regions and one END per table page, the last END back
 *    to the first table.  trace_wrap = on: circular (no INT, no STOP: the newest trace
 *    survives); off: STOP on the last region (the CPU sets STATUS.Stopped when it is full);
 *  - the VMM's trace set-up: the config's filters (pt_filter -> OS/User, pt_cr3 -> CR3Filter +
 *    CR3_MATCH, pt_range -> ADDRn_CFG = 1 + ADDRn_A/B) and BranchEn, TSCEn, MTCEn/MTCFreq,
 *    CYCEn/CycThresh, PSBFreq as CPUID 0x14 allows, every value checked by the engine's SDM
 *    rules for the RTIT MSRs (pt_msr_write against the host's CPUID 0x14) before it can reach
 *    an MSR;
 *  - positions: (OUTPUT_BASE, OUTPUT_MASK_PTRS) <-> byte offset in the ring, wraps counted by
 *    comparing positions at exits, and a copy-out of the ring in stream order.
 * The controller (pt_ctrl.c) switches this set-up in at every VM entry and out at every VM exit
 * exactly as it switches a guest's own trace (pt_switch.c), so only guest execution is traced.
 */
#ifndef PTV_PT_SYS_H
#define PTV_PT_SYS_H

#include <stdbool.h>
#include <stdint.h>

#include "ptv/config.h"
#include "pt/pt_caps.h"
#include "pt/pt_mem.h"
#include "pt/pt_msr.h"

#define PT_SYS_REGION         4096ull /* every output region is one VMM page (Size = 0) */
#define PT_SYS_TABLE_REGIONS  511u    /* a table page: 511 regions + END */
#define PT_SYS_MAX_TABLES     ((uint32_t)((PTV_CFG_TRACE_BUF_MAX / PT_SYS_REGION + 510) / 511))
#define PT_SYS_DIR_PER_PAGE   512u
#define PT_SYS_DIR_PAGES      ((PT_SYS_MAX_TABLES + PT_SYS_DIR_PER_PAGE - 1) / PT_SYS_DIR_PER_PAGE)
#define PT_SYS_MTC_FREQ_WANT  3u /* MTC every 2^(3 + ...) crystal clocks: a few per microsecond */
#define PT_SYS_CYC_THRESH_MAX 6u /* CYC at most every 2^5 cycles: timing without a flood */

/* What the VMM traces: from struct ptv_config, or from the VMCALL layer at run time. */
struct pt_sys_cfg {
    uint64_t ring_size; /* pt_buffer: power of two, PTV_CFG_TRACE_BUF_MIN..MAX */
    bool wrap;          /* trace_wrap */
    uint32_t filter;    /* pt_filter: PTV_TRACE_OS | PTV_TRACE_USER, not 0 */
    uint64_t cr3;       /* pt_cr3: 0 = no CR3 filter */
    uint32_t nranges;   /* pt_range */
    struct {
        uint64_t lo, hi; /* inclusive */
    } range[PT_MAX_ADDR_RANGES];
    uint32_t psb_period; /* psb_period bytes (power of two); 0 = the CPU's default PSBFreq */
};

void pt_sys_cfg_from_config(const struct ptv_config *in, struct pt_sys_cfg *out);

/* The host's own CPUID 0x14 as a pt_gcaps: what the VMM's trace is checked against. */
void pt_sys_view(const struct pt_caps *host, struct pt_gcaps *view);

/*
 * Why the CPU cannot run this configuration (printable), or NULL.  Checks what does not depend
 * on the ring's addresses: ring size, ToPA with multiple entries, filters vs CPUID 0x14 (more
 * pt_range ranges than CPUID.14.1:EAX[2:0], pt_cr3 without CR3 filtering, a range with lo > hi
 * or a non-canonical bound, CR3 reserved bits, an empty pt_filter).
 */
const char *pt_sys_check(const struct pt_gcaps *view, const struct pt_sys_cfg *cfg);

/*
 * The RTIT MSR values of the VMM's trace with output at (base, mask), written one by one through
 * the engine's SDM rules (pt_msr_write against view) into *out, RTIT_CTL (with TraceEn) last.
 * Returns NULL and a complete file, or the reason and *out unchanged.
 */
const char *pt_sys_program(const struct pt_gcaps *view, const struct pt_sys_cfg *cfg, uint64_t base,
                           uint64_t mask, struct pt_msr_file *out);

/* The ring: ToPA tables of the VMM's pages. */
struct pt_sys_ring {
    uint64_t size; /* bytes */
    uint32_t nregions, ntables;
    bool wrap;      /* no STOP on the last region */
    uint64_t delta; /* va - hpa, the same for every page of the ring (a linear map) */
    uint64_t *dir[PT_SYS_DIR_PAGES]; /* table hpas, in ring order */
    uint64_t dir_hpa[PT_SYS_DIR_PAGES];
    uint32_t hint; /* table of the last position looked up */
};

/* Build (all pages zeroed by the allocator) or give every page back.  -1 + *why: nothing kept. */
int pt_sys_ring_build(struct pt_sys_ring *r, uint64_t size, bool wrap,
                      const struct pt_page_alloc *a, const char **why)
    __attribute__((warn_unused_result));
void pt_sys_ring_free(struct pt_sys_ring *r, const struct pt_page_alloc *a);
/* Circular or stop-on-full (STOP on the last region); only while the CPU does not trace. */
void pt_sys_ring_set_wrap(struct pt_sys_ring *r, bool wrap);
/* OUTPUT_BASE / OUTPUT_MASK_PTRS of the ring's start. */
uint64_t pt_sys_ring_base(const struct pt_sys_ring *r);
#define PT_SYS_RING_MASK0 RTIT_MASK_LOWER
/*
 * The ring offset (0 .. size) the CPU's next byte goes to, from OUTPUT_BASE / MASK_PTRS as the
 * CPU left them (an END entry counts as the start of the next table; a full STOP region as
 * size).  false: the registers do not point into this ring.
 */
bool pt_sys_ring_pos(struct pt_sys_ring *r, uint64_t base, uint64_t mask, uint64_t *pos);
/* Copy len bytes of the ring from ring offset `from` on (modulo size) into buf. */
void pt_sys_ring_copy(const struct pt_sys_ring *r, uint64_t from, void *buf, uint64_t len);

/* The trace's bookkeeping, updated at the exits that end a traced run. */
struct pt_sys_acct {
    uint64_t pos;       /* ring offset of the next byte (size when a full ring stopped) */
    uint64_t wraps;     /* a lower bound: one per traced run that ended behind its start */
    uint64_t untraced;  /* entries with the VMM's trace on that ran untraced (stopped, error) */
    uint64_t runs;      /* traced runs (VM entry .. exit) */
    uint64_t filter_id; /* filter changes applied */
};

/* What the VMCALL layer reports (pt_ctrl_sys_status). */
struct pt_sys_status {
    bool on;            /* the VMM's trace is loaded at VM entries */
    bool wrap;          /* circular ring (trace_wrap = on) */
    bool wrapped;       /* the ring's oldest bytes were overwritten at least once */
    bool stopped;       /* stop-on-full: the ring is full, the CPU stopped (STATUS.Stopped) */
    bool error;         /* operational error or a refused set-up: tracing off (reason below) */
    uint64_t ring_size; /* bytes */
    uint64_t offset;    /* ring offset of the next byte */
    uint64_t wraps;     /* lower bound (a run longer than the ring counts once) */
    uint64_t bytes;     /* wraps * ring_size + offset: bytes written (a lower bound) */
    uint64_t avail;     /* bytes pt_ctrl_sys_read can return: offset, or ring_size if wrapped */
    uint64_t lost;      /* bytes overwritten (wrapped) */
    uint64_t untraced;  /* guest runs not traced because the ring was stopped / in error */
    uint64_t runs;      /* traced guest runs */
    uint64_t ctl;       /* RTIT_CTL as loaded at entries */
    const char *reason; /* why tracing is off, or NULL */
};

#endif
