#!/bin/sh
# Limits that hold: memory.current never passes memory.max; a limit from
# CGMALLOC_CONF does not outlive its run; the root group has no limits.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# Four threads allocate and free near max=32M while memory.current and
# memory.peak are sampled: neither is ever above max.
within 60 pre "scope=/race,max=32M" "$REL_PROG" limit-race 4 3
[ "$ST" = 0 ] || fail "limit-race: exit status $ST: $(head -3 "$T/err")"
[ "$(num worst)" -le "$(num max)" ] || fail "memory.current or peak above max: $(cat "$T/out")"
echo "limit race: worst $(num worst) of max $(num max)"
CHECKS=$((CHECKS + 1))

# max=0 in one run's CGMALLOC_CONF: that run cannot allocate, the next
# one, without it, runs as usual -- and nothing of the first is left.
within 30 pre "max=0" "$PY" -c 'print("started")'
[ "$ST" != 0 ] || fail "python3 ran under max=0"
within 30 pre "" "$PY" -c 'print("fine")'
[ "$ST" = 0 ] || fail "the run after a max=0 run failed ($ST): $(head -3 "$T/err")"
out_is "fine"
ok ctl ls -r /
grep -q "run-" "$T/out" && fail "a run's scope outlived it: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

# The run's scope is shared with what it forks and execs, and its limit
# holds for all of them.
within 60 pre "max=40M" sh -c '
	"$0" -c "b = bytearray(30 << 20); print(\"one\")" &&
	"$0" -c "import os; print(os.environ[\"CGMALLOC_CONF\"].split(\"scope=\")[1])"' "$PY"
[ "$ST" = 0 ] || fail "sh and python3 in a max=40M run: $ST: $(head -3 "$T/err")"
grep -q "^/\(.*/\)\{0,1\}run-[0-9]*$" "$T/out" || fail "exec'd programs do not find the run's scope: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

# The root group has no memory.max or memory.high, as in cgroup v2.
ok ctl mkdir /x
bad 1 "root group has no memory.max" ctl set / memory.max 1G
bad 1 "root group has no memory.high" ctl set / memory.high 1G

echo "$TEST_NAME: $CHECKS checks passed"
