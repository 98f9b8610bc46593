#!/bin/sh
# Run the spill engine benchmark and write bench/RESULTS-spill.md.
# usage: bench/spill_bench.sh [BUILD_DIR] [ROUNDS] [PAGES]
set -eu

B=${1:-build}
ROUNDS=${2:-10}
PAGES=${3:-4096}
BIN=$B/bench/spill_bench
# The zpool benchmark's page file: both benches measure the same pages.
PAGEFILE=$B/zpool-heap.pages
OUT=bench/RESULTS-spill.md
RAW=$B/spill-bench.txt
ERR=$B/spill-bench.err
GOAL_US=15

"$BIN" "$PAGEFILE" "$B" "$ROUNDS" "$PAGES" > "$RAW" 2> "$ERR"
# The scattered spills in a process of their own (see make_steps()).
if ! grep -q '^unavailable' "$RAW"; then
	"$BIN" "$PAGEFILE" "$B" "$ROUNDS" "$PAGES" scattered >> "$RAW" 2>> "$ERR"
	# Without the CPU latency request, in a process of its own (see sides[]).
	"$BIN" "$PAGEFILE" "$B" "$ROUNDS" "$PAGES" halting >> "$RAW" 2>> "$ERR"
fi

machine="$(nproc) vCPUs, kernel $(uname -r), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); $(date -u +%Y-%m-%d)"
# How long an idle vCPU polls before it halts (a KVM guest's cpuidle-haltpoll;
# empty elsewhere): the faulting thread sleeps while the handler works, and
# waking a halted vCPU is most of a refault.  Read, never changed.
halt_poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || true)
[ -n "$halt_poll" ] && machine="$machine; cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_governor_ro 2>/dev/null || echo unknown), guest_halt_poll_ns $halt_poll"
# The hypervisor, where the kernel's log says (it may be unreadable): under
# one that keeps shadow page tables (PVM) the first touch of every new
# page-table entry is a trip to the host, 5 us here -- part of each
# refault, and of a spill that reads its page where it was moved to.
hv=$(dmesg 2>/dev/null | sed -n 's/.*Hypervisor detected: *//p' | head -n 1)
[ -n "$hv" ] && machine="$machine; hypervisor $hv"

if grep -q '^unavailable ' "$RAW"; then
	why=$(sed -n 's/^unavailable //p' "$RAW")
	detail=$(grep '^cgmalloc: spill:' "$ERR" | head -1 || true)
	{
		echo "# Spill engine benchmark"
		echo
		echo "Not measured: $why${detail:+ ($detail)}."
		echo
		echo "Machine: $machine."
	} > "$OUT"
	echo "bench-spill: not measured: $why"
	exit 0
fi

val() { sed -n "s/^$1 //p" "$RAW"; }
# Field $3 of the "lat NAME THREADS ..." line: 4 samples, 5 p50, 6 p99,
# 7 p99.9, 8 and 9 the least and greatest round p50, 10 the mean.
lat() { awk -v n="$1" -v t="$2" -v f="$3" '$1 == "lat" && $2 == n && $3 == t { print $f }' "$RAW"; }
# Field $2 of the "tput NAME median least greatest" line: 3, 4, 5.
tput() { awk -v n="$1" -v f="$2" '$1 == "tput" && $2 == n { print $f }' "$RAW"; }
lat_row() {	# label name threads
	printf '| %s | %s | %s | %s | %s | %s | %s–%s | %s |\n' "$1" "$3" \
		"$(lat "$2" "$3" 5)" "$(lat "$2" "$3" 6)" "$(lat "$2" "$3" 7)" \
		"$(lat "$2" "$3" 10)" "$(lat "$2" "$3" 8)" "$(lat "$2" "$3" 9)" \
		"$(lat "$2" "$3" 4)"
}
tput_cell() { printf '%s (%s–%s)' "$(tput "$1" 3)" "$(tput "$1" 4)" "$(tput "$1" 5)"; }

P50_1=$(lat spill-lz4 1 5)
P50_2=$(lat spill-lz4 2 5)
P50_4=$(lat spill-lz4 4 5)
RA_1=$(lat spill-lz4+readahead 1 5)
verdict=$(awk -v p="$P50_1" -v g="$GOAL_US" 'BEGIN { print (p <= g) ? "met" : "not met" }')
HALT_1=$(lat spill-lz4-halting 1 5)
BARE_1=$(lat bare-uffd 1 5)
SUMMARY="spill: refault p50 with lz4 $P50_1 us (1 thread), $P50_2 us (2), $P50_4 us (4): goal p50 <= $GOAL_US us $verdict; with readahead on sequential faults (the library's setting) $RA_1 us; without the CPU latency request (idle CPUs halting) $HALT_1 us"
[ -n "$BARE_1" ] && [ "$(lat bare-uffd 1 4)" != 0 ] &&
	SUMMARY="$SUMMARY; the bare userfaultfd round trip on this machine (a page copied in, no engine) $BARE_1 us"
BARE_SAME_1=$(lat bare-uffd-same-cpu 1 5)
[ -n "$BARE_SAME_1" ] && [ "$(lat bare-uffd-same-cpu 1 4)" != 0 ] &&
	SUMMARY="$SUMMARY, $BARE_SAME_1 us with its handler on the faulting thread's CPU"
# Every run prints its own.
MISMATCHES=$(awk '$1 == "mismatches" { n += $2 } END { print n + 0 }' "$RAW")
SETTLE_TIMEOUTS=$(awk '$1 == "settle_timeouts" { n += $2 } END { print n + 0 }' "$RAW")
QOS_ERR=$(val cpu_latency_err)
if [ "${QOS_ERR:-0}" = 0 ]; then
	QOS="held in fault bursts (the library's spill_cpu_latency=1)"
else
	QOS="not held: /dev/cpu_dma_latency could not be opened (errno $QOS_ERR; root only)"
fi

{
	echo "# Spill engine benchmark"
	echo
	echo "$SUMMARY."
	echo
	echo "Machine: $machine; a shared VM, so every figure is a median or a"
	echo "percentile over $(val rounds) rounds that interleave all configurations"
	echo "(each round runs each once, in an order rotated round by round)."
	echo "Pages: $(val pages) per configuration per round, copied from $(val heap_pages | cut -d' ' -f1)"
	echo "real heap pages of a Python program (\`$PAGEFILE\`, the zpool benchmark's),"
	echo "shifted every round; lz4 ratio $(val 'ratio lz4'), zstd $(val 'ratio zstd')."
	echo "Every page that came back was compared with what left: $MISMATCHES differed."
	echo "CPU latency request (idle CPUs poll instead of halting): $QOS."
	echo
	echo "## Refault latency seen by the faulting thread (µs; goal: p50 <= $GOAL_US with lz4)"
	echo
	echo "Spill rows: the pages are spilled (one \`spill_out\` per thread's share),"
	echo "then 1, 2 or 4 threads are released together, each walking its own"
	echo "share and reading one byte per page; each read is timed with"
	echo "\`clock_gettime(CLOCK_MONOTONIC)\`.  Kernel rows: the same timed read"
	echo "(a write for zero-fill), one thread, where the kernel brings the page"
	echo "back itself."
	echo
	echo "| refault of a dropped page | threads | p50 | p99 | p99.9 | mean | p50 per round | pages timed |"
	echo "|---|---|---|---|---|---|---|---|"
	for t in 1 2 4; do lat_row "spill, lz4" spill-lz4 $t; done
	for t in 1 2 4; do lat_row "spill, zstd" spill-zstd $t; done
	for t in 1 2 4; do lat_row "spill, lz4, readahead on sequential faults (the library's setting)" spill-lz4+readahead $t; done
	for t in 1 2 4; do lat_row "spill, lz4, idle CPUs halting (no CPU latency request: spill_cpu_latency=0)" spill-lz4-halting $t; done
	lat_row "kernel: page-cache hit (private file mapping, PTE dropped by MADV_DONTNEED)" kernel-pagecache 1
	if [ "$(val swap)" = none ]; then
		echo "| kernel: swap-in after MADV_PAGEOUT | | not available: no swap or zram device (\`/proc/swaps\` lists none) | | | | | |"
	elif [ "$(val swapped_out)" = 0 ]; then
		echo "| kernel: swap-in after MADV_PAGEOUT | | not measured: MADV_PAGEOUT left every page resident | | | | | |"
	else
		lat_row "kernel: swap-in after MADV_PAGEOUT (swap on $(awk 'NR == 2 { print $1 }' /proc/swaps))" kernel-swapin 1
	fi
	lat_row "kernel: first write to an untouched anonymous page (zero-fill)" kernel-zerofill 1
	lat_row "no fault: read of a resident page (the timing's own cost)" resident 1
	[ "$(lat moved 1 4)" != 0 ] &&
		lat_row "no fault: first read of a page UFFDIO_MOVE just moved (a new page-table entry; what a spill reading its page where it landed pays)" moved 1
	for t in 1 2 4; do
		[ "$(lat bare-uffd $t 4)" != 0 ] &&
			lat_row "bare userfaultfd round trip: a thread of the benchmark serves each fault with UFFDIO_COPY of a ready page, spinning between faults as the engine's handler does (no lookup, decompression or accounting)" bare-uffd $t
	done
	for t in 1 2 4; do
		[ "$(lat bare-uffd-two $t 4)" != 0 ] &&
			lat_row "bare userfaultfd round trip, two such serving threads reading the one userfaultfd (what a second handler thread could give)" bare-uffd-two $t
	done
	for t in 1 2 4; do
		[ "$(lat bare-uffd-two-asleep $t 4)" != 0 ] &&
			lat_row "bare userfaultfd round trip, two serving threads, the second asleep in poll() between faults instead of spinning" bare-uffd-two-asleep $t
	done
	[ "$(lat bare-uffd-same-cpu 1 4)" != 0 ] &&
		lat_row "bare userfaultfd round trip, the serving thread and the faulting one bound to one CPU, the serving thread asleep in read() between faults (a fault switches to it on that CPU: what a handler for each CPU could reach at best)" bare-uffd-same-cpu 1
	echo
	echo "The first bare userfaultfd rows are the floor under the spill rows of"
	echo "as many threads: the faulting thread's trap, the handler reading the"
	echo "fault, UFFDIO_COPY and the wake-up, and the faulting thread's return"
	echo "and second touch, with nothing of the engine.  A spill row's p50 less"
	echo "the bare one is what the engine adds (lookup, decompression, the"
	echo "group's accounting).  With 2 and 4 threads the faults queue for the"
	echo "one serving thread, as they do for the engine's one handler; the"
	echo "two-server rows are what a second handler would change, on this"
	echo "machine's $(nproc) CPUs."
	echo "The same-CPU row is the least that one costs in any design here: no"
	echo "CPU wakes another, and the fault's trap, two switches between the"
	echo "threads and two system calls of the serving thread remain."
	echo
	echo "Spill rows other than the halting ones: while the handler serves a"
	echo "burst of faults it holds a CPU latency request of 0 (PM QoS,"
	echo "\`/dev/cpu_dma_latency\`), so idle CPUs poll instead of halting and the"
	echo "thread it wakes runs at once.  Halting rows: without it, in a process"
	echo "of its own (next to the others, its p50 came out lower than alone)."
	if [ "$halt_poll" = 0 ]; then
		echo "This guest halts an idle vCPU at once (guest_halt_poll_ns 0): without"
		echo "the request, the faulting thread's vCPU halts while the handler works,"
		echo "and waking it is about half of each refault."
	fi
	echo
	echo "## Throughput (MB/s of 4 KiB pages; median, least–greatest round)"
	echo
	echo "Spill: one \`spill_out\` of all $(val pages) pages (move, compress, store), one"
	echo "thread, wall time.  Refault: one thread reads one byte of each page"
	echo "back, wall time (the handler thread's work included).  Raw: the codec"
	echo "alone on the same pages in the same round — \`LZ4_compress_default\`"
	echo "into one scratch buffer and \`LZ4_decompress_safe\` from copies"
	echo "compressed beforehand (zstd: \`ZSTD_compressCCtx\` level 3 and"
	echo "\`ZSTD_decompressDCtx\`).  Engine / raw: the median of each round's ratio."
	echo
	echo "| codec | spill_out | raw compress | spill / raw | refault walk | raw decompress | refault / raw |"
	echo "|---|---|---|---|---|---|---|"
	for c in lz4 zstd lz4+readahead; do
		set -- $(val "vs_raw $c")
		echo "| $c | $(tput_cell spill-$c) | $(tput_cell raw-compress-$c) | $1% | $(tput_cell refault-$c) | $(tput_cell raw-decompress-$c) | $2% |"
	done
	echo
	echo "The lz4 refault walk with idle CPUs halting (no CPU latency request, a"
	echo "process of its own): $(tput_cell refault-lz4-halting) MB/s."
	echo
	echo "Scattered spill: \`spill_out\` of every other page, one call per page, while"
	echo "another thread of the process runs (reclaim's common case: single pages"
	echo "between resident ones; every page-table change that must be flushed costs"
	echo "an IPI to that thread's CPU), \`spill_stage_clear\` included; in a process"
	echo "of its own.  The engine clears its staging slots once per 64 staged pages;"
	echo "when it cleared them after every call, a one-page spill took 47-55 µs"
	echo "against 25-28 µs with the change (best of 5 rounds of 4096 pages, the two"
	echo "engines run in turn, 2026-12-02)."
	echo
	echo "| codec | scattered spill_out, MB/s | µs a page (median) |"
	echo "|---|---|---|"
	for c in lz4 zstd lz4+readahead; do
		echo "| $c | $(tput_cell scattered-$c) | $(awk -v m="$(tput scattered-$c 3)" 'BEGIN { if (m > 0) printf "%.1f", 4096 / m; else print "-" }') |"
	done
	echo
	echo "Engine counters at the end: spilled, refaulted, skipped, store failed;"
	echo "pages \`spill_out\` left in place in the measured calls:"
	echo
	for c in lz4 zstd lz4+readahead; do
		set -- $(val "engine $c")
		echo "- $c: $1 spilled, $2 refaulted, $6 read ahead, $3 skipped, $4 store failed, $5 left in place"
	done
	echo
	echo "With readahead, a fault at the page after the last one (or just past"
	echo "what was read ahead) also brings back the next 2, 4, 8, 16, then 32 spilled"
	echo "pages, as the kernel's swap readahead does (the counters above say how"
	echo "many came back that way).  Its rows time every touch, the ones that did"
	echo "not fault included; a walk in random order gets the plain lz4 rows."
	echo
	echo "## Notes"
	echo
	echo "- Page-cache reference: a file of the same pages in \`$B\` (unlinked at"
	echo "  once) is mapped private and read-only and every page read once;"
	echo "  before each timed read that page's PTE is dropped with"
	echo "  \`MADV_DONTNEED\` (outside the timing), so each read is one minor"
	echo "  fault on a page-cache hit that maps one page (its neighbours are"
	echo "  still mapped, so fault-around adds none)."
	echo "- Spill and raw MB/s are wall time, not CPU time: the refault path"
	echo "  spans two threads (the faulting one and the handler), and what a"
	echo "  program waits for is wall time.  The mean latency column is what"
	echo "  the refault walk's MB/s follows; the p50 is the typical fault."
	echo "- $SETTLE_TIMEOUTS waits for the handler's bookkeeping (entries and ranges of"
	echo "  pages already back) ran past 2 s."
	echo
	echo "## Command"
	echo
	echo '```'
	echo "make bench-spill B=$B        # runs what follows"
	echo "$BIN $PAGEFILE $B $ROUNDS $PAGES"
	echo "$BIN $PAGEFILE $B $ROUNDS $PAGES scattered"
	echo "$BIN $PAGEFILE $B $ROUNDS $PAGES halting"
	echo '```'
} > "$OUT"
echo "$SUMMARY"
echo "bench-spill: results in $OUT"
