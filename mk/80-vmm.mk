# vmm.elf: the freestanding hypervisor (PIE, W^X segments, linker.ld).
# Named 80- so the pure-logic source lists of vmm/ept (EPT_SRCS) and vmm/pt
# (PT_CORE_SRCS, PT_TOPA_SRCS) are known here.

VMM_CORE_SRCS := $(wildcard vmm/*.c vmm/lib/*.c vmm/vmx/*.c vmm/smp/*.c vmm/trace/*.c) $(wildcard vmm/*.S vmm/vmx/*.S)
VMM_SRCS      := $(VMM_CORE_SRCS) $(EPT_SRCS) $(PT_CORE_SRCS) $(PT_TOPA_SRCS) $(PT_CTRL_SRCS) $(UART_SRCS) \
                 $(LBR_SRCS) $(PMU_SRCS) $(IOMMU_SRCS)
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
VMM_HOT_SRCS := $(wildcard vmm/trace/*.c) vmm/vmx/trace_step.c vmm/vmx/vmx_run.c vmm/pt/pt_pkt.c \
                vmm/main.c vmm/vmx/exit_cpuid.c vmm/vmx/exit_vmcall.c \
                vmm/vmx/exit_msr.c vmm/vmx/exit_io.c vmm/vmx/pmu_vmx.c vmm/vmx/lbr_vmx.c \
                vmm/vmx/guest_policy.c vmm/dev/uart_console.c vmm/dev/uart_mux.c
$(patsubst %,$(BUILD)/vmm-obj/%.o,$(VMM_HOT_SRCS)): VMM_HOT_CFLAGS := -fomit-frame-pointer

$(BUILD)/vmm-obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(Q)$(VMM_CC) $(VMM_CFLAGS) $(VMM_HOT_CFLAGS) -c $< -o $@

$(BUILD)/vmm-obj/%.S.o: %.S
	@mkdir -p $(@D)
	$(Q)$(VMM_CC) $(VMM_ASFLAGS) -c $< -o $@

$(VMM_DEBUG_ELF): $(VMM_OBJS) linker.ld
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
HOST_TESTS += test_vmcs_fields test_vmx_controls test_guest_policy test_guest_check
test_vmcs_fields_SRCS := tests/unit/test_vmcs_fields.c vmm/vmx/vmcs_table.c
test_vmx_controls_SRCS := tests/unit/test_vmx_controls.c vmm/vmx/vmx_controls.c
test_guest_policy_SRCS := tests/unit/test_guest_policy.c vmm/vmx/guest_policy.c vmm/vmx/emul_policy.c vmm/pt/pt_caps.c \
                          vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c
FUZZERS += fuzz_guest_policy
fuzz_guest_policy_SRCS := tests/fuzz/fuzz_guest_policy.c vmm/vmx/guest_policy.c vmm/vmx/emul_policy.c vmm/pt/pt_caps.c \
                          vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c
test_guest_check_SRCS := tests/unit/test_guest_check.c vmm/vmx/guest_check.c
# the architectural rules of emulated CPU state (issue 7): RIP/RF/TF, CR0/CR4, APIC base, MTRRs
HOST_TESTS += test_emul_policy
test_emul_policy_SRCS := tests/unit/test_emul_policy.c vmm/vmx/emul_policy.c
FUZZERS += fuzz_emul_policy
fuzz_emul_policy_SRCS := tests/fuzz/fuzz_emul_policy.c vmm/vmx/emul_policy.c
