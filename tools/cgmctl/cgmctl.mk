# tools/cgmctl/: the command-line tool over a hierarchy file.
#
# cgmctl links the accounting and the base directly, not the shim: it
# works on the hierarchy on behalf of other processes and is not itself
# accounted (unless someone preloads it).

CGMCTL := $(B)/cgmctl
CGMCTL_SRCS := $(wildcard tools/cgmctl/*.c)
# compare's kernel memory cgroup is made and removed through libcgroup;
# mount serves the hierarchy through libfuse3.
FUSE3_CFLAGS := $(shell pkg-config --cflags fuse3)
CGMCTL_LIBS := -lcgroup $(shell pkg-config --libs fuse3)
CFLAGS_tools_cgmctl_mount := $(FUSE3_CFLAGS)
CFLAGS_tools_cgmctl_mount_fs := $(FUSE3_CFLAGS)
CFLAGS_tools_cgmctl_mount_poll := $(FUSE3_CFLAGS)
# Where `make install` puts the library: run looks there last.
CFLAGS_tools_cgmctl_run := -DCGM_LIBDIR='"$(LIBDIR)"'

$(CGMCTL): $(patsubst %.c,$(B)/obj/%.o,$(CGMCTL_SRCS)) $(call archives,plain,acct base)
	$(CC) -pthread $(LDFLAGS) -o $@ $^ $(CGMCTL_LIBS)

TOOLS += $(CGMCTL)
all: $(CGMCTL)

# ---- tests ----

# Every subcommand with good and bad arguments, `run` under a limit, the
# README's tables of configuration keys and files.
CGMCTL_TEST_ENV = CGMCTL=$(abspath $(CGMCTL)) CGM_LIB=$(abspath $(LIB))

check-cgmctl: tests/test_cgmctl.sh tests/cgmctl/lib.sh tests/cgmctl/readme_tables.sh \
		$(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/test_cgmctl.sh

# cgmctl on running processes: cgroup.procs, move, dead-process reclaim.
check-cgmctl-procs: tests/cgmctl/test_procs.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_procs.sh

# export --prometheus against a strict checker of the format and against
# cat, with a running preloaded python3; --textfile's atomic replace;
# rmdir -r, cat of several files and of all, move of several pids.
check-cgmctl-export: tests/cgmctl/test_export.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_export.sh

# top: frames sorted by usage, with a running preloaded python3.
check-cgmctl-top: tests/cgmctl/test_top.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_top.sh

# compare: a python3 touching 64 MiB in a kernel memory cgroup and a
# cgmalloc group at once; cgmalloc's peak within 0.8-1.25x of the
# kernel's.  Skipped without a writable kernel memory cgroup.
check-cgmctl-compare: tests/cgmctl/test_compare.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_compare.sh

# mount: a shell script written for cgroupfs run on the mounted hierarchy
# (mkdir, rmdir, echo and cat of the files, a preloaded python3 in
# cgroup.procs, moved and killed through the files), then SIGTERM, SIGINT
# and a removed hierarchy file each unmount; as root and again as uid
# 65534.  Skipped where FUSE cannot be used.
check-cgmctl-mount: tests/cgmctl/test_mount.sh tests/cgmctl/mount_lib.sh tests/cgmctl/lib.sh \
		$(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_mount.sh

# poll() on the mount: cgroup.events, memory.events and memory.events.local
# wake poll, select and epoll when preloaded python3s join a group or go
# over memory.high, and not otherwise; memory.pressure triggers (one per
# open file, the kernel's rules) wake under a throttled python3 and not on
# a quiet group.  Skipped where FUSE cannot be used.
check-cgmctl-mount-poll: tests/cgmctl/test_mount_poll.sh tests/cgmctl/mount_poll.py \
		tests/cgmctl/mount_lib.sh tests/cgmctl/lib.sh $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) sh tests/cgmctl/test_mount_poll.sh

# The moving key: a program allocating on two threads is moved twelve times.
$(T)/move_worker: tests/move_worker.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -o $@ $<

check-cgmctl-moving: tests/cgmctl/test_moving.sh tests/cgmctl/lib.sh $(T)/move_worker $(CGMCTL) $(LIB)
	$(RUN) env $(CGMCTL_TEST_ENV) MOVE_WORKER=$(abspath $(T)/move_worker) sh tests/cgmctl/test_moving.sh

# The README's tables of CGMALLOC_CONF keys and of a group's files are
# `cgmctl help conf --markdown` and `cgmctl help files --markdown`:
# readme-tables checks them, readme-tables-update rewrites them.
readme-tables: $(CGMCTL)
	CGMCTL=$(abspath $(CGMCTL)) sh tests/cgmctl/readme_tables.sh README.md

readme-tables-update: $(CGMCTL)
	CGMCTL=$(abspath $(CGMCTL)) sh tests/cgmctl/readme_tables.sh --update README.md

# The API from C, in a private hierarchy: in a group below a delegated
# one, with either accounted free (free_path=); in a limited group of its own; with charge=alloc; with accounting
# off.
$(T)/test_api: tests/test_api.c $(LIB)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(CHECK_CFLAGS) -o $@ $< $(SHIM_LINK) $(CHECK_LIBS)

check-api: $(T)/test_api $(CGMCTL)
	$(RUN) sh -c '$(CGMCTL) --hierarchy $(TEST_HIER) mkdir /api/other && \
		$(CGMCTL) --hierarchy $(TEST_HIER) set /api cgroup.delegate 1 && \
		$(CGMCTL) --hierarchy $(TEST_HIER) mkdir /elsewhere && \
		CGMALLOC_CONF=hierarchy=$(TEST_HIER),group=/api/test $(T)/test_api && \
		CGMALLOC_CONF=hierarchy=$(TEST_HIER),group=/api/test,free_path=mixed $(T)/test_api && \
		CGMALLOC_CONF=hierarchy=$(TEST_HIER),group=/plain,max=512M CGM_TEST_API_PLAIN=1 $(T)/test_api && \
		CGMALLOC_CONF=hierarchy=$(TEST_HIER),group=/api/alloc,charge=alloc \
			CGM_TEST_API_CHARGE_ALLOC=1 $(T)/test_api'
	$(RUN) env CGMALLOC_CONF=hierarchy=$(TEST_HIER),accounting=0 CGM_TEST_API_OFF=1 $(T)/test_api

# cgmctl itself under AddressSanitizer+UBSan, through the same test.  The
# link to the library lets `run` find it next to the binary, as it does in
# $(B).
CGMCTL_ASAN := $(B)/asan-cgmctl/cgmctl

$(CGMCTL_ASAN): $(CGMCTL_SRCS) $(call archives,asan,acct base) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) $(ASAN_FLAGS) -pthread $(CFLAGS_tools_cgmctl_run) $(FUSE3_CFLAGS) \
		-o $@ $(CGMCTL_SRCS) $(call archives,asan,acct base) $(CGMCTL_LIBS)
	ln -sf $(abspath $(LIB)) $(dir $@)libcgmalloc.so

check-asan-cgmctl: $(CGMCTL_ASAN) tests/test_cgmctl.sh tests/cgmctl/lib.sh
	CGMCTL=$(abspath $(CGMCTL_ASAN)) CGM_LIB=$(abspath $(LIB)) sh tests/test_cgmctl.sh

CHECK_TARGETS += check-cgmctl check-cgmctl-procs check-cgmctl-export check-cgmctl-top \
	check-cgmctl-compare check-cgmctl-mount check-cgmctl-mount-poll \
	check-cgmctl-moving check-api
ASAN_TARGETS += check-asan-cgmctl

.PHONY: check-cgmctl check-cgmctl-procs check-cgmctl-export check-cgmctl-top check-cgmctl-compare \
	check-cgmctl-mount check-cgmctl-mount-poll \
	check-cgmctl-moving check-api \
	check-asan-cgmctl \
	readme-tables readme-tables-update
