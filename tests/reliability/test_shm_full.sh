#!/bin/sh
# A hierarchy on a full tmpfs (Docker's /dev/shm is 64 MB): its storage is
# reserved when it is made, so the program is told in one line and runs
# unaccounted -- never killed by SIGBUS at a later first touch.  Needs a
# private mount namespace (root, or a user namespace): skipped otherwise.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# First, the exit report to a full device: one line naming the file and
# the error (it named neither), and the program's exit status stands.
within 30 pre "scope=/full,stats=exit,stats_file=/dev/full" "$PY" -c 'print("done")'
[ "$ST" = 0 ] || fail "stats_file=/dev/full: exit status $ST: $(cat "$T/err")"
out_is "done"
[ "$(wc -l <"$T/err")" = 1 ] &&
	grep -q "cannot write the exit report to /dev/full: No space left on device" "$T/err" ||
	fail "stats_file=/dev/full: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))

mkdir "$T/shm"
unshare -m --propagation private sh -c 'mount -t tmpfs -o size=1M none "$0"' "$T/shm" 2>/dev/null ||
	skip "cannot mount a tmpfs in a private mount namespace here"
run unshare -m --propagation private sh -c '
	mount -t tmpfs -o size=1M none "$1" || exit 99
	LD_PRELOAD="$2" CGMALLOC_CONF="hierarchy=$1/h" "$3" -c "print(sum(range(10**6)))"
	st=$?
	"$4" --hierarchy "$1/h2" mkdir /x
	echo "cgmctl $?"
	exit $st' sh "$T/shm" "$CGM_LIB" "$PY" "$CGMCTL"
[ "$ST" = 0 ] || fail "python3 on a full tmpfs hierarchy: exit status $ST: $(cat "$T/err")"
[ "$(head -1 "$T/out")" = 499999500000 ] || fail "wrong output: $(cat "$T/out")"
grep -q "^cgmalloc: accounting off: hierarchy cannot reserve .*No space left on device" "$T/err" ||
	fail "no line about the full tmpfs: $(cat "$T/err")"
[ "$(grep -c '^cgmalloc: ' "$T/err")" = 1 ] || fail "more than one line: $(cat "$T/err")"
grep -q "^cgmctl: mkdir: hierarchy refused: cannot reserve" "$T/err" || fail "cgmctl: $(cat "$T/err")"
grep -q "^cgmctl 1$" "$T/out" || fail "cgmctl mkdir on a full tmpfs: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
