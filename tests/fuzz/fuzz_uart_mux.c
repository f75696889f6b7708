/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: random guest I/O to the shared UART (every register, loopback on and
 * off, DLAB, console bytes) interleaved with VMM lines (whole, in two pieces,
 * urgent), time steps and flushes, through the real multiplexer
 * (vmm/dev/uart_mux.c) over the fake 16550 of tests/fakes/uart_fake.c.
 * Invariants:
 *   - the real UART is never put in loopback, and never sent a VMM byte with DLAB set;
 *   - the chip keeps the VMM's line (divisor, LCR, FIFOs on, DTR/RTS up, MCR bits 7:4
 *     clear) while the guest reads back its own LCR, divisor, MCR and FIFO state;
 *   - a panic line counts only as the last byte of the pattern, never while the chip's
 *     IER.THRI is on, and within the budget (UART_PANIC_BURST, one per UART_PANIC_REFILL);
 *   - what the guest reads from RBR in loopback is its own bytes, in order (the
 *     VMM's bytes are >= 0x80 here, the guest's loopback bytes < 0x80);
 *   - the guest's console bytes reach the wire exactly, in order;
 *   - VMM output starts only where the guest's line is closed, except a break
 *     ("\r\n" first, counted in `broken`) that the policy allows: an urgent
 *     write, a flush, or a queued line older than hold_ticks;
 *   - every VMM line is transmitted whole, once, in order, or counted as
 *     dropped, and the "N VMM lines dropped" reports add up (after a final flush).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fakes/uart_fake.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

#define HOLD      1000
#define MAX_LINES 4096
#define VMM_TAG   0xf0 /* first byte of a VMM line; then 2 seq bytes, filler, '\n' */
#define DROP_TAG  0xfe /* the drop report's prefix */

static struct fake_uart f;
static struct uart_mux m;
static uint64_t now;

static struct {
    uint64_t t;
    unsigned len; /* bytes before '\n' */
} line[MAX_LINES];
static unsigned nlines;

/* guest side */
static bool g_loop, g_dlab, g_fifo;
static uint8_t g_lcr, g_dll, g_dlm, g_mcr;
static uint64_t panic_t[64]; /* when the counted panic lines were counted */
static unsigned npanics;
static uint8_t g_out[FAKE_WIRE_MAX]; /* console bytes the guest sent */
static size_t g_out_len;
static uint8_t g_loopw[1 << 16]; /* bytes it wrote in loopback */
static size_t g_loopw_len, g_loopw_pos;
static uint8_t g_last_rx;

/* wire scan */
static size_t scanned, g_seen;
static bool open_line; /* the guest's line, as the wire shows it */
static int next_seq;   /* next VMM line expected (lower ones: emitted or dropped) */
static uint64_t gaps, reported, broken_seen;

static unsigned rd16(const uint8_t *p)
{
    return (unsigned)(p[0] & 0x7f) << 7 | (p[1] & 0x7f);
}

/* one VMM run [i, end): optional break, then whole lines */
static size_t scan_vmm_run(size_t i, size_t end, bool allowed_break, uint64_t *breaks)
{
    const uint8_t *w = f.wire;
    if (open_line) {
        CHECK(allowed_break && end - i >= 2 && w[i] == '\r' && w[i + 1] == '\n');
        i += 2;
        open_line = false;
        (*breaks)++;
    }
    while (i < end) {
        size_t eol = i;
        while (eol + 1 < end && !(w[eol] == '\r' && w[eol + 1] == '\n'))
            eol++;
        CHECK(eol + 1 < end); /* a VMM line never ends inside the run: it is whole */
        if (w[i] == VMM_TAG) {
            CHECK(eol - i >= 3);
            unsigned seq = rd16(w + i + 1);
            CHECK(seq < nlines && (int)seq >= next_seq);
            CHECK(eol - i == line[seq].len);
            gaps += seq - next_seq;
            next_seq = (int)seq + 1;
        } else {
            CHECK(w[i] == DROP_TAG);
            uint64_t n = 0;
            for (size_t k = i + 1; k < eol && w[k] >= '0' && w[k] <= '9'; k++)
                n = n * 10 + (w[k] - '0');
            CHECK(n > 0);
            reported += n;
        }
        i = eol + 2;
    }
    return i;
}

/* check the wire written since the last scan; allowed_break: the policy permits one */
static void scan(bool urgent)
{
    uint64_t breaks = 0;
    size_t end = f.wire_len;
    for (size_t i = scanned; i < end;) {
        if (f.from[i] == FROM_GUEST) {
            CHECK(g_seen < g_out_len && f.wire[i] == g_out[g_seen]);
            g_seen++;
            open_line = f.wire[i] != '\n';
            i++;
            continue;
        }
        size_t j = i;
        while (j < end && f.from[j] == FROM_VMM)
            j++;
        bool allowed = urgent;
        if (!allowed && open_line && j - i >= 5 && f.wire[i + 2] == VMM_TAG) {
            unsigned seq = rd16(f.wire + i + 3);
            allowed = seq < nlines && now - line[seq].t >= HOLD;
        }
        i = scan_vmm_run(i, j, allowed, &breaks);
    }
    scanned = end;
    CHECK(g_seen == g_out_len);              /* every console byte is out at once */
    CHECK(breaks == m.broken - broken_seen); /* every break counted, none unseen */
    broken_seen = m.broken;
    CHECK(m.loop == g_loop);
    CHECK(!f.loop_seen && !f.tx_with_dlab);
    /* the VMM's line: fake_uart_init's settings, whatever the guest did */
    CHECK(f.dll == 1 && f.dlm == 0 && f.lcr == 0x03 && (f.fcr & UART_FCR_ENABLE));
    CHECK((f.mcr & ~UART_MCR_GUEST_HW) == (UART_MCR_DTR | UART_MCR_RTS));
}

static void vmm_line(const uint8_t *d, size_t left, bool urgent)
{
    if (nlines >= MAX_LINES)
        return;
    uint8_t buf[200];
    unsigned len = 3 + (left ? d[0] % 150 : 0), seq = nlines;
    buf[0] = VMM_TAG;
    buf[1] = (uint8_t)(0x80 | (seq >> 7));
    buf[2] = (uint8_t)(0x80 | (seq & 0x7f));
    memset(buf + 3, 0x81, len - 3);
    buf[len] = '\n';
    line[nlines++] = (typeof(line[0])){.t = now, .len = len};
    size_t cut = left > 1 ? d[1] % (len + 1) : len + 1;
    uart_mux_vmm_write(&m, (const char *)buf, cut, false, now);
    uart_mux_vmm_write(&m, (const char *)buf + cut, len + 1 - cut, urgent, now);
}

/* a panic line just counted: the gate and the budget (uart_mux.h) held */
static void panic_counted(uint8_t last)
{
    CHECK(last == (uint8_t)UART_GUEST_PANIC[UART_GUEST_PANIC_LEN - 1]);
    CHECK(!(f.ier & UART_IER_THRI));
    if (npanics < sizeof(panic_t) / sizeof(panic_t[0]))
        panic_t[npanics++] = now;
    for (unsigned i = 0; i + 1 < npanics; i++) /* the budget over any stretch of time */
        CHECK(npanics - i <= UART_PANIC_BURST + (now - panic_t[i]) / UART_PANIC_REFILL);
}

static void guest_write(unsigned off, uint8_t val)
{
    uint64_t panics = m.guest_panics;
    if (off == UART_TX && g_dlab)
        g_dll = val;
    if (off == UART_DLM && g_dlab)
        g_dlm = val;
    if (off == UART_FCR)
        g_fifo = val & UART_FCR_ENABLE;
    if (off == UART_MCR)
        g_mcr = val & UART_MCR_MASK;
    if (off == UART_LCR)
        g_lcr = val;
    if (off == UART_TX && !g_dlab) {
        if (g_loop) {
            val &= 0x7f;
            if (g_loopw_len < sizeof(g_loopw))
                g_loopw[g_loopw_len++] = val;
        } else if (g_out_len < sizeof(g_out)) {
            g_out[g_out_len++] = val;
        }
    }
    if (off == UART_LCR)
        g_dlab = val & UART_LCR_DLAB;
    if (off == UART_MCR)
        g_loop = val & UART_MCR_LOOP;
    guest_out(&m, &f, off, val, now);
    if (m.guest_panics != panics) {
        CHECK(m.guest_panics == panics + 1 && off == UART_TX && !g_dlab && !g_loop);
        panic_counted(val);
    }
}

static void guest_read(unsigned off)
{
    bool data = m.loop && m.rx_len;
    uint8_t v = guest_in(&m, &f, off, now);
    /* the guest's virtual registers read back as it wrote them */
    if (off == UART_LCR)
        CHECK(v == g_lcr);
    if (off == UART_MCR)
        CHECK(v == g_mcr);
    if (off == UART_IIR)
        CHECK((v & UART_IIR_FIFO) == (g_fifo ? UART_IIR_FIFO : 0));
    if (g_dlab && off == UART_DLL)
        CHECK(v == g_dll);
    if (g_dlab && off == UART_DLM)
        CHECK(v == g_dlm);
    if (off != UART_RX || g_dlab || !g_loop)
        return;
    CHECK(v < 0x80); /* never a VMM byte */
    if (data) {      /* the next of the guest's own loopback bytes (overruns lose some) */
        while (g_loopw_pos < g_loopw_len && g_loopw[g_loopw_pos] != v)
            g_loopw_pos++;
        CHECK(g_loopw_pos < g_loopw_len);
        g_loopw_pos++;
    } else {
        CHECK(v == g_last_rx);
    }
    g_last_rx = v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fake_uart_init(&f);
    struct uart_hw hw = fake_uart_hw(&f);
    uart_mux_init(&m, &hw, HOLD, "\xfe");
    now = nlines = 0;
    g_loop = g_dlab = false;
    g_fifo = true;
    g_lcr = 0x03;
    g_dll = 1;
    g_dlm = 0;
    g_mcr = UART_MCR_DTR | UART_MCR_RTS;
    npanics = 0;
    g_out_len = g_loopw_len = g_loopw_pos = scanned = g_seen = 0;
    g_last_rx = 0;
    open_line = false;
    next_seq = 0;
    gaps = reported = broken_seen = 0;
    /* stop while the fake's wire record has room for a full ring and more */
    for (size_t i = 0; i + 1 < size && f.wire_len < FAKE_WIRE_MAX - 2 * UART_MUX_RING; i += 2) {
        uint8_t op = data[i], a = data[i + 1];
        bool urgent = false;
        switch (op % 9) {
        case 0:
            guest_write(op / 9 % 8, a);
            break;
        case 1:
            guest_read(op / 9 % 8);
            break;
        case 2: /* console text */
            guest_write(UART_TX, a % 5 == 0 ? '\n' : (uint8_t)('a' + a % 26));
            break;
        case 3: /* printk's prefix characters, Linux's panic line, or plain text */
            if (a < 64) {
                guest_write(UART_TX, (uint8_t) "[ ]0.T\r\n"[a % 8]);
            } else if (a < 128) {
                for (const char *p = UART_GUEST_PANIC; *p; p++)
                    guest_write(UART_TX, (uint8_t)*p);
            } else {
                guest_write(UART_TX, a % 5 == 0 ? '\n' : (uint8_t)('a' + a % 26));
            }
            break;
        case 4:
            urgent = op / 9 % 8 == 0;
            vmm_line(data + i + 1, size - i - 1, urgent);
            break;
        case 5:
            /* steps up to ~UART_PANIC_REFILL */
            now += (uint64_t)a << (op / 9 % 8 * 5);
            guest_read(UART_LSR); /* time passes; a trapped access runs the mux */
            break;
        case 6:
            guest_write(UART_MCR, (a & 0x0f) | (a & 0x80 ? UART_MCR_LOOP : 0));
            break;
        case 7:
            guest_write(UART_LCR, a & 1 ? a : (a & 0x80) | 0x03);
            break;
        case 8:
            uart_mux_flush(&m);
            urgent = true;
            break;
        }
        scan(urgent);
    }
    uart_mux_flush(&m);
    scan(true);
    CHECK(m.ring_lines == 0);
    CHECK(m.lines == nlines && m.emitted + m.dropped == nlines);
    gaps += nlines - (unsigned)next_seq;
    CHECK(gaps == m.dropped && reported == m.dropped);
    return 0;
}
