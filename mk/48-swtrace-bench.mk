# bench-swtrace: the software tracer's decode cache (vmm/trace/bcache.c), one line.
# A real program is single-stepped with ptrace and its code put behind fake 4-level page
# tables (tests/unit/trace/test_swtrace_ptrace.c --bench); the recorded steps are replayed into
# vmm/trace/swtrace.c five times each: without the cache, with it (the 64 instructions inside
# struct swtrace, what the VMM has unless the shim gives it a table), and as the VMM runs it:
# a 32 KiB table (1024 instructions, swtrace_cache_mem) and the code page read in place
# (gw_mem.map, the shim's map_step); and block stepping as the VMM runs it (replay_blocks_bench:
# the block table and the successor table, blocks through direct jumps).  The figure: host instructions per traced
# instruction (callgrind, inclusive, of replay_nocache / replay_cached / replay_cached_big),
# the guest memory reads per step (each one an EPT translation in the VMM), wall-clock ns
# per step and the hit rates.  Built -O2 without sanitizers, as the VMM is; SKIPs where
# ptrace is not permitted.

SWTRACE_BENCH      := $(BUILD)/host/bench_swtrace
SWTRACE_BENCH_PROG ?= /usr/bin/sort /etc/passwd

$(SWTRACE_BENCH): $(test_swtrace_ptrace_SRCS) $(wildcard vmm/trace/*.h vmm/pt/*.h tests/fakes/*.h)
	@mkdir -p $(@D)
	$(Q)$(HOST_CC) $(HOST_BENCH_CFLAGS) -o $@ \
	    $(filter %.c,$^) -lcmocka -lipt

.PHONY: bench-swtrace
bench-swtrace: $(SWTRACE_BENCH)
	$(Q)d=$(BUILD)/bench-swtrace; mkdir -p $$d; \
	line=$$($(SWTRACE_BENCH) --bench $(SWTRACE_BENCH_PROG)); \
	case "$$line" in BENCH*) ;; *) echo "bench-swtrace: no figure: $$line"; exit 0;; esac; \
	get() { echo "$$2" | tr ' ' '\n' | sed -n "s/^$$1=//p"; }; \
	steps=$$(get steps "$$line"); ir="host instructions/step: no valgrind"; \
	if command -v valgrind >/dev/null; then \
	    for f in replay_nocache replay_cached replay_cached_big replay_blocks_bench; do \
	        valgrind --tool=callgrind --callgrind-out-file=$$d/cg.$$f --collect-atstart=no \
	            --toggle-collect=$$f $(SWTRACE_BENCH) --bench $(SWTRACE_BENCH_PROG) \
	            >$$d/$$f.log 2>&1 || true; \
	    done; \
	    off=$$(awk '/^summary:/ {print $$2}' $$d/cg.replay_nocache); \
	    on=$$(awk '/^summary:/ {print $$2}' $$d/cg.replay_cached); \
	    big=$$(awk '/^summary:/ {print $$2}' $$d/cg.replay_cached_big); \
	    blk=$$(awk '/^summary:/ {print $$2}' $$d/cg.replay_blocks_bench); \
	    ir=$$(awk -v a="$$off" -v b="$$on" -v c="$$big" -v e="$$blk" -v n="$$steps" 'BEGIN { \
	        if (a > 0 && b > 0 && c > 0) printf "%.0f -> %.0f (as in the VMM, 1024-entry table and mapped code page: %.0f)" \
	        " host instructions/step (callgrind); block stepping with the block table: %.0f per instruction" \
	        " (the replay harness included)", a / (5 * n), b / (5 * n), c / (5 * n), e / (5 * n); \
	        else print "callgrind gave no count" }'); \
	fi; \
	echo "swtrace decode cache, $(SWTRACE_BENCH_PROG) replayed ($$steps steps): $$ir;" \
	    "guest reads/step $$(get reads_nocache "$$line") -> $$(get reads_cached "$$line");" \
	    "$$(get ns_nocache "$$line") -> $$(get ns_cached "$$line") ($$(get ns_big "$$line")) ns/step;" \
	    "hits: instructions $$(get insn_hit "$$line")% ($$(get insn_hit_big "$$line")%)," \
	    "translations $$(get tlb_hit "$$line")%;" \
	    "block stepping: $$(get blocks "$$line") blocks, $$(get next_hit "$$line")% of the blocks after a lead from the successor table"

BENCH_TARGETS += bench-swtrace
