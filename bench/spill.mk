# bench/: the spill engine's benchmark (`make bench-spill`, part of `make
# bench`): refault latency with 1, 2 and 4 faulting threads, lz4 and zstd,
# against the kernel's own refaults; spill and refault throughput against
# the raw codec.  Results: bench/RESULTS-spill.md.

$(B)/bench/spill_bench: bench/spill_bench.c tests/zpool_pages.c $(call archives,plain,zpool base)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g -pthread $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -Itests -o $@ $< \
		tests/zpool_pages.c $(call archives,plain,zpool base) $(ZPOOL_LIBS)

bench-spill: $(B)/bench/spill_bench
	bench/spill_bench.sh $(B)

BENCH_TARGETS += bench-spill
.PHONY: bench-spill
