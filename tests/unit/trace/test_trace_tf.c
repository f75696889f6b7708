/* SPDX-License-Identifier: MIT */
/*
 * The software tracer stepping with the trap flag (sw_trace = tf), on the fake machine of
 * tests/fakes/vmm_world.c: the VMM's real sources booted with that configuration, a TRACE_START
 * window over guest NOPs run by single-step #DB exits and by blocks (the tracer's breakpoint in
 * DR0), TRACE_STOP.  One boot per process, hence a binary
 * of its own beside test_vcpu_exits (which steps with MTF).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "fakes/vmm_boot.h"
#include "fakes/vmm_world.h"
#include "base/vmm_state.h"
#include "vmx/vmcs.h"
#include <ptv/vmcall.h>

#define X86_EFLAGS_TF (1u << 8)
#define DR6_BS        (1u << 14)

static struct vcpu *v;

static void tf_config(struct ptv_config *cfg)
{
    cfg->trace_sw = PTV_SW_TRACE_TF;
}

static int setup(void **state)
{
    fake_boot_config = tf_config;
    v = fake_vmm_boot();
    return v ? 0 : -1;
}

static bool run(uint32_t reason, uint64_t qual, uint32_t len, uint32_t intr_info)
{
    return fake_run_exit(
        v, &(struct fake_exit){
               .reason = reason, .qual = qual, .insn_len = len, .intr_info = intr_info});
}

static unsigned single, blocks;

/* the CPU over guest NOPs: under the trap flag one NOP, then the single-step #DB; with a block
 * out (DR0 the tracer's instruction breakpoint, TF off) the NOPs up to DR0, then its #DB */
static void cpu_runs_nops(struct fake_exit *x)
{
    uint64_t rip = fake_vmcs_get(GUEST_RIP);
    x->reason = EXIT_REASON_EXCEPTION_NMI;
    x->intr_info = INTR_INFO_VALID | INTR_TYPE_HARD_EXCEPTION | DB_VECTOR;
    if (fake_vmcs_get(GUEST_RFLAGS) & X86_EFLAGS_TF) {
        fake_vmcs_set(GUEST_RIP, rip + 1);
        x->qual = DR6_BS;
        single++;
    } else {
        assert_true(v->trace_blk);
        assert_true((fake_vmcs_get(GUEST_DR7) & 3) && fake_cpu.dr0 > rip &&
                    fake_cpu.dr0 < 0x10300000 + 4096);
        fake_vmcs_set(GUEST_RIP, fake_cpu.dr0);
        x->qual = 1; /* B0 */
        blocks++;
    }
}

static void test_tf_window(void **state)
{
    uint8_t *code = (uint8_t *)(uintptr_t)0x10300000;
    memset(code, 0x90, 4096); /* NOPs */
    fake_vmcs_set(GUEST_RIP, 0x10300000 - 3);
    fake_vmcs_set(GUEST_RFLAGS, 0x202);
    fake_vmcs_set(GUEST_CS_AR_BYTES, 0xa09b);
    fake_vmcs_set(GUEST_SS_AR_BYTES, 0xc093);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_START;
    v->regs.gpr[GPR_RBX] = PTV_TRACE_F_KERNEL | PTV_TRACE_F_USER;
    v->regs.gpr[GPR_R8] = 0;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3, 0));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], PTV_TRACE_SRC_SOFTWARE);
    assert_true(v->trace_stepping);
    /* the tracer's trap flag is on, and #DB exits */
    assert_true(fake_vmcs_get(GUEST_RFLAGS) & X86_EFLAGS_TF);
    assert_true(fake_vmcs_get(EXCEPTION_BITMAP) & (1u << DB_VECTOR));
    for (unsigned i = 0; i < 8; i++) {
        assert_true(fake_run_exit(v, &(struct fake_exit){.at_entry = cpu_runs_nops}));
        assert_int_equal(fake_take_injected(), 0); /* the tracer's #DB, not the guest's */
    }
    assert_int_equal(single + blocks, 8);
    uint64_t ran = fake_vmcs_get(GUEST_RIP) - 0x10300000; /* NOPs: one byte an instruction */
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_TRACE_STOP;
    assert_true(run(EXIT_REASON_VMCALL, 0, 3, 0));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RCX], ran);               /* instructions traced */
    assert_true(v->regs.gpr[GPR_RBX] > 0);                     /* packet bytes */
    assert_true(v->regs.gpr[GPR_RDX] & PTV_TRACE_ST_TF);       /* stepped with the trap flag */
    assert_false(fake_vmcs_get(GUEST_RFLAGS) & X86_EFLAGS_TF); /* the guest's TF back (clear) */
    assert_false(v->trace_stepping);
    assert_int_equal(fake_root_faults, 0);
    assert_int_equal(fake_vmcs_fails, 0);
    assert_true(vmm_canary_intact());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tf_window),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
