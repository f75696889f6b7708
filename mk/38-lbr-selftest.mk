# The on-box LBR self-test (docs/lbr.md "On-box self-test"): its verdicts
# (tests/guest/lbr_check.c, pure) go into pt-selftest.efi (mk/50-guest-tests.mk) and into this
# host test, which drives the LBR model with the known branch sequence (pass) and with planted
# faults (each must fail); lbr_seq.S is assembled in for its label table (never run: it needs
# CPL 0).
HOST_TESTS += test_lbr_check
test_lbr_check_SRCS := tests/unit/guest/test_lbr_check.c tests/guest/lbr_check.c tests/guest/lbr_seq.S \
                          tests/model/lbr_model.c vmm/lib/fmt.c
