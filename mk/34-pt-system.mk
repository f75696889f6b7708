# System mode (pt_mode = system): the VMM traces its guest into a VMM-owned ToPA ring
# (vmm/pt/pt_sys.c, switched by the controller).  Proven on the CPU twin with the PT output
# model and the SDM's packet filtering, the ring decoded with libipt; and a fuzzer of the
# config -> RTIT set-up validation.

PT_SYS_TEST_SRCS := tests/model/twin.c tests/model/ptm_cpu.c tests/model/ptm.c \
                    tests/model/ptgen.c tests/model/fake_world.c $(PT_CTRL_SRCS) $(PT_TOPA_SRCS) \
                    vmm/pt/pt_switch.c $(GUEST_POLICY_SRCS) vmm/emul/msr_owner.c

HOST_TESTS += test_pt_sys
test_pt_sys_SRCS := tests/model/test_pt_sys.c $(PT_SYS_TEST_SRCS)
test_pt_sys_LDLIBS := -lipt

FUZZERS += fuzz_pt_sys
fuzz_pt_sys_SRCS := tests/fuzz/fuzz_pt_sys.c $(PT_SYS_TEST_SRCS)
