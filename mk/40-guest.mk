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
GUEST_CFLAGS := -std=gnu11 -O2 -static -s $(WARN) -Iinclude

.PHONY: guest-image
guest-image: $(GUEST_KERNEL) $(GUEST_INITRD)

$(GUEST_KERNEL): guest/fetch-kernel.sh
	@mkdir -p $(@D)
	$(Q)guest/fetch-kernel.sh $(GUEST_OUT)/dl $@

$(GUEST_PROBE): guest/ptv-probe.c include/ptv/vmcall.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(GUEST_CFLAGS) -o $@ guest/ptv-probe.c

$(GUEST_INITRD): guest/mkinitrd.sh guest/init $(GUEST_PROBE)
	@mkdir -p $(@D)
	$(Q)guest/mkinitrd.sh $@ guest/init $(GUEST_PROBE)

ALL_TARGETS += guest-image

# The guest image on its own: ptv-probe on the host, then kernel + initramfs in
# QEMU TCG started from the UEFI shell (no loader, no VMM).
.PHONY: test-guest
test-guest: $(GUEST_KERNEL) $(GUEST_INITRD) $(GUEST_PROBE)
	$(Q)tests/step.sh $(BUILD)/results guest:probe-host guest/test-probe-host.sh $(GUEST_PROBE)
	$(Q)tests/step.sh $(BUILD)/results guest:qemu-direct guest/test-direct.sh $(GUEST_KERNEL) \
	    $(GUEST_INITRD) $(BUILD)/test/guest-direct

TEST_TARGETS += test-guest
