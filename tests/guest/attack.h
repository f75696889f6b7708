/* SPDX-License-Identifier: MIT */
/*
 * attack.efi: the adversarial in-guest suite.  Each attack is one
 * hostile act of a CPL 0 guest (or of a CPL 3 program inside it) against a
 * README promise, and reports PASS/FAIL lines (libtest.h) on what the guest
 * saw.  After every attack the driver (attack.c) asks the VMM to check its
 * canary and its own invariants (PTV_VMCALL_SELFCHECK) and that it still
 * answers: one more PASS/FAIL line per attack.
 *
 * Attacks live in groups, one file each (attack_<group>.c), as a table ending
 * in {0}:
 *
 *   const struct attack attacks_cpu[] = {
 *       {"compat-mode CPUID at EIP 0xfffffffe", atk_rip_wrap},
 *       {0},
 *   };
 *
 * and the group is listed in attack.c.  An attack must leave the machine as it
 * found it (IDT, GDT, CR0/CR4, MSRs) so the next one starts clean.
 */
#ifndef PTV_GUEST_ATTACK_H
#define PTV_GUEST_ATTACK_H

#include <stdbool.h>
#include <stdint.h>

#include "libtest.h"
#include "x86.h"

struct attack {
    const char *name;
    void (*run)(void);
};

/*
 * Run fn(arg) with interrupts off and a private IDT in which every exception
 * (vectors 0-31) unwinds back here: returns ATK_NONE if fn returned, else the
 * vector.  atk_fault describes the exception (the frame the CPU pushed).  The
 * caller's IDT and RFLAGS.IF are restored either way.  Nesting is not allowed.
 */
#define ATK_NONE (-1)
struct atk_fault {
    int vector;
    uint64_t error; /* 0 for vectors without an error code */
    uint64_t rip, cs, rflags, rsp, ss;
};
extern struct atk_fault atk_fault;
int atk_try(void (*fn)(void *), void *arg);

/* VMCALL from CPL 0 (RAX = fn, RBX/RCX/RDX = a1..a3); returns RAX, results in *r */
uint64_t atk_vmcall(uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3, struct vmcall_regs *r);

/* the VMM's own memory, asked once at start (PTV_VMCALL_VMM_RANGE) */
extern uint64_t atk_vmm_base, atk_vmm_size, atk_canary_pa;

/* log lines the VMM has written so far (PTV_VMCALL_VMM_STATS RDX) */
uint64_t atk_vmm_log_lines(void);

#define X86_RFLAGS_TF ((uint64_t)1 << 8)
#define X86_RFLAGS_IF ((uint64_t)1 << 9)
#define X86_RFLAGS_RF ((uint64_t)1 << 16)

/* the groups (attack_*.c) */
extern const struct attack attacks_cpu[];
extern const struct attack attacks_msr[];
extern const struct attack attacks_vmcall[];
extern const struct attack attacks_mem[];  /* EPT, host paging, pool */
extern const struct attack attacks_uart[]; /* the shared serial port */

#endif
