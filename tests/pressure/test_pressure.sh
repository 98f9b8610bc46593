#!/bin/sh
# memory.pressure from a preloaded program's stalls: throttling shows in
# some/full totals and averages of its group and ancestors, not of a
# sibling; triggers fire, through cgmctl pressure and the C API, where the
# stall is and not elsewhere.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${PSI_PROG:?PSI_PROG must name tests/pressure/psi_prog (run through make)}"

ok "$CGMCTL" --hierarchy "$H" mkdir /p
ok "$CGMCTL" --hierarchy "$H" mkdir /p/w
ok "$CGMCTL" --hierarchy "$H" mkdir /quiet
ok "$CGMCTL" --hierarchy "$H" set /p/w memory.high 16M

# A python3 kept over memory.high: throttled most of the time.
start "group=/p/w" /usr/bin/python3 -c '
import time
t = time.time(); a = []
while time.time() - t < 6:
    a.append(bytes(100000))
    if len(a) > 300: a = a[150:]'
sleep 0.3
run "$CGMCTL" --hierarchy "$H" pressure /p/w "some 150000 1000000" -n 2 -t 5
[ "$ST" = 0 ] || fail "cgmctl pressure: the trigger did not fire twice on a throttled group"
[ "$(grep -c "fired: total=" "$T/out")" = 2 ] || fail "cgmctl pressure printed: $(cat "$T/out")"
run "$CGMCTL" --hierarchy "$H" pressure /quiet "some 150000 1000000" -t 1.2
[ "$ST" = 1 ] || fail "cgmctl pressure: a trigger on a quiet group exited $ST"
[ ! -s "$T/out" ] || fail "a trigger on a quiet group fired: $(cat "$T/out")"
sleep 2.2
for g in /p/w /p; do
	"$CGMCTL" --hierarchy "$H" cat $g memory.pressure >"$T/p"
	some=$(awk '$1 == "some" { sub("total=", "", $5); print $5 }' "$T/p")
	a10=$(awk '$1 == "some" { sub("avg10=", "", $2); print int($2) }' "$T/p")
	[ "$some" -ge 1500000 ] || fail "$g: some total $some us after seconds of throttling"
	[ "$a10" -ge 10 ] || fail "$g: some avg10 $a10 after seconds of throttling: $(cat "$T/p")"
	grep -q "^full avg10=" "$T/p" || fail "$g: no full line: $(cat "$T/p")"
	[ $g = /p ] || seen=$(head -1 "$T/p")
done
"$CGMCTL" --hierarchy "$H" cat /quiet memory.pressure >"$T/p"
grep -q "^some avg10=0.00 avg60=0.00 avg300=0.00 total=0$" "$T/p" || fail "/quiet: $(cat "$T/p")"
echo "$TEST_NAME: throttled group: $seen"
finish
CHECKS=$((CHECKS + 6))

# memory.peak: a write starts it again from the usage now (6.12's reset);
# memory.events has the kernel's keys, sock_throttled included.
peak=$(value /p/w memory.peak)
[ "$peak" -ge $((8 * MIB)) ] || fail "memory.peak of the throttled group: $peak"
ok "$CGMCTL" --hierarchy "$H" set /p/w memory.peak reset
[ "$(value /p/w memory.peak)" -le "$(value /p/w memory.current)" ] ||
	fail "memory.peak after a write: $(value /p/w memory.peak), usage $(value /p/w memory.current)"
[ "$(value /p/w memory.events sock_throttled)" = 0 ] || fail "memory.events: $(value /p/w memory.events)"
CHECKS=$((CHECKS + 3))

# A process killed in a throttle sleep stalls its group no longer.
ok "$CGMCTL" --hierarchy "$H" mkdir /p/k
ok "$CGMCTL" --hierarchy "$H" set /p/k memory.high 16M
start "group=/p/k" /usr/bin/python3 -c '
a = []
while True:
    a.append(bytes(100000))
    if len(a) > 300: a = a[150:]'
sleep 1
kill -9 "$BG"
finish 2>/dev/null
t1=$(value /p/k memory.pressure | awk '$1 == "some" { sub("total=", "", $5); print $5 }')
sleep 1
t2=$(value /p/k memory.pressure | awk '$1 == "some" { sub("total=", "", $5); print $5 }')
[ "$t1" -gt 0 ] || fail "the throttled python3 left no stall time: $t1"
[ $((t2 - t1)) -lt 100000 ] || fail "a killed process still stalls its group: some total $t1 -> $t2 us in 1 s"
CHECKS=$((CHECKS + 2))

# memory.numa_stat: anon per online node, adding up to memory.stat's anon.
start "group=/quiet" /usr/bin/python3 -c '
import sys, time
a = bytearray(48 << 20)
print("ready", file=sys.stderr, flush=True)
time.sleep(5)'
reach ready
nodes=$(awk -F'[-,]' '{ print $NF + 1 }' /sys/devices/system/node/online 2>/dev/null || echo 1)
"$CGMCTL" --hierarchy "$H" cat /quiet memory.numa_stat >"$T/numa"
anon=$(value /quiet memory.stat anon)
sum=$(awk '$1 == "anon" { for (i = 2; i <= NF; i++) { split($i, kv, "="); s += kv[2] } print s }' "$T/numa")
[ "$(awk '$1 == "anon" { print NF - 1 }' "$T/numa")" = "$nodes" ] || fail "memory.numa_stat for $nodes nodes: $(cat "$T/numa")"
[ "$anon" -ge $((40 * MIB)) ] && within_ratio "$sum" "$anon" 90 110 ||
	fail "memory.numa_stat adds up to $sum, memory.stat anon is $anon"
echo "$TEST_NAME: $(cat "$T/numa") (anon $anon)"
kill "$BG"
finish
CHECKS=$((CHECKS + 2))

# The C API: an eventfd per trigger, a watcher thread only while armed.
pre "group=/p/w" "$PSI_PROG" /quiet >"$T/out" 2>"$T/err" || fail "psi_prog: $(grep FAIL "$T/err")"
grep -qx "psi_prog: done" "$T/err" || fail "psi_prog did not finish: $(tail -3 "$T/err")"
CHECKS=$((CHECKS + $(grep -c "psi_prog: ok" "$T/err")))
echo "$TEST_NAME: $CHECKS checks passed"
