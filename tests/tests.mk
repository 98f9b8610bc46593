# tests/: Check unit tests of the shim (the common variables are in Makefile).

# Sources that the non-preload tests build directly (also under ASan).
CONFIG_SRCS := shim/config.c shim/config_table.c shim/log.c

$(T)/test_interpose: tests/test_interpose.c $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(SHIM_LINK) $(CHECK_LIBS)

$(T)/test_config: tests/test_config.c $(CONFIG_SRCS) include/cgm/config.h
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(CHECK_CFLAGS) -o $@ tests/test_config.c $(CONFIG_SRCS) $(CHECK_LIBS)

$(T)/asan/test_config: tests/test_config.c $(CONFIG_SRCS) include/cgm/config.h
	@mkdir -p $(T)/asan
	$(CC) $(TEST_CFLAGS) $(ASAN_FLAGS) $(CHECK_CFLAGS) -o $@ tests/test_config.c $(CONFIG_SRCS) $(CHECK_LIBS)

check-unit: $(T)/test_interpose $(T)/test_config
	$(T)/test_config
	CGMALLOC_CONF=$(TEST_CONF) $(T)/test_interpose

# The library's own unit tests under valgrind: no invalid access in the shim.
# By default memcheck replaces malloc in every object ("*"); nouserintercepts
# keeps it to libc, so the malloc under test is ours.
VALGRIND := valgrind -q --error-exitcode=3 --soname-synonyms=somalloc=nouserintercepts
check-valgrind: $(T)/test_interpose $(T)/test_config
	CK_FORK=no $(VALGRIND) $(T)/test_config
	CGMALLOC_CONF=$(TEST_CONF) CK_FORK=no $(VALGRIND) $(T)/test_interpose

check-asan-config: $(T)/asan/test_config
	$(T)/asan/test_config

CHECK_TARGETS += check-unit check-valgrind
ASAN_TARGETS += check-asan-config
.PHONY: check-unit check-valgrind check-asan-config
