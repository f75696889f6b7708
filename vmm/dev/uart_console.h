/* SPDX-License-Identifier: MIT */
/*
 * The VMM's console on the UART it shares with the guest: log lines go through
 * the 16550 multiplexer (uart_mux.h), and so do the guest's accesses to the
 * UART's ports, which the I/O-instruction exit handler (vcpu/exit/exit_io.c) hands
 * over.  One UART, one multiplexer, for the machine.
 */
#ifndef PTV_DEV_UART_CONSOLE_H
#define PTV_DEV_UART_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* VMM text; urgent: out now, ending an open guest line if need be (errors, crash dumps) */
void console_write(const char *s, size_t n, bool urgent);
/* a VMM line written now goes straight out (uart_mux_idle): a hint, read without the lock */
bool console_frame_ready(void);
/* everything queued goes out now */
void console_flush(void);
/* what a CPU waiting for the console does meanwhile (NULL: PAUSE); start-up sets smp_relax */
void uart_console_relax_with(void (*relax)(void *));

/* the UART's ports: base (0 = none) and the offsets to trap now (bit i = base + i) */
uint16_t console_port(void);
unsigned console_trap_mask(void);
/* console_trap_mask() as of the last multiplexer operation: cheap to compare */
extern volatile unsigned console_traps;
/* a guest IN/OUT of one byte at console_port() + off */
uint8_t console_guest_in(unsigned off);
void console_guest_out(unsigned off, uint8_t val);

/* the UART keeps the VMM's line settings (uart_mux_line_intact); true without a console */
bool console_line_intact(void);

/* Linux panic lines the guest printed so far (UART_GUEST_PANIC) */
uint64_t console_guest_panics(void);
/* the host's dump requests seen on the line so far (UART_DUMP_REQUEST) */
uint64_t console_dump_requests(void);
/* figures: VMM lines dropped so far, guest lines ended early by the overflow policy */
uint64_t console_dropped(void);
uint64_t console_broken(void);

#endif
