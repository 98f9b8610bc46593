#!/bin/sh
# cgmctl compare: a python3 that allocates and touches 64 MiB, run in a
# kernel memory cgroup and a cgmalloc group at once, is charged by
# cgmalloc within 0.8-1.25x of the kernel's anon at the peak; the samples
# are written; the command's exit status (and a signal's) is passed on;
# a process the command leaves running is moved out and keeps only its
# cgmalloc group; bad command lines are refused; nothing is left behind.
# Skipped (77) without a writable kernel memory cgroup, usually for
# want of root.
# Run by `make check-cgmctl-compare`, which sets CGMCTL and CGM_LIB.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# ---- the command line: refused before anything is made ----
bad 2 "compare: no command" ctl compare
bad 2 "compare: no command" ctl compare -i 50 --
bad 2 "compare: -i '0': expected milliseconds" ctl compare -i 0 -- true
bad 2 "compare: -i 'abc': expected milliseconds" ctl compare -i abc -- true
bad 2 "compare: --limit: bad value '5x'" ctl compare --limit 5x -- true
ok "$CGMCTL" help compare
grep -q "kernel_anon" "$T/out" || fail "help compare does not say what kernel_anon is"

# ---- 64 MiB touched, side by side ----
WORK='import time
l = [bytearray(1 << 20) for _ in range(64)]
time.sleep(0.5)'
run ctl compare -i 50 -o "$T/res" -- "$PY" -c "$WORK"
if [ "$ST" = 1 ] && grep -q "no writable kernel memory cgroup" "$T/err"; then
	echo "$TEST_NAME: skipped: $(cat "$T/err")" >&2
	exit 77
fi
[ "$ST" = 0 ] || fail "compare python3: exit $ST"
[ ! -s "$T/err" ] || fail "compare python3 wrote on stderr"
samples=$(field samples)
kpeak=$(field kernel_anon)
cpeak=$(field cgm_current)
kdir=$(field kernel_cgroup)
[ "${samples:-0}" -gt 0 ] || fail "compare python3: ${samples:-no} samples"
awk -v k="$kpeak" 'BEGIN { exit !(k >= 40) }' || fail "kernel anon peak $kpeak MiB, expected >= 40"
awk -v k="$kpeak" -v c="$cpeak" 'BEGIN { exit !(c >= 0.8 * k && c <= 1.25 * k) }' ||
	fail "cgmalloc peak $cpeak MiB is not within 0.8-1.25x of the kernel's $kpeak MiB"
CHECKS=$((CHECKS + 1))
[ "$(head -1 "$T/res/samples.tsv" | cut -f1-4)" = "$(printf 'time_ms\tkernel_anon\tkernel_usage\tcgm_current')" ] ||
	fail "samples.tsv header: $(head -1 "$T/res/samples.tsv")"
[ "$(($(wc -l <"$T/res/samples.tsv") - 1))" -ge 3 ] || fail "samples.tsv: fewer than 3 rows"
[ "$(($(wc -l <"$T/res/samples.tsv") - 1))" = "$samples" ] || fail "samples.tsv: not one row per sample"
if command -v gnuplot >/dev/null; then
	[ "$(head -c 4 "$T/res/plot.png" | tail -c 3)" = PNG ] || fail "plot.png is not a PNG"
fi
CHECKS=$((CHECKS + 1))

# What compare made is gone: the kernel cgroup and the cgmalloc group.
KROOT=$(dirname "$kdir")
gone() {
	[ ! -e "$kdir" ] || fail "$1: $kdir is left"
	set -- "$KROOT"/cgmalloc-compare-*
	[ ! -e "$1" ] || fail "left under $KROOT: $*"
	run ctl ls -r
	[ "$(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')" = "/ " ] ||
		fail "groups left: $(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')"
	CHECKS=$((CHECKS + 1))
}
gone "compare python3"

# ---- the command's status, as JSON ----
run ctl --json compare -i 20 -- "$PY" -c 'import sys; sys.exit(3)'
[ "$ST" = 3 ] || fail "compare of a command that exits 3: exit $ST"
json_ok
"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == 3 and d["cgroup_version"] in (1, 2), d
assert d["command"][0] == "/usr/bin/python3" and d["interval_ms"] == 20, d
assert set(d["peak_bytes"]) >= {"kernel_anon", "kernel_usage", "cgm_current"}, d
' "$T/out" || fail "compare --json: not the report expected"
CHECKS=$((CHECKS + 1))
run ctl compare -- /nonexistent/prog
[ "$ST" = 127 ] || fail "compare of a missing command: exit $ST, expected 127"
gone "a command that exits 3 or is missing"

# ---- a process left running: moved out of the kernel cgroup, then its group goes with it ----
run ctl compare -- sh -c 'sleep 1 & echo $! >"$0"' "$T/bg"
[ "$ST" = 0 ] || fail "compare sh: exit $ST"
kdir=$(field kernel_cgroup)
group=$(field cgmalloc_group)
[ ! -e "$kdir" ] || fail "the kernel cgroup of a command that left a process is not removed"
grep -q "^[0-9]*:memory:.*/cgmalloc-compare-" "/proc/$(cat "$T/bg")/cgroup" 2>/dev/null &&
	fail "the process left running is still in the kernel cgroup"
i=0
until ! ctl ls "$group" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the group of the process left running outlived it"
	sleep 0.05
done
gone "a command that left a process running"

# ---- SIGTERM: passed on to the command, whose status compare returns ----
"$CGMCTL" --hierarchy "$H" compare -i 20 -- "$PY" -c 'import sys, time
open(sys.argv[1], "w").write("ready")
time.sleep(30)' "$T/ready" >"$T/term.out" 2>"$T/term.err" &
pid=$!
PIDS="$PIDS $pid"
wait_for test -s "$T/ready"
kill -TERM "$pid"
set +e
wait "$pid"
ST=$?
set -e
[ "$ST" = 143 ] || fail "compare killed with SIGTERM: exit $ST, expected 143: $(cat "$T/term.err")"
grep -q "^status  *143$" "$T/term.out" || fail "compare killed with SIGTERM: no report with status 143"
kdir=$KROOT/cgmalloc-compare-$pid
gone "compare killed with SIGTERM"

echo "$TEST_NAME: $CHECKS checks passed"
