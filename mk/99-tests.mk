# Wiring of the host test and fuzzer lists into `make test` / `make fuzz`.
# (Read last, mk/*.mk being read in name order, so every area's HOST_TESTS/FUZZERS are known here.)

$(foreach t,$(HOST_TESTS),$(eval $(call HOST_TEST_template,$(t))))
$(foreach f,$(FUZZERS),$(eval $(call FUZZER_template,$(f))))

HOST_TEST_BINS := $(addprefix $(BUILD)/host/,$(HOST_TESTS))
FUZZER_BINS    := $(addprefix $(BUILD)/fuzz/,$(FUZZERS))

.PHONY: host-tests fuzzers test-unit test-fuzz-smoke fuzz-long
host-tests: $(HOST_TEST_BINS)
fuzzers: $(FUZZER_BINS)

test-unit: $(HOST_TEST_BINS)
	$(Q)for t in $(HOST_TESTS); do tests/step.sh $(BUILD)/results unit:$$t $(BUILD)/host/$$t; done

test-fuzz-smoke: $(FUZZER_BINS)
	$(Q)for f in $(FUZZERS); do \
	    mkdir -p $(BUILD)/fuzz/corpus-$$f; \
	    tests/step.sh $(BUILD)/results fuzz:$$f $(BUILD)/fuzz/$$f -error_exitcode=1 -runs=$(FUZZ_SMOKE_RUNS) -max_total_time=$(FUZZ_SMOKE_SECONDS) -seed=1 \
	        $(BUILD)/fuzz/corpus-$$f $$(ls -d tests/fuzz/seeds/$$f 2>/dev/null); done

fuzz-long: $(FUZZER_BINS)
	$(Q)for f in $(FUZZERS); do mkdir -p $(BUILD)/fuzz/corpus-$$f; \
	    echo "== $$f for $(FUZZ_SECONDS) s"; \
	    $(BUILD)/fuzz/$$f -error_exitcode=1 -max_total_time=$(FUZZ_SECONDS) $(BUILD)/fuzz/corpus-$$f || exit 1; done

TEST_TARGETS := test-unit test-fuzz-smoke $(TEST_TARGETS)
FUZZ_TARGETS += fuzz-long
