/* SPDX-License-Identifier: MIT */
/*
 * 16550 multiplexer (uart_mux.h): the guest's view of the UART, its console
 * line, and the VMM's lines fitted in between.  Register behaviour follows the
 * PC16550D data sheet (National Semiconductor, 1995): section 8.6.5 (MCR bit 4,
 * loopback: "the transmitter Serial Output is set to the Marking state, the
 * receiver Serial Input is disconnected, the output of the Transmitter Shift
 * Register is looped back into the Receiver Shift Register input; the four
 * modem control inputs are connected to the four modem control outputs" --
 * CTS = RTS, DSR = DTR, RI = OUT1, DCD = OUT2 -- "and the modem control output
 * pins are forced to their inactive state"), 8.6.3 (LSR), 8.6.8 (MSR deltas;
 * TERI on RI going from on to off) and 8.6.4 (IIR priorities).
 */
#include "dev/uart_mux.h"

/* ---- the real UART, with DLAB out of the way where a register behind it is meant ---- */

static void hw_out(struct uart_mux *m, unsigned off, uint8_t val)
{
    m->hw.out(m->hw.ctx, off, val);
}

static uint8_t hw_in(struct uart_mux *m, unsigned off)
{
    return m->hw.in(m->hw.ctx, off);
}

static uint8_t hw_in_nodlab(struct uart_mux *m, unsigned off)
{
    if (!(m->lcr & UART_LCR_DLAB))
        return hw_in(m, off);
    hw_out(m, UART_LCR, m->lcr & ~UART_LCR_DLAB);
    uint8_t v = hw_in(m, off);
    hw_out(m, UART_LCR, m->lcr);
    return v;
}

static void hw_out_nodlab(struct uart_mux *m, unsigned off, uint8_t val)
{
    if (m->lcr & UART_LCR_DLAB)
        hw_out(m, UART_LCR, m->lcr & ~UART_LCR_DLAB);
    hw_out(m, off, val);
    if (m->lcr & UART_LCR_DLAB)
        hw_out(m, UART_LCR, m->lcr);
}

/* ---- VMM output ---- */

static void emit_begin(struct uart_mux *m)
{
    if (m->lcr & UART_LCR_DLAB) /* THR is behind the divisor latch */
        hw_out(m, UART_LCR, m->lcr & ~UART_LCR_DLAB);
}

static void emit_end(struct uart_mux *m)
{
    m->hw.tx_drain(m->hw.ctx);
    if (m->lcr & UART_LCR_DLAB)
        hw_out(m, UART_LCR, m->lcr);
}

static void emit_bytes(struct uart_mux *m, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            m->hw.tx(m->hw.ctx, '\r');
        m->hw.tx(m->hw.ctx, (uint8_t)s[i]);
    }
}

/* "<prefix><N> VMM lines dropped ...", once per batch of drops */
static void emit_drop_report(struct uart_mux *m)
{
    if (m->dropped == m->drop_reported)
        return;
    uint64_t n = m->dropped - m->drop_reported;
    char num[24];
    unsigned len = 0;
    do
        num[sizeof(num) - 1 - len++] = (char)('0' + n % 10);
    while ((n /= 10) && len < sizeof(num));
    static const char tail[] = " VMM lines dropped (the guest's console line held them)\n";
    const char *p = m->drop_prefix ? m->drop_prefix : "";
    size_t plen = 0;
    while (p[plen])
        plen++;
    emit_bytes(m, p, plen);
    emit_bytes(m, num + sizeof(num) - len, len);
    emit_bytes(m, tail, sizeof(tail) - 1);
    m->drop_reported = m->dropped;
}

/* everything queued goes out; an open guest line is ended first (the overflow policy) */
static void flush_ring(struct uart_mux *m)
{
    if (!m->ring_lines && m->dropped == m->drop_reported)
        return;
    emit_begin(m);
    if (m->guest_open) {
        emit_bytes(m, "\n", 1);
        m->guest_open = false;
        m->broken++;
    }
    unsigned first = UART_MUX_RING - m->ring_head;
    if (first > m->ring_len)
        first = m->ring_len;
    emit_bytes(m, m->ring + m->ring_head, first);
    emit_bytes(m, m->ring, m->ring_len - first);
    m->emitted += m->ring_lines;
    m->ring_head = m->ring_len = m->ring_lines = 0;
    emit_drop_report(m);
    emit_end(m);
}

/* queued lines leave at the guest's line end, or when the oldest has waited hold_ticks */
static void service(struct uart_mux *m, uint64_t now)
{
    if (m->ring_lines && (!m->guest_open || now - m->oldest >= m->hold_ticks))
        flush_ring(m);
}

/* m->cur holds one whole line ending in '\n' */
static void commit_line(struct uart_mux *m, uint64_t now)
{
    m->lines++;
    if (!m->guest_open && !m->ring_lines) {
        emit_begin(m);
        emit_bytes(m, m->cur, m->cur_len);
        m->emitted++;
        emit_drop_report(m);
        emit_end(m);
    } else if (m->ring_len + m->cur_len <= UART_MUX_RING) {
        if (!m->ring_lines)
            m->oldest = now;
        for (unsigned i = 0; i < m->cur_len; i++)
            m->ring[(m->ring_head + m->ring_len + i) % UART_MUX_RING] = m->cur[i];
        m->ring_len += m->cur_len;
        m->ring_lines++;
    } else {
        m->dropped++;
    }
    m->cur_len = 0;
}

void uart_mux_vmm_write(struct uart_mux *m, const char *s, size_t n, bool urgent, uint64_t now)
{
    for (size_t i = 0; i < n; i++) {
        m->cur[m->cur_len++] = s[i];
        if (s[i] == '\n') {
            commit_line(m, now);
        } else if (m->cur_len == UART_MUX_LINE_MAX - 1) { /* too long: cut it */
            m->cur[m->cur_len++] = '\n';
            commit_line(m, now);
        }
    }
    if (urgent)
        uart_mux_flush(m);
    else
        service(m, now);
}

void uart_mux_flush(struct uart_mux *m)
{
    if (m->cur_len) {
        m->cur[m->cur_len++] = '\n';
        commit_line(m, m->oldest);
    }
    flush_ring(m);
}

/* ---- loopback (virtual) ---- */

static uint8_t loop_status(uint8_t mcr)
{
    return (mcr & UART_MCR_RTS ? UART_MSR_CTS : 0) | (mcr & UART_MCR_DTR ? UART_MSR_DSR : 0) |
           (mcr & UART_MCR_OUT1 ? UART_MSR_RI : 0) | (mcr & UART_MCR_OUT2 ? UART_MSR_DCD : 0);
}

static uint8_t status_deltas(uint8_t old, uint8_t now)
{
    uint8_t ch = old ^ now;
    return (ch & UART_MSR_CTS ? UART_MSR_DCTS : 0) | (ch & UART_MSR_DSR ? UART_MSR_DDSR : 0) |
           ((old & UART_MSR_RI) && !(now & UART_MSR_RI) ? UART_MSR_TERI : 0) |
           (ch & UART_MSR_DCD ? UART_MSR_DDCD : 0);
}

static void loop_enter(struct uart_mux *m, uint8_t mcr)
{
    m->ier = hw_in_nodlab(m, UART_IER) & 0x0f;
    uint8_t iir = hw_in(m, UART_IIR);
    m->fifo = (iir & UART_IIR_FIFO) == UART_IIR_FIFO;
    m->thre_irq = (iir & UART_IIR_ID) == UART_IIR_THRI;
    if (m->thre_irq) { /* that read took the real THRE interrupt: re-arm it for later */
        hw_out_nodlab(m, UART_IER, m->ier & ~UART_IER_THRI);
        hw_out_nodlab(m, UART_IER, m->ier);
    }
    /* the modem inputs switch from the lines to the outputs; deltas already latched stay */
    uint8_t real_msr = hw_in(m, UART_MSR);
    m->mcr = mcr & UART_MCR_MASK;
    m->msr = loop_status(m->mcr) | (real_msr & UART_MSR_DELTAS) |
             status_deltas(real_msr & ~UART_MSR_DELTAS, loop_status(m->mcr));
    m->rx_head = m->rx_len = 0;
    m->oe = false;
    m->loop = true;
    hw_out(m, UART_MCR, 0); /* outputs inactive, as the pins of a UART in loopback */
}

static void mcr_write(struct uart_mux *m, uint8_t val)
{
    if (val & UART_MCR_LOOP) {
        if (!m->loop) {
            loop_enter(m, val);
            return;
        }
        uint8_t old = loop_status(m->mcr), now = loop_status(val);
        m->msr = (m->msr & UART_MSR_DELTAS) | status_deltas(old, now) | now;
        m->mcr = val & UART_MCR_MASK;
        return;
    }
    /* looped bytes left unread are dropped here (a 16550 would keep them in RBR) */
    m->loop = false;
    m->rx_len = 0;
    hw_out(m, UART_MCR, val);
}

static void loop_receive(struct uart_mux *m, uint8_t val)
{
    unsigned depth = m->fifo ? UART_MUX_FIFO : 1;
    if (m->rx_len < depth) {
        m->rx[(m->rx_head + m->rx_len) % UART_MUX_FIFO] = val;
        m->rx_len++;
    } else {
        m->oe = true; /* FIFO: the new character is lost; 16450 mode: it overwrites RBR */
        if (!m->fifo)
            m->rx[m->rx_head] = val;
    }
    m->thre_irq = true; /* the loopback transmitter is empty at once */
}

static uint8_t loop_iir(struct uart_mux *m)
{
    uint8_t id = UART_IIR_NO_INT;
    if ((m->ier & UART_IER_RLSI) && m->oe)
        id = UART_IIR_RLSI;
    else if ((m->ier & UART_IER_RDI) && m->rx_len)
        id = UART_IIR_RDI;
    else if ((m->ier & UART_IER_THRI) && m->thre_irq)
        id = UART_IIR_THRI;
    else if ((m->ier & UART_IER_MSI) && (m->msr & UART_MSR_DELTAS))
        id = UART_IIR_MSI;
    if (id == UART_IIR_THRI) /* reading IIR clears a THRE interrupt it reports */
        m->thre_irq = false;
    return (m->fifo ? UART_IIR_FIFO : 0) | id;
}

/* ---- guest accesses ---- */

/* one more byte against a pattern whose first byte occurs nowhere else in it (so a mismatch
 * restarts at 0, or at 1 on that first byte); true when the pattern completes */
static bool match(uint8_t *pos, const char *pat, unsigned len, uint8_t v)
{
    if (v == (uint8_t)pat[*pos])
        ++*pos;
    else
        *pos = v == (uint8_t)pat[0];
    if (*pos < len)
        return false;
    *pos = 0;
    return true;
}

void uart_mux_out(struct uart_mux *m, unsigned off, uint8_t val, uint64_t now)
{
    service(m, now);
    bool dlab = m->lcr & UART_LCR_DLAB;
    switch (off) {
    case UART_TX:
        if (dlab) {
            hw_out(m, off, val); /* DLL */
        } else if (m->loop) {
            loop_receive(m, val);
        } else {
            static const char panic[] = UART_GUEST_PANIC;
            _Static_assert(sizeof(panic) - 1 == UART_GUEST_PANIC_LEN, "panic line length");
            hw_out(m, off, val);
            m->guest_bytes++;
            if (match(&m->panic_pos, panic, UART_GUEST_PANIC_LEN, val))
                m->guest_panics++;
            m->guest_open = val != '\n';
            if (!m->guest_open && m->ring_lines)
                flush_ring(m);
        }
        return;
    case UART_IER:
        hw_out(m, off, val);
        if (m->loop && !dlab) {
            if ((val & UART_IER_THRI) && !(m->ier & UART_IER_THRI))
                m->thre_irq = true; /* THRI enabled with THR empty */
            m->ier = val & 0x0f;
        }
        return;
    case UART_FCR:
        hw_out(m, off, val);
        if ((bool)(val & UART_FCR_ENABLE) != m->fifo || (val & UART_FCR_CLEAR_RCVR))
            m->rx_len = 0; /* switching FIFO mode clears the FIFOs */
        m->fifo = val & UART_FCR_ENABLE;
        return;
    case UART_LCR:
        hw_out(m, off, val);
        m->lcr = val;
        return;
    case UART_MCR:
        mcr_write(m, val);
        return;
    default: /* LSR, MSR (factory test writes), SCR */
        hw_out(m, off & (UART_NR_PORTS - 1), val);
        return;
    }
}

/* a byte the guest read from the real RBR: the host's dump request completes here */
static void watch_request(struct uart_mux *m, uint8_t v)
{
    static const char req[] = UART_DUMP_REQUEST;
    _Static_assert(sizeof(req) - 1 == UART_DUMP_REQUEST_LEN, "request length");
    if (match(&m->req_pos, req, UART_DUMP_REQUEST_LEN, v))
        m->dump_requests++;
}

uint8_t uart_mux_in(struct uart_mux *m, unsigned off, uint64_t now)
{
    service(m, now);
    off &= UART_NR_PORTS - 1;
    if (!m->loop) {
        uint8_t v = hw_in(m, off);
        if (off == UART_RX && !(m->lcr & UART_LCR_DLAB))
            watch_request(m, v);
        return v;
    }
    uint8_t v;
    switch (off) {
    case UART_RX:
        if (m->lcr & UART_LCR_DLAB)
            return hw_in(m, off);
        if (m->rx_len) {
            m->rbr = m->rx[m->rx_head];
            m->rx_head = (m->rx_head + 1) % UART_MUX_FIFO;
            m->rx_len--;
        }
        return m->rbr;
    case UART_IIR:
        return loop_iir(m);
    case UART_MCR:
        return m->mcr;
    case UART_LSR:
        v = (m->rx_len ? UART_LSR_DR : 0) | (m->oe ? UART_LSR_OE : 0) | UART_LSR_THRE |
            UART_LSR_TEMT;
        m->oe = false;
        return v;
    case UART_MSR:
        v = m->msr;
        m->msr &= ~UART_MSR_DELTAS;
        return v;
    default: /* IER/DLM, LCR, SCR: the real registers */
        return hw_in(m, off);
    }
}

void uart_mux_init(struct uart_mux *m, const struct uart_hw *hw, uint64_t hold_ticks,
                   const char *drop_prefix)
{
    *m = (struct uart_mux){.hw = *hw, .hold_ticks = hold_ticks, .drop_prefix = drop_prefix};
    m->lcr = hw_in(m, UART_LCR);
}
