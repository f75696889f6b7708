// SPDX-License-Identifier: MIT
/*
 * attack.efi group "uart" (attack.h): the serial port the guest shares with
 * the VMM's log.  The guest drives COM1 directly (port I/O,
 * interrupts off so the firmware's console timer stays out) and makes the VMM
 * log (a microcode WRMSR, which it ignores and reports).  Claims: the guest never reads a VMM byte
 * back (loopback is virtual), loopback still behaves as a 16550's, and a guest line written in
 * pieces around VMM lines reaches the serial log whole (judged by
 * tests/guest/check-attack-log.sh from the marker ATK-UART-WHOLE-LINE), the guest's line
 * settings stay its own (the VMM's line keeps its speed) and a panic line a
 * user can spoof makes no crash report (item 5).  Every attack leaves IER/LCR/MCR (and the
 * divisor) as it found them: the firmware console uses them.
 */
#include "ptv/vmcall.h"
#include "attack.h"

#define COM1     0x3f8 /* serial_port in attack.cfg */
#define RBR      0
#define THR      0
#define IER      1
#define DLL      0
#define DLM      1
#define IIR      2
#define FCR      2
#define LCR      3
#define MCR      4
#define LSR      5
#define MSR      6
#define LCR_DLAB 0x80
#define MCR_DTR  0x01
#define MCR_RTS  0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define LSR_DR   0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define IER_THRI 0x02
#define IIR_FIFO 0xc0
#define VEC_GP   13

static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static uint64_t irq_off(void)
{
    uint64_t flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    return flags;
}

static void irq_restore(uint64_t flags)
{
    if (flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
}

static void wait_lsr(uint8_t bits)
{
    for (unsigned i = 0; i < 1000000 && (inb(COM1 + LSR) & bits) != bits; i++)
        __asm__ volatile("pause");
}

struct uart_state {
    uint8_t ier, lcr, mcr;
};

static struct uart_state uart_save(void)
{
    struct uart_state s;
    wait_lsr(LSR_THRE | LSR_TEMT); /* the firmware's last bytes are out */
    s.lcr = inb(COM1 + LCR);
    outb(COM1 + LCR, s.lcr & ~LCR_DLAB);
    s.ier = inb(COM1 + IER);
    s.mcr = inb(COM1 + MCR);
    return s;
}

static void uart_restore(const struct uart_state *s)
{
    outb(COM1 + MCR, s->mcr);
    outb(COM1 + LCR, s->lcr & ~LCR_DLAB);
    outb(COM1 + IER, s->ier);
    outb(COM1 + LCR, s->lcr);
}

static void uart_puts(const char *p)
{
    for (; *p; p++) {
        wait_lsr(LSR_THRE);
        outb(COM1 + THR, (uint8_t)*p);
    }
}

/* Make the VMM write a log line: a guest microcode load (WRMSR 0x79), which the
 * VMM ignores and reports.  Its report is rate-limited (8 lines, then one per
 * power of two), so write until the VMM's line counter moves.  Returns false if
 * it never did. */
static bool vmm_logs_a_line(void)
{
    uint64_t before = atk_vmm_log_lines();
    for (unsigned tries = 0; tries < 4096; tries++) {
        wrmsr_trap(0x79, 0);
        if (atk_vmm_log_lines() != before)
            return true;
    }
    return false;
}

static void printable(char *dst, const uint8_t *src, unsigned n, unsigned max)
{
    unsigned i;
    for (i = 0; i < n && i < max - 1; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? (char)src[i] : '.';
    dst[i] = 0;
}

/* ---- MCR.LOOP on, the VMM logs, the guest drains RBR ---- */

static void atk_loop_reads_vmm(void)
{
    uint8_t seen[256];
    unsigned got = 0;
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    while ((inb(COM1 + LSR) & LSR_DR) && got < 64) /* stale input, before the attack */
        inb(COM1 + RBR), got++;
    got = 0;
    outb(COM1 + MCR, MCR_LOOP | (s.mcr & 0x0f));
    bool logged = vmm_logs_a_line() && vmm_logs_a_line();
    for (unsigned spin = 0; spin < 2000 && got < sizeof(seen); spin++)
        if (inb(COM1 + LSR) & LSR_DR)
            seen[got++] = inb(COM1 + RBR);
    uart_restore(&s);
    irq_restore(flags);
    char text[40];
    printable(text, seen, got, sizeof(text));
    report(logged, "uart: the VMM logged while the guest's UART was in loopback");
    report(got == 0, "uart: loopback RBR held no VMM byte (%u bytes: '%s')", got, text);
}

/* ---- loopback as a 16550 does it (PC16550D 8.6.5, 8.6.8) ---- */

static void atk_loop_echo(void)
{
    static const char msg[] = "ptv!";
    uint8_t back[8] = {0};
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    outb(COM1 + MCR, MCR_LOOP | MCR_RTS | MCR_OUT2);
    uint8_t msr1 = inb(COM1 + MSR) & 0xf0;
    inb(COM1 + MSR); /* deltas read away */
    outb(COM1 + MCR, MCR_LOOP | MCR_DTR | MCR_OUT1);
    uint8_t msr2 = inb(COM1 + MSR), msr3 = inb(COM1 + MSR), mcr = inb(COM1 + MCR);
    for (unsigned i = 0; i < 4; i++)
        outb(COM1 + THR, (uint8_t)msg[i]);
    uint8_t lsr1 = inb(COM1 + LSR);
    for (unsigned i = 0; i < 4; i++)
        back[i] = inb(COM1 + RBR);
    uint8_t lsr2 = inb(COM1 + LSR);
    uart_restore(&s);
    uint8_t mcr_after = inb(COM1 + MCR);
    irq_restore(flags);
    report(msr1 == 0x90, "uart loopback: RTS|OUT2 read back as CTS|DCD (MSR 0x%x)", msr1);
    report(msr2 == 0x6b && msr3 == 0x60,
           "uart loopback: DTR|OUT1 -> DSR|RI with deltas (MSR 0x%x then 0x%x)", msr2, msr3);
    report(mcr == (MCR_LOOP | MCR_DTR | MCR_OUT1), "uart loopback: MCR reads 0x%x", mcr);
    report((lsr1 & LSR_DR) && !(lsr2 & LSR_DR) && back[0] == 'p' && back[1] == 't' &&
               back[2] == 'v' && back[3] == '!',
           "uart loopback: 4 bytes echoed in order (LSR 0x%x -> 0x%x)", lsr1, lsr2);
    report(mcr_after == s.mcr, "uart: MCR back to 0x%x after loopback (0x%x)", s.mcr, mcr_after);
}

/* ---- a guest line in pieces around VMM lines ---- */

static void atk_line_whole(void)
{
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    uart_puts("ATK-UART-WHOLE-LINE begin ");
    bool one = vmm_logs_a_line();
    uart_puts("middle ");
    bool two = vmm_logs_a_line();
    uart_puts("end\r\n");
    uart_restore(&s);
    irq_restore(flags);
    report(one && two, "uart: the VMM logged twice inside an open guest line");
    report_info("uart: check-attack-log.sh wants 'ATK-UART-WHOLE-LINE begin middle end' whole");
}

/* ---- the line is the VMM's ---- */

/* 50 baud, 7 bits even parity 2 stop bits with a break, FIFOs off, MCR bits 7:5 (auto flow
 * control on a 16750, prescaler / IrDA on a 16950): the guest reads its own values back, the
 * VMM logs meanwhile, and the VMM's self-check finds the chip with the VMM's line */
static void atk_line_settings(void)
{
    struct vmcall_regs sc;
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    outb(COM1 + LCR, s.lcr | LCR_DLAB);
    uint8_t dll = inb(COM1 + DLL), dlm = inb(COM1 + DLM);
    outb(COM1 + DLL, 0x00);
    outb(COM1 + DLM, 0x09); /* 115200 / 2304 = 50 baud */
    outb(COM1 + LCR, 0x5a);
    outb(COM1 + FCR, 0);
    outb(COM1 + MCR, 0xe0 | MCR_OUT2 | MCR_DTR | MCR_RTS);
    bool logged = vmm_logs_a_line();
    bool checked = atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &sc) == PTV_VMCALL_OK;
    uint8_t lcr = inb(COM1 + LCR), mcr = inb(COM1 + MCR), iir = inb(COM1 + IIR);
    outb(COM1 + LCR, 0x5a | LCR_DLAB);
    uint8_t rdll = inb(COM1 + DLL), rdlm = inb(COM1 + DLM);
    outb(COM1 + DLL, dll);
    outb(COM1 + DLM, dlm);
    outb(COM1 + LCR, s.lcr & ~LCR_DLAB);
    outb(COM1 + FCR, 0x07); /* FIFOs on and cleared, as the firmware and the VMM set them */
    uint8_t iir_on = inb(COM1 + IIR);
    uart_restore(&s);
    irq_restore(flags);
    report(logged, "uart: the VMM logged while the guest's line was set to 50 baud");
    report(checked && (sc.rcx & PTV_SELFCHECK_UART) && !(sc.rbx & PTV_SELFCHECK_UART),
           "uart: the chip kept the VMM's line (self-check failed 0x%lx of 0x%lx)",
           checked ? sc.rbx : ~0ul, checked ? sc.rcx : 0ul);
    report(lcr == 0x5a && rdll == 0x00 && rdlm == 0x09,
           "uart: the guest reads back its LCR 0x%x and divisor 0x%x", lcr, rdlm << 8 | rdll);
    report(mcr == (MCR_OUT2 | MCR_DTR | MCR_RTS) && !(iir & IIR_FIFO) &&
               (iir_on & IIR_FIFO) == IIR_FIFO,
           "uart: MCR reads 0x%x (bits 7:5 as a 16550: 0), IIR FIFO bits 0x%x off, 0x%x on", mcr,
           iir & IIR_FIFO, iir_on & IIR_FIFO);
}

/* ---- a spoofed panic line ---- */

/* Linux's panic line as a user can print it: through the tty (interrupt-driven, IER.THRI on;
 * interrupts are off here, so none is taken) and inside a line a kernel message prints (a
 * file name).  Neither may make the VMM write a crash report or dump; the real panic's dump
 * is bochs:linux's (its guest ends in one) */
static void atk_spoofed_panic(void)
{
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    uint64_t before = atk_vmm_log_lines();
    outb(COM1 + IER, IER_THRI);
    for (unsigned i = 0; i < 4; i++)
        uart_puts("Kernel panic - not syncing: ATK-SPOOF written to the tty\r\n");
    outb(COM1 + IER, 0);
    for (unsigned i = 0; i < 4; i++)
        uart_puts("[    1.000000] ATK-SPOOF file: Kernel panic - not syncing\r\n");
    wait_lsr(LSR_THRE | LSR_TEMT);
    uint64_t lines = atk_vmm_log_lines() - before;
    uart_restore(&s);
    irq_restore(flags);
    report(lines < 4, "uart: 8 spoofed panic lines made no crash report (%lu VMM lines)", lines);
}

/* ---- string I/O to the UART's ports ---- */

struct outs_arg {
    const char *buf;
    uint64_t n;
};

static void rep_outsb(void *p)
{
    struct outs_arg *a = p;
    const char *src = a->buf;
    uint64_t n = a->n;
    __asm__ volatile("cld; rep outsb"
                     : "+S"(src), "+c"(n)
                     : "d"((uint16_t)(COM1 + THR))
                     : "memory");
    a->n = n;
}

static void rep_insb(void *p)
{
    uint8_t *dst = p;
    uint64_t n = 16;
    __asm__ volatile("cld; rep insb" : "+D"(dst), "+c"(n) : "d"((uint16_t)(COM1 + RBR)) : "memory");
}

static void atk_string_io(void)
{
    uint8_t in[16] = {0};
    struct outs_arg a = {"ATK-UART-OUTS\r\n", 15};
    uint64_t flags = irq_off();
    struct uart_state s = uart_save();
    int v1 = atk_try(rep_outsb, &a);
    /* loopback, a VMM line, then REP INSB from RBR */
    outb(COM1 + MCR, MCR_LOOP | (s.mcr & 0x0f));
    bool logged = vmm_logs_a_line();
    int v2 = atk_try(rep_insb, in);
    uart_restore(&s);
    irq_restore(flags);
    unsigned nonzero = 0;
    for (unsigned i = 0; i < sizeof(in); i++)
        nonzero += in[i] != 0;
    /* ptvisor does not emulate string I/O to the UART: #GP (a pass-through could loop) */
    report(v1 == VEC_GP || v1 == ATK_NONE, "uart: REP OUTSB to THR: vector %d (#GP or done)", v1);
    report(logged && (v2 == VEC_GP || v2 == ATK_NONE) && nonzero == 0,
           "uart: REP INSB in loopback read no VMM byte (vector %d, %u bytes)", v2, nonzero);
}

const struct attack attacks_uart[] = {
    {"uart: loopback, VMM logs, drain RBR", atk_loop_reads_vmm},
    {"uart: loopback echo and MSR as a 16550", atk_loop_echo},
    {"uart: guest line around VMM lines", atk_line_whole},
    {"uart: REP OUTSB / REP INSB", atk_string_io},
    {"uart: guest sets 50 baud, 7E2, FIFOs off, AFE", atk_line_settings},
    {"uart: spoofed kernel panic lines", atk_spoofed_panic},
    {0},
};
