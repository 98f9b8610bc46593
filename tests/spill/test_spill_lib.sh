#!/bin/sh
# spill=1 in a preloaded program: memory.reclaim and memory.high move its
# pages into the compressed pool (memory.current falls, memory.zswap.current
# and the zswpout counts rise), every byte comes back right through every
# way of touching a spilled page (tests/spill/spill_prog.c), and without
# the privilege spill=1 is refused in one line while the program runs on.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${SPILL_PROG:?SPILL_PROG must name tests/spill/spill_prog (run through make)}"
: "${HOTCOLD:?HOTCOLD must name tests/spill/hotcold.py (run through make)}"
: "${SPILL_COMMIT:?SPILL_COMMIT must name tests/spill/spill_commit (run through make)}"
: "${SPILL_THREADS_MAX:?SPILL_THREADS_MAX must name tests/spill/spill_threads_max (run through make)}"
: "${SPILL_CANCEL:?SPILL_CANCEL must name tests/spill/spill_cancel (run through make)}"
: "${SPILL_CORE:?SPILL_CORE must name tests/spill/spill_core (run through make)}"
: "${SPILL_STOP:?SPILL_STOP must name tests/spill/spill_stop (run through make)}"
: "${SPILL_STALE:?SPILL_STALE must name tests/spill/spill_stale (run through make)}"
: "${SPILL_FDS:?SPILL_FDS must name tests/spill/spill_fds (run through make)}"

# Threads cancelled (pthread_cancel, deferred) while they allocate under
# limits (tests/spill/spill_cancel.c), first without spilling, so that it
# runs where userfaultfd is not allowed too.  The library's sample reads
# /proc with its lock held: a thread cancelled there left the lock held,
# and the next sample hung the process (30 s timeouts in 3 of 3 runs).
within 60 pre "group=/cancel,max=64M,high=56M" "$SPILL_CANCEL" 48 100
[ "$ST" = 0 ] && grep -qx "spill_cancel: ok" "$T/out" ||
	fail "threads cancelled under memory.max=64M: status $ST, $(tail -1 "$T/err")"
CHECKS=$((CHECKS + 1))

# Skipped where this process cannot have a userfaultfd that serves system calls.
pre "scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
grep -q "spill=1 refused" "$T/probe" && skip "no userfaultfd for system calls: $(head -1 "$T/probe")"

# What the library charges whatever the limits at a process's first
# reclaim (README): the loader's allocations for the pool's libraries
# (12,480 bytes on Debian 12: 4 pages at most) and glibc's TLS vector for
# each of the spiller's two threads (a page each), so 24 KiB; 32 KiB with
# room for another loader.  Only that may pass memory.max.  It was 96 KiB,
# charged ahead (64 KiB for the loader, 16 for each thread): /bin/true
# exec'd at memory.max then took the group 80 KiB past it, now 12 KiB.
FORCED=$((32 * 1024))

# memory.reclaim from cgmctl while the program idles in its loop.  Before
# its checks the program closes every descriptor above stderr (close() of
# each, closefrom, close_range): the engine's stay open, and the spilled
# pages come back right.
start "scope=/r,spill=1" env SPILL_PROG_CLOSE_ALL=1 "$SPILL_PROG" "$T/go"
reach "spill_prog: ready"
before=$(value /r memory.current)
run "$CGMCTL" --hierarchy "$H" set /r memory.reclaim 200M
# The writer waits half a second; a loaded machine may take longer to spill it all.
settle /r zswpout -ge $((40 * MIB / 4096)) || true
after=$(value /r memory.current)
zc=$(value /r memory.zswap.current)
out=$(value /r memory.stat zswpout)
zd=$(value /r memory.stat zswapped)
[ "$out" -ge $((40 * MIB / 4096)) ] || fail "memory.reclaim spilled $out pages of a program of $(mib "$before")"
[ "$zc" -gt 0 ] && [ "$zc" -lt "$zd" ] || fail "memory.zswap.current $zc for $zd bytes spilled"
[ "$after" -le $((before * 3 / 4)) ] || fail "memory.current $(mib "$before") -> $(mib "$after") after spilling $out pages"
echo "$TEST_NAME: memory.reclaim: memory.current $(mib "$before") -> $(mib "$after"), $out pages spilled into $(mib "$zc")"
CHECKS=$((CHECKS + 1))
# Left idle in the pool a second, the pages go from lz4 to zstd
# (spill_recompress=1, the handler thread's idle work): the pool shrinks by
# a tenth at least, nothing comes back; spill_prog then checks every byte.
i=0
while :; do
	zc2=$(value /r memory.zswap.current)
	[ "$zc2" -le $((zc * 9 / 10)) ] && break
	i=$((i + 1))
	[ $i -lt 100 ] || fail "memory.zswap.current $zc -> $zc2 in 5 s idle: nothing recompressed"
	sleep 0.05
done
[ "$(value /r memory.stat zswapped)" -ge $((zd * 9 / 10)) ] ||
	fail "pages came back while the program idled: zswapped $zd -> $(value /r memory.stat zswapped)"
echo "$TEST_NAME: idle pool pages recompressed with zstd: memory.zswap.current $(mib "$zc") -> $(mib "$zc2") in $((i * 50)) ms"
CHECKS=$((CHECKS + 1))
touch "$T/go"
finish
[ "$ST" = 0 ] || fail "spill_prog exited $ST: $(grep FAIL "$T/bg.err" | head -3)"
echo "$TEST_NAME: $(grep -o 'fork took .*' "$T/bg.err") (the child takes over its copy of the engine)"
for c in signal write read dontneed mremap threads fork; do
	grep -qx "spill_prog: ok $c" "$T/bg.err" || fail "no 'ok $c' from spill_prog"
	CHECKS=$((CHECKS + 1))
done
grep -qx "spill_prog: verified" "$T/bg.err" || fail "spill_prog did not verify its bytes"
CHECKS=$((CHECKS + 1))
grep -qx "spill_prog: closed every descriptor above 2" "$T/bg.err" ||
	fail "spill_prog did not close its descriptors"
grep -q "which cgmalloc keeps for spilled memory: left open" "$T/bg.err" ||
	fail "no line on the engine's descriptors the program closed: $(grep cgmalloc "$T/bg.err" | head -3)"
! grep -q "closed the engine's" "$T/bg.err" ||
	fail "the engine lost a descriptor: $(grep "closed the engine" "$T/bg.err")"
echo "$TEST_NAME: every descriptor above stderr closed by the program: the engine's kept, every byte back"
CHECKS=$((CHECKS + 1))

# A process that does not allocate (python3 asleep) answers memory.reclaim:
# its background reclaim, woken through its slot by the writer, after
# 10 ms without an answer from the program's threads; with
# spill_background=0, its handler thread, at its idle ticks.  The writer
# waits for the answer either way (its time is printed, not checked).
for bg in 1 0; do
	start "scope=/idle$bg,spill=1,verbose=1,spill_background=$bg" /usr/bin/python3 -c '
import os, sys, time
data = [os.urandom(64).hex() * 4 for _ in range(100000)]
print("ready", file=sys.stderr, flush=True)
time.sleep(30)'
	reach ready
	sleep 0.2
	before=$(value /idle$bg memory.current)
	t0=$(date +%s%N)
	run "$CGMCTL" --hierarchy "$H" set /idle$bg memory.reclaim 20M
	ms=$((($(date +%s%N) - t0) / 1000000))
	after=$(value /idle$bg memory.current)
	out=$(value /idle$bg memory.stat zswpout)
	[ "$out" -ge $((10 * MIB / 4096)) ] || fail "a sleeping python3 spilled $out pages for memory.reclaim=20M (spill_background=$bg)"
	[ "$after" -lt "$before" ] || fail "a sleeping python3: memory.current $(mib "$before") -> $(mib "$after") (spill_background=$bg)"
	answered=$(grep -c "background reclaim answered" "$T/bg.err" || true)
	# Answered by the library's threads, the program's asleep: memory.stat's kswapd part.
	kd=$(value /idle$bg memory.stat pgsteal_kswapd)
	[ "$kd" = "$out" ] ||
		fail "a sleeping python3 (spill_background=$bg): pgsteal_kswapd $kd, but $out pages spilled"
	if [ "$bg" = 1 ]; then
		[ "$answered" -ge 1 ] || fail "spill_background=1: the background did not answer memory.reclaim"
	else
		[ "$answered" = 0 ] || fail "spill_background=0: a background answered memory.reclaim"
	fi
	echo "$TEST_NAME: idle python3, spill_background=$bg: memory.reclaim 20M: $(mib "$before") -> $(mib "$after"), $out pages spilled, the writer waited $ms ms"
	kill "$BG"
	finish
	CHECKS=$((CHECKS + 1))
done

# holding CONF [MB]: python3 holding an object of MB megabytes, 40 unless
# told (one malloc, filled after it: charged by its resident pages), idle
# once it says ready.
holding() {
	start "$1" /usr/bin/python3 -c '
import sys, time
b = bytes(range(256)) * ('"${2:-40}"' * 4096)
print("ready", file=sys.stderr, flush=True)
time.sleep(30)'
	reach ready
}

# memory.reclaim with nothing read before it: the writer starts from the
# idle program's usage as of now, not from its last sample, which came
# before it filled the 40 MB object it holds (charged by its resident
# pages).  From the stale figure the spill that answered looked like a
# rise, and cgmctl said "reclaimed 0" and failed in every run.
# Then one that takes the background reclaim a while to answer (120M of
# one holding 160 MB: 0.3-0.4 s here): only the thread that answers says
# when it is done.  The handler thread's idle tick said so too, while the
# background was still spilling, and the writer counted 4-6 MB reclaimed
# and said EAGAIN (3 of 3 runs; the 30M failed so in 17 of 24 runs with
# both CPUs kept busy).
for c in "fresh 40 30M" "long 160 120M"; do
	set -- $c
	holding "scope=/$1,spill=1" "$2"
	sleep 0.2
	"$CGMCTL" --hierarchy "$H" set /"$1" memory.reclaim "$3" 2>"$T/verr" ||
		fail "memory.reclaim $3 of an idle python3 holding $2 MB: $(cat "$T/verr")"
	kill "$BG"
	finish
	CHECKS=$((CHECKS + 1))
done
# The same for memory.high and memory.max written below its usage: the
# write reclaims at once, from the usage as of now (from the stale figure
# neither spilled a page, and memory.max showed it at exactly 20M).
for lim in high max; do
	holding "scope=/fresh$lim,spill=1"
	sleep 0.2
	run "$CGMCTL" --hierarchy "$H" set /fresh$lim memory.$lim 20M
	cur=$(value /fresh$lim memory.current)
	out=$(value /fresh$lim memory.stat zswpout)
	[ "$cur" -le $((20 * MIB)) ] && [ "$out" -ge $((20 * MIB / 4096)) ] ||
		fail "memory.$lim=20M written over an idle python3 holding 40 MB: memory.current $(mib "$cur"), $out pages spilled"
	kill "$BG"
	finish
	CHECKS=$((CHECKS + 1))
done
# The same asked of a forked child (a worker idle after its work) of a
# process that has not spilled: no engine to take over at the fork, and
# without a background reclaim of its own the child answered nothing --
# memory.reclaim 20M said EAGAIN after half a second, memory.high=20M
# left the group at 44 MiB.  The child's thread starts at its first
# allocation slow path.  The child leaves when its parent is killed.
for lim in reclaim high; do
	start "scope=/child$lim,spill=1" /usr/bin/python3 -c '
import os, sys, time
ppid = os.getpid()
if os.fork() == 0:
    b = bytes(range(256)) * (40 * 4096)
    print("ready", file=sys.stderr, flush=True)
    while os.getppid() == ppid:
        time.sleep(0.05)
    os._exit(0)
os.wait()'
	reach ready
	sleep 0.2
	"$CGMCTL" --hierarchy "$H" set /child$lim memory.$lim 20M 2>"$T/werr" ||
		fail "memory.$lim 20M of a group whose only holder is an idle forked python3 child: $(cat "$T/werr")"
	cur=$(value /child$lim memory.current)
	out=$(value /child$lim memory.stat zswpout)
	[ "$out" -ge $((20 * MIB / 4096)) ] ||
		fail "memory.$lim 20M of an idle forked child holding 40 MB: $out pages spilled"
	[ "$lim" = reclaim ] || [ "$cur" -le $((20 * MIB)) ] ||
		fail "memory.high=20M over an idle forked child holding 40 MB: memory.current $(mib "$cur")"
	echo "$TEST_NAME: memory.$lim 20M of an idle forked python3 child: $out pages spilled, memory.current $(mib "$cur")"
	kill "$BG"
	finish
	CHECKS=$((CHECKS + 1))
done
# Filled under memory.max=20M without allocating (a 40 MB object touched
# after its malloc, charged by its resident pages): the process's own
# slow paths never see it.  Its background reclaim looks every half second
# while the group has a limit, and a reader's refresh that finds it over
# wakes it at once; either way it spills.  Before, it stayed at 51 MB
# resident, memory.current showing 20M.  Here nothing reads the group
# for 1.5 s first.
holding "scope=/under,spill=1,max=20M"
sleep 1.5
rss=$(awk '/^VmRSS/ { print $2 }' /proc/"$BG"/status)
out=$(value /under memory.stat zswpout)
[ "$rss" -lt $((40 * 1024)) ] && [ "$out" -ge $((16 * MIB / 4096)) ] ||
	fail "an idle python3 over memory.max=20M: $rss KiB resident after 1.5 s, $out pages spilled, memory.current $(mib "$(value /under memory.current)")"
kill "$BG"
finish
CHECKS=$((CHECKS + 1))

# Coldness: python3 with a dict it keeps writing and, above it in memory,
# 80 MB it never touches again; memory.high at half its size spills the
# cold part, and the hot part -- first in the clock's way, but written
# between its passes -- stays (few refaults).
start "scope=/hc,spill=1" /usr/bin/python3 "$HOTCOLD" 4 170000
reach ready
before=$(value /hc memory.current)
ok "$CGMCTL" --hierarchy "$H" set /hc memory.high $((before / 2))
sleep 1
out1=$(value /hc memory.stat zswpout)
in1=$(value /hc memory.stat zswpin)
sleep 1.5
in2=$(value /hc memory.stat zswpin)
cur=$(value /hc memory.current)
# Spilling covers it: no hold-off (by default, spill_throttle=1, the first
# fault after the write held the program off 1.0 s in every run while the
# background's answer had not spilled its first chunk yet, 2026-12-07).
thr=$(value /hc memory.stat throttle_usec)
[ "$thr" -le 500000 ] || fail "hot/cold: throttled $thr us under memory.high at half, which spilling covers"
[ "$out1" -ge $((30 * MIB / 4096)) ] || fail "hot/cold: only $out1 pages spilled of $(mib "$before")"
# The hot part is about 1,300 pages: on a loaded machine it may be spilled once and come back.
[ $((in2 * 8)) -le "$out1" ] || fail "hot/cold: $in2 of $out1 spilled pages came back (the hot part was spilled)"
[ "$cur" -le $((before / 2 + 4 * MIB)) ] || fail "hot/cold: memory.current $(mib "$cur") over memory.high $(mib $((before / 2))) ($out1 spilled, $in2 came back)"
echo "$TEST_NAME: hot/cold python3: $(mib "$before") -> $(mib "$cur"), $out1 pages spilled, $in2 came back, throttled $thr us"
kill "$BG"
finish
CHECKS=$((CHECKS + 1))

# memory.high at half the program's size: it spills instead of throttling.
start "scope=/h,spill=1,high=32M,stats=exit" "$SPILL_PROG" "$T/go2"
reach "spill_prog: ready"
# What it touched last is charged at its next slow path (a sample), which reclaims then.
i=0
while cur=$(value /h memory.current) && [ "$cur" -gt $((36 * MIB)) ] && [ $i -lt 40 ]; do
	i=$((i + 1))
	sleep 0.05
done
thr=$(value /h memory.stat throttle_usec)
out=$(value /h memory.stat zswpout)
[ "$out" -gt 0 ] || fail "over memory.high, nothing spilled"
[ "$cur" -le $((36 * MIB)) ] || fail "memory.current $(mib "$cur") over memory.high=32M with spilling"
[ "$thr" -le 500000 ] || fail "throttled $thr us although spilling could cover it"
echo "$TEST_NAME: memory.high=32M: memory.current $(mib "$cur"), $out pages spilled, throttled $thr us"
CHECKS=$((CHECKS + 1))
touch "$T/go2"
finish
[ "$ST" = 0 ] || fail "spill_prog under memory.high exited $ST: $(grep FAIL "$T/bg.err" | head -3)"
grep -q "^zswpin [1-9]" "$T/bg.err" || fail "the exit report shows no zswpin"
grep -q "^== spill" "$T/bg.err" || fail "the exit report has no spill line"
CHECKS=$((CHECKS + 1))

# The library's threads take no descriptor number from under the program:
# a thread of spill_fds reads back its 48 MiB heap under memory.high=24M
# (the handler serves the faults and samples the group, the background
# reclaim spills again) while the main thread opens /dev/null over and
# over, each time expecting the lowest free number; then the same in a
# forked child.  When each sample opened /proc/self/statm and pagemap for
# the while, 497 of 460,000 opens got another number, and 369 of 195,000
# in the child; with spill_throttle=1, whose handler samples more,
# 2,597-2,883 and 5,429-14,138 (2026-12-07).  Now they are kept open at a
# high number (shim/self_proc.c).
start "group=/fds,spill=1,high=24M" "$SPILL_FDS" "$T/go-fds" 48 2
reach "spill_fds: ready"
touch "$T/go-fds"
finish
[ "$ST" = 0 ] || fail "a library thread took the program's descriptor number: $(grep -v ready "$T/bg.err" | head -4)"
grep -q "^spill_fds: [0-9]* opens, 0 got another number; in the child [0-9]*, 0; 0 bytes wrong" "$T/bg.err" ||
	fail "spill_fds said: $(tail -2 "$T/bg.err")"
[ "$(value /fds memory.stat zswpin)" -gt 1000 ] || fail "spill_fds: only $(value /fds memory.stat zswpin) pages came back: nothing raced"
echo "$TEST_NAME: descriptors under spilling: $(sed -n 's/^spill_fds: //p' "$T/bg.err" | tail -1), $(value /fds memory.stat zswpin) pages came back"
CHECKS=$((CHECKS + 1))

# The same as on a machine with two NUMA nodes (tests/two-nodes), where
# each sample reads /proc/self/numa_maps too, at length: when it was
# opened for the while, 66,523-73,537 of 435,000-462,000 opens got another
# number, and 12,210-17,924 of 266,000-271,000 in the child (2026-12-07).
: >"$T/bg.out"
: >"$T/bg.err"
"$(cd "$(dirname "$0")/.." && pwd)/two-nodes" env LD_PRELOAD="$CGM_LIB" \
	CGMALLOC_CONF="hierarchy=$H,group=/fds2,spill=1,high=24M" "$SPILL_FDS" "$T/go-fds2" 48 2 \
	>>"$T/bg.out" 2>>"$T/bg.err" </dev/null &
BG=$!
PIDS="$PIDS $BG"
i=0
until grep -qx "spill_fds: ready" "$T/bg.err" || ! kill -0 "$BG" 2>/dev/null || [ $i -ge 600 ]; do
	i=$((i + 1))
	sleep 0.05
done
touch "$T/go-fds2"
finish
if [ "$ST" = 77 ] && grep -q "^two-nodes: not run" "$T/bg.err"; then
	echo "$TEST_NAME: descriptors under spilling with two nodes: $(grep "^two-nodes" "$T/bg.err" | head -1)"
else
	[ "$ST" = 0 ] || fail "with two nodes, a library thread took the program's descriptor number: $(grep -v ready "$T/bg.err" | head -4)"
	grep -q "^spill_fds: [0-9]* opens, 0 got another number; in the child [0-9]*, 0; 0 bytes wrong" "$T/bg.err" ||
		fail "spill_fds with two nodes said: $(tail -2 "$T/bg.err")"
	echo "$TEST_NAME: descriptors under spilling with two nodes: $(sed -n 's/^spill_fds: //p' "$T/bg.err" | tail -1)"
	CHECKS=$((CHECKS + 1))
fi

# A process whose walk of its regions is costly (320 MiB mapped by the
# program, 0.3 ms and more): after each batch spilled, the background
# reclaim charges from statm alone and keeps memory.stat's split from the
# last walk (shim/resident.c).  memory.current must still come down to
# memory.high, the split stay within the anon, and every page come back.
start "scope=/walk,spill=1,high=160M" /usr/bin/python3 -c '
import mmap, os, sys, time
n = 320 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
page = bytearray(b"cgmalloc" * 512)
for i in range(n // 4096):
    page[0:8] = i.to_bytes(8, "little")
    m[i * 4096:(i + 1) * 4096] = page
print("filled", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
for i in range(n // 4096):
    page[0:8] = i.to_bytes(8, "little")
    if m[i * 4096:(i + 1) * 4096] != page:
        sys.exit("page %d differs" % i)
print("ok", flush=True)' "$T/go_walk"
reach filled
# (The split is looked at while the spilling goes on too, when the anon
# falls fastest below what the last walk found.)
walk_split() {
	value /walk memory.stat >"$T/walk.stat"
	anon=$(awk '$1 == "anon" { print $2 }' "$T/walk.stat")
	split=$(awk '$1 == "heap_free" || $1 == "mapped_anon" { s += $2 } END { print s }' "$T/walk.stat")
	[ "$split" -le "$anon" ] || fail "heap_free + mapped_anon $(mib "$split") over anon $(mib "$anon")"
}
i=0
while cur=$(value /walk memory.current) && [ "$cur" -gt $((168 * MIB)) ] && [ $i -lt 200 ]; do
	walk_split
	i=$((i + 1))
	sleep 0.05
done
[ "$cur" -le $((168 * MIB)) ] || fail "320 MiB mapped under memory.high=160M: memory.current still $(mib "$cur")"
walk_split
[ "$(awk '$1 == "zswpout" { print $2 }' "$T/walk.stat")" -gt $((100 * MIB / 4096)) ] ||
	fail "320 MiB under memory.high=160M: $(awk '$1 == "zswpout"' "$T/walk.stat") pages spilled"
touch "$T/go_walk"
reach ok
finish
[ "$ST" = 0 ] || fail "320 MiB under memory.high=160M: python3 exited $ST: $(head -3 "$T/bg.err")"
echo "$TEST_NAME: 320 MiB mapped under memory.high=160M: memory.current $(mib "$cur")"
CHECKS=$((CHECKS + 1))

# A block filled after its malloc, with no allocation to sample it
# (fid_prog bigtouch: 256 MiB, every page written, in 0.17 s here): the
# background reclaim's look every half second found the group at 256 MiB
# under memory.high=64M before it spilled any (memory.peak 256 MiB in 3
# of 3 runs).  The malloc of a block that could take the group to its
# limit starts a watch of the group's growth (shim/bg_reclaim.c): 71-79
# MiB, with two CPUs kept busy too.  Filled 1.5 s after its malloc, when
# that watch is long over: while what is live and not resident could
# take the group to its limit, the thread looks as often as a fill at
# 4 GB/s would take to reach its mark (14 ms here, 0.1 s at most), and
# watches closely once it sees the group grow.  Looking every 0.1 s, it
# peaked at 80-185 MiB, at 217 in a make check and at 256 in a CI run
# (the fill, 0.17 s here, over between two looks); now 76-113 MiB in 24
# runs, 12 of them with two CPUs kept busy.  The bound is 192 MiB.
for late in 0 1500; do
	start "scope=/fill$late,spill=1,high=64M" "$FID_PROG" bigtouch 256M 100 hold=1500 late=$late
	reach peak
	peak=$(value /fill$late memory.peak)
	[ "$peak" -le $((192 * MIB)) ] ||
		fail "256 MiB filled ${late} ms after its malloc under memory.high=64M: memory.peak $(mib "$peak")"
	i=0
	while cur=$(value /fill$late memory.current) && [ "$cur" -gt $((64 * MIB)) ] && [ $i -lt 20 ]; do
		i=$((i + 1))
		sleep 0.05
	done
	[ "$cur" -le $((64 * MIB)) ] ||
		fail "256 MiB filled ${late} ms after its malloc under memory.high=64M: memory.current $(mib "$cur")"
	finish
	[ "$ST" = 0 ] || fail "bigtouch late=$late under memory.high=64M exited $ST: $(head -3 "$T/bg.err")"
	echo "$TEST_NAME: 256 MiB filled ${late} ms after its malloc under memory.high=64M: memory.peak $(mib "$peak")"
done
CHECKS=$((CHECKS + 1))

# The same block filled 2 s after its malloc by a process that first
# wrote 61 MiB (fid_prog's base=), so that the group sits past its near
# mark (limit - limit/16), where the background, finding nothing to
# spill, looked less and less often: memory.peak 317 MiB in 3 of 3 runs,
# the whole fill between two looks.  Now, while what it could fill unseen
# would take the group to its limit, it looks every 10 ms there: 77-94
# MiB in 25 runs (172 once with both CPUs kept busy).
start "scope=/fillnear,spill=1,high=64M" "$FID_PROG" bigtouch 256M 100 hold=1500 late=2000 base=61M
reach peak
peak=$(value /fillnear memory.peak)
[ "$peak" -le $((192 * MIB)) ] ||
	fail "256 MiB filled 2 s after its malloc at 61 MiB under memory.high=64M: memory.peak $(mib "$peak")"
finish
[ "$ST" = 0 ] || fail "bigtouch base=61M under memory.high=64M exited $ST: $(head -3 "$T/bg.err")"
echo "$TEST_NAME: 256 MiB filled 2 s after its malloc at 61 MiB under memory.high=64M: memory.peak $(mib "$peak")"
CHECKS=$((CHECKS + 1))

# spill_strict_high=1 throttles those touches as the kernel does: while
# the process could fill past its limit without allocating, its first
# touches fault through the handler, which holds the thread off whenever
# the group is over memory.high (shim/spiller.c): 65-66 MiB in every run,
# against 82-185 MiB without the key.  Filled at once (late=0), catching
# begins at the background thread's look after the malloc; when that
# look took the threat from the last walk of the regions alone, the fill
# went uncaught in 2 runs of 10 (and at 256 MiB in one make check).
for late in 0 1500; do
	start "scope=/strict$late,spill=1,high=64M,spill_strict_high=1,stats=exit" "$FID_PROG" bigtouch 256M 100 \
		hold=1500 late=$late
	reach peak
	peak=$(value /strict$late memory.peak)
	[ "$peak" -le $((76 * MIB)) ] ||
		fail "256 MiB filled ${late} ms after its malloc under memory.high=64M, spill_strict_high=1: memory.peak $(mib "$peak")"
	finish
	[ "$ST" = 0 ] || fail "bigtouch late=$late, spill_strict_high=1 exited $ST: $(head -3 "$T/bg.err")"
	caught=$(sed -n 's/.* zero_filled \([0-9]*\) .*/\1/p' "$T/bg.err")
	[ "${caught:-0}" -ge $((128 * MIB / 4096)) ] ||
		fail "bigtouch late=$late, spill_strict_high=1: ${caught:-no} first touches went through the handler"
	echo "$TEST_NAME: 256 MiB filled ${late} ms after its malloc under memory.high=64M, spill_strict_high=1:" \
		"memory.peak $(mib "$peak"), $caught first touches through the handler"
done
CHECKS=$((CHECKS + 1))

# The background tests' program: python3 making 100 MB of strings (then
# what each test appends).
STRINGS_PY='import os, sys, time
data = [os.urandom(32).hex() * 7 for _ in range(150000)]'

# Background reclaim (spill_background=1, the default): python3 making
# 100 MB of strings under memory.high=40M.  A thread of its own does a
# large part of the spilling (the exit report's "background" pages: 73-86%
# in this short build, 0.5 s), so the program's thread reclaims less; with
# spill_background=0 there is no such thread and the program's thread
# does it all.  (The limit is lifted before the
# program exits: its teardown touches every string, which is not what is
# measured here.)  The build's thread takes 2.7-3.3 s of CPU instead of 3.7-4.5
# (bench/spill_workload.sh's python3, see README).  With the background
# thread there, the program's thread leaves the pool's recompression to
# zstd to it (the exit report's "by the program's threads": 0); without,
# it recompresses as it reclaims.
for bg in 1 0; do
	start "scope=/bg$bg,spill=1,high=40M,stats=exit,spill_background=$bg" /usr/bin/python3 -c "$STRINGS_PY"'
print("threads", len(os.listdir("/proc/self/task")), file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)' "$T/go-bg$bg"
	reach "threads $((2 + bg))"
	ok "$CGMCTL" --hierarchy "$H" set /bg$bg memory.high max
	touch "$T/go-bg$bg"
	finish
	[ "$ST" = 0 ] || fail "spill_background=$bg: python3 exited $ST: $(head -3 "$T/bg.err")"
	spilled=$(sed -n 's/^spilled \([0-9]*\) .*/\1/p' "$T/bg.err")
	bgp=$(sed -n 's/^spilled .* background \([0-9]*\) (stopped [0-9]*) caught [0-9]* .*$/\1/p' "$T/bg.err")
	rcd=$(sed -n "s/^spilled .* (by the program's threads \([0-9]*\), .*/\1/p" "$T/bg.err")
	dic=$(sed -n "s/^spilled .*, against the dictionary \([0-9]*\)) .*/\1/p" "$T/bg.err")
	zao=$(sed -n "s/^spilled .* zstd_at_once \([0-9]*\) (against the dictionary [0-9]*) .*/\1/p" "$T/bg.err")
	zad=$(sed -n "s/^spilled .* zstd_at_once [0-9]* (against the dictionary \([0-9]*\)) .*/\1/p" "$T/bg.err")
	eng=$(sed -n "s/^spilled .* engine_bytes \([0-9]*\) (scratch [0-9]*) .*/\1/p" "$T/bg.err")
	[ -n "$spilled" ] && [ -n "$bgp" ] && [ -n "$rcd" ] && [ "$spilled" -gt 0 ] ||
		fail "spill_background=$bg: no spill line in the exit report: $(grep -v '^[a-z_]* [0-9]*$' "$T/bg.err" | head -3)"
	# The engine's own memory: its tables at least (an entry per page out).
	[ -n "$eng" ] && [ "$eng" -gt 0 ] ||
		fail "spill_background=$bg: the exit report has no engine_bytes, or 0: '$eng'"
	# memory.stat's reclaim by whose thread: the library's (kswapd), the program's (direct).
	reported() { sed -n "s/^$1 \([0-9]*\)$/\1/p" "$T/bg.err"; }
	steal=$(reported pgsteal) skd=$(reported pgsteal_kswapd) sdi=$(reported pgsteal_direct)
	scan=$(reported pgscan) nkd=$(reported pgscan_kswapd) ndi=$(reported pgscan_direct)
	[ -n "$steal" ] && [ -n "$skd" ] && [ -n "$sdi" ] && [ -n "$scan" ] && [ -n "$nkd" ] && [ -n "$ndi" ] ||
		fail "spill_background=$bg: no pgsteal/pgscan and their kswapd and direct parts in memory.stat"
	[ $((skd + sdi)) = "$steal" ] && [ $((nkd + ndi)) = "$scan" ] ||
		fail "spill_background=$bg: pgsteal $steal = kswapd $skd + direct $sdi, pgscan $scan = kswapd $nkd + direct $ndi: the parts do not add up"
	[ "$steal" = "$spilled" ] || fail "spill_background=$bg: pgsteal $steal, but $spilled pages spilled"
	if [ "$bg" = 1 ]; then
		# (Its "background" pages count the pool pages its recompression gave back too.)
		[ $((skd * 4)) -ge "$steal" ] ||
			fail "spill_background=1: pgsteal_kswapd $skd of pgsteal $steal: the background's spills are not there"
	else
		[ "$skd" = 0 ] && [ "$nkd" = 0 ] ||
			fail "spill_background=0: the library's threads reclaimed ($skd of $steal pages, $nkd looked at)"
	fi
	echo "$TEST_NAME: spill_background=$bg: pgsteal $steal: kswapd $skd, direct $sdi"
	if [ "$bg" = 1 ]; then
		[ $((bgp * 4)) -ge "$spilled" ] ||
			fail "spill_background=1: the background took $bgp of $spilled pages"
		[ "$rcd" = 0 ] || fail "spill_background=1: the program's thread recompressed $rcd pool pages"
		echo "$TEST_NAME: background reclaim: $bgp pages of $spilled spilled by it"
		# spill_background_zstd=1: what it spilled went to zstd at once.
		[ "$bgp" -lt 256 ] || [ "${zao:-0}" -gt 0 ] ||
			fail "spill_background=1: the background spilled $bgp pages, none stored with zstd at once"
		echo "$TEST_NAME: stored with zstd at once: ${zao:-0} pages"
		# spill_dict=1: the dictionary is chosen after 4,096 stores halved,
		# and serves recompression and the background's stores.
		[ "$spilled" -lt 8192 ] || [ $((${dic:-0} + ${zad:-0})) -gt 0 ] ||
			fail "spill_background=1: $spilled pages spilled, none compressed against the dictionary"
		echo "$TEST_NAME: against the dictionary: ${dic:-0} pages recompressed, ${zad:-0} stored"
	else
		[ "$bgp" = 0 ] || fail "spill_background=0: $bgp pages reclaimed in the background"
		[ "${zao:-0}" = 0 ] || fail "spill_background=0: $zao pages stored with zstd at once"
		[ "$rcd" -gt 0 ] || fail "spill_background=0: the program's thread recompressed nothing"
		echo "$TEST_NAME: no background reclaim: the program's thread recompressed $rcd pool pages"
	fi
	CHECKS=$((CHECKS + 1))
done

# An idle program left just under its limit: the background looks again
# now and then (pages that fault back would raise usage), backing off
# while there is nothing to spill.  Its thread (the process's last) used
# 220-230 ms of CPU in 3 s when it looked every 10 ms, 0-20 ms now.
start "scope=/quiet,spill=1,high=40M" /usr/bin/python3 -c "$STRINGS_PY"'
print("built", file=sys.stderr, flush=True)
time.sleep(5)'
reach built
sleep 0.5
bgt=$(ls /proc/"$BG"/task | sort -n | tail -1)
ticks() { awk '{ print $14 + $15 }' /proc/"$BG"/task/"$bgt"/stat; }
c0=$(ticks)
sleep 3
c1=$(ticks)
kill "$BG"
finish
[ $((c1 - c0)) -le 10 ] || fail "an idle program near its limit: its background used $(((c1 - c0) * 10)) ms of CPU in 3 s"
echo "$TEST_NAME: idle near the limit: the background used $(((c1 - c0) * 10)) ms of CPU in 3 s"
CHECKS=$((CHECKS + 1))

# A program that works on what is spilled (python3 reading its 100 MB of
# strings over and over under memory.high=40M) brings pages back as fast
# as the background spills them.  By default (spill_throttle=1) memory.high
# holds all the same, as the kernel's does: the handler wakes the
# background reclaim, which goes on spilling what comes back, and holds
# off serving faults only while that falls behind; the group stays near
# its limit, thrashing (42-43 MiB, 79,000-98,000 pages spilled by the
# background, 0 ms throttled, 5 reads of the strings where spill_throttle=0
# made 35-46 at 79-80 MiB; 4 runs on 2026-12-07).  The bound is the
# read-back case's below, 52 MiB.  With spill_throttle=0 the background stops rather than
# go on spilling what comes back, and the group passes memory.high (81
# MiB): measured by what the library's threads spilled in the 2.5 s of
# reading (pgsteal_kswapd; the program's thread, reading, allocates little
# and spilled nothing in any run measured): with the stop taken out,
# 87,137-119,096 pages, against 12,877-48,241 with it (2026-12-05, 6 and
# 17 runs of this case alone; 14,273-43,018 in 26 runs on 2026-12-06, idle
# or with three CPU hogs).  What it spills is mostly what came back during
# its stops, so a fast machine spills more: once 62,233 in a whole make
# check.  The bound: 70,000, four fifths of the least without the stop (it
# was 37,500, then 50,000, both by zswpout, then 60,000).  (Whether it also
# says it stopped depends on whether a sample showed the group over its
# margin meanwhile: python3 reading allocates little, and in 1 run of 27 it
# had nothing to spill.)
kswapd() { value /th$1 memory.stat pgsteal_kswapd; }
for key in 0 1; do
	start "scope=/th$key,spill=1,high=40M,verbose=1,spill_throttle=$key" /usr/bin/python3 -c "$STRINGS_PY"'
print("built", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
t = time.time()
while time.time() - t < 2.5:
    n = sum(len(s) for s in data)
print("looped", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)' "$T/go-th1$key" "$T/go-th2$key"
	reach built
	z0=$(kswapd $key)
	touch "$T/go-th1$key"
	# memory.current looked at while it reads, by default only: cgmctl
	# run back to back takes a CPU, and spill_throttle=0's figures above
	# were measured without it (with it, the program read its strings 35-46
	# times instead of 241-322, and the background spilled 51,000-66,000
	# pages, 2026-12-07).
	top=0
	i=0
	while [ $key = 1 ] && ! grep -qx looped "$T/bg.err" && [ $i -lt 2000 ]; do
		cur=$(value /th$key memory.current)
		[ "$cur" -gt "$top" ] && top=$cur
		i=$((i + 1))
	done
	reach looped
	z1=$(kswapd $key)
	throttled=$(value /th$key memory.stat throttle_usec)
	ok "$CGMCTL" --hierarchy "$H" set /th$key memory.high max
	touch "$T/go-th2$key"
	finish
	[ "$ST" = 0 ] || fail "thrashing python3 (spill_throttle=$key) exited $ST: $(head -3 "$T/bg.err")"
	[ -n "$z0" ] && [ -n "$z1" ] || fail "no pgsteal_kswapd in /th$key's memory.stat"
	if [ $key = 0 ]; then
		stops=$(sed -n '/^built$/,/^looped$/p' "$T/bg.err" | grep -c "background reclaim stops" || true)
		[ $((z1 - z0)) -le 70000 ] ||
			fail "spill_throttle=0: the background went on spilling while python3 read back its strings: it spilled $((z1 - z0)) pages in 2.5 s ($stops stops)"
		echo "$TEST_NAME: thrashing, spill_throttle=0: the background spilled $((z1 - z0)) pages in 2.5 s of reading back, $stops stops of it"
	else
		[ "$top" -le $((52 * MIB)) ] ||
			fail "thrashing by default: memory.current reached $(mib "$top") over memory.high=40M (the background spilled $((z1 - z0)) pages, throttled $throttled us)"
		echo "$TEST_NAME: thrashing by default (spill_throttle=1): memory.current at most $(mib "$top") under memory.high=40M, the background spilled $((z1 - z0)) pages in 2.5 s, throttled $((throttled / 1000)) ms"
	fi
done
CHECKS=$((CHECKS + 1))

# The library is linked for lazy binding; with spill=1 every function it
# imports is bound as the spiller starts, none left to a resolver that
# could fault on a spilled page (shim/bind_now.c).
# (LD_BIND_NOW has the loader bind them all before: none left to bind.)
bind=$(grep "lazily bound functions bound now" "$T/bg.err" | head -1)
bound='[1-9][0-9]*'
[ -z "${LD_BIND_NOW:-}" ] || bound=0
echo "$bind" | grep -Eq ": spill: $bound of the library's [0-9]+ lazily bound functions bound now, 0 left unbound$" ||
	fail "spill=1 did not bind the library's functions at once: '$bind'"
CHECKS=$((CHECKS + 1))

# A large process reading back what was spilled over memory.high: the
# handler's throttle charges it from the anon alone, walking its regions
# only when a sample is due by its cost, and sleeps where it left a walk
# out (shim/spiller.c: spill_throttle).  Walking at every batch of faults,
# this run walked them 1,450-1,563 times in its 2 s of reading; now
# 94-102, with 1,167-1,264 sleeps.
start "scope=/walk,spill=1,high=96M,stats=exit" /usr/bin/python3 -c '
import time
b = bytearray(b"\x01") * (320 << 20)
n = 0
t = time.monotonic() + 2
while time.monotonic() < t:
    for i in range(0, len(b), 4096):
        n += b[i]
print(n)'
finish
[ "$ST" = 0 ] || fail "reading back 320 MiB under memory.high=96M: python3 exited $ST: $(head -3 "$T/bg.err")"
walked=$(sed -n 's/^spilled .* samples walked \([0-9]*\) (slept [0-9]*)$/\1/p' "$T/bg.err")
slept=$(sed -n 's/^spilled .* samples walked [0-9]* (slept \([0-9]*\))$/\1/p' "$T/bg.err")
back=$(sed -n 's/^spilled [0-9]* refaulted \([0-9]*\) .*/\1/p' "$T/bg.err")
[ -n "$walked" ] && [ -n "$slept" ] && [ -n "$back" ] ||
	fail "reading back 320 MiB: no samples walked in the exit report: $(grep '^spilled' "$T/bg.err" | head -1)"
[ "$back" -ge 1000 ] || fail "reading back 320 MiB under memory.high=96M: only $back pages came back by a fault"
[ "$walked" -le 400 ] && [ "$slept" -gt 0 ] ||
	fail "reading back 320 MiB under memory.high=96M: the regions were walked $walked times ($slept walks slept instead)"
echo "$TEST_NAME: reading back 320 MiB under memory.high=96M: $back pages came back by a fault, the regions walked $walked times, $slept walks slept instead"
CHECKS=$((CHECKS + 1))

# A program exec'd into a group at its memory.max: the loader's
# allocations for the spill pool's libraries are charged past the limit
# (shim/lazy_libs.c), so spilling starts.  Before, spill=1 was refused
# with "loading liblz4.so.1 failed: out of memory" and stayed off.
# (spill_background=0: the libraries are loaded in the constructor; with
# the background reclaim, at the first reclaim, as the next test shows.)
start "group=/atmax,max=24M" /usr/bin/python3 -c '
import os, sys, time
a = []
try:
    while True:
        a.append(bytes(100000))
except MemoryError:
    pass
print("full", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)' "$T/go-atmax"
reach full
# What they pass memory.max by, from here: memory.peak starts again at
# the usage now, the limit.
ok ctl set /atmax memory.peak 0
env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,group=/atmax,spill=1,spill_background=0,verbose=1" /bin/true 2>"$T/atmax.err" ||
	fail "/bin/true exec'd at memory.max exited $?: $(head -3 "$T/atmax.err")"
# The same with the background reclaim: its thread is made at start-up,
# the first charge at the limit asks it for the libraries and the engine.
# glibc's calloc for the thread's TLS, refused at the limit, reclaimed,
# which asked for the thread again: SIGSEGV, the stack exhausted (every
# run), until the thread's start was charged past the limit.
for _ in 1 2 3; do
	within 30 pre "group=/atmax,spill=1" /bin/true
	[ "$ST" = 0 ] || fail "/bin/true exec'd at memory.max with the background reclaim: status $ST, $(head -2 "$T/err")"
done
# Past memory.max by what the library must charge there ($FORCED; the
# loader's stock was 256 KiB before, then 64 KiB, all of it past the
# limit), and no more.
ok ctl cat /atmax memory.peak
peak=$(cat "$T/out")
ok ctl cat /atmax memory.max
[ "$peak" -le $(($(cat "$T/out") + FORCED)) ] ||
	fail "spilling started at memory.max took the group $((peak - $(cat "$T/out"))) bytes past it"
touch "$T/go-atmax"
finish
grep -q "^cgmalloc: spill: on, lz4 pool" "$T/atmax.err" ||
	fail "spill=1 exec'd at memory.max did not start: $(grep -v config "$T/atmax.err" | head -2)"
CHECKS=$((CHECKS + 1))

# spill=1 in a process that has not reached its limit yet costs it the
# background reclaim's thread alone: the pool's libraries (liblz4, libzstd,
# liburing), the engine and its fault-handler thread come at the first
# reclaim, which that thread makes.  They were all made in the
# constructor: bench/bignum under spill=1 had 2,480 KiB resident at exit
# against 2,116 with the same limits alone, now 2,188.
within 60 pre "group=/lazy,spill=1,high=32M" /usr/bin/python3 -c '
import os
def state():
    maps = open("/proc/self/maps").read()
    libs = [l for l in ("liblz4", "libzstd", "liburing") if l in maps]
    threads = open("/proc/self/status").read().split("Threads:")[1].split()[0]
    return "%s threads %s" % (",".join(libs) or "none", threads)
print("before", state(), flush=True)
data = [os.urandom(64).hex() * 4 for _ in range(100000)]
print("after", state(), flush=True)
print("data", "ok" if all(len(s) == 512 for s in data) else "BAD", flush=True)'
[ "$ST" = 0 ] && grep -qx "data ok" "$T/out" || fail "spill=1 python3 under high=32M: status $ST, $(cat "$T/out") $(tail -1 "$T/err")"
grep -qx "before none threads 2" "$T/out" ||
	fail "spill=1 before any reclaim: $(grep before "$T/out") (want no pool library loaded, and the background thread alone)"
grep -qx "after liblz4,libzstd,liburing threads 3" "$T/out" ||
	fail "spill=1 after reclaim: $(grep after "$T/out") (want the three libraries and the handler thread)"
[ "$(value /lazy memory.stat zswpout)" -gt 0 ] || fail "spill=1 python3 under high=32M: nothing spilled"
echo "$TEST_NAME: spill=1 before its first reclaim: $(sed -n 's/^before //p' "$T/out"); after it: $(sed -n 's/^after //p' "$T/out"), $(value /lazy memory.stat zswpout) pages spilled"
CHECKS=$((CHECKS + 1))

# mlockall() before the first reclaim: no engine is made afterwards, so
# a memory.reclaim spills nothing (before, a process whose engine had not
# been made -- a forked child before its first reclaim -- went on to spill).
start "group=/lockfirst,spill=1" /usr/bin/python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
print("mlockall", libc.mlockall(2), ctypes.get_errno(), flush=True)
data = [os.urandom(64).hex() * 4 for _ in range(100000)]
print("ready", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
print("libs", "liblz4" in open("/proc/self/maps").read(), flush=True)
print("data", "ok" if all(len(s) == 512 for s in data) else "BAD", flush=True)' "$T/go-lockfirst"
reach ready
"$CGMCTL" --hierarchy "$H" set /lockfirst memory.reclaim 20M 2>/dev/null || true
touch "$T/go-lockfirst"
finish
[ "$ST" = 0 ] && grep -qx "mlockall 0 0" "$T/bg.out" && grep -qx "data ok" "$T/bg.out" ||
	fail "mlockall(MCL_FUTURE) first under spill=1: status $ST, $(cat "$T/bg.out") $(tail -1 "$T/bg.err")"
grep -qx "libs False" "$T/bg.out" || fail "mlockall(MCL_FUTURE) first: the pool's libraries were loaded after it"
[ "$(value /lockfirst memory.stat zswpout)" = 0 ] ||
	fail "mlockall(MCL_FUTURE) first: memory.reclaim spilled $(value /lockfirst memory.stat zswpout) pages after it"
grep -q "spill: the program locked its memory (mlockall MCL_FUTURE) before anything was spilled" "$T/bg.err" ||
	fail "mlockall(MCL_FUTURE) first: no line on stderr: $(head -2 "$T/bg.err")"
echo "$TEST_NAME: mlockall(MCL_FUTURE) before the first reclaim: memory.reclaim spilled nothing after it"
CHECKS=$((CHECKS + 1))

# Reading back under memory.high: the same python3 reading its strings
# back twice.  With spill_hold_high=1 (spill_throttle=0) the handler
# thread spills what they take the group over, a charge batch at a time;
# by default (spill_throttle=1), once the group is over, it wakes the
# background reclaim and, if that spills less than comes back, holds off
# serving faults for the kernel's memory.high penalty (here it keeps up:
# 0 ms throttled in 3 runs of 3 on 2026-12-07, where the hold-off at
# every look took 0.4-0.7 s); with neither the group passes memory.high
# while the background stops.  memory.current is looked at while it
# reads.  The bound, 52 MiB, is well under the 81-83 MiB of the default,
# above the 40-47 MiB of 78 runs here with spill_hold_high=1 on
# 2026-12-06 (40-42 in 16 with both CPUs kept busy; 48 was the bound,
# passed once in a whole check-spill-lib), and spill_throttle=1's 41 in
# 3 runs on 2026-12-07 (read in 1.4-1.7 s, 0.6-0.7 s of it throttled,
# against 0.4-0.6 s at 81-82 MiB by default).  It reached 50-68 MiB
# when the handler gave up whenever the background reclaim had the lock
# (56 MiB was the bound then, and CI saw 57).
for hold in spill_hold_high spill_throttle none; do
	case $hold in
	spill_hold_high) extra=",spill_hold_high=1,spill_throttle=0" ;;
	spill_throttle) extra= ;;
	*) extra=",spill_throttle=0" ;;
	esac
	start "scope=/hold$hold,spill=1,high=40M$extra" /usr/bin/python3 -c "$STRINGS_PY"'
print("built", file=sys.stderr, flush=True)
for _ in range(2):
    n = sum(len(s) for s in data)
print("read", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)' "$T/go-hold$hold"
	reach built
	top=0
	i=0
	while ! grep -qx read "$T/bg.err" && [ $i -lt 2000 ]; do
		cur=$(value /hold$hold memory.current)
		[ "$cur" -gt "$top" ] && top=$cur
		i=$((i + 1))
	done
	back=$(value /hold$hold memory.stat zswpin)
	throttled=$(value /hold$hold memory.stat throttle_usec)
	# (Its teardown touches every string: not under the limit.)
	ok "$CGMCTL" --hierarchy "$H" set /hold$hold memory.high max
	touch "$T/go-hold$hold"
	finish
	[ "$ST" = 0 ] || fail "$hold: python3 exited $ST: $(head -3 "$T/bg.err")"
	[ "$back" -ge $((40 * MIB / 4096)) ] || fail "$hold: only $back pages came back"
	case $hold in
	spill_hold_high)
		[ "$top" -le $((52 * MIB)) ] ||
			fail "spill_hold_high=1: memory.current reached $(mib "$top") over memory.high=40M ($back pages came back)"
		top1=$top
		;;
	spill_throttle)
		[ "$top" -le $((52 * MIB)) ] ||
			fail "spill_throttle=1 (the default): memory.current reached $(mib "$top") over memory.high=40M ($back pages came back, throttled $throttled us)"
		top2=$top
		;;
	*)
		echo "$TEST_NAME: reading back under memory.high=40M: memory.current at most $(mib "$top1") with spill_hold_high=1 alone, $(mib "$top2") by default, spill_throttle=1 (throttled $((throttled2 / 1000)) ms), $(mib "$top") with neither"
		;;
	esac
	[ "$hold" != spill_throttle ] || throttled2=$throttled
done
CHECKS=$((CHECKS + 1))

# The same reading back with no background reclaim (spill_background=0):
# nothing but the handler can spill while the program's thread waits in
# a fault, and the handler held it off for the whole penalty fault after
# fault without spilling -- the strings not read once in 60 s (killed),
# in every run.  Now it spills for what came back before it holds off,
# as the kernel's faulting task reclaims: both reads in 2.6 s, the whole
# run in 6 s (memory.peak 49 MiB, held off 10 times).
t0=$(date +%s)
within 60 pre "group=/nobg,spill=1,high=40M,spill_background=0" /usr/bin/python3 -c "$STRINGS_PY"'
for _ in range(2):
    n = sum(len(s) for s in data)
print("read", file=sys.stderr, flush=True)'
[ "$ST" = 0 ] && grep -qx read "$T/err" ||
	fail "reading back under memory.high=40M with spill_background=0: status $ST, $(grep -v '^ ' "$T/err" | tail -2)"
peak=$(value /nobg memory.peak)
[ "$peak" -le $((64 * MIB)) ] ||
	fail "reading back under memory.high=40M with spill_background=0: memory.peak $(mib "$peak")"
echo "$TEST_NAME: reading back under memory.high=40M with spill_background=0: $(($(date +%s) - t0)) s, memory.peak $(mib "$peak"), throttled $(($(value /nobg memory.stat throttle_usec) / 1000)) ms"
CHECKS=$((CHECKS + 1))

# memory.zswap.max: the pool stops there (no backing file), and with one
# the oldest pages are written back to it (memory.swap.current) and still
# come back right.
start "scope=/z,spill=1" "$SPILL_PROG" "$T/go4"
reach "spill_prog: ready"
ok "$CGMCTL" --hierarchy "$H" set /z memory.zswap.max 4M
run "$CGMCTL" --hierarchy "$H" set /z memory.reclaim 200M
zc=$(value /z memory.zswap.current)
out=$(value /z memory.stat zswpout)
[ "$out" -gt 0 ] || fail "memory.zswap.max=4M: nothing spilled"
[ "$zc" -le $((5 * MIB)) ] || fail "memory.zswap.max=4M: memory.zswap.current $(mib "$zc")"
echo "$TEST_NAME: memory.zswap.max=4M: $out pages spilled, pool $(mib "$zc")"
touch "$T/go4"
finish
[ "$ST" = 0 ] || fail "spill_prog under zswap.max exited $ST: $(grep FAIL "$T/bg.err" | head -3)"

start "scope=/w,spill=1,spill_backing=$T/swapfile,stats=exit" "$SPILL_PROG" "$T/go5"
reach "spill_prog: ready"
ok "$CGMCTL" --hierarchy "$H" set /w memory.zswap.max 4M
run "$CGMCTL" --hierarchy "$H" set /w memory.reclaim 200M
# Written back pages count in memory.swap.current once their writes complete.
i=0
while sc=$(value /w memory.swap.current) && [ "$sc" = 0 ] && [ $i -lt 40 ]; do
	i=$((i + 1))
	sleep 0.05
done
zc=$(value /w memory.zswap.current)
wb=$(value /w memory.stat zswpwb)
[ "$wb" -gt 0 ] && [ "$sc" -gt 0 ] || fail "writeback past memory.zswap.max: zswpwb $wb, memory.swap.current $sc"
[ "$zc" -le $((5 * MIB)) ] || fail "writeback: memory.zswap.current $(mib "$zc") over 4M"
echo "$TEST_NAME: writeback: pool $(mib "$zc"), $wb pages written back ($(mib "$sc") in the file)"
touch "$T/go5"
finish
[ "$ST" = 0 ] || fail "spill_prog with writeback exited $ST: $(grep FAIL "$T/bg.err" | head -3)"
grep -qx "spill_prog: verified" "$T/bg.err" || fail "spill_prog with writeback did not verify"
grep -q "^pswpin [1-9]" "$T/bg.err" || fail "nothing was read back from the backing file"
CHECKS=$((CHECKS + 2))

# kill -9 in the middle of a spill: the group's charge goes with the
# process, and a new process in the group starts from its own.
ok "$CGMCTL" --hierarchy "$H" mkdir /k
start "group=/k,spill=1" "$SPILL_PROG" "$T/go3"
reach "spill_prog: ready"
"$CGMCTL" --hierarchy "$H" set /k memory.reclaim 200M 2>/dev/null &
i=0
until [ "$(value /k memory.stat zswpout)" -gt 0 ] || [ $i -ge 200 ]; do
	i=$((i + 1))
	sleep 0.01
done
kill -9 "$BG"
finish 2>/dev/null
wait
[ "$(value /k memory.stat zswpout)" -gt 0 ] || fail "nothing spilled before kill -9"
left=$(value /k memory.current)
[ "$left" -le $((1 * MIB)) ] || fail "after kill -9 mid-spill, memory.current of /k is $(mib "$left")"
pre "group=/k,spill=1" /usr/bin/python3 -c 'print(sum(range(1000)))' >"$T/out" 2>"$T/err" ||
	fail "python3 after a kill -9 mid-spill: $(head -2 "$T/err")"
grep -qx 499500 "$T/out" || fail "python3 after a kill -9: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

# memory.max below what a program builds: the charge that would pass it
# reclaims first, as the kernel's try_charge reclaims the pages it needs,
# and the program goes on with its cold pages spilled.  Usage is not over
# the limit when a charge is refused (and a sampled charge stops at it),
# so reclaim must make room for the charge, not spill "what is over": it
# spilled nothing, and python3 (blocks charged at malloc, with no
# background reclaim) ended in MemoryError, perl (its hash's bucket
# arrays, charged when sampled) in "Out of memory!" with or without it.
PL_HASH='my %h; for my $i (0..200000) { $h{"key$i"} = "value" x (1 + $i % 13) . $i; }
my $s = 0; for my $i (0..40000) { $s += length($h{"key$i"}); } print scalar(keys %h), " $s\n";'
for c in "py 40M 0" "pl 30M 1" "pl 30M 0"; do
	set -- $c
	w=$1 lim=$2 conf="group=/max$1$3,spill=1,max=$2,spill_background=$3"
	if [ "$w" = py ]; then
		pre "$conf" /usr/bin/python3 -c "$STRINGS_PY"'
print(len(data))' >"$T/out" 2>"$T/err" || fail "python3 under memory.max=$lim: $(tail -2 "$T/err")"
		want=150000
	else
		pre "$conf" perl -e "$PL_HASH" >"$T/out" 2>"$T/err" ||
			fail "perl under memory.max=$lim: $(tail -2 "$T/err")"
		want="200001 1588930"
	fi
	what="$w under memory.max=$lim (spill_background=$3)"
	[ "$(cat "$T/out")" = "$want" ] || fail "$what printed $(cat "$T/out")"
	out=$(value /max$w$3 memory.stat zswpout)
	peak=$(value /max$w$3 memory.peak)
	[ "$out" -gt 0 ] || fail "$what: nothing spilled"
	# Only $FORCED may pass it, where the first reclaim is at the limit
	# itself: on a machine whose page faults cost 2.4 us, perl's
	# background reclaim started the handler thread there in about 1 run
	# of 10 (memory.peak 16 KiB over while a thread's start was charged
	# ahead).
	over=$((peak - ${lim%M} * MIB))
	[ "$over" -le "$FORCED" ] ||
		fail "$what: memory.peak $(mib "$peak"), $over bytes over memory.max"
	[ "$over" -gt 0 ] || over=0
	echo "$TEST_NAME: $what: $out pages spilled, memory.peak $(mib "$peak") ($over bytes over)"
	CHECKS=$((CHECKS + 1))
done

# memory.max holds while spilled pages come back with spill_hold_max=1 (off
# by default), as the kernel never lets a swap-in pass it: python3 builds its
# 100 MB of strings under memory.max=48M, then reads them all back.  The
# group's memory.current stops at the limit whatever happens, so what is
# looked at is the process's own resident anonymous memory (its pool
# included).  Without the hold it reached 82 MiB, memory.current saying
# 48M all the while.
# (Run in a subshell, which cannot reap the program: it ends when the
# program has no memory left, a zombie or gone.)
rss_anon_peak() {
	top=0
	while r=$(awk '/^RssAnon:/ { print $2 }' "/proc/$BG/status" 2>/dev/null) && [ -n "$r" ]; do
		[ "$r" -gt "$top" ] && top=$r
		sleep 0.02
	done
	echo $((top * 1024))
}
for hold in 1 0; do
	start "group=/holdmax$hold,spill=1,max=48M,spill_hold_max=$hold" /usr/bin/python3 -c "$STRINGS_PY"'
print("built", file=sys.stderr, flush=True)
n = sum(len(s) for s in data)
print("read", n, file=sys.stderr, flush=True)
os._exit(0)'
	peak=$(rss_anon_peak)
	finish
	[ "$ST" = 0 ] || fail "spill_hold_max=$hold: python3 exited $ST: $(tail -2 "$T/bg.err")"
	grep -qx "read 67200000" "$T/bg.err" || fail "spill_hold_max=$hold: python3 did not read its strings back"
	if [ "$hold" = 1 ]; then
		[ "$peak" -le $((60 * MIB)) ] ||
			fail "spill_hold_max=1: $(mib "$peak") resident under memory.max=48M while pages came back"
		peak1=$peak
	else
		echo "$TEST_NAME: reading back under memory.max=48M: at most $(mib "$peak1") resident with spill_hold_max=1, $(mib "$peak") without"
	fi
done
CHECKS=$((CHECKS + 1))

# A pool that does not fit under memory.max goes to the backing file, as
# the kernel's zswap writes back to swap under a group's pressure:
# python3 building 100 MB of records that compress about 2:1 under
# memory.max=32M with a backing file.  Before, nothing was written back
# and it ended in MemoryError.
WB_PY='import hashlib, os, random
def records():
    r = random.Random(7)
    return [(("%032x" % r.getrandbits(128)) + "ab" * 32).encode() for _ in range(300000)]
data = records()
h = hashlib.md5(b"".join(data[::5])).hexdigest()
print("ok" if h == hashlib.md5(b"".join(records()[::5])).hexdigest() else "CORRUPT", flush=True)
os._exit(0)'
within 60 pre "group=/wbmax,spill=1,max=32M,spill_backing=$T/swapmax" /usr/bin/python3 -c "$WB_PY"
[ "$ST" = 0 ] || fail "python3 under memory.max=32M with a backing file: $(tail -2 "$T/err")"
grep -qx ok "$T/out" || fail "python3 under memory.max=32M with a backing file printed $(cat "$T/out")"
wb=$(value /wbmax memory.stat zswpwb)
peak=$(value /wbmax memory.peak)
[ "$wb" -gt 0 ] || fail "python3 under memory.max=32M with a backing file: nothing written back"
echo "$TEST_NAME: a pool larger than memory.max=32M: $wb pages written back, memory.peak $(mib "$peak")"
CHECKS=$((CHECKS + 1))

# memory.zswap.max=1M with a backing file: the pool's tables (an entry per
# page stored or written back) do not count in zswap, as zswap's entries
# do not in the kernel's memory.zswap.current.  Counted, they filled the
# 1M on their own once about 40,000 pages had been written back, and
# python3 building 80 MB got MemoryError.
ok "$CGMCTL" --hierarchy "$H" mkdir /wb1m
ok "$CGMCTL" --hierarchy "$H" set /wb1m memory.max 40M
ok "$CGMCTL" --hierarchy "$H" set /wb1m memory.zswap.max 1M
within 90 pre "group=/wb1m,spill=1,spill_backing=$T/swap1m" /usr/bin/python3 -c '
import hashlib
d = [(("%d-" % i) * 30).encode() for i in range(500000)]
h = hashlib.md5()
for i in range(0, 500000, 7):
    h.update((("%d-" % i) * 30).encode())
print("ok" if hashlib.md5(b"".join(d[::7])).digest() == h.digest() else "CORRUPT")'
[ "$ST" = 0 ] && grep -qx ok "$T/out" ||
	fail "80 MB under memory.zswap.max=1M with a backing file: exit $ST, $(cat "$T/out") $(tail -1 "$T/err")"
wb=$(value /wb1m memory.stat zswpwb)
echo "$TEST_NAME: 80 MB under memory.max=40M, memory.zswap.max=1M with a backing file: $wb pages written back"
CHECKS=$((CHECKS + 1))

# spill_backing=FILE with forks: each process writes back to a file of its
# own (FILE.PID, unlinked once open).  They all opened FILE with O_TRUNC:
# a child that spilled emptied the file under the pages its parent had
# written back there, and the parent died of SIGBUS ("changed behind the
# pool's back") in 4 runs of 6 of this program.  Its children may fail
# their own allocations (every spilled page comes back before a fork with
# a backing file, which takes the group to its limit); the parent's data
# must come back whole, and no file is left behind.
ok "$CGMCTL" --hierarchy "$H" mkdir /wbfork
ok "$CGMCTL" --hierarchy "$H" set /wbfork memory.max 40M
ok "$CGMCTL" --hierarchy "$H" set /wbfork memory.zswap.max 2M
WBFORK_PY='import hashlib, os
data = [("%d-" % i) * (i % 40 + 1) for i in range(300000)]
def dig():
    h = hashlib.md5()
    for s in data: h.update(s.encode())
    return h.hexdigest()
first = dig()
for k in range(6):
    pid = os.fork()
    if pid == 0:
        dig()
        os._exit(0)
    os.waitpid(pid, 0)
print("ok" if dig() == first else "CORRUPT", flush=True)'
within 90 pre "group=/wbfork,spill=1,spill_backing=$T/swapfork" /usr/bin/python3 -c "$WBFORK_PY"
[ "$ST" = 0 ] || fail "forks with a backing file: python3 exited $ST: $(grep -v Fatal "$T/err" | head -2)"
grep -qx ok "$T/out" || fail "forks with a backing file: python3 printed $(cat "$T/out")"
ls "$T"/swapfork* >/dev/null 2>&1 && fail "forks with a backing file: left behind: $(ls "$T"/swapfork*)"
wb=$(value /wbfork memory.stat zswpwb)
[ "$wb" -gt 0 ] || fail "forks with a backing file: nothing written back"
echo "$TEST_NAME: six forks with a backing file: the parent's data whole, $wb pages written back"
CHECKS=$((CHECKS + 1))

# A fork-based multiprocessing pool, threads, subprocesses and processes
# with a backing file under memory.zswap.max=2M (a bug hunt's program):
# it hung in 1 run of 3 (a worker faulting in a registration whose
# userfaultfd its sibling had inherited: the parent's next fork came
# before its handler had closed the child's) and ended in MemoryError in
# the others (the pool's tables took half of the 2M, and a chunk needed
# the other half whole).  Later a worker's or a process's first malloc
# failed in about 1 run of 10-20 run two at a time ("Fatal Python error:
# _PyEval_ReInitThreads"): the parent, over memory.max by what it brought
# back for the fork, was asked too little (67307a0), its handler
# answered the workers' requests with nothing while the fork held the
# spill lock (9bb0dd6), and its background reclaim, waiting for that
# lock, began no answer (529b1a5).  Its output must be the one without
# the library.
# (Each process writes its line in one write(2): print() wrote "proc" and
# the rest apart, and the two processes' lines came out mixed now and
# then, with the library or without it -- the reference run's, once.)
ok "$CGMCTL" --hierarchy "$H" mkdir /wbpool
ok "$CGMCTL" --hierarchy "$H" set /wbpool memory.max 40M
ok "$CGMCTL" --hierarchy "$H" set /wbpool memory.zswap.max 2M
cat >"$T/mp.py" <<'EOF_MP'
import threading, multiprocessing as mp, subprocess, hashlib, os
data = [("%d-" % i) * (i % 40 + 1) for i in range(300000)]
def dig(lo, hi):
    h = hashlib.md5()
    for s in data[lo:hi]: h.update(s.encode())
    return h.hexdigest()
res = {}
def th(i): res[i] = dig(i * 100000, (i + 1) * 100000)
ts = [threading.Thread(target=th, args=(i,)) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
print("threads", [res[i] for i in range(3)], flush=True)
def work(i): return dig(i * 50000, (i + 1) * 50000)
ctx = mp.get_context("fork")
with ctx.Pool(2) as p: print("pool", p.map(work, range(6)), flush=True)
for i in range(3):
    print(subprocess.run(["sh", "-c", "echo sub %d" % i], capture_output=True, text=True).stdout.strip(), flush=True)
pr = [ctx.Process(target=lambda i=i: os.write(1, ("proc %d %s\n" % (i, dig(0, 300000))).encode()))
      for i in range(2)]
[p.start() for p in pr]; [p.join() for p in pr]
print("exit", [p.exitcode for p in pr], dig(0, 300000), flush=True)
EOF_MP
/usr/bin/python3 "$T/mp.py" | sort >"$T/mp.ref" || fail "the pool program fails without the library"
within 90 pre "group=/wbpool,spill=1,spill_backing=$T/swappool" /usr/bin/python3 "$T/mp.py"
[ "$ST" = 0 ] || fail "a multiprocessing pool with a backing file: exited $ST: $(head -3 "$T/err")"
sort "$T/out" | cmp -s - "$T/mp.ref" ||
	fail "a multiprocessing pool with a backing file printed: $(sort "$T/out" | diff - "$T/mp.ref" | head -4)"
grep -q "did not see" "$T/err" && fail "a multiprocessing pool with a backing file: $(grep "did not see" "$T/err" | head -1)"
echo "$TEST_NAME: a fork-based multiprocessing pool with a backing file under memory.zswap.max=2M: output as without the library, $(value /wbpool memory.stat zswpwb) pages written back"
CHECKS=$((CHECKS + 1))

# fork under memory.max: every spilled page comes back before a fork (the
# child has no userfaultfd registration), which takes the group past its
# limit, and afterwards every page present at the fork is copy-on-write
# shared -- UFFDIO_MOVE refuses it with EBUSY until the program writes it,
# even once the child is gone.  The spill makes such a page the process's
# own again (a no-op write) and moves it.  Before, nothing present at a
# fork could be spilled again: python3 holding 60 MB of strings under
# memory.max=32M took 28 s for three forks and a subprocess, and each
# child died in its first allocation (the group stayed over its limit).
FORK_PY='import os, random, subprocess, zlib
words = ["alpha", "beta", "gamma", "delta", "page", "cold", "fork", "child"]
def strings():
    r = random.Random(3)
    return (" ".join(r.choice(words) for _ in range(40)) for _ in range(250000))
data = list(strings())
want = zlib.crc32("".join(data[::97]).encode())
bad = 0
for i in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if zlib.crc32("".join(data[::97]).encode()) == want else 3)
    st = os.waitpid(pid, 0)[1]
    if st:
        print("fork", i, "status", st, flush=True)
        bad += 1
rc = subprocess.run(["/bin/true"]).returncode
same = all(a == b for a, b in zip(data, strings()))
print("ok" if not bad and rc == 0 and same else "FAILED %d %d %s" % (bad, rc, same), flush=True)'
t0=$(date +%s)
within 60 pre "group=/fork,spill=1,max=32M,stats=exit" /usr/bin/python3 -c "$FORK_PY"
[ "$ST" = 0 ] || fail "python3 forking under memory.max=32M: $(grep -v '^[a-z_]* [0-9]*$' "$T/err" | tail -3)"
grep -qx ok "$T/out" || fail "python3 forking under memory.max=32M: $(cat "$T/out")"
# (How many pages had to be made its own again depends on how many python3
# wrote meanwhile, its reference counts: 0 in some runs, 46,000 in others.)
unshared=$(sed -n 's/.* unshared \([0-9]*\) .*/\1/p' "$T/err" | sort -n | tail -1)
# Each child takes over its copy of the engine (spill_fork_lazy=1): the
# parent brings nothing back for a fork.  That needs CAP_SYS_PTRACE (the
# kernel's fork events); root has it.
restored=$(sed -n 's/.* restored \([0-9]*\) .*/\1/p' "$T/err" | sort -n | tail -1)
if [ "$(id -u)" = 0 ] && [ "${restored:-0}" != 0 ]; then
	fail "python3 forking under memory.max=32M: $restored pages brought back for the forks"
fi
echo "$TEST_NAME: three forks and a subprocess under memory.max=32M: every child ran, ${restored:-0} pages brought back for them, ${unshared:-0} pages shared since a fork spilled, $(($(date +%s) - t0)) s"
CHECKS=$((CHECKS + 1))

# A fork that only execs (perl's system()): before spill_fork_lazy, each
# one brought back every spilled page (20 calls: 1.6-3.0 s, against
# 0.47-0.57 s now, with a 300,000-key hash under memory.max=40M).
SYS_PL='my %h; $h{"key$_"} = ("value" x (1 + $_ % 13)) . $_ for 0..300000;
my $want = 0; $want += length($h{$_}) for keys %h;
my $bad = 0; for (1..5) { system("true") == 0 or $bad++; }
my $s = 0; $s += length($h{$_}) for keys %h; print $s == $want && !$bad ? "ok\n" : "BAD $bad\n";'
t0=$(date +%s)
within 60 pre "group=/forkexec,spill=1,max=40M,stats=exit" perl -e "$SYS_PL"
[ "$ST" = 0 ] || fail "perl system() under memory.max=40M: $(grep -v '^[a-z_]* [0-9]*$' "$T/err" | tail -3)"
grep -qx ok "$T/out" || fail "perl system() under memory.max=40M: $(cat "$T/out")"
restored=$(sed -n 's/.* restored \([0-9]*\) .*/\1/p' "$T/err" | sort -n | tail -1)
if [ "$(id -u)" = 0 ] && [ "${restored:-0}" != 0 ]; then
	fail "perl system() under memory.max=40M: $restored pages brought back for the forks"
fi
echo "$TEST_NAME: five perl system() under memory.max=40M: ${restored:-0} pages brought back for them, $(($(date +%s) - t0)) s"
CHECKS=$((CHECKS + 1))

# Four processes that all work on what they spilled, under one
# memory.max: a multiprocessing pool started with forkserver, where each
# of three workers builds the same 36 MB of strings as the parent and
# joins every 50th of them.  Each process's reclaim makes room that the
# others' refaults may take before its own charge: memory found in use
# past memory.max retries its reclaim, as the kernel's try_charge() does.
# With one round, a worker failed with MemoryError in 1 of 3 runs (with
# 60 MB each under 128M, 2 of 3).
cat >"$T/pool.py" <<'PY'
import multiprocessing as mp, random, zlib
r = random.Random(5)
words = ["alpha", "beta", "gamma", "delta", "page", "cold", "fork", "child"]
data = [" ".join(r.choice(words) for _ in range(40)) for _ in range(120000)]
def work(i):
    return zlib.crc32("".join(data[i::50]).encode())
if __name__ == "__main__":
    mp.set_start_method("forkserver")
    with mp.Pool(3) as p:
        res = p.map(work, range(50))
    print("ok" if res[::10] == [work(i) for i in range(0, 50, 10)] else "CORRUPT", flush=True)
PY
t0=$(date +%s)
within 90 pre "group=/pool,spill=1,max=80M" /usr/bin/python3 "$T/pool.py"
[ "$ST" = 0 ] || fail "a forkserver pool of four python3 under memory.max=80M: $(grep -v '^ ' "$T/err" | tail -2)"
grep -qx ok "$T/out" || fail "a forkserver pool of four python3 under memory.max=80M printed $(cat "$T/out")"
echo "$TEST_NAME: a forkserver pool of four python3 under memory.max=80M: $(value /pool memory.stat zswpout) pages spilled, $(($(date +%s) - t0)) s"
CHECKS=$((CHECKS + 1))

# Two processes under one limit: an idle one holding cold pages, and one
# that allocates incompressible data (spilling its own pages gives it no
# room).  As the kernel's reclaim for a charge, or for memory.high, scans
# every memcg below the group at its limit, the allocating process asks
# the idle one (through its slot; its background reclaim answers) and
# goes on.  Before, it reclaimed only itself, the idle one untouched:
# under memory.max it ended in MemoryError; under memory.high it was
# throttled 8.4 s of its 8.8.
for lim in max high; do
	start "group=/two$lim/a,spill=1" /usr/bin/python3 -c "$STRINGS_PY"'
print("built", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
print(len(data))' "$T/go-two$lim"
	reach built
	ok "$CGMCTL" --hierarchy "$H" set /two$lim memory.$lim 96M
	a_before=$(value /two$lim/a memory.current)
	pre "group=/two$lim/b,spill=1" /usr/bin/python3 -c 'import os
data = [os.urandom(400) for _ in range(75000)]
print(len(data))' >"$T/out" 2>"$T/err" ||
		fail "an allocating process next to an idle one under memory.$lim=96M: $(tail -1 "$T/err")"
	grep -qx 75000 "$T/out" || fail "the allocating process printed $(cat "$T/out")"
	a_after=$(value /two$lim/a memory.current)
	peak=$(value /two$lim memory.peak)
	thr=$(value /two$lim/b memory.stat throttle_usec)
	touch "$T/go-two$lim"
	finish
	[ "$ST" = 0 ] && grep -qx 150000 "$T/bg.out" || fail "the idle process: status $ST, $(cat "$T/bg.out")"
	[ "$a_after" -le $((a_before - 10 * MIB)) ] ||
		fail "memory.$lim=96M: the idle process gave nothing: $(mib "$a_before") -> $(mib "$a_after")"
	# Past it by $FORCED at most, as above.
	[ "$lim" = high ] || [ "$peak" -le $((96 * MIB + FORCED)) ] ||
		fail "two processes under memory.max=96M: memory.peak $(mib "$peak")"
	[ "$thr" -lt 2000000 ] || fail "memory.$lim=96M: the allocating process was throttled $thr us"
	echo "$TEST_NAME: two processes under memory.$lim=96M: the idle one $(mib "$a_before") -> $(mib "$a_after") for the allocating one, throttled $thr us"
	CHECKS=$((CHECKS + 1))
done

# A program that commits its own heap as a JVM does -- mmap(MAP_FIXED)
# over a PROT_NONE reservation, mremap() growth -- with mimalloc holding
# pages to purge, under memory.high and memory.max: each commit's charge
# reclaims.  It hung for good (java -Xmx512m under memory.high=100M, in
# its metaspace commit): mmap() held the spill lock across the charge, and
# the reclaim's madvise() waited for that lock, every signal blocked.
for lim in high=32M max=48M; do
	within 60 pre "group=/commit${lim%%=*},spill=1,$lim" "$SPILL_COMMIT" 96
	[ "$ST" = 0 ] && grep -qx "spill_commit: ok" "$T/out" ||
		fail "spill_commit under $lim: status $ST, $(cat "$T/out") $(tail -1 "$T/err")"
	echo "$TEST_NAME: 96 MiB committed with mmap(MAP_FIXED) and mremap() under $lim, $(value /commit${lim%%=*} memory.stat zswpout) pages spilled"
	CHECKS=$((CHECKS + 1))
done

# mlockall(): locked memory is never reclaimed, so spilling stops for the
# process and what it spilled comes back, with one line on stderr.  It
# must stop before the lock: the pool's tables are reserved address space,
# and MCL_CURRENT made all of it resident -- python3 sat in the kernel for
# good with 6.4 GiB locked (killed at 60 s).
within 30 pre "group=/lock,spill=1,high=40M" /usr/bin/python3 -c "$STRINGS_PY"'
import ctypes
time.sleep(0.5)
libc = ctypes.CDLL(None, use_errno=True)
print("mlockall", libc.mlockall(3), ctypes.get_errno(), flush=True)
print("locked_kib", open("/proc/self/status").read().split("VmLck:")[1].split()[0], flush=True)
print("data", "ok" if all(len(s) == 448 for s in data) else "BAD", flush=True)'
[ "$ST" = 0 ] || fail "mlockall under spill=1: status $ST, $(tail -1 "$T/err")"
grep -qx "mlockall 0 0" "$T/out" && grep -qx "data ok" "$T/out" ||
	fail "mlockall under spill=1: $(cat "$T/out")"
locked=$(sed -n 's/^locked_kib //p' "$T/out")
[ "$locked" -lt $((512 * 1024)) ] || fail "mlockall under spill=1 locked $locked KiB"
grep -q "spill: the program locked its memory" "$T/err" || fail "mlockall: no line on stderr"
[ "$(value /lock memory.stat zswpout)" -gt 0 ] || fail "mlockall: nothing was spilled before it"
[ "$(value /lock memory.stat zswap)" = 0 ] || fail "mlockall: the pool is still charged"
echo "$TEST_NAME: mlockall after $(value /lock memory.stat zswpout) pages spilled: $((locked / 1024)) MiB locked, every page back"
CHECKS=$((CHECKS + 1))

# Eight threads meeting memory.max at once, 64 MB of cold blocks to spill
# (tests/spill/spill_threads_max.c).  A refused charge whose reclaim found
# another thread of the process spilling came back empty-handed, ran
# through its retries while that thread spilled, and failed: malloc
# returned NULL in 5 of 6 runs (node's garbage-collector threads under
# memory.max=100M: V8 does not check, SIGSEGV in 2 of 4).  It waits for
# that spill now, then spills what it still needs.
within 90 pre "group=/tmax,spill=1,max=40M" "$SPILL_THREADS_MAX" 64 8 100
[ "$ST" = 0 ] && grep -qx "spill_threads_max: ok" "$T/out" ||
	fail "eight threads at memory.max=40M: status $ST, $(grep -m1 FAIL "$T/err")"
[ "$(value /tmax memory.events oom)" = 0 ] || fail "eight threads at memory.max=40M: memory.events $(value /tmax memory.events oom) oom"
echo "$TEST_NAME: eight threads at memory.max=40M: $(value /tmax memory.stat zswpout) pages spilled, $(value /tmax memory.events max) max events, no oom"
CHECKS=$((CHECKS + 1))

# The same cancels with spilling: the spill lock, held across pagemap
# reads, hung the process the same way (3 of 3 runs).
within 60 pre "group=/cancels,spill=1,max=40M" "$SPILL_CANCEL" 48 100
[ "$ST" = 0 ] && grep -qx "spill_cancel: ok" "$T/out" ||
	fail "threads cancelled under spill=1,memory.max=40M: status $ST, $(tail -1 "$T/err")"
[ "$(value /cancels memory.stat zswpout)" -gt 0 ] || fail "threads cancelled under spill=1: nothing was spilled"
echo "$TEST_NAME: 100 threads cancelled while allocating, with and without spilling: no hang"
CHECKS=$((CHECKS + 1))

# A crash with spilled pages (tests/spill/spill_core.c, 48 MiB of cold
# blocks under memory.max=24M, block 0 spilled): the kernel dumps zeros
# where a page is spilled, so with spill_core=1 (the default) the signal
# first brings every spilled page back, in one line, and the core holds
# block 0's bytes.  With spill_core=0: no line, and zeros in the core.
# The bytes are read from the core where core_pattern writes it in the
# working directory and the core limit can be raised; elsewhere only the
# line is checked.
CORE_PY='
import struct, sys
core, addr = sys.argv[1], int(sys.argv[2], 16)
data = open(core, "rb").read()
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
for i in range(phnum):
    p_type, _, off, vaddr, _, filesz, memsz, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
    if p_type == 1 and vaddr <= addr and addr + 65536 <= vaddr + memsz:
        got = data[off + addr - vaddr:off + addr - vaddr + 65536] if addr + 65536 <= vaddr + filesz else b""
        break
else:
    sys.exit("no segment of the core holds " + hex(addr))
want = bytes(((((i << 0) * 0x9e3779b97f4a7c15) % (1 << 64)) >> 56) if i % 64 < 32 else (i // 64) & 0xff
             for i in range(65536))
bad = sum(1 for a, b in zip(got.ljust(65536, b"\0"), want) if a != b)
print("differ", bad)
'
for core in 1 0; do
	for how in segv abort; do
		rm -rf "$T/c"
		mkdir "$T/c"
		cd "$T/c"
		within 60 pre "group=/core$core$how,spill=1,max=24M,spill_core=$core" "$SPILL_CORE" 48 "$how"
		cd - >/dev/null
		sig=$(( ST - 128 ))
		[ "$how" = segv ] && want=11 || want=6
		[ "$sig" = "$want" ] || fail "spill_core $how: status $ST, not signal $want: $(tail -2 "$T/err")"
		resident=$(sed -n 's/.*, \([0-9]*\) of 16 pages resident.*/\1/p' "$T/out")
		[ -n "$resident" ] && [ "$resident" -lt 16 ] ||
			fail "spill_core $how: block 0 was not spilled before the crash: $(cat "$T/out")"
		limit=$(sed -n 's/.*core limit \([a-z0-9]*\)$/\1/p' "$T/out")
		if [ "$core" = 1 ] && { [ "$limit" = raised ] || grep -q '^|' /proc/sys/kernel/core_pattern; }; then
			grep -q "spilled pages brought back for the core dump" "$T/err" ||
				fail "spill_core $how: no line on the pages brought back: $(tail -2 "$T/err")"
		elif [ "$core" = 0 ]; then
			! grep -q "brought back for the core dump" "$T/err" ||
				fail "spill_core=0 $how: pages were brought back: $(grep core "$T/err")"
		fi
		file=$(ls "$T/c" | grep '^core' | head -1)
		if [ -z "$file" ]; then
			echo "$TEST_NAME: spill_core=$core $how: no core file in the working directory (core_pattern $(cat /proc/sys/kernel/core_pattern), core limit $limit): its bytes not checked"
			continue
		fi
		addr=$(sed -n 's/.*block 0 at \(0x[0-9a-f]*\),.*/\1/p' "$T/out")
		differ=$(/usr/bin/python3 -c "$CORE_PY" "$T/c/$file" "$addr" | sed -n 's/^differ //p')
		[ -n "$differ" ] || fail "spill_core $how: the core could not be read"
		if [ "$core" = 1 ]; then
			[ "$differ" = 0 ] || fail "spill_core $how: $differ bytes of block 0 differ in the core"
		else
			[ "$differ" -gt 0 ] || fail "spill_core=0 $how: block 0 is right in the core: the test cannot tell"
		fi
		echo "$TEST_NAME: spill_core=$core, $how: block 0 spilled ($resident of 16 pages resident), $differ bytes of it differ in the core"
		rm -rf "$T/c"
		CHECKS=$((CHECKS + 1))
	done
done

# The program's own dispositions win: a SIGSEGV handler it installs
# replaces the library's and takes the crash; SIGQUIT ignored from the
# start (as a shell leaves it for a background job) stays ignored.
# (In $T: a failure here dumps core in the working directory.)
cd "$T"
within 60 pre "group=/coreown,spill=1,max=24M" "$SPILL_CORE" 48 own
cd - >/dev/null
[ "$ST" = 3 ] && grep -qx "spill_core: own handler" "$T/out" ||
	fail "spill_core own: status $ST, not the program's handler: $(tail -2 "$T/out")"
! grep -q "brought back for the core dump" "$T/err" ||
	fail "spill_core own: the library's handler ran: $(grep core "$T/err")"
CHECKS=$((CHECKS + 1))
# (Not through timeout, which catches SIGQUIT itself: its child starts
# with SIGQUIT at the default again.  The program ends at once either way.)
set +e
(cd "$T" && trap '' QUIT && pre "group=/corequit,spill=1,max=24M" "$SPILL_CORE" 48 quit) >"$T/out" 2>"$T/err" </dev/null
ST=$?
set -e
[ "$ST" = 0 ] && grep -qx "spill_core: survived SIGQUIT" "$T/out" ||
	fail "spill_core quit: SIGQUIT ignored from the start ended the program (status $ST): $(tail -2 "$T/err")"
CHECKS=$((CHECKS + 1))
echo "$TEST_NAME: the program's own SIGSEGV handler takes its crash; an ignored SIGQUIT stays ignored"

# A debugger reads a process's memory as /proc/PID/mem does, and cannot
# read a spilled page (EIO); cgm_spill_stop() brings them all back
# (tests/spill/spill_stop.c checks every byte through /proc/self/mem) and
# spilling stops: a memory.reclaim after it spills nothing.  After
# cgm_spill_resume() one spills again, the counts going on.
within 60 pre "group=/stop,spill=1" "$SPILL_STOP" 32
[ "$ST" = 0 ] && grep -q "^spill_stop: ok" "$T/out" ||
	fail "spill_stop: status $ST: $(tail -2 "$T/err")"
grep -q "cgm_spill_stop() was called: spilling is off for this process" "$T/err" &&
	grep -q "cgm_spill_resume() was called: spilling is on again" "$T/err" ||
	fail "spill_stop: no line on stderr: $(tail -2 "$T/err")"
[ "$(value /stop memory.zswap.current)" = 0 ] ||
	fail "spill_stop: memory.zswap.current $(value /stop memory.zswap.current) after the program ended"
# Both engines' pages, counted on: out twice, and back (the program read
# every byte at the end, after its last sample: its exit publishes them).
out=$(value /stop memory.stat zswpout)
in=$(value /stop memory.stat zswpin)
[ "$out" -ge $((3 * 32 * MIB / 4096 / 2)) ] && [ "$in" -ge $((out * 9 / 10)) ] ||
	fail "spill_stop: zswpout $out, zswpin $in after spilling 32 MiB twice and reading it all back"
CHECKS=$((CHECKS + 1))
echo "$TEST_NAME: $(cat "$T/out")"
# A mremap onto a spilled mapping replaces it, spilled pages and all:
# kept, they came back into the moved mapping at a later restore
# (check-spill-model read another mapping's bytes in the part a mremap had
# grown), or failed to, with a "could not be put back" line.
within 30 pre "group=/onto,spill=1" "$SPILL_STOP" onto
[ "$ST" = 0 ] && grep -q "^spill_stop: ok" "$T/out" ||
	fail "spill_stop onto: status $ST: $(tail -2 "$T/err")"
! grep -q "could not be put back" "$T/err" ||
	fail "spill_stop onto: $(grep -m1 "could not be put back" "$T/err")"
CHECKS=$((CHECKS + 1))
# A spilled mapping cut by the program, a file mapped in the cut: once
# every page is back, none of the rest stays registered for missing pages
# (the engine's settling of the whole span was refused for the file's
# sake, and left the pieces registered: a mremap of them could fail).
for how in tail hole; do
	within 30 pre "group=/stale,spill=1" "$SPILL_STALE" "$how"
	[ "$ST" = 0 ] && grep -q "^spill_stale: ok" "$T/out" ||
		fail "spill_stale $how: status $ST: $(tail -2 "$T/err")"
	CHECKS=$((CHECKS + 1))
done
# Where nothing spills: cgm_spill_resume() says -ENODEV (spill=0 here, a
# refused spill=1 below).
within 30 pre "group=/stop0,spill=0" "$SPILL_STOP" refused
[ "$ST" = 0 ] && grep -q "^spill_stop: ok" "$T/out" ||
	fail "spill_stop refused, spill=0: status $ST: $(tail -2 "$T/err")"
CHECKS=$((CHECKS + 1))

# Without the privilege (uid 65534, vm.unprivileged_userfaultfd=0): one
# line that says what to grant, and the program runs unspilled.
if [ "$(id -u)" = 0 ] && [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null)" = 0 ] &&
   command -v setpriv >/dev/null; then
	chmod 755 "$T"
	mkdir "$T/u"
	chmod 777 "$T/u"
	setpriv --reuid 65534 --regid 65534 --clear-groups env LD_PRELOAD="$CGM_LIB" \
		CGMALLOC_CONF="hierarchy=$T/u/h,scope=/u,spill=1" /usr/bin/python3 -c 'print(6*7)' \
		>"$T/out" 2>"$T/err" || fail "unprivileged spill=1: python3 failed: $(head -2 "$T/err")"
	grep -qx 42 "$T/out" || fail "unprivileged spill=1: python3 printed $(cat "$T/out")"
	grep -q "CAP_SYS_PTRACE" "$T/err" || fail "unprivileged spill=1: no line naming what to grant"
	grep -q "spill=1 refused" "$T/err" || fail "unprivileged spill=1: no refusal line"
	[ "$(wc -l <"$T/err")" = 1 ] || fail "unprivileged spill=1: not one line: $(cat "$T/err")"
	setpriv --reuid 65534 --regid 65534 --clear-groups env LD_PRELOAD="$CGM_LIB" \
		CGMALLOC_CONF="hierarchy=$T/u/h,scope=/u2,spill=1" "$SPILL_STOP" refused \
		>"$T/out" 2>"$T/err" ||
		fail "unprivileged spill=1: spill_stop refused failed: $(tail -2 "$T/err")"
	grep -q "spill=1 refused" "$T/err" || fail "unprivileged spill_stop: no refusal line"
	CHECKS=$((CHECKS + 1))
fi
echo "$TEST_NAME: $CHECKS checks passed"
