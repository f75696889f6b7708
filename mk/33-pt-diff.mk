# The PT wiring on the CPU twin against a bare-metal model (tests/model/diff.h): the real
# controller + engine + guest policy, the PT output model, the RTIT MSR rules of ptm_cpu.c.

PT_DIFF_SRCS := tests/model/diff.c tests/model/twin.c tests/model/ptm_cpu.c tests/model/ptm.c \
                tests/model/ptgen.c tests/model/fake_world.c $(PT_CTRL_SRCS) $(PT_TOPA_SRCS) \
                vmm/pt/pt_switch.c $(GUEST_POLICY_SRCS)

HOST_TESTS += test_pt_diff
test_pt_diff_SRCS := tests/model/test_pt_diff.c $(PT_DIFF_SRCS)

FUZZERS += fuzz_pt_diff
fuzz_pt_diff_SRCS := tests/fuzz/fuzz_pt_diff.c $(PT_DIFF_SRCS)

# The oracle bites: defects 1 and 2 put back into a scratch copy must make it fail.
TEST_TARGETS += test-pt-oracle-bites
.PHONY: test-pt-oracle-bites
test-pt-oracle-bites:
	$(Q)tests/step.sh $(BUILD)/results unit:oracle-bites tests/model/oracle-bites.sh $(BUILD) \
	    "tests/model/test_pt_diff.c $(PT_DIFF_SRCS)" "$(HOST_CC)" "$(filter-out -MMD -MP,$(HOST_CFLAGS))" \
	    "$(test_pt_cont_SRCS)"

# make fuzz: the differential for >= 10 million guest operations (all four modes).
$(BUILD)/host/diff_long: tests/model/diff_long.c $(PT_DIFF_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ $^
FUZZ_TARGETS += fuzz-pt-diff-long
.PHONY: fuzz-pt-diff-long
fuzz-pt-diff-long: $(BUILD)/host/diff_long
	$(Q)$(BUILD)/host/diff_long $(or $(DIFF_OPS),10000000)

# make bench: the controller's figures (instructions, callgrind).
BENCH_TARGETS += bench-pt-ctrl
.PHONY: bench-pt-ctrl
$(BUILD)/host/bench_ctrl: tests/model/bench_ctrl.c tests/model/fake_world.c $(PT_CTRL_SRCS) \
                          $(PT_TOPA_SRCS) vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c vmm/pt/pt_caps.c \
                          vmm/pt/pt_switch.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ $^
bench-pt-ctrl: $(BUILD)/host/bench_ctrl
	$(Q)tests/model/bench_ctrl.sh $<

# The on-box self-test's long-trace verdict (tests/guest/pt_cont.c, also in pt-selftest.efi) on
# the real controller + twin: >= 1,000 exits of the self-test's program, and planted faults.
HOST_TESTS += test_pt_cont
test_pt_cont_SRCS := tests/model/test_pt_cont.c tests/guest/pt_cont.c vmm/lib/fmt.c $(PT_DIFF_SRCS)
