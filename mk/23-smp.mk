# SMP (vmm/smp/): the EPT shootdown protocol is pure logic, in vmm.elf (every file under vmm/) and
# unchanged into the host test and fuzzer below.  The host test force-includes tests/fakes/sd_tso.h,
# which turns shootdown.c's __atomic builtins into scheduling points on a modelled x86-TSO memory
# (the source is not changed); that memory and the step scheduler over the simulated CPUs are
# tests/fakes/sd_sim.[ch], shared with test_ept_smp.

HOST_TESTS += test_shootdown
test_shootdown_SRCS   := tests/unit/smp/test_shootdown.c tests/fakes/sd_sim.c vmm/smp/shootdown.c
test_shootdown_CFLAGS := -include tests/fakes/sd_tso.h -pthread
test_shootdown_LDLIBS := -pthread

FUZZERS += fuzz_shootdown
fuzz_shootdown_SRCS := tests/fuzz/fuzz_shootdown.c vmm/smp/shootdown.c

# The joint: the real EPT builder + on-demand maps + the shootdown protocol on simulated CPUs
# with TLBs and paging-structure caches, wired as vmm/vcpu/exit/exit_ept.c wires them.
HOST_TESTS += test_ept_smp
test_ept_smp_SRCS   := tests/unit/smp/test_ept_smp.c tests/fakes/sd_sim.c vmm/ept/ept.c \
                       vmm/ept/mtrr.c vmm/ept/ept_ondemand.c vmm/smp/shootdown.c
test_ept_smp_CFLAGS := -include tests/fakes/sd_tso.h
