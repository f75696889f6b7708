# ptvisor-trace: the host tool that reads the VMM's trace dumps (tools/ptvisor-trace,
# one file per command; *.c so that every command's file is in).  Built twice from the same
# sources: $(BUILD)/tools/ptvisor-trace for users (-O2, no sanitizers: `make`, `make install`)
# and $(BUILD)/host/ptvisor-trace-san under ASan/UBSan for the tests.

PTT_SRCS    := $(sort $(wildcard tools/ptvisor-trace/*.c))
PTT_LIB_SRCS := $(filter-out tools/ptvisor-trace/main.c,$(PTT_SRCS))
PTT_LDLIBS  := -lipt -lelf -llz4
PTT_CFLAGS  := $(HOST_TOOL_CFLAGS) -Itools/ptvisor-trace -MMD -MP
PTT_BIN     := $(BUILD)/tools/ptvisor-trace
PREFIX      ?= /usr/local

$(PTT_BIN): $(PTT_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(PTT_CFLAGS) -MF $@.d -o $@ $(PTT_SRCS) $(PTT_LDLIBS)
-include $(PTT_BIN).d

$(BUILD)/host/ptvisor-trace-san: $(PTT_SRCS)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_CFLAGS) -Itools/ptvisor-trace -MF $@.d -o $@ $(PTT_SRCS) $(PTT_LDLIBS)
-include $(BUILD)/host/ptvisor-trace-san.d

ALL_TARGETS += $(PTT_BIN)

.PHONY: ptvisor-trace install
ptvisor-trace: $(PTT_BIN)
install: $(PTT_BIN)
	install -D -m 755 $(PTT_BIN) $(DESTDIR)$(PREFIX)/bin/ptvisor-trace

# The test input without a VMM: tests/tools/mkdump.c single-steps a real program (ptt_work,
# static, no PIE: its own ELF is the -e file) with ptrace, classifies each step with the VMM's
# vmm/trace/x86_class.c, feeds vmm/trace/swpt.c as the VMM's software tracer does, and writes
# a dump directory (cpu0.pt, code snapshots, metadata) plus the ground truth (truth.txt), and
# with --log the serial log of the same dump from the VMM's frame encoder (vmm/trace/frame.c).
# test_ptt runs the sanitized tool on it (SKIP where ptrace is refused).
HOST_TESTS += test_ptt
test_ptt_SRCS := tests/unit/tools/test_ptt.c
test_ptt_LDLIBS := -lipt
$(BUILD)/host/test_ptt: $(BUILD)/host/ptvisor-trace-san $(BUILD)/host/ptt_mkdump $(BUILD)/host/ptt_work

$(BUILD)/host/ptt_mkdump: tests/tools/mkdump.c vmm/trace/x86_class.c vmm/trace/swpt.c vmm/pt/pt_pkt.c \
                          vmm/trace/frame.c vmm/trace/lz4w.c vmm/trace/dump.c guest/ptv_note.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_CFLAGS) -Iguest -MF $@.d -o $@ $^
-include $(BUILD)/host/ptt_mkdump.d

$(BUILD)/host/ptt_work: tests/tools/ptt_work.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(PTT_WORK_CFLAGS) -o $@ $<

# host:readme-trace: README's "On the host" commands run as they stand (tests/system/ptt-readme.sh),
# on a serial log of three dumps with the guest's notes (ptt_mkdump, and the guest's own
# ptvisor-ctl writing its kallsyms), the sanitized tool as `ptvisor-trace`
.PHONY: test-ptt-readme
test-ptt-readme: $(BUILD)/host/ptvisor-trace-san $(BUILD)/host/ptt_mkdump $(BUILD)/host/ptt_work \
                 $(GUEST_CTL)
	$(Q)tests/step.sh $(BUILD)/results host:readme-trace tests/system/ptt-readme.sh README.md \
	    $(BUILD)/host/ptvisor-trace-san $(BUILD)/host/ptt_mkdump $(BUILD)/host/ptt_work $(GUEST_CTL)
TEST_TARGETS += test-ptt-readme

FUZZERS += fuzz_ptt_dump
fuzz_ptt_dump_SRCS := tests/fuzz/fuzz_ptt_dump.c $(PTT_LIB_SRCS)
fuzz_ptt_dump_CFLAGS := -Itools/ptvisor-trace
fuzz_ptt_dump_LDLIBS := $(PTT_LDLIBS)
