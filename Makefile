# cgmalloc — plain GNU make.
#
#   make                 build build/libcgmalloc.so (and the tools)
#   make run             install what is missing, build, run the demo
#   make check           install what is missing, build, run every test
#   make check-asan      the non-preload tests under AddressSanitizer+UBSan
#   make bench           benchmarks; results in bench/RESULTS.md
#   make stress          long stress runs
#   make install PREFIX=/usr/local DESTDIR=
#
# The modules are static archives built once per flavour (below) and
# linked by the library, the tools, the tests, the fuzzers and the
# benches.  Each module and each test area adds its sources and targets in
# its own .mk fragment; MODULE_MKS says in which order they are read.

ifeq ($(origin CC),default)
CC := gcc
endif
ifeq ($(origin CXX),default)
CXX := $(if $(findstring clang,$(CC)),clang++,g++)
endif

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
DESTDIR ?=

B := build
LIB := $(B)/libcgmalloc.so

# C code must declare in a header every function it uses across files:
# -Wmissing-prototypes makes the compiler check it.
WARN := -Wall -Wextra -Werror
CWARN := $(WARN) -Wmissing-prototypes
CPPFLAGS_BASE := -Iinclude -D_GNU_SOURCE
CFLAGS_BASE := -std=c11 -O2 -g -fPIC -fvisibility=hidden $(CWARN)
CXXFLAGS_BASE := -std=c++17 -O2 -g $(WARN)
# The library is linked for lazy binding: bound at load time, its ~130
# imports cost /bin/true about 700 instructions each (the dynamic
# loader's symbol lookups), most of the start-up budget.  The files
# below call through the GOT instead of a PLT stub (-fno-plt), so what
# they call is bound at load time: whatever malloc and free can run (one
# instruction less on every call into mimalloc, and no resolver inside
# malloc, which may take the loader's lock and allocate), the signal
# handlers, and the guards of close() and dup2(), which programs call
# from signal handlers and forked children (no resolver on a small
# alternate stack).  What stays lazy is start-up, exit, the API and the
# spiller; with spill=1 the spiller binds it all as it starts, before a
# page can spill (shim/bind_now.c says why).  As in any lazily bound
# library, a first call binds to the first definition in the global
# scope at that time, which a dlopen(RTLD_GLOBAL) may have added.
LIB_CFLAGS :=
BIND_AT_LOAD := shim/interpose.c shim/accounted.c shim/new_delete.c shim/glibc_extras.c \
	shim/thread_start.c shim/resident.c shim/self_proc.c shim/regions.c shim/mi_purge.c shim/large_park.c shim/epoch.c \
	shim/moving.c shim/static_key.c shim/static_key_sync.c $(wildcard accounting/*.c) \
	base/log.c base/proc_maps.c \
	shim/core_dump.c shim/static_key_x86_64.c shim/static_key_aarch64.c shim/fd_guard.c
lib_obj_flags = $(CFLAGS_$(subst /,_,$(1))) $(if $(filter $(1).c,$(BIND_AT_LOAD)),-fno-plt)
# Each function a section of its own, so that the library's linker script
# (scripts/lib-ld-script, from the list shim/hot-text.ld that
# scripts/hot-text makes) can put the ones an ordinary program runs
# together: the kernel maps a library's code 64 KiB around each page that
# faults.
LIB_CFLAGS += -ffunction-sections
HOT_TEXT_LD := shim/hot-text.ld
WARM_TEXT_LD := shim/warm-text.ld
LIB_LD_SCRIPT := $(B)/libcgmalloc.ld
# Relative relocations packed (DT_RELR, glibc 2.36): the dynamic loader
# reads 96 bytes instead of 9 KiB of them, and the pages they fill are
# not resident in every process.  Segments aligned to 64 KiB (the loader
# aligns the library at least so, 2 MiB with LIB_LOAD_ALIGN below): the
# hot code then starts where a fault-around window does, wherever the
# library is loaded.
LIB_LDFLAGS_BASE := -shared -Wl,-z,lazy -Wl,-z,relro -Wl,--no-undefined -Wl,-z,max-page-size=0x10000 \
	-Wl,-z,pack-relative-relocs -Wl,-soname,libcgmalloc.so
LIB_LDFLAGS := $(LIB_LDFLAGS_BASE) -Wl,-T,$(LIB_LD_SCRIPT)
# The loader aligns the library's image to 2 MiB: each build of the
# library is linked aside, the alignment of its first segment raised
# (scripts/load_align.c says why), and only then put in place.
LIB_LOAD_ALIGN := 0x200000
LOAD_ALIGN := $(B)/load-align
# $(call link_lib,OBJECTS): the recipe that links a build of the library as $@.
link_lib = $(CC) $(LIB_LDFLAGS) $(LDFLAGS) -o $@.tmp $(1) $(LIB_ARCHIVES) $(LIB_LIBS) && \
	$(LOAD_ALIGN) $(LIB_LOAD_ALIGN) $@.tmp && mv $@.tmp $@
# Not $(ZPOOL_LIBS): the library loads those when spilling starts
# (shim/lazy_libs.c), so a program that never spills does not pay for them.
LIB_LIBS := -lmimalloc -lpthread -ldl

CFLAGS ?=
LDFLAGS ?=

# Filled in by the fragments.
LIB_SRCS :=
TOOLS :=
CHECK_TARGETS :=
ASAN_TARGETS :=
BENCH_TARGETS :=
STRESS_TARGETS :=
CLEAN_FILES :=

all: $(LIB)

# ---- flavours of the module archives ----
#
# plain: the library, the tools and most tests (the library's own flags);
# asan: gcc with AddressSanitizer+UBSan; tsan: clang with ThreadSanitizer;
# fuzz: clang with libFuzzer's coverage and ASan+UBSan.  A module is
# compiled once per flavour that some target links: $(call archives,
# FLAVOUR,MODULES) names the archives, in link order.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_CC ?= clang
OBJDIR_plain := $(B)/obj
OBJDIR_asan := $(B)/obj-asan
OBJDIR_tsan := $(B)/obj-tsan
OBJDIR_fuzz := $(B)/obj-fuzz
ARDIR_plain := $(B)
ARDIR_asan := $(B)/asan
ARDIR_tsan := $(B)/tsan
ARDIR_fuzz := $(B)/fuzz
FLAVOUR_CC_asan = $(CC)
FLAVOUR_CC_tsan = clang
FLAVOUR_CC_fuzz = $(FUZZ_CC)
FLAVOUR_FLAGS := -std=c11 -O1 -g -fPIC $(CWARN) -fno-omit-frame-pointer
FLAVOUR_FLAGS_asan := $(ASAN_FLAGS)
FLAVOUR_FLAGS_tsan := -fsanitize=thread
FLAVOUR_FLAGS_fuzz := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all

archives = $(foreach m,$(2),$(ARDIR_$(1))/libcgm$(m).a)

# A newline, to run a command per item of a list: $(foreach x,L,cmd $(x)$(newline)).
define newline


endef

# The library's objects are rebuilt, and the library relinked, when the
# flags they were built with change (-ffunction-sections matters to the
# layout of shim/hot-text.ld).
LIB_FLAGS_STAMP := $(B)/obj/.flags
LIB_FLAGS_NOW := $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(LIB_CFLAGS) $(BIND_AT_LOAD) $(CFLAGS) $(LIB_LDFLAGS) $(LDFLAGS) $(LIB_LOAD_ALIGN)
$(shell mkdir -p $(B)/obj && echo '$(LIB_FLAGS_NOW)' | cmp -s - $(LIB_FLAGS_STAMP) || \
	echo '$(LIB_FLAGS_NOW)' > $(LIB_FLAGS_STAMP))

$(B)/obj/%.o: %.c $(LIB_FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(LIB_CFLAGS) $(call lib_obj_flags,$*) $(CFLAGS) -MMD -MP -c -o $@ $<

define flavour_objects
$(OBJDIR_$(1))/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(FLAVOUR_CC_$(1)) $$(CPPFLAGS_BASE) $$(FLAVOUR_FLAGS) $$(FLAVOUR_FLAGS_$(1)) -MMD -MP -c -o $$@ $$<
endef
$(foreach f,asan tsan fuzz,$(eval $(call flavour_objects,$(f))))

# $(call module_archive,MODULE,FLAVOUR): the rule of one archive; the
# module's sources are $(MODULE_SRCS), set by its fragment.
define module_archive
$(ARDIR_$(2))/libcgm$(1).a: $$(patsubst %.c,$(OBJDIR_$(2))/%.o,$$($(1)_SRCS))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	$$(AR) rcs $$@ $$^
endef
MODULES :=

# Shared by every module's tests.
T := $(B)/tests
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
TEST_CFLAGS := -std=c11 -O1 -g $(CWARN) $(CPPFLAGS_BASE)
# Test programs list their headers through the compiler, like objects.
TEST_DEPFLAGS = -MMD -MP -MF $@.d
# Linked against the shim: libcgmalloc.so precedes libc in the search
# order, exactly as under LD_PRELOAD.
SHIM_LINK := -L$(B) -Wl,-rpath,$(abspath $(B)) -lcgmalloc -lmimalloc

# Every test command runs through tests/run-test: exit 0 passes, 77 is a
# skip (reported as one, never counted as passed), anything else fails.
# Each target that runs the shim with accounting gets a hierarchy file of
# its own, which run-test removes first: a test never sees another's
# groups, and `make -j` runs them side by side.
TEST_HIER_DIR := $(abspath $(B))/test-hier
TEST_HIER = $(TEST_HIER_DIR)/$@
TEST_CONF = hierarchy=$(TEST_HIER)
CHECK_RESULTS := $(abspath $(B))/check-results
RUN = @CGM_CHECK_RESULTS=$(CHECK_RESULTS) CGM_TEST_HIER=$(TEST_HIER) tests/run-test $@ --

# The fragments, in the order that their variables need: the base below
# everything, then accounting, the pool, the shim on top, the tools, and
# the tests and benches that use them all.
MODULE_MKS := base/base.mk accounting/accounting.mk zpool/zpool.mk shim/shim.mk \
	tools/cgmctl/cgmctl.mk scripts/overhead.mk \
	tests/tests.mk tests/static_key.mk tests/accounting.mk tests/zpool.mk \
	tests/runtime.mk tests/preload/preload.mk tests/reliability/reliability.mk \
	tests/fidelity/fidelity.mk tests/spill/spill.mk tests/pressure/pressure.mk tests/policy/policy.mk \
	tests/fuzz/fuzz.mk \
	bench/bench.mk bench/insn.mk bench/zpool.mk bench/spill.mk bench/spill_workload.mk
include $(MODULE_MKS)

$(foreach m,$(MODULES),$(foreach f,plain asan tsan fuzz,$(eval $(call module_archive,$(m),$(f)))))

LIB_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRCS))
LIB_ARCHIVES := $(call archives,plain,acct zpool base)

# `make` builds the tools that are installed with the library (cgmctl).
all: $(TOOLS)

$(LIB_LD_SCRIPT): $(HOT_TEXT_LD) $(WARM_TEXT_LD) scripts/lib-ld-script $(LIB_FLAGS_STAMP)
	@mkdir -p $(dir $@)
	scripts/lib-ld-script "$(CC) $(LIB_LDFLAGS_BASE) $(LDFLAGS)" $(HOT_TEXT_LD) $(WARM_TEXT_LD) > $@.tmp
	mv $@.tmp $@

$(LOAD_ALIGN): scripts/load_align.c
	@mkdir -p $(B)
	$(CC) -std=c11 -O2 $(CWARN) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

$(LIB): $(LIB_OBJS) $(LIB_ARCHIVES) $(LIB_LD_SCRIPT) $(LIB_FLAGS_STAMP) $(LOAD_ALIGN)
	$(call link_lib,$(LIB_OBJS))

deps:
	@scripts/install-deps

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory check-run

# check-start comes first (order-only: it never makes a test out of date).
$(CHECK_TARGETS): | check-start
check-start:
	@mkdir -p $(B) $(TEST_HIER_DIR)
	@rm -f $(CHECK_RESULTS)

check-run: $(CHECK_TARGETS)
	@tests/check-summary $(CHECK_RESULTS)

check-asan: deps $(ASAN_TARGETS)
	@echo "make check-asan: all tests passed"

bench: deps all $(BENCH_TARGETS)
	bench/merge-results

stress: deps all $(STRESS_TARGETS)

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/libcgmalloc.so
	install -m 0644 include/cgmalloc.h $(DESTDIR)$(INCLUDEDIR)/cgmalloc.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    cgmalloc.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/cgmalloc.pc
	$(if $(TOOLS),install -m 0755 $(TOOLS) $(DESTDIR)$(BINDIR)/)

VERSION := $(shell sed -n 's/^\#define CGMALLOC_VERSION "\(.*\)"/\1/p' include/cgmalloc.h)

clean:
	rm -rf $(B) $(CLEAN_FILES)

# What every object and test program was built from (-MMD).
-include $(shell find $(B) -name '*.d' 2>/dev/null)

.PHONY: all deps run check check-run check-start check-asan bench stress install clean
.DELETE_ON_ERROR:
