# PT engine core (vmm/pt/): capabilities + mode, virtual RTIT MSR file and its policy, packet
# encoder, VM entry/exit switching plan, ToPA PMI routing.  Pure logic: the same .c files are in
# vmm.elf (every file under vmm/) and in the host tests and the fuzzer below.

HOST_TESTS += test_pt_msr
test_pt_msr_SRCS := tests/unit/pt/test_pt_msr.c vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c

HOST_TESTS += test_pt_caps
test_pt_caps_SRCS := tests/unit/pt/test_pt_caps.c vmm/pt/pt_caps.c

HOST_TESTS += test_pt_pkt
test_pt_pkt_SRCS := tests/unit/pt/test_pt_pkt.c vmm/pt/pt_pkt.c
test_pt_pkt_LDLIBS := -lipt

HOST_TESTS += test_pt_switch
test_pt_switch_SRCS := tests/unit/pt/test_pt_switch.c vmm/pt/pt_switch.c vmm/pt/pt_msr.c vmm/pt/pt_caps.c \
                       vmm/pt/pt_ctl_policy.c

HOST_TESTS += test_pt_pmi
test_pt_pmi_SRCS := tests/unit/pt/test_pt_pmi.c vmm/pt/pt_pmi.c

FUZZERS += fuzz_pt_msr
fuzz_pt_msr_SRCS := tests/fuzz/fuzz_pt_msr.c vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c \
                    vmm/pt/pt_caps.c vmm/pt/pt_switch.c
