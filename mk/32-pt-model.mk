# Bare-metal reference for the RTIT MSRs (tests/model/ptm_cpu.c, written from the SDM) and its
# differential test against the engine's guest RDMSR/WRMSR emulation (pt_msr.c + pt_ctl_policy.c).

HOST_TESTS += test_ptm_cpu
test_ptm_cpu_SRCS := tests/model/test_ptm_cpu.c tests/model/ptm_cpu.c tests/model/ptm.c \
                     vmm/pt/pt_msr.c vmm/pt/pt_ctl_policy.c
