/* SPDX-License-Identifier: MIT */
/*
 * The VMM's console (uart_console.h): the one multiplexer instance, wired to
 * the real UART through the raw driver (serial.c) and to time through the TSC.
 */
#include "dev/uart_console.h"
#include "dev/uart_mux.h"
#include "hw/spinlock.h"
#include "hw/cpu.h"
#include "hw/percpu.h"
#include "serial.h"
#include "lib/fmt.h"

/*
 * How long a VMM line may wait for the guest to end its console line before
 * the overflow policy ends it for the guest: 2^31 TSC ticks (~0.7 s at 3 GHz;
 * in Bochs, where the TSC counts instructions, ~40 s).  Checked whenever the
 * multiplexer runs (a guest UART access, a VMM line).
 */
#define CONSOLE_HOLD_TICKS (1ull << 31)

static struct uart_mux mux;
static bool ready;
/* one CPU at a time in the multiplexer; a nested writer on the owning CPU (a VMM
 * fault inside it) goes raw instead of deadlocking */
static struct spinlock lock;
static volatile unsigned owner; /* this_cpu_id() + 1 of the holder, 0 = free */
/* what a CPU waiting for the lock does meanwhile: answer EPT shootdowns (set by start-up, once
 * SMP runs; the console itself knows nothing of SMP) */
static void (*wait_relax)(void *);

void uart_console_relax_with(void (*relax)(void *))
{
    wait_relax = relax;
}

static bool mux_enter(void)
{
    unsigned me = this_cpu_id() + 1;
    if (__atomic_load_n(&owner, __ATOMIC_RELAXED) == me)
        return false;
    spin_lock_relax(&lock, wait_relax, NULL);
    owner = me;
    return true;
}

/* what the multiplexer wants trapped, republished after every operation on it, so
 * the entry path compares one word (vcpu_loop.c) instead of asking the mux */
volatile unsigned console_traps;

static void mux_leave(void)
{
    console_traps = uart_mux_trap_mask(&mux);
    owner = 0;
    spin_unlock(&lock);
}
static char drop_prefix[32];

static uint8_t hw_in(void *ctx, unsigned off)
{
    (void)ctx;
    return serial_in(off);
}

static void hw_out(void *ctx, unsigned off, uint8_t val)
{
    (void)ctx;
    serial_out(off, val);
}

static void hw_tx(void *ctx, uint8_t byte)
{
    (void)ctx;
    serial_tx(byte);
}

static void hw_tx_drain(void *ctx)
{
    (void)ctx;
    serial_tx_drain();
}

/* the UART was programmed by serial_init() before the first line */
static bool console_ready(void)
{
    if (!ready && serial_port()) {
        static const struct uart_hw hw = {
            .in = hw_in, .out = hw_out, .tx = hw_tx, .tx_drain = hw_tx_drain};
        ptv_snprintf(drop_prefix, sizeof(drop_prefix), "[cpu%u uart] warning: ", this_cpu_id());
        uart_mux_init(&mux, &hw, CONSOLE_HOLD_TICKS, drop_prefix);
        ready = true;
    }
    return ready;
}

void console_write(const char *s, size_t n, bool urgent)
{
    if (!console_ready())
        return;
    if (!mux_enter()) { /* only a fault inside the multiplexer gets here: say it anyway */
        serial_write(s, n);
        return;
    }
    uart_mux_vmm_write(&mux, s, n, urgent, rdtsc());
    mux_leave();
}

bool console_frame_ready(void)
{
    return console_ready() && uart_mux_idle(&mux);
}

void console_flush(void)
{
    if (!console_ready() || !mux_enter())
        return;
    uart_mux_flush(&mux);
    mux_leave();
}

uint16_t console_port(void)
{
    return console_ready() ? serial_port() : 0;
}

unsigned console_trap_mask(void)
{
    if (!console_ready())
        return 0;
    return console_traps = uart_mux_trap_mask(&mux);
}

uint8_t console_guest_in(unsigned off)
{
    if (!console_ready() || !mux_enter())
        return 0xff;
    uint8_t v = uart_mux_in(&mux, off, rdtsc());
    mux_leave();
    return v;
}

void console_guest_out(unsigned off, uint8_t val)
{
    if (!console_ready() || !mux_enter())
        return;
    uart_mux_out(&mux, off, val, rdtsc());
    mux_leave();
}

bool console_line_intact(void)
{
    return !console_ready() || uart_mux_line_intact(&mux); /* reads only: no lock */
}

uint64_t console_guest_panics(void)
{
    return __atomic_load_n(&mux.guest_panics, __ATOMIC_RELAXED);
}

uint64_t console_dump_requests(void)
{
    return __atomic_load_n(&mux.dump_requests, __ATOMIC_RELAXED);
}

uint64_t console_dropped(void)
{
    return mux.dropped;
}

uint64_t console_broken(void)
{
    return mux.broken;
}
