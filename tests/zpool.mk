# tests/: zpool's unit, model, stress and fault-injection tests.
# Linked with libcgmzpool.a and shim/log.c (cgm_log); no shim needed.
# This fragment is read before zpool/zpool.mk: prerequisites name files
# directly, and flags from there are expanded late (=).

ZPT := $(B)/tests/zpool
ZPT_LIB := $(B)/libcgmzpool.a
ZPT_SUPPORT := tests/zpool_pages.c shim/log.c
ZPT_DEPS := $(ZPT_SUPPORT) tests/zpool_pages.h include/cgm/zpool.h \
	include/cgm/zp_types.h
ZPT_CFLAGS = -std=c11 -O2 -g $(WARN) $(CPPFLAGS_BASE) $(ZPOOL_CFLAGS) -Itests
ZPT_LIBS = $(ZPOOL_LIBS)

$(ZPT)/test_zpool: tests/test_zpool.c $(ZPT_LIB) $(ZPT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(ZPT_SUPPORT) $(ZPT_LIB) $(ZPT_LIBS) $(CHECK_LIBS)

check-zpool: $(ZPT)/test_zpool
	$(ZPT)/test_zpool

.PHONY: check-zpool

$(ZPT)/test_zpool_model: tests/test_zpool_model.c $(ZPT_LIB) $(ZPT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) -o $@ $< $(ZPT_SUPPORT) $(ZPT_LIB) $(ZPT_LIBS)

check-zpool-model: $(ZPT)/test_zpool_model
	$(ZPT)/test_zpool_model

.PHONY: check-zpool-model

$(ZPT)/test_zpool_stress: tests/test_zpool_stress.c $(ZPT_LIB) $(ZPT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) -pthread -o $@ $< $(ZPT_SUPPORT) $(ZPT_LIB) $(ZPT_LIBS)

check-zpool-stress: $(ZPT)/test_zpool_stress
	$(ZPT)/test_zpool_stress

.PHONY: check-zpool-stress

# The stress test and the pool itself under ThreadSanitizer (clang).
ZPT_TSAN_FLAGS := -fsanitize=thread -O1 -g -fno-omit-frame-pointer
$(ZPT)/tsan/test_zpool_stress: tests/test_zpool_stress.c $(ZPT_DEPS) \
		$(wildcard zpool/*.c)
	@mkdir -p $(dir $@)
	clang $(ZPT_CFLAGS) $(ZPT_TSAN_FLAGS) -pthread -o $@ $< $(ZPT_SUPPORT) \
		$(ZPOOL_SRCS) $(ZPT_LIBS)

check-tsan-zpool: $(ZPT)/tsan/test_zpool_stress
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" $(ZPT)/tsan/test_zpool_stress 20000

.PHONY: check-tsan-zpool

$(ZPT)/test_zpool_fault: tests/test_zpool_fault.c $(ZPT_LIB) $(ZPT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) -o $@ $< $(ZPT_SUPPORT) $(ZPT_LIB) $(ZPT_LIBS)

check-zpool-fault: $(ZPT)/test_zpool_fault
	$(ZPT)/test_zpool_fault

.PHONY: check-zpool-fault

# The unit, model and fault tests with the pool built under ASan+UBSan.
ZPT_ASAN_SRCS = $(ZPT_SUPPORT) $(ZPOOL_SRCS)
$(ZPT)/asan/%: tests/%.c $(ZPT_DEPS) $(wildcard zpool/*.c)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) $(ASAN_FLAGS) $(CHECK_CFLAGS) -pthread -o $@ $< \
		$(ZPT_ASAN_SRCS) $(ZPT_LIBS) $(CHECK_LIBS)

check-asan-zpool: $(ZPT)/asan/test_zpool $(ZPT)/asan/test_zpool_model \
		$(ZPT)/asan/test_zpool_fault $(ZPT)/asan/test_zpool_stress
	$(ZPT)/asan/test_zpool
	$(ZPT)/asan/test_zpool_model 20000
	$(ZPT)/asan/test_zpool_fault
	$(ZPT)/asan/test_zpool_stress 10000

.PHONY: check-asan-zpool

# Long runs for `make stress`.
stress-zpool: $(ZPT)/test_zpool_model $(ZPT)/test_zpool_stress \
		$(ZPT)/tsan/test_zpool_stress
	$(ZPT)/test_zpool_model 400000 $$(date +%s)
	$(ZPT)/test_zpool_stress 1000000 $$(date +%s)
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" $(ZPT)/tsan/test_zpool_stress 200000

CHECK_TARGETS += check-zpool check-zpool-model check-zpool-stress \
	check-zpool-fault check-tsan-zpool
ASAN_TARGETS += check-asan-zpool
STRESS_TARGETS += stress-zpool
.PHONY: stress-zpool

$(ZPT)/test_zpool_nomalloc: tests/test_zpool_nomalloc.c $(ZPT_LIB) $(ZPT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ZPT_CFLAGS) -o $@ $< $(ZPT_SUPPORT) $(ZPT_LIB) $(ZPT_LIBS)

check-zpool-nomalloc: $(ZPT)/test_zpool_nomalloc
	$(ZPT)/test_zpool_nomalloc 2>/dev/null

CHECK_TARGETS += check-zpool-nomalloc
.PHONY: check-zpool-nomalloc
