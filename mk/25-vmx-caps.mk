# The VMX set-up decision ("nested under QEMU/KVM"): vmm/vmx/vmx_caps_policy.c is pure
# logic, in vmm.elf (every file under vmm/); vmx_on.c gathers its inputs.  The host test runs it,
# the PT mode decision and the AP decision against capability profiles of real vehicles
# (tests/fakes/vmx_profiles.h: nested KVM, Bochs, Skylake); the fuzzer against random MSRs. `make
# run-kvm` stops at once, in one line, where nested QEMU/KVM cannot run (tools/run.sh).

VMX_CAPS_SRCS := vmm/vmx/vmx_caps_policy.c vmm/vmx/vmx_controls.c vmm/lib/fmt.c vmm/pt/pt_caps.c

HOST_TESTS += test_vmx_caps_policy
test_vmx_caps_policy_SRCS := tests/unit/vmx/test_vmx_caps_policy.c $(VMX_CAPS_SRCS)

FUZZERS += fuzz_vmx_caps_policy
fuzz_vmx_caps_policy_SRCS := tests/fuzz/fuzz_vmx_caps_policy.c $(VMX_CAPS_SRCS)

# tools/run.sh's KVM check against fake /dev/kvm, cpuinfo, nested parameter and QEMU
TEST_TARGETS += test-run-kvm
.PHONY: test-run-kvm
test-run-kvm:
	$(Q)tests/step.sh $(BUILD)/results unit:run-kvm tests/unit/tools/test-run-kvm.sh

# Check before building the image: the image's prerequisites come first in the rule that
# mk/90-image.mk gives run-kvm, so the check runs while this file is read.
ifneq ($(filter run-kvm,$(MAKECMDGOALS)),)
RUN_KVM_WHY := $(shell tools/run.sh --kvm-check)
ifneq ($(RUN_KVM_WHY),)
$(error $(RUN_KVM_WHY))
endif
endif
