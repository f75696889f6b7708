/* SPDX-License-Identifier: MIT */
/* VMCALL: the small guest ABI of include/ptv/vmcall.h. */
#include "vmx/vcpu.h"
#include "vmx/exits.h"
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "vmm.h"
#include "log.h"
#include "lib/ptv_string.h"
#include <ptv/vmcall.h>

enum exit_action handle_vmcall(struct vcpu *v, const struct vmexit *e)
{
    uint64_t *r = v->regs.gpr;
    unsigned cpl = (vmcs_read32(GUEST_SS_AR_BYTES) >> 5) & 3;
    int64_t ret = PTV_VMCALL_OK;
    /* informational calls are open to every CPL (so user-space tools can use them);
     * everything else needs CPL 0 */
    bool info = r[GPR_RAX] == PTV_VMCALL_VERSION || r[GPR_RAX] == PTV_VMCALL_EXIT_STATS;
    if (cpl != 0 && !info) {
        r[GPR_RAX] = (uint64_t)(int64_t)PTV_VMCALL_EPERM;
        return EXIT_RESUME_SKIP_INSN;
    }
    switch (r[GPR_RAX]) {
    case PTV_VMCALL_VERSION:
        r[GPR_RBX] = PTV_VMCALL_ABI_VERSION;
        memcpy(&r[GPR_RCX], "ptvisor", 8);
        r[GPR_RDX] = 0;
        break;
    case PTV_VMCALL_VMM_RANGE:
        r[GPR_RBX] = vmm_span.base;
        r[GPR_RCX] = vmm_span.size;
        r[GPR_RDX] = v->canary_pa;
        break;
    case PTV_VMCALL_CHECK_CANARY:
        r[GPR_RBX] = vmm_canary_intact(v);
        break;
    case PTV_VMCALL_EPT_BLOCKED:
        r[GPR_RBX] = v->ept_blocked;
        break;
    case PTV_VMCALL_EXIT_STATS:
        exit_stats_print(v);
        r[GPR_RBX] = v->exits_total;
        break;
    default:
        ret = PTV_VMCALL_ENOSYS;
    }
    r[GPR_RAX] = (uint64_t)ret;
    return EXIT_RESUME_SKIP_INSN;
}
