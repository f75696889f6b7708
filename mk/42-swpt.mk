# The software PT packet generator: vmm/trace/swpt.c is pure logic, in vmm.elf (with
# vmm/pt/pt_pkt.c, its packet encoder) and unchanged into the host tests and the fuzzer below, which
# decode everything it writes with libipt (tests/fakes/swpt_dec.c).

SWPT_SRCS := vmm/trace/swpt.c vmm/trace/treq.c vmm/pt/pt_pkt.c tests/fakes/swpt_dec.c

HOST_TESTS += test_swpt
test_swpt_SRCS := tests/unit/trace/test_swpt.c $(SWPT_SRCS)
test_swpt_LDLIBS := -lipt

# The trace VMCALLs' rules: the CPL 3 rule (a process's own window, its owner only,
# figures of its own stream) and TRACE_READ's destination resolved once
HOST_TESTS += test_treq
test_treq_SRCS := tests/unit/trace/test_treq.c vmm/trace/treq.c vmm/trace/swpt.c vmm/pt/pt_pkt.c

FUZZERS += fuzz_swpt
fuzz_swpt_SRCS := tests/fuzz/fuzz_swpt.c $(SWPT_SRCS) vmm/trace/dump.c vmm/trace/frame.c \
                  vmm/trace/lz4w.c
fuzz_swpt_LDLIBS := -lipt

# The ptrace oracle: real programs single-stepped, classified by vmm/trace/x86_class.c, fed to
# the generator, decoded by libipt (SKIP where ptrace is not permitted).  swpt_sig is its own
# tracee with signal handlers, built without sanitizers like any program under test.
HOST_TESTS += test_swpt_ptrace
test_swpt_ptrace_SRCS := tests/unit/trace/test_swpt_ptrace.c tests/fakes/ptrace_probe.c vmm/trace/x86_class.c \
                         $(SWPT_SRCS)
test_swpt_ptrace_LDLIBS := -lipt
$(BUILD)/host/test_swpt_ptrace: $(BUILD)/host/swpt_sig
$(BUILD)/host/swpt_sig: tests/tools/swpt_sig.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(TRACEE_CFLAGS) -o $@ $<
