# ptvisor-trace perf: the dump as a perf.data that Debian's perf decodes with its own
# Intel PT decoder.  tools/ptvisor-trace/perfdata.c writes the format (and the code ELF files),
# perfdata_read.c reads it back for the checks; perf.c the plan from a dump and the command;
# all built into the tool by mk/46's wildcard.
#
# test_perfdata single-steps real programs with ptrace through the VMM's classifier and software
# PT generator, writes dump directories, exports them with the sanitized tool and runs
# `perf script` on them with an empty HOME: the instruction sequence, the taken branches and
# the symbols (-e libc@BASE, -k) must be the stepped ones; `ptvisor-trace decode` on the same
# dump must agree.  It takes the tool's path, so it is its own step, not a HOST_TESTS entry;
# SKIP when perf is not installed or ptrace is refused.  Prints "BENCH perf-script-decode".

test_perfdata_SRCS   := tests/unit/tools/test_perfdata.c tests/fakes/ptrace_probe.c tools/ptvisor-trace/perfdata.c \
                        tools/ptvisor-trace/perfdata_read.c \
                        vmm/trace/swpt.c vmm/pt/pt_pkt.c vmm/trace/x86_class.c
test_perfdata_CFLAGS := -Itools/ptvisor-trace
$(eval $(call HOST_TEST_template,test_perfdata))

.PHONY: test-perf-script
test-perf-script: $(BUILD)/host/test_perfdata $(BUILD)/host/ptvisor-trace-san
	$(Q)tests/step.sh $(BUILD)/results unit:test_perfdata $(BUILD)/host/test_perfdata \
	    $(BUILD)/host/ptvisor-trace-san
TEST_TARGETS += test-perf-script

# fuzz_perfdata: dump contents -> plan (perf.c) -> code ELF files and perf.data (perfdata.c),
# checked against a reference of the planning rules and by the format's reader
FUZZERS += fuzz_perfdata
fuzz_perfdata_SRCS   := tests/fuzz/fuzz_perfdata.c $(PTT_LIB_SRCS)
fuzz_perfdata_CFLAGS := -Itools/ptvisor-trace
fuzz_perfdata_LDLIBS := $(PTT_LDLIBS)

# bench-decode: ptvisor-trace decode against perf script on the same trace (a ptrace-stepped real
# program), instructions per second of each (tests/system/bench-decode.sh)
.PHONY: bench-decode
bench-decode: $(PTT_BIN) $(BUILD)/host/ptt_mkdump
	$(Q)tests/system/bench-decode.sh $(PTT_BIN) $(BUILD)/host/ptt_mkdump
BENCH_TARGETS += bench-decode
