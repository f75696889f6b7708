/* SPDX-License-Identifier: MIT */
/*
 * One DMA-remapping unit's registers (Intel VT-d spec rev 4.1, chapter 11): what it can do, the
 * sequence that makes it translate through the tables of vtd_tables.h, and its fault records.
 *
 * Pure code over a register-access interface (struct vtd_regs): the VMM passes MMIO accessors,
 * the host test a fake register file, the QEMU test program QEMU's intel-iommu.  The sequence is
 * a state machine (vtd_step): one register action per step, every wait a bounded poll.
 */
#ifndef PTV_IOMMU_VTD_H
#define PTV_IOMMU_VTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* register offsets (VT-d 11.4) */
#define VTD_REG_VER    0x00
#define VTD_REG_CAP    0x08
#define VTD_REG_ECAP   0x10
#define VTD_REG_GCMD   0x18
#define VTD_REG_GSTS   0x1c
#define VTD_REG_RTADDR 0x20
#define VTD_REG_CCMD   0x28
#define VTD_REG_FSTS   0x34
#define VTD_REG_FECTL  0x38
#define VTD_REG_PMEN   0x64
#define VTD_IOTLB_OFF  8 /* the IOTLB register within the IOTLB block at ECAP.IRO * 16 */

/* CAP (11.4.2) */
#define VTD_CAP_ND(c)    ((unsigned)((c)&7))
#define VTD_CAP_RWBF     (1ull << 4)
#define VTD_CAP_PLMR     (1ull << 5)
#define VTD_CAP_PHMR     (1ull << 6)
#define VTD_CAP_CM       (1ull << 7)
#define VTD_CAP_SAGAW(c) ((unsigned)(((c) >> 8) & 0x1f))
#define VTD_CAP_MGAW(c)  ((unsigned)(((c) >> 16) & 0x3f) + 1)
#define VTD_CAP_FRO(c)   ((unsigned)(((c) >> 24) & 0x3ff) * 16)
#define VTD_CAP_SLLPS(c) ((unsigned)(((c) >> 34) & 0xf))
#define VTD_CAP_NFR(c)   ((unsigned)(((c) >> 40) & 0xff) + 1)
/* ECAP (11.4.3) */
#define VTD_ECAP_C      (1ull << 0)
#define VTD_ECAP_QI     (1ull << 1)
#define VTD_ECAP_IR     (1ull << 3)
#define VTD_ECAP_IRO(e) ((unsigned)(((e) >> 8) & 0x3ff) * 16)
/* GCMD / GSTS (11.4.4, 11.4.5) */
#define VTD_GCMD_TE   (1u << 31)
#define VTD_GCMD_SRTP (1u << 30)
#define VTD_GCMD_WBF  (1u << 27)
#define VTD_GCMD_QIE  (1u << 26)
#define VTD_GCMD_IRE  (1u << 25)
#define VTD_GSTS_TES  (1u << 31)
#define VTD_GSTS_RTPS (1u << 30)
#define VTD_GSTS_WBFS (1u << 27)
#define VTD_GSTS_QIES (1u << 26)
#define VTD_GSTS_IRES (1u << 25)
/* GSTS bits that are not one-shot commands: what a GCMD write keeps (11.4.4) */
#define VTD_GSTS_KEEP 0x96ffffffu
/* CCMD (11.4.6.1), IOTLB (11.4.8.1) */
#define VTD_CCMD_ICC      (1ull << 63)
#define VTD_CCMD_GLOBAL   (1ull << 61)
#define VTD_CCMD_CAIG(v)  ((unsigned)(((v) >> 59) & 3))
#define VTD_IOTLB_IVT     (1ull << 63)
#define VTD_IOTLB_GLOBAL  (1ull << 60)
#define VTD_IOTLB_IAIG(v) ((unsigned)(((v) >> 57) & 3))
#define VTD_IOTLB_DR      (1ull << 49)
#define VTD_IOTLB_DW      (1ull << 48)
/* FSTS (11.4.9.1), FECTL (11.4.9.2), fault recording (11.4.14), PMEN (11.4.13.1) */
#define VTD_FSTS_PFO       (1u << 0)
#define VTD_FSTS_PPF       (1u << 1)
#define VTD_FSTS_W1C       0x7du /* PFO, AFO, APF, IQE, ICE, ITE: write 1 to clear */
#define VTD_FSTS_FRI(f)    ((unsigned)(((f) >> 8) & 0xff))
#define VTD_FECTL_IM       (1u << 31)
#define VTD_FRCD_HI_F      (1ull << 63)
#define VTD_FRCD_HI_T      (1ull << 62) /* 1: read request (0: write) */
#define VTD_FRCD_HI_FR(h)  ((unsigned)(((h) >> 32) & 0xff))
#define VTD_FRCD_HI_SID(h) ((unsigned)((h)&0xffff))
#define VTD_PMEN_EPM       (1u << 31)
#define VTD_PMEN_PRS       (1u << 0)

#define VTD_POLL_MAX 1000000u /* register reads one wait may take before it fails */
#define VTD_ERR_MAX  160

struct vtd_regs {
    uint32_t (*rd32)(void *ctx, unsigned off);
    uint64_t (*rd64)(void *ctx, unsigned off);
    void (*wr32)(void *ctx, unsigned off, uint32_t v);
    void (*wr64)(void *ctx, unsigned off, uint64_t v);
    void *ctx;
};

/* what one unit can do, read once */
struct vtd_caps {
    uint32_t ver;
    uint64_t cap, ecap;
    unsigned sagaw; /* bit l-2 set: an l-level walk */
    unsigned mgaw;  /* bits */
    bool has_2m, has_1g, coherent, rwbf;
    unsigned fro, nfr, iro; /* fault records at fro (nfr of them), IOTLB block at iro */
};

/* read VER/CAP/ECAP; false with a reason if the unit is absent or its offsets lie outside
 * reg_size bytes of registers */
bool vtd_probe(const struct vtd_regs *r, uint64_t reg_size, struct vtd_caps *c, char *err,
               size_t cap) __attribute__((warn_unused_result));

/*
 * The walk every unit can do that reaches top: the fewest levels all units offer (SAGAW) whose
 * width covers top and all MGAWs reach; 2 MiB / 1 GiB pages if all units have them.  False with
 * a reason if none.
 */
bool vtd_choose(const struct vtd_caps *c, unsigned n, uint64_t top, unsigned *levels, bool *has_2m,
                bool *has_1g, char *err, size_t cap) __attribute__((warn_unused_result));

enum vtd_state {
    VTD_S_START,       /* firmware state: queued invalidation, interrupt remapping */
    VTD_S_QI_OFF_WAIT, /* GSTS.QIES clears */
    VTD_S_SET_ROOT,    /* RTADDR, then GCMD.SRTP */
    VTD_S_SRTP_WAIT,   /* GSTS.RTPS sets */
    VTD_S_WBF_WAIT,    /* GSTS.WBFS clears (units with CAP.RWBF) */
    VTD_S_CC,          /* global context-cache invalidation */
    VTD_S_CC_WAIT,     /* CCMD.ICC clears */
    VTD_S_IOTLB_WAIT,  /* IOTLB.IVT clears */
    VTD_S_FAULTS,      /* old fault records cleared, fault interrupt masked */
    VTD_S_TE_WAIT,     /* GSTS.TES sets */
    VTD_S_PMR_WAIT,    /* PMEN.PRS clears (protected memory regions off) */
    VTD_S_DONE,
    VTD_S_FAILED,
};

enum vtd_step_result { VTD_MORE, VTD_DONE, VTD_FAIL };

struct vtd_prog {
    enum vtd_state s;
    uint64_t root_pa;
    const struct vtd_caps *caps;
    unsigned polls; /* in the current wait */
    bool te_was_on; /* the firmware had translation on */
    char err[VTD_ERR_MAX];
};

void vtd_prog_init(struct vtd_prog *p, const struct vtd_caps *c, uint64_t root_pa);

/* one register action; VTD_MORE until VTD_DONE, or VTD_FAIL with p->err set */
enum vtd_step_result vtd_step(struct vtd_prog *p, const struct vtd_regs *r);

/* run vtd_step to the end */
enum vtd_step_result vtd_enable(struct vtd_prog *p, const struct vtd_regs *r);

/* one recorded fault (VT-d 7.2.1) */
struct vtd_fault {
    uint64_t addr;  /* the page the request named */
    uint16_t sid;   /* requester: bus << 8 | device << 3 | function */
    uint8_t reason; /* VT-d appendix A fault reason */
    bool write;
};

/*
 * Collect the faults the unit recorded (at most max into out; all of them are cleared) and
 * clear its fault status.  Returns how many were recorded, *overflow set if the unit dropped
 * some (FSTS.PFO).  Reads FSTS only when nothing is pending.
 */
unsigned vtd_faults_poll(const struct vtd_regs *r, const struct vtd_caps *c, struct vtd_fault *out,
                         unsigned max, bool *overflow);

#endif
