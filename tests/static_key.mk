# Static-key tests: compiled into the test executable with its own sites.
SK_SRCS := shim/static_key.c shim/static_key_x86_64.c shim/static_key_aarch64.c \
	shim/static_key_none.c shim/static_key_sync.c shim/log.c
SK_TEST_SRCS := tests/test_static_key.c tests/sk_other_tu.c
SK_TEST_CFLAGS := -std=c11 -O2 -g -fvisibility=hidden $(WARN) $(CPPFLAGS_BASE) -Itests -pthread

$(T)/test_static_key: $(SK_TEST_SRCS) $(SK_SRCS) tests/sk_test.h include/cgm/static_key.h include/cgm/sk_arch.h
	@mkdir -p $(T)
	$(CC) $(SK_TEST_CFLAGS) $(CHECK_CFLAGS) -o $@ $(SK_TEST_SRCS) $(SK_SRCS) $(CHECK_LIBS)

check-static-key: $(T)/test_static_key $(LIB)
	$(T)/test_static_key
	tests/check-sites-objdump $(T)/test_static_key

check-static-key-valgrind: $(T)/test_static_key
	CK_FORK=yes valgrind -q --error-exitcode=3 --smc-check=all --trace-children=yes $(T)/test_static_key

CHECK_TARGETS += check-static-key check-static-key-valgrind
.PHONY: check-static-key check-static-key-valgrind

# aarch64: the same mechanism built with Debian's cross compiler and run
# under qemu-user, when both are installed (scripts/install-deps installs
# them); skipped with a reason otherwise.
AARCH64_CC := aarch64-linux-gnu-gcc
QEMU_AARCH64 := qemu-aarch64

$(T)/aarch64/test_static_key_arch: tests/test_static_key_arch.c $(SK_SRCS) include/cgm/static_key.h include/cgm/sk_arch.h
	@mkdir -p $(T)/aarch64
	$(AARCH64_CC) -std=c11 -O2 -g -static -fvisibility=hidden $(WARN) $(CPPFLAGS_BASE) -pthread \
		-o $@ tests/test_static_key_arch.c $(SK_SRCS)

check-static-key-aarch64:
	@if command -v $(AARCH64_CC) >/dev/null && command -v $(QEMU_AARCH64) >/dev/null; then \
		$(MAKE) --no-print-directory $(T)/aarch64/test_static_key_arch && \
		$(QEMU_AARCH64) $(T)/aarch64/test_static_key_arch && \
		OBJDUMP=aarch64-linux-gnu-objdump tests/check-sites-objdump $(T)/aarch64/test_static_key_arch \
			$(QEMU_AARCH64) $(T)/aarch64/test_static_key_arch --report; \
	else echo "check-static-key-aarch64: skipped ($(AARCH64_CC) or $(QEMU_AARCH64) not installed)"; fi

CHECK_TARGETS += check-static-key-aarch64
.PHONY: check-static-key-aarch64

# The library's own sites (malloc, free, calloc, ...) against objdump -d of
# libcgmalloc.so: compiled as jumps to their fallbacks, patched at start-up.
$(T)/sk_lib_report: tests/sk_lib_report.c $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SHIM_LINK)

check-static-key-lib: $(T)/sk_lib_report $(LIB)
	tests/check-sites-objdump $(LIB) env CGMALLOC_CONF=accounting=0 $(T)/sk_lib_report
	CGMALLOC_CONF=accounting=0,static_keys=off $(T)/sk_lib_report | head -1 | grep -q "^mode fallback (static_keys=off)"

CHECK_TARGETS += check-static-key-lib
.PHONY: check-static-key-lib
