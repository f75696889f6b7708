# Guest LBR: the pure policy vmm/lbr/lbr_policy.c is in vmm.elf (called by the shim
# vmm/lbr/shim/lbr_vmx.c) and unchanged into the host tests and the fuzzer below.

LBR_SRCS := vmm/lbr/lbr_policy.c vmm/lbr/lbr_report.c

# the policy's rules and decision against hand-written expectations
HOST_TESTS += test_lbr_policy
test_lbr_policy_SRCS := tests/unit/lbr/test_lbr_policy.c $(LBR_SRCS) vmm/lib/fmt.c

# the crash report's guest LBR text (lbr_report.c) read from the model after known branches
HOST_TESTS += test_lbr_report
test_lbr_report_SRCS := tests/unit/lbr/test_lbr_report.c tests/model/lbr_model.c $(LBR_SRCS) vmm/lib/fmt.c

# the differential: the LBR model alone (bare metal) against the model driven through the VMM's
# policy at every exit / entry (what lbr_vmx.c and the VMCS do), with mutants that must be caught
LBR_DIFF_SRCS := tests/model/lbr_model.c $(LBR_SRCS) vmm/lib/fmt.c $(GUEST_POLICY_SRCS) \
                 vmm/emul/msr_owner.c
HOST_TESTS += test_lbr_diff
test_lbr_diff_SRCS := tests/model/test_lbr_diff.c $(LBR_DIFF_SRCS)

# MSR index/value sequences and random CPUs through the policy, against the model's rules
FUZZERS += fuzz_lbr
fuzz_lbr_SRCS := tests/fuzz/fuzz_lbr.c tests/model/lbr_model.c $(LBR_SRCS) vmm/lib/fmt.c

# make bench: the figures of a guest using LBR (tests/model/bench_lbr.sh, callgrind): VMM
# instructions per VM exit, exits its LBR MSR accesses cause
BENCH_TARGETS += bench-lbr
.PHONY: bench-lbr
$(BUILD)/host/bench_lbr: tests/model/test_lbr_diff.c $(LBR_DIFF_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ $^ -lcmocka
bench-lbr: $(BUILD)/host/bench_lbr
	$(Q)tests/model/bench_lbr.sh $<
