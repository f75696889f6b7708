/* SPDX-License-Identifier: MIT */
/*
 * The transmit credit of a 16550 (vmm/dev/serial.c's rule, pure, host-tested by test_uart_tx).
 * THRE in FIFO mode means the transmit FIFO is empty (16550A): after one LSR read that shows it,
 * 16 bytes may go to THR with no other read; without FIFOs, 1.  Every THR write spends one
 * credit, also the guest's bytes the console multiplexer forwards without asking; at 0 the next
 * byte waits for THRE again.  So the FIFO never takes a 17th byte, and where the UART is
 * emulated (every port access a VM exit) a line costs 17 accesses per 16 bytes, not 32.
 */
#ifndef PTV_DEV_UART_TX_H
#define PTV_DEV_UART_TX_H

#include <stdbool.h>
#include <stdint.h>

#define UART_TX_IIR_FIFO 0xc0u /* IIR[7:6] = 11: FIFOs enabled and working (16550A) */
#define UART_TX_FIFO     16u

struct uart_tx {
    unsigned credit; /* THR writes left before the next THRE wait */
    unsigned depth;  /* what a THRE gives: 16 with working FIFOs, else 1 */
};

/* after the FIFOs were enabled (FCR): IIR as read back says whether they work */
static inline void uart_tx_init(struct uart_tx *t, uint8_t iir)
{
    t->depth = (iir & UART_TX_IIR_FIFO) == UART_TX_IIR_FIFO ? UART_TX_FIFO : 1;
    t->credit = 0;
}

/* before a byte of the VMM's own: true when LSR must show THRE first (then uart_tx_refill) */
static inline bool uart_tx_need_thre(const struct uart_tx *t)
{
    return t->credit == 0;
}

/* THRE seen (or the bounded wait for it gave up): the FIFO is empty */
static inline void uart_tx_refill(struct uart_tx *t)
{
    t->credit = t->depth;
}

/* any THR write, the VMM's or a forwarded guest byte */
static inline void uart_tx_spend(struct uart_tx *t)
{
    if (t->credit)
        t->credit--;
}

#endif
