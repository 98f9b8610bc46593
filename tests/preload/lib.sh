# Common code of the preload tests: sourced by tests/preload/test_*.sh and
# tests/test_conf_env.sh.
#
# A preload test runs an unmodified program twice, in a fresh directory at
# the same path each time: once as it is, once with LD_PRELOAD=libcgmalloc.so
# and CGMALLOC_CONF=verbose=1.  The two runs must print the same stdout,
# byte for byte, and the same stderr apart from the shim's own lines, and
# exit with the same status; and the preloaded run's stderr must carry the
# line the shim prints with verbose=1, from as many processes as expected,
# which proves that the preload was active in them.
#
# Environment, set by tests/preload/preload.mk:
#   CGM_LIB      absolute path of libcgmalloc.so
#   CGM_VERSION  the version it prints (include/cgmalloc.h)
# Optional: CGM_DLALLOC (tests/libdlalloc.so), CGM_TEST_BIN (built programs).

set -eu

PL_NAME=$(basename "$0" .sh)
PL_DIR=$(cd "$(dirname "$0")" && pwd)

pl_fail() {
	echo "$PL_NAME: FAIL: $*" >&2
	exit 1
}

: "${CGM_LIB:?CGM_LIB must name libcgmalloc.so (run through make)}"
: "${CGM_VERSION:?CGM_VERSION must be the library version (run through make)}"
case $CGM_LIB in
/*) ;;
*) pl_fail "CGM_LIB must be an absolute path: $CGM_LIB" ;;
esac
[ -f "$CGM_LIB" ] || pl_fail "no library at $CGM_LIB"

# The same deterministic environment for both runs.
export LC_ALL=C TZ=UTC PYTHONHASHSEED=0
unset LD_PRELOAD CGMALLOC_CONF MALLOC_CHECK_ MALLOC_PERTURB_ 2>/dev/null || true

PL_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cgm-$PL_NAME.XXXXXX")
trap 'rm -rf "$PL_TMP"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
PL_WORK=$PL_TMP/work
PL_PASSED=0

# The line bootstrap.c prints with verbose=1, as a grep -E pattern.
PL_VERBOSE_RE="^cgmalloc: $(printf '%s' "$CGM_VERSION" | sed 's/\./\\./g') pid [0-9]+, config: .*verbose=1"
# What else verbose=1 may say of an ordinary run: the switch to the
# branch-free free (free_path=auto, shim/accounted.c).
PL_NOTICE_RE="^cgmalloc: accounting: small and medium blocks in a mix \([0-9 a-z,]+\): frees take the branch-free path$"

# pl_run OUT [NAME=VALUE...] CMD [ARG...]
# Runs CMD in a fresh $PL_WORK with the extra environment; OUT.stdout,
# OUT.stderr and OUT.status receive what it did.
pl_run() {
	out=$1
	shift
	rm -rf "$PL_WORK"
	mkdir "$PL_WORK"
	set +e
	(cd "$PL_WORK" && exec env -- "$@") >"$out.stdout" 2>"$out.stderr" </dev/null
	echo $? >"$out.status"
	set -e
}

# Show where two files differ, for a failure message.
pl_show_diff() {
	echo "--- $1 (without the preload) / +++ $2 (with it), first lines:" >&2
	diff "$1" "$2" | head -20 >&2 || true
}

# pl_compare LABEL NPROCS CMD [ARG...]   (CMD: an absolute path)
# The check described at the top.  NPROCS is the number of processes that
# must have printed the verbose line (distinct pids); the program must exit
# 0 and print something on stdout.
pl_compare() {
	label=$1
	nprocs=$2
	shift 2
	base=$PL_TMP/plain
	pre=$PL_TMP/preload

	pl_run "$base" "$@"
	pl_run "$pre" LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="verbose=1,hierarchy=$PL_TMP/hierarchy" "$@"

	if [ "$(cat "$base.status")" != 0 ]; then
		head -20 "$base.stderr" >&2
		pl_fail "$label: exits with status $(cat "$base.status") even without the preload"
	fi
	[ -s "$base.stdout" ] || pl_fail "$label: prints nothing on stdout: nothing to compare"
	if [ "$(cat "$pre.status")" != "$(cat "$base.status")" ]; then
		head -20 "$pre.stderr" >&2
		pl_fail "$label: exit status $(cat "$pre.status") with the preload, $(cat "$base.status") without"
	fi
	if ! cmp -s "$base.stdout" "$pre.stdout"; then
		pl_show_diff "$base.stdout" "$pre.stdout"
		pl_fail "$label: stdout differs with the preload"
	fi

	# Enough processes printed the configuration; the shim said nothing else.
	seen=$(grep -E "$PL_VERBOSE_RE" "$pre.stderr" | sed 's/.* pid \([0-9]*\),.*/\1/' | sort -u | wc -l)
	lines=$(grep -cE "$PL_VERBOSE_RE" "$pre.stderr" || true)
	if [ "$seen" -lt "$nprocs" ]; then
		head -20 "$pre.stderr" >&2
		pl_fail "$label: $seen process(es) printed the cgmalloc verbose line, expected at least $nprocs: was the preload active?"
	fi
	# (More lines than pids is fine: a script that execs keeps its pid, as
	# gunzip does with gzip; once per program is tests/test_conf_env.sh's.)
	if grep '^cgmalloc: ' "$pre.stderr" | grep -vE "$PL_VERBOSE_RE" | grep -vqE "$PL_NOTICE_RE"; then
		grep '^cgmalloc: ' "$pre.stderr" | grep -vE "$PL_VERBOSE_RE" | grep -vE "$PL_NOTICE_RE" | head -5 >&2
		pl_fail "$label: unexpected cgmalloc diagnostics"
	fi
	grep -v '^cgmalloc: ' "$pre.stderr" >"$pre.stderr.own" || true
	if ! cmp -s "$base.stderr" "$pre.stderr.own"; then
		pl_show_diff "$base.stderr" "$pre.stderr.own"
		pl_fail "$label: stderr differs with the preload"
	fi

	PL_PASSED=$((PL_PASSED + 1))
	echo "$PL_NAME: $label: same stdout ($(wc -c <"$base.stdout") bytes) and stderr, status 0, $seen process(es) ($lines programs) under cgmalloc: ok"
}

# Print the closing line; call last.
pl_done() {
	echo "$PL_NAME: $PL_PASSED passed, 0 failed"
}
