/* SPDX-License-Identifier: MIT */
/*
 * A fake DMA-remapping unit for host tests (test_vtd, test_iommu_boot): a register file that
 * behaves as VT-d 11.4 says -- GCMD commands confirmed in GSTS after some reads, CCMD/IOTLB
 * invalidations that complete later (and are ignored while queued invalidation is on), write-1-
 * to-clear fault status and records -- and checks the rules a driver must keep: one command per
 * GCMD write with the other enables kept, translation switched on only once the expected root
 * table is in effect and both caches were invalidated after it was set, translation the
 * firmware left on never dropped, the IOTLB invalidated after the context cache.
 */
#ifndef PTV_TEST_VTD_FAKE_H
#define PTV_TEST_VTD_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "iommu/vtd.h"

#define REG_SIZE 4096
#define FRO      0x220
#define NFR      4
#define IRO      0x100

struct fake {
    uint32_t ver, gsts, fsts, fectl, pmen;
    uint64_t cap, ecap, rtaddr, root_in_effect, ccmd, iotlb;
    uint64_t frcd[NFR][2];
    unsigned latency; /* reads of a status before a command completes */
    unsigned busy_gsts, busy_cc, busy_iotlb, busy_pmen;
    uint32_t gsts_next; /* GSTS once busy_gsts reads passed */
    bool never_rtps, iaig_zero;
    bool cc_since_root, iotlb_since_root; /* global invalidations after the last SRTP */
    bool te_dropped;
    uint64_t expect_root; /* TE only with this root in effect (0: any) */
    bool bad_access;      /* a register the fake does not have was touched */
    unsigned violations, gcmd_writes;
    char first_violation[128];
};

static inline void fake_violation(struct fake *f, const char *what)
{
    if (!f->violations++)
        snprintf(f->first_violation, sizeof(f->first_violation), "%s", what);
}

static inline void fake_settle(struct fake *f)
{
    if (f->busy_gsts && !--f->busy_gsts)
        f->gsts = f->gsts_next;
}

static inline uint32_t fake_rd32(void *ctx, unsigned off)
{
    struct fake *f = ctx;
    switch (off) {
    case VTD_REG_VER:
        return f->ver;
    case VTD_REG_GSTS:
        fake_settle(f);
        return f->gsts;
    case VTD_REG_FSTS:
        return f->fsts;
    case VTD_REG_FECTL:
        return f->fectl;
    case VTD_REG_PMEN:
        if (f->busy_pmen && !--f->busy_pmen)
            f->pmen = f->pmen & VTD_PMEN_EPM ? f->pmen | VTD_PMEN_PRS : 0;
        return f->pmen;
    }
    f->bad_access = true;
    return 0;
}

static inline uint64_t fake_rd64(void *ctx, unsigned off)
{
    struct fake *f = ctx;
    if (off == VTD_REG_CAP)
        return f->cap;
    if (off == VTD_REG_ECAP)
        return f->ecap;
    if (off == VTD_REG_CCMD) {
        if (f->busy_cc && !--f->busy_cc)
            f->ccmd = 1ull << 59; /* done: CAIG global */
        return f->ccmd;
    }
    if (off == IRO + VTD_IOTLB_OFF) {
        if (f->busy_iotlb && !--f->busy_iotlb)
            f->iotlb = f->iaig_zero ? 0 : 1ull << 57;
        return f->iotlb;
    }
    if (off >= FRO && off < FRO + 16 * NFR && off % 8 == 0)
        return f->frcd[(off - FRO) / 16][(off % 16) / 8];
    f->bad_access = true;
    return 0;
}

static inline void fake_gcmd(struct fake *f, uint32_t v)
{
    uint32_t now = f->gsts & VTD_GSTS_KEEP, diff = (v ^ now) & ~0x00ffffffu;
    f->gcmd_writes++;
    if (f->busy_gsts)
        fake_violation(f, "GCMD written while a command is still in progress");
    if (__builtin_popcount(diff) != 1)
        fake_violation(f, "GCMD write is not exactly one command");
    f->gsts_next = f->gsts & ~(VTD_GSTS_RTPS | VTD_GSTS_WBFS);
    if ((f->gsts & VTD_GSTS_TES) && !(v & VTD_GCMD_TE)) {
        f->te_dropped = true;
        f->gsts_next &= ~VTD_GSTS_TES;
    }
    if ((v & VTD_GCMD_TE) && !(f->gsts & VTD_GSTS_TES)) {
        if ((f->expect_root && f->root_in_effect != f->expect_root) || !f->cc_since_root ||
            !f->iotlb_since_root)
            fake_violation(f, "TE before our root table is in effect and both caches invalidated");
        f->gsts_next |= VTD_GSTS_TES;
    }
    if (v & VTD_GCMD_SRTP) {
        if (!f->never_rtps)
            f->gsts_next |= VTD_GSTS_RTPS;
        f->root_in_effect = f->rtaddr;
        f->cc_since_root = f->iotlb_since_root = false;
    }
    if (v & VTD_GCMD_WBF)
        f->gsts_next &= ~VTD_GSTS_WBFS;
    if (!(v & VTD_GCMD_QIE))
        f->gsts_next &= ~VTD_GSTS_QIES;
    if (!(v & VTD_GCMD_IRE) && (f->gsts & VTD_GSTS_IRES))
        fake_violation(f, "interrupt remapping switched off");
    f->busy_gsts = f->latency + 1;
    if (v & VTD_GCMD_WBF) /* WBFS reads set while the flush runs */
        f->gsts |= VTD_GSTS_WBFS;
}

static inline void fake_wr32(void *ctx, unsigned off, uint32_t v)
{
    struct fake *f = ctx;
    switch (off) {
    case VTD_REG_GCMD:
        fake_gcmd(f, v);
        return;
    case VTD_REG_FSTS:
        f->fsts &= ~(v & VTD_FSTS_W1C);
        return;
    case VTD_REG_FECTL:
        f->fectl = v & VTD_FECTL_IM;
        return;
    case VTD_REG_PMEN:
        f->pmen = (v & VTD_PMEN_EPM) | (f->pmen & VTD_PMEN_PRS);
        f->busy_pmen = f->latency + 1;
        return;
    }
    if (off >= FRO && off < FRO + 16 * NFR && off % 16 == 12) {
        if (v & 0x80000000u)
            f->frcd[(off - FRO) / 16][1] &= ~VTD_FRCD_HI_F;
        return;
    }
    f->bad_access = true;
}

static inline void fake_wr64(void *ctx, unsigned off, uint64_t v)
{
    struct fake *f = ctx;
    bool qi = f->gsts & VTD_GSTS_QIES; /* register invalidations are ignored then */
    if (off == VTD_REG_RTADDR) {
        f->rtaddr = v;
        return;
    }
    if (off == VTD_REG_CCMD) {
        if (qi)
            return;
        f->ccmd = v;
        f->busy_cc = f->latency + 1;
        f->cc_since_root = (v & VTD_CCMD_GLOBAL) && (v & VTD_CCMD_ICC);
        return;
    }
    if (off == IRO + VTD_IOTLB_OFF) {
        if (qi)
            return;
        if (!f->cc_since_root)
            fake_violation(f, "IOTLB invalidated before the context cache");
        f->iotlb = v;
        f->busy_iotlb = f->latency + 1;
        f->iotlb_since_root = (v & VTD_IOTLB_GLOBAL) && (v & VTD_IOTLB_IVT);
        return;
    }
    f->bad_access = true;
}

/* a VT-d 1.0 unit like QEMU's: 3- and 4-level walks, 2M/1G pages, 48-bit MGAW, coherent */
static inline void fake_reset(struct fake *f, unsigned latency)
{
    memset(f, 0, sizeof(*f));
    f->ver = 0x10;
    f->cap = (3ull << 34) | ((uint64_t)(FRO / 16) << 24) | (47ull << 16) | (6ull << 8) |
             ((uint64_t)(NFR - 1) << 40) | 2;
    f->ecap = ((uint64_t)(IRO / 16) << 8) | VTD_ECAP_C | VTD_ECAP_QI;
    f->latency = latency;
}

static inline struct vtd_regs fake_regs(struct fake *f)
{
    return (struct vtd_regs){fake_rd32, fake_rd64, fake_wr32, fake_wr64, f};
}

#endif
