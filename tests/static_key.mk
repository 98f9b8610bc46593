# Static-key tests: the mechanism linked into the test executable (the
# library's own objects of it), with the test's own sites.
SK_TEST_SRCS := tests/test_static_key.c tests/sk_other_tu.c
SK_TEST_CFLAGS := -std=c11 -O2 -g -fvisibility=hidden $(CWARN) $(CPPFLAGS_BASE) -Itests -pthread

$(T)/test_static_key: $(SK_TEST_SRCS) $(SK_OBJS) $(call archives,plain,base)
	@mkdir -p $(T)
	$(CC) $(SK_TEST_CFLAGS) $(CHECK_CFLAGS) -o $@ $(SK_TEST_SRCS) $(SK_OBJS) \
		$(call archives,plain,base) $(CHECK_LIBS)

check-static-key: $(T)/test_static_key $(LIB)
	$(RUN) $(T)/test_static_key
	$(RUN) tests/check-sites-objdump $(T)/test_static_key

# --fair-sched=yes: valgrind runs one thread at a time, and with its
# default lock a toggling thread waited behind the spinners for whole
# time slices (49-116 s a run of 10 toggles a test on 2026-12-05); with
# its ticket lock the threads take turns: 5 s, 10 s with 30 toggles.
check-static-key-valgrind: $(T)/test_static_key
	$(RUN) env CK_FORK=yes valgrind -q --error-exitcode=3 --smc-check=all --trace-children=yes \
		--fair-sched=yes $(T)/test_static_key

# The concurrent toggles at volume (make check runs 30000 and 10000).
stress-static-key: $(T)/test_static_key
	env SK_TEST_TOGGLES=200000 CK_RUN_CASE=patched $(T)/test_static_key

CHECK_TARGETS += check-static-key check-static-key-valgrind
STRESS_TARGETS += stress-static-key
.PHONY: check-static-key check-static-key-valgrind stress-static-key

# aarch64: the same mechanism built with Debian's cross compiler and run
# under qemu-user, when both are installed (scripts/install-deps installs
# them); a skip, with the reason, otherwise.
AARCH64_CC := aarch64-linux-gnu-gcc
QEMU_AARCH64 := qemu-aarch64

$(T)/aarch64/test_static_key_arch: tests/test_static_key_arch.c $(SK_SRCS) base/log.c
	@mkdir -p $(T)/aarch64
	$(AARCH64_CC) -std=c11 -O2 -g -static -fvisibility=hidden $(CWARN) $(CPPFLAGS_BASE) -pthread \
		$(TEST_DEPFLAGS) -o $@ tests/test_static_key_arch.c $(SK_SRCS) base/log.c

check-static-key-aarch64:
	$(RUN) tests/static_key_aarch64.sh $(MAKE) $(T)/aarch64/test_static_key_arch \
		$(AARCH64_CC) $(QEMU_AARCH64)

CHECK_TARGETS += check-static-key-aarch64
.PHONY: check-static-key-aarch64

# The library's own sites (malloc, free, calloc, ...) against objdump -d of
# libcgmalloc.so: compiled as jumps to their fallbacks, patched at start-up.
$(T)/sk_lib_report: tests/sk_lib_report.c $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -o $@ $< $(SHIM_LINK)

check-static-key-lib: $(T)/sk_lib_report $(LIB)
	$(RUN) tests/check-sites-objdump $(LIB) env CGMALLOC_CONF=accounting=0 $(T)/sk_lib_report
	$(RUN) tests/check-sites-keyed $(LIB) $(B)/obj env CGMALLOC_CONF=accounting=0 $(T)/sk_lib_report
	$(RUN) sh -c 'CGMALLOC_CONF=accounting=0,static_keys=off $(T)/sk_lib_report | head -1 | \
		grep -q "^mode fallback (static_keys=off)"'
	$(RUN) tests/check-entry-sites $(T)/sk_lib_report $(TEST_CONF)

CHECK_TARGETS += check-static-key-lib
.PHONY: check-static-key-lib
