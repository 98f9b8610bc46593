# tests/fuzz/: the libFuzzer target over the zpool API (clang only).
#   make fuzz                  run every fuzz target for FUZZ_TIME seconds
#   make fuzz-zpool FUZZ_TIME=600

FUZZ_TIME ?= 60
FUZZ_CC ?= clang
ZPF := $(B)/fuzz
ZPF_FLAGS = -std=c11 -O1 -g $(WARN) $(CPPFLAGS_BASE) $(ZPOOL_CFLAGS) -Itests \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all

$(ZPF)/fuzz_zpool: tests/fuzz/fuzz_zpool.c tests/zpool_pages.c \
		tests/zpool_pages.h include/cgm/zpool.h include/cgm/zp_types.h \
		$(wildcard zpool/*.c)
	@mkdir -p $(dir $@) $(ZPF)/corpus-zpool
	$(FUZZ_CC) $(ZPF_FLAGS) -o $@ $< tests/zpool_pages.c shim/log.c \
		$(ZPOOL_SRCS) $(ZPOOL_LIBS)

fuzz-zpool: $(ZPF)/fuzz_zpool
	$(ZPF)/fuzz_zpool -max_total_time=$(FUZZ_TIME) -max_len=4096 \
		-print_final_stats=1 $(ZPF)/corpus-zpool tests/fuzz/corpus-zpool

fuzz: fuzz-zpool

.PHONY: fuzz fuzz-zpool
