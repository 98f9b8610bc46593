#!/bin/sh
# memory.low and memory.min in reclaim: memory.reclaim of a parent takes
# what the allocators keep from its unprotected children first, from a
# child within its memory.low only when that was not enough (raising its
# "low" event), and never from a child within its memory.min.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# launch NAME GROUP: a program in GROUP that frees 96 MiB and then holds,
# busy, with what mimalloc keeps of it (its stderr in $T/NAME.err).
launch() {
	: >"$T/$1.err"
	env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,group=$2" \
		"$FID_PROG" freeall 96M hold=6000 busy >/dev/null 2>>"$T/$1.err" </dev/null &
	PIDS="$PIDS $!"
}

# at_end NAME: wait (up to 30 s) until it has freed everything.
at_end() {
	i=0
	until grep -qx "fid_prog: end" "$T/$1.err"; do
		i=$((i + 1))
		[ $i -lt 600 ] || fail "$1 did not reach its end state: $(head -3 "$T/$1.err")"
		sleep 0.05
	done
}

ok ctl mkdir /p
for c in a b c; do ok ctl mkdir /p/$c; done
ok ctl set /p/a memory.low 1G
ok ctl set /p/c memory.min 1G
for c in a b c; do launch $c /p/$c; done
for c in a b c; do at_end $c; done
sleep 0.3
a0=$(value /p/a memory.current)
b0=$(value /p/b memory.current)
c0=$(value /p/c memory.current)
for v in "$a0" "$b0" "$c0"; do
	[ "$v" -ge $((24 * MIB)) ] || fail "after free(): a $(mib "$a0"), b $(mib "$b0"), c $(mib "$c0") (too little kept to test)"
done

# 16M: the unprotected /p/b gives it; /p/a (low) and /p/c (min) keep theirs.
run ctl set /p memory.reclaim 16M
[ "$ST" = 0 ] || fail "memory.reclaim 16M of /p: exit $ST: $(cat "$T/err")"
a1=$(value /p/a memory.current)
b1=$(value /p/b memory.current)
c1=$(value /p/c memory.current)
[ "$b1" -le $((b0 - 16 * MIB)) ] || fail "/p/b (unprotected): $(mib "$b0") -> $(mib "$b1")"
[ "$a1" -ge $((a0 - 2 * MIB)) ] || fail "/p/a (memory.low) reclaimed first: $(mib "$a0") -> $(mib "$a1")"
[ "$c1" -ge $((c0 - 2 * MIB)) ] || fail "/p/c (memory.min) reclaimed: $(mib "$c0") -> $(mib "$c1")"
[ "$(value /p/a memory.events low)" = 0 ] || fail "/p/a has a low event before it was reclaimed"
CHECKS=$((CHECKS + 1))

# More than the unprotected group has: /p/a gives too, with a low event;
# /p/c never.  (Less came back than asked: EAGAIN, exit 1.)
run ctl set /p memory.reclaim 512M
a2=$(value /p/a memory.current)
c2=$(value /p/c memory.current)
[ "$a2" -le $((a1 - 16 * MIB)) ] || fail "/p/a (memory.low) kept $(mib "$a2") of $(mib "$a1") when the rest was not enough"
[ "$(value /p/a memory.events low)" -ge 1 ] || fail "/p/a reclaimed within its low, but no low event"
[ "$c2" -ge $((c0 - 2 * MIB)) ] || fail "/p/c (memory.min) reclaimed: $(mib "$c0") -> $(mib "$c2")"
[ "$ST" = 1 ] && grep -q "reclaimed" "$T/err" || fail "memory.reclaim 512M: exit $ST: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))
echo "$TEST_NAME: /p/b $(mib "$b0") -> $(mib "$b1"); /p/a (low) $(mib "$a0") -> $(mib "$a1") -> $(mib "$a2"); /p/c (min) $(mib "$c0") -> $(mib "$c2")"

echo "$TEST_NAME: $CHECKS checks passed"
