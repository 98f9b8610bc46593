#!/bin/sh
# check-spill-programs' workloads over a range of limits, with and without
# the background reclaim thread (`make stress-spill-sweep`; not part of
# make check: 5-6 minutes here).  For each share of a program's peak in
# SPILL_SWEEP_SHARES (default "40 50 70") and each mode in
# SPILL_SWEEP_MODES (default all three: "default", memory.high at that
# share; "nobg", the same with spill_background=0; "maxfile", memory.max
# at that share, memory.zswap.max an eighth of it and a backing file, so
# that no run may fail for room) it runs the program under spill=1, and
# fails if the program is still running after
# SPILL_SWEEP_TIMEOUT seconds (default 120), exits with another status than
# without the library, or prints other bytes.  It prints a line a run: the
# wall time and the time throttled, so that runs of two builds compare.
#
# This sweep found that with spill_background=0 a pressure reclaim that
# took a few pages of the 1,800 it wanted left every hot page in place and
# the group was throttled until their marks ran out: fork_workload.py at
# half its peak 24-35 s a run, perl at 40% killed at 60 s (060073c).
# "maxfile" is the setting of check-spill-lib's multiprocessing pool,
# whose workers' first malloc failed now and then: a parent that brings
# every spilled page back for a fork is over memory.max, and was asked
# for too little to make room (67307a0).
# Below about 40% some of these programs' pools alone fill the limit
# (sqlite3 at 30%: 13 of its 14 MiB), and without a backing file they
# thrash for minutes: that is not a hang, and the sweep leaves it out.
SHARES=${SPILL_SWEEP_SHARES:-40 50 70}
MODES=${SPILL_SWEEP_MODES:-default nobg maxfile}
IN_WORK_TIMEOUT=${SPILL_SWEEP_TIMEOUT:-120}
. "$(cd "$(dirname "$0")" && pwd)/programs_lib.sh"

# sweep NAME CMD...: CMD without the library, for its peak, and then at
# each share in each mode.
RUNS=0
sweep() {
	name=$1
	shift
	in_work "$T/$name.plain" "$@"
	plain_st=$ST
	[ "$plain_st" != 137 ] || fail "$name: still ran after $IN_WORK_TIMEOUT s without the library"
	in_work "$T/$name.peak" env LD_PRELOAD="$CGM_LIB" \
		CGMALLOC_CONF="hierarchy=$H,group=/$name-peak" "$@"
	[ "$ST" = "$plain_st" ] || fail "$name: exits $ST preloaded, spill=0 ($plain_st without)"
	peak=$(value "/$name-peak" memory.peak)
	for share in $SHARES; do
		high=$((peak * share / 100))
		for mode in $MODES; do
			g=$name-$share-$mode
			case $mode in
			default) limits=high=$high ;;
			nobg) limits=high=$high,spill_background=0 ;;
			maxfile)
				ok "$CGMCTL" --hierarchy "$H" mkdir "/$g"
				ok "$CGMCTL" --hierarchy "$H" set "/$g" memory.zswap.max $((high / 8))
				limits=max=$high,spill_backing=$T/swap.$g ;;
			*) fail "SPILL_SWEEP_MODES: no mode $mode (default, nobg, maxfile)" ;;
			esac
			start=$(date +%s%N)
			in_work "$T/$name.spill" env LD_PRELOAD="$CGM_LIB" \
				CGMALLOC_CONF="hierarchy=$H,group=/$g,spill=1,$limits" "$@"
			ms=$((($(date +%s%N) - start) / 1000000))
			[ "$ST" != 137 ] || fail "$name: still ran after $IN_WORK_TIMEOUT s at $share% ($mode)"
			[ "$ST" = "$plain_st" ] || fail "$name: exits $ST at $share% ($mode), $plain_st without"
			cmp -s "$T/$name.plain" "$T/$name.spill" ||
				fail "$name: prints something else at $share% ($mode): $(diff "$T/$name.plain" "$T/$name.spill" | head -3)"
			thr=$(value "/$g" memory.stat throttle_usec)
			printf '%s: %-8s %3s%% %-7s %7d ms, throttled %6d ms, %6d pages spilled\n' \
				"$TEST_NAME" "$name" "$share" "$mode" "$ms" $((thr / 1000)) \
				"$(value "/$g" memory.stat zswpout)"
			RUNS=$((RUNS + 1))
		done
	done
}

sweep sqlite3 /usr/bin/sqlite3 -batch -bail :memory: ".read $PL/sqlite_workload.sql"
sweep python3 /usr/bin/python3 "$PL/dict_list_workload.py"
sweep cxx "$CGM_TEST_BIN/cxx_workload"
sweep git /bin/sh "$PL/git_workload.sh"
sweep perl /usr/bin/perl "$SP/perl_workload.pl"
sweep pyfork /usr/bin/python3 "$SP/fork_workload.py"

echo "$TEST_NAME: $RUNS runs passed"
