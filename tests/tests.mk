# tests/: Check unit tests, runtime tests, stress, preload tests.

T := $(B)/tests
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
TEST_CFLAGS := -std=c11 -O1 -g $(WARN) $(CPPFLAGS_BASE)
# Linked against the shim: libcgmalloc.so precedes libc in the search
# order, exactly as under LD_PRELOAD.
SHIM_LINK := -L$(B) -Wl,-rpath,$(abspath $(B)) -lcgmalloc -lmimalloc

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

ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

check-unit: $(T)/test_interpose $(T)/test_config
	$(T)/test_config
	$(T)/test_interpose

# The library's own unit tests under valgrind: no invalid access in the shim.
# By default memcheck replaces malloc in every object ("*"); nouserintercepts
# keeps it to libc, so the malloc under test is ours.
VALGRIND := valgrind -q --error-exitcode=3 --soname-synonyms=somalloc=nouserintercepts
check-valgrind: $(T)/test_interpose $(T)/test_config
	CK_FORK=no $(VALGRIND) $(T)/test_config
	CK_FORK=no $(VALGRIND) $(T)/test_interpose

check-asan-config: $(T)/asan/test_config
	$(T)/asan/test_config

CHECK_TARGETS += check-unit check-valgrind
ASAN_TARGETS += check-asan-config
.PHONY: check-unit check-valgrind check-asan-config
