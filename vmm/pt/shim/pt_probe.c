/* SPDX-License-Identifier: MIT */
/* PT probe: read what the CPU offers and let the engine (vmm/pt/pt_caps.c) decide. */
#include "vmx/vmx_cpu.h"
#include "base/vmm_state.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "pt/pt_caps.h"
#include "pt/pt_sys.h"
#include "lib/ptv_string.h"

struct pt_decision pt_decision;
struct pt_caps pt_host_caps;

void pt_probe(uint32_t requested)
{
    struct pt_caps caps = {0};

    struct cpuid_regs r = cpuid_count(0, 0);
    if (r.eax >= 7)
        caps.cpuid7_ebx = cpuid_count(7, 0).ebx;
    if (r.eax >= 0x14 && (caps.cpuid7_ebx & CPUID_7_EBX_INTEL_PT)) {
        for (unsigned s = 0; s < 2; s++) {
            struct cpuid_regs l = cpuid_count(0x14, s);
            caps.leaf14[s][PT_EAX] = l.eax;
            caps.leaf14[s][PT_EBX] = l.ebx;
            caps.leaf14[s][PT_ECX] = l.ecx;
            caps.leaf14[s][PT_EDX] = l.edx;
        }
    }
    caps.vmx_misc = vmx_caps.misc;
    caps.secondary_allowed1 = (uint32_t)(vmx_caps.proc2 >> 32);
    caps.exit_allowed1 = (uint32_t)(vmx_caps.exit >> 32);
    caps.entry_allowed1 = (uint32_t)(vmx_caps.entry >> 32);
    caps.maxphyaddr = (uint8_t)vmx_caps.maxphyaddr;
    caps.vaddr_bits = cpuid_count(0x80000000, 0).eax >= 0x80000008
                          ? (uint8_t)(cpuid_count(0x80000008, 0).eax >> 8)
                          : 48;
    pt_decide(&caps, requested, &pt_decision);
    if (pt_decision.mode == PT_ENGINE_SYSTEM) {
        /* what the config asks must fit this CPU (pt_range ranges, CR3 filter, ToPA ...) */
        struct pt_gcaps view;
        struct pt_sys_cfg cfg;
        pt_sys_view(&caps, &view);
        pt_sys_cfg_from_config(vmm_cfg, &cfg);
        const char *bad = pt_sys_check(&view, &cfg);
        if (bad) {
            memset(&pt_decision, 0, sizeof(pt_decision));
            pt_decision.requested = requested;
            pt_decision.refused = true;
            static const char pre[] = "pt_mode=system refused: ";
            size_t n = strnlen(bad, sizeof(pt_decision.reason) - sizeof(pre));
            memcpy(pt_decision.reason, pre, sizeof(pre) - 1);
            memcpy(pt_decision.reason + sizeof(pre) - 1, bad, n);
            pt_decision.reason[sizeof(pre) - 1 + n] = '\0';
            pt_decision.mode = PT_ENGINE_OFF;
        }
    }
    pr_info("pt", "CPUID.7:EBX[25]=%u VMX_MISC[14]=%u PT_USE_GPA=%u load/clear RTIT_CTL=%u/%u",
            !!(caps.cpuid7_ebx & CPUID_7_EBX_INTEL_PT), !!(caps.vmx_misc & VMX_MISC_INTEL_PT),
            !!(caps.secondary_allowed1 & SECONDARY_EXEC_PT_USE_GPA),
            !!(caps.entry_allowed1 & VM_ENTRY_LOAD_IA32_RTIT_CTL),
            !!(caps.exit_allowed1 & VM_EXIT_CLEAR_IA32_RTIT_CTL));
    pr_info("pt", "mode %s: %s", pt_mode_name(pt_decision.mode), pt_decision.reason);
    pt_host_caps = caps;
    const char *why = NULL;
    /* system mode: only when asked for (auto never decides it: pt_caps.c) */
    if (pt_mode_guest_owns(pt_decision.mode) && requested != PTV_PT_HOST_GUEST)
        why = "guest-owned PT is proven against the PT model but not yet on hardware: "
              "set pt_mode = host-guest to use it";
    if (why) {
        pr_warn("pt", "PT hidden from the guest: %s", why);
        memset(&pt_decision, 0, sizeof(pt_decision));
        pt_decision.mode = PT_ENGINE_OFF;
    }
}
