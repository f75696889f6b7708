/* SPDX-License-Identifier: MIT */
/* CPUID exits: run CPUID, then show the guest what guest_policy.c allows. */
#include "vmx/vcpu.h"
#include "vcpu/exit/exits.h"
#include "emul/guest_policy.h"
#include "lbr/shim/lbr_vmx.h"
#include "pmu/shim/pmu_vmx.h"
#include "vmx/vmx_cpu.h"
#include "hw/cpu.h"

enum exit_action handle_cpuid(struct vcpu *v, const struct vmexit *e)
{
    uint32_t leaf = (uint32_t)v->regs.gpr[GPR_RAX], sub = (uint32_t)v->regs.gpr[GPR_RCX];
    uint32_t r[4];
    if (!cpuid_is_hypervisor_leaf(leaf)) {
        struct cpuid_regs c = cpuid_count(leaf, sub);
        r[0] = c.eax, r[1] = c.ebx, r[2] = c.ecx, r[3] = c.edx;
    } else {
        r[0] = r[1] = r[2] = r[3] = 0; /* never the CPU's: cpuid_policy answers these */
    }
    /* the guest's CR4 matters for leaves 1 and 7 only: read it only then */
    uint64_t cr4 = leaf == 1 || leaf == 7 ? vcpu_guest_cr4(v) : 0;
    cpuid_policy(&pt_decision, vmx_ctls.guest_features, leaf, sub, cr4, r);
    lbr_vmx_cpuid(leaf, sub, r); /* arch LBR: leaf 7 EDX[19], 0x1C, XSS component 15 */
    pmu_vmx_cpuid(leaf, r);      /* leaf 0xA: zero where the PMU is hidden (pmu_policy.c) */
    v->regs.gpr[GPR_RAX] = r[0];
    v->regs.gpr[GPR_RBX] = r[1];
    v->regs.gpr[GPR_RCX] = r[2];
    v->regs.gpr[GPR_RDX] = r[3];
    return EXIT_RESUME_SKIP_INSN;
}
