#!/bin/sh
# A model-based random test of spilling (tests/spill/spill_model.c): a few
# threads allocate, write, read, reallocate, remap and discard while one of
# them reclaims the group, for a few seeds; every byte is compared with a
# shadow copy that is never spilled.  SPILL_MODEL_SEEDS (default "1 2 3")
# and SPILL_MODEL_OPS (worker 0's operations per seed) set the run; a
# failure names the seed and the command that replays it.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${SPILL_MODEL:?SPILL_MODEL must name tests/spill/spill_model (run through make)}"
SEEDS=${SPILL_MODEL_SEEDS:-1 2 3}
OPS=${SPILL_MODEL_OPS:-4000}
# A hang is a failure too: the handler never answered a fault.
LIMIT=$((120 + OPS / 200))

# Skipped where this process cannot have a userfaultfd that serves system calls.
pre "scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
grep -q "spill=1 refused" "$T/probe" && skip "no userfaultfd for system calls: $(head -1 "$T/probe")"

threads=2
for seed in $SEEDS; do
	within "$LIMIT" pre "scope=/m,spill=1" "$SPILL_MODEL" "$seed" "$OPS" "$threads"
	grep -v "^spill_model: worker " "$T/err" >&2
	[ "$ST" = 0 ] || fail "seed $seed: spill_model exited $ST; replay with" \
		"LD_PRELOAD=$CGM_LIB CGMALLOC_CONF=hierarchy=/tmp/h,scope=/m,spill=1" \
		"$SPILL_MODEL $seed $OPS $threads"
	grep -qx "spill_model: ok" "$T/err" || fail "seed $seed: spill_model did not say ok"
	CHECKS=$((CHECKS + 1))
	# Two workers, then three: one reclaims while the others write.
	threads=$((5 - threads))
done

# The first seed again under memory.high at a quarter of the run's peak
# (96 MiB unlimited, 2026-12-07) with spill_throttle=1: the handler holds
# off serving faults whenever the background reclaim falls behind what
# comes back (18-19 times a run at 16M and 24M), forks included (one
# whose report comes during a hold-off is read then).  Every byte must
# still come back right.  (At half the peak the background kept pace:
# no hold-off once the handler held off only when it did not.)
seed=$(echo "$SEEDS" | cut -d' ' -f1)
within "$LIMIT" pre "scope=/mt,spill=1,high=24M,spill_throttle=1,stats=exit" "$SPILL_MODEL" "$seed" "$OPS" 3
grep "^spill_model: FAIL\|^cgmalloc:" "$T/err" | grep -v "exit report" >&2 || true
[ "$ST" = 0 ] || fail "seed $seed with spill_throttle=1 under memory.high=24M: spill_model exited $ST; replay with" \
	"LD_PRELOAD=$CGM_LIB CGMALLOC_CONF=hierarchy=/tmp/h,scope=/mt,spill=1,high=24M,spill_throttle=1" \
	"$SPILL_MODEL $seed $OPS 3"
grep -qx "spill_model: ok" "$T/err" || fail "seed $seed with spill_throttle=1: spill_model did not say ok"
echo "$TEST_NAME: seed $seed with spill_throttle=1 under memory.high=24M:" \
	"$(grep -o 'held_off [0-9]* ([0-9]* ms)' "$T/err" | head -1)"
CHECKS=$((CHECKS + 1))
echo "$TEST_NAME: $CHECKS runs passed"
