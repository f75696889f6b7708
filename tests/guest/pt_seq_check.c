/* SPDX-License-Identifier: MIT */
/* The known-sequence verdict of the VMM's trace self-test (pt_seq_check.h): pure. */
#include "pt_seq_check.h"

#include "lib/fmt.h"

enum { BEFORE, IN, GAP };

#define FAIL(...) (ptv_snprintf(s->why, sizeof(s->why), __VA_ARGS__), false)

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* outcomes of a TNT payload: the stop bit is the highest set bit, the oldest outcome below it */
static bool add_tnt(struct pt_seq_seen *s, uint64_t payload, unsigned lowest)
{
    int stop = 63;
    while (stop >= 0 && !(payload >> stop & 1))
        stop--;
    for (int b = stop - 1; b >= (int)lowest; b--) {
        if (s->n_tnt + 1 >= sizeof(s->tnt))
            return FAIL("more than %u conditional branches", (unsigned)sizeof(s->tnt) - 1);
        s->tnt[s->n_tnt++] = payload >> b & 1 ? 'T' : 'N';
        s->tnt[s->n_tnt] = 0;
    }
    return true;
}

/* the length of the extended (0x02-prefixed) packet with second byte b1, 0 if unknown */
static unsigned ext_len(uint8_t b1)
{
    switch (b1) {
    case 0x82:
        return 16; /* PSB */
    case 0x23:
        return 2; /* PSBEND */
    case 0xf3:
        return 2; /* OVF */
    case 0xa3:
        return 8; /* long TNT */
    case 0x43:
        return 8; /* PIP */
    case 0x03:
        return 4; /* CBR */
    case 0x73:
        return 7; /* TMA */
    case 0xc8:
        return 7; /* VMCS */
    case 0xc3:
        return 11; /* MNT */
    case 0x83:
        return 2; /* TraceStop */
    case 0x62:
    case 0xe2:
        return 2; /* EXSTOP */
    case 0x22:
        return 4; /* PWRE */
    case 0xa2:
        return 7; /* PWRX */
    case 0xc2:
        return 10; /* MWAIT */
    case 0x13:
        return 4; /* CFE */
    case 0x53:
        return 11; /* EVD */
    }
    if ((b1 & 0x1f) == 0x12 && (b1 >> 5 & 3) < 2) /* PTW: 4 or 8 payload bytes */
        return (b1 >> 5 & 3) ? 10 : 6;
    return 0;
}

bool pt_seq_check(const uint8_t *buf, size_t n, const struct pt_seq_expect *e,
                  struct pt_seq_seen *s)
{
    static const unsigned ip_bytes[8] = {0, 2, 4, 6, 6, 0xff, 8, 0xff};
    uint64_t last_ip = 0;
    bool in_psb = false;
    int state = BEFORE;
    *s = (struct pt_seq_seen){0};

    for (size_t at = 0; at < n;) {
        const uint8_t *p = buf + at;
        uint8_t b0 = p[0];
        size_t len;
        s->packets++;
        if (b0 == 0x00) { /* PAD */
            at++;
            continue;
        }
        if (b0 == 0x02) {
            if (n - at >= 2 && (p[1] == 0x63 || p[1] == 0x33 || p[1] == 0xb3))
                return FAIL("block packets (PEBS via PT) at offset %lu: not understood here",
                            (unsigned long)at);
            if (n - at < 2 || !(len = ext_len(p[1])))
                return FAIL("unknown packet 0x02 %#x at offset %lu", n - at < 2 ? 0 : p[1],
                            (unsigned long)at);
            if (n - at < len)
                return FAIL("packet cut short at offset %lu", (unsigned long)at);
            if (p[1] == 0x82) {
                for (unsigned i = 2; i < 16; i++)
                    if (p[i] != (i & 1 ? 0x82 : 0x02))
                        return FAIL("broken PSB at offset %lu", (unsigned long)at);
                s->psbs++;
                last_ip = 0;
                in_psb = true;
            } else if (p[1] == 0x23) {
                in_psb = false;
            } else if (p[1] == 0xf3) {
                if (state != BEFORE)
                    return FAIL("OVF at offset %lu: trace lost", (unsigned long)at);
            } else if (p[1] == 0xa3) {
                if (state == BEFORE)
                    return FAIL("TNT before the sequence's TIP.PGE (offset %lu)",
                                (unsigned long)at);
                if (state == IN && !add_tnt(s, le(p + 2, 6), 0))
                    return false;
            }
            at += len;
            continue;
        }
        if (!(b0 & 1)) { /* short TNT: outcomes in bits 6..1 under the stop bit */
            if (state == BEFORE)
                return FAIL("TNT before the sequence's TIP.PGE (offset %lu)", (unsigned long)at);
            if (state == IN && !add_tnt(s, b0, 1))
                return false;
            at++;
            continue;
        }
        if ((b0 & 3) == 3) { /* CYC: more bytes while the Exp bit is set */
            len = 1;
            if (b0 & 4)
                while (at + len < n && (p[len++] & 1))
                    ;
            at += len;
            continue;
        }
        if (b0 == 0x19 || b0 == 0x59 || b0 == 0x99) { /* TSC, MTC, MODE */
            len = b0 == 0x19 ? 8 : 2;
            if (n - at < len)
                return FAIL("packet cut short at offset %lu", (unsigned long)at);
            at += len;
            continue;
        }
        unsigned kind = b0 & 0x1f, ipb = ip_bytes[b0 >> 5];
        if ((kind != 0x01 && kind != 0x0d && kind != 0x11 && kind != 0x1d) || ipb == 0xff)
            return FAIL("unknown packet %#x at offset %lu", b0, (unsigned long)at);
        if (n - at < 1 + ipb)
            return FAIL("packet cut short at offset %lu", (unsigned long)at);
        bool have_ip = ipb != 0;
        if (have_ip) {
            uint64_t v = le(p + 1, ipb);
            switch (b0 >> 5) {
            case 1:
                last_ip = (last_ip & ~0xffffull) | v;
                break;
            case 2:
                last_ip = (last_ip & ~0xffffffffull) | v;
                break;
            case 3:
                last_ip = (uint64_t)((int64_t)(v << 16) >> 16);
                break;
            case 4:
                last_ip = (last_ip & ~0xffffffffffffull) | v;
                break;
            default:
                last_ip = v;
                break;
            }
        }
        at += 1 + ipb;
        if (in_psb) /* FUP / MODE inside PSB+: status, not an event */
            continue;
        switch (kind) {
        case 0x11: /* TIP.PGE */
            if (!have_ip)
                return FAIL("TIP.PGE without an IP");
            if (state == BEFORE && last_ip == e->start) {
                state = IN;
            } else if (state == GAP) {
                if (last_ip < e->lo || last_ip > e->hi)
                    return FAIL("trace resumed at %#lx, outside the sequence",
                                (unsigned long)last_ip);
                state = IN;
                s->resumes++;
            } else if (state == IN) {
                return FAIL("TIP.PGE at %#lx while tracing", (unsigned long)last_ip);
            }
            break;
        case 0x01: /* TIP.PGD */
            if (state == IN)
                state = GAP;
            break;
        case 0x0d: /* TIP */
            if (state == IN) {
                if (s->n_tips == PT_SEQ_MAX_TIPS)
                    return FAIL("more than %u indirect branches", PT_SEQ_MAX_TIPS);
                s->tips[s->n_tips++] = have_ip ? last_ip : 0;
            }
            break;
        default: /* FUP: an asynchronous event's source; its TIP / TIP.PGD follows */
            break;
        }
    }
    if (state == BEFORE)
        return FAIL("no TIP.PGE at the sequence's start %#lx in %lu bytes (%u PSBs)",
                    (unsigned long)e->start, (unsigned long)n, s->psbs);
    for (unsigned i = 0;; i++) {
        if (e->tnt[i] != s->tnt[i])
            return FAIL("branches %s, expected %s (first difference at %u)", s->tnt, e->tnt, i);
        if (!e->tnt[i])
            break;
    }
    if (s->n_tips != e->n_tips)
        return FAIL("%u indirect branch targets, expected %u", s->n_tips, e->n_tips);
    for (unsigned i = 0; i < e->n_tips; i++)
        if (s->tips[i] != e->tips[i])
            return FAIL("indirect branch %u went to %#lx, expected %#lx", i,
                        (unsigned long)s->tips[i], (unsigned long)e->tips[i]);
    ptv_snprintf(s->why, sizeof(s->why),
                 "sequence exact: branches %s, %u TIP (%u packets, %u PSB, %u resumed)", s->tnt,
                 s->n_tips, s->packets, s->psbs, s->resumes);
    return true;
}
