# The VMM's own sources on a fake machine: every vmm/ .c file but host/fixup.c (RDMSR/WRMSR/XSETBV
# under the host IDT's fix-up: pure hardware touch; the fake world has its own) and lib/string.c
# (memcpy & co., which the host's libc provides: test_string tests it alone), built as vmm.elf
# has them with the stand-ins of tests/fakes/vmm/ for the instruction headers (VMM_FAKE_CFLAGS,
# mk/00-toolchain.mk): a VMCS backed by an array, MSRs in a map, port I/O to a recording UART, a
# scripted guest behind vmx_enter (tests/fakes/vmm_world.c, vmm_boot.c).
VMM_FAKE_EXCLUDE := vmm/host/fixup.c vmm/lib/string.c
VMM_FAKE_SRCS    := $(filter-out $(VMM_FAKE_EXCLUDE),$(sort $(shell find vmm -name '*.c'))) \
                    boot/config.c boot/fmt.c tests/fakes/vmm_world.c tests/fakes/vmm_boot.c

# the exit handlers, the exit loop and start-up, booted by vmm_main and driven exit by exit
HOST_TESTS += test_vcpu_exits
test_vcpu_exits_SRCS   := tests/unit/vcpu/test_vcpu_exits.c $(VMM_FAKE_SRCS)
test_vcpu_exits_CFLAGS := $(VMM_FAKE_CFLAGS)
test_vcpu_exits_LDLIBS := $(VMM_FAKE_LDLIBS)

# the software tracer stepping with the trap flag: a boot of its own (one per process)
HOST_TESTS += test_trace_tf
test_trace_tf_SRCS   := tests/unit/trace/test_trace_tf.c $(VMM_FAKE_SRCS)
test_trace_tf_CFLAGS := $(VMM_FAKE_CFLAGS)
test_trace_tf_LDLIBS := $(VMM_FAKE_LDLIBS)

FUZZERS += fuzz_vcpu_exits
fuzz_vcpu_exits_SRCS   := tests/fuzz/fuzz_vcpu_exits.c $(VMM_FAKE_SRCS)
fuzz_vcpu_exits_CFLAGS := $(VMM_FAKE_CFLAGS)
fuzz_vcpu_exits_LDLIBS := $(VMM_FAKE_LDLIBS)

# vmm/lib/string.c itself, its functions renamed so the host's libc keeps memcpy & co.
HOST_TESTS += test_string
test_string_SRCS   := tests/unit/lib/test_string.c vmm/lib/string.c
test_string_CFLAGS := $(VMM_LIBC_CFLAGS) -Dmemcpy=vmm_memcpy -Dmemmove=vmm_memmove \
                      -Dmemset=vmm_memset -Dmemcmp=vmm_memcmp -Dstrlen=vmm_strlen \
                      -Dstrnlen=vmm_strnlen -Dstrcmp=vmm_strcmp -Dstrncmp=vmm_strncmp
