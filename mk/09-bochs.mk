# Bochs 3.0 built from Debian's own source package (tools/bochs-build.sh): fetched through the
# system's apt mirror, checked against trixie's signed Sources index, built once into a cache
# (~/.cache/ptvisor, keyed by version, tarball checksums and configure line). Every Bochs step
# runs it (tests/system/bochs.sh); BOCHS=2.7 runs Debian 12's own Bochs instead, for comparison.
#   make bochs   build it (or say where the cached one is)
.PHONY: bochs test-bochs-build
bochs:
	$(Q)tools/bochs-build.sh

# first among the Bochs steps: says which Bochs runs, and how long its build took
test-bochs-build:
	$(Q)tests/step.sh $(BUILD)/results bochs:build tools/bochs-build.sh --report

TEST_TARGETS += test-bochs-build
