#!/bin/sh
# free_path=: both frees count exactly, and auto switches to the
# branch-free one for a program that allocates small and medium blocks
# in a random mix, not for one that allocates only small ones or runs of
# each kind in turn; split never switches (tests/test_free_path.c).
#
# Usage: tests/test_free_path.sh TEST_FREE_PATH HIERARCHY
set -u
prog=$1
hier=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0

# run SETTING MODE WANT: SETTING is "" (the default) or ",free_path=..."; WANT is "switch" or "stay"
run() {
	name=${1#,}
	name=${name:-free_path=auto}
	CGMALLOC_CONF="hierarchy=$hier,verbose=1$1" "$prog" "$2" 2>"$log"
	status=$?
	if [ $status -ne 0 ]; then
		cat "$log" >&2
		echo "FAIL: $name $2: exit status $status" >&2
		fail=1
		return
	fi
	if grep -q "frees take the branch-free path" "$log"; then got=switch; else got=stay; fi
	if [ "$got" != "$3" ]; then
		echo "FAIL: $name $2: the free path should $3, it did $got" >&2
		fail=1
	else
		echo "ok: $name $2: $got"
	fi
}

run "" mixed switch
run "" small stay
run "" runs stay
run ",free_path=split" mixed stay
run ",free_path=mixed" mixed stay
run ",free_path=mixed" small stay
run ",free_path=mixed" runs stay
exit $fail
