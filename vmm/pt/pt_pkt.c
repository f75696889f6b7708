/* SPDX-License-Identifier: MIT */
/*
 * Intel PT packet encoder.  Byte layouts from docs/pt-facts.md E (SDM 3C 33.4.2); all
 * multi-byte payloads little-endian.  Each encoder builds the packet in a local array, then
 * copies it out only if it fits: a packet is written whole or not at all.
 */
#include "pt/pt_pkt.h"

#include "lib/ptv_string.h"
#include "pt/rtit.h"

#define OPC_EXT        0x02
#define EXT_PSB        0x82
#define EXT_PSBEND     0x23
#define EXT_OVF        0xf3
#define EXT_PIP        0x43
#define EXT_CBR        0x03
#define EXT_TNT_64     0xa3
#define OPC_PAD        0x00
#define OPC_MODE       0x99
#define OPC_TSC        0x19
#define MODE_LEAF_EXEC 0x00
#define MODE_EXEC_IF   0x04
#define PSB_PAIRS      8
#define IPC_SHIFT      5
#define MASK48         ((1ull << 48) - 1)

void pt_pkt_enc_init(struct pt_pkt_enc *e, uint8_t *buf, size_t size)
{
    e->buf = buf;
    e->size = buf ? size : 0;
    e->len = 0;
    e->last_ip = 0;
    e->have_ip = false;
}

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int emit(struct pt_pkt_enc *e, const uint8_t *pkt, size_t n)
{
    if (e->len > e->size || n > e->size - e->len)
        return PT_PKT_ENOSPC;
    memcpy(e->buf + e->len, pkt, n);
    e->len += n;
    return (int)n;
}

int pt_pkt_pad(struct pt_pkt_enc *e)
{
    static const uint8_t pkt[1] = {OPC_PAD};

    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_psb(struct pt_pkt_enc *e)
{
    uint8_t pkt[PT_PKT_PSB_SIZE];
    int r;

    for (unsigned i = 0; i < PSB_PAIRS; i++) {
        pkt[2 * i] = OPC_EXT;
        pkt[2 * i + 1] = EXT_PSB;
    }
    r = emit(e, pkt, sizeof(pkt));
    if (r > 0) {
        e->last_ip = 0; /* PSB resets the IP compression state (pt-facts E) */
        e->have_ip = false;
    }
    return r;
}

int pt_pkt_psbend(struct pt_pkt_enc *e)
{
    const uint8_t pkt[2] = {OPC_EXT, EXT_PSBEND};

    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_ovf(struct pt_pkt_enc *e)
{
    const uint8_t pkt[2] = {OPC_EXT, EXT_OVF};
    int r = emit(e, pkt, sizeof(pkt));

    if (r > 0) /* after OVF the next IP packet must stand on its own */
        e->have_ip = false;
    return r;
}

int pt_pkt_pip(struct pt_pkt_enc *e, uint64_t cr3, bool nr)
{
    uint8_t pkt[PT_PKT_PIP_SIZE];

    pt_pip_for_cr3_write(cr3, nr, pkt);
    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_mode_exec(struct pt_pkt_enc *e, enum pt_pkt_exec mode, bool iflag)
{
    uint8_t pkt[2] = {OPC_MODE, MODE_LEAF_EXEC};

    if (mode != PT_PKT_EXEC_16 && mode != PT_PKT_EXEC_32 && mode != PT_PKT_EXEC_64)
        return PT_PKT_EINVAL;
    pkt[1] |= (uint8_t)mode | (iflag ? MODE_EXEC_IF : 0);
    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_tsc(struct pt_pkt_enc *e, uint64_t tsc)
{
    uint8_t pkt[8] = {OPC_TSC};

    put_le(pkt + 1, tsc, 7);
    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_cbr(struct pt_pkt_enc *e, uint8_t ratio)
{
    const uint8_t pkt[4] = {OPC_EXT, EXT_CBR, ratio, 0};

    return emit(e, pkt, sizeof(pkt));
}

/* TNT payload: the outcomes with a stop bit above the oldest one (pt-facts E). */
int pt_pkt_tnt_8(struct pt_pkt_enc *e, uint64_t bits, unsigned n)
{
    uint8_t pkt[1];

    if (n < 1 || n > 6 || (bits >> n))
        return PT_PKT_EINVAL;
    pkt[0] = (uint8_t)(((1u << n) | bits) << 1);
    return emit(e, pkt, sizeof(pkt));
}

int pt_pkt_tnt_64(struct pt_pkt_enc *e, uint64_t bits, unsigned n)
{
    uint8_t pkt[8] = {OPC_EXT, EXT_TNT_64};

    if (n < 1 || n > 47 || (bits >> n))
        return PT_PKT_EINVAL;
    put_le(pkt + 2, (1ull << n) | bits, 6);
    return emit(e, pkt, sizeof(pkt));
}

static unsigned ipc_bytes(enum pt_pkt_ipc ipc)
{
    switch (ipc) {
    case PT_PKT_IPC_UPDATE_16:
        return 2;
    case PT_PKT_IPC_UPDATE_32:
        return 4;
    case PT_PKT_IPC_SEXT_48:
    case PT_PKT_IPC_UPDATE_48:
        return 6;
    case PT_PKT_IPC_FULL:
        return 8;
    default:
        return 0;
    }
}

static bool canonical48(uint64_t ip)
{
    return (uint64_t)((int64_t)(ip << 16) >> 16) == ip;
}

/* Whether a decoder at (have, last) reconstructs exactly `ip` from compression `ipc`. */
static bool ipc_exact(bool have, uint64_t last, enum pt_pkt_ipc ipc, uint64_t ip)
{
    switch (ipc) {
    case PT_PKT_IPC_UPDATE_16:
        return have && (ip >> 16) == (last >> 16);
    case PT_PKT_IPC_UPDATE_32:
        return have && (ip >> 32) == (last >> 32);
    case PT_PKT_IPC_UPDATE_48:
        return have && (ip >> 48) == (last >> 48);
    case PT_PKT_IPC_SEXT_48:
        return canonical48(ip);
    case PT_PKT_IPC_FULL:
        return true;
    default:
        return false;
    }
}

enum pt_pkt_ipc pt_pkt_ipc_best(const struct pt_pkt_enc *e, uint64_t ip)
{
    static const enum pt_pkt_ipc order[] = {PT_PKT_IPC_UPDATE_16, PT_PKT_IPC_UPDATE_32,
                                            PT_PKT_IPC_SEXT_48, PT_PKT_IPC_UPDATE_48};

    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
        if (ipc_exact(e->have_ip, e->last_ip, order[i], ip))
            return order[i];
    return PT_PKT_IPC_FULL;
}

int pt_pkt_ip(struct pt_pkt_enc *e, enum pt_pkt_ip_kind kind, enum pt_pkt_ipc ipc, uint64_t ip)
{
    uint8_t pkt[9];
    unsigned n;
    int r;

    if (kind != PT_PKT_TIP && kind != PT_PKT_TIP_PGE && kind != PT_PKT_TIP_PGD &&
        kind != PT_PKT_FUP)
        return PT_PKT_EINVAL;
    if (ipc == PT_PKT_IPC_AUTO)
        ipc = pt_pkt_ipc_best(e, ip);
    if (ipc != PT_PKT_IPC_SUPPRESSED && !ipc_exact(e->have_ip, e->last_ip, ipc, ip))
        return PT_PKT_EINVAL;
    n = ipc_bytes(ipc);
    pkt[0] = (uint8_t)((unsigned)kind | ((unsigned)ipc << IPC_SHIFT));
    put_le(pkt + 1, ip, n);
    r = emit(e, pkt, 1 + n);
    if (r > 0 && ipc != PT_PKT_IPC_SUPPRESSED) {
        e->last_ip = ip;
        e->have_ip = true;
    }
    return r;
}

bool pt_pip_needed(uint64_t rtit_ctl, uint64_t rtit_status)
{
    const uint64_t st = RTIT_STATUS_TRIGGEREN | RTIT_STATUS_CONTEXTEN;

    return (rtit_ctl & (RTIT_CTL_TRACEEN | RTIT_CTL_OS)) == (RTIT_CTL_TRACEEN | RTIT_CTL_OS) &&
           (rtit_status & st) == st;
}

bool pt_pip_guest_nr(uint32_t secondary_ctls)
{
    /* SDM-p1729: PIPs in non-root operation set NR unless "conceal VMX non-root operation". */
    return !(secondary_ctls & SECONDARY_EXEC_PT_CONCEAL_VMX);
}

/* PIP: 02 43, then 6 bytes of ((CR3[51:5]) << 1) | NR (pt-facts E). */
int pt_pip_for_cr3_write(uint64_t cr3, bool nr, uint8_t buf[static PT_PKT_PIP_SIZE])
{
    uint64_t payload = ((((cr3 & ((1ull << 52) - 1)) >> 5) << 1) | (nr ? 1 : 0)) & MASK48;

    buf[0] = OPC_EXT;
    buf[1] = EXT_PIP;
    put_le(buf + 2, payload, 6);
    return PT_PKT_PIP_SIZE;
}
