# Static-key tests: compiled into the test executable with its own sites.
SK_SRCS := shim/static_key.c shim/static_key_x86_64.c shim/static_key_aarch64.c \
	shim/static_key_none.c shim/log.c
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
