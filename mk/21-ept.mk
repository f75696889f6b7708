# EPT (vmm/ept/): table builder, MTRR memory types, identity map.  Pure logic: the same .c files are
# in vmm.elf (mk/80-vmm.mk: every file under vmm/) and in the host tests and the fuzzer below.

HOST_TESTS += test_ept
test_ept_SRCS := tests/unit/ept/test_ept.c tests/fakes/ept_fakemem.c vmm/ept/ept.c

HOST_TESTS += test_mtrr
test_mtrr_SRCS := tests/unit/ept/test_mtrr.c vmm/ept/mtrr.c

HOST_TESTS += test_ept_identity
test_ept_identity_SRCS := tests/unit/ept/test_ept_identity.c tests/fakes/ept_fakemem.c \
                          vmm/ept/ept.c vmm/ept/mtrr.c vmm/ept/ept_identity.c

# the guest's movable APIC window: N moves hold a bounded number of table pages
HOST_TESTS += test_ept_window
test_ept_window_SRCS := tests/unit/ept/test_ept_window.c tests/fakes/ept_fakemem.c vmm/ept/ept.c \
                        vmm/ept/mtrr.c vmm/ept/ept_ondemand.c vmm/ept/ept_window.c

HOST_TESTS += test_ept_ondemand
test_ept_ondemand_SRCS := tests/unit/ept/test_ept_ondemand.c tests/fakes/ept_fakemem.c \
                          vmm/ept/ept.c vmm/ept/mtrr.c vmm/ept/ept_ondemand.c

FUZZERS += fuzz_ept
fuzz_ept_SRCS := tests/fuzz/fuzz_ept.c tests/fakes/ept_fakemem.c vmm/ept/ept.c
# comparison tracing costs 5x in the 512-entry table loops and finds nothing the
# edge coverage does not: the input is a list of small operations, not a parser
fuzz_ept_CFLAGS := -fno-sanitize-coverage=trace-cmp


# the figure: table pages of the identity map of a small machine (printed by a host test)
.PHONY: bench-ept
bench-ept: $(BUILD)/host/test_ept_identity
	$(Q)$(BUILD)/host/test_ept_identity | grep '^BENCH'
BENCH_TARGETS += bench-ept

# the figure: EPT pool pages used after 100,000 reads above RAM (bounded by EPT_OD_MAX_TABLES)
.PHONY: bench-ept-ondemand
bench-ept-ondemand: $(BUILD)/host/test_ept_ondemand
	$(Q)$(BUILD)/host/test_ept_ondemand | grep '^BENCH'
BENCH_TARGETS += bench-ept-ondemand

# the figure: EPT pool pages used after 5,000 xAPIC window moves (bounded, ept_window.h)
.PHONY: bench-ept-window
bench-ept-window: $(BUILD)/host/test_ept_window
	$(Q)$(BUILD)/host/test_ept_window | grep '^BENCH'
BENCH_TARGETS += bench-ept-window
