# Instruction counts per malloc+free pair (issues 3 and 4): callgrind on
# bench/pairs.c under each configuration, and a build of the library with
# its static-key sites compiled out to show what one site costs.

NOSITES_DIR := $(B)/bench/nosites
# LIB_SRCS is complete only once every fragment is read: expand it late.
NOSITES_OBJS = $(patsubst %.c,$(NOSITES_DIR)/obj/%.o,$(LIB_SRCS))

$(NOSITES_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(LIB_CFLAGS) $(CFLAGS_$(subst /,_,$*)) $(CFLAGS) -DCGM_STATIC_KEYS_COMPILED_OUT -MMD -MP -c -o $@ $<

# Rebuilt when a header changes, like the library's own objects.
-include $(shell find $(NOSITES_DIR)/obj -name '*.d' 2>/dev/null)

.SECONDEXPANSION:
$(NOSITES_DIR)/libcgmalloc.so: $$(NOSITES_OBJS)
	$(CC) $(LIB_LDFLAGS) -o $@ $(NOSITES_OBJS) $(LIB_LIBS)

$(B)/bench/pairs: bench/pairs.c
	@mkdir -p $(B)/bench
	$(CC) -std=c11 -O2 -g $(WARN) -o $@ $<

bench-insn: $(LIB) $(NOSITES_DIR)/libcgmalloc.so $(B)/bench/pairs
	bench/insn-per-pair $(B) > bench/RESULTS-insn.md
	cat bench/RESULTS-insn.md

BENCH_TARGETS += bench-insn
.PHONY: bench-insn

# memory.stat with 10,000 groups and 16 processes (issue 4).
$(B)/bench/stat_read: bench/stat_read.c $(ACCT_SRCS) $(CONFIG_SRCS)
	@mkdir -p $(B)/bench
	$(CC) -std=c11 -O2 -g $(WARN) $(CPPFLAGS_BASE) -pthread -o $@ bench/stat_read.c $(ACCT_SRCS) $(CONFIG_SRCS)

bench-stat: $(B)/bench/stat_read
	{ echo "memory.stat reads (bench/stat_read.c, \`make bench-stat\`):"; echo; \
	  $(B)/bench/stat_read /dev/shm/cgm-bench-stat.$$$$ 10000 16; echo; \
	  $(B)/bench/stat_read /dev/shm/cgm-bench-stat.$$$$ 100 16; } > bench/RESULTS-stat.md
	cat bench/RESULTS-stat.md

BENCH_TARGETS += bench-stat
.PHONY: bench-stat
