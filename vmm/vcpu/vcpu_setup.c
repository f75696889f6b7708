/* SPDX-License-Identifier: MIT */
/*
 * VMCS set-up for the blue pill: the guest state is the caller's own state
 * (SDM Vol. 3C 25.4 guest-state area, 27.3 checks), the host state is the
 * VMM's own GDT/IDT/TSS/page tables (25.5, 27.2.3).
 */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "base/vmm_state.h"
#include "host/paging.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "base/palloc.h"
#include "emul/guest_check.h"
#include "pt/shim/pt_vmx.h"
#include "lbr/shim/lbr_vmx.h"
#include "vcpu/exit/exits.h"
#include "hw/percpu.h"
#include "pmu/shim/pmu_vmx.h"

extern char vmx_exit_stub[];

/* Decode a GDT descriptor into VMCS form (SDM Vol. 3C 25.4.1 access rights). */
static struct vmx_seg seg_from_gdt(const struct desc_ptr *gdtr, uint16_t sel)
{
    struct vmx_seg s = {.sel = sel, .ar = VMX_AR_UNUSABLE};
    unsigned idx = sel >> 3;
    if ((sel & ~3u) == 0 || (sel & 4) || idx * 8 + 7 > gdtr->limit)
        return s; /* null or LDT selector: unusable */
    const uint64_t *gdt = (const uint64_t *)(uintptr_t)gdtr->base;
    uint64_t d = gdt[idx];
    s.base = ((d >> 16) & 0xffffff) | (((d >> 56) & 0xff) << 24);
    s.limit = (uint32_t)((d & 0xffff) | (((d >> 48) & 0xf) << 16));
    if (d & (1ull << 55)) /* G */
        s.limit = (s.limit << 12) | 0xfff;
    s.ar = (uint32_t)((d >> 40) & 0xff) | (uint32_t)(((d >> 52) & 0xf) << 12);
    bool system = !(d & (1ull << 44));
    if (system) /* 16-byte system descriptor: base 63:32 in the next slot */
        s.base |= gdt[idx + 1] << 32;
    else
        s.ar |= 1; /* loaded code/data segments are accessed (SDM Vol. 3C 27.3.1.2) */
    return s;
}

static uint16_t read_sel(int which)
{
    switch (which) {
    case 0:
        return read_es();
    case 1:
        return read_cs();
    case 2:
        return read_ss();
    case 3:
        return read_ds();
    case 4:
        return read_fs();
    case 5:
        return read_gs();
    case 6:
        return read_ldtr();
    case 7:
        return read_tr();
    }
    return 0;
}

static int guest_state_setup(struct vcpu *v, const struct caller_state *cs)
{
    struct desc_ptr gdtr, idtr = v->guest_idtr; /* the VMM's IDT is loaded by now */
    sgdt(&gdtr);
    struct vmx_seg es = seg_from_gdt(&gdtr, read_sel(0)), csg = seg_from_gdt(&gdtr, read_sel(1));
    struct vmx_seg ss = seg_from_gdt(&gdtr, read_sel(2)), ds = seg_from_gdt(&gdtr, read_sel(3));
    struct vmx_seg fs = seg_from_gdt(&gdtr, read_sel(4)), gs = seg_from_gdt(&gdtr, read_sel(5));
    struct vmx_seg ldtr = seg_from_gdt(&gdtr, read_sel(6)), tr = seg_from_gdt(&gdtr, read_sel(7));
    fs.base = rdmsr(MSR_FS_BASE);
    gs.base = this_cpu()->caller_gs_base; /* GS.base is the VMM's per-CPU pointer by now */
    if (tr.ar & VMX_AR_UNUSABLE) {
        /* OVMF leaves TR = 0 and VM entry needs a usable busy TSS for a 64-bit guest
         * (SDM 27.3.1.2).  The TSS is never consulted at CPL 0 without IST, so a
         * null-selector, zero-base TR is a faithful stand-in.  The loader normally
         * installs a real one. */
        tr = (struct vmx_seg){.sel = 0, .base = 0, .limit = 0x67, .ar = 0x8b};
        pr_warn("vmx", "caller has no TR: giving the guest a placeholder busy TSS");
    } else {
        tr.ar = (tr.ar & ~0xfu) | 0xb; /* LTR marked it busy */
    }
    if (ss.ar & VMX_AR_UNUSABLE)
        ss.ar = VMX_AR_UNUSABLE | 0x3; /* SS may be null in 64-bit mode; type must stay RW data */
    uint64_t cr0 = read_cr0(), cr4 = read_cr4() & ~X86_CR4_VMXE;
    uint64_t efer = rdmsr(MSR_EFER);
    struct vmx_guest_state chk = {
        .seg = {es, csg, ss, ds, fs, gs, ldtr, tr},
        .cr0 = (cr0 | v->cr0_fixed0) & v->cr0_fixed1,
        .cr4 = (cr4 | v->cr4_fixed0) & v->cr4_fixed1,
        .efer = efer,
        .rflags = cs->rflags,
        .ia32e = efer & EFER_LMA,
        .unrestricted = vmx_ctls.proc2 & SECONDARY_EXEC_UNRESTRICTED_GUEST,
        .cr0_fixed0 = vmx_caps.cr0_fixed0,
        .cr0_fixed1 = vmx_caps.cr0_fixed1,
        .cr4_fixed0 = vmx_caps.cr4_fixed0,
        .cr4_fixed1 = vmx_caps.cr4_fixed1,
    };
    const char *why = vmx_guest_state_check(&chk);
    if (why) {
        pr_err("vmx",
               "the caller's state cannot be a VMX guest: %s (CS %#x AR %#x, SS %#x AR %#x, "
               "TR %#x AR %#x)",
               why, csg.sel, csg.ar, ss.sel, ss.ar, tr.sel, tr.ar);
        return -1;
    }
    VMCS_SEG_WRITE(ES, es);
    VMCS_SEG_WRITE(CS, csg);
    VMCS_SEG_WRITE(SS, ss);
    VMCS_SEG_WRITE(DS, ds);
    VMCS_SEG_WRITE(FS, fs);
    VMCS_SEG_WRITE(GS, gs);
    VMCS_SEG_WRITE(LDTR, ldtr);
    VMCS_SEG_WRITE(TR, tr);
    vmcs_writel(GUEST_GDTR_BASE, gdtr.base);
    vmcs_write32(GUEST_GDTR_LIMIT, gdtr.limit);
    vmcs_writel(GUEST_IDTR_BASE, idtr.base);
    vmcs_write32(GUEST_IDTR_LIMIT, idtr.limit);

    vmcs_writel(GUEST_CR0, chk.cr0);
    vmcs_writel(CR0_READ_SHADOW, cr0);
    vmcs_writel(GUEST_CR3, read_cr3());
    vmcs_writel(GUEST_CR4, chk.cr4);
    vmcs_writel(CR4_READ_SHADOW, cr4);
    vmcs_writel(GUEST_DR7, read_dr7());
    vmcs_writel(GUEST_RSP, cs->rsp);
    vmcs_writel(GUEST_RIP, cs->rip);
    vmcs_writel(GUEST_RFLAGS, cs->rflags);
    vmcs_write64(GUEST_IA32_EFER, efer);
    vmcs_write64(GUEST_IA32_PAT, rdmsr(MSR_IA32_CR_PAT));
    uint64_t dbgctl = 0;
    if (rdmsr_safe(MSR_IA32_DEBUGCTLMSR, &dbgctl)) /* Bochs #GPs here (TEST-VEHICLES) */
        dbgctl = 0;
    vmcs_write64(GUEST_IA32_DEBUGCTL, dbgctl);
    vmcs_write32(GUEST_SYSENTER_CS, (uint32_t)rdmsr(MSR_IA32_SYSENTER_CS));
    vmcs_writel(GUEST_SYSENTER_ESP, rdmsr(MSR_IA32_SYSENTER_ESP));
    vmcs_writel(GUEST_SYSENTER_EIP, rdmsr(MSR_IA32_SYSENTER_EIP));
    vmcs_write64(VMCS_LINK_POINTER, ~0ull);
    vmcs_write32(GUEST_INTERRUPTIBILITY_INFO, 0);
    vmcs_write32(GUEST_ACTIVITY_STATE, GUEST_ACTIVITY_ACTIVE);
    vmcs_writel(GUEST_PENDING_DBG_EXCEPTIONS, 0);
    if (efer & EFER_LMA)
        vmx_ctls.entry |= VM_ENTRY_IA32E_MODE;
    /* the caller's callee-saved registers; RAX = 0 = PTV_ENTRY_OK for the caller */
    v->regs.gpr[GPR_RAX] = PTV_ENTRY_OK;
    v->regs.gpr[GPR_RBX] = cs->rbx;
    v->regs.gpr[GPR_RBP] = cs->rbp;
    v->regs.gpr[GPR_R12] = cs->r12;
    v->regs.gpr[GPR_R13] = cs->r13;
    v->regs.gpr[GPR_R14] = cs->r14;
    v->regs.gpr[GPR_R15] = cs->r15;
    return 0;
}

static void host_state_setup(uint64_t host_cr3, uint64_t stack_top)
{
    vmcs_writel(HOST_CR0, host_paging_cr0(read_cr0())); /* WP: ring 0 honours R/O pages */
    vmcs_writel(HOST_CR3, host_cr3);
    /* what the VMM needs, not what the firmware had (no LA57, PCIDE, CET, PKS, SMAP...) */
    uint64_t cr4 = X86_CR4_PAE | X86_CR4_VMXE | vmx_caps.cr4_fixed0;
    if (cpuid_count(1, 0).ecx & (1u << 26)) /* XSAVE: the XSETBV exit runs XSETBV here */
        cr4 |= X86_CR4_OSXSAVE;
    vmcs_writel(HOST_CR4, cr4);
    vmcs_write16(HOST_CS_SELECTOR, HOST_CS_SEL);
    vmcs_write16(HOST_SS_SELECTOR, HOST_DS_SEL);
    vmcs_write16(HOST_DS_SELECTOR, HOST_DS_SEL);
    vmcs_write16(HOST_ES_SELECTOR, HOST_DS_SEL);
    vmcs_write16(HOST_FS_SELECTOR, 0);
    vmcs_write16(HOST_GS_SELECTOR, 0);
    vmcs_write16(HOST_TR_SELECTOR, HOST_TR_SEL);
    vmcs_writel(HOST_FS_BASE, 0);
    vmcs_writel(HOST_GS_BASE, (uint64_t)(uintptr_t)this_cpu()); /* percpu.h */
    vmcs_writel(HOST_TR_BASE, host_tss_base());
    vmcs_writel(HOST_GDTR_BASE, host_gdt_base());
    vmcs_writel(HOST_IDTR_BASE, host_idt_base());
    vmcs_write32(HOST_IA32_SYSENTER_CS, 0);
    vmcs_writel(HOST_IA32_SYSENTER_ESP, 0);
    vmcs_writel(HOST_IA32_SYSENTER_EIP, 0);
    vmcs_write64(HOST_IA32_EFER, host_paging_efer(rdmsr(MSR_EFER))); /* NXE for the NX pages */
    vmcs_write64(HOST_IA32_PAT, rdmsr(MSR_IA32_CR_PAT));
    vmcs_writel(HOST_RSP, stack_top); /* rewritten by vmx_enter on every entry */
    vmcs_writel(HOST_RIP, (uint64_t)(uintptr_t)vmx_exit_stub);
}

int vmcs_setup(struct vcpu *v, const void *caller)
{
    const struct caller_state *cs = caller;
    struct vmx_caps *c = &vmx_caps;
    /* SDM 24.8 / pt-facts G.2: with unrestricted guest, PE and PG may be 0 */
    v->cr0_fixed0 = c->cr0_fixed0 & ~(X86_CR0_PE | X86_CR0_PG);
    v->cr0_fixed1 = c->cr0_fixed1;
    v->cr4_fixed0 = c->cr4_fixed0;
    v->cr4_fixed1 = c->cr4_fixed1;
    /* the guest owns every CR bit VMX leaves free; the fixed ones are shadowed */
    v->cr0_mask = v->cr0_fixed0 | ~v->cr0_fixed1;
    v->cr4_mask = v->cr4_fixed0 | ~v->cr4_fixed1;

    if (guest_state_setup(v, cs))
        return -1;
    if (pt_vmx_setup(v)) /* before the controls are written: it adds the PT controls */
        return -1;
    if (vmx_io_bitmap_setup(v)) /* likewise: "use I/O bitmaps" for the shared UART */
        return -1;
    lbr_vmx_setup(v); /* likewise: the arch-LBR load/clear controls, GUEST_IA32_LBR_CTL */
    host_state_setup(vmm_host_cr3, this_cpu()->stack_top);
    v->regs.host_rsp = 0; /* HOST_RSP is stack_top now: vmx_enter writes its own at entry */

    vmcs_write32(PIN_BASED_VM_EXEC_CONTROL, vmx_ctls.pin);
    vmcs_write32(CPU_BASED_VM_EXEC_CONTROL, vmx_ctls.proc);
    vmcs_write32(SECONDARY_VM_EXEC_CONTROL, vmx_ctls.proc2);
    vmcs_write32(VM_EXIT_CONTROLS, vmx_ctls.exit);
    vmcs_write32(VM_ENTRY_CONTROLS, vmx_ctls.entry);
    vmcs_write32(EXCEPTION_BITMAP, 0);
    vmcs_write32(PAGE_FAULT_ERROR_CODE_MASK, 0);
    vmcs_write32(PAGE_FAULT_ERROR_CODE_MATCH, 0);
    vmcs_write32(CR3_TARGET_COUNT, 0);
    vmcs_write32(VM_EXIT_MSR_STORE_COUNT, 0);
    vmcs_write32(VM_EXIT_MSR_LOAD_COUNT, 0);
    vmcs_write32(VM_ENTRY_MSR_LOAD_COUNT, 0);
    vmcs_write32(VM_ENTRY_INTR_INFO_FIELD, 0);
    vmcs_writel(CR0_GUEST_HOST_MASK, v->cr0_mask);
    vmcs_writel(CR4_GUEST_HOST_MASK, v->cr4_mask);
    vmcs_write64(TSC_OFFSET, 0);
    if (vmx_ctls.proc2 & SECONDARY_EXEC_XSAVES)
        vmcs_write64(XSS_EXIT_BITMAP, 0); /* XSAVES/XRSTORS never exit */
    if (vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) {
        uint64_t pgc = 0;
        if (rdmsr_safe(MSR_CORE_PERF_GLOBAL_CTRL, &pgc))
            pgc = 0;
        pmu_vmx_set_guest_global(v, pgc);
        vmcs_write64(HOST_IA32_PERF_GLOBAL_CTRL, 0);
    }
    if (vmx_ctls.proc2 & SECONDARY_EXEC_ENABLE_VPID)
        vmcs_write16(VIRTUAL_PROCESSOR_ID, 1);
    if (vmx_msr_bitmap_setup(v))
        return -1;
    vmcs_write64(MSR_BITMAP, v->msr_bitmap_pa);
    vmx_msr_state_setup(v);
    vmcs_write64(EPT_POINTER, vm.eptp);
    return 0;
}
