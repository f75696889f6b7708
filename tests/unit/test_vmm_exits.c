/* SPDX-License-Identifier: MIT */
/*
 * The VMM's exit handlers, exit loop and start-up, the real sources, on the fake machine of
 * tests/fakes/vmm_world.c: booted by vmm_main() as the loader would call it, then driven one VM
 * exit at a time through vmx_loop(), with the results read back from the fake VMCS, the vCPU's
 * registers and the serial console.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "fakes/vmm_boot.h"
#include "fakes/vmm_world.h"
#include "base/vmm_state.h"
#include "vmx/vmcs.h"
#include "vmx/vmx_cpu.h"
#include <ptv/vmcall.h>

static struct vcpu *v;

static int setup(void **state)
{
    v = fake_vmm_boot();
    return v ? 0 : -1;
}

static void set_rip(uint64_t rip)
{
    fake_vmcs_set(GUEST_RIP, rip);
}

static uint64_t rip(void)
{
    return fake_vmcs_get(GUEST_RIP);
}

/* the VMM may never crash the machine on a plain RDMSR/WRMSR, never VMfail, never touch its
 * canary */
static void assert_vmm_sound(void)
{
    assert_int_equal(fake_root_faults, 0);
    assert_int_equal(fake_vmcs_fails, 0);
    assert_true(vmm_canary_intact());
}

static void assert_injected(uint32_t vector, bool has_error)
{
    uint32_t info = fake_take_injected();
    assert_true(info & INTR_INFO_VALID);
    assert_int_equal(info & 0xff, vector);
    assert_int_equal(info & INTR_INFO_INTR_TYPE_MASK, INTR_TYPE_HARD_EXCEPTION);
    assert_int_equal(!!(info & INTR_INFO_DELIVER_CODE), has_error);
}

static void test_boot(void **state)
{
    assert_non_null(v);
    assert_true(v->launched);
    assert_true(fake_console_has("launching the caller as guest"));
    assert_int_equal(fake_vmcs_get(GUEST_RIP), FAKE_GUEST_RIP + 2); /* the first CPUID */
    assert_vmm_sound();
}

static void test_cpuid(void **state)
{
    set_rip(0x10200000);
    v->regs.gpr[GPR_RAX] = 0;
    v->regs.gpr[GPR_RCX] = 0;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_CPUID, .insn_len = 2}));
    assert_int_equal(rip(), 0x10200002);
    assert_int_equal(v->regs.gpr[GPR_RBX], 0x756e6547); /* "Genu" */
    assert_int_equal(fake_take_injected(), 0);
    /* leaf 1: the guest is told there is no VMX */
    v->regs.gpr[GPR_RAX] = 1;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_CPUID, .insn_len = 2}));
    assert_int_equal(v->regs.gpr[GPR_RCX] & (1u << 5), 0);
    assert_int_equal(rip(), 0x10200004);
    assert_vmm_sound();
}

static void test_vmcall_version(void **state)
{
    set_rip(0x10200000);
    fake_vmcs_set(GUEST_CS_AR_BYTES, 0xa09b); /* CPL 0 */
    fake_vmcs_set(GUEST_SS_AR_BYTES, 0xc093);
    v->regs.gpr[GPR_RAX] = PTV_VMCALL_VERSION;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMCALL, .insn_len = 3}));
    assert_int_equal(v->regs.gpr[GPR_RAX], PTV_VMCALL_OK);
    assert_int_equal(v->regs.gpr[GPR_RBX], PTV_VMCALL_ABI_VERSION);
    assert_int_equal(rip(), 0x10200003);
    /* a number no VMCALL has */
    v->regs.gpr[GPR_RAX] = 0x7fff;
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMCALL, .insn_len = 3}));
    assert_int_equal((int64_t)v->regs.gpr[GPR_RAX], PTV_VMCALL_ENOSYS);
    assert_vmm_sound();
}

static void test_vmx_insn_ud(void **state)
{
    set_rip(0x10200000);
    assert_true(fake_run_exit(v, &(struct fake_exit){.reason = EXIT_REASON_VMON, .insn_len = 4}));
    assert_int_equal(rip(), 0x10200000); /* not skipped */
    assert_injected(UD_VECTOR, false);
    assert_vmm_sound();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boot),
        cmocka_unit_test(test_cpuid),
        cmocka_unit_test(test_vmcall_version),
        cmocka_unit_test(test_vmx_insn_ud),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
