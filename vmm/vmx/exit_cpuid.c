/* SPDX-License-Identifier: MIT */
/* CPUID exits: the CPUID policy the guest sees. */
#include "vmx/vcpu.h"
#include "vmx/exits.h"
#include "cpu.h"
#include "pt/pt_caps.h"

#define CPUID_1_ECX_VMX        (1u << 5)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_ECX_OSXSAVE    (1u << 27)
#define CPUID_7_ECX_OSPKE      (1u << 4)
#define X86_CR4_PKE            (1ull << 22)
#define PTV_CPUID_BASE         0x40000000u
#define PTV_CPUID_MAX          0x40000001u

enum exit_action handle_cpuid(struct vcpu *v, const struct vmexit *e)
{
    uint32_t leaf = (uint32_t)v->regs.gpr[GPR_RAX], sub = (uint32_t)v->regs.gpr[GPR_RCX];
    uint32_t r[4];
    if (leaf >= PTV_CPUID_BASE && leaf <= 0x400000ffu) {
        /* hypervisor leaves: "ptvisor" signature, max leaf (KVM/Xen convention) */
        r[0] = r[1] = r[2] = r[3] = 0;
        if (leaf == PTV_CPUID_BASE) {
            r[0] = PTV_CPUID_MAX;
            r[1] = 0x69767470; /* "ptvi" */
            r[2] = 0x00726f73; /* "sor\0" */
            r[3] = 0;
        } else if (leaf == PTV_CPUID_MAX) {
            r[0] = 1; /* VMCALL ABI version (include/ptv/vmcall.h) */
        }
    } else {
        struct cpuid_regs c = cpuid_count(leaf, sub);
        r[0] = c.eax, r[1] = c.ebx, r[2] = c.ecx, r[3] = c.edx;
        /* CPUID ran with the VMM's CR4: the OS-enable bits must mirror the guest's */
        if (leaf == 1) {
            uint64_t cr4 = vcpu_guest_cr4(v);
            r[2] |= CPUID_1_ECX_HYPERVISOR;
            r[2] &= ~(CPUID_1_ECX_VMX | CPUID_1_ECX_OSXSAVE); /* no nested VMX */
            if (cr4 & X86_CR4_OSXSAVE)
                r[2] |= CPUID_1_ECX_OSXSAVE;
        } else if (leaf == 7 && sub == 0) {
            r[2] &= ~CPUID_7_ECX_OSPKE;
            if (vcpu_guest_cr4(v) & X86_CR4_PKE)
                r[2] |= CPUID_7_ECX_OSPKE;
        }
        pt_cpuid_filter(&pt_decision, leaf, sub, r); /* CPUID.7:EBX[25], leaf 0x14 */
    }
    v->regs.gpr[GPR_RAX] = r[0];
    v->regs.gpr[GPR_RBX] = r[1];
    v->regs.gpr[GPR_RCX] = r[2];
    v->regs.gpr[GPR_RDX] = r[3];
    return EXIT_RESUME_SKIP_INSN;
}
