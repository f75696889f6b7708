/* SPDX-License-Identifier: MIT */
/*
 * PT hardware model (test code only): the output side of Intel PT as
 * docs/pt-facts.md describes it.  Given RTIT MSR state and "physical memory"
 * (a byte array), it writes a packet stream into the output regions exactly
 * as ToPA / single-range output does:
 *  - ToPA (D.1-D.3): region fill -> next entry; END -> next table, entry 0;
 *    STOP -> STATUS.Stopped, TriggerEn cleared, OutputOffset left = size;
 *    INT -> PMI (counter + callback) and IA32_PERF_GLOBAL_STATUS bit 55;
 *    circular buffers through END back-links;
 *  - single range (B.5): next address = (base & ~mask) | (offset & mask),
 *    circular, no PMI;
 *  - operational errors (D.4): STATUS.Error = 1, TriggerEn = 0, output stops;
 *  - OUTPUT_MASK_PTRS: table offset (entry index) and output offset (B.5);
 *  - STATUS.PacketByteCnt: bytes since the last PSB (B.4).
 * Model choices where the sources are silent (documented, used both for the
 * reference run and for the run under the engine, so they cancel out):
 *  - after a region fills, the entry index advances; an END entry is followed
 *    lazily, when the next byte needs a region (so MASK_PTRS may rest on an
 *    END entry), or, with eager_end, at once (MASK_PTRS never rests on END).
 *    The sources do not say which real CPUs do; the engine must be exact
 *    under both, and the end-to-end tests run both;
 *  - entries are read when needed (no caching);
 *  - the single-entry ToPA "early" PMI (D.2) is raised at the fill, like
 *    multi-entry.
 */
#ifndef PTV_TESTS_PTM_H
#define PTV_TESTS_PTM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ptm {
    uint8_t *mem; /* physical memory seen by the model */
    uint64_t mem_size;
    unsigned maxphyaddr;
    bool topa_multi; /* CPUID.14.0:ECX[1] of the modelled CPU */
    bool eager_end;  /* follow END right after a fill (see above) */

    uint64_t ctl, status, output_base, output_mask_ptrs; /* the RTIT MSRs */
    uint64_t global_status;                              /* IA32_PERF_GLOBAL_STATUS */

    uint32_t pmis;       /* ToPA PMIs raised */
    uint64_t pmi_at[64]; /* byte count (since enable) at each PMI */
    void (*pmi_cb)(struct ptm *m, void *arg);
    void *pmi_arg;
    uint64_t bytes;    /* bytes written since enable */
    uint64_t wild;     /* bytes the model was told to write outside mem[] */
    const char *error; /* reason of the last operational error */
    bool cached;       /* current region resolved */
    /*
     * "Intel PT uses guest physical addresses" (twin.c): every output and ToPA address goes
     * through xlate; a failed translation is a PT-caused EPT violation (SDM Vol. 3C 28.2.1,
     * pt-facts D.5): recorded in eptv/eptv_gpa, the access is not made.  NULL: physical.
     */
    bool (*xlate)(void *ctx, uint64_t addr, uint64_t *pa);
    void *xlate_ctx;
    bool eptv;
    uint64_t eptv_gpa;
    uint64_t rbase, rsize;
    uint64_t rflags;
};

void ptm_init(struct ptm *m, uint8_t *mem, uint64_t mem_size, unsigned maxphyaddr, bool multi);
/* WRMSR-like setup while TraceEn = 0; then TraceEn 0->1 (sets TriggerEn, checks). */
void ptm_enable(struct ptm *m, uint64_t ctl, uint64_t status, uint64_t base, uint64_t mask);
void ptm_disable(struct ptm *m);
/* Packet generation: one packet; psb = it is a PSB (resets PacketByteCnt). */
void ptm_packet(struct ptm *m, const uint8_t *bytes, size_t n, bool psb);
bool ptm_active(const struct ptm *m);
/* Resolve the current output region now (hardware writes PSB+ right at TraceEn 0->1, so it
 * reads the current ToPA entry at once; errors there appear at enable, not later). */
void ptm_touch(struct ptm *m);

#endif
