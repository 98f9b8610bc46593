# tests/: the accounting's invariants (issue 4).
#
# Unit tests link the accounting sources directly (no shim) against a
# private hierarchy file; the multi-process test runs tests/acct_worker.c
# preloaded with the library and reads the hierarchy through the
# accounting API.  This fragment is read after accounting/accounting.mk
# and before tests/tests.mk: flags and sources are expanded late (=).
#
#   make check-accounting          the tests that pass (in make check)
#   make check-asan-accounting     the same test programs under ASan+UBSan
#   make check-accounting-failing  the tests of known bugs (expected to fail)
#   make check-tsan-accounting     the concurrent tests under ThreadSanitizer

ACT := $(B)/tests/acct
ACCT_UNIT_SRCS = $(ACCT_SRCS) shim/log.c shim/config.c shim/config_table.c \
	tests/acct_fixture.c
ACCT_UNIT_DEPS = $(ACCT_UNIT_SRCS) tests/acct_fixture.h $(wildcard include/cgm/*.h)
ACCT_UNIT_CFLAGS = $(TEST_CFLAGS) -pthread -Itests $(CHECK_CFLAGS)
ACCT_UNIT_TESTS := test_page_counter test_hier test_rstat test_charge test_throttle
ACCT_ALL_TESTS := $(ACCT_UNIT_TESTS) test_accounting_mp
# Where the multi-process test finds its worker and the library to preload.
ACCT_MP_DEFS = -DACCT_WORKER='"$(abspath $(ACT))/acct_worker"' -DCGM_LIB='"$(abspath $(LIB))"'

$(addprefix $(ACT)/,$(ACCT_UNIT_TESTS)): $(ACT)/%: tests/%.c $(ACCT_UNIT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

$(addprefix $(ACT)/asan/,$(ACCT_UNIT_TESTS)): $(ACT)/asan/%: tests/%.c $(ACCT_UNIT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ASAN_FLAGS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

# The worker knows nothing of cgmalloc: it is only ever run preloaded.
$(ACT)/acct_worker: tests/acct_worker.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g $(WARN) -D_GNU_SOURCE -pthread -o $@ $<

# The test process itself is linked with the accounting, not the shim
# (so it also runs under ASan; its workers run the real library).
$(ACT)/test_accounting_mp: tests/test_accounting_mp.c $(ACCT_UNIT_DEPS) $(ACT)/acct_worker $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ACCT_MP_DEFS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

$(ACT)/asan/test_accounting_mp: tests/test_accounting_mp.c $(ACCT_UNIT_DEPS) $(ACT)/acct_worker $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ASAN_FLAGS) $(ACCT_MP_DEFS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

# ThreadSanitizer (clang) over the tests whose threads charge, free,
# harvest, flush and exit at once.  The owner's adds to its slot's
# counters are atomic in this build only (cgm_owner_add in compiler.h).
ACCT_TSAN_TESTS := test_page_counter test_charge test_rstat
$(addprefix $(ACT)/tsan/,$(ACCT_TSAN_TESTS)): $(ACT)/tsan/%: tests/%.c $(ACCT_UNIT_DEPS)
	@mkdir -p $(dir $@)
	clang $(ACCT_UNIT_CFLAGS) -fsanitize=thread -fno-omit-frame-pointer -o $@ $< \
		$(ACCT_UNIT_SRCS) $(CHECK_LIBS)

# TSan makes the tests several times slower: Check's timeouts grow with it.
# Its lock-order detector is off: it trips an internal CHECK (and hangs
# printing it) on the robust mutexes of a shared mapping that each test
# case maps anew at the same address; data races are still reported.
check-tsan-accounting: $(addprefix $(ACT)/tsan/,$(ACCT_TSAN_TESTS))
	@for t in $(ACCT_TSAN_TESTS); do echo "$(ACT)/tsan/$$t"; \
		CK_TIMEOUT_MULTIPLIER=10 TSAN_OPTIONS="halt_on_error=1 exitcode=66 detect_deadlocks=0" \
		$(ACT)/tsan/$$t || exit 1; done

check-accounting-unit: $(addprefix $(ACT)/,$(ACCT_UNIT_TESTS))
	@for t in $(ACCT_UNIT_TESTS); do echo "$(ACT)/$$t"; $(ACT)/$$t || exit 1; done

check-accounting-mp: $(ACT)/test_accounting_mp
	$(ACT)/test_accounting_mp

check-accounting: check-accounting-unit check-accounting-mp

check-asan-accounting: $(addprefix $(ACT)/asan/,$(ACCT_ALL_TESTS))
	@for t in $(ACCT_ALL_TESTS); do echo "$(ACT)/asan/$$t"; $(ACT)/asan/$$t || exit 1; done

# Each test program runs the cases of the bugs these tests found (all fixed
# now: they stay as regression tests) when given "failing"; the ASan+UBSan
# builds too (undefined behaviour is a bug they alone see).
check-accounting-failing: $(addprefix $(ACT)/,$(ACCT_ALL_TESTS)) \
		$(addprefix $(ACT)/asan/,$(ACCT_ALL_TESTS))
	@st=0; for t in $(ACCT_ALL_TESTS) $(addprefix asan/,$(ACCT_ALL_TESTS)); do \
		echo "$(ACT)/$$t failing"; $(ACT)/$$t failing || st=1; done; exit $$st

CHECK_TARGETS += check-accounting-unit check-accounting-mp check-accounting-failing \
	check-tsan-accounting
ASAN_TARGETS += check-asan-accounting
.PHONY: check-accounting check-accounting-unit check-accounting-mp check-asan-accounting \
	check-accounting-failing check-tsan-accounting
