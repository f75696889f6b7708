/* SPDX-License-Identifier: MIT */
/*
 * I/O instructions: the guest's accesses to the UART the VMM shares with it
 * (vmm/dev/uart_console.h).  The I/O bitmaps trap exactly the ports the
 * multiplexer asks for (THR, LCR, MCR; all eight while the guest's loopback
 * is on); every other port passes through.  SDM Vol. 3C 25.1.3 (an access
 * exits if a bitmap bit of any port it touches is 1), 25.6.4 (bitmap A: ports
 * 0-0x7fff, B: 0x8000-0xffff), table "Exit Qualification for I/O Instructions".
 */
#include "vmx/vcpu.h"
#include "vcpu/exit/exits.h"
#include "trace/shim/trace_dump.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "base/palloc.h"
#include "dev/uart_console.h"
#include "dev/uart_mux.h"

static void set_trap(struct vcpu *v, uint16_t port, bool on)
{
    uint8_t *bm = v->io_bitmap[port >= IO_BITMAP_A_PORTS];
    unsigned bit = port % IO_BITMAP_A_PORTS;
    if (on)
        bm[bit / 8] |= (uint8_t)(1u << (bit % 8));
    else
        bm[bit / 8] &= (uint8_t) ~(1u << (bit % 8));
}

/* the bitmaps follow the multiplexer (changed in root operation, before the next
 * entry: SDM Vol. 3C 25.11.4 lets software write them while no CPU runs the guest) */
void io_traps_update(struct vcpu *v)
{
    uint16_t base = console_port();
    unsigned mask = console_trap_mask();
    if (!v->io_bitmap[0] || mask == v->io_trap_mask)
        return;
    for (unsigned i = 0; i < UART_NR_PORTS; i++)
        set_trap(v, (uint16_t)(base + i), mask & (1u << i));
    v->io_trap_mask = mask;
}

int vmx_io_bitmap_setup(struct vcpu *v)
{
    if (!console_port())
        return 0; /* no UART: nothing to share, every port passes through */
    if (!((vmx_caps.proc >> 32) & CPU_BASED_USE_IO_BITMAPS)) {
        pr_warn("io", "no I/O bitmaps: the guest reaches the UART directly (it can read the "
                      "VMM's lines back in loopback mode)");
        return 0;
    }
    v->io_bitmap[0] = palloc_page(&v->io_bitmap_pa[0]);
    v->io_bitmap[1] = palloc_page(&v->io_bitmap_pa[1]);
    if (!v->io_bitmap[0] || !v->io_bitmap[1])
        return -1;
    vmx_ctls.proc |= CPU_BASED_USE_IO_BITMAPS; /* before vmcs_setup() writes the controls */
    vmcs_write64(IO_BITMAP_A, v->io_bitmap_pa[0]);
    vmcs_write64(IO_BITMAP_B, v->io_bitmap_pa[1]);
    v->io_trap_mask = 0;
    io_traps_update(v);
    return 0;
}

/* the guest printed Linux's panic line: once its line is out, the crash report and dump (the
 * guest may reset next: panic=N), then it goes on */
static void panic_watch(struct vcpu *v)
{
    static uint64_t taken;
    uint64_t n = console_guest_panics();
    if (n != __atomic_load_n(&taken, __ATOMIC_RELAXED) && console_frame_ready()) {
        __atomic_store_n(&taken, n, __ATOMIC_RELAXED);
        vcpu_guest_panicked(v);
    }
}

enum exit_action handle_io_instruction(struct vcpu *v, const struct vmexit *e)
{
    uint64_t q = e->qual;
    uint16_t port = IO_QUAL_PORT(q), base = console_port();
    unsigned size = IO_QUAL_SIZE(q);
    bool in = q & IO_QUAL_IN;
    if (q & IO_QUAL_STRING) {
        /* INS/OUTS would need the guest's linear address translated through its
         * paging: not emulated.  #GP, never a pass-through (the guest could set the
         * real MCR.LOOP) and never a crash. */
        pr_warn_rl("io",
                   "guest %s%s to port %#x at RIP %#lx: string I/O to the UART is not "
                   "emulated: #GP",
                   q & IO_QUAL_REP ? "REP " : "", in ? "INS" : "OUTS", port, e->rip);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    if (size != 1 && size != 2 && size != 4) {
        /* the CPU reports 1, 2 or 4 bytes (SDM Vol. 3C Table 28-5); anything else would shift
         * RAX by 32 or more below: refused, never trusted */
        pr_warn_rl("io", "I/O exit at RIP %#lx with size %u: #GP", e->rip, size);
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    uint64_t *rax = &v->regs.gpr[GPR_RAX];
    uint32_t out = (uint32_t)*rax, got = 0;
    bool touched = false; /* a byte went to or came from the UART */
    /* byte by byte, as the ISA bus splits a wider access to an 8-bit device; the
     * bytes of an access that only overlaps the UART go to their own ports */
    for (unsigned i = 0; i < size; i++) {
        uint16_t p = (uint16_t)(port + i);
        unsigned off = (uint16_t)(p - base);
        bool uart = base && off < UART_NR_PORTS;
        touched |= uart;
        if (in)
            got |= (uint32_t)(uart ? console_guest_in(off) : inb(p)) << (8 * i);
        else if (uart)
            console_guest_out(off, (uint8_t)(out >> (8 * i)));
        else
            outb(p, (uint8_t)(out >> (8 * i)));
    }
    if (in) /* AL/AX merge; a 32-bit IN zero-extends into RAX (as KVM does) */
        *rax = size == 4 ? got : (*rax & ~((1ull << (8 * size)) - 1)) | got;
    if (touched && in)
        trace_dump_serial(v); /* the bytes it read may complete the host's dump request */
    else if (touched)
        panic_watch(v); /* the bytes it wrote may end Linux's panic line */
    /* a byte that changed what the multiplexer traps (MCR loopback: all eight ports) changed
     * console_traps too (uart_console.c republishes it after every operation), and vmx_run
     * sets this vCPU's bitmaps from it before the next entry, as it does for the other vCPUs */
    return EXIT_RESUME_SKIP_INSN;
}
