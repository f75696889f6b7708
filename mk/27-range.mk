# The one wrap-safe range walk: vmm/lib/range.h (header-only, in the VMM
# through its users: trace_step.c, gwalk.c, bcache.c, trace_dump.c, exit_task_switch.c, ...)
# against a byte-by-byte reference, the old note_lin loop shape caught by the same checker, and
# gwalk.c's reads at the top of the 64-bit and 32-bit linear spaces.
HOST_TESTS += test_range
test_range_SRCS := tests/unit/lib/test_range.c vmm/trace/gwalk.c
