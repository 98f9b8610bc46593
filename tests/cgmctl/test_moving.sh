#!/bin/sh
# The "moving" static key: a program whose two threads allocate and free
# without pause is moved back and forth between two groups twelve times
# (more on a loaded machine, until some allocation ran during a move).
# Its verbose log (one line per move, shim/moving.c) must show every move
# done, allocations and frees taking the careful path during the moves,
# and none between them (the count "in all" equals the sum of the counts
# "during" the moves).  Once the program exits, both groups hold nothing:
# the moves lost and invented no charge.
# Run by `make check-cgmctl-moving`, which sets CGMCTL, CGM_LIB, MOVE_WORKER.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
: "${MOVE_WORKER:?MOVE_WORKER must name tests/move_worker (run through make)}"

MOVES=12
ok ctl mkdir /mv1
ok ctl mkdir /mv2
CGMALLOC_CONF=verbose=1 "$CGMCTL" --hierarchy "$H" run -g /mv1 -- \
	"$MOVE_WORKER" "$T/ready" 2>"$T/worker.err" &
pid=$!
PIDS="$PIDS $pid"
wait_for test -s "$T/ready"
# cgmctl run execs the command: the pid is the worker's.
ok ctl cat /mv1 cgroup.procs
out_is "$pid"
# The number of allocations and frees that went careful during the moves
# logged so far.
careful_so_far() {
	grep 'accounting: move to group' "$T/worker.err" 2>/dev/null |
		awk '{ for (i = 1; i <= NF; i++) if ($i == "during") s += $(i - 4) } END { print s + 0 }'
}

# Twelve moves; on a loaded machine the worker's other thread may not run
# inside any of their short windows, so up to 48 more until one did.
i=0
while [ $i -lt $MOVES ] || { [ $i -lt $((MOVES + 48)) ] && [ "$(careful_so_far)" = 0 ]; }; do
	if [ $((i % 2)) = 0 ]; then to=/mv2; else to=/mv1; fi
	ok ctl move "$pid" "$to"
	ok ctl cat "$to" cgroup.procs
	out_is "$pid"
	i=$((i + 1))
done
MOVES=$i
kill -TERM "$pid"
wait "$pid" || fail "the worker exited with status $?"
grep 'accounting: move to group' "$T/worker.err" >"$T/moves" || true
[ "$(wc -l <"$T/moves")" = $MOVES ] ||
	fail "$(wc -l <"$T/moves") move lines in the worker's log, expected $MOVES: $(head -3 "$T/worker.err")"
grep -v ' done; ' "$T/moves" && fail "a move was not done"
# "... careful path: N allocations and frees during the move, M in all"
awk '{
	for (i = 1; i <= NF; i++) {
		if ($i == "during") during = $(i - 4)
		if ($i == "all") all = $(i - 2)
	}
	sum += during
	if (all != sum) { printf "move %d: %d careful in all, but %d during the moves\n", NR, all, sum; bad = 1 }
}
END {
	if (sum == 0) { print "no allocation or free took the careful path during any move"; bad = 1 }
	if (!bad) printf "%d allocations and frees took the careful path during %d moves\n", sum, NR
	exit bad
}' "$T/moves" >"$T/summary" || fail "$(cat "$T/summary")"
cat "$T/summary"
CHECKS=$((CHECKS + 1))
for g in /mv1 /mv2; do
	ok ctl cat "$g" memory.current
	out_is 0
done

echo "$TEST_NAME: $CHECKS checks passed"
