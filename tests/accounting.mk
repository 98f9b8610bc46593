# tests/: the accounting's invariants.
#
# Unit tests link the accounting archive (no shim) against a private
# hierarchy file; the multi-process test runs tests/acct_worker.c
# preloaded with the library and reads the hierarchy through the
# accounting API.
#
#   make check-accounting          the unit and multi-process tests
#   make check-asan-accounting     the same test programs under ASan+UBSan
#   make check-accounting-regressions
#                                  the cases of bugs these tests found, in
#                                  the plain and the ASan+UBSan builds
#   make check-tsan-accounting     the concurrent tests under ThreadSanitizer

ACT := $(B)/tests/acct
ACCT_UNIT_CFLAGS = $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -Itests $(CHECK_CFLAGS)
ACCT_UNIT_TESTS := test_page_counter test_hier test_rstat test_charge test_throttle test_sample \
	test_psi
ACCT_ALL_TESTS := $(ACCT_UNIT_TESTS) test_accounting_mp
# What a test of flavour F links: the fixture and the archives.
acct_test_link = tests/acct_fixture.c $(call archives,$(1),acct base) $(CHECK_LIBS)
# Where the multi-process test finds its worker and the library to preload.
ACCT_MP_DEFS = -DACCT_WORKER='"$(abspath $(ACT))/acct_worker"' -DCGM_LIB='"$(abspath $(LIB))"'
ACCT_MP_DEPS = $(ACT)/acct_worker $(LIB)

$(addprefix $(ACT)/,$(ACCT_UNIT_TESTS)): $(ACT)/%: tests/%.c tests/acct_fixture.c \
		$(call archives,plain,acct base)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) -o $@ $< $(call acct_test_link,plain)

$(addprefix $(ACT)/asan/,$(ACCT_UNIT_TESTS)): $(ACT)/asan/%: tests/%.c tests/acct_fixture.c \
		$(call archives,asan,acct base)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ASAN_FLAGS) -o $@ $< $(call acct_test_link,asan)

# The worker knows nothing of cgmalloc: it is only ever run preloaded.
$(ACT)/acct_worker: tests/acct_worker.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g $(CWARN) $(TEST_DEPFLAGS) -D_GNU_SOURCE -pthread -o $@ $<

# The test process itself is linked with the accounting, not the shim
# (so it also runs under ASan; its workers run the real library).
$(ACT)/test_accounting_mp: tests/test_accounting_mp.c tests/acct_fixture.c \
		$(call archives,plain,acct base) $(ACCT_MP_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ACCT_MP_DEFS) -o $@ $< $(call acct_test_link,plain)

$(ACT)/asan/test_accounting_mp: tests/test_accounting_mp.c tests/acct_fixture.c \
		$(call archives,asan,acct base) $(ACCT_MP_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ACCT_UNIT_CFLAGS) $(ASAN_FLAGS) $(ACCT_MP_DEFS) -o $@ $< $(call acct_test_link,asan)

# ThreadSanitizer (clang) over the tests whose threads charge, free,
# harvest, flush and exit at once.  The owner's adds to its slot's
# counters are atomic in this build only (cgm_owner_add in compiler.h).
ACCT_TSAN_TESTS := test_page_counter test_charge test_rstat
$(addprefix $(ACT)/tsan/,$(ACCT_TSAN_TESTS)): $(ACT)/tsan/%: tests/%.c tests/acct_fixture.c \
		$(call archives,tsan,acct base)
	@mkdir -p $(dir $@)
	clang $(ACCT_UNIT_CFLAGS) -fsanitize=thread -fno-omit-frame-pointer -o $@ $< \
		$(call acct_test_link,tsan)

# TSan makes the tests several times slower: Check's timeouts grow with it.
# Its lock-order detector is off: it trips an internal CHECK (and hangs
# printing it) on the robust mutexes of a shared mapping that each test
# case maps anew at the same address; data races are still reported.
ACCT_TSAN_ENV := CK_TIMEOUT_MULTIPLIER=10 TSAN_OPTIONS="halt_on_error=1 exitcode=66 detect_deadlocks=0"
check-tsan-accounting: $(addprefix $(ACT)/tsan/,$(ACCT_TSAN_TESTS))
	$(foreach t,$(ACCT_TSAN_TESTS),$(RUN) env $(ACCT_TSAN_ENV) $(ACT)/tsan/$(t)$(newline))

check-accounting-unit: $(addprefix $(ACT)/,$(ACCT_UNIT_TESTS))
	$(foreach t,$(ACCT_UNIT_TESTS),$(RUN) $(ACT)/$(t)$(newline))

check-accounting-mp: $(ACT)/test_accounting_mp
	$(RUN) $(ACT)/test_accounting_mp

check-accounting: check-accounting-unit check-accounting-mp

check-asan-accounting: $(addprefix $(ACT)/asan/,$(ACCT_ALL_TESTS))
	@for t in $(ACCT_ALL_TESTS); do echo "$(ACT)/asan/$$t"; $(ACT)/asan/$$t || exit 1; done

# The programs that keep cases of bugs they found (all fixed: they stay as
# regression tests) run them when given "regressions", in the plain and
# the ASan+UBSan builds (undefined behaviour is a bug the latter alone see).
ACCT_REGRESSION_TESTS := test_hier test_accounting_mp
check-accounting-regressions: $(addprefix $(ACT)/,$(ACCT_REGRESSION_TESTS)) \
		$(addprefix $(ACT)/asan/,$(ACCT_REGRESSION_TESTS))
	$(foreach t,$(ACCT_REGRESSION_TESTS) $(addprefix asan/,$(ACCT_REGRESSION_TESTS)),$(RUN) $(ACT)/$(t) regressions$(newline))

CHECK_TARGETS += check-accounting-unit check-accounting-mp check-accounting-regressions \
	check-tsan-accounting
ASAN_TARGETS += check-asan-accounting
.PHONY: check-accounting check-accounting-unit check-accounting-mp check-asan-accounting \
	check-accounting-regressions check-tsan-accounting
