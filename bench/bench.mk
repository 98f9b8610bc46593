# bench/: allocator workloads and `make bench` (the overhead harness over them).
#
# The workloads are ordinary programs linked against nothing of ours: the
# harness (scripts/cgm-overhead) preloads each allocator configuration.

BENCH_BIN := $(B)/bench
BENCH_C := churn threads prodcons realloc large \
	larson tchurn replay gbench bignum xmalloc mstress
BENCH_CXX := cxxmap
BENCH_PROGS := $(addprefix $(BENCH_BIN)/,$(BENCH_C) $(BENCH_CXX))
BENCH_CFLAGS = -std=c11 -O2 -g -pthread $(CWARN) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS)

$(addprefix $(BENCH_BIN)/,$(BENCH_C)): $(BENCH_BIN)/%: bench/%.c
	@mkdir -p $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) $(CFLAGS) -o $@ $<

$(BENCH_BIN)/cxxmap: bench/cxxmap.cc
	@mkdir -p $(BENCH_BIN)
	$(CXX) $(CXXFLAGS_BASE) $(CPPFLAGS_BASE) $(TEST_DEPFLAGS) -o $@ $<

bench-progs: $(BENCH_PROGS)

# Runs of every workload under every configuration; raw results (JSON,
# plots) in $(B)/bench/results, the summary in bench/RESULTS.md.
# BENCH_N runs per configuration (default in bench/run-bench).  The
# count-only build (its rules in bench/insn.mk) is configuration floor.
COUNTONLY_LIB := $(B)/bench/countonly/libcgmalloc.so
bench-overhead: $(BENCH_PROGS) $(LIB) $(OVERHEAD_SPAWN) $(COUNTONLY_LIB)
	bench/run-bench --build $(B) --floor $(COUNTONLY_LIB) $(if $(BENCH_N),-n $(BENCH_N))

BENCH_TARGETS += bench-overhead
.PHONY: bench-progs bench-overhead

# What fork costs, accounting off and on, against Debian's mimalloc.
$(BENCH_BIN)/forks: bench/forks.c
	@mkdir -p $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) $(CFLAGS) -o $@ $<

bench-fork: $(BENCH_BIN)/forks $(LIB)
	bench/fork_bench.sh $(B) > bench/RESULTS-fork.md
	cat bench/RESULTS-fork.md

BENCH_TARGETS += bench-fork
.PHONY: bench-fork

# What counting a mapping's resident pages costs by mincore and by
# PAGEMAP_SCAN (shim/regions.c takes the scan for sparse regions).
$(BENCH_BIN)/resident_scan: bench/resident_scan.c include/cgm/uffd_abi.h
	@mkdir -p $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) $(CFLAGS) -o $@ $<

bench-resident: $(BENCH_BIN)/resident_scan
	{ $(BENCH_BIN)/resident_scan || [ $$? = 77 ]; } > bench/RESULTS-resident.md
	cat bench/RESULTS-resident.md

BENCH_TARGETS += bench-resident
.PHONY: bench-resident

# cgmalloc's memory.current against the kernel's memcg, workload by
# workload (cgmctl compare; skipped where no kernel memory cgroup is
# writable).
bench-fidelity: $(CGMCTL) $(LIB) $(B)/tests/fidelity/fid_prog $(B)/tests/preload/cxx_workload
	bench/fidelity.sh $(B) > bench/RESULTS-fidelity.md
	cat bench/RESULTS-fidelity.md

BENCH_TARGETS += bench-fidelity
.PHONY: bench-fidelity
