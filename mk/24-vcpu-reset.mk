# The INIT / SIPI state of a vCPU: vmm/emul/vcpu_reset.c is pure logic, in vmm.elf (every
# file under vmm/) and unchanged into the host test and fuzzer below, which check it against the
# VM-entry guest-state model (vmm/emul/guest_check.c).

HOST_TESTS += test_vcpu_reset
test_vcpu_reset_SRCS := tests/unit/emul/test_vcpu_reset.c vmm/emul/vcpu_reset.c vmm/emul/guest_check.c

FUZZERS += fuzz_vcpu_reset
fuzz_vcpu_reset_SRCS := tests/fuzz/fuzz_vcpu_reset.c vmm/emul/vcpu_reset.c vmm/emul/guest_check.c
