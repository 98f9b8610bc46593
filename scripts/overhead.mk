# scripts/: the overhead harness, scripts/cgm-overhead (Python 3, Debian's
# python3, standard library only) and its spawn helper.

OVERHEAD_PKG := scripts/cgm_overhead
OVERHEAD_SPAWN := $(B)/cgm-overhead-spawn

# The harness looks for the helper next to the libcgmalloc.so it measures.
$(OVERHEAD_SPAWN): $(OVERHEAD_PKG)/spawn.c
	@mkdir -p $(B)
	$(CC) -std=c11 -O2 -g $(CWARN) $(TEST_DEPFLAGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

all: $(OVERHEAD_SPAWN)

TOOLS += scripts/cgm-overhead

# Installed: the script in BINDIR, its modules and helper in
# LIBDIR/cgmalloc/, where the script looks (../lib/cgmalloc from BINDIR).
install: install-overhead
install-overhead: $(OVERHEAD_SPAWN)
	install -d $(DESTDIR)$(LIBDIR)/cgmalloc/cgm_overhead
	install -m 0644 $(OVERHEAD_PKG)/*.py $(DESTDIR)$(LIBDIR)/cgmalloc/cgm_overhead/
	install -m 0755 $(OVERHEAD_SPAWN) $(DESTDIR)$(LIBDIR)/cgmalloc/

.PHONY: install-overhead

# Tests of the harness: statistics against known answers, the interleaving,
# bad input, and a tiny workload end to end under every configuration.
check-overhead: $(LIB) $(OVERHEAD_SPAWN) $(B)/bench/churn
	$(RUN) env CGM_BUILD=$(B) /usr/bin/python3 tests/test_overhead.py

CHECK_TARGETS += check-overhead
.PHONY: check-overhead
