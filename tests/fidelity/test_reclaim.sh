#!/bin/sh
# What the allocator keeps: freed memory that mimalloc keeps resident is
# shown as heap_free, is part of memory.current (as the kernel's is), and
# memory.reclaim gives it back -- from the process itself, or from another
# process while the program keeps allocating.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# After freeing everything, without reclaim: heap_free holds most of it.
start "scope=/keep" "$FID_PROG" freeall 96M hold=3000
reach peak
peak=$(value /keep memory.current)
reach end
# A reader takes a sample younger than 10 ms as it is, and mimalloc may
# still give pages back just after "end": compare once both have settled
# (up to 2 s on a loaded machine), not in the lag itself.
tries=0
while :; do
	sleep 0.1
	cur=$(value /keep memory.current)
	k=$(kernel_anon "$BG")
	within_ratio "$cur" "$k" 85 120 && break
	tries=$((tries + 1))
	[ $tries -lt 20 ] || fail "after free(): memory.current $(mib "$cur"), RssAnon $(mib "$k") for 2 s"
done
hf=$(value /keep memory.stat heap_free)
live=$(value /keep memory.stat heap_live)
[ "$live" -le $((8 * MIB)) ] || fail "after free(): heap_live still $(mib "$live")"
[ "$hf" -le "$cur" ] || fail "heap_free $(mib "$hf") above memory.current $(mib "$cur")"
finish
echo "$TEST_NAME: after free(): peak $(mib "$peak"), current $(mib "$cur"), heap_free $(mib "$hf")"
CHECKS=$((CHECKS + 1))

# The program writes memory.reclaim itself: memory.current falls to a
# small part of the peak.
start "scope=/self" "$FID_PROG" freeall 96M hold=1500 reclaim
reach peak
peak=$(value /self memory.current)
reach end
grep -q "fid_prog: reclaim 0" "$T/bg.err" || fail "memory.reclaim from the program: $(grep reclaim "$T/bg.err")"
cur=$(value /self memory.current)
[ "$cur" -le $((peak / 3)) ] || fail "after memory.reclaim: memory.current $(mib "$cur") of a peak of $(mib "$peak")"
finish
echo "$TEST_NAME: reclaim by the program: $(mib "$peak") -> $(mib "$cur")"
CHECKS=$((CHECKS + 1))

# cgmctl writes memory.reclaim of a group whose process keeps allocating:
# it answers within the writer's wait, and memory.current falls.
start "scope=/other" "$FID_PROG" freeall 96M hold=3000 busy
reach end
before=$(value /other memory.current)
if [ "$(value /other memory.stat heap_free)" -lt $((16 * MIB)) ]; then
	echo "$TEST_NAME: note: the allocator returned the freed pages by itself" >&2
fi
run ctl set /other memory.reclaim 32M
[ "$ST" = 0 ] || fail "memory.reclaim 32M from cgmctl: exit $ST: $(cat "$T/err")"
after=$(value /other memory.current)
[ "$after" -le $((before - 32 * MIB)) ] || fail "memory.reclaim 32M: $(mib "$before") -> $(mib "$after")"
finish
CHECKS=$((CHECKS + 1))

# memory.high written below the usage of a group whose process keeps
# allocating: reclaim at once, as the kernel's memory_high_write does --
# the write returns with the kept memory given back, before any throttling.
start "scope=/lower" "$FID_PROG" freeall 96M hold=3000 busy
reach end
sleep 0.2
before=$(value /lower memory.current)
hf=$(value /lower memory.stat heap_free)
[ "$hf" -ge $((16 * MIB)) ] || fail "after free(): heap_free only $(mib "$hf") (nothing to reclaim)"
run ctl set /lower memory.high 8M
[ "$ST" = 0 ] || fail "memory.high 8M below usage: exit $ST: $(cat "$T/err")"
after=$(value /lower memory.current)
[ "$after" -le $((before - 16 * MIB)) ] ||
	fail "memory.high 8M below $(mib "$before"): still $(mib "$after") when the write returned"
finish
echo "$TEST_NAME: memory.high below usage: $(mib "$before") -> $(mib "$after") at once"
CHECKS=$((CHECKS + 1))

# An idle group (no process): EAGAIN, one line, as the kernel says it.
ok ctl mkdir /idle
bad 1 "memory.reclaim.*reclaimed" ctl set /idle memory.reclaim 1M
# Bad values: one line naming the format.
bad 1 "expected a size" ctl set /idle memory.reclaim abc
bad 1 "swappiness=0..200" ctl set /idle memory.reclaim "1M swappiness=300"
ok ctl set /idle memory.reclaim "0 swappiness=60"
# Write-only, like the kernel's.
bad 1 "memory.reclaim" ctl cat /idle memory.reclaim

echo "$TEST_NAME: $CHECKS checks passed"
