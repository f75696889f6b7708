# The VMM's own page tables (vmm/host/paging.c, W^X): pure builder and walker, host-tested.
HOST_TESTS += test_paging
test_paging_SRCS := tests/unit/host/test_paging.c vmm/host/paging.c
