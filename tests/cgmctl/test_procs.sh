#!/bin/sh
# cgmctl on running processes: a preloaded python3 holding 24 MiB is
# listed in its group's cgroup.procs and counted by ls (also after
# another process attached to the hierarchy), keeps rmdir from
# removing its group, is moved with its charge (and refused by a
# destination whose memory.max is too small), and once killed with
# SIGKILL its charge comes back at the next cgmctl command.
# Run by `make check-cgmctl-procs`, which sets CGMCTL and CGM_LIB.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

ok ctl mkdir /m2
HOLD='import sys, time
b = bytearray(24 << 20)
open(sys.argv[1], "w").write("ready")
time.sleep(60)'
"$CGMCTL" --hierarchy "$H" run -g /m1 -- "$PY" -c "$HOLD" "$T/ready" 2>"$T/hold.err" &
pid=$!
PIDS="$PIDS $pid"
wait_for test -s "$T/ready"
ok ctl cat /m1 cgroup.procs
out_is "$pid"
# Another process attaching to the hierarchy leaves this one alone.
run ctl run -g /other -- "$PY" -c 'pass'
[ "$ST" = 0 ] || fail "run python3 in /other: exit $ST"
ok ctl cat /m1 cgroup.procs
out_is "$pid"
ok ctl ls /m1
[ "$(awk 'NR == 2 { print $6 }' "$T/out")" = 1 ] || fail "ls: /m1 does not count its process"
ok ctl cat /m1 memory.current
[ "$(cat "$T/out")" -ge $((24 << 20)) ] || fail "/m1 holds $(cat "$T/out") bytes, less than 24 MiB"
bad 1 "rmdir: /m1: not empty \(0 child groups, 1 processes" ctl rmdir /m1
ok ctl move "$pid" /m2
ok ctl cat /m2 cgroup.procs
out_is "$pid"
ok ctl cat /m1 cgroup.procs
out_is ""
ok ctl cat /m2 memory.current
[ "$(cat "$T/out")" -ge $((24 << 20)) ] || fail "the charge did not move: /m2 holds $(cat "$T/out")"
ok ctl cat /m1 memory.current
out_is 0
ok ctl set /m1 memory.max 1M
bad 1 "refused: the destination's memory.max" ctl move "$pid" /m1
ok ctl cat /m2 cgroup.procs
out_is "$pid"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
# The next command returns what the killed process held.
ok ctl cat /m2 memory.current
out_is 0
ok ctl rmdir /m2

echo "$TEST_NAME: $CHECKS checks passed"
