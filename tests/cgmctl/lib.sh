# Common code of the cgmctl tests (tests/test_cgmctl.sh,
# tests/cgmctl/test_*.sh): a private hierarchy file in a fresh directory,
# and checks of a command's exit status, stdout and stderr.
# Environment, set by tools/cgmctl/cgmctl.mk: CGMCTL, CGM_LIB.
set -eu
: "${CGMCTL:?CGMCTL must name the cgmctl binary (run through make)}"
: "${CGM_LIB:?CGM_LIB must name libcgmalloc.so (run through make)}"
TEST_NAME=$(basename "$0" .sh)
PY=/usr/bin/python3
export LC_ALL=C
unset LD_PRELOAD CGMALLOC_CONF 2>/dev/null || true

T=$(mktemp -d "${TMPDIR:-/tmp}/cgm-$TEST_NAME.XXXXXX")
H=$T/h
PIDS=""
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
CHECKS=0

fail() {
	echo "$TEST_NAME: FAIL: $*" >&2
	for f in "$T/out" "$T/err"; do
		[ -s "$f" ] && { echo "--- $(basename "$f"):" >&2; head -5 "$f" >&2; }
	done
	exit 1
}

# run CMD...: status in $ST, output in $T/out and $T/err.
run() {
	set +e
	"$@" >"$T/out" 2>"$T/err" </dev/null
	ST=$?
	set -e
}
ctl() { "$CGMCTL" --hierarchy "$H" "$@"; }

# ok CMD...: exit 0, nothing on stderr.
ok() {
	run "$@"
	[ "$ST" = 0 ] || fail "'$*' exited $ST"
	[ ! -s "$T/err" ] || fail "'$*' wrote on stderr"
	CHECKS=$((CHECKS + 1))
}

# bad STATUS PATTERN CMD...: that exit status, nothing on stdout, and one
# line on stderr, "cgmctl: ..." matching PATTERN (grep -E).
bad() {
	want=$1
	pat=$2
	shift 2
	run "$@"
	[ "$ST" = "$want" ] || fail "'$*' exited $ST, expected $want"
	[ ! -s "$T/out" ] || fail "'$*' wrote on stdout"
	[ "$(wc -l <"$T/err")" = 1 ] || fail "'$*': $(wc -l <"$T/err") lines on stderr, expected one"
	grep -qE "^cgmctl: .*$pat" "$T/err" || fail "'$*': stderr does not say /$pat/"
	CHECKS=$((CHECKS + 1))
}

out_is() {
	[ "$(cat "$T/out")" = "$1" ] || fail "expected output '$1', got '$(head -c 200 "$T/out")'"
}

json_ok() {
	"$PY" -m json.tool "$T/out" >/dev/null || fail "not JSON: $(head -c 300 "$T/out")"
}

# The value of a "key value" line of the last output.
field() { awk -v k="$1" '$1 == k { print $2 }' "$T/out"; }

# wait_for CMD...: retry for up to 5 s until CMD succeeds.
wait_for() {
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "timed out waiting for: $*"
		sleep 0.05
	done
}
