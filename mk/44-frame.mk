# Serial trace dump: the frame protocol of docs/serial-protocol.md.  The VMM side
# (vmm/trace/frame.c, lz4w.c: pure, in vmm.elf) and the host tool's reader
# (tools/ptvisor-trace/frame_dec.c, fx*.c, extract.c, also in the ptvisor-trace binary of mk/46)
# meet in one test: encoder -> lines -> extract, byte for byte, with liblz4 as the independent
# decompressor and the packet generator (vmm/trace/swpt.c) for realistic PT.

FRAME_VMM_SRCS  := vmm/trace/frame.c vmm/trace/lz4w.c
FRAME_HOST_SRCS := tools/ptvisor-trace/frame_dec.c tools/ptvisor-trace/fx.c tools/ptvisor-trace/fx_finish.c \
                   tools/ptvisor-trace/fx_out.c tools/ptvisor-trace/extract.c

HOST_TESTS += test_frame
test_frame_SRCS := tests/unit/trace/test_frame.c $(FRAME_VMM_SRCS) $(FRAME_HOST_SRCS) \
                   vmm/trace/swpt.c vmm/pt/pt_pkt.c vmm/trace/x86_class.c
test_frame_CFLAGS := -Itools/ptvisor-trace
test_frame_LDLIBS := -llz4

# Arbitrary log text into the reader; and encode -> mutate lines -> decode, where whatever
# is accepted must be what was encoded.
FUZZERS += fuzz_frame
fuzz_frame_SRCS := tests/fuzz/fuzz_frame.c $(FRAME_VMM_SRCS) $(FRAME_HOST_SRCS)
fuzz_frame_CFLAGS := -Itools/ptvisor-trace
fuzz_frame_LDLIBS := -llz4

# The dump driver (vmm/trace/dump.c: sections, one line per step, the window cut at a PSB)
# against extract's core, with console lines between frames and a block the ring lost.
HOST_TESTS += test_dump
test_dump_SRCS := tests/unit/trace/test_dump.c vmm/trace/dump.c $(FRAME_VMM_SRCS) $(FRAME_HOST_SRCS)
test_dump_CFLAGS := -Itools/ptvisor-trace
test_dump_LDLIBS := -llz4
