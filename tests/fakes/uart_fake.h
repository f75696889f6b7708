/* SPDX-License-Identifier: MIT */
/*
 * A fake 16550 standing in for the real UART under the multiplexer (host test
 * and fuzzer of vmm/dev/uart_mux.c).  It behaves like the hardware where the
 * multiplexer's guarantees are at stake: put in loopback it loops what is
 * transmitted (so a VMM byte would come back in RBR, as on the real chip), and
 * every byte it transmits is recorded with who sent it (the guest through a
 * THR write, or the VMM through tx()).
 */
#ifndef PTV_TEST_UART_FAKE_H
#define PTV_TEST_UART_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dev/uart_mux.h"

#define FAKE_WIRE_MAX (1u << 16)
enum { FROM_GUEST, FROM_VMM };

struct fake_uart {
    uint8_t ier, lcr, mcr, scr, dll, dlm, fcr, msr_lines;
    bool thre_irq;
    uint8_t rx[64];
    unsigned rx_len;
    bool loop_seen;     /* MCR.LOOP was ever written to the real UART */
    bool tx_with_dlab;  /* tx() was called with DLAB set */
    unsigned tx_drains; /* tx_drain() calls */
    uint8_t wire[FAKE_WIRE_MAX], from[FAKE_WIRE_MAX];
    size_t wire_len;
};

void fake_uart_init(struct fake_uart *f);
/* struct uart_hw callbacks on f */
struct uart_hw fake_uart_hw(struct fake_uart *f);
uint8_t fake_uart_in(void *ctx, unsigned off);
void fake_uart_out(void *ctx, unsigned off, uint8_t val);

/* a guest access as the I/O bitmap routes it: trapped offsets to the mux, the rest to f */
uint8_t guest_in(struct uart_mux *m, struct fake_uart *f, unsigned off, uint64_t now);
void guest_out(struct uart_mux *m, struct fake_uart *f, unsigned off, uint8_t val, uint64_t now);

#endif
