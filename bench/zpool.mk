# bench/: the zpool benchmark (`make bench-zpool`, part of `make bench`):
# throughput against raw lz4, memory per compressed byte, lz4 vs zstd,
# instructions per store/load (callgrind).  Results: bench/RESULTS-zpool.md.

ZPB_CFLAGS = -std=c11 -O2 -g $(WARN) $(CPPFLAGS_BASE) $(ZPOOL_CFLAGS) -Itests

$(B)/bench/zpool_bench: bench/zpool_bench.c tests/zpool_pages.c \
		tests/zpool_pages.h include/cgm/zpool.h $(B)/libcgmzpool.a
	@mkdir -p $(dir $@)
	$(CC) $(ZPB_CFLAGS) -o $@ $< tests/zpool_pages.c shim/log.c \
		$(B)/libcgmzpool.a $(ZPOOL_LIBS)

bench-zpool: $(B)/bench/zpool_bench
	bench/zpool_bench.sh $(B)

BENCH_TARGETS += bench-zpool
.PHONY: bench-zpool
