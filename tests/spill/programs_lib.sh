# Common code of the scripts that run unmodified programs under spill=1
# (test_spill_programs.sh, sweep_programs.sh): the fidelity tests'
# helpers, where the workloads are, a skip where spill=1 is refused, and
# in_work.  Environment: the fidelity tests' and CGM_TEST_BIN.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${CGM_TEST_BIN:?CGM_TEST_BIN must name the preload tests' programs (run through make)}"

PL=$(cd "$(dirname "$0")/../preload" && pwd)
SP=$(cd "$(dirname "$0")" && pwd)
export TZ=UTC PYTHONHASHSEED=0 PATH=/usr/bin:/bin

pre "scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
grep -q "spill=1 refused" "$T/probe" && skip "no userfaultfd for system calls: $(head -1 "$T/probe")"

# in_work OUT CMD...: CMD in a fresh $T/w, its stdout in OUT, killed
# after IN_WORK_TIMEOUT seconds (120); status in $ST.  With
# SPILL_PROGRAMS_KEEP set, CMD may dump core there.
in_work() {
	out=$1
	shift
	rm -rf "$T/w"
	mkdir "$T/w"
	set +e
	(cd "$T/w" && { [ -z "${SPILL_PROGRAMS_KEEP:-}" ] || ulimit -c unlimited 2>/dev/null || :; } &&
		exec timeout -s KILL "${IN_WORK_TIMEOUT:-120}" "$@") >"$out" 2>"$T/err" </dev/null
	ST=$?
	set -e
}
