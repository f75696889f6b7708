/* SPDX-License-Identifier: MIT */
/*
 * 16550 multiplexer: one UART shared by the guest's console and the VMM's log
 * (docs/ARCHITECTURE.md "The serial port").  Pure logic: no port I/O here.
 * The real UART is reached through struct uart_hw (port I/O in the VMM, a fake
 * 16550 in the host tests), guest accesses come in through uart_mux_in/out.
 *
 *  - The guest sees a 16550A.  The VMM owns the line: the guest's line settings
 *    (LCR, DLL/DLM, FCR's FIFO enable, MCR but for OUT1/OUT2) are a virtual
 *    register file -- stored, read back, never written to the chip -- so a
 *    guest that sets 50 baud, 7E2, a break, FIFOs off, auto flow control or a
 *    prescaler sees its own values while the VMM's lines keep the VMM's speed.
 *    LCR.DLAB is virtual too: while the guest's DLAB is set, offsets 0/1 are its
 *    DLL/DLM (IER is then trapped as well); the chip's DLAB is never set.
 *    What reaches the chip from the guest: THR bytes (its console), IER, SCR,
 *    MCR.OUT1/OUT2 (OUT2 gates the guest's IRQ on a PC), FCR's FIFO clears and
 *    receive trigger level.  Outside loopback THR, IIR/FCR, LCR and MCR are
 *    trapped (IER too while DLAB is set); IIR's FIFO bits are the guest's.
 *    Its loopback mode (MCR.LOOP) is virtual: the real UART is never put in
 *    loopback, so nothing the VMM transmits can come back in RBR.  While LOOP
 *    is on, all eight registers are trapped and THR/RBR, IIR, LSR, MSR and MCR
 *    are answered from the model below; IER and SCR still go to the chip.
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
#define UART_FCR_CLEAR_XMIT 0x04
#define UART_FCR_TRIGGER    0xc0 /* receive FIFO trigger level */

#define UART_LCR_DLAB 0x80

#define UART_MCR_DTR  0x01
#define UART_MCR_RTS  0x02
#define UART_MCR_OUT1 0x04
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10
#define UART_MCR_MASK 0x1f /* bits 7:5 read as 0 on a 16550 */
/* the MCR bits the guest drives on the chip: OUT1, OUT2 (the PC's IRQ gate).  DTR and RTS
 * stay as the VMM set them (its line stays up); LOOP and bits 7:5 (auto flow control,
 * clock prescaler, IrDA on 16750/16950-class chips) never reach it */
#define UART_MCR_GUEST_HW (UART_MCR_OUT1 | UART_MCR_OUT2)

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
/*
 * What Linux prints when it panics: seen in what the guest transmits, it makes the VMM dump
 * at once (the guest is dying; with panic=N it resets next, and the trace would be lost).
 * Counted only where a user cannot forge it cheaply: at the start of a console line (after
 * printk's "[    1.234567] " / "[T1] " prefixes) and written through the kernel's polled
 * console path, i.e. with IER.THRI clear on the chip (Linux's serial8250_console_write
 * clears IER around every console write; a user's write to the tty goes out through the
 * THRE interrupt, THRI set).  What still passes (root writing /dev/kmsg, a kernel message
 * that echoes a user string holding a newline) holds a vCPU for one dump at most per refill
 * and does not spend the real panic's dump in a burst: there is no once, only a budget of
 * UART_PANIC_BURST triggers refilled one per UART_PANIC_REFILL ticks (counted in
 * panics_limited when empty; a forger keeping it empty could deny the real one: the gate is
 * the defence).
 */
#define UART_GUEST_PANIC     "Kernel panic - not syncing"
#define UART_GUEST_PANIC_LEN 26
#define UART_PANIC_BURST     2u
#define UART_PANIC_REFILL    (1ull << 35) /* TSC ticks: ~11 s at 3 GHz */

#define UART_MUX_LINE_MAX 256  /* a longer VMM line is cut into pieces of this size */
#define UART_MUX_RING     4096 /* VMM bytes waiting for the guest's line to end */

/* ports the mux wants trapped (bit i = base + i); IER as well while the guest's DLAB is set */
#define UART_TRAP_NORMAL ((1u << UART_TX) | (1u << UART_FCR) | (1u << UART_LCR) | (1u << UART_MCR))
#define UART_TRAP_DLAB   (1u << UART_DLM)
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

    /* the chip as the VMM programmed it (read at init; the guest never changes it) */
    uint8_t hw_lcr; /* without DLAB */
    uint8_t hw_mcr; /* DTR and RTS as the VMM set them */
    bool hw_fifo;   /* the chip has FIFOs (16550A): FCR's FIFO enable means something */

    /* guest view: the virtual register file */
    uint8_t lcr;      /* the guest's LCR, DLAB included */
    uint8_t dll, dlm; /* the guest's divisor latch */
    uint8_t mcr;      /* the guest's MCR (bits 4:0) */
    bool loop;        /* virtual loopback */
    bool fifo;        /* the guest's FCR.0 (on a chip with FIFOs): loopback depth 16, IIR[7:6] */
    uint8_t ier;      /* mirror while LOOP is on */
    uint8_t msr;      /* loopback MSR: status 7:4 from MCR, deltas 3:0 */
    bool oe;          /* loopback overrun, until LSR is read */
    bool thre_irq;    /* loopback THRE interrupt pending */
    uint8_t rx[UART_MUX_FIFO], rx_head, rx_len, rbr;

    /* the guest's console line: a byte other than '\n' went out since the last '\n' */
    bool guest_open;

    /* received bytes matched against UART_DUMP_REQUEST so far; requests seen in all */
    uint8_t req_pos;
    uint64_t dump_requests;
    /* transmitted guest bytes matched against UART_GUEST_PANIC at a line start (panic_pfx:
     * where the guest's console line is, uart_mux.c's PFX_*); panic lines counted, panic lines
     * refused for want of budget; the budget (UART_GUEST_PANIC above) */
    uint8_t panic_pos, panic_pfx;
    uint64_t guest_panics, panics_limited;
    unsigned panic_tokens;
    uint64_t panic_refilled;

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

/* hw must be ready (the VMM has programmed the UART); reads its LCR, divisor, MCR and IIR:
 * the guest's virtual registers start as the chip's */
void uart_mux_init(struct uart_mux *m, const struct uart_hw *hw, uint64_t hold_ticks,
                   const char *drop_prefix);

/* a guest IN/OUT of one byte at base + off (off < 8); now: any monotonic tick */
uint8_t uart_mux_in(struct uart_mux *m, unsigned off, uint64_t now);
void uart_mux_out(struct uart_mux *m, unsigned off, uint8_t val, uint64_t now);

/* VMM text (whole or partial lines); urgent: flush now, breaking an open guest line */
void uart_mux_vmm_write(struct uart_mux *m, const char *s, size_t n, bool urgent, uint64_t now);

/* everything queued goes out now (breaking an open guest line); a partial VMM line too */
void uart_mux_flush(struct uart_mux *m);

/* the chip still has the VMM's line: its LCR (DLAB clear), DTR/RTS, nothing of LOOP or MCR bits
 * 7:5 (reads only: the divisor sits behind DLAB, which nothing but uart_mux_init sets) */
bool uart_mux_line_intact(struct uart_mux *m);

/* a whole VMM line written now goes straight out, splitting nothing and waiting for nothing:
 * the guest's console line is closed, no VMM line is queued or partly written */
static inline bool uart_mux_idle(const struct uart_mux *m)
{
    return !m->guest_open && !m->ring_len && !m->cur_len;
}

/* the ports to trap now (UART_TRAP_*) */
static inline unsigned uart_mux_trap_mask(const struct uart_mux *m)
{
    if (m->loop)
        return UART_TRAP_LOOP;
    return UART_TRAP_NORMAL | (m->lcr & UART_LCR_DLAB ? UART_TRAP_DLAB : 0);
}

#endif
