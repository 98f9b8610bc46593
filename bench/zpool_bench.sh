#!/bin/sh
# Run the zpool benchmark and write bench/RESULTS-zpool.md.
# usage: bench/zpool_bench.sh [BUILD_DIR] [ROUNDS]
set -eu

B=${1:-build}
ROUNDS=${2:-15}
N=2000
BIN=$B/bench/zpool_bench
PAGES=$B/zpool-heap.pages
OUT=bench/RESULTS-zpool.md
RAW=$B/zpool-bench.txt

# The page file is made once (a Python heap) and reused, so every run and
# every mode below measures the same pages.
"$BIN" "$PAGES" throughput "$ROUNDS" > "$RAW" 2> "$B/zpool-classes.txt"
val() { sed -n "s/^$1 //p" "$RAW"; }

# Instructions per operation: callgrind counts only inside the loop.
# Prints the total per operation, then the part spent outside the codec
# function $3 (what zpool itself adds), per operation.
ir_per_op() {	# mode loop-function codec-function
	out=$B/zpool-cg.$1.out
	valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$2" \
		--callgrind-out-file="$out" "$BIN" "$PAGES" "$1" "$N" >/dev/null 2>&1
	total=$(awk '/^summary:/ { print $2 }' "$out")
	codec=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
		awk -v f="$3" '$0 ~ ":" f " " { gsub(",", "", $1); print $1; exit }')
	awk -v t="$total" -v c="${codec:-0}" -v n="$N" \
		'BEGIN { printf "%.0f %.0f", t / n, (t - c) / n }'
}
if command -v valgrind >/dev/null 2>&1; then
	set -- $(ir_per_op store measured_store_loop LZ4_compress_fast_extState)
	IR_STORE=$1 OWN_STORE=$2
	set -- $(ir_per_op load measured_load_loop LZ4_decompress_safe)
	IR_LOAD=$1 OWN_LOAD=$2
	set -- $(ir_per_op raw-compress measured_raw_compress_loop_at LZ4_compress_fast_extState)
	IR_RAWC=$1 OWN_RAWC=$2
	set -- $(ir_per_op raw-decompress measured_raw_decompress_loop LZ4_decompress_safe)
	IR_RAWD=$1 OWN_RAWD=$2
	# Loads of recompressed pages, every page of the file (the dictionary needs them).
	for m in load-zstd load-zstd-dict; do
		out=$B/zpool-cg.$m.out
		valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_load_loop \
			--callgrind-out-file="$out" "$BIN" "$PAGES" "$m" >/dev/null 2>&1
		awk -v p="$(val pages)" '/^summary:/ { printf "%.0f", $2 / p }' "$out" > "$out.per"
	done
	IR_LZ=$(cat "$B/zpool-cg.load-zstd.out.per") IR_LZD=$(cat "$B/zpool-cg.load-zstd-dict.out.per")
else
	IR_STORE=n/a IR_LOAD=n/a IR_RAWC=n/a IR_RAWD=n/a IR_LZ=n/a IR_LZD=n/a
	OWN_STORE=n/a OWN_LOAD=n/a OWN_RAWC=n/a OWN_RAWD=n/a
fi

STORE=$(val store_vs_raw_pct)
LOAD=$(val load_vs_raw_pct)
MEM=$(printf '%.2f' "$(val lz4_compacted_mem_per_compr)")
SUMMARY="zpool: store $STORE% of raw lz4, load $LOAD% of raw lz4, memory/compressed $MEM"

{
	echo "# zpool benchmark"
	echo
	echo "$SUMMARY"
	echo
	echo "Machine: $(nproc) cores, $(uname -r); $(date -u +%Y-%m-%d)."
	echo "Pages: $(val pages) real heap pages of a Python program (records, an index,"
	echo "a JSON blob) read from /proc/PID/mem, kept in \`$PAGES\`; every figure"
	echo "below is on that same set."
	echo
	echo "## Throughput against raw lz4 (goal: >= 85% for both)"
	echo
	echo "Raw = \`LZ4_compress_default\` into one scratch buffer, and"
	echo "\`LZ4_decompress_safe\` from precompressed copies.  zpool = \`zp_store\`"
	echo "into a fresh pool (same-filled check, compression, object allocation,"
	echo "copy, entry, LRU) and \`zp_load\`.  Raw and zpool alternate every 128"
	echo "pages (the side that goes first alternates too), timed with thread CPU"
	echo "time; the ratio is the median over $(val rounds) rounds."
	echo
	echo "| | raw lz4 | zpool | zpool / raw |"
	echo "|---|---|---|---|"
	echo "| store (compress) MB/s | $(val raw_compress_MBps) | $(val store_MBps) | $STORE% |"
	echo "| load (decompress) MB/s | $(val raw_decompress_MBps) | $(val load_MBps) | $LOAD% |"
	echo "| instructions per page, store | $IR_RAWC | $IR_STORE | |"
	echo "| of which outside lz4 | $OWN_RAWC | $OWN_STORE | |"
	echo "| instructions per page, load | $IR_RAWD | $IR_LOAD | |"
	echo "| of which outside lz4 | $OWN_RAWD | $OWN_LOAD | |"
	echo
	echo "Instructions: callgrind over the first $N pages, collecting only inside"
	echo "the loop function; \"outside lz4\" subtracts the inclusive cost of"
	echo "\`LZ4_compress_fast_extState\` / \`LZ4_decompress_safe\`: what the pool"
	echo "itself costs per page (same-filled pages skip lz4 entirely, which is why"
	echo "the totals can come out below raw)."
	echo
	echo "## Memory per compressed byte (goal: <= 1.10)"
	echo
	echo "Pool memory (zspage pages) / compressed bytes stored.  Churned: half"
	echo "the entries invalidated at random; compacted: then \`zp_compact\`."
	echo "With metadata: plus the handle and entry tables and zspage descriptors."
	echo
	echo "| codec | ratio | fresh | churned | compacted | compacted, with metadata | pages compacted |"
	echo "|---|---|---|---|---|---|---|"
	for c in lz4 zstd; do
		echo "| $c | $(val ${c}_ratio) | $(val ${c}_fresh_mem_per_compr) | $(val ${c}_churned_mem_per_compr) | $(val ${c}_compacted_mem_per_compr) | $(val ${c}_compacted_mem_meta_per_compr) | $(val ${c}_pages_compacted) |"
	done
	echo
	echo "## lz4 and zstd"
	echo
	echo "| codec | compression ratio | store MB/s (wall, one pass) | same-filled pages | huge pages |"
	echo "|---|---|---|---|---|"
	for c in lz4 zstd; do
		echo "| $c | $(val ${c}_ratio) | $(val ${c}_store_MBps) | $(val ${c}_same_pages) | $(val ${c}_huge_pages) |"
	done
	echo
	echo "zstd at level 3 (the default); lz4 at acceleration 1."
	echo
	echo "## Recompression to zstd, without and with the dictionary"
	echo
	echo "Every page stored with lz4 into a pool made with \`recompress\`, then"
	echo "all of them recompressed with zstd (\`zp_recompress\`, zram's idle"
	echo "pages), without the dictionary (\`recompress_no_dict\`) and with it: four"
	echo "of the pool's own pages, chosen from a sample of 16 among the first"
	echo "4,096 that lz4 halved (zpool/zdict.c; the spiller's \`spill_dict=1\`)."
	echo "Load: thread CPU time per page over all of them, the fastest of three"
	echo "passes (noisy here), and callgrind's instructions per load (\`load-zstd\`,"
	echo "\`load-zstd-dict\` modes)."
	echo
	echo "| | ratio (pages / compressed bytes) | pages recompressed | against the dictionary | load, us a page | instructions per load |"
	echo "|---|---|---|---|---|---|"
	echo "| without the dictionary | $(val recompressed_ratio) | $(val recompressed_recompressed) | $(val recompressed_against_dict) | $(val recompressed_load_us) | $IR_LZ |"
	echo "| with the dictionary | $(val recompressed_dict_ratio) | $(val recompressed_dict_recompressed) | $(val recompressed_dict_against_dict) | $(val recompressed_dict_load_us) | $IR_LZD |"
	echo
	echo "## Classes after churn and compaction (lz4), zsmalloc's \`classes\` format"
	echo
	echo '```'
	awk 'NR == 1 || /^Total/ || ($14 + 0) > 0' "$B/zpool-classes.txt" | head -60
	echo '```'
	echo
	echo "## Notes"
	echo
	echo "- The arena asks for transparent huge pages (MADV_HUGEPAGE; THP is"
	echo "  \"$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)\" here) above its first 16 MiB only: below, a small"
	echo "  pool's footprint would be whole huge pages (zpool/arena.c).  Page"
	echo "  faults cost about 9,000 cycles a page on this machine; with a fault"
	echo "  per 4 KB page the store ratio measured 81-82% instead of 88-90%, and"
	echo "  the pools here stay below 16 MiB."
	echo "- zspage lengths: the shortest within 5% of the least tail waste."
	echo "  zsmalloc's least-waste rule gave 1.19 (lz4) after churn and"
	echo "  compaction on the same pages; the difference is the one partly"
	echo "  filled zspage every class keeps, which long zspages make large."
	echo "- Timing is thread CPU time, so the figures hold on a shared, busy"
	echo "  machine (it ran at a load average above 10 during these runs);"
	echo "  wall-clock MB/s were about half."
	echo
	echo "## Commands"
	echo
	echo '```'
	echo "make bench-zpool B=$B        # runs what follows"
	echo "$BIN $PAGES throughput $ROUNDS"
	for m in "store measured_store_loop" "load measured_load_loop" \
		 "raw-compress measured_raw_compress_loop_at" \
		 "raw-decompress measured_raw_decompress_loop"; do
		set -- $m
		echo "valgrind --tool=callgrind --collect-atstart=no --toggle-collect=$2 $BIN $PAGES $1 $N"
	done
	for m in load-zstd load-zstd-dict; do
		echo "valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_load_loop $BIN $PAGES $m"
	done
	echo '```'
} > "$OUT"
echo "$SUMMARY"
echo "bench-zpool: results in $OUT"
