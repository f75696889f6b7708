# Benchmarks (`make bench`): figures printed next to their goals, never asserted.
#
#   bench-linux: Linux guest in Bochs, vmm vs bare (`vmm = off`), see tools/bench-linux.sh

.PHONY: bench-linux
bench-linux: $(BOOT_EFI) $(VMM_ELF) $(IMG_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) GUEST_KERNEL=$(GUEST_KERNEL) GUEST_INITRD=$(GUEST_INITRD) \
	    tools/bench-linux.sh $(IMG_CFG) $(BUILD)/bench/linux

# bench-linux-smp: the same with 2 CPUs (Bochs 3.0: OVMF's ExitBootServices and Linux restart the
# AP under the VMM), boot to the marker
.PHONY: bench-linux-smp
bench-linux-smp: $(BOOT_EFI) $(VMM_ELF) $(IMG_CFG) $(GUEST_KERNEL) $(GUEST_INITRD)
	$(Q)BENCH_CPUS=2 LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) GUEST_KERNEL=$(GUEST_KERNEL) \
	    GUEST_INITRD=$(GUEST_INITRD) tools/bench-linux.sh $(IMG_CFG) $(BUILD)/bench/linux-smp

BENCH_TARGETS += bench-linux bench-linux-smp

# bench-attacks: figures of the adversarial suite, from one Bochs boot of attack.efi:
# the cost of a refused CPL 3 VMCALL against a CPL 0 VERSION and against the same CPL 3 trip with
# VERSION (guest RDTSC = instructions).  Bochs 2.7, as bochs:attacks: Bochs 3.0 with 2 CPUs
# triple-faults at attack 3's DR0 breakpoint (mk/50-guest-tests.mk), before the figures.
.PHONY: bench-attacks
bench-attacks: $(GUEST_OUT)/attack.efi $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
	$(Q)BOCHS=2.7 tests/system/bochs-attacks.sh $(BUILD) >$(BUILD)/bench-attacks.log 2>&1 || true
	$(Q)sed -n 's/.*INFO: bench cpl3_exit_stats_trip_ticks=\([0-9]*\) version_ticks=\([0-9]*\).*/\1 \2/p' \
	    $(BUILD)/bench-attacks.log | tail -n 1 | awk '{ if ($$2 > 0) printf \
	    "CPL 3 EXIT_STATS (refused, incl. the ring-3 trip) %s ticks vs CPL 0 VERSION %s ticks = %.2fx   (goal <= 2x; before issue 7: ~4,300x)\n", $$1, $$2, $$1 / $$2; \
	    else print "bench-attacks: no figure (see $(BUILD)/bench-attacks.log)" }'
	$(Q)sed -n 's/.*INFO: bench cpl3_exit_stats_trip_ticks=\([0-9]*\) .*/\1/p; s/.*INFO: bench cpl3_version_trip_ticks=\([0-9]*\).*/\1/p' \
	    $(BUILD)/bench-attacks.log | tail -n 2 | paste -sd' ' | awk 'NF == 2 && $$2 > 0 { printf \
	    "CPL 3 EXIT_STATS (refused) %s ticks vs CPL 3 VERSION %s ticks, the same ring-3 trip = %.2fx   (the refusal itself: %d ticks)\n", \
	    $$1, $$2, $$1 / $$2, $$1 - $$2 }'
	$(Q)grep -a 'INFO: bench ' $(BUILD)/bench-attacks.log | grep -v cpl3_ | sed 's/^.*INFO: bench /  /' || true

BENCH_TARGETS += bench-attacks

# bench-exits: figures from one Bochs boot of exitcost.efi, 1 CPU: guest ticks per
# iteration of a loop around one exiting instruction and the VMM's share (ticks - the same
# loop with a NOP) per exit kind; Bochs ticks = instructions, VM exit and VMRESUME included.
.PHONY: bench-exits
bench-exits: $(GUEST_OUT)/exitcost.efi $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
	$(Q)tests/system/bochs-exitcost.sh $(BUILD) >$(BUILD)/bench-exits.log 2>&1 || \
	    echo "bench-exits: incomplete (see $(BUILD)/bench-exits.log)"
	$(Q)sed -n 's/^INFO: bench exit=\([a-z]*\) per_iter=\([0-9.]*\) bare=\([0-9.]*\) vmm=\([0-9.]*\).*/\1 \2 \3 \4/p' \
	    $(BUILD)/bench-exits.log | awk '{ goal = $$1 == "cpuid" ? "   (goal: VMM <= 300)" : \
	    $$1 == "vmcall" ? "   (goal: <= 350 ticks per VERSION call)" : ""; \
	    printf "VM exit, %-6s: %s guest ticks per iteration (bare loop %s), VMM instructions per exit %s%s\n", \
	    $$1, $$2, $$3, $$4, goal }'

BENCH_TARGETS += bench-exits

# exit-profile: one exit of each kind traced instruction by instruction (Debian's Bochs 2.7 and
# its debugger), VMM instructions per function: where bench-exits' figures go.  Not part of
# `make bench` (a developer's tool): tools/exit-profile.sh.
.PHONY: exit-profile
exit-profile: $(GUEST_OUT)/exitcost-trace.efi $(BUILD)/boot/BOOTX64.EFI $(BUILD)/vmm/vmm.elf
	$(Q)tools/exit-profile.sh $(BUILD)

# bench-smp: figures from one Bochs boot of smp.efi with 2 CPUs: the cost of one EPT
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

# bench-trace: issues 9, 10 and 32 figures from two Bochs boots of the run image, 1 CPU each
# (bochs:linux's checks included): the software tracer's cost per traced instruction (ptt-work
# untraced vs in a window, guest TSC = instructions in Bochs) stepping with the trap flag
# (sw_trace = tf) and with MTF (auto, Bochs 3.0; its clock at 500 M ips: mk/90-image.mk), the
# Linux guest's trace and dump sizes.
.PHONY: bench-trace
bench-trace: $(TEST_TF_IMG) $(TEST_IMG) $(PTT_BIN) $(NATIVE_STEPS)
	$(Q)PTT=$(PTT_BIN) WORK_ELF=$(GUEST_WORK) NATIVE_STEPS=$(NATIVE_STEPS) TRACE_BOOT=$(RUN_TRACE_BOOT) \
	    EXPECT_PANIC=1 tests/system/bochs-linux.sh $(TEST_TF_IMG) $(BUILD)/bench/trace >$(BUILD)/bench-trace.log 2>&1 || true
	$(Q)PTT=$(PTT_BIN) WORK_ELF=$(GUEST_WORK) NATIVE_STEPS=$(NATIVE_STEPS) TRACE_BOOT=$(RUN_TRACE_BOOT) \
	    EXPECT_PANIC=1 BOCHS_IPS=500000000 tests/system/bochs-linux.sh $(TEST_IMG) $(BUILD)/bench/trace-mtf \
	    >$(BUILD)/bench-trace-mtf.log 2>&1 || true
	$(Q)sed -n 's/.*INFO bench tracer_ticks_per_instruction=\([0-9]*\) \(.*\)/software tracer, trap flag: \1 guest ticks per traced instruction \2   (goal <= 250)/p' \
	    $(BUILD)/bench-trace.log | tail -n 1
	$(Q)sed -n 's/.*INFO bench tracer_ticks_per_instruction=\([0-9]*\) \(.*\)/software tracer, MTF: \1 guest ticks per traced instruction \2/p' \
	    $(BUILD)/bench-trace-mtf.log | tail -n 1
	$(Q)for f in $(BUILD)/bench-trace.log $(BUILD)/bench-trace-mtf.log; do \
	    sed -n 's/.*INFO bench \(ctl_trace_[a-z_]*\|busy_loop_speed_in_window\)=\([0-9.]*\) \(.*\)/one process traced ('"$$(basename $$f .log)"'): \1 = \2 \3/p' "$$f"; \
	done
	$(Q)grep -a 'window closed\|dump [0-9]* done' $(BUILD)/bench/trace/serial.log | sed 's/^/  /' || true

BENCH_TARGETS += bench-trace
