/* SPDX-License-Identifier: MIT */
/* 16550 UART driver: polled transmit only. */
#include "dev/serial.h"
#include "hw/cpu.h"
#include "dev/uart_tx.h"

#define UART_THR      0 /* transmit holding (DLAB=0) */
#define UART_DLL      0 /* divisor latch low (DLAB=1) */
#define UART_IER      1
#define UART_DLM      1
#define UART_FCR      2
#define UART_IIR      2 /* read */
#define UART_LCR      3
#define UART_MCR      4
#define UART_LSR      5
#define UART_LCR_8N1  0x03
#define UART_LCR_DLAB 0x80
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40
#define UART_CLOCK    115200u
#define UART_SPIN_MAX 100000u /* bounded waits: a missing UART must not hang the VMM */

static uint16_t uart_port;
/* the transmit credit (dev/uart_tx.h): 16 bytes per LSR read with working FIFOs */
static struct uart_tx tx = {.depth = 1};

void serial_init(uint16_t port, uint32_t baud)
{
    uart_port = port;
    if (!port)
        return;
    uint32_t div = baud ? UART_CLOCK / baud : 1;
    if (!div)
        div = 1;
    outb(port + UART_IER, 0);
    outb(port + UART_LCR, UART_LCR_DLAB);
    outb(port + UART_DLL, div & 0xff);
    outb(port + UART_DLM, (div >> 8) & 0xff);
    outb(port + UART_LCR, UART_LCR_8N1);
    outb(port + UART_FCR, 0x07); /* enable + clear FIFOs */
    outb(port + UART_MCR, 0x03); /* DTR, RTS */
    uart_tx_init(&tx, inb(port + UART_IIR));
}

uint16_t serial_port(void)
{
    return uart_port;
}

uint8_t serial_in(unsigned off)
{
    return inb((uint16_t)(uart_port + off));
}

void serial_out(unsigned off, uint8_t val)
{
    if (off == UART_THR) /* the multiplexer never sets DLAB: offset 0 is THR */
        uart_tx_spend(&tx);
    outb((uint16_t)(uart_port + off), val);
}

static void wait_lsr(uint8_t bit)
{
    for (unsigned i = 0; i < UART_SPIN_MAX && !(inb(uart_port + UART_LSR) & bit); i++)
        pause();
}

void serial_tx(uint8_t byte)
{
    if (uart_tx_need_thre(&tx)) {
        wait_lsr(UART_LSR_THRE);
        uart_tx_refill(&tx);
    }
    uart_tx_spend(&tx);
    outb(uart_port + UART_THR, byte);
}

void serial_tx_drain(void)
{
    wait_lsr(UART_LSR_TEMT);
}

void serial_write(const char *s, size_t n)
{
    if (!uart_port)
        return;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            serial_tx('\r');
        serial_tx((uint8_t)s[i]);
    }
}
