# Instruction counts per malloc+free pair (issues 3 and 4): callgrind on
# bench/pairs.c under each configuration, and a build of the library with
# its static-key sites compiled out to show what one site costs.

NOSITES_DIR := $(B)/bench/nosites
# LIB_SRCS is complete only once every fragment is read: expand it late.
NOSITES_OBJS = $(patsubst %.c,$(NOSITES_DIR)/obj/%.o,$(LIB_SRCS))

$(NOSITES_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(LIB_CFLAGS) $(CFLAGS_$(subst /,_,$*)) $(CFLAGS) -DCGM_STATIC_KEYS_COMPILED_OUT -c -o $@ $<

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
