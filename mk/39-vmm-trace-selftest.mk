# The on-box self-test of the VMM's own trace: its verdict (tests/guest/pt_seq_check.c,
# pure) goes into pt-selftest.efi (mk/50-guest-tests.mk) and into this host test, which feeds it
# streams written with the VMM's packet encoder, as the software tracer and as hardware write
# them, and planted faults.
HOST_TESTS += test_pt_seq_check
test_pt_seq_check_SRCS := tests/unit/guest/test_pt_seq_check.c tests/guest/pt_seq_check.c vmm/pt/pt_pkt.c vmm/lib/fmt.c
