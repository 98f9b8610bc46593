# bench/: the zpool benchmark (`make bench-zpool`, part of `make bench`):
# throughput against raw lz4, memory per compressed byte, lz4 vs zstd,
# instructions per store/load (callgrind).  Results: bench/RESULTS-zpool.md.

$(B)/bench/zpool_bench: bench/zpool_bench.c tests/zpool_pages.c $(call archives,plain,zpool base)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -Itests -o $@ $< \
		tests/zpool_pages.c $(call archives,plain,zpool base) $(ZPOOL_LIBS)

bench-zpool: $(B)/bench/zpool_bench
	bench/zpool_bench.sh $(B)

BENCH_TARGETS += bench-zpool
.PHONY: bench-zpool
