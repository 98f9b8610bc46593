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
