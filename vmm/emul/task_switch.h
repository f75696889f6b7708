/* SPDX-License-Identifier: MIT */
/*
 * Hardware task switches, emulated.  A task switch always exits under VMX
 * (SDM Vol. 3C 26.4.2 "Treatment of Task Switches"; exit reason 9, qualification in Vol. 3C
 * 28.2.1: bits 15:0 the new TSS selector, bits 31:30 the source) and only happens outside
 * IA-32e mode.  Pure: no VMCS, no globals; guest memory through struct ts_mem.  The same file
 * runs in vmm.elf (vmm/vcpu/exit/exit_task_switch.c gathers the state and writes it back) and in
 * tests/unit/emul/test_task_switch.c and tests/fuzz/fuzz_task_switch.c.
 *
 * What it does, in the order of SDM Vol. 3A 7.3 "Task Switching" (steps 1-13) and Table 7-1:
 *  Before the commit point (a fault here leaves every register and every byte of guest memory
 *  as it was, and is reported in the old task's context, as hardware does):
 *   - the new TSS selector: not null and TI = 0 (#GP(sel) for CALL/JMP/gate, #TS(sel) for
 *     IRET: the IRET pseudocode's "link field is local or beyond the GDT"), within the GDT
 *     limit (same faults); the descriptor must be a TSS of the kind the source needs:
 *     available (type 1/9) for CALL, JMP and gates, busy (3/11) for IRET (#GP(sel) / #TS(sel));
 *     present (#NP(sel)); limit >= 0x67 (32-bit) / 0x2b (16-bit) (#TS(sel)).  The CPU made
 *     these checks before the exit; they are repeated because another vCPU can change the GDT
 *     between (KVM does the same).  Privilege checks on gates/TSS DPL are the CPU's, made
 *     before the exit (Vol. 3C 26.4.2 item 1) and not repeated.
 *   - every byte the switch will touch is readable (and writable where it will be written):
 *     the old TSS's dynamic fields, the new TSS, both GDT descriptors, the new stack slot of
 *     an error code.  Memory the guest's walk or the VMM cannot reach (not present in the
 *     guest's page tables, not guest RAM) makes the switch fail with #TS(new sel) (documented
 *     deviation: hardware would take #PF; the emulator holds no CR2).
 *   - the new task's LDTR, CS and SS (Table 7-1 items 5-13).  Deviation: hardware commits
 *     first and faults in the new task's context; a VMCS cannot hold an invalid CS or SS (the
 *     VM entry would fail), so a bad LDTR/CS/SS is reported before the commit, in the old
 *     task's context, with the fault and selector hardware reports (#TS(sel); #NP(CS sel) for
 *     a not-present CS; #SS(SS sel) for a not-present SS; #TS(LDT sel) for a bad or absent LDT).
 *  The commit (step 5-12): old TSS busy bit cleared for JMP/IRET; the old task's EIP (past
 *  the instruction for CALL/JMP/IRET/software interrupts, the interrupted EIP for other events),
 *  EFLAGS (NT cleared in the image for IRET), general registers and selectors saved into the
 *  old TSS (CR3 and LDTR are not saved, as on hardware); for CALL and gates the back link of
 *  the new TSS = old TR and NT set in the new EFLAGS; the new TSS's busy bit set (CALL, JMP,
 *  gate); TR, CR3 (only with CR0.PG and a 32-bit TSS), LDTR, EFLAGS, EIP, registers and
 *  segments loaded; CR0.TS set; DR7's local enables (L0-L3, LE) cleared; for an exception with
 *  an error code through a task gate the error code pushed on the new stack (4 bytes from a
 *  32-bit TSS, 2 from a 16-bit one).  Descriptor tables and the new stack are read through the
 *  new CR3 (hardware loads CR3 before the descriptors, step 12-13).
 *  After the commit (step 13): DS, ES, FS, GS checked; one that fails is left unusable with its
 *  selector loaded and the first failure is the fault to deliver in the new task (#TS(sel),
 *  #NP(sel)), as hardware does.  Accessed bits are set in memory and in the caches.
 *  A new EFLAGS.VM = 1 loads all six segments as virtual-8086 ones (base = sel << 4).
 *
 * Not modelled (said here, and in docs/ARCHITECTURE.md): the TSS T bit (#DB on the switch) is
 * ignored (ts_out.t_bit says it was set); I/O bitmap and interrupt redirection are untouched
 * (not used by the switch); 16-bit TSSes are emulated with the upper halves of EIP, EFLAGS and
 * the registers loaded as zero (the SDM leaves them undefined) and CR3 unchanged.
 *
 * Bounded: at most TS_MAX_ACCESSES accessor calls of at most 8 bytes each, no loop depends on
 * guest data.  Linear addresses are 32 bits; an access whose bytes wrap past 4 GiB is refused.
 */
#ifndef PTV_VMX_TASK_SWITCH_H
#define PTV_VMX_TASK_SWITCH_H

#include <stdbool.h>
#include <stdint.h>
#include "emul/guest_check.h" /* struct vmx_seg, VSEG_* */

/* exit qualification of a task-switch exit (SDM Vol. 3C 28.2.1, Table 28-2) */
#define TS_QUAL_SEL(q)    ((uint16_t)((q)&0xffff))
#define TS_QUAL_SOURCE(q) ((unsigned)(((q) >> 30) & 3))
enum ts_source { TS_CALL = 0, TS_IRET = 1, TS_JMP = 2, TS_GATE = 3 };

/* what delivered the event of a TS_GATE switch (the IDT-vectoring information's type) */
/* SOFT: INT n / INT3 / INTO: EIP past the instruction, EXT = 0; ICEBP (INT1, a privileged
 * software exception): EIP past the instruction, EXT = 1 (SDM Vol. 3A 6.13); HW: EXT = 1 */
enum ts_event { TS_EV_HW, TS_EV_SOFT, TS_EV_ICEBP };

/* guest memory by 32-bit linear address, translated with the given CR3 (the rest of the
 * paging state is the caller's); false where the bytes are not guest RAM or not mapped.
 * `for_write`: the caller will write these bytes later (fail now if it could not). */
struct ts_mem {
    void *ctx;
    bool (*read)(void *ctx, uint64_t cr3, uint32_t lin, void *buf, unsigned len, bool for_write);
    bool (*write)(void *ctx, uint64_t cr3, uint32_t lin, const void *buf, unsigned len);
    /* optional (NULL: any): whether CR3 can take this value (PAE: the PDPTEs' reserved bits);
     * false makes the switch fail with #GP(0) before the commit */
    bool (*cr3_ok)(void *ctx, uint64_t cr3);
};
#define TS_MAX_LEN 0x68 /* the longest access: a whole 32-bit TSS */

#define TS_MAX_ACCESSES 64

struct ts_state {
    uint64_t cr0, cr3, dr7;
    uint32_t eip, eflags;
    uint32_t gpr[8];              /* encoding order EAX, ECX, EDX, EBX, ESP, EBP, ESI, EDI */
    struct vmx_seg seg[NR_VSEGS]; /* VSEG_ES..VSEG_GS, LDTR, TR; AR in VMCS format */
    uint32_t gdtr_base, gdtr_limit;
};

struct ts_in {
    struct ts_state cur; /* EIP: the instruction's / the interrupted one */
    uint16_t sel;        /* TS_QUAL_SEL */
    enum ts_source source;
    enum ts_event event; /* TS_GATE only */
    bool has_error;      /* TS_GATE only: an exception with an error code */
    uint32_t error;
    uint32_t insn_len; /* CALL/JMP/IRET and software interrupts */
};

enum ts_result { TS_OK, TS_FAULT };

/* exception vectors the emulator reports */
#define TS_VEC_TS 10
#define TS_VEC_NP 11
#define TS_VEC_SS 12
#define TS_VEC_GP 13

struct ts_out {
    /* TS_OK: the new state.  TS_FAULT with committed: the new state AND a fault to deliver in
     * the new task; TS_FAULT without committed: a fault in the old task, nothing changed. */
    struct ts_state next;
    bool committed;
    bool cr3_loaded; /* next.cr3 came from the TSS (the caller reloads PDPTEs, flushes) */
    bool t_bit;      /* the new TSS's T bit was set (not modelled: no #DB) */
    unsigned vector; /* TS_VEC_* when TS_FAULT */
    uint32_t error;  /* its error code: selector & 0xfffc, EXT (bit 0) for a hardware event */
    const char *why; /* TS_FAULT: a static string for the log */
};

enum ts_result task_switch(const struct ts_in *in, const struct ts_mem *m, struct ts_out *out);

#endif
