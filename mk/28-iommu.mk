# DMA isolation with VT-d (vmm/iommu/): DMAR parsing, the remapping tables, the register
# sequence.  Pure logic: the same .c files go into the VMM (IOMMU_SRCS, with the VMM's shim
# iommu_vmm.c), the host tests, the fuzzer and the QEMU test program (tests/system/vtd-qemu/).
# Named 28- so IOMMU_SRCS is known in 80-vmm.mk.

IOMMU_PURE_SRCS := vmm/iommu/dmar.c vmm/iommu/vtd_tables.c vmm/iommu/vtd.c
IOMMU_SRCS      := $(IOMMU_PURE_SRCS) vmm/iommu/iommu_vmm.c

HOST_TESTS += test_dmar test_vtd_tables test_vtd
test_dmar_SRCS       := tests/unit/test_dmar.c vmm/iommu/dmar.c vmm/lib/fmt.c
test_vtd_tables_SRCS := tests/unit/test_vtd_tables.c vmm/iommu/vtd_tables.c vmm/lib/fmt.c \
                        tests/unit/test_ept_fakemem.c vmm/ept/ept.c vmm/ept/mtrr.c \
                        vmm/ept/ept_identity.c
test_vtd_SRCS        := tests/unit/test_vtd.c vmm/iommu/vtd.c vmm/lib/fmt.c

FUZZERS += fuzz_dmar
fuzz_dmar_SRCS := tests/fuzz/fuzz_dmar.c vmm/iommu/dmar.c vmm/iommu/vtd_tables.c vmm/lib/fmt.c
