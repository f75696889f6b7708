/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: guest-controlled VM exits into the VMM's real exit loop and handlers, on the fake
 * machine of tests/fakes/vmm_world.c (booted once by vmm_main).  The input picks the exit reason,
 * qualification, instruction length, the GPRs (an MSR index and value, a VMCALL number) and a few
 * guest-state fields.  Invariants: no crash or undefined behaviour, no plain RDMSR/WRMSR that
 * would #GP in root, no VMREAD/VMWRITE of a field the VMCS does not have, the VMM's canary page
 * intact, the VMM's image untouched, and every event the next entry injects well-formed (valid, a
 * known type, an error code exactly for the exceptions that push one, #GP/#UD as hardware
 * exceptions).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakes/vmm_boot.h"
#include "fakes/vmm_world.h"
#include "base/vmm_state.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include "hw/vmx.h"
#include <ptv/vmcall.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static const uint32_t reasons[] = {
    EXIT_REASON_CPUID,
    EXIT_REASON_VMCALL,
    EXIT_REASON_MSR_READ,
    EXIT_REASON_MSR_WRITE,
    EXIT_REASON_CR_ACCESS,
    EXIT_REASON_IO_INSTRUCTION,
    EXIT_REASON_XSETBV,
    EXIT_REASON_INVD,
    EXIT_REASON_WBINVD,
    EXIT_REASON_VMON,
    EXIT_REASON_GETSEC,
    EXIT_REASON_EPT_VIOLATION,
    EXIT_REASON_EPT_MISCONFIG,
    EXIT_REASON_EXCEPTION_NMI,
    EXIT_REASON_NMI_WINDOW,
    EXIT_REASON_MONITOR_TRAP_FLAG,
    EXIT_REASON_PREEMPTION_TIMER,
    EXIT_REASON_TASK_SWITCH,
    EXIT_REASON_INIT_SIGNAL,
    EXIT_REASON_SIPI_SIGNAL,
    EXIT_REASON_HLT,
};

/* MSRs the handlers treat specially, and the VMX range the guest never has */
static const uint32_t msrs[] = {
    0x10,  0x1b,  0x3a,  0x8b,  0xfe,  0x174,      0x1d9,      0x277,      0x2ff,
    0x200, 0x250, 0x345, 0x38f, 0x480, 0x48d,      0x560,      0x570,      0x571,
    0x572, 0x580, 0x6e0, 0x802, 0x830, 0xc0000080, 0xc0000100, 0xc0000101, 0xc0000082,
};

struct input {
    uint8_t reason, msr, len, vmcall, cpl, flags;
    uint64_t qual, gpr[16], rflags, val;
};

/* the VMM's image and the loader's handoff: nothing writes there after start-up (the pool
 * behind them is the VMM's working memory); anything else the identity map could reach is
 * unmapped in this process, so a stray write faults */
static uint8_t image_copy[FAKE_VMM_SIZE];

static bool pushes_code(uint32_t vec)
{
    return vec == 8 || (vec >= 10 && vec <= 14) || vec == 17 || vec == 21;
}

static void check_injection(uint32_t info)
{
    if (!(info & INTR_INFO_VALID))
        return;
    uint32_t type = info & INTR_INFO_INTR_TYPE_MASK, vec = info & 0xff;
    if (getenv("FUZZ_VMM_VERBOSE"))
        fprintf(stderr, "injected %#x\n", info);
    CHECK(!(info & 0x7ffff000u)); /* reserved bits 30:12 */
    if (type == INTR_TYPE_HARD_EXCEPTION) {
        CHECK(vec < 32 && vec != 2);
        /* no error code in real mode (SDM Vol. 3C 27.2.1.3) */
        bool pe = fake_vmcs_get(GUEST_CR0) & 1;
        CHECK(!!(info & INTR_INFO_DELIVER_CODE) == (pushes_code(vec) && pe));
    } else {
        CHECK(!(info & INTR_INFO_DELIVER_CODE));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct vcpu *v;
    if (!v) {
        v = fake_vmm_boot();
        CHECK(v);
        /* a CPU with EPT's mode-based execute control: user-only windows run CPL 0 free */
        vmx_caps.proc2 |= (uint64_t)SECONDARY_EXEC_MODE_BASED_EPT_EXEC << 32;
        memcpy(image_copy, (void *)(uintptr_t)FAKE_VMM_BASE, sizeof(image_copy));
    }
    struct input in = {0};
    memcpy(&in, data, size < sizeof(in) ? size : sizeof(in));
    struct fake_exit x = {
        .reason = reasons[in.reason % (sizeof(reasons) / sizeof(reasons[0]))],
        .qual = in.qual,
        .insn_len = 1 + in.len % 15,
    };
    if (x.reason == EXIT_REASON_EXCEPTION_NMI)
        /* as the CPU reports one: vector 2 is an NMI, the error-code bit exactly where the
         * vector pushes one (never in real mode) */
        x.intr_info =
            INTR_INFO_VALID | (in.flags % 32) |
            (in.flags % 32 == 2 ? INTR_TYPE_NMI_INTR : INTR_TYPE_HARD_EXCEPTION) |
            (pushes_code(in.flags % 32) && (fake_vmcs_get(GUEST_CR0) & 1) ? INTR_INFO_DELIVER_CODE
                                                                          : 0);
    /* I/O sizes stay as fuzzed: the VMM refuses the ones the CPU never reports (exit_io.c) */
    if (x.reason == EXIT_REASON_EPT_VIOLATION || x.reason == EXIT_REASON_EPT_MISCONFIG)
        x.gpa = in.val;
    memcpy(v->regs.gpr, in.gpr, sizeof(in.gpr));
    if (x.reason == EXIT_REASON_MSR_READ || x.reason == EXIT_REASON_MSR_WRITE)
        v->regs.gpr[GPR_RCX] = in.msr < 200 ? msrs[in.msr % (sizeof(msrs) / sizeof(msrs[0]))]
                                            : (uint32_t)in.gpr[GPR_RCX];
    if (x.reason == EXIT_REASON_VMCALL) {
        v->regs.gpr[GPR_RAX] = in.vmcall % 20 == 5 ? 0 : in.vmcall % 20; /* no serial dumps */
        if (in.vmcall & 0x80) /* TRACE_START without a budget: windows that may run free */
            v->regs.gpr[GPR_R8] = 0;
    }
    fake_vmcs_set(GUEST_CS_AR_BYTES, in.cpl & 1 ? 0xa0fb : 0xa09b);
    fake_vmcs_set(GUEST_SS_AR_BYTES, in.cpl & 1 ? 0xc0f3 : 0xc093);
    fake_vmcs_set(GUEST_RFLAGS, (in.rflags & 0x3f7fd5) | 2);
    fake_vmcs_set(GUEST_RIP, FAKE_GUEST_RIP);
    fake_console_clear();
    fake_run_exit(v, &x);
    check_injection(fake_take_injected());
    if (fake_root_faults)
        fprintf(stderr, "plain RDMSR/WRMSR of MSR %#x would #GP in root\n", fake_root_fault_msr);
    CHECK(fake_root_faults == 0);
    CHECK(fake_vmcs_fails == 0);
    /* the mode-based control is on exactly while the vCPU runs free at CPL 0 */
    bool mbec = fake_vmcs_get(SECONDARY_VM_EXEC_CONTROL) & SECONDARY_EXEC_MODE_BASED_EPT_EXEC;
    CHECK(mbec == v->mbec && mbec == (v->trace_free && v->trace_free_cpl));
    /* ... and with it the #PF exit of user-mode fetches; else mask and match 0 (every #PF or
     * none, by the exception bitmap) */
    CHECK(fake_vmcs_get(PAGE_FAULT_ERROR_CODE_MASK) == (mbec ? 0x14u : 0));
    CHECK(fake_vmcs_get(PAGE_FAULT_ERROR_CODE_MATCH) == (mbec ? 0x14u : 0));
    CHECK(!v->trace_cpl_fetch); /* a fetch the tracer caught is consumed by its exit */
    CHECK(vmm_canary_intact());
    CHECK(!memcmp(image_copy, (void *)(uintptr_t)FAKE_VMM_BASE, sizeof(image_copy)));
    return 0;
}
