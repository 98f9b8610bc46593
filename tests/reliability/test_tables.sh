#!/bin/sh
# Slots of exited threads and processes are reused at once: a program that
# starts many threads or processes in sequence stays charged and within
# its limit.  REL_THREADS and REL_PROCS set the counts (make stress runs
# 100,000 threads and 10,000 processes).
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
THREADS=${REL_THREADS:-20000}
PROCS=${REL_PROCS:-2000}

# 6000 threads in sequence, each keeping 4 KiB, under max=16M: the limit
# holds (it did not for threads past the 4096th) and refuses the rest.
within 120 pre "scope=/churn,max=16M" "$REL_PROG" thread-churn 6000 4096
[ "$ST" = 0 ] || fail "thread-churn: exit status $ST: $(head -3 "$T/err")"
kept=$(num kept)
[ "$kept" -le $((16 << 20)) ] || fail "threads kept $kept bytes under max=16M"
[ "$(num nulls)" -gt 0 ] || fail "max=16M never refused: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "thread-churn said: $(head -3 "$T/err")"
echo "thread churn: $kept bytes kept by 6000 threads under max=16M ($(num nulls) refused)"
CHECKS=$((CHECKS + 1))

# Many more threads than the table has slots, every one charged.
within 600 pre "scope=/churn2" "$REL_PROG" thread-churn "$THREADS" 64
[ "$ST" = 0 ] || fail "thread-churn $THREADS: exit status $ST: $(head -3 "$T/err")"
[ "$(num kept)" = $((THREADS * 64)) ] || fail "thread-churn $THREADS: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "thread-churn $THREADS said: $(head -3 "$T/err")"
CHECKS=$((CHECKS + 1))

# More processes in sequence than the table has slots: each child attaches
# (it allocates), none finds the table full.
within 600 pre "scope=/procs" "$REL_PROG" proc-churn "$PROCS"
[ "$ST" = 0 ] || fail "proc-churn $PROCS: exit status $ST: $(head -3 "$T/err")"
[ "$(num failed)" = 0 ] || fail "proc-churn: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "proc-churn said: $(head -3 "$T/err")"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed ($THREADS threads, $PROCS processes)"
