#!/bin/sh
# What fork costs: a fork-heavy shell loop and fork + exit of a small C
# program, under Debian's mimalloc, cgmalloc with accounting off, and on,
# run interleaved (ROUNDS rounds, medians); and the instructions a forked
# child runs (callgrind: its first allocation and its exit).  Writes a
# markdown table to stdout (make bench-fork puts it in bench/RESULTS-fork.md).
#
#   bench/fork_bench.sh BUILD_DIR [ROUNDS]
set -eu
B=$1
ROUNDS=${2:-7}
top=$(cd "$(dirname "$0")/.." && pwd)
lib="$top/$B/libcgmalloc.so"
forks="$top/$B/bench/forks"
mimalloc=$(ls /usr/lib/*-linux-gnu/libmimalloc.so.2 | head -1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CONFIGS="mimalloc off on"
SHELL_LOOP='for i in $(seq 2000); do x=$(:); done'

# under CONFIG CMD...: CMD preloaded as CONFIG says.
under() {
	c=$1
	shift
	case $c in
	mimalloc) env LD_PRELOAD="$mimalloc" "$@" ;;
	off) env LD_PRELOAD="$lib" CGMALLOC_CONF=accounting=0 "$@" ;;
	on) env LD_PRELOAD="$lib" CGMALLOC_CONF="hierarchy=$tmp/h" "$@" ;;
	esac
}

now() { date +%s%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

r=0
while [ $r -lt "$ROUNDS" ]; do
	for c in $CONFIGS; do
		t0=$(now)
		under "$c" /bin/bash -c "$SHELL_LOOP"
		echo $(( ($(now) - t0) / 1000000 )) >>"$tmp/shell.$c"
		under "$c" "$forks" 1000 >>"$tmp/fork.$c"
	done
	r=$((r + 1))
done

for c in $CONFIGS; do
	rm -rf "$tmp/cg" && mkdir "$tmp/cg"
	under "$c" valgrind --tool=callgrind --trace-children=yes --toggle-collect=child_main \
		--callgrind-out-file="$tmp/cg/cg.%p" "$forks" 21 >/dev/null 2>&1
	for f in "$tmp"/cg/cg.*; do sed -n 's/^summary: //p' "$f"; done | awk '$1 > 0' | median >"$tmp/insn.$c"
done

shell_mi=$(median <"$tmp/shell.mimalloc")
fork_mi=$(median <"$tmp/fork.mimalloc")
echo "fork costs (bench/fork_bench.sh, \`make bench-fork\`; $ROUNDS interleaved rounds, medians):"
echo
echo "| configuration | \`bash\` loop of 2000 \`x=\$(:)\`, ms | vs mimalloc | fork + exit, us | vs mimalloc | instructions in a child |"
echo "|---|---:|---:|---:|---:|---:|"
for c in $CONFIGS; do
	s=$(median <"$tmp/shell.$c")
	f=$(median <"$tmp/fork.$c")
	awk -v c="$c" -v s="$s" -v sm="$shell_mi" -v f="$f" -v fm="$fork_mi" -v i="$(cat "$tmp/insn.$c")" \
		'BEGIN { printf "| %s | %d | %.3f | %.1f | %.3f | %d |\n", c, s, s / sm, f, f / fm, i }'
done
echo
echo "- The child's instructions: callgrind, from its first allocation (which joins its parent's group) to the end of exit()."
