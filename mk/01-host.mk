# Templates for host unit tests and fuzzers.
#
# A host test:   HOST_TESTS += test_foo ; test_foo_SRCS := tests/unit/foo/test_foo.c vmm/foo/foo.c
#   -> $(BUILD)/host/test_foo, run by `make test` (target test-unit) as step unit:test_foo.
# A fuzzer:      FUZZERS += fuzz_foo ; fuzz_foo_SRCS := tests/fuzz/fuzz_foo.c vmm/foo.c
#   -> $(BUILD)/fuzz/fuzz_foo, smoke run in `make test`, long run in `make fuzz`.
# Sources are the project's real .c files: no copies, no test-only forks.

HOST_TESTS :=
FUZZERS    :=

# Source sets that tests of several areas link (defined here, before every area's mk file).
# The guest-visible MSR and CPUID policy with the PT rules it asks (vmm/emul/guest_policy.c).
GUEST_POLICY_SRCS := vmm/emul/guest_policy.c vmm/emul/emul_policy.c vmm/pt/pt_caps.c \
                     vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c

# A test is one compile-and-link of several .c files, where -MMD would keep only the last
# file's dependencies: a separate -MM pass writes them all (every header, and a .c file a
# test #includes) to $@.d.
HOST_DEPFLAGS = $(filter-out -MMD -MP,$(HOST_CFLAGS))

define HOST_TEST_template
$(BUILD)/host/$(1): $$($(1)_SRCS)
	@mkdir -p $$(@D)
	$$(Q)$$(HOST_CC) $$(HOST_DEPFLAGS) $$($(1)_CFLAGS) -MM -MP -MT $$@ $$($(1)_SRCS) > $$@.d
	$$(Q)$$(HOST_CC) $$(HOST_DEPFLAGS) $$($(1)_CFLAGS) -o $$@ $$($(1)_SRCS) $$(HOST_LDLIBS) $$($(1)_LDLIBS)
-include $(BUILD)/host/$(1).d
endef

define FUZZER_template
$(BUILD)/fuzz/$(1): $$($(1)_SRCS)
	@mkdir -p $$(@D)
	$$(Q)$$(FUZZ_CC) $$(FUZZ_CFLAGS) $$($(1)_CFLAGS) -MM -MP -MT $$@ $$($(1)_SRCS) > $$@.d
	$$(Q)$$(FUZZ_CC) $$(FUZZ_CFLAGS) $$($(1)_CFLAGS) -o $$@ $$($(1)_SRCS) $$($(1)_LDLIBS)
-include $(BUILD)/fuzz/$(1).d
endef
