# tests/reliability/: the library preloaded where programs break easily --
# threads, fork, tables, limits, trust, a full /dev/shm.  One script per
# concern; each skips (exit 77) where the machine does not allow its set-up.

REL := $(B)/tests/reliability
REL_TESTS := no_thread fork tables limits trust shm_full mimalloc_check mlock stderr
REL_CHECKS := $(addprefix check-rel-,$(REL_TESTS))

$(REL)/rel_prog: tests/reliability/rel_prog.c
	@mkdir -p $(REL)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $< -ldl

$(REL)/wrong_block_size.so $(REL)/wrong_free.so: $(REL)/%.so: tests/reliability/%.c
	@mkdir -p $(REL)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -fPIC -shared -o $@ $< -ldl

REL_ENV = CGMCTL=$(abspath $(CGMCTL)) CGM_LIB=$(abspath $(LIB)) REL_PROG=$(abspath $(REL)/rel_prog) \
	REL_WRONG_SIZE=$(abspath $(REL)/wrong_block_size.so) REL_WRONG_FREE=$(abspath $(REL)/wrong_free.so)

$(REL_CHECKS): check-rel-%: tests/reliability/test_%.sh tests/reliability/lib.sh \
		tests/cgmctl/lib.sh $(REL)/rel_prog $(REL)/wrong_block_size.so $(REL)/wrong_free.so $(LIB) $(CGMCTL)
	$(RUN) env $(REL_ENV) sh tests/reliability/test_$*.sh

# The same with 100,000 threads and 10,000 processes.
stress-rel-tables: $(REL)/rel_prog $(LIB) $(CGMCTL)
	env $(REL_ENV) REL_THREADS=100000 REL_PROCS=10000 sh tests/reliability/test_tables.sh

CHECK_TARGETS += $(REL_CHECKS)
STRESS_TARGETS += stress-rel-tables
.PHONY: $(REL_CHECKS) stress-rel-tables
