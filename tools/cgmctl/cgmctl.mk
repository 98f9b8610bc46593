# tools/cgmctl/: the command-line tool over a hierarchy file, and the
# in-process API (shim/api.c, declared in include/cgmalloc.h).
#
# cgmctl links the accounting and the configuration table directly, not
# the shim: it works on the hierarchy on behalf of other processes and is
# not itself accounted (unless someone preloads it).

LIB_SRCS += shim/api.c

CGMCTL := $(B)/cgmctl
CGMCTL_SRCS = $(wildcard tools/cgmctl/*.c) $(ACCT_SRCS) \
	shim/config.c shim/config_table.c shim/log.c
CGMCTL_OBJS = $(patsubst %.c,$(B)/cgmctl-obj/%.o,$(CGMCTL_SRCS))
# Where `make install` puts the library: run looks there last.
CGMCTL_CFLAGS = -std=c11 -O2 -g -pthread $(WARN) $(CPPFLAGS_BASE) \
	-DCGM_LIBDIR='"$(LIBDIR)"'

$(B)/cgmctl-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CGMCTL_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(CGMCTL): $(CGMCTL_OBJS)
	$(CC) -pthread $(LDFLAGS) -o $@ $(CGMCTL_OBJS)

-include $(CGMCTL_OBJS:.o=.d)

TOOLS += $(CGMCTL)
all: $(CGMCTL)

# ---- tests ----

# Every subcommand with good and bad arguments, `run` under a limit, the
# README's configuration table.
CGMCTL_TEST_ENV = CGMCTL=$(abspath $(CGMCTL)) CGM_LIB=$(abspath $(LIB))

check-cgmctl: tests/test_cgmctl.sh tests/cgmctl/lib.sh tests/cgmctl/readme_conf.sh \
		$(CGMCTL) $(LIB)
	$(CGMCTL_TEST_ENV) sh tests/test_cgmctl.sh

# Running processes: listed, moved with their charge, reclaimed once killed.
# cgmctl on running processes: cgroup.procs, move, dead-process reclaim.
check-cgmctl-procs: tests/cgmctl/test_procs.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(CGMCTL_TEST_ENV) sh tests/cgmctl/test_procs.sh

# The moving key: a program allocating on two threads is moved twelve times.
$(T)/move_worker: tests/move_worker.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $<

check-cgmctl-moving: tests/cgmctl/test_moving.sh tests/cgmctl/lib.sh $(T)/move_worker $(CGMCTL) $(LIB)
	$(CGMCTL_TEST_ENV) MOVE_WORKER=$(abspath $(T)/move_worker) sh tests/cgmctl/test_moving.sh

# The README's table of CGMALLOC_CONF keys is `cgmctl help conf --markdown`:
# readme-conf checks it, readme-conf-update rewrites it.
readme-conf: $(CGMCTL)
	CGMCTL=$(abspath $(CGMCTL)) sh tests/cgmctl/readme_conf.sh README.md

readme-conf-update: $(CGMCTL)
	CGMCTL=$(abspath $(CGMCTL)) sh tests/cgmctl/readme_conf.sh --update README.md

# The API from C, in a private hierarchy; then with accounting off.
$(T)/test_api: tests/test_api.c include/cgmalloc.h $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(SHIM_LINK) $(CHECK_LIBS)

check-api: $(T)/test_api
	@tmp=$$(mktemp -d) && \
	CGMALLOC_CONF=hierarchy=$$tmp/h,group=/api/test $(T)/test_api; rc=$$?; \
	[ $$rc = 0 ] && { CGMALLOC_CONF=hierarchy=$$tmp/h,accounting=0 CGM_TEST_API_OFF=1 \
		$(T)/test_api; rc=$$?; }; \
	rm -rf $$tmp; exit $$rc

# cgmctl itself under AddressSanitizer+UBSan, through the same test.  The
# link to the library lets `run` find it next to the binary, as it does in
# $(B).
CGMCTL_ASAN := $(B)/asan-cgmctl/cgmctl

$(CGMCTL_ASAN): $(CGMCTL_SRCS) $(wildcard tools/cgmctl/*.h include/cgm/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CGMCTL_CFLAGS) $(ASAN_FLAGS) -o $@ $(CGMCTL_SRCS)
	ln -sf $(abspath $(LIB)) $(dir $@)libcgmalloc.so

check-asan-cgmctl: $(CGMCTL_ASAN) tests/test_cgmctl.sh tests/cgmctl/lib.sh
	CGMCTL=$(abspath $(CGMCTL_ASAN)) CGM_LIB=$(abspath $(LIB)) sh tests/test_cgmctl.sh

CHECK_TARGETS += check-cgmctl check-cgmctl-procs check-cgmctl-moving check-api
ASAN_TARGETS += check-asan-cgmctl

.PHONY: check-cgmctl check-cgmctl-procs check-cgmctl-moving check-api check-asan-cgmctl readme-conf \
	readme-conf-update
