# Benchmarks (`make bench`): figures printed next to their goals, never asserted.
#
#   bench-linux: Linux guest in Bochs, vmm vs bare (`vmm = off`), see tools/bench-linux.sh

.PHONY: bench-linux
bench-linux: $(BOOT_EFI) $(VMM_ELF) $(IMG_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) GUEST_KERNEL=$(GUEST_KERNEL) GUEST_INITRD=$(GUEST_INITRD) \
	    tools/bench-linux.sh $(IMG_CFG) $(BUILD)/bench/linux

BENCH_TARGETS += bench-linux

# bench-attacks: figures of the adversarial suite (issue 7), from one Bochs boot of attack.efi:
# the cost of a refused CPL 3 VMCALL against a CPL 0 VERSION (guest RDTSC = instructions).
.PHONY: bench-attacks
bench-attacks: $(GUEST_OUT)/attack.efi $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
	$(Q)tests/system/bochs-attacks.sh $(BUILD) >$(BUILD)/bench-attacks.log 2>&1 || true
	$(Q)sed -n 's/.*INFO: bench cpl3_exit_stats_trip_ticks=\([0-9]*\) version_ticks=\([0-9]*\).*/\1 \2/p' \
	    $(BUILD)/bench-attacks.log | tail -n 1 | awk '{ if ($$2 > 0) printf \
	    "CPL 3 EXIT_STATS (refused, incl. the ring-3 trip) %s ticks vs CPL 0 VERSION %s ticks = %.2fx   (goal <= 2x; before issue 7: ~4,300x)\n", $$1, $$2, $$1 / $$2; \
	    else print "bench-attacks: no figure (see $(BUILD)/bench-attacks.log)" }'
	$(Q)grep -a 'INFO: bench ' $(BUILD)/bench-attacks.log | grep -v cpl3_ | sed 's/^.*INFO: bench /  /' || true

BENCH_TARGETS += bench-attacks

# bench-smp: issue 8 figures from one Bochs boot of smp.efi with 2 CPUs: the cost of one EPT
# shootdown to the other CPU (initiator's TSC ticks, NMI IPI to acknowledgement) and the VM exits
# per second of an AP idle as a guest.
.PHONY: bench-smp
bench-smp: $(GUEST_OUT)/smp.efi $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
	$(Q)tests/system/bochs-smp.sh $(BUILD) >$(BUILD)/bench-smp.log 2>&1 || true
	$(Q)sed -n 's/.*INFO: bench ept_shootdown_ticks=\([0-9]*\).*/\1/p' $(BUILD)/bench-smp.log | tail -n 1 | \
	    awk '{ printf "EPT shootdown to the other CPU: %s ticks (Bochs; goal: stated, off every hot path)\n", $$1 }'
	$(Q)sed -n 's/.*INFO: bench idle_ap_exits_per_s=\([0-9]*\).*/\1/p' $(BUILD)/bench-smp.log | tail -n 1 | \
	    awk '{ printf "VM exits per second on an idle AP: %s   (goal 0)\n", $$1 }'

BENCH_TARGETS += bench-smp
