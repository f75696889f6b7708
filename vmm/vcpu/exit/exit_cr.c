/* SPDX-License-Identifier: MIT */
/*
 * Control-register exits.  Only MOV to CR0/CR4 that changes a bit VMX fixes
 * (CR0.NE, CR4.VMXE, ...) exits (guest/host masks); the guest reads its own
 * value through the read shadows.  MOV to CR3 exits only while the software
 * tracer runs the vCPU free outside its window (trace/shim/trace_step.c).  SDM Vol. 3C 28.2.1 table
 * 28-3.
 */
#include "vmx/vcpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmcs.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "vmx/vmx_cpu.h"
#include "emul/emul_policy.h"
#include "base/vmm_state.h"

#define CR_QUAL_NUM(q)  ((q)&0xf)
#define CR_QUAL_TYPE(q) (((q) >> 4) & 3) /* 0 MOV to CR, 1 MOV from CR, 2 CLTS, 3 LMSW */
#define CR_QUAL_GPR(q)  (((q) >> 8) & 0xf)
#define CR_QUAL_LMSW(q) (((q) >> 16) & 0xffff)

static uint64_t gpr_read(struct vcpu *v, unsigned n)
{
    return n == GPR_RSP ? vmcs_readl(GUEST_RSP) : v->regs.gpr[n];
}

uint64_t vcpu_guest_cr0(const struct vcpu *v)
{
    return (vmcs_readl(GUEST_CR0) & ~v->cr0_mask) | (vmcs_readl(CR0_READ_SHADOW) & v->cr0_mask);
}

uint64_t vcpu_guest_cr4(const struct vcpu *v)
{
    return (vmcs_readl(GUEST_CR4) & ~v->cr4_mask) | (vmcs_readl(CR4_READ_SHADOW) & v->cr4_mask);
}

/* the guest state a MOV to CR0/CR4 is judged against (emul/emul_policy.h) */
static struct cr_ctx cr_context(const struct vcpu *v)
{
    return (struct cr_ctx){
        .cr0 = vcpu_guest_cr0(v),
        .cr3 = vmcs_readl(GUEST_CR3),
        .cr4 = vcpu_guest_cr4(v),
        .efer = vmcs_read64(GUEST_IA32_EFER),
        .code64 = vcpu_code64(),
        .cr4_supported = v->cr4_fixed1 & ~X86_CR4_VMXE,
        .cs_ar = vmcs_read32(GUEST_CS_AR_BYTES), /* IA-32e activation: CS.L, TR's type */
        .tr_ar = vmcs_read32(GUEST_TR_AR_BYTES),
    };
}

/*
 * PAE paging outside IA-32e mode: the CPU takes the four PDPTEs from the VMCS at
 * VM entry (SDM Vol. 3C 27.3.2.4), so an emulated write that enables or changes
 * PAE paging loads them from guest memory, as MOV to CR0/CR4 would (Vol. 3A
 * 4.4.1), and #GPs on reserved bits.  The PDPT is read through EPT; outside guest
 * RAM (VMM memory, holes) it reads as not present.
 */
static bool load_pdptes(struct vcpu *v, uint64_t cr3)
{
    uint64_t pdpte[4] = {0, 0, 0, 0}, gpa = cr3 & 0xffffffe0ull, hpa;
    unsigned perms = 0;
    vm_ept_lock(); /* another CPU may be pruning EPT tables */
    if (!ept_translate(v->ept, gpa, &hpa, &perms, NULL, NULL) && (perms & EPT_R) && hpa == gpa &&
        hpa - vmm_span.base >= vmm_span.size)
        for (unsigned i = 0; i < 4; i++)
            pdpte[i] = ((const volatile uint64_t *)(uintptr_t)hpa)[i];
    vm_ept_unlock();
    if (pdptes_check(pdpte, vmx_caps.maxphyaddr))
        return false;
    vmcs_write64(GUEST_PDPTR0, pdpte[0]);
    vmcs_write64(GUEST_PDPTR1, pdpte[1]);
    vmcs_write64(GUEST_PDPTR2, pdpte[2]);
    vmcs_write64(GUEST_PDPTR3, pdpte[3]);
    return true;
}

static enum exit_action refuse(struct vcpu *v, const char *what, const char *why)
{
    pr_debug("vmx", "guest %s: #GP (%s)", what, why);
    vcpu_inject_gp(v);
    return EXIT_INJECT;
}

static enum exit_action guest_write_cr0(struct vcpu *v, uint64_t val)
{
    struct cr_ctx c = cr_context(v);
    const char *why = cr0_write_check(&c, &val);
    if (why)
        return refuse(v, "MOV to CR0", why);
    if (cr_write_loads_pdptes(&c, val, c.cr4) && !load_pdptes(v, c.cr3))
        return refuse(v, "MOV to CR0", "PDPTE with reserved bits set");
    uint64_t old = c.cr0;
    vmcs_writel(CR0_READ_SHADOW, val);
    vmcs_writel(GUEST_CR0, (val | v->cr0_fixed0) & v->cr0_fixed1);
    if ((old ^ val) & X86_CR0_PG) {
        /* long mode (de)activation: EFER.LMA follows LME & PG (SDM 9.8.5) */
        uint64_t efer = c.efer;
        uint32_t entry = vmcs_read32(VM_ENTRY_CONTROLS);
        if ((val & X86_CR0_PG) && (efer & EFER_LME)) {
            efer |= EFER_LMA;
            entry |= VM_ENTRY_IA32E_MODE;
        } else {
            efer &= ~EFER_LMA;
            entry &= ~VM_ENTRY_IA32E_MODE;
        }
        vmcs_write64(GUEST_IA32_EFER, efer);
        vmcs_write32(VM_ENTRY_CONTROLS, entry);
    }
    vmx_invept_all(); /* PG/PE/WP may have changed: drop combined mappings */
    return EXIT_RESUME_SKIP_INSN;
}

/* MOV to CR3: it exits only while CR3-load exiting is on (the software tracer runs the vCPU free
 * outside its window's CR3: trace/shim/trace_step.c); the rule is emul_policy.c's cr3_write_check
 */
/* the CPU has LAM (CPUID.(7,1):EAX[26], which the guest sees as it is) */
static bool cpu_lam(void)
{
    static int lam = -1;
    if (lam < 0)
        lam = cpuid_count(7, 0).eax >= 1 && (cpuid_count(7, 1).eax >> 26 & 1);
    return lam;
}

static enum exit_action guest_write_cr3(struct vcpu *v, uint64_t val)
{
    struct cr_ctx c = cr_context(v);
    c.lam = cpu_lam();
    struct cr3_write w;
    const char *why = cr3_write_check(&c, val, vmx_caps.maxphyaddr, &w);
    if (why)
        return refuse(v, "MOV to CR3", why);
    if (w.pdptes && !load_pdptes(v, w.cr3))
        return refuse(v, "MOV to CR3", "PDPTE with reserved bits set");
    vmcs_writel(GUEST_CR3, w.cr3);
    if (w.flush)
        vmx_flush_guest_linear();
    return EXIT_RESUME_SKIP_INSN;
}

enum exit_action handle_cr_access(struct vcpu *v, const struct vmexit *e)
{
    unsigned cr = CR_QUAL_NUM(e->qual), type = CR_QUAL_TYPE(e->qual);
    if (type == 0 && cr == 3)
        return guest_write_cr3(v, gpr_read(v, CR_QUAL_GPR(e->qual)));
    if (type == 0 && cr == 0)
        return guest_write_cr0(v, gpr_read(v, CR_QUAL_GPR(e->qual)));
    if (type == 0 && cr == 4) {
        uint64_t val = gpr_read(v, CR_QUAL_GPR(e->qual));
        struct cr_ctx c = cr_context(v);
        const char *why = cr4_write_check(&c, val);
        if (why)
            return refuse(v, "MOV to CR4", why);
        if (cr_write_loads_pdptes(&c, c.cr0, val) && !load_pdptes(v, c.cr3))
            return refuse(v, "MOV to CR4", "PDPTE with reserved bits set");
        vmcs_writel(CR4_READ_SHADOW, val);
        vmcs_writel(GUEST_CR4, (val | v->cr4_fixed0) & v->cr4_fixed1);
        vmx_invept_all(); /* paging bits may have changed: drop combined mappings */
        return EXIT_RESUME_SKIP_INSN;
    }
    if (type == 3) { /* LMSW: bits 3:0 of CR0, PE cannot be cleared */
        uint64_t cr0 = vcpu_guest_cr0(v);
        uint64_t msw = CR_QUAL_LMSW(e->qual) & 0xf;
        return guest_write_cr0(v, (cr0 & ~0xeull) | msw | (cr0 & X86_CR0_PE));
    }
    if (type == 2) /* CLTS */
        return guest_write_cr0(v, vcpu_guest_cr0(v) & ~(1ull << 3));
    pr_err_rl("vmx", "unexpected CR access exit: qualification %#lx", e->qual);
    vcpu_inject_ud(v);
    return EXIT_INJECT;
}
