# The shared UART (vmm/dev/): the 16550 multiplexer is pure logic, compiled into the VMM
# (UART_SRCS, picked up by mk/80-vmm.mk) and unchanged into the host test and fuzzer below;
# uart_console.c is its VMM wiring (port I/O, TSC), vmm/vcpu/exit/exit_io.c the I/O-exit shim.

UART_SRCS := vmm/dev/uart_mux.c vmm/dev/uart_console.c

HOST_TESTS += test_uart_mux
test_uart_mux_SRCS := tests/unit/dev/test_uart_mux.c tests/fakes/uart_fake.c vmm/dev/uart_mux.c

FUZZERS += fuzz_uart_mux
fuzz_uart_mux_SRCS := tests/fuzz/fuzz_uart_mux.c tests/fakes/uart_fake.c vmm/dev/uart_mux.c

# the transmit credit of vmm/dev/serial.c (vmm/dev/uart_tx.h, header-only) against a 16550A FIFO model
HOST_TESTS += test_uart_tx
test_uart_tx_SRCS := tests/unit/dev/test_uart_tx.c
