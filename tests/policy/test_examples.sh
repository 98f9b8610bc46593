#!/bin/sh
# The example policies (examples/senpai.py, examples/oomd.py) run,
# unchanged, on the hierarchy mounted with cgmctl mount as on a cgroup v2
# directory: senpai moves memory.high of a preloaded python3 with spill=1
# down while its pressure stays under the target, so memory.current
# follows it into the compressed pool; oomd kills, through cgroup.kill, a
# group kept under pressure.  Skipped (77) where FUSE or spilling cannot
# be used.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${EXAMPLES:?EXAMPLES must name the examples directory (run through make)}"
: "${HOTCOLD:?HOTCOLD must name tests/spill/hotcold.py (run through make)}"

FUSERMOUNT=$(command -v fusermount3 || true)
[ -n "$FUSERMOUNT" ] && [ -c /dev/fuse ] || skip "no FUSE (fusermount3, /dev/fuse)"
pre "scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
grep -q "spill=1 refused" "$T/probe" && skip "no userfaultfd for system calls: $(head -1 "$T/probe")"

M=$(cd "$T" && pwd -P)/mnt
mkdir "$M"
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	"$FUSERMOUNT" -u -z "$M" 2>/dev/null || true
	rm -rf "$T"
}
mounted() { awk -v m="$M" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }
"$CGMCTL" --hierarchy "$H" mkdir /w
"$CGMCTL" --hierarchy "$H" mount "$M" >"$T/mount.out" 2>"$T/mount.err" &
MPID=$!
PIDS="$PIDS $MPID"
i=0
until mounted; do
	kill -0 "$MPID" 2>/dev/null || skip "the mount is refused: $(head -1 "$T/mount.err")"
	i=$((i + 1))
	[ $i -lt 200 ] || fail "not mounted after 10 s"
	sleep 0.05
done

# A python3 with cold data and a hot part it keeps writing, 11 s.
start "group=/w,spill=1" /usr/bin/python3 "$HOTCOLD" 11
W=$BG
reach ready
before=$(cat "$M/w/memory.current")
# 6 s: a step that lowers memory.high waits for the reclaim it starts
# (up to 0.5 s), so a loaded machine makes 8 steps in 4 s only just.
/usr/bin/python3 "$EXAMPLES/senpai.py" "$M/w" --interval 0.3 --duration 6 --target 5 \
	--max-step 10 --log "$T/senpai.log" 2>"$T/senpai.err" || fail "senpai.py: $(tail -2 "$T/senpai.err")"
after=$(cat "$M/w/memory.current")
high=$(cat "$M/w/memory.high")
steps=$(grep -vc '^#' "$T/senpai.log")
[ "$steps" -ge 8 ] || fail "senpai.py logged $steps steps in 6 s"
[ "$high" != max ] && [ "$high" -lt "$before" ] || fail "senpai.py left memory.high at $high (usage was $before)"
[ "$after" -le $((before * 3 / 4)) ] || fail "memory.current $(mib "$before") -> $(mib "$after") under senpai"
out=$(awk '$1 == "zswpout" { print $2 }' "$M/w/memory.stat")
[ "$out" -gt 0 ] || fail "senpai: nothing was spilled"
echo "$TEST_NAME: senpai: memory.current $(mib "$before") -> $(mib "$after"), memory.high $(mib "$high"), $out pages spilled, $steps steps"
cp "$T/senpai.log" "${SENPAI_LOG:-/dev/null}" 2>/dev/null || true
kill "$W" 2>/dev/null || true
finish 2>/dev/null
CHECKS=$((CHECKS + 4))

# oomd: a group throttled at its memory.high (no spilling: the pressure
# stays) is killed through cgroup.kill.
mkdir "$M/o"
echo 16M >"$M/o/memory.high"
start "group=/o" /usr/bin/python3 -c '
import time
a = []
while True:
    a.append(bytes(100000))
    if len(a) > 300: a = a[150:]'
O=$BG
/usr/bin/python3 "$EXAMPLES/oomd.py" "$M/o" --kind some --threshold 20 --duration 1 --interval 0.3 \
	--once >"$T/oomd.out" 2>"$T/oomd.err" &
D=$!
PIDS="$PIDS $D"
i=0
while kill -0 "$O" 2>/dev/null && [ $i -lt 300 ]; do
	i=$((i + 1))
	sleep 0.05
done
finish
[ "$ST" = 137 ] || fail "oomd.py: the throttled python3 ended with $ST, not SIGKILL: $(cat "$T/oomd.err")"
wait "$D" || fail "oomd.py exited $?: $(cat "$T/oomd.err")"
grep -q "killing $M/o" "$T/oomd.out" || fail "oomd.py did not say why: $(cat "$T/oomd.out")"
echo "$TEST_NAME: oomd: $(cat "$T/oomd.out")"
CHECKS=$((CHECKS + 2))

kill -TERM "$MPID"
wait "$MPID" || fail "cgmctl mount exited $? after SIGTERM"
echo "$TEST_NAME: $CHECKS checks passed"
