# ptvisor-trace (issue 10): the host tool that reads the VMM's trace dumps (tools/ptvisor-trace,
# one file per command; *.c so that every command's file is in).  Built twice from the same
# sources: $(BUILD)/tools/ptvisor-trace for users (-O2, no sanitizers: `make`, `make install`)
# and $(BUILD)/host/ptvisor-trace-san under ASan/UBSan for the tests.

PTT_SRCS    := $(sort $(wildcard tools/ptvisor-trace/*.c))
PTT_LIB_SRCS := $(filter-out tools/ptvisor-trace/main.c,$(PTT_SRCS))
PTT_LDLIBS  := -lipt -lelf -llz4
PTT_CFLAGS  := -std=gnu11 -O2 -g $(WARN) -Iinclude -Ivmm -Itools/ptvisor-trace -MMD -MP
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
