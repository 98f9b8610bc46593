# tests/fuzz/: libFuzzer targets over the core (clang only).
#   fuzz_config  the CGMALLOC_CONF parser (shim/config.c)
#   fuzz_hier    the hierarchy file and everything that walks it (accounting/)
#
#   make fuzz                       every fuzz target for FUZZ_TIME seconds
#   make fuzz-config FUZZ_TIME=600  one of them
#   make check-fuzz-smoke           20000 runs of each core target and 5000 of
#                                   fuzz_zpool, from the committed seeds
#
# New inputs go to $(CFZ)/corpus-*, crashes to $(CFZ)/crash-*; the seeds in
# tests/fuzz/corpus-*/ are read, never written.  A crash is reproduced
# with `$(CFZ)/fuzz_hier $(CFZ)/crash-...`.
#
# This fragment is read before tests/tests.mk and zpool_fuzz.mk (sorted
# names), so it names its own sources and directory.

FUZZ_TIME ?= 60
FUZZ_CC ?= clang
CFZ := $(B)/fuzz
CFZ_CONFIG_SRCS := shim/config.c shim/config_table.c shim/log.c
CORE_FUZZ_FLAGS = -std=c11 -O1 -g $(WARN) $(CPPFLAGS_BASE) -pthread \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
CORE_FUZZ_RUN = -artifact_prefix=$(CFZ)/ -timeout=20 -print_final_stats=1
FUZZ_SMOKE_RUNS ?= 20000
# A zpool input may set up io_uring rings for a backing file: slower.
FUZZ_SMOKE_RUNS_ZPOOL ?= 5000

$(CFZ)/fuzz_config: tests/fuzz/fuzz_config.c $(CFZ_CONFIG_SRCS) include/cgm/config.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CORE_FUZZ_FLAGS) -o $@ $< $(CFZ_CONFIG_SRCS)

$(CFZ)/fuzz_hier: tests/fuzz/fuzz_hier.c $(ACCT_SRCS) $(CFZ_CONFIG_SRCS) $(wildcard include/cgm/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CORE_FUZZ_FLAGS) -o $@ $< $(ACCT_SRCS) $(CFZ_CONFIG_SRCS)

fuzz-config fuzz-hier: fuzz-%: $(CFZ)/fuzz_%
	@mkdir -p $(CFZ)/corpus-$*
	$(CFZ)/fuzz_$* $(CORE_FUZZ_RUN) -max_total_time=$(FUZZ_TIME) -max_len=2048 \
		$(CFZ)/corpus-$* tests/fuzz/corpus-$*

fuzz: fuzz-config fuzz-hier

# In make check: a short run from the seeds, with a fixed seed so that a
# failure is the same on the next run.  The first corpus directory is where
# libFuzzer writes what it finds: a scratch one, emptied first.
FUZZ_PROBE = printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
	$(FUZZ_CC) -fsanitize=fuzzer -x c - -o $(CFZ)/probe 2>/dev/null

CHECK_TARGETS += check-fuzz-smoke

check-fuzz-smoke:
	@mkdir -p $(CFZ)
	@if $(FUZZ_PROBE); then \
		$(MAKE) --no-print-directory $(CFZ)/fuzz_config $(CFZ)/fuzz_hier $(CFZ)/fuzz_zpool && \
		for t in config hier zpool; do \
			runs=$(FUZZ_SMOKE_RUNS); len=2048; \
			if [ $$t = zpool ]; then runs=$(FUZZ_SMOKE_RUNS_ZPOOL); len=4096; fi; \
			rm -rf $(CFZ)/smoke-$$t && mkdir -p $(CFZ)/smoke-$$t && \
			echo "$(CFZ)/fuzz_$$t -runs=$$runs tests/fuzz/corpus-$$t" && \
			$(CFZ)/fuzz_$$t $(CORE_FUZZ_RUN) -seed=1 -runs=$$runs -max_len=$$len \
				$(CFZ)/smoke-$$t tests/fuzz/corpus-$$t 2>$(CFZ)/smoke-$$t.log || \
				{ tail -40 $(CFZ)/smoke-$$t.log; exit 1; }; \
			grep -h "^Done" $(CFZ)/smoke-$$t.log; \
		done; \
	else echo "check-fuzz-smoke: skipped ($(FUZZ_CC) -fsanitize=fuzzer does not link: no clang or no libFuzzer)"; fi

.PHONY: fuzz-config fuzz-hier check-fuzz-smoke
