/* SPDX-License-Identifier: MIT */
/* The software tracer's per-vCPU state, shared by the files of its shim, bottom to top:
 * trace_guest.c (guest memory, registers, how this CPU steps), trace_tf.c (the trap flag's side),
 * trace_step.c (stepping the vCPU and tracing each step), trace_vmx.c (the trace VMCALLs, the two
 * sources behind them, what a dump reads), trace_dump.c (dumps) and trace_boot.c (the MTF probe
 * and the boot window).  Internal to them. */
#ifndef PTV_TRACE_VCPU_H
#define PTV_TRACE_VCPU_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/codepages.h"
#include "trace/gwalk.h"
#include "trace/swtrace.h"
#include "vmx/vmcs.h"
#include "hw/vmx.h"
#include "hw/cpu.h"
#include "base/vmm_state.h"
#include <ptv/config.h>

struct vcpu;

struct trace_vcpu {
    struct swtrace sw;
    struct swpt_ring ring;
    struct swpt_cfg cfg;
    uint64_t budget;
    bool pending_start;
    bool budget_logged;
    bool nomem_said;
    /* what the window's close at its budget does besides (the boot window: its dump), set by
     * whoever opened it */
    void (*closed_hook)(struct vcpu *v);
    bool cache_sized; /* the decode cache got its larger table (or the pool had none) */
    /* the last guest page read_gpa found readable (guest RAM, identity in EPT), valid while
     * no EPT narrowing happened since (vmm_sd.gen: every narrowing is a shootdown) */
    bool ok_valid;
    uint64_t ok_page, ok_gen;
    /* the last code pages note_code found in the window's set (linear page + 1, CR3; page 0:
     * empty): the steps on them skip the set, which only grows while the window is open */
    struct {
        uint64_t page1, cr3;
    } noted[4];
    unsigned noted_next, noted_hit; /* the next slot to fill, the slot the last step hit */
    struct code_store *code;        /* the bytes of the first code pages the window ran */
    /* block stepping (trace_step.c): the block out, and the guest's state it borrowed */
    struct swtrace_block blk;
    struct swtrace_cpu blk_cpu; /* the vCPU as it was when the block went out */
    bool blk_cool;             /* the next entry steps one instruction (an event came in a block) */
    uint64_t blk_dr0, blk_dr7; /* the guest's DR0 and DR7 */
    uint32_t blk_exc;          /* the exception bitmap without blocks */
    /* the block went out with RFLAGS.RF set for its lead (swtrace_block.lead_rf) and no exit
     * has come since; blk_rf_guest: the RF the guest had before */
    bool blk_rf, blk_rf_guest;
    uint64_t windows;
    /* the code pages the window ran (the dump's snapshots) and the paging they ran under */
    struct codepages cp;
    struct gw_paging paging;
};

/*
 * The bytes of the first CODE_COPIES code pages a window runs, copied when they first run:
 * a dump sends these (the bytes that ran) even after the process exited or the page changed;
 * the other pages are read at dump time and sent only if their CRC still matches.
 */
#define CODE_COPIES 64
struct code_store {
    struct {
        uint64_t cr3, va; /* cp_key()'s: CP_CR3_ANY for kernel pages */
    } key[CODE_COPIES];
    unsigned n;
    uint8_t scratch[CP_PAGE] __attribute__((aligned(4096))); /* this vCPU's page reads */
    uint8_t page[CODE_COPIES][CP_PAGE];
};
#define CODE_PAGES ((sizeof(struct code_store) + PAGE_SIZE - 1) / PAGE_SIZE)

#define CP_SLOTS 1024 /* code pages a window remembers: 768 (codepages.h keeps it 3/4 full) */
#define CP_PAGES ((CP_SLOTS * sizeof(struct cp_entry) + PAGE_SIZE - 1) / PAGE_SIZE)

/* the host address of guest-physical [gpa, gpa + len) inside one 4 KiB page, or 0: guest RAM
 * (and, to read, firmware-reserved / ACPI memory code may run from), identity-mapped in EPT */
uint64_t trace_guest_page(struct vcpu *v, uint64_t gpa, uint64_t len, bool write);
/* gw_mem.read over trace_guest_page (ctx: the vcpu) */
bool trace_read_gpa(void *ctx, uint64_t gpa, void *buf, unsigned len);
/* the window's stepping ends: TF, DEBUGCTL.BTF and MTF back as the guest had them */
void trace_stepping_off(struct vcpu *v);

/* sw_trace = auto: whether this CPU delivers MTF exits, measured by the probe (trace_boot.c) at
 * the BSP's first entries (-1: not measured, 0: it does not, 1: it does) */
extern int trace_mtf_delivered;
/* a window of this vCPU goes to system-mode Intel PT, not the software tracer (trace_vmx.c) */
bool trace_vmx_hw_source(const struct vcpu *v);

/*
 * sw_trace = tf (include/ptv/config.h): the step is the trap flag's #DB, caught by the
 * exception bitmap (vcpu_mtf_update).  TF is set before every entry (POPF / IRET may have
 * cleared it), and the single-step bit a VM exit may leave in the pending debug exceptions
 * (an emulated instruction retired with TF = 1; Bochs 2.7 saves it at every exit) is dropped:
 * the tracer counts an emulated instruction itself, a second #DB before the next instruction
 * would read as a step that did not move -- except where VM entry needs it (MOV SS blocking,
 * HLT), and an STI shadow the step's #DB ended is ended (tf_step_arm: SDM Vol. 3C 27.3.1.5).
 */
static inline bool trace_vmx_tf(void)
{
    return vmm_cfg->trace_sw == PTV_SW_TRACE_TF ||
           (vmm_cfg->trace_sw == PTV_SW_TRACE_AUTO && trace_mtf_delivered == 0);
}

/* the vCPU as the stepping logic sees it, read from the VMCS (inline: every step reads it) */
static inline void trace_observe(struct swtrace_cpu *c)
{
    uint32_t cs_ar = vmcs_read32(GUEST_CS_AR_BYTES);
    bool lma = vmcs_read32(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE;
    c->rip = vmcs_readl(GUEST_RIP);
    c->rsp = vmcs_readl(GUEST_RSP);
    c->cs_sel = vmcs_read16(GUEST_CS_SELECTOR);
    /* 64-bit code ignores the CS base (linear IP = RIP, as swtrace's lin_of) */
    c->cs_base = lma && (cs_ar & VMX_AR_L) ? 0 : vmcs_readl(GUEST_CS_BASE);
    c->ctx.cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    c->ctx.cr3 = vmcs_readl(GUEST_CR3);
    c->ctx.cs = lma && (cs_ar & VMX_AR_L) ? X86_CODE64
                : (cs_ar & VMX_AR_DB)     ? X86_CODE32
                                          : X86_CODE16;
    c->paging = (struct gw_paging){
        .cr0 = vmcs_readl(GUEST_CR0),
        .cr3 = c->ctx.cr3,
        .cr4 = vmcs_readl(GUEST_CR4),
        .efer = lma ? 1ull << 10 : 0,
    };
    c->tsc = rdtsc();
    c->rf = false;
}

/* the trap-flag side (trace_tf.c): TF on or off for the next step with what VM entry needs;
 * the guest's own TF back at a window's close (with its DEBUGCTL.BTF); TF armed for a step;
 * what a step under the tracer's TF left (frames, RFLAGS images, the guest's TF and the #DB it
 * owes) */
void trace_tf_write(struct vcpu *v, bool on);
void trace_tf_guest_write(struct vcpu *v, bool btf);
void trace_tf_arm(struct vcpu *v);
/* the guest's own TF as the vCPU, at c, comes back to stepping from running free (from_cpl0: at
 * CPL 0 in a user-only window, else outside the window's CR3) */
bool trace_tf_after_free(struct vcpu *v, const struct swtrace_cpu *c, bool from_cpl0);
void trace_tf_after_step(struct vcpu *v, struct trace_vcpu *t, const struct x86_insn *prev,
                         bool prev_valid, uint64_t ip, uint64_t rsp_before, unsigned cpl_before,
                         uint64_t cr3_before, uint16_t cs_before, const struct swtrace_cpu *c,
                         bool ran);

#endif
