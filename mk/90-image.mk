# Boot images and running them.
#
#   make usb        build/ptvisor-usb.img: dd-able MBR + FAT16 ESP with loader, config, VMM, guest
#   make run        build, then boot it in the best vehicle here (QEMU/KVM nested, else Bochs)
#   make run-kvm    boot it in QEMU/KVM with -cpu host (nested VMX)
#   test-bochs-linux (in `make test`): Linux under the VMM in Bochs reaches its markers
#
# IMG_CFG=path/to/x.cfg builds the image with another config.  Other areas build
# their own images with tools/mkimage.sh OUT CFG GUEST [INITRD] (e.g. build/img/<name>.img).

BOOT_EFI  ?= $(BUILD)/boot/BOOTX64.EFI
VMM_ELF   ?= $(BUILD)/vmm/vmm.elf
IMG_CFG   ?= boot/ptvisor.cfg
USB_IMG   := $(BUILD)/ptvisor-usb.img
# 120 cylinders x 16 x 63 x 512 = 62 MB: kernel + initrd + loader + VMM and slack
USB_CYL   ?= 120

.PHONY: usb-image test-bochs-linux test-bochs-linux-mtf
usb-image: $(USB_IMG)

# Rebuilt when the config path changes too (IMG_CFG=... on the command line).
$(BUILD)/img/.cfg-$(subst /,_,$(IMG_CFG)):
	@mkdir -p $(@D) && rm -f $(@D)/.cfg-* && touch $@

$(USB_IMG): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(IMG_CFG) $(GUEST_KERNEL) \
            $(GUEST_INITRD) $(BUILD)/img/.cfg-$(subst /,_,$(IMG_CFG))
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=$(USB_CYL) \
	    tools/mkimage.sh $@ $(IMG_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)

# `make run` and bochs:linux boot the same image with three changes to IMG_CFG: the kernel's
# first RUN_TRACE_BOOT instructions from the loader's hand-off are traced and dumped
# (trace_boot, dump_on = ...,boot), and vmcall_user = trace lets the guest's /init trace a
# workload with ptvisor-ctl (the USB image keeps the defaults).
RUN_CFG := $(BUILD)/img/run.cfg
RUN_TRACE_BOOT ?= 100000
RUN_IMG := $(BUILD)/ptvisor-run.img

$(RUN_CFG): $(IMG_CFG) $(BUILD)/img/.cfg-$(subst /,_,$(IMG_CFG))
	@mkdir -p $(@D)
	$(Q)sed -e 's/^vmcall_user = .*/vmcall_user = trace/' \
	    -e 's/^trace_boot = .*/trace_boot = $(RUN_TRACE_BOOT)/' \
	    -e 's/^dump_on = .*/dump_on = crash,vmcall,boot/' $(IMG_CFG) >$@.tmp
	$(Q)for k in 'vmcall_user = trace' 'trace_boot = $(RUN_TRACE_BOOT)' 'dump_on = crash,vmcall,boot'; do \
	    grep -qx "$$k" $@.tmp || { echo "run.cfg: no '$${k%% =*} =' line in $(IMG_CFG) to change"; exit 1; }; \
	done
	$(Q)mv $@.tmp $@

# bochs:linux's image: the run image whose guest ends in a kernel panic (ptv.panic=1, guest/init)
TEST_CFG := $(BUILD)/img/test-linux.cfg
TEST_IMG := $(BUILD)/ptvisor-test-linux.img
$(TEST_CFG): $(RUN_CFG)
	$(Q)sed 's/^cmdline = .*/& ptv.panic=1/' $< >$@.tmp && grep -q '^cmdline = .* ptv.panic=1$$' $@.tmp && mv $@.tmp $@

# bochs:linux-mtf's image: the same with pti=off, as Linux runs on a CPU that does not need
# page-table isolation (RDCL_NO: the kernel and the traced process share one CR3, so only EPT's
# mode-based execute control lets the kernel run free in a user-only window); bochs:linux keeps KPTI
TEST_NOPTI_CFG := $(BUILD)/img/test-linux-nopti.cfg
$(TEST_NOPTI_CFG): $(TEST_CFG)
	$(Q)sed 's/^cmdline = .*/& pti=off/' $< >$@.tmp && grep -q '^cmdline = .* pti=off$$' $@.tmp && mv $@.tmp $@

$(TEST_IMG): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(TEST_NOPTI_CFG) $(GUEST_KERNEL) \
             $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=$(USB_CYL) \
	    tools/mkimage.sh $@ $(TEST_NOPTI_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)

# bochs:linux's image: the same with sw_trace = tf (the trap-flag tracer, which sw_trace = auto
# picks only where MTF is not delivered)
TEST_TF_CFG := $(BUILD)/img/test-linux-tf.cfg
TEST_TF_IMG := $(BUILD)/ptvisor-test-linux-tf.img
$(TEST_TF_CFG): $(TEST_CFG)
	$(Q)sed 's/^sw_trace = .*/sw_trace = tf/' $< >$@.tmp && grep -qx 'sw_trace = tf' $@.tmp && mv $@.tmp $@

$(TEST_TF_IMG): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(TEST_TF_CFG) \
                $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=$(USB_CYL) \
	    tools/mkimage.sh $@ $(TEST_TF_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)

$(RUN_IMG): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(RUN_CFG) $(GUEST_KERNEL) \
            $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=$(USB_CYL) \
	    tools/mkimage.sh $@ $(RUN_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)

usb: $(USB_IMG)
	@echo "USB image: $(USB_IMG) ($$(du -h --apparent-size $(USB_IMG) | cut -f1))"
	@echo "Write it to a USB stick (all data on the stick is lost; check the device with lsblk):"
	@echo "  sudo dd if=$(USB_IMG) of=/dev/sdX bs=4M conv=fsync"

# GUEST_CMD / GUEST_FILES given: the user's own command instead of the demo (mk/91-user.mk)
ifeq ($(strip $(GUEST_CMD)$(GUEST_FILES)),)
run: $(RUN_IMG) $(PTT_BIN)
	$(Q)PTT=$(PTT_BIN) WORK_ELF=$(GUEST_WORK) tools/run.sh $(RUN_IMG) auto
else
run: user-run
endif

run-kvm: $(RUN_IMG) $(PTT_BIN)
	$(Q)PTT=$(PTT_BIN) WORK_ELF=$(GUEST_WORK) tools/run.sh $(RUN_IMG) kvm

# The steps record FAIL (not a make error) when the image cannot be built yet.
# Each boots the run image with ptv.panic=1: the guest traces a workload from inside, the VMM
# dumps it, and the guest ends in a kernel panic the VMM sends its crash dump for.
# bochs:linux: 2 CPUs (OVMF and Linux restart the AP under the VMM: the SMP checks), sw_trace = tf.
# bochs:linux-mtf: 2 CPUs, sw_trace = auto, which picks MTF steps on Bochs 3.0 (its MTF exit after
# an injected event needs tools/bochs-patches/0001: without it the 2-CPU boot hangs).  BOCHS_IPS: Bochs'
# clock runs at 500 M emulated instructions a second there, not 50 M, because the MTF tracer
# steps the handlers of interrupts taken in a window (the trap flag leaves them unstepped), one
# VM exit (~2,600 guest ticks) per instruction: at 50 M a 4 ms tick is 200 k instructions, less
# than a stepped timer interrupt costs, and the guest livelocks in it (docs/ARCHITECTURE.md §5).
LINUX_STEP_ENV = PTT=$(PTT_BIN) WORK_ELF=$(GUEST_WORK) EXACT_ELF=$(GUEST_EXACT) \
    NATIVE_STEPS=$(NATIVE_STEPS) TRACE_BOOT=$(RUN_TRACE_BOOT) PERF=perf EXPECT_PANIC=1
test-bochs-linux:
	@mkdir -p $(BUILD)
	$(Q)$(MAKE) --no-print-directory $(TEST_TF_IMG) $(PTT_BIN) $(NATIVE_STEPS) >$(BUILD)/usb-image.log 2>&1 || \
	    { tail -n 5 $(BUILD)/usb-image.log; rm -f $(TEST_TF_IMG); }
	$(Q)$(LINUX_STEP_ENV) CPUS=2 tests/step.sh $(BUILD)/results bochs:linux \
	    tests/system/bochs-linux.sh $(TEST_TF_IMG) $(BUILD)/test/bochs-linux

test-bochs-linux-mtf:
	@mkdir -p $(BUILD)
	$(Q)$(MAKE) --no-print-directory $(TEST_IMG) $(PTT_BIN) $(NATIVE_STEPS) >$(BUILD)/usb-image-mtf.log 2>&1 || \
	    { tail -n 5 $(BUILD)/usb-image-mtf.log; rm -f $(TEST_IMG); }
	$(Q)$(LINUX_STEP_ENV) CPUS=2 BOCHS_IPS=500000000 STEPS_MTF=1 tests/step.sh $(BUILD)/results bochs:linux-mtf \
	    tests/system/bochs-linux.sh $(TEST_IMG) $(BUILD)/test/bochs-linux-mtf

.PHONY: run-image
run-image: $(RUN_IMG)

ALL_TARGETS  += usb-image run-image
TEST_TARGETS += test-bochs-linux test-bochs-linux-mtf
