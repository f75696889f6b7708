# The VMM's own sources on a fake machine: every vmm/ .c file but the few that are only hardware
# touch, compiled as in vmm.elf (-DPTV_VMM=1) with the stand-ins of tests/fakes/vmm/ found before
# vmm/'s instruction headers (-iquote is searched ahead of -I for "..." includes): a VMCS backed by
# an array, MSRs in a map, port I/O to a recording UART, a scripted guest behind vmx_enter.
#   host/fixup.c:    RDMSR/WRMSR/XSETBV under the host IDT's fix-up (the fake world has its own)
#   lib/string.c:    memcpy & co., which the host libc provides (test_vmm_string tests it alone)
VMM_FAKE_EXCLUDE := vmm/host/fixup.c vmm/lib/string.c
VMM_FAKE_SRCS    := $(filter-out $(VMM_FAKE_EXCLUDE),$(sort $(shell find vmm -name '*.c'))) \
                    boot/config.c boot/fmt.c tests/fakes/vmm_world.c
VMM_FAKE_CFLAGS  := -iquote tests/fakes/vmm -DPTV_VMM=1 -fno-pie
# linked without PIE: the image bounds the fake world gives the host page tables are absolute
VMM_FAKE_LDLIBS  := -no-pie

HOST_TESTS += test_vmm_exits
test_vmm_exits_SRCS   := tests/unit/test_vmm_exits.c tests/fakes/vmm_boot.c $(VMM_FAKE_SRCS)
test_vmm_exits_CFLAGS := $(VMM_FAKE_CFLAGS)
test_vmm_exits_LDLIBS := $(VMM_FAKE_LDLIBS)

# the software tracer stepping with the trap flag: a boot of its own (one per process)
HOST_TESTS += test_vmm_trace_tf
test_vmm_trace_tf_SRCS   := tests/unit/test_vmm_trace_tf.c tests/fakes/vmm_boot.c $(VMM_FAKE_SRCS)
test_vmm_trace_tf_CFLAGS := $(VMM_FAKE_CFLAGS)
test_vmm_trace_tf_LDLIBS := $(VMM_FAKE_LDLIBS)

FUZZERS += fuzz_vmm_exits
fuzz_vmm_exits_SRCS   := tests/fuzz/fuzz_vmm_exits.c tests/fakes/vmm_boot.c $(VMM_FAKE_SRCS)
fuzz_vmm_exits_CFLAGS := $(VMM_FAKE_CFLAGS)
fuzz_vmm_exits_LDLIBS := $(VMM_FAKE_LDLIBS)

# vmm/lib/string.c itself, its functions renamed so the host's libc keeps memcpy & co.
HOST_TESTS += test_vmm_string
test_vmm_string_SRCS   := tests/unit/test_vmm_string.c vmm/lib/string.c
test_vmm_string_CFLAGS := -UPTV_HOST -fno-builtin -Dmemcpy=vmm_memcpy -Dmemmove=vmm_memmove \
                          -Dmemset=vmm_memset -Dmemcmp=vmm_memcmp -Dstrlen=vmm_strlen \
                          -Dstrnlen=vmm_strnlen -Dstrcmp=vmm_strcmp -Dstrncmp=vmm_strncmp
