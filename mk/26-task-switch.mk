# Hardware task switches: vmm/emul/task_switch.c is pure logic, in vmm.elf
# (vmm/vcpu/exit/exit_task_switch.c is its VMX shim) and unchanged into the host test and fuzzer
# below; both check the new state against the VM-entry guest-state model (vmm/emul/guest_check.c).

HOST_TESTS += test_task_switch
test_task_switch_SRCS := tests/unit/emul/test_task_switch.c vmm/emul/task_switch.c vmm/emul/guest_check.c

FUZZERS += fuzz_task_switch
fuzz_task_switch_SRCS := tests/fuzz/fuzz_task_switch.c vmm/emul/task_switch.c vmm/emul/guest_check.c
