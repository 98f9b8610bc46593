#!/bin/sh
# CGMALLOC_CONF end to end, through the preload: what the shim prints for
# a bad value, an unknown key, strict=1, verbose=1 and nothing at all, and
# that the program itself runs as it would without the preload.
# Run by `make check-conf-env` (tests/preload/preload.mk), which sets
# CGM_LIB and CGM_VERSION.
. "$(dirname "$0")/preload/lib.sh"

# The program: a shell that prints on both streams and exits with a status
# of its own, so that "runs normally" is visible.
PROG='echo "main ran, pid $$"; echo "stderr of the program" >&2; exit 7'
PROG_ERR="stderr of the program"
CHECKS=0

ok() {
	CHECKS=$((CHECKS + 1))
}

# run OUT [CGMALLOC_CONF value]: the program preloaded, with that
# configuration (no second argument: CGMALLOC_CONF unset).
run() {
	if [ $# -ge 2 ]; then
		pl_run "$PL_TMP/$1" LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="$2" /bin/sh -c "$PROG"
	else
		pl_run "$PL_TMP/$1" LD_PRELOAD="$CGM_LIB" /bin/sh -c "$PROG"
	fi
}

status() { cat "$PL_TMP/$1.status"; }

# The program's stderr with the shim's lines taken out must be its own.
shim_lines() { grep '^cgmalloc: ' "$PL_TMP/$1.stderr" || true; }
other_lines() { grep -v '^cgmalloc: ' "$PL_TMP/$1.stderr" || true; }

expect_normal_run() {
	name=$1
	[ "$(status "$name")" = 7 ] ||
		pl_fail "$name: exit status $(status "$name"), the program's own is 7"
	grep -q '^main ran, pid [0-9]*$' "$PL_TMP/$name.stdout" && [ "$(wc -l <"$PL_TMP/$name.stdout")" = 1 ] ||
		pl_fail "$name: the program's stdout is not what it printed: $(head -c 200 "$PL_TMP/$name.stdout")"
	[ "$(other_lines "$name")" = "$PROG_ERR" ] ||
		pl_fail "$name: stderr other than the shim's lines: $(other_lines "$name" | od -c | head -3)"
}

# expect_shim_lines NAME TEXT: the shim printed exactly TEXT (all lines).
expect_shim_lines() {
	[ "$(shim_lines "$1")" = "$2" ] || {
		echo "expected:" >&2
		printf '%s\n' "$2" >&2
		echo "got (the whole stderr):" >&2
		od -c "$PL_TMP/$1.stderr" | head -10 >&2
		pl_fail "$1: the shim's messages are not the expected ones"
	}
}

# ---- no CGMALLOC_CONF: not one byte from the shim ----
pl_run "$PL_TMP/plain" /bin/sh -c "$PROG"
[ "$(status plain)" = 7 ] || pl_fail "the program itself exits $(status plain), not 7"
for conf in unset "" "verbose=0" " , ,"; do
	if [ "$conf" = unset ]; then run silent; else run silent "$conf"; fi
	[ "$(status silent)" = 7 ] || pl_fail "CGMALLOC_CONF=$conf: status $(status silent)"
	# stdout carries the pid, which differs; everything else is byte for byte.
	sed 's/pid [0-9]*/pid N/' "$PL_TMP/plain.stdout" >"$PL_TMP/a"
	sed 's/pid [0-9]*/pid N/' "$PL_TMP/silent.stdout" >"$PL_TMP/b"
	cmp -s "$PL_TMP/a" "$PL_TMP/b" || pl_fail "CGMALLOC_CONF=$conf: stdout differs from the run without the preload"
	cmp -s "$PL_TMP/plain.stderr" "$PL_TMP/silent.stderr" || {
		pl_show_diff "$PL_TMP/plain.stderr" "$PL_TMP/silent.stderr"
		pl_fail "CGMALLOC_CONF=$conf: the shim printed something on stderr"
	}
	ok
done

# ---- a bad value: one line, the program runs with the default ----
run bad "max=abc"
expect_shim_lines bad "cgmalloc: CGMALLOC_CONF: bad value 'abc' for 'max' (expected a size like 512M or 'max')"
[ "$(wc -l <"$PL_TMP/bad.stderr")" = 2 ] || pl_fail "bad value: stderr has $(wc -l <"$PL_TMP/bad.stderr") lines, expected 2"
expect_normal_run bad
ok

# A bad group name: the line says what a group path is; the program runs.
run badgroup "group=batch job"
shim_lines badgroup | grep -qF "cgmalloc: CGMALLOC_CONF: bad value 'batch job' for 'group' (expected an absolute path like /batch/job1: names of letters, digits and _-.@:+, at most 63 bytes each, at most 64 deep); ignored" ||
	pl_fail "a bad group name: $(shim_lines badgroup)"
expect_normal_run badgroup
ok

# Both a group and a scope: one line saying which is used; the program runs.
run both "hierarchy=$PL_TMP/h,group=/g1,scope=/s1"
expect_shim_lines both "cgmalloc: CGMALLOC_CONF: both group=/g1 and scope=/s1: the scope is used"
expect_normal_run both
ok

# Bytes that are not UTF-8 are escaped in the line, not passed to the terminal.
run badutf8 "$(printf 'max=1\351M')"
shim_lines badutf8 | grep -qF "bad value '1\\xe9M' for 'max'" ||
	pl_fail "a value with a Latin-1 byte: $(shim_lines badutf8 | od -c | head -3)"
expect_normal_run badutf8
ok

# ... and the default really is kept: verbose shows max=max.
run bad_verbose "max=abc,verbose=1"
shim_lines bad_verbose | grep -qE "$PL_VERBOSE_RE.* max=max( |\$)" ||
	pl_fail "after a bad value the verbose line does not show max=max: $(shim_lines bad_verbose)"
expect_normal_run bad_verbose
ok

# ---- an unknown key: one line naming it ----
run unknown "nosuchkey=1"
[ "$(shim_lines unknown | wc -l)" = 1 ] && shim_lines unknown | grep -q "^cgmalloc: CGMALLOC_CONF: .*'nosuchkey'" ||
	pl_fail "unknown key: expected one line naming 'nosuchkey', got: $(shim_lines unknown)"
expect_normal_run unknown
ok

# ---- control characters in the input still make one line each ----
run control "$(printf 'max=ab\ncd,no\033[2Jkey=1')"
[ "$(wc -l <"$PL_TMP/control.stderr")" = 3 ] || {
	od -c "$PL_TMP/control.stderr" | head -8 >&2
	pl_fail "a value with a newline and a key with an escape: not one line each"
}
shim_lines control | grep -q "^cgmalloc: CGMALLOC_CONF: bad value '.*' for 'max'" ||
	pl_fail "a value with a newline: no bad-value line for 'max': $(shim_lines control)"
if grep -q "$(printf '\033')" "$PL_TMP/control.stderr"; then
	pl_fail "an escape character from CGMALLOC_CONF reached stderr"
fi
expect_normal_run control
ok

# ---- several bad items: one line each ----
run several "max=abc,nosuchkey,high=12X,verbose=maybe,oom=whatever"
[ "$(shim_lines several | wc -l)" = 5 ] ||
	pl_fail "five bad items: $(shim_lines several | wc -l) lines: $(shim_lines several)"
expect_normal_run several
ok

# ---- too long: one line, ignored ----
long=$(head -c 9000 /dev/zero | tr '\0' 'x')
run toolong "verbose=1,$long"
[ "$(shim_lines toolong | wc -l)" = 1 ] ||
	pl_fail "a 9 KB CGMALLOC_CONF: expected one line, got $(shim_lines toolong | wc -l)"
shim_lines toolong | grep -qvE "$PL_VERBOSE_RE" ||
	pl_fail "a 9 KB CGMALLOC_CONF was applied (verbose=1 took effect)"
expect_normal_run toolong
ok

# ... but not the strict=1 in it: too long is bad input, and fatal then.
run toolong_strict "strict=1,$long"
[ "$(status toolong_strict)" = 2 ] ||
	pl_fail "a 9 KB CGMALLOC_CONF with strict=1: exit status $(status toolong_strict), expected 2"
shim_lines toolong_strict | grep -q "longer than 8191 bytes" ||
	pl_fail "a 9 KB CGMALLOC_CONF with strict=1: $(shim_lines toolong_strict)"
ok

# ---- strict=1: a bad item is fatal, with status 2, before main ----
for conf in "strict=1,max=abc" "max=abc,strict=1" "strict=1,nosuchkey=1"; do
	run strict "$conf"
	[ "$(status strict)" = 2 ] || pl_fail "CGMALLOC_CONF=$conf: exit status $(status strict), expected 2"
	[ ! -s "$PL_TMP/strict.stdout" ] ||
		pl_fail "CGMALLOC_CONF=$conf: the program ran: $(head -c 200 "$PL_TMP/strict.stdout")"
	[ -z "$(other_lines strict)" ] ||
		pl_fail "CGMALLOC_CONF=$conf: the program wrote to stderr: $(other_lines strict)"
	shim_lines strict | grep -q "^cgmalloc: CGMALLOC_CONF: " ||
		pl_fail "CGMALLOC_CONF=$conf: no line says what was wrong"
	ok
done
run strict_bad "strict=1,max=abc"
shim_lines strict_bad | grep -qF "cgmalloc: CGMALLOC_CONF: bad value 'abc' for 'max' (expected a size like 512M or 'max')" ||
	pl_fail "strict=1: the bad value line is missing: $(shim_lines strict_bad)"
ok

# A good configuration with strict=1 runs normally and silently.
run strict_good "strict=1,max=512M,high=1G"
expect_shim_lines strict_good ""
expect_normal_run strict_good
ok

# ---- verbose=1: the configuration, once, with this process's pid ----
run verbose "verbose=1,max=512M,oom=kill"
[ "$(shim_lines verbose | wc -l)" = 1 ] ||
	pl_fail "verbose=1: $(shim_lines verbose | wc -l) shim lines, expected 1: $(shim_lines verbose)"
line=$(shim_lines verbose)
pid=$(sed -n 's/^main ran, pid \([0-9]*\)$/\1/p' "$PL_TMP/verbose.stdout")
printf '%s\n' "$line" | grep -qE "$PL_VERBOSE_RE" || pl_fail "verbose=1: not the configuration line: $line"
case $line in
"cgmalloc: $CGM_VERSION pid $pid, config: "*) ;;
*) pl_fail "verbose=1: the line does not carry the program's pid $pid: $line" ;;
esac
for kv in verbose=1 max=536870912 oom=kill high=max strict=0; do
	case " ${line#*config: } " in
	*" $kv "*) ;;
	*) pl_fail "verbose=1: '$kv' missing from the configuration: $line" ;;
	esac
done
# Nothing else: no stray bytes (an empty line included) on stderr.
[ "$(wc -l <"$PL_TMP/verbose.stderr")" = 2 ] || {
	od -c "$PL_TMP/verbose.stderr" | head -5 >&2
	pl_fail "verbose=1: stderr has $(wc -l <"$PL_TMP/verbose.stderr") lines, expected the configuration and the program's own"
}
expect_normal_run verbose
ok

echo "test_conf_env: $CHECKS passed, 0 failed"
