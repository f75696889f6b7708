/* SPDX-License-Identifier: MIT */
/*
 * The VMX side of an emulated task switch (emul/task_switch.h holds the rules): gather the
 * guest's state from the VMCS, give the pure emulator guest memory by linear address (the
 * guest's own page walk, vmm/trace/gwalk.c, then EPT: guest RAM only, never VMM memory), and
 * write the new state back, or inject the fault it reports.
 */
#include "emul/task_switch.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "emul/emul_policy.h" /* pdptes_check */
#include "trace/gwalk.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "base/vmm_state.h"
#include "base/handoff.h"
#include "lib/ptv_string.h"
#include "lib/range.h"

struct ts_vmx {
    struct vcpu *v;
    struct gw_paging paging; /* the guest's CR0/CR4/EFER; CR3 per access */
    bool pae;                /* PAE paging: CR3 loads the PDPTEs (SDM Vol. 3A 4.4.1) */
    uint64_t pdpte[4];       /* those of the CR3 cr3_ok() accepted last */
};

enum copy { COPY_IN, COPY_OUT, PROBE_OUT }; /* PROBE_OUT: may COPY_OUT, copies nothing */

/* guest-physical [gpa, gpa + len) inside one page, copied in or out: guest RAM only (the
 * handoff's map, outside the VMM's span), mapped by EPT to itself with the rights asked */
static bool gpa_copy(struct vcpu *v, uint64_t gpa, void *buf, unsigned len, enum copy how)
{
    bool write = how != COPY_IN;
    uint64_t hpa;
    unsigned perms = 0;
    if (vm_mem_type(v->handoff, gpa, len) != PTV_MEM_RAM)
        return false;
    vm_ept_lock(); /* another CPU may be narrowing EPT */
    bool ok = !ept_translate(v->ept, gpa, &hpa, &perms, NULL, NULL) && hpa == gpa &&
              (perms & (write ? EPT_W : EPT_R));
    if (ok && how == COPY_OUT)
        memcpy((void *)(uintptr_t)hpa, buf, len);
    else if (ok && how == COPY_IN)
        memcpy(buf, (const void *)(uintptr_t)hpa, len);
    vm_ept_unlock();
    return ok;
}

static bool walk_read(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    return gpa_copy(ctx, gpa, buf, len, COPY_IN);
}

/* linear [lin, lin + len) through the guest's paging with CR3 = cr3, page by page */
static bool lin_copy(struct ts_vmx *t, uint64_t cr3, uint32_t lin, void *buf, unsigned len,
                     enum copy how)
{
    struct gw_mem m = {.ctx = t->v, .read = walk_read};
    struct gw_paging p = t->paging;
    p.cr3 = cr3;
    uint8_t *b = buf;
    struct range_walk w; /* 32-bit linear addresses: wrap at 4 GiB (lib/range.h) */
    range_for_each(&w, lin, len, 0x1000, RANGE_SPACE32)
    {
        uint64_t gpa;
        if (gw_translate(&m, &p, w.addr, &gpa) ||
            !gpa_copy(t->v, gpa, b + w.done, (unsigned)w.len, how))
            return false;
    }
    return true;
}

static bool ts_read(void *ctx, uint64_t cr3, uint32_t lin, void *buf, unsigned len, bool for_write)
{
    struct ts_vmx *t = ctx;
    if (!lin_copy(t, cr3, lin, buf, len, COPY_IN))
        return false;
    return !for_write || lin_copy(t, cr3, lin, buf, len, PROBE_OUT); /* the write to come */
}

static bool ts_write(void *ctx, uint64_t cr3, uint32_t lin, const void *buf, unsigned len)
{
    return lin_copy(ctx, cr3, lin, (void *)(uintptr_t)buf, len, COPY_OUT);
}

/* PAE paging: the PDPTEs of the new CR3 must be valid (as MOV to CR3, SDM Vol. 3A 4.4.1) */
static bool ts_cr3_ok(void *ctx, uint64_t cr3)
{
    struct ts_vmx *t = ctx;
    if (!t->pae)
        return true;
    uint64_t gpa = cr3 & 0xffffffe0ull;
    for (unsigned i = 0; i < 4; i++)
        if (!gpa_copy(t->v, gpa + 8 * i, &t->pdpte[i], 8, COPY_IN))
            t->pdpte[i] = 0; /* outside guest RAM: not present, as load_pdptes() reads it */
    return !pdptes_check(t->pdpte, vmx_caps.maxphyaddr);
}

#define SEG_READ(SEG)                                                                              \
    ((struct vmx_seg){.sel = vmcs_read16(GUEST_##SEG##_SELECTOR),                                  \
                      .base = vmcs_readl(GUEST_##SEG##_BASE),                                      \
                      .limit = vmcs_read32(GUEST_##SEG##_LIMIT),                                   \
                      .ar = vmcs_read32(GUEST_##SEG##_AR_BYTES)})

static void state_read(struct vcpu *v, struct ts_state *s)
{
    s->cr0 = vcpu_guest_cr0(v);
    s->cr3 = vmcs_readl(GUEST_CR3);
    s->dr7 = vmcs_readl(GUEST_DR7);
    s->eip = (uint32_t)vmcs_readl(GUEST_RIP);
    s->eflags = (uint32_t)vmcs_readl(GUEST_RFLAGS);
    for (unsigned i = 0; i < 8; i++)
        s->gpr[i] = (uint32_t)v->regs.gpr[i];
    s->gpr[GPR_RSP] = (uint32_t)vmcs_readl(GUEST_RSP);
    s->seg[VSEG_ES] = SEG_READ(ES);
    s->seg[VSEG_CS] = SEG_READ(CS);
    s->seg[VSEG_SS] = SEG_READ(SS);
    s->seg[VSEG_DS] = SEG_READ(DS);
    s->seg[VSEG_FS] = SEG_READ(FS);
    s->seg[VSEG_GS] = SEG_READ(GS);
    s->seg[VSEG_LDTR] = SEG_READ(LDTR);
    s->seg[VSEG_TR] = SEG_READ(TR);
    s->gdtr_base = (uint32_t)vmcs_readl(GUEST_GDTR_BASE);
    s->gdtr_limit = vmcs_read32(GUEST_GDTR_LIMIT);
}

static void state_write(struct vcpu *v, const struct ts_out *o, const struct ts_vmx *t)
{
    const struct ts_state *n = &o->next;
    for (unsigned i = 0; i < 8; i++)
        if (i != GPR_RSP)
            v->regs.gpr[i] = n->gpr[i];
    vmcs_writel(GUEST_RSP, n->gpr[GPR_RSP]);
    vmcs_writel(GUEST_RIP, n->eip);
    vmcs_writel(GUEST_RFLAGS, n->eflags);
    vmcs_writel(CR0_READ_SHADOW, n->cr0); /* CR0.TS: as guest_write_cr0() (exit_cr.c) */
    vmcs_writel(GUEST_CR0, (n->cr0 | v->cr0_fixed0) & v->cr0_fixed1);
    vmcs_writel(GUEST_DR7, n->dr7);
    VMCS_SEG_WRITE(ES, n->seg[VSEG_ES]);
    VMCS_SEG_WRITE(CS, n->seg[VSEG_CS]);
    VMCS_SEG_WRITE(SS, n->seg[VSEG_SS]);
    VMCS_SEG_WRITE(DS, n->seg[VSEG_DS]);
    VMCS_SEG_WRITE(FS, n->seg[VSEG_FS]);
    VMCS_SEG_WRITE(GS, n->seg[VSEG_GS]);
    VMCS_SEG_WRITE(LDTR, n->seg[VSEG_LDTR]);
    VMCS_SEG_WRITE(TR, n->seg[VSEG_TR]);
    if (o->cr3_loaded) {
        vmcs_writel(GUEST_CR3, n->cr3);
        if (t->pae) {
            vmcs_write64(GUEST_PDPTR0, t->pdpte[0]);
            vmcs_write64(GUEST_PDPTR1, t->pdpte[1]);
            vmcs_write64(GUEST_PDPTR2, t->pdpte[2]);
            vmcs_write64(GUEST_PDPTR3, t->pdpte[3]);
        }
    }
    /* a CR3 load flushes the guest's TLBs; CR0.TS does not, but one INVEPT covers both */
    vmx_invept_all();
}

enum exit_action handle_task_switch(struct vcpu *v, const struct vmexit *e)
{
    if (vmcs_read32(VM_ENTRY_CONTROLS) & VM_ENTRY_IA32E_MODE) { /* cannot happen (SDM 7.7) */
        pr_warn_rl("vmx", "task switch exit in IA-32e mode at RIP %#lx: #UD to the guest", e->rip);
        vcpu_inject_ud(v);
        return EXIT_INJECT;
    }
    uint32_t idt = vmcs_read32(IDT_VECTORING_INFO_FIELD);
    uint32_t type = idt & INTR_INFO_INTR_TYPE_MASK;
    struct ts_in in = {
        .sel = TS_QUAL_SEL(e->qual),
        .source = (enum ts_source)TS_QUAL_SOURCE(e->qual),
        .insn_len = e->insn_len,
    };
    if (in.source == TS_GATE && (idt & INTR_INFO_VALID)) {
        in.event = type == INTR_TYPE_SOFT_INTR || type == INTR_TYPE_SOFT_EXCEPTION ? TS_EV_SOFT
                   : type == INTR_TYPE_PRIV_SW_EXCEPTION                           ? TS_EV_ICEBP
                                                                                   : TS_EV_HW;
        in.has_error = type == INTR_TYPE_HARD_EXCEPTION && (idt & INTR_INFO_DELIVER_CODE);
        if (in.has_error)
            in.error = vmcs_read32(IDT_VECTORING_ERROR_CODE);
    }
    state_read(v, &in.cur);
    uint64_t cr4 = vcpu_guest_cr4(v);
    struct ts_vmx t = {
        .v = v,
        .paging = {.cr0 = in.cur.cr0, .cr4 = cr4, .efer = vmcs_read64(GUEST_IA32_EFER)},
        .pae = (in.cur.cr0 & X86_CR0_PG) && (cr4 & X86_CR4_PAE),
    };
    struct ts_mem m = {.ctx = &t, .read = ts_read, .write = ts_write, .cr3_ok = ts_cr3_ok};
    struct ts_out o;
    enum ts_result r = task_switch(&in, &m, &o);
    if (r == TS_OK || o.committed) {
        state_write(v, &o, &t);
        uint32_t intr = vmcs_read32(GUEST_INTERRUPTIBILITY_INFO);
        /* the instruction or event completed: no STI / MOV SS shadow; an NMI delivered
         * through a task gate blocks NMIs as any NMI delivery does (SDM Vol. 3A 6.7.1) */
        intr &= ~(GUEST_INTR_STATE_STI | GUEST_INTR_STATE_MOV_SS);
        if (in.source == TS_GATE && (idt & INTR_INFO_VALID) && type == INTR_TYPE_NMI_INTR)
            intr |= GUEST_INTR_STATE_NMI;
        /* an IRET ends NMI blocking (SDM Vol. 3A 6.7.1), also one that switches tasks: the
         * exit came before it completed, so the VMM ends it (32-bit Windows' NMI task) */
        if (in.source == TS_IRET)
            intr &= ~GUEST_INTR_STATE_NMI;
        vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, intr);
        if (o.t_bit)
            pr_info_rl("vmx", "task switch to %#x: the TSS T bit is not emulated (no #DB)", in.sel);
    }
    if (r == TS_OK)
        return EXIT_RESUME;
    /* the fault replaces the event that caused the switch: no #DF combination (documented) */
    pr_debug("vmx", "task switch to %#x at RIP %#lx: vector %u error %#x (%s)%s", in.sel, e->rip,
             o.vector, o.error, o.why, o.committed ? " in the new task" : "");
    vcpu_inject_exception(v, o.vector, true, o.error);
    return EXIT_INJECT;
}
