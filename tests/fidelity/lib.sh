# Common code of the fidelity tests: the reliability tests' helpers (a
# private hierarchy $H, pre/run/ok/fail) and a way to look at a
# preloaded program while it holds its peak.  Environment
# (tests/fidelity/fidelity.mk): CGMCTL, CGM_LIB, REL_PROG, FID_PROG.
. "$(cd "$(dirname "$0")/.." && pwd)/reliability/lib.sh"
: "${FID_PROG:?FID_PROG must name tests/fidelity/fid_prog (run through make)}"

MIB=1048576

# start CONF CMD...: CMD preloaded with CGMALLOC_CONF=hierarchy=$H,CONF,
# in the background ($BG is its pid, its stderr in $T/bg.err).
start() {
	conf=$1
	shift
	# Emptied here, not by the background job's redirection: reach must
	# not find the last program's lines before the job has started.
	: >"$T/bg.out"
	: >"$T/bg.err"
	env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H${conf:+,$conf}" "$@" \
		>>"$T/bg.out" 2>>"$T/bg.err" </dev/null &
	BG=$!
	PIDS="$PIDS $BG"
}

# reach PHASE: wait (up to 30 s) until the background program says
# "fid_prog: PHASE" (or prints PHASE on a line of its own).
reach() {
	i=0
	until grep -qx "fid_prog: $1\\|$1" "$T/bg.err" "$T/bg.out" 2>/dev/null; do
		kill -0 "$BG" 2>/dev/null || fail "the program ended before '$1': $(head -3 "$T/bg.err")"
		i=$((i + 1))
		[ $i -lt 600 ] || fail "the program did not reach '$1' in 30 s"
		sleep 0.05
	done
}

# finish: wait for the background program; its status in $ST.
finish() {
	set +e
	wait "$BG"
	ST=$?
	set -e
}

# value GROUP FILE [KEY]: a number from a group's file (a "KEY N" line of it).
value() {
	"$CGMCTL" --hierarchy "$H" cat "$1" "$2" >"$T/v" 2>"$T/verr" || fail "cat $1 $2: $(cat "$T/verr")"
	if [ $# -ge 3 ]; then
		awk -v k="$3" '$1 == k { print $2 }' "$T/v"
	else
		cat "$T/v"
	fi
}

# settle GROUP KEY OP N: wait (up to 2 s) until memory.stat KEY of GROUP
# compares with N as test(1)'s OP says; false if it never does.  The last
# value in $V.  (The split of anon is as of the process's last sample: at
# its slow paths, 20 ms apart or 50 times what a sample costs -- longer
# on a loaded machine.)
settle() {
	i=0
	while :; do
		V=$(value "$1" memory.stat "$2")
		[ "$V" "$3" "$4" ] && return 0
		i=$((i + 1))
		[ $i -lt 40 ] || return 1
		sleep 0.05
	done
}

# kernel_anon PID: the process's resident anonymous memory as the kernel
# counts it (RssAnon of /proc/PID/status), in bytes.
kernel_anon() {
	awk '$1 == "RssAnon:" { print $2 * 1024 }' "/proc/$1/status"
}

# within_ratio A B LO HI: LO <= A / B <= HI (percentages, integers).
within_ratio() {
	[ "$2" -gt 0 ] || return 1
	r=$(( $1 * 100 / $2 ))
	[ "$r" -ge "$3" ] && [ "$r" -le "$4" ]
}

mib() { echo "$(( $1 / MIB )) MiB"; }
