/* SPDX-License-Identifier: MIT */
#ifndef PTV_SERIAL_H
#define PTV_SERIAL_H

#include <stdint.h>
#include <stddef.h>

/*
 * 16550 UART on an I/O port, polled; port 0 disables output.  This is the raw
 * driver (the loader uses it as it is).  In the VMM every byte goes through the
 * multiplexer that shares the UART with the guest (vmm/dev/uart_console.h).
 */
void serial_init(uint16_t port, uint32_t baud);
void serial_write(const char *s, size_t n); /* raw: "\n" -> "\r\n" */

uint16_t serial_port(void);      /* 0: no UART */
uint8_t serial_in(unsigned off); /* register at port + off */
void serial_out(unsigned off, uint8_t val);
void serial_tx(uint8_t byte); /* wait for THRE (bounded), write THR (DLAB must be 0) */
void serial_tx_drain(void);   /* wait for TEMT (bounded) */

#endif
