/* SPDX-License-Identifier: MIT */
/*
 * The 16550 multiplexer (vmm/dev/uart_mux.c) over a fake 16550, driven as its
 * users drive a UART: Linux's 8250 probe (drivers/tty/serial/8250/8250_port.c
 * autoconfig(), autoconfig_16550a(), size_fifo()), OVMF's serial library
 * (MdePkg BaseSerialPortLib16550: SerialPortInitialize/SerialPortWrite), and a
 * hostile guest that turns loopback on and makes the VMM talk.  Guest accesses
 * are routed as the I/O bitmap routes them (trapped offsets to the mux, the
 * rest straight to the fake).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "fakes/uart_fake.h"

#define HOLD 1000

static struct fake_uart f;
static struct uart_mux m;
static uint64_t now;

static void setup(void)
{
    fake_uart_init(&f);
    struct uart_hw hw = fake_uart_hw(&f);
    uart_mux_init(&m, &hw, HOLD, "[drop] ");
    now = 0;
}

static uint8_t gin(unsigned off)
{
    return guest_in(&m, &f, off, now);
}

static void gout(unsigned off, uint8_t val)
{
    guest_out(&m, &f, off, val, now);
}

static void guest_puts(const char *s)
{
    for (; *s; s++) {
        while (!(gin(UART_LSR) & UART_LSR_THRE))
            ;
        gout(UART_TX, (uint8_t)*s);
    }
}

static void vmm_puts(const char *s, bool urgent)
{
    uart_mux_vmm_write(&m, s, strlen(s), urgent, now);
}

/* the wire as a string */
static const char *wire(void)
{
    static char buf[FAKE_WIRE_MAX + 1];
    memcpy(buf, f.wire, f.wire_len);
    buf[f.wire_len] = 0;
    return buf;
}

static unsigned from_vmm_bytes(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < f.wire_len; i++)
        n += f.from[i] == FROM_VMM;
    return n;
}

/* ---- Linux 8250 ---- */

static unsigned linux_size_fifo(void)
{
    uint8_t old_lcr = gin(UART_LCR);
    gout(UART_LCR, 0);
    uint8_t old_mcr = gin(UART_MCR);
    gout(UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RCVR | 0x04);
    gout(UART_MCR, UART_MCR_LOOP);
    gout(UART_LCR, UART_LCR_DLAB); /* UART_LCR_CONF_MODE_A */
    unsigned old_dl = gin(UART_DLL) | gin(UART_DLM) << 8;
    gout(UART_DLL, 1);
    gout(UART_DLM, 0);
    gout(UART_LCR, 0x03);
    for (unsigned c = 0; c < 256; c++)
        gout(UART_TX, (uint8_t)c);
    unsigned count;
    for (count = 0; (gin(UART_LSR) & UART_LSR_DR) && count < 256; count++)
        assert_int_equal(gin(UART_RX), count); /* the guest's own bytes, in order */
    gout(UART_FCR, UART_FCR_ENABLE);
    gout(UART_MCR, old_mcr);
    gout(UART_LCR, UART_LCR_DLAB);
    gout(UART_DLL, old_dl & 0xff);
    gout(UART_DLM, old_dl >> 8);
    gout(UART_LCR, old_lcr);
    return count;
}

static void test_linux_8250_autoconfig(void **state)
{
    (void)state;
    setup();
    /* existence test on IER */
    uint8_t scratch = gin(UART_IER);
    gout(UART_IER, 0);
    uint8_t s2 = gin(UART_IER) & 0x0f;
    gout(UART_IER, 0x0f);
    uint8_t s3 = gin(UART_IER) & 0x0f;
    gout(UART_IER, scratch);
    assert_int_equal(s2, 0);
    assert_int_equal(s3, 0x0f);
    /* the loopback test (ports without UPF_SKIP_TEST) */
    uint8_t save_mcr = gin(UART_MCR), save_lcr = gin(UART_LCR);
    gout(UART_MCR, UART_MCR_LOOP | 0x0a);
    uint8_t status1 = gin(UART_MSR) & 0xf0;
    gout(UART_MCR, save_mcr);
    assert_int_equal(status1, UART_MSR_DCD | UART_MSR_CTS);
    /* EFR cleared through LCR 0xbf, then the FIFO probe: a 16550A */
    gout(UART_LCR, 0xbf);
    gout(UART_FCR, 0);
    gout(UART_LCR, 0);
    gout(UART_FCR, UART_FCR_ENABLE);
    assert_int_equal(gin(UART_IIR) & UART_IIR_FIFO, UART_IIR_FIFO);
    /* scratch register */
    gout(UART_SCR, 0xa5);
    assert_int_equal(gin(UART_SCR), 0xa5);
    gout(UART_SCR, 0x5a);
    assert_int_equal(gin(UART_SCR), 0x5a);
    assert_int_equal(linux_size_fifo(), UART_MUX_FIFO);
    gout(UART_LCR, save_lcr);
    gout(UART_MCR, save_mcr);
    gout(UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RCVR | 0x04);
    gin(UART_RX);
    gout(UART_IER, 0);

    assert_false(f.loop_seen);       /* the real UART never looped */
    assert_int_equal(f.wire_len, 0); /* every byte written in loopback stayed virtual */
    assert_int_equal(f.mcr, save_mcr);
    assert_int_equal(f.dll, 1); /* divisor restored */
    assert_int_equal(f.lcr, save_lcr);
    assert_int_equal(uart_mux_trap_mask(&m), UART_TRAP_NORMAL);
    /* and the console works afterwards */
    guest_puts("console\r\n");
    assert_string_equal(wire(), "console\r\n");
}

/* without FIFOs (16450 mode) RBR holds one byte; a second one overruns it */
static void test_loop_16450_overrun(void **state)
{
    (void)state;
    setup();
    gout(UART_FCR, 0);
    gout(UART_MCR, UART_MCR_LOOP);
    assert_int_equal(gin(UART_IIR) & UART_IIR_FIFO, 0);
    gout(UART_TX, 'a');
    gout(UART_TX, 'b');
    assert_int_equal(gin(UART_LSR) & (UART_LSR_DR | UART_LSR_OE), UART_LSR_DR | UART_LSR_OE);
    assert_int_equal(gin(UART_LSR) & UART_LSR_OE, 0); /* read clears OE */
    assert_int_equal(gin(UART_RX), 'b');
    assert_int_equal(gin(UART_LSR) & UART_LSR_DR, 0);
    gout(UART_MCR, 0x03);
    assert_false(f.loop_seen);
}

/* MSR in loopback: status from MCR, deltas latched until read (PC16550D 8.6.8) */
static void test_loop_msr_and_iir(void **state)
{
    (void)state;
    setup(); /* the lines: DCD, DSR, CTS on */
    gout(UART_MCR, UART_MCR_LOOP | UART_MCR_RTS | UART_MCR_OUT2);
    /* DSR went away (DTR is off): DDSR; DCD and CTS stay on */
    assert_int_equal(gin(UART_MSR), UART_MSR_DCD | UART_MSR_CTS | UART_MSR_DDSR);
    assert_int_equal(gin(UART_MSR), UART_MSR_DCD | UART_MSR_CTS);
    assert_int_equal(gin(UART_MCR), UART_MCR_LOOP | UART_MCR_RTS | UART_MCR_OUT2);
    gout(UART_MCR, UART_MCR_LOOP | UART_MCR_DTR | UART_MCR_OUT1);
    assert_int_equal(gin(UART_MSR),
                     UART_MSR_RI | UART_MSR_DSR | UART_MSR_DCTS | UART_MSR_DDSR | UART_MSR_DDCD);
    gout(UART_MCR, UART_MCR_LOOP);
    assert_int_equal(gin(UART_MSR), UART_MSR_TERI | UART_MSR_DDSR); /* RI on -> off */
    /* the real UART is not looped, its OUT1 / OUT2 are inactive meanwhile, and the VMM's
     * DTR / RTS stay up (the VMM's line) */
    assert_int_equal(f.mcr, UART_MCR_DTR | UART_MCR_RTS);
    /* IIR: receive data, then THRE, then nothing; MSI on a delta */
    gout(UART_IER, UART_IER_RDI | UART_IER_THRI | UART_IER_MSI);
    gout(UART_TX, 'x');
    assert_int_equal(gin(UART_IIR), UART_IIR_FIFO | UART_IIR_RDI);
    assert_int_equal(gin(UART_RX), 'x');
    assert_int_equal(gin(UART_IIR), UART_IIR_FIFO | UART_IIR_THRI);
    assert_int_equal(gin(UART_IIR), UART_IIR_FIFO | UART_IIR_NO_INT); /* read cleared THRE */
    gout(UART_MCR, UART_MCR_LOOP | UART_MCR_RTS);
    assert_int_equal(gin(UART_IIR), UART_IIR_FIFO | UART_IIR_MSI);
    gin(UART_MSR);
    assert_int_equal(gin(UART_IIR), UART_IIR_FIFO | UART_IIR_NO_INT);
    gout(UART_IER, 0);
    /* leaving loopback gives the real UART the guest's MCR (without LOOP) */
    gout(UART_MCR, UART_MCR_DTR | UART_MCR_RTS | UART_MCR_OUT2);
    assert_int_equal(f.mcr, UART_MCR_DTR | UART_MCR_RTS | UART_MCR_OUT2);
    assert_false(f.loop_seen);
}

/* ---- OVMF ---- */

static void ovmf_init(void)
{
    gout(UART_LCR, UART_LCR_DLAB);
    gout(UART_DLL, 1);
    gout(UART_DLM, 0);
    gout(UART_LCR, 0x03);
    gout(UART_FCR, 0);
    gout(UART_FCR, UART_FCR_ENABLE);
    gout(UART_IER, 0);
    gout(UART_MCR, 0);
}

static void ovmf_write(const char *s) /* SerialPortWrite: wait for an empty FIFO, fill it */
{
    size_t n = strlen(s);
    while (n) {
        while ((gin(UART_LSR) & (UART_LSR_TEMT | UART_LSR_THRE)) != (UART_LSR_TEMT | UART_LSR_THRE))
            ;
        for (unsigned i = 0; i < 16 && n; i++, n--)
            gout(UART_TX, (uint8_t)*s++);
    }
}

static void test_ovmf_console(void **state)
{
    (void)state;
    setup();
    ovmf_init();
    ovmf_write("\x1b[2J\x1b[01;01HBdsDxe: loading Boot0001\r\n");
    vmm_puts("[cpu0 vmm] between two lines\n", false);
    ovmf_write("ptvisor: loader started\r\n");
    assert_string_equal(wire(), "\x1b[2J\x1b[01;01HBdsDxe: loading Boot0001\r\n"
                                "[cpu0 vmm] between two lines\r\n"
                                "ptvisor: loader started\r\n");
    assert_int_equal(f.dll, 1);
    assert_int_equal(f.lcr, 0x03);
    assert_false(f.loop_seen);
}

/* ---- the attacker ---- */

/* loopback on, the VMM logs (a line, an error), the guest drains RBR: nothing comes */
static void test_attack_loop_reads_no_vmm_byte(void **state)
{
    (void)state;
    setup();
    gout(UART_MCR, UART_MCR_LOOP | 0x03);
    vmm_puts("[cpu0 ept] warning: guest read of VMM memory blocked\n", false);
    vmm_puts("[cpu0 vmx] error: something urgent\n", true);
    vmm_puts("[cpu0 dump] raw ", false);
    vmm_puts("text\n", false);
    unsigned got = 0;
    for (unsigned i = 0; i < 512 && (gin(UART_LSR) & UART_LSR_DR); i++, got++)
        gin(UART_RX);
    assert_int_equal(got, 0);
    assert_false(f.loop_seen);
    /* the lines went out on the wire, whole */
    assert_string_equal(wire(), "[cpu0 ept] warning: guest read of VMM memory blocked\r\n"
                                "[cpu0 vmx] error: something urgent\r\n"
                                "[cpu0 dump] raw text\r\n");
    /* what the guest writes itself does come back */
    gout(UART_TX, 'p');
    gout(UART_TX, 't');
    assert_int_equal(gin(UART_RX), 'p');
    assert_int_equal(gin(UART_RX), 't');
    gout(UART_MCR, 0x03);
    assert_int_equal(f.mcr, 0x03);
}

/* bytes arriving on the line, read by the guest from RBR one by one */
static void line_rx(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        f.rx[f.rx_len++] = (uint8_t)s[i];
        assert_int_equal(gin(UART_RX), (uint8_t)s[i]); /* the guest still gets every byte */
    }
}

/* the host's dump request (UART_DUMP_REQUEST) is seen in what the guest reads, and only there */
static void test_dump_request(void **state)
{
    (void)state;
    setup();
    gout(UART_LCR, 0x03);
    line_rx("ls\r", 3);
    assert_int_equal(m.dump_requests, 0);
    line_rx(UART_DUMP_REQUEST, UART_DUMP_REQUEST_LEN);
    assert_int_equal(m.dump_requests, 1);
    line_rx("\033[97x88~", 9); /* broken inside: nothing */
    line_rx("\033[978", 6);    /* cut, then a new start: the ESC restarts it */
    line_rx(UART_DUMP_REQUEST UART_DUMP_REQUEST, 2 * UART_DUMP_REQUEST_LEN);
    assert_int_equal(m.dump_requests, 3);
    /* with DLAB set offset 0 is the divisor latch, not RBR */
    gout(UART_LCR, 0x83);
    for (unsigned i = 0; i < UART_DUMP_REQUEST_LEN; i++) {
        f.dll = (uint8_t)UART_DUMP_REQUEST[i];
        gin(UART_RX);
    }
    gout(UART_LCR, 0x03);
    assert_int_equal(m.dump_requests, 3);
    /* a guest cannot forge it through its own (virtual) loopback */
    gout(UART_MCR, UART_MCR_LOOP | 0x03);
    for (unsigned i = 0; i < UART_DUMP_REQUEST_LEN; i++) {
        gout(UART_TX, (uint8_t)UART_DUMP_REQUEST[i]);
        assert_int_equal(gin(UART_RX), (uint8_t)UART_DUMP_REQUEST[i]);
    }
    gout(UART_MCR, 0x03);
    assert_int_equal(m.dump_requests, 3);
}

/* Linux's panic line in what the guest transmits, and only there */
static void test_guest_panic_line(void **state)
{
    (void)state;
    setup();
    gout(UART_LCR, 0x03);
    guest_puts("[    1.234] Kernel panic - not synced? no\n");
    guest_puts("Kernel pan");
    assert_int_equal(m.guest_panics, 0);
    guest_puts("KKernel panic - not syncing: no, not at the line's start\n");
    assert_int_equal(m.guest_panics, 0);
    guest_puts("Kernel panic - not syncing: sysrq triggered crash\n");
    assert_int_equal(m.guest_panics, 1);
    assert_non_null(strstr(wire(), "Kernel panic - not syncing: sysrq")); /* still sent */
    gout(UART_MCR, UART_MCR_LOOP | 0x03); /* its own loopback is not the console */
    for (const char *p = UART_GUEST_PANIC; *p; p++) {
        gout(UART_TX, (uint8_t)*p);
        gin(UART_RX);
    }
    gout(UART_MCR, 0x03);
    assert_int_equal(m.guest_panics, 1);
    guest_puts("[    9.9][    T1] " UART_GUEST_PANIC ": again\n");
    assert_int_equal(m.guest_panics, 2); /* counted: each one dumps (no once), budget allowing */
}

/* a user's spoofed panic line spends nothing that a real panic needs */
static void test_attack_spoofed_panic(void **state)
{
    (void)state;
    setup();
    /* written to the tty (interrupt-driven: IER.THRI on), or in the middle of a line the
     * kernel prints (a file name): not counted */
    gout(UART_IER, UART_IER_THRI | UART_IER_RDI);
    for (unsigned i = 0; i < 100; i++)
        guest_puts(UART_GUEST_PANIC ": spoofed by a user\n");
    gout(UART_IER, 0);
    guest_puts("[   3.1] EXT4-fs error: file " UART_GUEST_PANIC "\n");
    guest_puts("[   3.2] x[1] " UART_GUEST_PANIC "\n");
    assert_int_equal(m.guest_panics, 0);
    assert_int_equal(m.panics_limited, 0);
    /* what passes the gate (root via /dev/kmsg) has a budget, never a once: a storm costs at
     * most UART_PANIC_BURST dumps, and the budget comes back for the real panic */
    now = 1000;
    for (unsigned i = 0; i < 50; i++)
        guest_puts("[   4.0] " UART_GUEST_PANIC ": from /dev/kmsg\n");
    assert_int_equal(m.guest_panics, UART_PANIC_BURST);
    assert_int_equal(m.panics_limited, 50 - UART_PANIC_BURST);
    now += UART_PANIC_REFILL - 1;
    guest_puts(UART_GUEST_PANIC ": still limited\n");
    assert_int_equal(m.guest_panics, UART_PANIC_BURST);
    now += 1;
    guest_puts("[  99.0] " UART_GUEST_PANIC ": the real one\n");
    assert_int_equal(m.guest_panics, UART_PANIC_BURST + 1);
    now += 10 * UART_PANIC_REFILL; /* the budget refills up to the burst, no further */
    for (unsigned i = 0; i < 5; i++)
        guest_puts(UART_GUEST_PANIC "\n");
    assert_int_equal(m.guest_panics, 2 * UART_PANIC_BURST + 1);
}

/* a guest line written in pieces around VMM lines comes out whole */
static void test_partial_guest_line_stays_whole(void **state)
{
    (void)state;
    setup();
    guest_puts("ATK part1 ");
    vmm_puts("[cpu0 ept] warning: one\n", false);
    vmm_puts("[cpu0 ept] warning: two\n", false);
    assert_string_equal(wire(), "ATK part1 ");
    guest_puts("part2\r\n");
    assert_string_equal(wire(), "ATK part1 part2\r\n"
                                "[cpu0 ept] warning: one\r\n"
                                "[cpu0 ept] warning: two\r\n");
    assert_int_equal(m.broken, 0);
    assert_int_equal(m.emitted, 2);
    assert_true(f.tx_drains > 0); /* the guest finds the transmitter empty again */
}

/* a full ring drops the newest lines and says how many, after the flush */
static void test_ring_full_counts_drops(void **state)
{
    (void)state;
    setup();
    guest_puts("open");
    char line[64];
    unsigned n = 0;
    for (n = 0; m.dropped < 3 && n < 1000; n++) {
        snprintf(line, sizeof(line), "[cpu0 t] line %04u padding padding padding\n", n);
        vmm_puts(line, false);
    }
    assert_int_equal(m.dropped, 3);
    uint64_t kept = m.ring_lines;
    assert_int_equal(kept + 3, n);
    guest_puts("\r\n");
    assert_int_equal(m.emitted, kept);
    const char *w = wire();
    assert_non_null(strstr(w, "[drop] 3 VMM lines dropped"));
    assert_non_null(strstr(w, "line 0000"));
    snprintf(line, sizeof(line), "line %04u", n - 1); /* the newest were dropped */
    assert_null(strstr(w, line));
    snprintf(line, sizeof(line), "line %04u", (unsigned)kept - 1);
    const char *last = strstr(w, line);
    assert_non_null(last);
    assert_true(strstr(w, "[drop]") > last); /* the count follows the lines it kept */
    assert_int_equal(m.drop_reported, 3);
    assert_int_equal(m.broken, 0);
}

/* an urgent line (error, crash) ends an open guest line first */
static void test_urgent_line_breaks_in(void **state)
{
    (void)state;
    setup();
    guest_puts("prompt# ");
    vmm_puts("[cpu0 panic] error: VMM halted\n", true);
    assert_string_equal(wire(), "prompt# \r\n[cpu0 panic] error: VMM halted\r\n");
    assert_int_equal(m.broken, 1);
    vmm_puts("dump line\n", false); /* the guest's line is closed now: straight out */
    assert_string_equal(wire() + strlen("prompt# \r\n[cpu0 panic] error: VMM halted\r\n"),
                        "dump line\r\n");
}

/* a queued line waits at most hold_ticks for the guest's line end */
static void test_hold_deadline(void **state)
{
    (void)state;
    setup();
    guest_puts("login: ");
    now = 5;
    vmm_puts("[cpu0 x] late\n", false);
    now = 5 + HOLD - 1;
    gin(UART_MCR); /* any trapped access runs the mux */
    assert_string_equal(wire(), "login: ");
    now = 5 + HOLD;
    gin(UART_MCR);
    assert_string_equal(wire(), "login: \r\n[cpu0 x] late\r\n");
    assert_int_equal(m.broken, 1);
}

/* the VMM writes while the guest has DLAB set: THR reached, the guest's divisor kept */
static void test_vmm_line_with_dlab_set(void **state)
{
    (void)state;
    setup();
    gout(UART_LCR, UART_LCR_DLAB | 0x03);
    gout(UART_DLL, 12);
    vmm_puts("[cpu0 x] hello\n", false);
    assert_false(f.tx_with_dlab);
    assert_int_equal(f.dll, 1); /* the chip keeps the VMM's speed */
    assert_int_equal(f.lcr, 0x03);
    assert_string_equal(wire(), "[cpu0 x] hello\r\n");
    assert_int_equal(gin(UART_LCR), UART_LCR_DLAB | 0x03);
    assert_int_equal(gin(UART_DLL), 12); /* the guest's own divisor */
}

/* the chip as the VMM programmed it (fake_uart_init + the mux's DLAB never set) */
static void assert_chip_is_the_vmms(void)
{
    assert_int_equal(f.dll, 1);
    assert_int_equal(f.dlm, 0);
    assert_int_equal(f.lcr, 0x03);
    assert_true(f.fcr & UART_FCR_ENABLE);
    assert_int_equal(f.mcr & ~(UART_MCR_OUT1 | UART_MCR_OUT2), UART_MCR_DTR | UART_MCR_RTS);
    assert_false(f.loop_seen);
    assert_false(f.tx_with_dlab);
    assert_true(uart_mux_line_intact(&m));
}

/* a guest that sets 50 baud, 7E2 with a break, FIFOs off and auto flow
 * control sees its own settings; the chip keeps the VMM's line, and the VMM's lines go out */
static void test_attack_line_settings(void **state)
{
    (void)state;
    setup();
    gout(UART_LCR, UART_LCR_DLAB | 0x5a); /* DLAB, break, even parity, 2 stop bits, 7 bits */
    assert_true(uart_mux_trap_mask(&m) & (1u << UART_DLM)); /* offset 1 is its DLM now */
    gout(UART_DLL, 0x00);
    gout(UART_DLM, 0x09); /* 115200 / 2304 = 50 baud */
    gout(UART_LCR, 0x5a);
    assert_false(uart_mux_trap_mask(&m) & (1u << UART_IER));
    gout(UART_FCR, 0);                                   /* FIFOs off */
    gout(UART_MCR, 0xe0 | UART_MCR_OUT2 | UART_MCR_DTR); /* AFE, prescaler, IrDA bits */
    guest_puts("slow?\n");
    vmm_puts("[cpu0 x] the VMM's line\n", false);
    assert_string_equal(wire(), "slow?\n[cpu0 x] the VMM's line\r\n");
    assert_chip_is_the_vmms();
    assert_int_equal(f.mcr, UART_MCR_DTR | UART_MCR_RTS | UART_MCR_OUT2); /* its IRQ gate */
    /* what the guest reads back: its own values (MCR bits 7:5 read 0 on a 16550) */
    assert_int_equal(gin(UART_LCR), 0x5a);
    assert_int_equal(gin(UART_MCR), UART_MCR_OUT2 | UART_MCR_DTR);
    assert_int_equal(gin(UART_IIR) & UART_IIR_FIFO, 0);
    gout(UART_LCR, UART_LCR_DLAB | 0x5a);
    assert_int_equal(gin(UART_DLL), 0x00);
    assert_int_equal(gin(UART_DLM), 0x09);
    gout(UART_LCR, 0x03);
    /* IER is the chip's again, and the FIFOs come back with their clears */
    gout(UART_IER, UART_IER_RDI);
    assert_int_equal(f.ier, UART_IER_RDI);
    f.rx[f.rx_len++] = 'z';
    gout(UART_FCR, UART_FCR_ENABLE | 0x80);
    assert_int_equal(f.rx_len, 0); /* switching FIFO mode cleared the receiver */
    assert_int_equal(f.fcr, UART_FCR_ENABLE | UART_FCR_CLEAR_RCVR | UART_FCR_CLEAR_XMIT | 0x80);
    assert_int_equal(gin(UART_IIR) & UART_IIR_FIFO, UART_IIR_FIFO);
    gout(UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_XMIT);
    assert_int_equal(f.fcr, UART_FCR_ENABLE | UART_FCR_CLEAR_XMIT);
    assert_chip_is_the_vmms();
    /* in loopback too */
    gout(UART_MCR, UART_MCR_LOOP | 0xe3);
    gout(UART_LCR, UART_LCR_DLAB);
    gout(UART_DLL, 0x80);
    gout(UART_DLM, 0x01);
    assert_int_equal(gin(UART_DLL), 0x80);
    assert_int_equal(gin(UART_DLM), 0x01);
    gout(UART_LCR, 0x03);
    gout(UART_MCR, 0x03);
    assert_chip_is_the_vmms();
    assert_int_equal(f.ier, UART_IER_RDI); /* the DLM writes never reached IER */
    f.mcr |= 0x20; /* what the self-check sees if auto flow control ever reached the chip */
    assert_false(uart_mux_line_intact(&m));
    f.mcr &= ~0x20;
    f.lcr = 0x83;
    assert_false(uart_mux_line_intact(&m));
    f.lcr = 0x03;
}

/* VMM text without a newline, and longer than a line, is cut, never lost */
static void test_vmm_long_and_partial_lines(void **state)
{
    (void)state;
    setup();
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    vmm_puts(big, false);
    vmm_puts("tail", false);
    uart_mux_flush(&m);
    assert_int_equal(from_vmm_bytes(), 599 + 4 + 3 * 2); /* three pieces, each "\r\n" */
    assert_int_equal(m.lines, 3);
    assert_int_equal(m.emitted, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linux_8250_autoconfig),
        cmocka_unit_test(test_loop_16450_overrun),
        cmocka_unit_test(test_loop_msr_and_iir),
        cmocka_unit_test(test_ovmf_console),
        cmocka_unit_test(test_attack_loop_reads_no_vmm_byte),
        cmocka_unit_test(test_partial_guest_line_stays_whole),
        cmocka_unit_test(test_ring_full_counts_drops),
        cmocka_unit_test(test_urgent_line_breaks_in),
        cmocka_unit_test(test_hold_deadline),
        cmocka_unit_test(test_vmm_line_with_dlab_set),
        cmocka_unit_test(test_vmm_long_and_partial_lines),
        cmocka_unit_test(test_dump_request),
        cmocka_unit_test(test_guest_panic_line),
        cmocka_unit_test(test_attack_spoofed_panic),
        cmocka_unit_test(test_attack_line_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
