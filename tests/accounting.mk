# tests/: the accounting's invariants (issue 4).
#
# Unit tests link the accounting sources directly (no shim) against a
# private hierarchy file; the multi-process test runs tests/acct_worker.c
# preloaded with the library and reads the hierarchy through the
# accounting API.  This fragment is read after accounting/accounting.mk
# and before tests/tests.mk: flags and sources are expanded late (=).
#
#   make check-accounting          the tests that pass (in make check)
#   make check-accounting-failing  the tests of known bugs (expected to fail)
#   make check-asan-accounting     the unit tests under ASan+UBSan

ACT := $(B)/tests/acct
ACCT_UNIT_SRCS = $(ACCT_SRCS) shim/log.c shim/config.c shim/config_table.c \
	tests/acct_fixture.c
ACCT_UNIT_DEPS = $(ACCT_UNIT_SRCS) tests/acct_fixture.h $(wildcard include/cgm/*.h)
ACCT_UNIT_CFLAGS = $(TEST_CFLAGS) -pthread -Itests $(CHECK_CFLAGS)
ACCT_UNIT_TESTS := test_page_counter test_hier test_rstat test_charge test_throttle

$(addprefix $(ACT)/,$(ACCT_UNIT_TESTS)): $(ACT)/%: tests/%.c $(ACCT_UNIT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

$(addprefix $(ACT)/asan/,$(ACCT_UNIT_TESTS)): $(ACT)/asan/%: tests/%.c $(ACCT_UNIT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ASAN_FLAGS) -o $@ $< $(ACCT_UNIT_SRCS) $(CHECK_LIBS)

check-accounting-unit: $(addprefix $(ACT)/,$(ACCT_UNIT_TESTS))
	@for t in $(ACCT_UNIT_TESTS); do echo "$(ACT)/$$t"; $(ACT)/$$t || exit 1; done

check-asan-accounting: $(addprefix $(ACT)/asan/,$(ACCT_UNIT_TESTS))
	@for t in $(ACCT_UNIT_TESTS); do echo "$(ACT)/asan/$$t"; $(ACT)/asan/$$t || exit 1; done

# Each test program runs its known-bug cases when given "failing".
check-accounting-failing: $(addprefix $(ACT)/,$(ACCT_UNIT_TESTS))
	@st=0; for t in $(ACCT_UNIT_TESTS); do echo "$(ACT)/$$t failing"; \
		$(ACT)/$$t failing || st=1; done; exit $$st

check-accounting: check-accounting-unit

CHECK_TARGETS += check-accounting-unit
ASAN_TARGETS += check-asan-accounting
.PHONY: check-accounting check-accounting-unit check-asan-accounting check-accounting-failing
