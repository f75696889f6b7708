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

/* ---- the real UART: its DLAB is never set (the guest's is virtual) ---- */

static void hw_out(struct uart_mux *m, unsigned off, uint8_t val)
{
    m->hw.out(m->hw.ctx, off, val);
}

static uint8_t hw_in(struct uart_mux *m, unsigned off)
{
    return m->hw.in(m->hw.ctx, off);
}

/* ---- VMM output ---- */

static void emit_end(struct uart_mux *m)
{
    m->hw.tx_drain(m->hw.ctx);
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

/* the chip's MCR: the VMM's DTR and RTS (its line stays up) and the guest's OUT1 / OUT2; in the
 * guest's loopback OUT1 / OUT2 are inactive, as on a looped 16550 (OUT2 off also gates its IRQ,
 * as on a PC: no interrupt is delivered in loopback) */
static void hw_mcr_update(struct uart_mux *m)
{
    hw_out(m, UART_MCR, m->hw_mcr | (m->loop ? 0 : m->mcr & UART_MCR_GUEST_HW));
}

static void loop_enter(struct uart_mux *m, uint8_t mcr)
{
    m->ier = hw_in(m, UART_IER) & 0x0f;
    uint8_t iir = hw_in(m, UART_IIR);
    m->thre_irq = (iir & UART_IIR_ID) == UART_IIR_THRI;
    if (m->thre_irq) { /* that read took the real THRE interrupt: re-arm it for later */
        hw_out(m, UART_IER, m->ier & ~UART_IER_THRI);
        hw_out(m, UART_IER, m->ier);
    }
    /* the modem inputs switch from the lines to the outputs; deltas already latched stay */
    uint8_t real_msr = hw_in(m, UART_MSR);
    m->mcr = mcr & UART_MCR_MASK;
    m->msr = loop_status(m->mcr) | (real_msr & UART_MSR_DELTAS) |
             status_deltas(real_msr & ~UART_MSR_DELTAS, loop_status(m->mcr));
    m->rx_head = m->rx_len = 0;
    m->oe = false;
    m->loop = true;
    hw_mcr_update(m);
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
    m->mcr = val & UART_MCR_MASK;
    hw_mcr_update(m);
}

/*
 * FCR: the FIFO enable is the guest's (virtual: IIR[7:6], the loopback FIFO's depth); the chip
 * keeps the VMM's FIFOs on and gets only what touches the guest alone: clearing the FIFOs
 * (under the mux, after the VMM's last emission drained, so its transmitter holds guest bytes
 * only) and, with the guest's FIFOs on, the receive trigger level (off: 1 byte, as a 16450).
 * A chip without FIFOs (16450) has no FCR: the guest's FIFOs stay off, as there.
 */
static void fcr_write(struct uart_mux *m, uint8_t val)
{
    bool fifo = m->hw_fifo && (val & UART_FCR_ENABLE);
    uint8_t clear = val & (UART_FCR_CLEAR_RCVR | UART_FCR_CLEAR_XMIT);
    if (fifo != m->fifo) /* switching FIFO mode clears both FIFOs */
        clear = UART_FCR_CLEAR_RCVR | UART_FCR_CLEAR_XMIT;
    if (clear & UART_FCR_CLEAR_RCVR)
        m->rx_len = 0;
    m->fifo = fifo;
    if (m->hw_fifo)
        hw_out(m, UART_FCR, UART_FCR_ENABLE | clear | (fifo ? val & UART_FCR_TRIGGER : 0));
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

/* where the guest's console line is, for the panic line's anchor (uart_mux.h) */
enum {
    PFX_HEAD = 0, /* at its start, or after a "[...]" group of printk's prefix and spaces */
    PFX_STAMP,    /* inside a "[    1.234567]" / "[T1]" group */
    PFX_TEXT,     /* past the prefix: no panic line until the next '\n' */
};

static bool stamp_char(uint8_t v)
{
    return (v >= '0' && v <= '9') || v == ' ' || v == '.' || v == 'T' || v == 'C';
}

/* a whole panic line: counted if the kernel's polled console path wrote it and the budget
 * allows (UART_GUEST_PANIC in uart_mux.h) */
static void panic_line(struct uart_mux *m, uint64_t now)
{
    if (hw_in(m, UART_IER) & UART_IER_THRI)
        return; /* interrupt-driven output: a write to the tty, not printk's console */
    if (m->panic_tokens < UART_PANIC_BURST && now > m->panic_refilled &&
        now - m->panic_refilled >= UART_PANIC_REFILL) {
        uint64_t n = (now - m->panic_refilled) / UART_PANIC_REFILL;
        m->panic_tokens = n >= UART_PANIC_BURST - m->panic_tokens ? UART_PANIC_BURST
                                                                  : m->panic_tokens + (unsigned)n;
        m->panic_refilled += n * UART_PANIC_REFILL;
    }
    if (!m->panic_tokens) {
        m->panics_limited++;
        return;
    }
    if (m->panic_tokens == UART_PANIC_BURST)
        m->panic_refilled = now; /* the refill clock runs from the first spend */
    m->panic_tokens--;
    m->guest_panics++;
}

static void panic_watch(struct uart_mux *m, uint8_t v, uint64_t now)
{
    static const char pat[] = UART_GUEST_PANIC;
    _Static_assert(sizeof(pat) - 1 == UART_GUEST_PANIC_LEN, "panic line length");
    if (v == '\n') {
        m->panic_pfx = PFX_HEAD;
        m->panic_pos = 0;
    } else if (m->panic_pos) { /* inside the pattern: all of it, or this line is not one */
        if (v != (uint8_t)pat[m->panic_pos]) {
            m->panic_pos = 0;
            m->panic_pfx = PFX_TEXT;
        } else if (++m->panic_pos == UART_GUEST_PANIC_LEN) {
            m->panic_pos = 0;
            m->panic_pfx = PFX_TEXT;
            panic_line(m, now);
        }
    } else if (m->panic_pfx == PFX_HEAD) {
        if (v == (uint8_t)pat[0])
            m->panic_pos = 1;
        else if (v == '[')
            m->panic_pfx = PFX_STAMP;
        else if (v != ' ' && v != '\r')
            m->panic_pfx = PFX_TEXT;
    } else if (m->panic_pfx == PFX_STAMP) {
        if (v == ']')
            m->panic_pfx = PFX_HEAD;
        else if (!stamp_char(v))
            m->panic_pfx = PFX_TEXT;
    }
}

/* a byte of the guest's console */
static void console_byte(struct uart_mux *m, uint8_t val, uint64_t now)
{
    hw_out(m, UART_TX, val);
    m->guest_bytes++;
    panic_watch(m, val, now);
    m->guest_open = val != '\n';
    if (!m->guest_open && m->ring_lines)
        flush_ring(m);
}

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
    bool dlab = m->lcr & UART_LCR_DLAB; /* the guest's: offsets 0 / 1 are its divisor latch */
    switch (off) {
    case UART_TX:
        if (dlab)
            m->dll = val;
        else if (m->loop)
            loop_receive(m, val);
        else
            console_byte(m, val, now);
        return;
    case UART_IER:
        if (dlab) {
            m->dlm = val;
            return;
        }
        hw_out(m, off, val);
        if (m->loop) {
            if ((val & UART_IER_THRI) && !(m->ier & UART_IER_THRI))
                m->thre_irq = true; /* THRI enabled with THR empty */
            m->ier = val & 0x0f;
        }
        return;
    case UART_FCR:
        fcr_write(m, val);
        return;
    case UART_LCR: /* virtual: word length, parity, stop bits, break and DLAB are the guest's */
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
    bool dlab = m->lcr & UART_LCR_DLAB;
    uint8_t v;
    switch (off) {
    case UART_RX:
        if (dlab)
            return m->dll;
        if (!m->loop) {
            v = hw_in(m, off);
            watch_request(m, v);
            return v;
        }
        if (m->rx_len) {
            m->rbr = m->rx[m->rx_head];
            m->rx_head = (m->rx_head + 1) % UART_MUX_FIFO;
            m->rx_len--;
        }
        return m->rbr;
    case UART_IER:
        return dlab ? m->dlm : hw_in(m, off);
    case UART_IIR:
        if (m->loop)
            return loop_iir(m);
        v = hw_in(m, off); /* the chip's FIFOs stay on: bits 7:6 are the guest's */
        return (uint8_t)((v & ~UART_IIR_FIFO) | (m->fifo ? v & UART_IIR_FIFO : 0));
    case UART_LCR:
        return m->lcr;
    case UART_MCR:
        return m->mcr;
    case UART_LSR:
        if (!m->loop)
            return hw_in(m, off);
        v = (m->rx_len ? UART_LSR_DR : 0) | (m->oe ? UART_LSR_OE : 0) | UART_LSR_THRE |
            UART_LSR_TEMT;
        m->oe = false;
        return v;
    case UART_MSR:
        if (!m->loop)
            return hw_in(m, off);
        v = m->msr;
        m->msr &= ~UART_MSR_DELTAS;
        return v;
    default: /* SCR */
        return hw_in(m, off);
    }
}

bool uart_mux_line_intact(struct uart_mux *m)
{
    return hw_in(m, UART_LCR) == m->hw_lcr &&
           (hw_in(m, UART_MCR) & ~UART_MCR_GUEST_HW) == m->hw_mcr;
}

void uart_mux_init(struct uart_mux *m, const struct uart_hw *hw, uint64_t hold_ticks,
                   const char *drop_prefix)
{
    *m = (struct uart_mux){.hw = *hw,
                           .hold_ticks = hold_ticks,
                           .drop_prefix = drop_prefix,
                           .panic_tokens = UART_PANIC_BURST};
    /* the line as the VMM programmed it; the guest's registers start as a copy */
    m->hw_lcr = hw_in(m, UART_LCR) & ~UART_LCR_DLAB;
    hw_out(m, UART_LCR, m->hw_lcr | UART_LCR_DLAB);
    m->dll = hw_in(m, UART_DLL);
    m->dlm = hw_in(m, UART_DLM);
    hw_out(m, UART_LCR, m->hw_lcr);
    m->lcr = m->hw_lcr;
    uint8_t mcr = hw_in(m, UART_MCR);
    m->hw_mcr = mcr & (UART_MCR_DTR | UART_MCR_RTS);
    m->mcr = mcr & UART_MCR_MASK & ~UART_MCR_LOOP;
    m->hw_fifo = (hw_in(m, UART_IIR) & UART_IIR_FIFO) == UART_IIR_FIFO;
    m->fifo = m->hw_fifo;
}
