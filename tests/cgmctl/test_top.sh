#!/bin/sh
# cgmctl top: frames of the groups sorted by usage, the figures of a group
# with a running preloaded program, bad arguments.
# Run by `make check-cgmctl-top`, which sets CGMCTL and CGM_LIB.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

ok ctl mkdir /big
ok ctl mkdir /small
ok ctl set /big memory.high 1G
# A preloaded python3 holding 40 MiB in /big until its stdin closes.
mkfifo "$T/fifo_in"
ctl run -g /big -- "$PY" -c '
import sys
x = b"x" * (40 << 20)
print("ready", flush=True)
sys.stdin.read()
' <"$T/fifo_in" >"$T/py.out" 2>"$T/py.err" &
PIDS="$PIDS $!"
exec 3>"$T/fifo_in"
wait_for grep -q ready "$T/py.out"

ok ctl top -n 2 -d 0.1
[ "$(grep -c '^cgmctl top - ' "$T/out")" = 2 ] || fail "top -n 2: not two frames: $(head -c 300 "$T/out")"
[ "$(grep -c '^GROUP ' "$T/out")" = 2 ] || fail "top -n 2: not two headers"
# Sorted by usage: /, then /big (40 MiB), then /small (nothing).
rows=$(awk '$1 ~ /^\// { print $1 }' "$T/out" | head -3 | tr '\n' ' ')
[ "$rows" = "/ /big /small " ] || fail "top: rows not sorted by usage: $rows"
big=$(awk '$1 == "/big" { print $2; exit }' "$T/out")
case $big in
	[3-9][0-9]M) ;;
	*) fail "top: /big CURRENT '$big', expected about 40M" ;;
esac
[ "$(awk '$1 == "/big" { print $6; exit }' "$T/out")" = 1.0G ] || fail "top: /big HIGH is not 1.0G"
grep -q "^GROUP .* ZSWAP .* SOME10 " "$T/out" || fail "top: no ZSWAP and SOME10 columns: $(grep ^GROUP "$T/out")"
[ "$(awk '$1 == "/big" { print $NF; exit }' "$T/out")" = 1 ] || fail "top: /big has not 1 process"
# Below a group: only its subtree.
ok ctl top -n 1 /big
[ "$(awk '$1 ~ /^\// { print $1 }' "$T/out" | tr '\n' ' ')" = "/big " ] ||
	fail "top /big: rows $(awk '$1 ~ /^\// { print $1 }' "$T/out" | tr '\n' ' ')"
exec 3>&-

bad 2 "top: bad value 'abc' for -d" ctl top -d abc
bad 2 "top: bad value '0' for -d" ctl top -d 0
bad 2 "top: bad value '0' for -n" ctl top -n 0
bad 2 "top: expected at most 1 argument" ctl top / /big
bad 1 "top: no group /nope" ctl top -n 1 /nope

echo "$TEST_NAME: $CHECKS checks passed"
