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
# Every module adds its sources and tests in its own .mk fragment.

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

WARN := -Wall -Wextra -Werror
CPPFLAGS_BASE := -Iinclude -D_GNU_SOURCE
CFLAGS_BASE := -std=c11 -O2 -g -fPIC -fvisibility=hidden $(WARN)
CXXFLAGS_BASE := -std=c++17 -O2 -g $(WARN)
# The library's own calls into mimalloc go through the GOT, not a PLT stub
# (one instruction less on every malloc), and every symbol is bound at load
# time so that no lazy-binding resolver runs inside malloc.
LIB_CFLAGS := -fno-plt
LIB_LDFLAGS := -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined \
	-Wl,-soname,libcgmalloc.so
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

# Shared by every module's tests.
T := $(B)/tests
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
TEST_CFLAGS := -std=c11 -O1 -g $(WARN) $(CPPFLAGS_BASE)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# Tests that run the shim with accounting use a hierarchy file of their own,
# never the user's /dev/shm/cgmalloc.<uid>; make check starts it afresh.
TEST_HIER := $(abspath $(B))/test-hierarchy
TEST_CONF := hierarchy=$(TEST_HIER)
# Linked against the shim: libcgmalloc.so precedes libc in the search
# order, exactly as under LD_PRELOAD.
SHIM_LINK := -L$(B) -Wl,-rpath,$(abspath $(B)) -lcgmalloc -lmimalloc

# Each module brings its own fragment; a new one is picked up by this list.
MODULE_MKS := $(sort $(wildcard shim/*.mk accounting/*.mk zpool/*.mk \
	tools/*/*.mk tools/*.mk tests/*.mk tests/*/*.mk bench/*.mk scripts/*.mk))
include $(MODULE_MKS)

LIB_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRCS))

# `make` builds the tools that are installed with the library (cgmctl).
all: $(TOOLS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(LIB_CFLAGS) $(CFLAGS_$(subst /,_,$*)) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJS)
	$(CC) $(LIB_LDFLAGS) $(LDFLAGS) -o $@ $(LIB_OBJS) $(LIB_LIBS)

-include $(LIB_OBJS:.o=.d)

deps:
	@scripts/install-deps

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory check-run

check-run: check-fresh-hierarchy $(CHECK_TARGETS)
	@echo "make check: all tests passed"

check-fresh-hierarchy:
	rm -f $(TEST_HIER)

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

.PHONY: all deps run check check-run check-fresh-hierarchy check-asan bench stress install clean
.DELETE_ON_ERROR:
