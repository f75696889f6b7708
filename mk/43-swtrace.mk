# The software tracer's stepping logic and guest page walk: vmm/trace/swtrace.c, swblock.c
# (block stepping) and gwalk.c are pure, in vmm.elf and unchanged into this host test, which joins
# them to the classifier and the packet generator and decodes the result with libipt
# (tests/fakes/swpt_dec.c).
SWTRACE_SRCS := vmm/trace/swtrace.c vmm/trace/swblock.c vmm/trace/gwalk.c vmm/trace/bcache.c
HOST_TESTS += test_swtrace
test_swtrace_SRCS := tests/unit/trace/test_swtrace.c $(SWTRACE_SRCS) vmm/trace/x86_class.c $(SWPT_SRCS)
test_swtrace_LDLIBS := -lipt

# The code pages a window executed (the dump's code snapshots): vmm/trace/codepages.c.
HOST_TESTS += test_codepages
test_codepages_SRCS := tests/unit/trace/test_codepages.c vmm/trace/codepages.c

# The decode cache (vmm/trace/bcache.c) against a fresh walk + decode: self-modifying code,
# remapped pages, random patches / remaps / invalidations, the X86_F_INVLPG flag vs Zydis.
HOST_TESTS += test_bcache
test_bcache_SRCS := tests/unit/trace/test_bcache.c $(SWTRACE_SRCS) vmm/trace/x86_class.c vmm/trace/swpt.c \
                    vmm/pt/pt_pkt.c
test_bcache_LDLIBS := -lZydis -lZycore

# Real programs single-stepped with ptrace, their code behind fake 4-level page tables,
# replayed into swtrace with the decode cache off and on: equal rings, decoded back by
# libipt (SKIP where ptrace is not permitted).  Also the bench of mk/48-swtrace-bench.mk.
HOST_TESTS += test_swtrace_ptrace
test_swtrace_ptrace_SRCS := tests/unit/trace/test_swtrace_ptrace.c tests/fakes/ptrace_probe.c \
                            $(SWTRACE_SRCS) vmm/trace/x86_class.c $(SWPT_SRCS)
test_swtrace_ptrace_LDLIBS := -lipt

# Block stepping (vmm/trace/swblock.c) over code bytes the fuzzer writes: every block against a
# fresh decode (plain instructions, direct JMP / CALL between runs, distinct IPs), the same
# blocks and packets with and without the block table.
FUZZERS += fuzz_swblock
fuzz_swblock_SRCS := tests/fuzz/fuzz_swblock.c $(SWTRACE_SRCS) vmm/trace/x86_class.c $(SWPT_SRCS)
fuzz_swblock_LDLIBS := -lipt -lZydis -lZycore

# Event frames that carry the tracer's trap flag (vmm/trace/tfleak.c): which single steps are the
# tracer's and which the guest's own; a fuzzer for the table's bounds and its one answer.
HOST_TESTS += test_tfleak
test_tfleak_SRCS := tests/unit/trace/test_tfleak.c vmm/trace/tfleak.c vmm/trace/x86_class.c
FUZZERS += fuzz_tfleak
fuzz_tfleak_SRCS := tests/fuzz/fuzz_tfleak.c vmm/trace/tfleak.c vmm/trace/x86_class.c
