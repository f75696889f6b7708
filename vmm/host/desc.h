/* SPDX-License-Identifier: MIT */
/* Host GDT, TSS, IDT and the exception fix-up table. */
#ifndef PTV_DESC_H
#define PTV_DESC_H

#include <stdint.h>
#include <stdbool.h>

#define HOST_CS_SEL 0x08
#define HOST_DS_SEL 0x10
#define HOST_TR_SEL 0x18

struct exc_frame {
    uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
    uint64_t rbp, rdi, rsi, rdx, rcx, rbx, rax;
    uint64_t vector, error;
    uint64_t rip, cs, rflags, rsp, ss;
};
_Static_assert(sizeof(struct exc_frame) == 22 * 8, "exc_frame layout is used by idt.S");

/* Build this CPU's GDT/TSS/IDT in pool memory (this_cpu()->desc); the IDT is loaded at once (the
 * firmware's IDTR is returned for restoring on a failed launch), the GDT/TR only at VM exit through
 * the VMCS host-state fields. */
int host_desc_init(void) __attribute__((warn_unused_result));
void host_idt_load(void);
/* after the first VM exit: host GDT/TSS are live, switch gates to them */
void host_idt_activate(void);
/* without a VM exit: load the host GDT/CS/SS/DS/ES/TR and the host IDT gates */
void host_desc_switch(void);
uint64_t host_gdt_base(void);
uint64_t host_idt_base(void);
uint64_t host_tss_base(void);

/* C side of the exception stubs (idt.S) */
void host_exception(struct exc_frame *f);

#define EXTABLE_ENTRY(insn, fixup)                                                                 \
    ".pushsection .extable,\"a\"\n\t.balign 4\n\t.long " #insn " - ., " #fixup                     \
    " - .\n\t.popsection\n\t"

/* MSR access that survives a #GP (Bochs #GPs on DEBUGCTL, PERF_CAPABILITIES, RTIT MSRs).
 * Return 0 on success, -1 if the access faulted.  The fix-up is the host IDT's (desc.c); the
 * instructions are in fixup.c, the one file host tests replace by their fake MSR map. */
int rdmsr_safe(uint32_t msr, uint64_t *val) __attribute__((warn_unused_result));
int wrmsr_safe(uint32_t msr, uint64_t val) __attribute__((warn_unused_result));
/* XSETBV that survives a #GP (a value the CPU refuses after the policy's checks): 0 or -1 */
int xsetbv_safe(uint32_t index, uint64_t val) __attribute__((warn_unused_result));

#endif
