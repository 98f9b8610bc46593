# tests/: the shim at run time -- stress, awkward calling contexts, C++.
#
# Every program here is linked with $(SHIM_LINK), so libcgmalloc.so comes
# first in the symbol search order as it does under LD_PRELOAD, and each one
# checks that the shim is really active.  tests/preload/ has the tests on
# unmodified programs.

RT := $(B)/tests
RT_CFLAGS = $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread
# -fsized-deallocation: clang 14 leaves sized delete off by default; g++ has it on.
RT_CXXFLAGS = -std=c++17 -O1 -g $(WARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -pthread -fsized-deallocation
# Helper libraries: position independent, default visibility.
RT_SOFLAGS = -std=c11 -O1 -g -fPIC -shared $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS)

# Operations per stress thread: about 20 s a run in `make check` here
# (2026-12-06: 40,000 took 34-42 s, most of it system time -- mimalloc's
# mprotect calls with eight threads faulting -- so make check came to
# 13.4 minutes), about 6 minutes in `make stress` (a fresh seed each
# time, printed on failure as the third argument).
STRESS_OPS_CHECK ?= 20000
STRESS_OPS_LONG ?= 2000000
STRESS_FORKS_LONG ?= 40

$(RT)/stress_malloc: tests/stress_malloc.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-stress: $(RT)/stress_malloc
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/stress_malloc $(STRESS_OPS_CHECK) 4 1
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF),free_path=mixed $(RT)/stress_malloc $(STRESS_OPS_CHECK) 2 2

stress-malloc-long: $(RT)/stress_malloc
	@mkdir -p $(TEST_HIER_DIR)
	rm -f $(TEST_HIER)
	CGMALLOC_CONF=$(TEST_CONF) $(RT)/stress_malloc $(STRESS_OPS_LONG) $(STRESS_FORKS_LONG) $$(date +%s)

.PHONY: check-stress stress-malloc-long

# mimalloc's heap walk after the accounted free did its local frees.
$(RT)/test_local_free: tests/test_local_free.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-local-free: $(RT)/test_local_free
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_local_free 4

CHECK_TARGETS += check-local-free
.PHONY: check-local-free

# The accounted malloc pops blocks off the page mimalloc's heap names, in every thread.
$(RT)/test_alloc_pop: tests/test_alloc_pop.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-alloc-pop: $(RT)/test_alloc_pop
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_alloc_pop on
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF),alloc_pop=0 $(RT)/test_alloc_pop off

CHECK_TARGETS += check-alloc-pop
.PHONY: check-alloc-pop

# The accounted free's two paths count the same; auto picks the branch-free one for a mix.
$(RT)/test_free_path: tests/test_free_path.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-free-path: $(RT)/test_free_path $(RT)/test_local_free
	$(RUN) sh tests/test_free_path.sh $(RT)/test_free_path $(TEST_HIER)
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF),free_path=mixed $(RT)/test_local_free 4

CHECK_TARGETS += check-free-path
.PHONY: check-free-path

# A small process maps only the pages of the hierarchy file it uses.
$(RT)/test_hier_rss: tests/test_hier_rss.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

# The second run: the probe makes a group beside 150 others (tests/test_hier_rss.c).
HIER_RSS_SIBLINGS = 150
check-hier-rss: $(RT)/test_hier_rss $(CGMCTL)
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_hier_rss
	$(RUN) sh -c 'for i in $$(seq $(HIER_RSS_SIBLINGS)); do \
		$(CGMCTL) --hierarchy $(TEST_HIER) mkdir /siblings/s$$i >/dev/null || exit 1; done; \
		env CGMALLOC_CONF=$(TEST_CONF) HIER_RSS_PROBE_GROUP=/siblings/probe $(RT)/test_hier_rss'

CHECK_TARGETS += check-hier-rss
.PHONY: check-hier-rss

# A process has only the library's hot code resident (shim/hot-text.ld).
$(RT)/test_text_rss: tests/test_text_rss.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -DLIB_LOAD_ALIGN=$(LIB_LOAD_ALIGN) -o $@ $< $(SHIM_LINK)

$(RT)/libexit_rss.so: tests/libexit_rss.c tests/smaps_rss.h
	@mkdir -p $(RT)
	$(CC) $(RT_SOFLAGS) -o $@ $<

# The second run has limits (a scope of its own, memory.high and max: more
# code at start-up and on large blocks); the third measures after the
# library's exit path (tests/libexit_rss.c); then python3 and sqlite3
# under limits, after theirs: what they run that callgrind cannot see
# (a static key patched at run time, sqlite3's frees: shim/warm-text.ld)
# had them at 128 KiB; and python3 with spill=1 and nothing to spill, its
# background reclaim looking once (168 KiB before that list; where spill=1
# is refused, it runs and is measured without).  python3 under limits runs
# again as on a machine with two NUMA nodes (tests/two-nodes): there each
# sample divides the anon between the nodes, and a 128-bit division
# (libgcc's, at the end of the code) had it at 104-128 KiB (CI's
# machines, include/cgm/mul_div.h).
TEXT_RSS_LIMITS = CGMALLOC_CONF=$(TEST_CONF),high=1G,max=2G
TEXT_RSS_EXIT = LD_PRELOAD=$(abspath $(LIB)):$(abspath $(RT))/libexit_rss.so
check-text-rss: $(RT)/test_text_rss $(RT)/libexit_rss.so
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_text_rss
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF),high=64M,max=128M $(RT)/test_text_rss
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) \
		LD_PRELOAD=$(abspath $(LIB)):$(abspath $(RT))/libexit_rss.so $(RT)/test_text_rss exit
	$(RUN) env $(TEXT_RSS_LIMITS) $(TEXT_RSS_EXIT) \
		/usr/bin/python3 -c 'd = {i: str(i) * (i % 300) for i in range(30000)}'
	$(RUN) tests/two-nodes env $(TEXT_RSS_LIMITS) $(TEXT_RSS_EXIT) \
		/usr/bin/python3 -c 'd = {i: str(i) * (i % 300) for i in range(30000)}'
	$(RUN) env $(TEXT_RSS_LIMITS) $(TEXT_RSS_EXIT) sqlite3 :memory: '.read bench/sqlite.sql' >/dev/null
	$(RUN) env $(TEXT_RSS_LIMITS),spill=1 $(TEXT_RSS_EXIT) /usr/bin/python3 -c \
		'import time; d = {i: str(i) * (i % 300) for i in range(30000)}; time.sleep(0.7)'

CHECK_TARGETS += check-text-rss
.PHONY: check-text-rss

# ---- awkward calling contexts (Check) ----

$(RT)/libdlalloc.so: tests/libdlalloc.c
	@mkdir -p $(RT)
	$(CC) $(RT_SOFLAGS) -o $@ $<

$(RT)/libearly.so: tests/libearly.c tests/libearly.h
	@mkdir -p $(RT)
	$(CC) $(RT_SOFLAGS) -pthread -o $@ $<

$(RT)/test_runtime: tests/test_runtime.c tests/libearly.h include/cgmalloc.h $(LIB) \
		$(RT)/libdlalloc.so $(RT)/libearly.so
	$(CC) $(RT_CFLAGS) $(CHECK_CFLAGS) -DDLALLOC_PATH='"$(abspath $(RT))/libdlalloc.so"' \
		-o $@ $< $(SHIM_LINK) $(CHECK_LIBS)

# libearly.so is preloaded after the shim: glibc runs its constructor first.
check-runtime: $(RT)/test_runtime
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) LD_PRELOAD=$(abspath $(LIB)):$(abspath $(RT))/libearly.so \
		$(RT)/test_runtime

.PHONY: check-runtime

# ---- C++ operators ----

$(RT)/test_new: tests/test_new.cc include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CXX) $(RT_CXXFLAGS) -o $@ $< $(SHIM_LINK)

check-new: $(RT)/test_new
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_new

.PHONY: check-new

CHECK_TARGETS += check-stress check-runtime check-new
STRESS_TARGETS += stress-malloc-long

# ---- the test programs themselves under AddressSanitizer+UBSan ----
# ASan brings its own allocator, so these are built without the shim: they
# show that a failure of the shim-linked runs is the allocator's, not a bug
# of the test (a use after free, a wrong sized delete, an overrun).  The
# stress program was also run clean under ThreadSanitizer (not wired: slow).

$(RT)/asan/stress_malloc: tests/stress_malloc.c
	@mkdir -p $(RT)/asan
	$(CC) $(RT_CFLAGS) $(ASAN_FLAGS) -DSTRESS_NO_SHIM -o $@ $<

$(RT)/asan/test_new: tests/test_new.cc
	@mkdir -p $(RT)/asan
	$(CXX) $(RT_CXXFLAGS) $(ASAN_FLAGS) -DTEST_NEW_NO_SHIM -o $@ $<

# No forks in the ASan run: a child forked while other threads hold
# ASan's allocator locks can hang in ASan itself (seen here with gcc 12's
# libasan, without the shim); fork under threads is tested with the shim.
check-asan-runtime: $(RT)/asan/stress_malloc $(RT)/asan/test_new
	$(RT)/asan/stress_malloc 3000 0 1
	$(RT)/asan/test_new

ASAN_TARGETS += check-asan-runtime
.PHONY: check-asan-runtime

# The accounted free's retirement of an emptied page, against mimalloc's.
$(RT)/test_page_retire: tests/test_page_retire.c include/cgmalloc.h $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-page-retire: $(RT)/test_page_retire
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_page_retire on
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF),free_path=mixed $(RT)/test_page_retire on
	$(RUN) env CGMALLOC_CONF=accounting=0 $(RT)/test_page_retire off

CHECK_TARGETS += check-page-retire
.PHONY: check-page-retire

# A freed large block above the purge bar: reused by the next large
# allocation, else gone after the thread's next slow paths or its exit.
$(RT)/test_large_park: tests/test_large_park.c $(LIB)
	@mkdir -p $(RT)
	$(CC) $(RT_CFLAGS) -o $@ $< $(SHIM_LINK)

check-large-park: $(RT)/test_large_park
	$(RUN) env CGMALLOC_CONF=$(TEST_CONF) $(RT)/test_large_park

CHECK_TARGETS += check-large-park
.PHONY: check-large-park
