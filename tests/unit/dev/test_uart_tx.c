/* SPDX-License-Identifier: MIT */
/*
 * The transmit credit (vmm/dev/uart_tx.h) against a model of a 16550A's transmit FIFO: the VMM's
 * bytes and the guest's forwarded ones interleaved, the line draining at random moments, the
 * FIFO must never take a 17th byte (a real chip drops it), and with the line always drained the
 * VMM reads LSR once per 16 of its bytes; without FIFOs it reads it before every byte.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "dev/uart_tx.h"

struct chip {
    unsigned fifo;  /* bytes waiting to go out */
    unsigned depth; /* 16 with FIFOs, 1 without */
    unsigned lsr_reads, overflows, vmm_overflows, sent;
};

static void chip_thr(struct chip *c, struct uart_tx *t, bool vmm)
{
    uart_tx_spend(t);
    if (c->fifo == c->depth) {
        c->overflows++;
        c->vmm_overflows += vmm;
    } else
        c->fifo++;
    c->sent++;
}

/* serial_tx as vmm/dev/serial.c does it: wait for THRE (the FIFO empty), then write */
static void vmm_byte(struct chip *c, struct uart_tx *t, unsigned *rng)
{
    if (uart_tx_need_thre(t)) {
        for (;;) {
            c->lsr_reads++;
            if (c->fifo == 0)
                break;
            /* the line sends some bytes while the VMM polls */
            *rng = *rng * 1103515245u + 12345u;
            unsigned out = 1 + (*rng >> 16) % 4;
            c->fifo = c->fifo > out ? c->fifo - out : 0;
        }
        uart_tx_refill(t);
    }
    chip_thr(c, t, true);
}

static void test_fifo_never_overflows(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 200; seed++) {
        struct chip c = {.depth = 16};
        struct uart_tx t;
        unsigned rng = seed;
        uart_tx_init(&t, 0xc1); /* IIR: FIFOs on, no interrupt pending */
        for (unsigned i = 0; i < 5000; i++) {
            rng = rng * 1103515245u + 12345u;
            unsigned r = (rng >> 16) % 10;
            if (r < 6)
                vmm_byte(&c, &t, &rng);
            else if (r < 8)
                chip_thr(&c, &t, false); /* a guest byte the multiplexer forwards, unasked */
            else {
                unsigned out = (rng >> 20) % 8; /* the line drains a little */
                c.fifo = c.fifo > out ? c.fifo - out : 0;
            }
        }
        /* a guest that writes faster than the line may fill the FIFO itself (as on bare
         * metal), but a byte of the VMM's always finds room */
        assert_int_equal(c.vmm_overflows, 0);
        assert_true(c.sent > 0);
    }
}

static void test_reads_per_byte(void **state)
{
    (void)state;
    unsigned rng = 7;
    /* FIFOs on, the line always drained by the time the VMM looks: one LSR read per 16 bytes */
    struct chip c = {.depth = 16};
    struct uart_tx t;
    uart_tx_init(&t, 0xc0);
    for (unsigned i = 0; i < 1600; i++) {
        if (uart_tx_need_thre(&t))
            c.fifo = 0;
        vmm_byte(&c, &t, &rng);
    }
    assert_int_equal(c.lsr_reads, 100);
    assert_int_equal(c.overflows, 0);
    /* no FIFOs (IIR[7:6] != 11: a 16450, or FIFOs that did not enable): a read per byte */
    const uint8_t no_fifo[] = {0x01, 0x41, 0x81};
    for (unsigned k = 0; k < 3; k++) {
        struct chip n = {.depth = 1};
        uart_tx_init(&t, no_fifo[k]);
        for (unsigned i = 0; i < 100; i++) {
            if (uart_tx_need_thre(&t))
                n.fifo = 0;
            vmm_byte(&n, &t, &rng);
        }
        assert_int_equal(n.lsr_reads, 100);
        assert_int_equal(n.overflows, 0);
    }
}

/* a forwarded guest byte spends the VMM's credit: after 15 of its own and one of the guest's the
 * VMM waits for THRE again; spending at 0 stays 0 */
static void test_guest_bytes_spend(void **state)
{
    (void)state;
    struct uart_tx t;
    uart_tx_init(&t, 0xc0);
    assert_true(uart_tx_need_thre(&t));
    uart_tx_refill(&t);
    for (unsigned i = 0; i < 15; i++) {
        assert_false(uart_tx_need_thre(&t));
        uart_tx_spend(&t);
    }
    uart_tx_spend(&t); /* the guest's */
    assert_true(uart_tx_need_thre(&t));
    uart_tx_spend(&t);
    assert_int_equal(t.credit, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_never_overflows),
        cmocka_unit_test(test_reads_per_byte),
        cmocka_unit_test(test_guest_bytes_spend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
