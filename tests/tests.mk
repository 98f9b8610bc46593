# tests/: the shim's interposition (Check) and the configuration parser.

$(T)/test_interpose: tests/test_interpose.c $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(CHECK_CFLAGS) -o $@ $< $(SHIM_LINK) $(CHECK_LIBS)

$(T)/test_config: tests/test_config.c $(call archives,plain,base)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(CHECK_CFLAGS) -o $@ $< $(call archives,plain,base) $(CHECK_LIBS)

$(T)/asan/test_config: tests/test_config.c $(call archives,asan,base)
	@mkdir -p $(T)/asan
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(ASAN_FLAGS) $(CHECK_CFLAGS) -o $@ $< \
		$(call archives,asan,base) $(CHECK_LIBS)

# The kept descriptors with the shim's guards of close() and dup2() linked in.
$(T)/test_own_fds: tests/test_own_fds.c shim/fd_guard.c $(call archives,plain,base)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(CHECK_CFLAGS) -o $@ tests/test_own_fds.c shim/fd_guard.c \
		$(call archives,plain,base) $(CHECK_LIBS)

# shim/bind_now.c in a library of its own, linked for lazy binding as
# libcgmalloc.so is.
$(T)/libbind_lib.so: tests/bind_lib.c shim/bind_now.c $(call archives,plain,base)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -fPIC -shared -Wl,-z,lazy -Itests -o $@ \
		tests/bind_lib.c shim/bind_now.c $(call archives,plain,base)

$(T)/test_bind_now: tests/test_bind_now.c $(T)/libbind_lib.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< \
		-L$(T) -Wl,-rpath,$(abspath $(T)) -lbind_lib $(CHECK_LIBS)

check-unit: $(T)/test_interpose $(T)/test_config $(T)/test_own_fds $(T)/test_bind_now
	$(RUN) $(T)/test_bind_now
	$(RUN) $(T)/test_config
	$(RUN) $(T)/test_own_fds
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(T)/test_interpose

# The library's own unit tests under valgrind: no invalid access in the shim.
# By default memcheck replaces malloc in every object ("*"); nouserintercepts
# keeps it to libc, so the malloc under test is ours.
VALGRIND := valgrind -q --error-exitcode=3 --soname-synonyms=somalloc=nouserintercepts
check-valgrind: $(T)/test_interpose $(T)/test_config
	$(RUN) env CK_FORK=no $(VALGRIND) $(T)/test_config
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) CK_FORK=no $(VALGRIND) $(T)/test_interpose

check-asan-config: $(T)/asan/test_config
	$(T)/asan/test_config

# No arrow from a lower module to a higher one: base uses nothing of
# ours, accounting and zpool only the base, and nothing but the shim
# uses the shim's headers.
check-layering: tests/check-layering
	$(RUN) tests/check-layering

CHECK_TARGETS += check-unit check-valgrind check-layering
ASAN_TARGETS += check-asan-config
.PHONY: check-unit check-valgrind check-asan-config check-layering
