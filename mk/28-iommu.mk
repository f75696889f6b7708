# DMA isolation with VT-d (vmm/iommu/): DMAR parsing, the remapping tables, the register
# sequence.  Pure logic: the same .c files are in vmm.elf (with the VMM's shim
# vmm/iommu/shim/iommu_vmm.c; iommu_boot.c is its pure part), the host tests, the fuzzer and the
# QEMU test program (tests/guest/vtd_dma.c, mk/51-vtd-qemu.mk, which reads IOMMU_PURE_SRCS).

IOMMU_PURE_SRCS := vmm/iommu/dmar.c vmm/iommu/vtd_tables.c vmm/iommu/vtd.c

HOST_TESTS += test_dmar test_vtd_tables test_vtd test_iommu_boot
test_dmar_SRCS       := tests/unit/iommu/test_dmar.c vmm/iommu/dmar.c vmm/lib/fmt.c
test_vtd_tables_SRCS := tests/unit/iommu/test_vtd_tables.c vmm/iommu/vtd_tables.c vmm/lib/fmt.c \
                        tests/fakes/ept_fakemem.c vmm/ept/ept.c vmm/ept/mtrr.c \
                        vmm/ept/ept_identity.c
test_vtd_SRCS        := tests/unit/iommu/test_vtd.c vmm/iommu/vtd.c vmm/lib/fmt.c
test_iommu_boot_SRCS := tests/unit/iommu/test_iommu_boot.c vmm/iommu/iommu_boot.c $(IOMMU_PURE_SRCS) \
                        vmm/lib/fmt.c

FUZZERS += fuzz_dmar
fuzz_dmar_SRCS := tests/fuzz/fuzz_dmar.c vmm/iommu/dmar.c vmm/iommu/vtd_tables.c vmm/lib/fmt.c

# the figures (make bench): boot cost of DMA isolation in host instructions (callgrind, inclusive,
# per layout: iommu_setup()'s pure steps at -O2 as in the VMM; skipped without valgrind) and the
# remapping tables' pages for 512 MiB and 4 GiB of RAM (bench_vtd, test_vtd_tables)
VTD_BENCH := $(BUILD)/host/bench_vtd
$(VTD_BENCH): tests/bench/bench_vtd.c $(IOMMU_PURE_SRCS) vmm/iommu/iommu_boot.c vmm/lib/fmt.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ $^

.PHONY: bench-vtd
bench-vtd: $(VTD_BENCH) $(BUILD)/host/test_vtd_tables
	$(Q)$(VTD_BENCH) || echo "bench-vtd: the boot steps failed"
	$(Q)if command -v valgrind >/dev/null; then d=$(BUILD)/bench-vtd; mkdir -p $$d; \
	    for f in boot_512m boot_4g boot_4g_4k; do \
	        valgrind --tool=callgrind --callgrind-out-file=$$d/cg.$$f --collect-atstart=no \
	            --toggle-collect=$$f $(VTD_BENCH) >/dev/null 2>&1; \
	        echo "BENCH vtd-boot $$f: $$(awk '/^summary:/ {print $$2}' $$d/cg.$$f) host instructions"; \
	    done; else echo "bench-vtd: instruction counts skipped: no valgrind"; fi
	$(Q)$(BUILD)/host/test_vtd_tables 2>/dev/null | grep '^BENCH'
BENCH_TARGETS += bench-vtd
