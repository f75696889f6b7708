/* SPDX-License-Identifier: MIT */
/* The fake 16550 of uart_fake.h. */
#include "fakes/uart_fake.h"
#include <string.h>

void fake_uart_init(struct fake_uart *f)
{
    memset(f, 0, sizeof(*f));
    f->lcr = 0x03;
    f->mcr = UART_MCR_DTR | UART_MCR_RTS;
    f->fcr = UART_FCR_ENABLE;
    f->msr_lines = UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS; /* a terminal is attached */
    f->dll = 1;
}

static void transmit(struct fake_uart *f, uint8_t byte, int from)
{
    if (f->mcr & UART_MCR_LOOP) { /* the real chip in loopback: the byte comes back */
        if (f->rx_len < sizeof(f->rx))
            f->rx[f->rx_len++] = byte;
        return;
    }
    if (f->wire_len < FAKE_WIRE_MAX) {
        f->wire[f->wire_len] = byte;
        f->from[f->wire_len++] = (uint8_t)from;
    }
    f->thre_irq = true;
}

uint8_t fake_uart_in(void *ctx, unsigned off)
{
    struct fake_uart *f = ctx;
    bool dlab = f->lcr & UART_LCR_DLAB;
    uint8_t v;
    switch (off) {
    case UART_RX:
        if (dlab)
            return f->dll;
        if (!f->rx_len)
            return 0;
        v = f->rx[0];
        memmove(f->rx, f->rx + 1, --f->rx_len);
        return v;
    case UART_IER:
        return dlab ? f->dlm : f->ier;
    case UART_IIR:
        v = (f->fcr & UART_FCR_ENABLE) ? UART_IIR_FIFO : 0;
        if ((f->ier & UART_IER_THRI) && f->thre_irq) {
            f->thre_irq = false;
            return v | UART_IIR_THRI;
        }
        return v | UART_IIR_NO_INT;
    case UART_LCR:
        return f->lcr;
    case UART_MCR:
        return f->mcr;
    case UART_LSR:
        return (f->rx_len ? UART_LSR_DR : 0) | UART_LSR_THRE | UART_LSR_TEMT;
    case UART_MSR:
        return f->msr_lines;
    default:
        return f->scr;
    }
}

void fake_uart_out(void *ctx, unsigned off, uint8_t val)
{
    struct fake_uart *f = ctx;
    bool dlab = f->lcr & UART_LCR_DLAB;
    switch (off) {
    case UART_TX:
        if (dlab)
            f->dll = val;
        else
            transmit(f, val, FROM_GUEST);
        return;
    case UART_IER:
        if (dlab) {
            f->dlm = val;
        } else {
            if ((val & UART_IER_THRI) && !(f->ier & UART_IER_THRI))
                f->thre_irq = true;
            f->ier = val & 0x0f;
        }
        return;
    case UART_FCR:
        f->fcr = val;
        if (val & UART_FCR_CLEAR_RCVR)
            f->rx_len = 0;
        return;
    case UART_LCR:
        f->lcr = val;
        return;
    case UART_MCR:
        f->mcr = val;
        if (val & UART_MCR_LOOP)
            f->loop_seen = true;
        return;
    case UART_SCR:
        f->scr = val;
        return;
    default:
        return;
    }
}

static void fake_tx(void *ctx, uint8_t byte)
{
    struct fake_uart *f = ctx;
    if (f->lcr & UART_LCR_DLAB)
        f->tx_with_dlab = true;
    transmit(f, byte, FROM_VMM);
}

static void fake_tx_drain(void *ctx)
{
    struct fake_uart *f = ctx;
    f->tx_drains++;
}

struct uart_hw fake_uart_hw(struct fake_uart *f)
{
    return (struct uart_hw){.ctx = f,
                            .in = fake_uart_in,
                            .out = fake_uart_out,
                            .tx = fake_tx,
                            .tx_drain = fake_tx_drain};
}

uint8_t guest_in(struct uart_mux *m, struct fake_uart *f, unsigned off, uint64_t now)
{
    if (uart_mux_trap_mask(m) & (1u << off))
        return uart_mux_in(m, off, now);
    return fake_uart_in(f, off);
}

void guest_out(struct uart_mux *m, struct fake_uart *f, unsigned off, uint8_t val, uint64_t now)
{
    if (uart_mux_trap_mask(m) & (1u << off))
        uart_mux_out(m, off, val, now);
    else
        fake_uart_out(f, off, val);
}
