# Benchmarks (`make bench`): figures printed next to their goals, never asserted.
#
#   bench-linux: Linux guest in Bochs, vmm vs bare (`vmm = off`), see tools/bench-linux.sh

.PHONY: bench-linux
bench-linux: $(BOOT_EFI) $(VMM_ELF) $(IMG_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) GUEST_KERNEL=$(GUEST_KERNEL) GUEST_INITRD=$(GUEST_INITRD) \
	    tools/bench-linux.sh $(IMG_CFG) $(BUILD)/bench/linux

BENCH_TARGETS += bench-linux
