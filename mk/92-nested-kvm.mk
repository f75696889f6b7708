# Nested QEMU/KVM, really run (tests/system/nested-kvm.sh): Bochs runs Debian's Linux with KVM
# (L1), which runs `make run-kvm`'s QEMU command line (tests/system/qemu.sh, ACCEL=kvm
# CPU=host) on ptvisor's image, whose Linux guest runs bochs:linux's /init.
#
#   make nested-kvm-image   build/nested/l1.img (+ .cyl): the L1 disk Bochs boots
#   nested:kvm (make test)  the whole chain, and bochs:linux's checks on what it printed
#
# ptvisor's image there is bochs:linux's (ptv.panic=1: the guest ends in a kernel panic the VMM
# dumps) with less to do (NESTED_CFG), on 40 cylinders (it travels in L1's initramfs).

NESTED_OUT  := $(BUILD)/nested
NESTED_L1   := $(NESTED_OUT)/l1.img
NESTED_PTV  := $(NESTED_OUT)/ptvisor.img
# L1's timeout for the nested QEMU, on L1's clock (Bochs' 50 M ips)
NESTED_QEMU_TIMEOUT ?= 1200

# bochs:linux's config without the boot trace, ptt-work (ptv.work=0: 75,000 steps, each a nested VM
# exit) and most of the CPUID loop: every VM exit of the guest is a nested one there, every byte
# ptvisor sends a trip to QEMU.  The windows that step run (trace-user's, ptvisor-ctl trace of
# ptt-exact, the ptrace steps): outside the traced process the vCPU runs free
NESTED_CFG  := $(NESTED_OUT)/ptvisor.cfg
$(NESTED_CFG): $(TEST_CFG)
	@mkdir -p $(@D)
	$(Q)sed -e 's/^trace_boot = .*/trace_boot = 0/' -e 's/^dump_on = .*/dump_on = crash,vmcall/' \
	    -e 's/^cmdline = .*/& ptv.work=0 ptv.cpuid_loop=1000/' $< >$@.tmp
	$(Q)grep -qx 'trace_boot = 0' $@.tmp && grep -q '^cmdline = .* ptv.work=0 ptv.cpuid_loop=1000$$' $@.tmp
	$(Q)mv $@.tmp $@

$(NESTED_PTV): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(NESTED_CFG) $(GUEST_KERNEL) \
               $(GUEST_INITRD)
	@mkdir -p $(@D)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=40 \
	    tools/mkimage.sh $@ $(NESTED_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)

# ptvisor with the adversarial suite as its guest (tests/guest/attack*.c, attack.cfg), run first
# in the same L1 boot with QEMU's intel-iommu and edu (tests/system/nested/l1-init): the isolation
# attacks under KVM's VMX, and DMA onto the VMM under the VMM.  NESTED_ATK_SKIP: groups
# left out there (attack.efi's atk.no-<group> options; tests/system/nested-kvm.sh says why):
# trace-storm (its 20 TRACE_DUMPs over the nested console would take many minutes) and ia32e
# (KVM's MOV CR0 emulation lacks the 16-bit TSS rule: the guest triple-faults, the suite ends)
NESTED_ATK     := $(NESTED_OUT)/attack.img
NESTED_ATK_CFG := $(NESTED_OUT)/attack.cfg
NESTED_ATK_SKIP ?= trace-storm ia32e
.PHONY: FORCE
FORCE:
# (remade whenever NESTED_ATK_SKIP changes what it holds)
$(NESTED_ATK_CFG): tests/guest/attack.cfg FORCE
	@mkdir -p $(@D)
	$(Q)sed -e 's/^cmdline = .*/& $(foreach g,$(NESTED_ATK_SKIP),atk.no-$(g))/' -e 's/ *$$//' $< >$@.tmp
	$(Q)grep -q '^cmdline = attack' $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(NESTED_ATK): tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(NESTED_ATK_CFG) \
               $(BUILD)/tests/guest/attack.efi
	@mkdir -p $(@D)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=40 tools/mkimage.sh $@ $(NESTED_ATK_CFG) $(BUILD)/tests/guest/attack.efi -

# L1's kernel is the guest's (fetch-kernel.sh again: it reuses the .deb it downloaded, and the
# .deb also gives KVM's modules; KERNEL_DEB=/path/x.deb as for the guest)
$(NESTED_L1): tests/system/nested/mkl1.sh tests/system/nested/l1-init tests/system/qemu.sh \
              tests/system/emu-slot.sh guest/fetch-kernel.sh $(NESTED_PTV) $(NESTED_ATK)
	@mkdir -p $(@D)
	$(Q)guest/fetch-kernel.sh $(GUEST_OUT)/dl $(NESTED_OUT)/vmlinuz.efi >/dev/null
	$(Q)deb=$${KERNEL_DEB:-$$(ls $(GUEST_OUT)/dl/linux-image-*_amd64.deb | tail -n 1)}; \
	    tests/system/nested/mkl1.sh $@ "$$deb" $(NESTED_OUT)/vmlinuz.efi $(NESTED_PTV) $(NESTED_QEMU_TIMEOUT) $(NESTED_ATK)

.PHONY: nested-kvm-image test-nested-kvm
nested-kvm-image: $(NESTED_L1)

test-nested-kvm:
	@mkdir -p $(BUILD)
	$(Q)$(MAKE) --no-print-directory $(NESTED_L1) $(PTT_BIN) $(NATIVE_STEPS) >$(BUILD)/nested-image.log 2>&1 || \
	    { tail -n 5 $(BUILD)/nested-image.log; rm -f $(NESTED_L1); }
	$(Q)PTT=$(PTT_BIN) EXACT_ELF=$(GUEST_EXACT) NATIVE_STEPS=$(NATIVE_STEPS) EXPECT_PANIC=1 \
	    tests/step.sh $(BUILD)/results nested:kvm tests/system/nested-kvm.sh $(NESTED_L1) $(BUILD)/test/nested-kvm

TEST_TARGETS += test-nested-kvm

# make bench-nested (tests/system/nested-bench.sh): nested:kvm's vehicle with two images in L1,
# ptvisor's and the same with `vmm = off` (the loader boots Linux directly), each booted by
# QEMU/KVM to the guest's marker: guest TSC ratio and VM exits L1's KVM handled per exit of
# ptvisor's guest (tests/system/nested/l1-bench-init)
NESTED_BENCH := $(BUILD)/nested-bench
$(NESTED_BENCH)/bare.cfg: $(NESTED_CFG)
	@mkdir -p $(@D)
	$(Q)sed 's/^vmm = .*/vmm = off/' $< >$@.tmp && grep -qx 'vmm = off' $@.tmp && mv $@.tmp $@
$(NESTED_BENCH)/bare.img: tools/mkimage.sh tools/mkesp.sh $(BOOT_EFI) $(VMM_ELF) $(NESTED_BENCH)/bare.cfg \
                          $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) CYL=40 \
	    tools/mkimage.sh $@ $(NESTED_BENCH)/bare.cfg $(GUEST_KERNEL) $(GUEST_INITRD)
$(NESTED_BENCH)/l1.img: tests/system/nested/mkl1.sh tests/system/nested/l1-bench-init tests/system/qemu.sh \
                        tests/system/emu-slot.sh guest/fetch-kernel.sh $(NESTED_PTV) $(NESTED_BENCH)/bare.img
	$(Q)guest/fetch-kernel.sh $(GUEST_OUT)/dl $(NESTED_OUT)/vmlinuz.efi >/dev/null
	$(Q)deb=$${KERNEL_DEB:-$$(ls $(GUEST_OUT)/dl/linux-image-*_amd64.deb | tail -n 1)}; \
	    L1_INIT=tests/system/nested/l1-bench-init L1_BARE=$(NESTED_BENCH)/bare.img \
	    tests/system/nested/mkl1.sh $@ "$$deb" $(NESTED_OUT)/vmlinuz.efi $(NESTED_PTV) $(NESTED_QEMU_TIMEOUT)

.PHONY: bench-nested
bench-nested: $(NESTED_BENCH)/l1.img
	$(Q)tests/system/nested-bench.sh $< $(NESTED_BENCH) >$(BUILD)/bench-nested.log 2>&1 || true
	$(Q)sed -n '/^== /,$$p' $(BUILD)/bench-nested.log
BENCH_TARGETS += bench-nested
