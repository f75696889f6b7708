# In-guest test programs (tests/guest/): tiny GNU-EFI applications that run as
# the VMM's guest in place of Linux and print PASS/FAIL lines (libtest.h).
#
#   build/tests/guest/conformance.efi   the VMM seen from inside (started by the loader)
#   build/tests/guest/selftest.efi      the report library and trap catcher themselves
#   build/tests/guest/pt-selftest.efi   on-box PT self-test (make selftest-usb; SKIPs without PT)
#   build/tests/guest/attack.efi        the adversarial suite (a hostile guest)
#   build/tests/guest/smp.efi           the second CPU under the VMM (Bochs CPUS=2)
#   build/tests/guest/exitcost.efi      VM exit cost per exit kind (make bench-exits)
#
#   make test-bochs-conformance   loader + VMM + conformance.efi in Bochs (real VMX/EPT)
#   make test-qemu-guest-lib      selftest.efi and conformance.efi booted bare in QEMU TCG
#   make test-guest-harness       the conformance verdict script against good and broken logs

GUEST_OUT      := $(BUILD)/tests/guest
GUEST_PROGS    := conformance selftest pt-selftest attack smp trace exitcost
GUEST_LIB_OBJS := $(addprefix $(GUEST_OUT)/,libtest.o trap.o trap_stubs.o) $(GUEST_OUT)/lib_fmt.o
conformance_GUEST_OBJS := $(addprefix $(GUEST_OUT)/,conformance.o conf_memory.o user.o user_stubs.o)
selftest_GUEST_OBJS    := $(addprefix $(GUEST_OUT)/,selftest.o)
pt-selftest_GUEST_OBJS := $(addprefix $(GUEST_OUT)/,pt_selftest.o pt_cont.o vmm_trace_selftest.o pt_seq_check.o pt_seq_stubs.o lbr_selftest.o lbr_check.o lbr_seq_stubs.o)
attack_GUEST_OBJS      := $(addprefix $(GUEST_OUT)/,attack.o attack_rt_stubs.o attack_cpu.o attack_cpu_asm_stubs.o \
                            attack_msr.o attack_vmcall.o attack_mem.o attack_uart.o user.o user_stubs.o \
                            attack_task.o attack_task_stubs.o attack_mode.o attack_mode_stubs.o \
                            attack_nmi.o attack_nmi_stubs.o attack_dma.o)
smp_GUEST_OBJS         := $(addprefix $(GUEST_OUT)/,smp.o smp_mp.o smp_shoot.o smp_tramp_stubs.o)
trace_GUEST_OBJS       := $(addprefix $(GUEST_OUT)/,trace.o trace_rt_stubs.o)
exitcost_GUEST_OBJS    := $(addprefix $(GUEST_OUT)/,exitcost.o)
# the same program with a magic breakpoint and one exit of each kind (tools/exit-profile.sh)
exitcost-trace_GUEST_OBJS := $(GUEST_OUT)/exitcost-trace.o
GUEST_EFIS     := $(foreach p,$(GUEST_PROGS),$(GUEST_OUT)/$(p).efi)

ALL_TARGETS  += $(GUEST_EFIS)
TEST_TARGETS += test-guest-harness test-qemu-guest-lib test-bochs-conformance

$(GUEST_OUT)/%.o: tests/guest/%.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -c -o $@ $<

$(GUEST_OUT)/exitcost-trace.o: tests/guest/exitcost.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -DEXITCOST_TRACE -c -o $@ $<

$(GUEST_OUT)/lib_fmt.o: vmm/lib/fmt.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -c -o $@ $<

$(GUEST_OUT)/%_stubs.o: tests/guest/%.S
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_CFLAGS) -Itests/guest -c -o $@ $<

.SECONDEXPANSION:
$(GUEST_OUT)/%.so: $$(%_GUEST_OBJS) $(GUEST_LIB_OBJS)
	$(Q)ld $(EFI_LDFLAGS) -o $@ $^ $(EFI_LIBS)

$(GUEST_OUT)/%.efi: $(GUEST_OUT)/%.so
	$(Q)$(EFI_OBJCOPY) $< $@

.PRECIOUS: $(GUEST_OUT)/%.so $(GUEST_OUT)/%.o
-include $(wildcard $(GUEST_OUT)/*.d)

.PHONY: guest-tests test-guest-harness test-qemu-guest-lib test-bochs-conformance
guest-tests: $(GUEST_EFIS)

test-guest-harness:
	$(Q)tests/step.sh $(BUILD)/results guest:check-log tests/guest/test-check-log.sh

test-qemu-guest-lib: $(GUEST_EFIS)
	$(Q)tests/step.sh $(BUILD)/results qemu:guest-lib tests/guest/run-qemu-selftest.sh $(BUILD)

# The loader and the VMM come from their own fragments: build them first; a
# build failure is recorded as this step's FAIL (not a make error), so `make
# test` still shows the step.
CONFORMANCE_DEPS := $(GUEST_EFIS) $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
test-bochs-conformance:
	@mkdir -p $(BUILD)/test
	$(Q)if $(MAKE) --no-print-directory $(CONFORMANCE_DEPS) >$(BUILD)/test/conformance-build.log 2>&1; \
	then tests/step.sh $(BUILD)/results bochs:conformance tests/system/bochs-conformance.sh $(BUILD); \
	else tests/step.sh $(BUILD)/results bochs:conformance \
	    sh -c 'tail -n 20 $(BUILD)/test/conformance-build.log; echo "build of $(CONFORMANCE_DEPS) failed"; exit 1'; \
	fi

# The on-box PT self-test image: boot it on a Skylake+ machine (dd to a USB stick).
# In Bochs (no PT) the same image must end in an honest SKIP, never a PASS.
SELFTEST_IMG := $(BUILD)/ptvisor-selftest.img
$(SELFTEST_IMG): $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf tests/guest/pt-selftest.cfg \
                 $(GUEST_OUT)/pt-selftest.efi tools/mkimage.sh
	$(Q)LOADER=$(BUILD)/boot/BOOTX64.EFI VMM=$(BUILD)/vmm/vmm.elf \
	    tools/mkimage.sh $@ tests/guest/pt-selftest.cfg $(GUEST_OUT)/pt-selftest.efi -

# The same guest with pt_mode = system: the VMM traces it with PT (the guest sees none).
SELFTEST_SYS_IMG := $(BUILD)/ptvisor-selftest-system.img
$(SELFTEST_SYS_IMG): $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf tests/guest/pt-selftest-system.cfg \
                     $(GUEST_OUT)/pt-selftest.efi tools/mkimage.sh
	$(Q)LOADER=$(BUILD)/boot/BOOTX64.EFI VMM=$(BUILD)/vmm/vmm.elf \
	    tools/mkimage.sh $@ tests/guest/pt-selftest-system.cfg $(GUEST_OUT)/pt-selftest.efi -

.PHONY: selftest-usb test-bochs-pt-selftest
selftest-usb: $(SELFTEST_IMG) $(SELFTEST_SYS_IMG)
	@echo "PT self-test images (write one to a USB stick and boot a Skylake+ box):"
	@echo "  $(SELFTEST_IMG)         the guest owns PT (pt_mode = host-guest)"
	@echo "  $(SELFTEST_SYS_IMG)  the VMM traces the guest (pt_mode = system)"
	@echo "  sudo dd if=IMAGE of=/dev/sdX bs=4M conv=fsync"
	@echo "Results: PASS/FAIL/SKIP lines and one SUMMARY line on COM1 (115200 8N1) and on screen."

test-bochs-pt-selftest:
	-$(Q)$(MAKE) --no-print-directory $(SELFTEST_IMG) $(SELFTEST_SYS_IMG) >$(BUILD)/selftest-img.log 2>&1
	$(Q)tests/step.sh $(BUILD)/results bochs:pt-selftest-without-pt \
	    tests/system/bochs-pt-selftest.sh $(SELFTEST_IMG) $(BUILD)/test/bochs-pt-selftest host-guest
	$(Q)tests/step.sh $(BUILD)/results bochs:pt-selftest-system-without-pt \
	    tests/system/bochs-pt-selftest.sh $(SELFTEST_SYS_IMG) $(BUILD)/test/bochs-pt-selftest-system system

TEST_TARGETS += test-bochs-pt-selftest

# One Bochs boot of an in-guest suite: tests/system/bochs-NAME.sh, step bochs:NAME.  Its
# inputs are built first; a build failure is the step's FAIL (with the build log's tail).
# ENV: variables for the runner (which Bochs, how many CPUs).
#   $(call BOCHS_GUEST_STEP,NAME,DEPS[,ENV[,SCRIPT]])
define BOCHS_GUEST_STEP
.PHONY: test-bochs-$(1)
TEST_TARGETS += test-bochs-$(1)
test-bochs-$(1):
	@mkdir -p $$(BUILD)/test
	$$(Q)if $$(MAKE) --no-print-directory $(2) >$$(BUILD)/test/$(1)-build.log 2>&1; \
	then $(3) tests/step.sh $$(BUILD)/results bochs:$(1) tests/system/bochs-$(or $(4),$(1)).sh $$(BUILD); \
	else tests/step.sh $$(BUILD)/results bochs:$(1) \
	    sh -c 'tail -n 20 $$(BUILD)/test/$(1)-build.log; echo "build of $(2) failed"; exit 1'; \
	fi
endef
VMM_BOOT_DEPS := $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf

# The adversarial suite: attack.efi as a hostile guest.  bochs:attacks: 2 CPUs (the
# idle AP answers every shootdown the attacks cause) on Debian 12's Bochs 2.7, because Bochs
# 3.0 with 2 CPUs triple-faults the BSP at a DR0 instruction breakpoint (attack 3's), also
# without the VMM ("exception(): 3rd (14) exception with no resolution"; 1 CPU: none).
# bochs:attacks-mtf: the same suite on Bochs 3.0 with 1 CPU, where sw_trace = auto steps with
# MTF and NMIs wait in NMI windows.
$(eval $(call BOCHS_GUEST_STEP,attacks,$(GUEST_OUT)/attack.efi $(VMM_BOOT_DEPS),BOCHS=2.7))
$(eval $(call BOCHS_GUEST_STEP,attacks-mtf,$(GUEST_OUT)/attack.efi $(VMM_BOOT_DEPS),CPUS=1 ATK_REQUIRE=CPL.0.free,attacks))

# The SMP suite: smp.efi as the guest, Bochs with 2 CPUs.
$(eval $(call BOCHS_GUEST_STEP,smp,$(GUEST_OUT)/smp.efi $(VMM_BOOT_DEPS)))

# The software tracer: trace.efi as the guest, then the host decode of its
# printed trace with libipt (tests/guest/trace_check.c).
$(BUILD)/host/trace_check: tests/guest/trace_check.c tests/fakes/swpt_dec.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_TOOL_CFLAGS) -Itests -o $@ $^ -lipt
$(eval $(call BOCHS_GUEST_STEP,trace,$(GUEST_OUT)/trace.efi $(VMM_BOOT_DEPS) $(BUILD)/host/trace_check $(PTT_BIN)))
