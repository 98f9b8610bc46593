# Instruction counts per malloc+free pair: callgrind on
# bench/pairs.c under each configuration, and two measuring builds of the
# library, never installed:
#   nosites    its static-key sites compiled out, to show what one site costs;
#   countonly  malloc, calloc, realloc and free cut down to one counter of
#              the thread's slot and mimalloc's call (CGM_ACCT_COUNT_ONLY,
#              include/cgm/accounted.h): the floor of per-call accounting,
#              which `make bench` measures beside accounting on.
# Only the shim differs: the modules' archives are the library's own.

# $(call lib_variant,NAME,DEFINE): the rules of $(B)/bench/NAME/libcgmalloc.so
# (its archives and linker script, set later, by second expansion).
.SECONDEXPANSION:
define lib_variant
$(B)/bench/$(1)/obj/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CPPFLAGS_BASE) $$(CFLAGS_BASE) $$(LIB_CFLAGS) $$(call lib_obj_flags,$$*) $$(CFLAGS) -D$(2) -MMD -MP -c -o $$@ $$<

$(B)/bench/$(1)/libcgmalloc.so: $$(patsubst %.c,$(B)/bench/$(1)/obj/%.o,$$(LIB_SRCS)) $$$$(LIB_ARCHIVES) $$$$(LIB_LD_SCRIPT) \
		$$$$(LOAD_ALIGN)
	$$(call link_lib,$$(patsubst %.c,$(B)/bench/$(1)/obj/%.o,$$(LIB_SRCS)))
endef
NOSITES_DIR := $(B)/bench/nosites
$(eval $(call lib_variant,nosites,CGM_STATIC_KEYS_COMPILED_OUT))
$(eval $(call lib_variant,countonly,CGM_ACCT_COUNT_ONLY))

$(B)/bench/pairs: bench/pairs.c
	@mkdir -p $(B)/bench
	$(CC) -std=c11 -O2 -g $(CWARN) $(TEST_DEPFLAGS) -o $@ $<

bench-insn: $(LIB) $(NOSITES_DIR)/libcgmalloc.so $(COUNTONLY_LIB) $(B)/bench/pairs $(BENCH_BIN)/churn
	bench/insn-per-pair $(B) > bench/RESULTS-insn.md
	cat bench/RESULTS-insn.md

BENCH_TARGETS += bench-insn
.PHONY: bench-insn

# Start-up of /bin/true: instructions and system calls, mimalloc alone
# against the library with accounting off and on.
bench-startup: $(LIB)
	bench/insn-startup $(B) > bench/RESULTS-startup.md.tmp
	mv bench/RESULTS-startup.md.tmp bench/RESULTS-startup.md
	cat bench/RESULTS-startup.md

BENCH_TARGETS += bench-startup
.PHONY: bench-startup

# Every workload of the suite by callgrind, accounting on and with limits,
# as ratios to mimalloc's instructions; BEFORE=path/to/libcgmalloc.so adds
# the columns of another build (a before/after comparison).
bench-insn-suite: $(LIB) $(BENCH_PROGS)
	bench/insn-suite --build $(B) $(if $(BEFORE),--lib before=$(BEFORE)) --lib now=$(LIB) \
		> bench/RESULTS-insn-suite.md.tmp
	mv bench/RESULTS-insn-suite.md.tmp bench/RESULTS-insn-suite.md
	cat bench/RESULTS-insn-suite.md

BENCH_TARGETS += bench-insn-suite
.PHONY: bench-insn-suite

# memory.stat with 10,000 groups and 16 processes.
$(B)/bench/stat_read: bench/stat_read.c $(call archives,plain,acct base)
	@mkdir -p $(B)/bench
	$(CC) -std=c11 -O2 -g $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -pthread -o $@ $< \
		$(call archives,plain,acct base)

bench-stat: $(B)/bench/stat_read
	{ echo "memory.stat reads (bench/stat_read.c, \`make bench-stat\`):"; echo; \
	  $(B)/bench/stat_read /dev/shm/cgm-bench-stat.$$$$ 10000 16; echo; \
	  $(B)/bench/stat_read /dev/shm/cgm-bench-stat.$$$$ 100 16; } > bench/RESULTS-stat.md
	cat bench/RESULTS-stat.md

BENCH_TARGETS += bench-stat
.PHONY: bench-stat
