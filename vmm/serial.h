/* SPDX-License-Identifier: MIT */
#ifndef PTV_SERIAL_H
#define PTV_SERIAL_H

#include <stdint.h>
#include <stddef.h>

/* 16550 UART on an I/O port; port 0 disables output. */
void serial_init(uint16_t port, uint32_t baud);
void serial_write(const char *s, size_t n);

#endif
