# The VMM's VT-d code against QEMU's intel-iommu and edu device: vtd-dma.efi links
# vmm/iommu/{iommu_boot,dmar,vtd_tables,vtd}.c and boot/memmap.c unchanged (GNU-EFI flags) and
# is booted bare in QEMU TCG
# (tests/system/qemu-vtd.sh).  No VMX needed.

VTD_DMA_EFI := $(GUEST_OUT)/vtd-dma.efi
vtd-dma_GUEST_OBJS := $(GUEST_OUT)/vtd_dma.o \
                      $(patsubst vmm/iommu/%.c,$(GUEST_OUT)/iommu_%.o,$(IOMMU_PURE_SRCS) vmm/iommu/iommu_boot.c) \
                      $(GUEST_OUT)/boot_memmap.o $(GUEST_OUT)/boot_fmt.o $(GUEST_OUT)/boot_acpi_madt.o \
                      $(GUEST_OUT)/lib_string.o

# the loader's map builder, as the loader compiles it (mk/10-boot.mk)
$(GUEST_OUT)/boot_%.o: boot/%.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -c -o $@ $<

$(GUEST_OUT)/iommu_%.o: vmm/iommu/%.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -c -o $@ $<

# memcpy/memset also come from libefi: ours are weak (as in the loader, mk/10-boot.mk)
$(GUEST_OUT)/lib_string.o: vmm/lib/string.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_VMM_CFLAGS) -c -o $@ $<
	$(Q)objcopy --weaken $@

ALL_TARGETS  += $(VTD_DMA_EFI)
TEST_TARGETS += test-qemu-vtd

# qemu:vtd-linux: then Linux with the DMAR renamed as the loader renames it, the unit still
# translating (SKIP without the guest image; built here when it can be)
.PHONY: test-qemu-vtd
test-qemu-vtd: $(VTD_DMA_EFI) tests/system/qemu-vtd.sh tests/system/qemu.sh
	$(Q)tests/step.sh $(BUILD)/results qemu:vtd-dma tests/system/qemu-vtd.sh $(BUILD) dma
	$(Q)$(MAKE) --no-print-directory $(BUILD)/guest/vmlinuz.efi $(BUILD)/guest/initrd.img \
	    >$(BUILD)/results/vtd-linux-build.log 2>&1 || true
	$(Q)tests/step.sh $(BUILD)/results qemu:vtd-linux tests/system/qemu-vtd.sh $(BUILD) linux
.PRECIOUS: $(GUEST_OUT)/iommu_%.o $(GUEST_OUT)/boot_%.o
