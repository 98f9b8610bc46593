# bench/: spilling on real programs with cold data (`make
# bench-spill-workload`, part of `make bench`): python3 holding a dict of
# which 80% is never read again, sqlite3 with a cache of which 80% is never
# read again, without a limit and with spill=1 under memory.high at half
# their peak.  Results: bench/RESULTS-spill-workload.md.

bench-spill-workload: $(LIB) $(CGMCTL) bench/spill_workload.sh bench/spill_dict.py bench/spill_sqlite.sql
	bench/spill_workload.sh $(B)

BENCH_TARGETS += bench-spill-workload
.PHONY: bench-spill-workload

# The kernel's own memory cgroup and zswap on the same python3, next to
# spill=1, and the kernel's refault from zswap next to a spilled page's
# (`make bench-spill-kernel`; root, and not part of `make bench`: it turns
# zswap on and may add a swap file while it runs).  Results:
# bench/RESULTS-spill-kernel.md.
bench-spill-kernel: $(LIB) $(CGMCTL) $(B)/bench/spill_bench bench/spill_kernel.sh bench/spill_dict.py bench/await.sh
	bench/spill_kernel.sh $(B)

.PHONY: bench-spill-kernel
