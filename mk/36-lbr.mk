# Guest LBR (issue 11): the pure policy vmm/lbr/lbr_policy.c goes into the VMM (called by the
# shim vmm/vmx/lbr_vmx.c) and unchanged into the host tests and the fuzzer below.

LBR_SRCS := vmm/lbr/lbr_policy.c

# Into vmm.elf.  mk/80-vmm.mk builds VMM_SRCS from the area lists it names; until it names
# $(LBR_SRCS) too, the object is added here: a prerequisite of the ELF, and a target-specific
# append to VMM_OBJS, which the link recipe expands when it runs (after 80-vmm.mk set it).
LBR_VMM_OBJS := $(patsubst %,$(BUILD)/vmm-obj/%.o,$(LBR_SRCS))
$(BUILD)/vmm/vmm.elf: $(LBR_VMM_OBJS)
$(BUILD)/vmm/vmm.elf: VMM_OBJS += $(LBR_VMM_OBJS)
-include $(LBR_VMM_OBJS:.o=.d)
