/* SPDX-License-Identifier: MIT */
/*
 * The VMM booted on the fake machine (vmm_world.h): a Skylake-class CPU (the VMX capabilities of
 * tests/unit/vmx_profiles.h), a memory map with guest RAM and the VMM's span at fixed host
 * addresses (the VMM's identity map: a physical address is a pointer), the loader's handoff, and
 * the real start-up (core/main.c vmm_main) up to the guest's first exit.  Then exits one at a time
 * through the real exit loop (vcpu/vcpu_loop.c vmx_loop).
 */
#ifndef PTV_TESTS_VMM_BOOT_H
#define PTV_TESTS_VMM_BOOT_H

#include <stdbool.h>
#include <stdint.h>

#include "vmx/vcpu.h"

#define FAKE_RAM_BASE  0x10000000ull /* guest RAM [base, base + size) */
#define FAKE_RAM_SIZE  (32ull << 20)
#define FAKE_VMM_BASE  (FAKE_RAM_BASE + FAKE_RAM_SIZE) /* image + handoff, then the pool */
#define FAKE_VMM_SIZE  (1ull << 20)
#define FAKE_POOL_BASE (FAKE_VMM_BASE + FAKE_VMM_SIZE)
#define FAKE_POOL_SIZE (24ull << 20)
#define FAKE_GUEST_RIP 0x10100000ull
/* the local APIC's xAPIC page (in a hole of the memory map, as on a PC; not at 0xfee00000,
 * where the sanitizers' shadow gap lies) */
#define FAKE_APIC_BASE 0x0fff0000ull

/* the configuration the loader hands over: its defaults (boot/config.c), then this hook */
struct ptv_config;
extern void (*fake_boot_config)(struct ptv_config *cfg);

/* boot once per process; the vCPU of CPU 0, or NULL (the reason on stderr) */
struct vcpu *fake_vmm_boot(void);

/* one exit as the CPU would report it */
struct fake_exit {
    uint32_t reason; /* raw exit reason */
    uint64_t qual;
    uint32_t insn_len;
    uint32_t intr_info, intr_error, idt_vec_info, idt_vec_error;
    uint64_t gpa;
    /* the guest as the CPU runs it: called at the VM entry, with the state the VMM entered
     * with, it may set the exit and guest state (NULL: the fields above, as they are) */
    void (*at_entry)(struct fake_exit *x);
    bool set_intr; /* the guest's interruptibility changed while it ran: */
    uint32_t intr; /* GUEST_INTERRUPTIBILITY_INFO at the exit */
};
/* the guest runs into this exit; vmx_loop handles it and enters again: true (false: the VMM
 * halted, e.g. the guest was stopped; the next exit restarts vmx_loop on this vCPU).  The VMM
 * runs on a stack of its own, the test's turn is each VM entry (vmm_boot.c). */
bool fake_run_exit(struct vcpu *v, const struct fake_exit *x);

/* the event the entry after the exit injects (VM_ENTRY_INTR_INFO_FIELD; the CPU consumes it) */
uint32_t fake_take_injected(void);
/* the event of the entry that ran into the exit (the previous fake_run_exit's) */
uint32_t fake_take_injected_before(void);

#endif
