/* SPDX-License-Identifier: MIT */
/*
 * Intel PT packet encoder: the packets the VMM itself may have to write into a trace (a PIP
 * when it emulates a guest MOV CR3, PSB+ headers and OVF/TIP.PGD markers in its own trace, test
 * streams).  Formats: docs/pt-facts.md E (SDM 3C 33.4.2; libipt pt_opcodes.h as the reference).
 *
 * Every encoder writes a whole packet into a bounded buffer or nothing: it returns the number
 * of bytes written, or PT_PKT_ENOSPC when the packet does not fit (the buffer is unchanged),
 * or PT_PKT_EINVAL for an argument no packet can carry.  It never writes past `size`.
 */
#ifndef PTV_PT_PKT_H
#define PTV_PT_PKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_PKT_ENOSPC (-1)
#define PT_PKT_EINVAL (-2)

#define PT_PKT_PIP_SIZE 8
#define PT_PKT_PSB_SIZE 16

struct pt_pkt_enc {
    uint8_t *buf;
    size_t size;
    size_t len;       /* bytes written so far */
    uint64_t last_ip; /* the decoder's "last IP" after the packets written so far */
    bool have_ip;     /* last_ip is valid (false after init, PSB and OVF) */
};

/* IP compression, the IPBytes field of TIP/TIP.PGE/TIP.PGD/FUP (pt-facts E). */
enum pt_pkt_ipc {
    PT_PKT_IPC_SUPPRESSED = 0, /* no payload */
    PT_PKT_IPC_UPDATE_16 = 1,  /* IP[15:0], upper bits from the last IP */
    PT_PKT_IPC_UPDATE_32 = 2,  /* IP[31:0] */
    PT_PKT_IPC_SEXT_48 = 3,    /* IP[47:0], sign-extended */
    PT_PKT_IPC_UPDATE_48 = 4,  /* IP[47:0], upper 16 from the last IP */
    PT_PKT_IPC_FULL = 6,       /* IP[63:0] */
    PT_PKT_IPC_AUTO = 0x100,   /* let the encoder choose the shortest exact one */
};

enum pt_pkt_ip_kind {
    PT_PKT_TIP = 0x0d,
    PT_PKT_TIP_PGE = 0x11,
    PT_PKT_TIP_PGD = 0x01,
    PT_PKT_FUP = 0x1d,
};

enum pt_pkt_exec {
    PT_PKT_EXEC_16 = 0, /* CS.L=0 CS.D=0 */
    PT_PKT_EXEC_32 = 2, /* CS.L=0 CS.D=1 */
    PT_PKT_EXEC_64 = 1, /* CS.L=1 CS.D=0 */
};

void pt_pkt_enc_init(struct pt_pkt_enc *e, uint8_t *buf, size_t size);

int pt_pkt_pad(struct pt_pkt_enc *e);
int pt_pkt_psb(struct pt_pkt_enc *e); /* also resets the last IP, as PSB does */
int pt_pkt_psbend(struct pt_pkt_enc *e);
int pt_pkt_ovf(struct pt_pkt_enc *e); /* the decoder resynchronizes; last IP forgotten */
int pt_pkt_pip(struct pt_pkt_enc *e, uint64_t cr3, bool nr);
int pt_pkt_mode_exec(struct pt_pkt_enc *e, enum pt_pkt_exec mode, bool iflag);
int pt_pkt_tsc(struct pt_pkt_enc *e, uint64_t tsc); /* TSC[55:0], as hardware writes it */
int pt_pkt_cbr(struct pt_pkt_enc *e, uint8_t ratio);

/*
 * TNT: `n` branch outcomes in bits n-1..0 of `bits`, the oldest in bit n-1 (1 = taken).
 * Short (1-byte) TNT carries 1..6 outcomes, long (8-byte) TNT 1..47.
 */
int pt_pkt_tnt_8(struct pt_pkt_enc *e, uint64_t bits, unsigned n);
int pt_pkt_tnt_64(struct pt_pkt_enc *e, uint64_t bits, unsigned n);

/*
 * TIP / TIP.PGE / TIP.PGD / FUP with target `ip` under compression `ipc`.  EINVAL if a decoder
 * following this stream could not reconstruct exactly `ip` (e.g. UPDATE_16 when the upper 48
 * bits differ from the last IP, SEXT_48 for a non-canonical IP, any update before a full IP).
 */
int pt_pkt_ip(struct pt_pkt_enc *e, enum pt_pkt_ip_kind kind, enum pt_pkt_ipc ipc, uint64_t ip);

/* The shortest compression that encodes `ip` exactly after the packets written so far. */
enum pt_pkt_ipc pt_pkt_ipc_best(const struct pt_pkt_enc *e, uint64_t ip);

/*
 * PIP emulation (pt-facts E.2).  When the VMM completes a guest MOV to CR3 itself (CR3-load
 * exiting), hardware writes no PIP into the guest's trace; the VMM must supply the one the CPU
 * would have written.  Hardware writes a PIP only if TriggerEn && ContextEn && RTIT_CTL.OS
 * (SDM 3C 33.4.2.7, pt-facts E.1): check pt_pip_needed(guest RTIT_CTL, guest RTIT_STATUS)
 * first.  `nr` = 1 for a PIP in VMX non-root operation unless "conceal VMX non-root operation
 * from Intel PT" is set (pt-facts E.1).  Writes PT_PKT_PIP_SIZE bytes; returns that size.
 */
bool pt_pip_needed(uint64_t rtit_ctl, uint64_t rtit_status);
/* NR for a PIP of guest (non-root) origin, given the secondary controls in use (pt-facts E.1). */
bool pt_pip_guest_nr(uint32_t secondary_ctls);
int pt_pip_for_cr3_write(uint64_t cr3, bool nr, uint8_t buf[static PT_PKT_PIP_SIZE]);

#endif
