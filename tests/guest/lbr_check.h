/* SPDX-License-Identifier: MIT */
/*
 * The verdicts of the on-box LBR self-test (docs/lbr.md "On-box self-test"), pure:
 * no EFI, no MSR access.  pt-selftest.efi (tests/guest/lbr_selftest.c) reads CPUID and
 * IA32_PERF_CAPABILITIES, runs a known branch sequence (tests/guest/lbr_seq.S) with LBR on,
 * reads the stack back and asks lbrc_check() whether the stack holds exactly those branches;
 * tests/unit/guest/test_lbr_check.c asks the same of the LBR model (tests/model/lbr_model.c) with
 * a recorded stack and with planted faults.
 *
 * The layout table is written here from the SDM (Vol. 3B 17.6-17.12 per microarchitecture,
 * Vol. 4 MSR tables), apart from vmm/lbr/lbr_policy.c's, so a disagreement shows up as a FAIL.
 */
#ifndef PTV_GUEST_LBR_CHECK_H
#define PTV_GUEST_LBR_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LBRC_MAX     64 /* entries read at most (arch LBR depth 64) */
#define LBRC_SEQ_MAX 8  /* branches of a known sequence */
#define LBRC_EXITS   4  /* exiting instructions inside it */

/* MSRs the self-test touches (SDM Vol. 4 table 2-2 and the per-model tables) */
#define LBRC_MSR_DEBUGCTL    0x1d9
#define LBRC_MSR_LBR_SELECT  0x1c8
#define LBRC_MSR_LBR_TOS     0x1c9
#define LBRC_MSR_PERF_CAPS   0x345
#define LBRC_MSR_LBR_CTL     0x14ce
#define LBRC_MSR_LBR_DEPTH   0x14cf
#define LBRC_MSR_ARCH_FROM_0 0x1500
#define LBRC_MSR_ARCH_TO_0   0x1600
#define LBRC_MSR_ARCH_INFO_0 0x1200
#define LBRC_DEBUGCTL_LBR    (1ull << 0)

/* A model-specific stack: entries, the LBR_FMT it is read with, its first FROM/TO/INFO MSR. */
struct lbrc_layout {
    const char *name;
    uint8_t nr, fmt;
    uint32_t from, to, info; /* info 0 = none */
};

/* What the guest sees, as it read it. */
struct lbrc_view {
    uint32_t max_leaf;   /* CPUID.0:EAX */
    uint32_t cpuid1_eax; /* family / model */
    uint32_t cpuid1_ecx; /* PDCM = bit 15 */
    uint32_t cpuid7_edx; /* arch LBR = bit 19 (0 when max_leaf < 7) */
    uint32_t leaf1c[3];  /* CPUID.1CH EAX, EBX, ECX (0 when max_leaf < 0x1c) */
    bool perf_caps_ok;   /* RDMSR IA32_PERF_CAPABILITIES did not fault */
    uint64_t perf_caps;
};

enum lbrc_plan { LBRC_RUN, LBRC_SKIP, LBRC_FAIL };

/* Model-specific LBR: LBRC_RUN with *lay, or SKIP/FAIL with the reason in why. */
enum lbrc_plan lbrc_legacy_plan(const struct lbrc_view *v, const struct lbrc_layout **lay,
                                char *why, size_t cap);
/* Architectural LBR: LBRC_RUN with the IA32_LBR_CTL value that records every branch at CPL 0,
 * or SKIP with the reason. */
enum lbrc_plan lbrc_arch_plan(const struct lbrc_view *v, uint64_t *ctl, char *why, size_t cap);
/* the layout table itself (family 6 only), NULL for a model it does not list */
const struct lbrc_layout *lbrc_layout_of(uint32_t cpuid1_eax);

/* The known sequence: branch i went from[i] -> to[i], oldest first; the instructions at
 * exit[] made VM exits (CPUID, VMCALL, RDMSR) and are no branches. */
struct lbrc_seq {
    unsigned n, nexits;
    uint64_t from[LBRC_SEQ_MAX], to[LBRC_SEQ_MAX];
    uint64_t exit[LBRC_EXITS];
    const char *exit_name[LBRC_EXITS];
};

/* The stack as read after the sequence.  Legacy: entries in MSR order, tos = LBR_TOS after,
 * tos_before = LBR_TOS when the guest zeroed the stack; arch: entry 0 = newest. */
struct lbrc_stack {
    bool arch;
    unsigned nr;
    uint8_t fmt; /* legacy LBR_FMT (how FROM carries flags) */
    uint64_t tos_before, tos;
    uint64_t from[LBRC_MAX], to[LBRC_MAX];
};

/*
 * The stack holds exactly the sequence: its n newest records are the n branches in order, every
 * older entry is still zero (nothing else recorded, e.g. a VM exit or entry), no FROM/TO lies in
 * the VMM's memory [vmm_base, vmm_base + vmm_size), no record starts at an exiting instruction,
 * and (legacy) LBR_TOS moved by n.  false with a one-line reason in why.
 */
bool lbrc_check(const struct lbrc_stack *s, const struct lbrc_seq *q, uint64_t vmm_base,
                uint64_t vmm_size, char *why, size_t cap);

/* the address a record's FROM names (legacy formats 3/4/5 keep flags in its top bits) */
uint64_t lbrc_from_addr(const struct lbrc_stack *s, uint64_t raw);

#endif
