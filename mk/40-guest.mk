# Linux guest image: Debian's EFI-stub kernel + a busybox initramfs with ptv-probe.
#
#   make guest-image   -> build/guest/vmlinuz.efi, build/guest/initrd.img
#
# The kernel is the package linux-image-amd64 depends on, fetched with
# `apt-get download` into build/guest/dl/ (KERNEL_DEB=/path/x.deb to use a local
# .deb instead).  Never installed on the host.

GUEST_OUT    := $(BUILD)/guest
GUEST_KERNEL := $(GUEST_OUT)/vmlinuz.efi
GUEST_INITRD := $(GUEST_OUT)/initrd.img
GUEST_PROBE  := $(GUEST_OUT)/ptv-probe
GUEST_CTL    := $(GUEST_OUT)/ptvisor-ctl
# a traced workload with symbols (tests/tools/ptt_work.c: static, no PIE, not stripped), so
# the host decodes the guest's trace with -e $(GUEST_WORK)
GUEST_WORK   := $(GUEST_OUT)/ptt-work

.PHONY: guest-image
guest-image: $(GUEST_KERNEL) $(GUEST_INITRD)

$(GUEST_KERNEL): guest/fetch-kernel.sh
	@mkdir -p $(@D)
	$(Q)guest/fetch-kernel.sh $(GUEST_OUT)/dl $@

$(GUEST_PROBE): guest/ptv-probe.c include/ptv/vmcall.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(GUEST_CFLAGS) -o $@ guest/ptv-probe.c

# its notes (guest/ptv_note.c) go out through the VMM's own frame encoder and LZ4
GUEST_CTL_SRCS := guest/ptvisor-ctl.c guest/ptv_note.c vmm/trace/frame.c vmm/trace/lz4w.c
$(GUEST_CTL): $(GUEST_CTL_SRCS) include/ptv/vmcall.h guest/ptv_note.h vmm/trace/frame.h vmm/trace/lz4w.h \
              include/ptv/frame.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(GUEST_CFLAGS) -DPTV_HOST -Ivmm -Iguest -o $@ $(GUEST_CTL_SRCS)

$(GUEST_WORK): tests/tools/ptt_work.c include/ptv/vmcall.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(PTT_WORK_CFLAGS) -DPTT_SELF_TRACE -Iinclude -o $@ $<

# `ptvisor-ctl trace`'s workload: the same instructions on every x86-64 Linux and CPU, entry
# to exit (tests/tools/ptt_exact.c: no libc, static, no PIE, not stripped)
GUEST_EXACT  := $(GUEST_OUT)/ptt-exact
$(GUEST_EXACT): tests/tools/ptt_exact.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(PTT_EXACT_CFLAGS) -o $@ $<

# the native side of bochs:linux's trace differential: GUEST_WORK's window stepped here
NATIVE_STEPS := $(BUILD)/host/native_steps
$(NATIVE_STEPS): tests/tools/native_steps.c include/ptv/vmcall.h
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_TOOL_CFLAGS) -o $@ $<

$(GUEST_INITRD): guest/mkinitrd.sh guest/init $(GUEST_PROBE) $(GUEST_CTL) $(GUEST_WORK) $(GUEST_EXACT)
	@mkdir -p $(@D)
	$(Q)EXTRA_BINS="$(GUEST_CTL) $(GUEST_WORK) $(GUEST_EXACT)" guest/mkinitrd.sh $@ guest/init $(GUEST_PROBE)

ALL_TARGETS += guest-image

# The guest image on its own: ptv-probe on the host, then kernel + initramfs in
# QEMU TCG started from the UEFI shell (no loader, no VMM).
.PHONY: test-guest
test-guest: $(GUEST_KERNEL) $(GUEST_INITRD) $(GUEST_PROBE) $(GUEST_CTL)
	$(Q)tests/step.sh $(BUILD)/results guest:probe-host guest/test-probe-host.sh $(GUEST_PROBE)
	$(Q)tests/step.sh $(BUILD)/results guest:ctl-host guest/test-ctl-host.sh $(GUEST_CTL)
	$(Q)tests/step.sh $(BUILD)/results guest:qemu-direct guest/test-direct.sh $(GUEST_KERNEL) \
	    $(GUEST_INITRD) $(BUILD)/test/guest-direct

TEST_TARGETS += test-guest
