# PT engine: guest ToPA walker, shadow ToPA, PT-triggered EPT violations,
# the PT hardware model and its tests (owner: PT-TOPA helper).

PT_TOPA_SRCS := vmm/pt/pt_topa.c vmm/pt/pt_shadow.c vmm/pt/pt_shadow_view.c vmm/pt/pt_eptv.c

# The PT controller (guest RTIT MSRs, shadow, entry/exit switching): everything PT in vmm.elf
# but the thin shim vmm/pt/shim/pt_vmx.c.
PT_CTRL_SRCS := vmm/pt/pt_ctrl.c vmm/pt/pt_sys.c vmm/pt/pt_mem_view.c

PT_MODEL_SRCS := tests/model/fake_world.c tests/model/ptm.c tests/model/ptgen.c

HOST_TESTS += test_pt_topa test_pt_shadow test_pt_eptv test_ptm test_pt_e2e test_pt_adversarial
test_pt_topa_SRCS        := tests/unit/pt/test_pt_topa.c tests/model/fake_world.c vmm/pt/pt_topa.c
test_pt_shadow_SRCS      := tests/unit/pt/test_pt_shadow.c $(PT_MODEL_SRCS) $(PT_TOPA_SRCS)
test_pt_eptv_SRCS        := tests/unit/pt/test_pt_eptv.c tests/model/fake_world.c vmm/pt/pt_eptv.c
test_ptm_SRCS            := tests/model/test_ptm.c $(PT_MODEL_SRCS)
test_pt_e2e_SRCS         := tests/model/test_pt_e2e.c tests/model/harness.c $(PT_MODEL_SRCS) $(PT_TOPA_SRCS)
test_pt_e2e_LDLIBS       := -lipt
test_pt_adversarial_SRCS := tests/model/test_pt_adversarial.c tests/model/harness.c \
                            $(PT_MODEL_SRCS) $(PT_TOPA_SRCS)
test_pt_adversarial_LDLIBS := -lipt

FUZZERS += fuzz_pt_topa
fuzz_pt_topa_SRCS := tests/fuzz/fuzz_pt_topa.c $(PT_TOPA_SRCS)

# Instructions per shadowed ToPA entry, under callgrind (skips without valgrind).
BENCH_TARGETS += bench-pt-shadow
.PHONY: bench-pt-shadow
$(BUILD)/host/bench_shadow: tests/model/bench_shadow.c tests/model/fake_world.c $(PT_TOPA_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ $^
bench-pt-shadow: $(BUILD)/host/bench_shadow
	$(Q)tests/model/bench_shadow.sh $(BUILD)/host/bench_shadow

# The engine files compile freestanding, as they will in vmm.elf, warnings as errors.
TEST_TARGETS += test-pt-topa-freestanding
.PHONY: test-pt-topa-freestanding
test-pt-topa-freestanding:
	$(Q)for f in $(PT_TOPA_SRCS) $(PT_CTRL_SRCS); do \
	    tests/step.sh $(BUILD)/results freestanding:$$f \
	        $(VMM_CC) $(filter-out -MMD -MP,$(VMM_CFLAGS)) -Werror -c $$f -o /dev/null; done

# Steady-state cost of guest tracing: engine calls (= VM exits) while the model traces.
BENCH_TARGETS += bench-pt-steady
.PHONY: bench-pt-steady
$(BUILD)/host/bench_steady: tests/model/bench_steady.c tests/model/fake_world.c tests/model/ptm.c \
                            tests/model/ptgen.c $(PT_TOPA_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_CFLAGS) -MF $@.d -o $@ $^ $(HOST_LDLIBS)
bench-pt-steady: $(BUILD)/host/bench_steady
	$(Q)$(BUILD)/host/bench_steady 64

# The engine's view of a GPA as the VMM decides it (the shim pt_vmx.c only gathers the facts).
HOST_TESTS += test_pt_mem_view
test_pt_mem_view_SRCS := tests/unit/pt/test_pt_mem_view.c vmm/pt/pt_mem_view.c
FUZZERS += fuzz_pt_mem_view
fuzz_pt_mem_view_SRCS := tests/fuzz/fuzz_pt_mem_view.c vmm/pt/pt_mem_view.c
