/* SPDX-License-Identifier: MIT */
/*
 * 16550 multiplexer: one UART shared by the guest's console and the VMM's log
 * (docs/ARCHITECTURE.md "The serial port").  Pure logic: no port I/O here.
 * The real UART is reached through struct uart_hw (port I/O in the VMM, a fake
 * 16550 in the host tests), guest accesses come in through uart_mux_in/out.
 *
 *  - The guest sees a 16550A.  Outside loopback every register is the real one
 *    (only THR, LCR and MCR are trapped).  Its loopback mode (MCR.LOOP) is
 *    virtual: the real UART is never put in loopback, so nothing the VMM
 *    transmits can come back in RBR.  While LOOP is on, all eight registers
 *    are trapped and THR/RBR, IIR, LSR, MSR and MCR are answered from the
 *    model below; the configuration registers (IER, FCR, LCR, DLL/DLM, SCR)
 *    still go to the real UART.
 *  - The VMM's lines go out only between guest console lines: a line the VMM
 *    writes while the guest's line is open waits in a bounded ring and goes
 *    out right after the guest's next '\n'.  Overflow policy:
 *      ring full                -> the new VMM line is dropped and counted;
 *                                  "<N> VMM lines dropped" follows the next flush
 *      urgent line (errors,     -> everything goes out now; an open guest line
 *      panic, crash dump)          is ended first with "\r\n" (counted in `broken`)
 *      a queued line older than -> the same break, at the next call into the mux
 *      hold_ticks
 */
#ifndef PTV_DEV_UART_MUX_H
#define PTV_DEV_UART_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* register offsets (DLAB = LCR bit 7 turns 0/1 into the divisor latch) */
#define UART_RX       0 /* in: receive buffer */
#define UART_TX       0 /* out: transmit holding */
#define UART_DLL      0
#define UART_IER      1
#define UART_DLM      1
#define UART_IIR      2 /* in */
#define UART_FCR      2 /* out */
#define UART_LCR      3
#define UART_MCR      4
#define UART_LSR      5
#define UART_MSR      6
#define UART_SCR      7
#define UART_NR_PORTS 8

#define UART_IER_RDI  0x01
#define UART_IER_THRI 0x02
#define UART_IER_RLSI 0x04
#define UART_IER_MSI  0x08

#define UART_IIR_NO_INT 0x01
#define UART_IIR_MSI    0x00
#define UART_IIR_THRI   0x02
#define UART_IIR_RDI    0x04
#define UART_IIR_RLSI   0x06
#define UART_IIR_ID     0x0f
#define UART_IIR_FIFO   0xc0 /* FIFOs enabled (16550A) */

#define UART_FCR_ENABLE     0x01
#define UART_FCR_CLEAR_RCVR 0x02

#define UART_LCR_DLAB 0x80

#define UART_MCR_DTR  0x01
#define UART_MCR_RTS  0x02
#define UART_MCR_OUT1 0x04
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10
#define UART_MCR_MASK 0x1f /* bits 7:5 read as 0 on a 16550 */

#define UART_LSR_DR   0x01
#define UART_LSR_OE   0x02
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40

#define UART_MSR_DCTS   0x01
#define UART_MSR_DDSR   0x02
#define UART_MSR_TERI   0x04
#define UART_MSR_DDCD   0x08
#define UART_MSR_CTS    0x10
#define UART_MSR_DSR    0x20
#define UART_MSR_RI     0x40
#define UART_MSR_DCD    0x80
#define UART_MSR_DELTAS 0x0f

#define UART_MUX_FIFO 16 /* 16550A receive FIFO */
/* a trace dump asked for from the host side of the serial line: these bytes, read by the
 * guest from RBR in this order (the guest still receives them; a terminal's shell ignores
 * this unbound function-key sequence).  Send it with: printf '\033[9788~' > /dev/ttyUSB0 */
#define UART_DUMP_REQUEST     "\033[9788~"
#define UART_DUMP_REQUEST_LEN 7
/* what Linux prints when it panics: seen in what the guest transmits, it makes the VMM dump
 * (the guest is dying; with panic=N it resets next, and the trace would be lost) */
#define UART_GUEST_PANIC     "Kernel panic - not syncing"
#define UART_GUEST_PANIC_LEN 26
#define UART_MUX_LINE_MAX    256  /* a longer VMM line is cut into pieces of this size */
#define UART_MUX_RING        4096 /* VMM bytes waiting for the guest's line to end */

/* ports the mux wants trapped (bit i = base + i) */
#define UART_TRAP_NORMAL ((1u << UART_TX) | (1u << UART_LCR) | (1u << UART_MCR))
#define UART_TRAP_LOOP   0xffu

/* the real UART */
struct uart_hw {
    void *ctx;
    uint8_t (*in)(void *ctx, unsigned off);
    void (*out)(void *ctx, unsigned off, uint8_t val);
    /* one VMM byte: wait for THRE, write THR (the mux has cleared DLAB) */
    void (*tx)(void *ctx, uint8_t byte);
    /* wait until the transmitter is empty (end of each VMM emission, so the
     * guest finds the FIFO as empty as it left it) */
    void (*tx_drain)(void *ctx);
};

struct uart_mux {
    struct uart_hw hw;
    uint64_t hold_ticks;
    const char *drop_prefix; /* start of the "N VMM lines dropped" line */

    /* guest view */
    uint8_t lcr;   /* the real LCR (every write is trapped) */
    uint8_t mcr;   /* the guest's MCR while LOOP is on (the real one then holds 0) */
    bool loop;     /* virtual loopback */
    bool fifo;     /* FIFOs enabled: loopback receive depth 16, IIR[7:6] */
    uint8_t ier;   /* mirror while LOOP is on */
    uint8_t msr;   /* loopback MSR: status 7:4 from MCR, deltas 3:0 */
    bool oe;       /* loopback overrun, until LSR is read */
    bool thre_irq; /* loopback THRE interrupt pending */
    uint8_t rx[UART_MUX_FIFO], rx_head, rx_len, rbr;

    /* the guest's console line: a byte other than '\n' went out since the last '\n' */
    bool guest_open;

    /* received bytes matched against UART_DUMP_REQUEST so far; requests seen in all */
    uint8_t req_pos;
    uint64_t dump_requests;
    /* transmitted guest bytes matched against UART_GUEST_PANIC; panic lines seen */
    uint8_t panic_pos;
    uint64_t guest_panics;

    /* VMM lines */
    char cur[UART_MUX_LINE_MAX];
    unsigned cur_len;
    char ring[UART_MUX_RING]; /* whole lines, each ending in '\n' */
    unsigned ring_head, ring_len, ring_lines;
    uint64_t oldest; /* tick at which the oldest queued line was queued */

    /* figures */
    uint64_t lines;         /* VMM lines committed */
    uint64_t emitted;       /* VMM lines transmitted */
    uint64_t dropped;       /* VMM lines lost to a full ring */
    uint64_t drop_reported; /* `dropped` as of the last "dropped" line */
    uint64_t broken;        /* guest lines ended early by the overflow policy */
    uint64_t guest_bytes;   /* guest bytes transmitted */
};

/* hw must be ready (the VMM has programmed the UART); reads the real LCR */
void uart_mux_init(struct uart_mux *m, const struct uart_hw *hw, uint64_t hold_ticks,
                   const char *drop_prefix);

/* a guest IN/OUT of one byte at base + off (off < 8); now: any monotonic tick */
uint8_t uart_mux_in(struct uart_mux *m, unsigned off, uint64_t now);
void uart_mux_out(struct uart_mux *m, unsigned off, uint8_t val, uint64_t now);

/* VMM text (whole or partial lines); urgent: flush now, breaking an open guest line */
void uart_mux_vmm_write(struct uart_mux *m, const char *s, size_t n, bool urgent, uint64_t now);

/* everything queued goes out now (breaking an open guest line); a partial VMM line too */
void uart_mux_flush(struct uart_mux *m);

/* a whole VMM line written now goes straight out, splitting nothing and waiting for nothing:
 * the guest's console line is closed, no VMM line is queued or partly written */
static inline bool uart_mux_idle(const struct uart_mux *m)
{
    return !m->guest_open && !m->ring_len && !m->cur_len;
}

/* the ports to trap now (UART_TRAP_*) */
static inline unsigned uart_mux_trap_mask(const struct uart_mux *m)
{
    return m->loop ? UART_TRAP_LOOP : UART_TRAP_NORMAL;
}

#endif
