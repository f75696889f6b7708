/* SPDX-License-Identifier: MIT */
/* Test-only PT packet generator.  Encodings: docs/pt-facts.md section E. */
#include "model/ptgen.h"

#include <string.h>

#include "model/ptm.h"

enum { PSB_HI = 0x02, PSB_LO = 0x82, OPC_EXT = 0x02, EXT_PSBEND = 0x23, OPC_MODE = 0x99 };
enum { OPC_TIP = 0x0d, OPC_TIP_PGE = 0x11, OPC_FUP = 0x1d };
enum { IPC_UPD16 = 1, IPC_UPD32 = 2, IPC_SEXT48 = 3 };

static uint64_t rnd(struct ptgen *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

void ptgen_init(struct ptgen *g, uint64_t seed, uint32_t psb_period)
{
    memset(g, 0, sizeof(*g));
    g->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    g->ip = 0xffffffff81000000ull;
    g->psb_period = psb_period;
}

/* header | (ipc << 5) then the low bytes of ip (pt-facts E: IPBytes) */
static size_t ip_packet(uint8_t *b, uint8_t opc, unsigned ipc, uint64_t ip)
{
    static const size_t nbytes[] = {0, 2, 4, 6};
    b[0] = (uint8_t)(opc | (ipc << 5));
    for (size_t i = 0; i < nbytes[ipc]; i++)
        b[1 + i] = (uint8_t)(ip >> (8 * i));
    return 1 + nbytes[ipc];
}

static size_t psb(uint8_t *b)
{
    for (int i = 0; i < 8; i++) {
        b[2 * i] = PSB_HI;
        b[2 * i + 1] = PSB_LO;
    }
    return 16;
}

size_t ptgen_next(struct ptgen *g, uint8_t *b, bool *is_psb)
{
    uint64_t r = rnd(g);
    size_t n;

    *is_psb = false;
    /* PSB+ : PSB, MODE.Exec (64-bit: CS.L = 1), FUP(ip), PSBEND */
    if (!g->started || g->since_psb >= g->psb_period) {
        g->started = true;
        g->since_psb = 16;
        *is_psb = true;
        return psb(b);
    }
    if (g->since_psb == 16) {
        b[0] = OPC_MODE;
        b[1] = 0x01;
        n = 2;
    } else if (g->since_psb == 18) {
        n = ip_packet(b, OPC_FUP, IPC_SEXT48, g->ip);
    } else if (g->since_psb == 25) {
        b[0] = OPC_EXT;
        b[1] = EXT_PSBEND;
        n = 2;
    } else if (!g->pge_done) {
        g->pge_done = true;
        n = ip_packet(b, OPC_TIP_PGE, IPC_SEXT48, g->ip);
    } else {
        switch (r % 8) {
        case 0:
        case 1:
        case 2: {
            /* TNT-8: 1..6 bits below a stop bit, bit 0 = 0 */
            unsigned nb = 1 + (unsigned)((r >> 8) % 6);
            uint8_t bits = (uint8_t)((r >> 16) & ((1u << nb) - 1));
            b[0] = (uint8_t)(((1u << nb) | bits) << 1);
            n = 1;
            break;
        }
        case 3:
            g->ip = (g->ip & ~0xffffull) | ((r >> 20) & 0xffff);
            n = ip_packet(b, OPC_TIP, IPC_UPD16, g->ip);
            break;
        case 4:
            g->ip = (g->ip & ~0xffffffffull) | ((r >> 24) & 0xffffffff);
            n = ip_packet(b, OPC_TIP, IPC_UPD32, g->ip);
            break;
        case 5:
            g->ip = 0xffffffff80000000ull | ((r >> 12) & 0x7fffffff);
            n = ip_packet(b, OPC_TIP, IPC_SEXT48, g->ip);
            break;
        case 6:
            b[0] = 0x00; /* PAD */
            n = 1;
            break;
        default:
            b[0] = OPC_MODE; /* MODE.Exec, 64-bit */
            b[1] = 0x01;
            n = 2;
            break;
        }
    }
    g->since_psb += n;
    return n;
}

uint64_t ptgen_run(struct ptgen *g, struct ptm *m, uint64_t nbytes)
{
    uint64_t given = 0;
    uint8_t buf[PTGEN_MAX_PACKET];

    while (given < nbytes) {
        bool is_psb;
        size_t n = ptgen_next(g, buf, &is_psb);
        ptm_packet(m, buf, n, is_psb);
        given += n;
    }
    return given;
}
