#!/bin/sh
# The start-up check of mimalloc's layout, and its cache in the hierarchy.
#  - A mimalloc whose block sizes disagree with the layout the fast paths
#    read (here mi_usable_size() made to say 16 bytes more) leaves
#    accounting off with one line; with max= asked, the program does not
#    run (exit 2).
#  - A mimalloc whose mi_free() does not free a block of the caller's own
#    page as 2.0.9's does (here it frees nothing), which the accounted
#    free does itself, leaves accounting off too.
#  - A check passed is remembered in the hierarchy header by the hash of
#    mimalloc's build ID: the next process with the same mimalloc skips
#    it (so the wrong sizes above are no longer looked at), and a header
#    that names another build makes the check run again and store ours.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
: "${REL_WRONG_SIZE:?REL_WRONG_SIZE must name wrong_block_size.so (run through make)}"
: "${REL_WRONG_FREE:?REL_WRONG_FREE must name wrong_free.so (run through make)}"

# The header's mi_layout_ok field, in hex: its last 8 bytes (the field
# is the header's last; header_size is the 32-bit word at byte 12), so
# that a layout that grows the header moves it here too (5176 in layout
# 15, 5688 in 16).
layout_ok_at() { echo $(($(od -An -tu4 -j12 -N4 "$H" | tr -d ' ') - 8)); }
layout_ok() { od -An -tx8 -j"$(layout_ok_at)" -N8 "$H" | tr -d ' '; }

# refused WHAT PRELOAD REASON: with PRELOAD before the library, the program
# runs with accounting off, one line on stderr gives REASON, nothing is cached.
refused() {
	run env LD_PRELOAD="$2:$CGM_LIB" CGMALLOC_CONF="hierarchy=$H" "$PY" -c 'print("ran")'
	[ "$ST" = 0 ] || fail "$1: exit status $ST"
	out_is "ran"
	[ "$(wc -l <"$T/err")" = 1 ] || fail "$1: $(wc -l <"$T/err") lines on stderr, expected 1"
	grep -q "^cgmalloc: accounting off: .*$3" "$T/err" || fail "$1: the line does not say why: $(cat "$T/err")"
	[ "$(layout_ok)" = 0000000000000000 ] || fail "$1: a failed check was remembered: $(layout_ok)"
	CHECKS=$((CHECKS + 1))
}

refused "wrong block sizes" "$REL_WRONG_SIZE" "block sizes disagree"

run env LD_PRELOAD="$REL_WRONG_SIZE:$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,max=64M" "$PY" -c 'print("ran")'
[ "$ST" = 2 ] || fail "wrong block sizes with max=: exit status $ST, expected 2"
[ ! -s "$T/out" ] || fail "the program ran: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

refused "another free" "$REL_WRONG_FREE" "free is not the one of 2.0.9"

run pre "verbose=1" "$PY" -c 'print("ran")'
[ "$ST" = 0 ] || fail "the real mimalloc: exit status $ST"
grep -q "accounting on" "$T/err" || fail "the real mimalloc: $(cat "$T/err")"
good=$(layout_ok)
[ "$good" != 0000000000000000 ] || fail "a passed check was not remembered"
CHECKS=$((CHECKS + 1))

# Remembered: the same mimalloc build is not checked again.
run env LD_PRELOAD="$REL_WRONG_SIZE:$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,verbose=1" "$PY" -c 'print("ran")'
[ "$ST" = 0 ] || fail "cached: exit status $ST"
grep -q "accounting on" "$T/err" || fail "the check ran again for the same build: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))

# Another build's hash in the header: checked again, and ours stored.
printf '\001\002\003\004\005\006\007\010' | dd of="$H" bs=1 seek="$(layout_ok_at)" conv=notrunc status=none
run env LD_PRELOAD="$REL_WRONG_SIZE:$CGM_LIB" CGMALLOC_CONF="hierarchy=$H" "$PY" -c 'print("ran")'
grep -q "^cgmalloc: accounting off: .*block sizes disagree" "$T/err" ||
	fail "another build's hash: the check did not run: $(cat "$T/err")"
run pre "" "$PY" -c 'print("ran")'
[ "$(layout_ok)" = "$good" ] || fail "the hash stored is $(layout_ok), expected $good"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
