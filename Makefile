# ptvisor — top-level Makefile.
#
#   make            build loader, vmm.elf, guest image, ESP image
#   make run        boot the guest under the VMM in the best vehicle available
#   make test       the whole test ladder (host unit tests, fuzz smoke, QEMU, Bochs)
#   make bench      benchmarks that print figures
#   make fuzz       long fuzzing runs (FUZZ_SECONDS per fuzzer)
#   make usb        dd-able USB image: build/ptvisor-usb.img
#
# Each area keeps its rules in mk/<area>.mk; this file only wires them.

BUILD   ?= build
V       ?= 0
Q       := $(if $(filter 1,$(V)),,@)

.DEFAULT_GOAL := all
.PHONY: all run run-kvm test bench fuzz usb clean deps format

ALL_TARGETS   :=
TEST_TARGETS  :=
BENCH_TARGETS :=
FUZZ_TARGETS  :=

# Every goal but clean/format/deps first makes sure the Debian packages are there:
# installed when root, else the exact apt-get line and a stop (tools/deps.sh).
ifeq ($(PTV_DEPS_CHECKED),)
ifneq ($(filter-out clean format deps,$(or $(MAKECMDGOALS),all)),)
DEPS_STATUS := $(shell tools/deps.sh check-or-install 1>&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error missing Debian packages: run the apt-get line above as root)
endif
endif
export PTV_DEPS_CHECKED := 1
endif

include $(sort $(wildcard mk/*.mk))

all: $(ALL_TARGETS)

# Run every test layer, keep going past failures, then print one summary line.
test:
	$(Q)rm -rf $(BUILD)/results && mkdir -p $(BUILD)/results
	$(Q)$(MAKE) --no-print-directory -k all || echo "test: some artifacts did not build (the steps that need them will fail)"
	$(Q)$(MAKE) --no-print-directory -k $(TEST_TARGETS) || true
	$(Q)tests/summary.sh $(BUILD)/results

bench:
	$(Q)$(MAKE) --no-print-directory $(BENCH_TARGETS)

fuzz:
	$(Q)$(MAKE) --no-print-directory $(FUZZ_TARGETS)

deps:
	$(Q)tools/deps.sh check-or-install

format:
	$(Q)git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
