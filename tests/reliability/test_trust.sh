#!/bin/sh
# Limits fail closed, and a limited program cannot lift its own limit.
#  - A limit asked for, and accounting cannot start (here: a hierarchy
#    file that is not one): the program does not run, one line says why;
#    enforce=0 runs it unaccounted instead.
#  - A program limited in a group (not delegated) that runs cgmctl to lift
#    its group's limit is refused; a delegated group's processes manage
#    the groups below it.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

printf 'not a hierarchy, but long enough to be read as a header ......................%016000d' 0 >"$T/bogus"
run env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$T/bogus,max=64M" "$PY" -c 'print("ran")'
[ "$ST" = 2 ] || fail "a refused hierarchy with max= asked: exit status $ST, expected 2"
[ ! -s "$T/out" ] || fail "the program ran: $(cat "$T/out")"
[ "$(wc -l <"$T/err")" = 1 ] || fail "$(wc -l <"$T/err") lines on stderr, expected 1"
grep -q "^cgmalloc: accounting cannot start (.*bad magic.*) and a limit applies: exiting" "$T/err" ||
	fail "the line does not say why: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))

run env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$T/bogus,group=/named" "$PY" -c 'print("ran")'
[ "$ST" = 2 ] || fail "a refused hierarchy with a group named: exit status $ST, expected 2"
CHECKS=$((CHECKS + 1))

run env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$T/bogus,max=64M,enforce=0" "$PY" -c 'print("ran")'
[ "$ST" = 0 ] || fail "enforce=0: exit status $ST"
out_is "ran"
grep -q "^cgmalloc: accounting off: " "$T/err" || fail "enforce=0: no line: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))

# Without any limit asked for, a refused hierarchy only turns accounting off.
run env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$T/bogus" "$PY" -c 'print("ran")'
[ "$ST" = 0 ] || fail "no limit asked: exit status $ST"
CHECKS=$((CHECKS + 1))

# A limited program runs cgmctl (preloaded too, as its child) on its own
# group: refused; on a group below it: allowed.
ok ctl mkdir /lim/below
ok ctl set /lim memory.max 256M
run pre "group=/lim" sh -c '"$0" --hierarchy "$1" set /lim memory.max max' "$CGMCTL" "$H"
[ "$ST" = 1 ] || fail "cgmctl set from inside /lim: exit status $ST"
grep -q "may not change memory.max of its own group or of an ancestor" "$T/err" ||
	fail "cgmctl set from inside /lim: $(cat "$T/err")"
ok ctl cat /lim memory.max
out_is $((256 << 20))
run pre "group=/lim" sh -c '"$0" --hierarchy "$1" set /lim/below memory.max 64M' "$CGMCTL" "$H"
[ "$ST" = 0 ] || fail "cgmctl set of a group below, from inside /lim: $ST: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))

# Delegated: the processes of /job manage /job/a, theirs included.
ok ctl mkdir /job/a
ok ctl set /job cgroup.delegate 1
run pre "group=/job/a" sh -c '"$0" --hierarchy "$1" set /job/a memory.high 100M' "$CGMCTL" "$H"
[ "$ST" = 0 ] || fail "cgmctl set in a delegated group: $ST: $(cat "$T/err")"
run pre "group=/job/a" sh -c '"$0" --hierarchy "$1" set /job memory.max max' "$CGMCTL" "$H"
[ "$ST" = 1 ] || fail "cgmctl set of the delegated group itself, from inside: $ST"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
