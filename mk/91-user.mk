# Your own programs in the guest, and a guest shell (README "Tracing your own programs").
#
#   make run GUEST_FILES="prog lib.so dir ..." GUEST_CMD="ptvisor-ctl trace -d -- ./prog"
#       boot straight into GUEST_CMD (no built-in demo), then extract and decode its dumps
#   make shell [GUEST_FILES=...] [GUEST_CMD=...]
#       boot to an interactive shell on the serial console, in this terminal; every dump the
#       guest sends is extracted and decoded while the session goes on (tools/shell.sh)
#
# GUEST_FILES: files and directories of this machine (paths relative to where make runs), each
# to /root/NAME in the guest (its working directory), or HOST:/GUEST-PATH; dynamic ELF programs
# bring their loader and shared libraries (guest/user-files.sh). GUEST_CMD: a shell command run
# in /root. GUEST_TRACE_BOOT=N also traces the kernel's first N instructions (default 0: that
# dump alone takes minutes in Bochs). GUEST_SW_TRACE: sw_trace of the image (below). USER_OUT:
# where the image's pieces go.

USER_OUT        ?= $(BUILD)/guest/user
USER_ROOT       := $(USER_OUT)/root
USER_INITRD     := $(USER_OUT)/initrd.img
USER_MANIFEST   := $(USER_OUT)/files.map
USER_IMG        := $(USER_OUT)/ptvisor-user.img
USER_CFG        := $(USER_OUT)/user.cfg
SERIAL_VIEW     := $(BUILD)/tools/serial-view
GUEST_TRACE_BOOT ?= 0
# the software tracer's steps: the trap flag (guest-visible, docs/ARCHITECTURE.md section 5) lets
# Bochs' clock run at 50 M instructions a second, where the serial line (the dumps) is 10 times
# faster in wall time than at the 500 M that MTF steps need (GUEST_SW_TRACE=auto: tools/run.sh)
GUEST_SW_TRACE  ?= tf
USER_BOCHS_IPS  := $(if $(filter tf,$(GUEST_SW_TRACE)),50000000,500000000)
# the command as typed, `$` included (make would expand it otherwise)
export PTV_GUEST_CMD := $(value GUEST_CMD)

.PHONY: user-image user-run shell
# USER_MODE=run|shell: what the image's /etc/ptvisor/user-init does; always rebuilt (the files
# may have changed): a few seconds
user-image: $(GUEST_KERNEL) $(GUEST_PROBE) $(GUEST_CTL) $(GUEST_WORK) $(GUEST_EXACT) $(BOOT_EFI) \
            $(VMM_ELF) $(RUN_CFG) guest/user-init guest/user-profile guest/user-files.sh guest/mkinitrd.sh
	$(Q)rm -rf $(USER_ROOT) && mkdir -p $(USER_ROOT)/etc/ptvisor
	$(Q)guest/user-files.sh $(USER_ROOT) $(USER_MANIFEST) $(GUEST_FILES)
	$(Q)install -m 0755 guest/user-init $(USER_ROOT)/etc/ptvisor/user-init
	$(Q)install -m 0644 guest/user-profile $(USER_ROOT)/etc/profile
	$(Q)if [ -n "$$PTV_GUEST_CMD" ]; then printf '%s\n' "$$PTV_GUEST_CMD" >$(USER_ROOT)/etc/ptvisor/cmd; fi
	$(Q)if [ "$(USER_MODE)" = shell ]; then \
	    sz=$$(stty size </dev/tty 2>/dev/null); \
	    echo "$${sz:+stty rows $${sz% *} cols $${sz#* }}" >$(USER_ROOT)/etc/ptvisor/shell; fi
	$(Q)EXTRA_BINS="$(GUEST_CTL) $(GUEST_WORK) $(GUEST_EXACT)" EXTRA_ROOT=$(USER_ROOT) \
	    guest/mkinitrd.sh $(USER_INITRD) guest/init $(GUEST_PROBE)
	$(Q)sed -e 's/^trace_boot = .*/trace_boot = $(GUEST_TRACE_BOOT)/' \
	    -e 's/^sw_trace = .*/sw_trace = $(GUEST_SW_TRACE)/' $(RUN_CFG) >$(USER_CFG)
	$(Q)grep -qx 'sw_trace = $(GUEST_SW_TRACE)' $(USER_CFG) || { echo "user.cfg: no sw_trace line in $(RUN_CFG)"; exit 1; }
	$(Q)LOADER=$(BOOT_EFI) VMM=$(VMM_ELF) tools/mkimage.sh $(USER_IMG) $(USER_CFG) $(GUEST_KERNEL) \
	    $(USER_INITRD) >/dev/null
	@echo "guest: $(USER_IMG): $$(wc -l <$(USER_MANIFEST)) ELF files of yours and their libraries" \
	    "($(USER_MANIFEST)), initramfs $$(du -h --apparent-size $(USER_INITRD) | cut -f1)"

user-run: $(PTT_BIN)
	$(Q)if [ -z "$$PTV_GUEST_CMD" ]; then \
	    echo "make run: GUEST_FILES without GUEST_CMD: say what to run (GUEST_CMD=\"...\"), or use make shell"; \
	    exit 1; fi
	$(Q)$(MAKE) --no-print-directory user-image USER_MODE=run
	$(Q)PTT=$(PTT_BIN) GUEST_MAP=$(USER_MANIFEST) RUN_DIR=$${RUN_DIR:-$(BUILD)/run} \
	    BOCHS_IPS=$${BOCHS_IPS:-$(USER_BOCHS_IPS)} tools/run.sh $(USER_IMG) auto

shell: $(PTT_BIN) $(SERIAL_VIEW)
	$(Q)[ -t 0 ] && [ -t 1 ] || { echo "make shell: needs a terminal on stdin and stdout" \
	    "(for a command without one: make run GUEST_CMD=...)"; exit 1; }
	$(Q)$(MAKE) --no-print-directory user-image USER_MODE=shell
	$(Q)PTT=$(PTT_BIN) SERIAL_VIEW=$(SERIAL_VIEW) GUEST_MAP=$(USER_MANIFEST) \
	    SHELL_DIR=$${SHELL_DIR:-$(BUILD)/shell} BOCHS_IPS=$${BOCHS_IPS:-$(USER_BOCHS_IPS)} \
	    tools/shell.sh $(USER_IMG)

# the guest's serial console for a person: frame lines of dumps left out (tools/serial-view.c)
$(SERIAL_VIEW): tools/serial-view.c
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_TOOL_CFLAGS) -o $@ $<

ALL_TARGETS += $(SERIAL_VIEW)

# Tests (make test):
#   guest:user-files  the host side, no boot: files and libraries found as ldd finds them, the
#                     one-line errors, elf-bases on a made dump, serial-view (a few seconds)
#   bochs:user-run    README's `make run GUEST_FILES=... GUEST_CMD=...` lines as written: a dynamic
#                     program traced in the guest, its decoded trace naming it (one boot)
#   bochs:shell       `make shell` in a tmux terminal: prompt, two traces decoded during the
#                     session, exit (one boot)
.PHONY: test-user-files test-user-run test-shell
test-user-files: $(PTT_BIN) $(SERIAL_VIEW)
	$(Q)tests/step.sh $(BUILD)/results guest:user-files tests/system/user-files-host.sh \
	    $(BUILD)/test/user-files $(PTT_BIN) $(SERIAL_VIEW)
test-user-run:
	$(Q)BUILD=$(BUILD) tests/step.sh $(BUILD)/results bochs:user-run tests/system/user-run.sh \
	    $(BUILD)/test/user-run
test-shell:
	$(Q)BUILD=$(BUILD) tests/step.sh $(BUILD)/results bochs:shell tests/system/shell-tmux.sh \
	    $(BUILD)/test/shell

TEST_TARGETS += test-user-files test-user-run test-shell

# make bench: bochs:shell's run, for its figures: from the guest shell's prompt to the decoded
# trace of a ~10,000-instruction program (and of guest/example.c), with the serial dump's share
.PHONY: bench-shell
bench-shell:
	$(Q)BUILD=$(BUILD) tests/system/shell-tmux.sh $(BUILD)/bench/shell >$(BUILD)/bench-shell.log 2>&1 || true
	$(Q)grep -a 'INFO bench shell_' $(BUILD)/bench-shell.log | sed 's/^ *INFO bench /  /' || \
	    echo "bench-shell: no figure (see $(BUILD)/bench-shell.log)"

BENCH_TARGETS += bench-shell
