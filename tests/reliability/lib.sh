# Common code of the reliability tests: the cgmctl tests' helpers (a
# private hierarchy $H, run/ok/bad/fail), the test program, and a way to
# run a program preloaded.  Environment (tests/reliability/reliability.mk):
# CGMCTL, CGM_LIB, REL_PROG.
. "$(cd "$(dirname "$0")/.." && pwd)/cgmctl/lib.sh"
: "${REL_PROG:?REL_PROG must name tests/reliability/rel_prog (run through make)}"

# pre CONF CMD...: CMD preloaded, with CGMALLOC_CONF=hierarchy=$H,CONF.
pre() {
	conf=$1
	shift
	env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H${conf:+,$conf}" "$@"
}

# within SECONDS CMD...: run CMD (as run does; "pre CONF CMD..." as pre
# does); fail if it is still going after SECONDS (a hang), killing it.
within() {
	secs=$1
	shift
	if [ "$1" = pre ]; then
		conf=$2
		shift 2
		set -- env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H${conf:+,$conf}" "$@"
	fi
	set +e
	timeout -s KILL "$secs" "$@" >"$T/out" 2>"$T/err" </dev/null
	ST=$?
	set -e
	[ "$ST" != 137 ] || fail "'$*' still ran after $secs s (killed)"
}

# The number of a "key N" pair in the last output.
num() { sed -n "s/.*\\b$1 \\(-\\{0,1\\}[0-9]*\\).*/\\1/p" "$T/out" | head -1; }

skip() {
	echo "$TEST_NAME: skipped: $*" >&2
	exit 77
}
