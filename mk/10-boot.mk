# boot/: the GNU-EFI loader (build/boot/BOOTX64.EFI), its host tests and fuzzers,
# and the QEMU TCG + OVMF system tests of the loader (test-qemu).

BOOT_PURE_SRCS := boot/acpi_madt.c boot/config.c boot/elf.c boot/memmap.c boot/vmx_verdict.c boot/fmt.c vmm/lib/fmt.c
BOOT_EFI_SRCS  := boot/main.c boot/console.c boot/fs.c boot/cpu.c boot/vmm_load.c boot/chain.c \
                  boot/acpi_fixup.c
BOOT_SRCS      := $(BOOT_EFI_SRCS) $(BOOT_PURE_SRCS) vmm/handoff.c vmm/lib/string.c vmm/serial.c
BOOT_OBJS      := $(patsubst %.c,$(BUILD)/boot/obj/%.o,$(BOOT_SRCS))
BOOT_EFI       := $(BUILD)/boot/BOOTX64.EFI

ALL_TARGETS += $(BOOT_EFI)

# -Ivmm for lib/ptv_string.h and handoff.h.
$(BUILD)/boot/obj/%.o: %.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_CFLAGS) -Ivmm -c $< -o $@

# vmm/lib/string.c gives the loader memcmp/strlen/...; libefi's init.o (pulled in
# by InitializeLib) already defines memcpy and memset, so ours are made weak.
$(BUILD)/boot/obj/vmm/lib/string.o: vmm/lib/string.c
	@mkdir -p $(@D)
	$(Q)$(EFI_CC) $(EFI_CFLAGS) -Ivmm -c $< -o $@
	$(Q)objcopy --weaken $@

$(BUILD)/boot/loader.so: $(BOOT_OBJS)
	$(Q)ld $(EFI_LDFLAGS) $(BOOT_OBJS) -o $@ $(EFI_LIBS)

$(BOOT_EFI): $(BUILD)/boot/loader.so
	$(Q)$(EFI_OBJCOPY) $< $@
	@echo "  EFI     $@"

-include $(BOOT_OBJS:.o=.d)

# --- host tests and fuzzers of the pure parts
HOST_TESTS += test_config test_elf test_handoff test_vmx_verdict test_acpi_madt
test_config_SRCS  := tests/unit/test_config.c boot/config.c boot/fmt.c vmm/lib/fmt.c vmm/handoff.c
test_elf_SRCS     := tests/unit/test_elf.c boot/elf.c boot/fmt.c vmm/lib/fmt.c
test_handoff_SRCS := tests/unit/test_handoff.c vmm/handoff.c boot/memmap.c boot/fmt.c vmm/lib/fmt.c \
                     boot/config.c
test_vmx_verdict_SRCS := tests/unit/test_vmx_verdict.c boot/vmx_verdict.c boot/fmt.c vmm/lib/fmt.c
test_acpi_madt_SRCS   := tests/unit/test_acpi_madt.c boot/acpi_madt.c vmm/lib/fmt.c

FUZZERS += fuzz_config fuzz_elf fuzz_acpi_madt
fuzz_config_SRCS := tests/fuzz/fuzz_config.c boot/config.c boot/fmt.c vmm/lib/fmt.c vmm/handoff.c
fuzz_elf_SRCS    := tests/fuzz/fuzz_elf.c boot/elf.c boot/fmt.c vmm/lib/fmt.c
fuzz_acpi_madt_SRCS := tests/fuzz/fuzz_acpi_madt.c boot/acpi_madt.c vmm/lib/fmt.c

# --- QEMU TCG + OVMF checks of the loader (tests/system/qemu-boot.sh)
QEMU_BOOT_DEPS := $(BOOT_EFI) boot/ptvisor.cfg tests/system/qemu-boot.sh tests/system/qemu.sh

.PHONY: test-qemu
test-qemu: $(QEMU_BOOT_DEPS)
	$(Q)for c in no-vmx bad-config vmm-off no-config no-kernel bad-kernel no-vmm-elf halt; do \
	    tests/step.sh $(BUILD)/results qemu:$$c tests/system/qemu-boot.sh $$c $(BUILD); done

TEST_TARGETS += test-qemu

# --- Bochs (real VMX) checks of the loader's VMM-side paths (tests/system/bochs-loader.sh):
# missing / corrupt vmm.elf, and a tiny relocated PIE "VMM" whose entry returns an error.
.PHONY: test-bochs-loader
test-bochs-loader: $(BOOT_EFI) boot/ptvisor.cfg tests/system/bochs-loader.sh
	$(Q)for c in vmm-missing vmm-corrupt vmm-returns; do \
	    tests/step.sh $(BUILD)/results bochs-loader:$$c tests/system/bochs-loader.sh $$c $(BUILD); done

TEST_TARGETS += test-bochs-loader
