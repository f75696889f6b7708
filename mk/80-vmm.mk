# vmm.elf: the freestanding hypervisor (PIE, W^X segments, linker.ld).
# Every .c and .S file under vmm/ is part of it: one list, no per-folder source lists.  A folder
# the layer table of tools/check-layers.sh does not name fails the build (its include rules would
# be unknown); docs/ARCHITECTURE.md section 2.0 is the map.
VMM_SRCS      := $(sort $(shell find vmm -name '*.c' -o -name '*.S'))
VMM_OBJS      := $(patsubst %,$(BUILD)/vmm-obj/%.o,$(VMM_SRCS))
VMM_ELF       := $(BUILD)/vmm/vmm.elf
# vmm.elf goes on the boot volume without its DWARF (1.5 MB -> 0.27 MB): the loader reads and
# SHA-256s the whole file before anything parses it (boot/vmm_pin.c), ~66 instructions a byte,
# which was ~100 M Bochs ticks of every boot under the VMM (docs/ARCHITECTURE.md section 2.4, the
# boot figure).  Its symbol table stays; the same link with DWARF is vmm.debug.elf (gdb, addr2line).
VMM_DEBUG_ELF := $(BUILD)/vmm/vmm.debug.elf

# the software tracer's per-exit path and every exit's (vmx_run, the dispatch, the CPUID, VMCALL,
# MSR and I/O handlers, the PMU and LBR hooks they call): no frame pointer (a register and three
# instructions a call back on the hottest path; nothing in the VMM walks frames)
VMM_HOT_SRCS := $(wildcard vmm/trace/*.c) vmm/trace/shim/trace_step.c vmm/trace/shim/trace_guest.c vmm/vmx/vcpu_ops.c vmm/vcpu/vcpu_loop.c vmm/pt/pt_pkt.c \
                vmm/core/main.c vmm/vcpu/exit/exit_cpuid.c vmm/vcpu/exit/exit_vmcall.c \
                vmm/vcpu/exit/exit_msr.c vmm/vcpu/exit/exit_io.c vmm/pmu/shim/pmu_vmx.c vmm/lbr/shim/lbr_vmx.c \
                vmm/emul/guest_policy.c vmm/emul/msr_owner.c vmm/dev/uart_console.c vmm/dev/uart_mux.c
$(patsubst %,$(BUILD)/vmm-obj/%.o,$(VMM_HOT_SRCS)): VMM_HOT_CFLAGS := -fomit-frame-pointer

$(BUILD)/vmm-obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(Q)$(VMM_CC) $(VMM_CFLAGS) $(VMM_HOT_CFLAGS) -c $< -o $@

$(BUILD)/vmm-obj/%.S.o: %.S
	@mkdir -p $(@D)
	$(Q)$(VMM_CC) $(VMM_ASFLAGS) -c $< -o $@

# the include rules are part of the build: a wrong include stops vmm.elf with the offending line
$(BUILD)/vmm/layers.ok: $(VMM_SRCS) $(shell find vmm -name '*.h' -o -name '*.def') tools/check-layers.sh
	@mkdir -p $(@D)
	$(Q)tools/check-layers.sh >$@.tmp || { cat $@.tmp; rm -f $@.tmp; exit 1; }
	$(Q)mv $@.tmp $@

$(VMM_DEBUG_ELF): $(VMM_OBJS) linker.ld $(BUILD)/vmm/layers.ok
	@mkdir -p $(@D)
	$(Q)$(VMM_LD) -pie --no-dynamic-linker -z text -z max-page-size=4096 -z noexecstack \
	    -static -nostdlib -T linker.ld -o $@ $(VMM_OBJS)

$(VMM_ELF): $(VMM_DEBUG_ELF) tools/check-vmm-elf.sh
	$(Q)objcopy --strip-debug $< $@.tmp && tools/check-vmm-elf.sh $@.tmp && mv $@.tmp $@

-include $(VMM_OBJS:.o=.d)

.PHONY: vmm
vmm: $(VMM_ELF)
ALL_TARGETS += $(VMM_ELF)

# host tests of vmm/vmx pure parts
HOST_TESTS += test_vmcs_table test_vmx_controls test_guest_policy test_guest_check
test_vmcs_table_SRCS := tests/unit/vmx/test_vmcs_table.c vmm/vmx/vmcs_table.c
test_vmx_controls_SRCS := tests/unit/vmx/test_vmx_controls.c vmm/vmx/vmx_controls.c
test_guest_policy_SRCS := tests/unit/emul/test_guest_policy.c $(GUEST_POLICY_SRCS)
FUZZERS += fuzz_guest_policy
fuzz_guest_policy_SRCS := tests/fuzz/fuzz_guest_policy.c $(GUEST_POLICY_SRCS)
test_guest_check_SRCS := tests/unit/emul/test_guest_check.c vmm/emul/guest_check.c
# the MSR owner table (the exit's dispatch and the MSR bitmap) against the decisions the exit
# handler made before the table existed, with the LBR policy's real claims
HOST_TESTS += test_msr_owner
test_msr_owner_SRCS := tests/unit/emul/test_msr_owner.c vmm/emul/msr_owner.c vmm/emul/emul_policy.c \
                       vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c vmm/pt/pt_caps.c $(LBR_SRCS) vmm/lib/fmt.c
FUZZERS += fuzz_msr_owner
fuzz_msr_owner_SRCS := tests/fuzz/fuzz_msr_owner.c vmm/emul/msr_owner.c vmm/lbr/lbr_policy.c vmm/lib/fmt.c
# the architectural rules of emulated CPU state: RIP/RF/TF, CR0/CR4, APIC base, MTRRs
HOST_TESTS += test_emul_policy
test_emul_policy_SRCS := tests/unit/emul/test_emul_policy.c vmm/emul/emul_policy.c
FUZZERS += fuzz_emul_policy
fuzz_emul_policy_SRCS := tests/fuzz/fuzz_emul_policy.c vmm/emul/emul_policy.c

# the VMM's includes go downward only (tools/check-layers.sh, docs/ARCHITECTURE.md section 2.0)
TEST_TARGETS += test-layers
.PHONY: test-layers
test-layers:
	$(Q)tests/step.sh $(BUILD)/results layers:vmm tools/check-layers.sh
	$(Q)tests/step.sh $(BUILD)/results layers:selftest tests/check-layers-selftest.sh
