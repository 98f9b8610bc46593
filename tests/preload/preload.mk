# tests/preload/: unmodified programs run with and without the preload.
#
# Each test_*.sh here runs its program twice and compares (see lib.sh).
# The programs come from Debian packages (python3, sqlite3, git, coreutils,
# gzip), plus two built here WITHOUT any link to cgmalloc.

PL_BIN := $(B)/tests/preload
PRELOAD_TESTS := python sqlite git pipeline cxx dlopen
PRELOAD_CHECKS := $(addprefix check-preload-,$(PRELOAD_TESTS))

$(PL_BIN)/cxx_workload: tests/preload/cxx_workload.cc
	@mkdir -p $(PL_BIN)
	$(CXX) -std=c++17 -O2 -g $(WARN) $(TEST_DEPFLAGS) -pthread -o $@ $<

$(PL_BIN)/dlopen_main: tests/preload/dlopen_main.c
	@mkdir -p $(PL_BIN)
	$(CC) -std=c11 -O2 -g $(CWARN) $(TEST_DEPFLAGS) -D_GNU_SOURCE -o $@ $< -ldl

PL_ENV = CGM_LIB=$(abspath $(LIB)) CGM_VERSION=$(VERSION) \
	CGM_TEST_BIN=$(abspath $(PL_BIN)) CGM_DLALLOC=$(abspath $(B)/tests/libdlalloc.so)

$(PRELOAD_CHECKS): check-preload-%: tests/preload/test_%.sh tests/preload/lib.sh $(LIB) \
		$(PL_BIN)/cxx_workload $(PL_BIN)/dlopen_main $(B)/tests/libdlalloc.so
	$(RUN) env $(PL_ENV) sh tests/preload/test_$*.sh

check-preload: $(PRELOAD_CHECKS)

# CGMALLOC_CONF end to end: messages, strict=1, verbose=1, silence.
check-conf-env: tests/test_conf_env.sh tests/preload/lib.sh $(LIB)
	$(RUN) env $(PL_ENV) sh tests/test_conf_env.sh

.PHONY: check-preload check-conf-env $(PRELOAD_CHECKS)

CHECK_TARGETS += $(PRELOAD_CHECKS) check-conf-env
