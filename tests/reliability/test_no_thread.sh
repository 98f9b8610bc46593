#!/bin/sh
# The library starts no thread of its own: a program that was single-
# threaded stays so (in a fork too), main's pthread_exit() ends the process
# when the last thread does, unshare(CLONE_NEWUSER) works preloaded, and a
# process learns of a limit lifted by another process without a thread.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# pthread_exit in main: exit 0 once the worker returns (it hung for ever).
within 10 pre "" "$REL_PROG" pthread-exit
[ "$ST" = 0 ] || fail "pthread-exit: exit status $ST"
CHECKS=$((CHECKS + 1))

# One thread, here and in a forked child, with accounting on and a limit.
within 10 pre "scope=/one,max=256M" "$REL_PROG" threads
[ "$ST" = 0 ] || fail "threads: exit status $ST"
out_is "1 1"
CHECKS=$((CHECKS + 1))

# unshare -U needs a single-threaded caller (rootless containers do this).
if unshare -U true 2>/dev/null; then
	within 10 pre "" unshare -U true
	[ "$ST" = 0 ] || fail "unshare -U true, preloaded: exit status $ST: $(cat "$T/err")"
	CHECKS=$((CHECKS + 1))
else
	echo "$TEST_NAME: unshare -U is not allowed here: that case is not run" >&2
fi

# A process started at its group's limit sees the limit lifted by cgmctl
# at its next allocation: no thread is needed to learn of it.
ok ctl mkdir /full
ok ctl set /full memory.max 24M
pre "group=/full" "$PY" -c '
import sys, time
hold = []
try:
    while True:
        hold.append(bytearray(1 << 20))
except MemoryError:
    pass
print(len(hold), flush=True)
open(sys.argv[1], "w").write("full")
time.sleep(1.5)
hold.append(bytearray(16 << 20))
print("grew", flush=True)
' "$T/full" >"$T/grow.out" 2>"$T/grow.err" &
pid=$!
PIDS="$PIDS $pid"
wait_for test -s "$T/full"
ok ctl set /full memory.max 128M
wait "$pid" || fail "the program did not grow once the limit was lifted: $(cat "$T/grow.err")"
grep -q grew "$T/grow.out" || fail "no growth: $(cat "$T/grow.out")"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
