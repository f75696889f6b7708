# The shared UART (vmm/dev/): the 16550 multiplexer is pure logic, in vmm.elf (every file under
# vmm/) and unchanged in the host test and fuzzer below; uart_console.c is its VMM wiring (port I/O,
# TSC), vmm/vcpu/exit/exit_io.c the I/O-exit shim.

HOST_TESTS += test_uart_mux
test_uart_mux_SRCS := tests/unit/dev/test_uart_mux.c tests/fakes/uart_fake.c vmm/dev/uart_mux.c

FUZZERS += fuzz_uart_mux
fuzz_uart_mux_SRCS := tests/fuzz/fuzz_uart_mux.c tests/fakes/uart_fake.c vmm/dev/uart_mux.c

# the transmit credit of vmm/dev/serial.c (vmm/dev/uart_tx.h, header-only) against a 16550A FIFO model
HOST_TESTS += test_uart_tx
test_uart_tx_SRCS := tests/unit/dev/test_uart_tx.c
