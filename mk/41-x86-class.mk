# The x86 length / control-flow classifier of the software PT tracer:
# vmm/trace/x86_class.c is pure freestanding code; the host test and the fuzzer check it
# against Zydis (libzydis-dev, test oracle only: never linked into vmm.elf).

HOST_TESTS += test_x86_class
test_x86_class_SRCS := tests/unit/trace/test_x86_class.c vmm/trace/x86_class.c
test_x86_class_LDLIBS := -lZydis -lZycore

FUZZERS += fuzz_x86_class
fuzz_x86_class_SRCS := tests/fuzz/fuzz_x86_class.c vmm/trace/x86_class.c
fuzz_x86_class_LDLIBS := -lZydis -lZycore
