# tests/fuzz/: libFuzzer targets (clang), linked with the fuzz flavour of
# the archives (coverage + ASan + UBSan).
#   fuzz_config  the CGMALLOC_CONF parser (base/config.c)
#   fuzz_hier    the hierarchy file and everything that walks it (accounting/)
#   fuzz_zpool   the compressed pool's API (zpool/)
#
#   make fuzz                       every fuzz target for FUZZ_TIME seconds
#   make fuzz-config FUZZ_TIME=600  one of them
#   make check-fuzz-smoke           20000 runs of fuzz_config and 5000 of
#                                   fuzz_hier and fuzz_zpool, from the committed seeds
#
# New inputs go to $(CFZ)/corpus-*, crashes to $(CFZ)/crash-*; the seeds in
# tests/fuzz/corpus-*/ are read, never written.  A crash is reproduced
# with `$(CFZ)/fuzz_hier $(CFZ)/crash-...`.

FUZZ_TIME ?= 60
CFZ := $(B)/fuzz
FUZZ_FLAGS = -std=c11 -O1 -g $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -Itests -pthread \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_RUN = -artifact_prefix=$(CFZ)/ -timeout=20 -print_final_stats=1
FUZZ_SMOKE_RUNS ?= 20000
# A zpool input may set up io_uring rings for a backing file: slower.
FUZZ_SMOKE_RUNS_ZPOOL ?= 5000
# A hier input builds a hierarchy file (6 ms a run here): 20000 runs took
# 120 s of make check's 15 minutes.  Longer runs: make fuzz-hier.
FUZZ_SMOKE_RUNS_HIER ?= 5000

$(CFZ)/fuzz_config: tests/fuzz/fuzz_config.c $(call archives,fuzz,base)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(call archives,fuzz,base)

$(CFZ)/fuzz_hier: tests/fuzz/fuzz_hier.c $(call archives,fuzz,acct base)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(call archives,fuzz,acct base)

$(CFZ)/fuzz_zpool: tests/fuzz/fuzz_zpool.c tests/zpool_pages.c $(call archives,fuzz,zpool base)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< tests/zpool_pages.c $(call archives,fuzz,zpool base) \
		$(ZPOOL_LIBS)

FUZZ_LEN_config := 2048
FUZZ_LEN_hier := 2048
FUZZ_LEN_zpool := 4096
fuzz-config fuzz-hier fuzz-zpool: fuzz-%: $(CFZ)/fuzz_%
	@mkdir -p $(CFZ)/corpus-$*
	$(CFZ)/fuzz_$* $(FUZZ_RUN) -max_total_time=$(FUZZ_TIME) -max_len=$(FUZZ_LEN_$*) \
		$(CFZ)/corpus-$* tests/fuzz/corpus-$*

fuzz: fuzz-config fuzz-hier fuzz-zpool

# In make check: a short run from the seeds, with a fixed seed so that a
# failure is the same on the next run; a skip where clang's libFuzzer is
# missing.
check-fuzz-smoke:
	$(RUN) tests/fuzz/smoke $(MAKE) $(CFZ) $(FUZZ_CC) \
		config:$(FUZZ_SMOKE_RUNS):$(FUZZ_LEN_config) hier:$(FUZZ_SMOKE_RUNS_HIER):$(FUZZ_LEN_hier) \
		zpool:$(FUZZ_SMOKE_RUNS_ZPOOL):$(FUZZ_LEN_zpool)

CHECK_TARGETS += check-fuzz-smoke
.PHONY: fuzz fuzz-config fuzz-hier fuzz-zpool check-fuzz-smoke
