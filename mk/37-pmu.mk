# Guest PMU: the pure policy vmm/pmu/pmu_policy.c is in vmm.elf (called through
# the shim vmm/pmu/shim/pmu_vmx.c by exit_msr.c) and unchanged into the host tests and the fuzzer
# below.

PMU_SRCS := vmm/pmu/pmu_policy.c

# the policy's rules and decisions against hand-written expectations (real CPUID.0AH values)
HOST_TESTS += test_pmu_policy
test_pmu_policy_SRCS := tests/unit/pmu/test_pmu_policy.c $(PMU_SRCS) vmm/lib/fmt.c

# the differential: the PMU + LBR models alone (bare metal) against the same models driven
# through the VMM's PMU policy and the VMX transitions, with mutants that must be caught
HOST_TESTS += test_pmu_diff
test_pmu_diff_SRCS := tests/model/test_pmu_diff.c tests/model/pmu_model.c tests/model/lbr_model.c \
                      $(PMU_SRCS) vmm/lib/fmt.c

# random CPUs (CPUID.0AH, PERF_CAPABILITIES, VMX controls) and MSR writes through the policy's
# checks, against the PMU model's independent rules
FUZZERS += fuzz_pmu
fuzz_pmu_SRCS := tests/fuzz/fuzz_pmu.c tests/model/pmu_model.c tests/model/lbr_model.c \
                 $(PMU_SRCS) vmm/lib/fmt.c
