/* SPDX-License-Identifier: MIT */
/*
 * The fake machine under the VMM's real sources in host tests: a VMCS backed by an array indexed
 * through vmcs_fields.def, MSRs in a map (a missing one #GPs), CPUID from a table, control and
 * debug registers as variables, port I/O to a UART that records what the VMM prints, a TSC that
 * counts, and a halt that returns to the test.  The stand-in headers under tests/fakes/vmm/
 * (first on the include path) route the VMM's instruction wrappers here; the VMM's own headers
 * keep every constant and struct.
 */
#ifndef PTV_TESTS_VMM_WORLD_H
#define PTV_TESTS_VMM_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cpuid_regs;
struct desc_ptr;

/* ---- VMCS ---- */
/* VMREAD / VMWRITE as the instructions: false = VMfail (a field not in vmcs_fields.def, a
 * write to a read-only field, no current VMCS) */
bool fake_vmread(uint32_t field, uint64_t *val);
bool fake_vmwrite(uint32_t field, uint64_t val);
/* what the CPU writes (exit information, read-only fields): no VMfail, no width check */
void fake_vmcs_set(uint32_t field, uint64_t val);
uint64_t fake_vmcs_get(uint32_t field);
bool fake_vmcs_was_written(uint32_t field);
void fake_vmcs_clear_written(void);
extern unsigned long fake_vmcs_fails; /* VMfails the VMM's accessors met */
extern bool fake_vmcs_current;        /* VMPTRLD done */

/* ---- MSRs ---- */
/* an MSR that exists (reads val); gp_write: a WRMSR to it #GPs */
void fake_msr_set(uint32_t msr, uint64_t val);
bool fake_msr_get(uint32_t msr, uint64_t *val);
void fake_msr_gp_on_write(uint32_t msr, bool gp);
void fake_msr_remove(uint32_t msr);
/* the instructions: false = #GP */
bool fake_rdmsr(uint32_t msr, uint64_t *val);
bool fake_wrmsr(uint32_t msr, uint64_t val);
/* a plain RDMSR/WRMSR (no fix-up) that #GPd: in the VMM it would have crashed the machine */
extern unsigned long fake_root_faults;
extern uint32_t fake_root_fault_msr;

/* ---- CPUID ---- */
void fake_cpuid_set(uint32_t leaf, uint32_t sub, uint32_t eax, uint32_t ebx, uint32_t ecx,
                    uint32_t edx);
void fake_cpuid(uint32_t leaf, uint32_t sub, struct cpuid_regs *r);

/* ---- registers, ports, time ---- */
struct fake_cpu {
    uint64_t cr0, cr2, cr3, cr4, dr0, dr6, dr7, rflags, xcr0;
    uint16_t es, cs, ss, ds, fs, gs, ldtr, tr;
    uint64_t gdt_base, idt_base;
    uint16_t gdt_limit, idt_limit;
    uint64_t tsc;
    unsigned long wbinvds, clflushes, invepts, invvpids, nmi_unblocks;
    bool irq_on;
};
extern struct fake_cpu fake_cpu;
void fake_load_desc(int which, const struct desc_ptr *p); /* 0 = GDT, 1 = IDT */
void fake_store_desc(int which, struct desc_ptr *p);
bool fake_xsetbv(uint32_t index, uint64_t val);
void fake_out(uint16_t port, uint32_t val, unsigned size);
uint32_t fake_in(uint16_t port, unsigned size);

/* the serial console: every byte the VMM wrote to the UART's THR */
extern char fake_console[1 << 16];
extern size_t fake_console_len;
void fake_console_clear(void);
bool fake_console_has(const char *needle);

/* ---- halt ---- */
/* halt_forever() in the VMM: counted, then the hook (which must not return: vmm_boot.c leaves
 * the VMM's context for the test's), else the test process stops with the console */
extern void (*fake_halt_hook)(void);
extern unsigned long fake_halts;
__attribute__((noreturn)) void fake_halt(void);

/* ---- the CPU's per-CPU pointer (%gs:0) ---- */
struct percpu;
extern struct percpu *fake_this_cpu;

/* ---- the guest ---- */
/* vmx_enter(): runs the scripted exit (fills the exit-information fields) */
typedef void (*fake_guest_fn)(void *ctx);
extern fake_guest_fn fake_guest;
extern void *fake_guest_ctx;
extern unsigned long fake_entries;
extern int fake_entry_fail; /* vmx_enter's result: 0 = an exit, 1 = VMfailValid, -1 */

/* a world with a basic Intel CPU: reset every table above */
void fake_world_reset(void);

#endif
