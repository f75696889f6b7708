# The software PT packet generator (issue 9): vmm/trace/swpt.c is pure logic, compiled into the
# VMM by the vmm/trace/*.c wildcard of mk/80-vmm.mk (with vmm/pt/pt_pkt.c, its packet encoder)
# and unchanged into the host tests and the fuzzer below, which decode everything it writes
# with libipt (tests/unit/swpt_dec.c).

SWPT_SRCS := vmm/trace/swpt.c vmm/pt/pt_pkt.c tests/unit/swpt_dec.c

HOST_TESTS += test_swpt
test_swpt_SRCS := tests/unit/test_swpt.c $(SWPT_SRCS)
test_swpt_LDLIBS := -lipt

FUZZERS += fuzz_swpt
fuzz_swpt_SRCS := tests/fuzz/fuzz_swpt.c $(SWPT_SRCS)
fuzz_swpt_LDLIBS := -lipt
