#!/bin/sh
# Spilling on real programs with cold data: python3 holding a dict of which
# 80% is never read again (bench/spill_dict.py), sqlite3 with a cache of
# which 80% is never read again (bench/spill_sqlite.sql).  Each runs
# preloaded (a) without a limit, spill=0, and (b) with spill=1 and
# memory.high at half the peak (a) reached in the first round; rounds
# interleave the two.  Writes bench/RESULTS-spill-workload.md.
# Usage: bench/spill_workload.sh [BUILD_DIR] [ROUNDS]   (make bench-spill-workload)
# SPILL_EXTRA=key=value,... adds keys to (b)'s CGMALLOC_CONF (for example
# spill_codec=zstd, or spill_recompress=0); SPILL_OUT=FILE writes the
# results there instead, and SPILL_BUILD_CAP=S measures builds up to S
# seconds instead of 25 (spill_hold_high=1's sqlite3 build takes 25-35 s).
set -eu

B=${1:-build}
ROUNDS=${2:-5}
LIB=$(cd "$B" && pwd)/libcgmalloc.so
CGMCTL=$B/cgmctl
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${SPILL_OUT:-$HERE/RESULTS-spill-workload.md}
OUT_NAME=$(basename "$OUT")
GOAL_SAVED_PCT=40
GOAL_SLOWDOWN=1.05
# Sizes: a dict of about 310 MB, a database of about 200 MB; working
# phases of 2-4 s without a limit.
PY_ENTRIES=900000
PY_OPS=2500000
SQL_ROWS=800000
SQL_OPS=800000
# A phase longer than PHASE_TIMEOUT is a failure.  A build longer than
# BUILD_CAP or a working phase longer than WORK_CAP is measured up to there
# and reported as longer (the bench must end in a few minutes however slow
# spilling makes a run).
PHASE_TIMEOUT=60
BUILD_CAP=${SPILL_BUILD_CAP:-25}
WORK_CAP=15
# A run that makes no step this long after its limit was lifted is
# stopped; if it was caught in a fault that never resolves (hung), its
# configuration is not run again.
LIFT_TIMEOUT=30

T=$(mktemp -d "${TMPDIR:-/tmp}/cgm-spillwl.XXXXXX")
H=$T/h
PID=
cleanup() {
	if [ -n "$PID" ]; then
		kill -9 "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export LC_ALL=C

machine="$(nproc) vCPUs, kernel $(uname -r); $(date -u +%Y-%m-%d)"

not_measured() {
	{
		echo "# Spilling on real programs with cold data"
		echo
		echo "Not measured: $1."
		echo
		echo "Machine: $machine."
	} > "$OUT"
	echo "bench-spill-workload: not measured: $1"
	exit 0
}

SQLITE=$(command -v sqlite3 || true)
if [ -z "$SQLITE" ]; then
	"$HERE/../scripts/install-deps" >&2 || true
	SQLITE=$(command -v sqlite3 || true)
fi
[ -n "$SQLITE" ] || not_measured "no sqlite3 (scripts/install-deps could not install it)"

env LD_PRELOAD="$LIB" CGMALLOC_CONF="hierarchy=$H,scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
if grep -q "spill=1 refused" "$T/probe"; then
	not_measured "spill=1 refused ($(grep -v 'spill=1 refused' "$T/probe" | head -1))"
fi

# ---- one run ----
#
# The workload reads its input from a FIFO and prints a marker line at each
# step; it goes on only when given more input (a line for python, the next
# section of the SQL for sqlite3), so the group's figures are read at the
# same points of every run: before the build (ready), after it (built: the
# working phase starts when released), every SAMPLE_S during the working
# phase, and after it (done).

SAMPLE_S=0.2

# stats GROUP: "current peak zswpout zswpin zswap zswapped throttle_usec
# refault_hot pgscan pgsteal_direct", comma-separated.
stats() {
	"$CGMCTL" --hierarchy "$H" cat "$1" memory.current memory.peak memory.stat 2>/dev/null | awk '
		/^==> memory.current/ { f = "cur"; next }
		/^==> memory.peak/ { f = "peak"; next }
		/^==> memory.stat/ { f = "stat"; next }
		f == "cur" && NF == 1 { cur = $1 }
		f == "peak" && NF == 1 { peak = $1 }
		f == "stat" { s[$1] = $2 }
		END {
			if (cur == "")
				exit 1
			printf "%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n", cur, peak, s["zswpout"], s["zswpin"],
			       s["zswap"], s["zswapped"], s["throttle_usec"], s["workingset_refault_anon"], s["pgscan"],
			       s["pgsteal_direct"]
		}'
}

# A process publishes its spill figures (zswap, zswpin, ...) at its own
# allocation slow paths; refaults served while it does not allocate (a
# write(2) from spilled pages, as sqlite's commit) are not in them until
# then.  Before the figures at the phase boundaries are read, a
# memory.reclaim of one page makes it publish: an idle process answers it
# from its handler thread within two ticks (it spills a chunk to do so).
fresh_stats() {
	[ "$2" = b ] && "$CGMCTL" --hierarchy "$H" set "$1" memory.reclaim 4K >/dev/null 2>&1 || true
	stats "$1"
}

# await MARKER [SECONDS]
. "$HERE/await.sh"

# lift GROUP: memory.high max, so that a run stopped at a cap finishes, and
# the check at the end of a run is not under pressure.
lift() {
	"$CGMCTL" --hierarchy "$H" set "$1" memory.high max >/dev/null 2>&1 || true
}

# sql_section FROM TO: the lines of the SQL after `.print FROM` (from the
# start if FROM is empty) up to and including `.print TO`.
sql_section() {
	awk -v from="$1" -v to="$2" '
		BEGIN { on = (from == "") }
		on { print }
		$1 == ".print" && $2 == from { on = 1 }
		on && $1 == ".print" && $2 == to { exit }' "$HERE/spill_sqlite.sql"
}

# release WORKLOAD STEP: let the workload go on past STEP.
release() {
	if [ "$1" = py ]; then
		echo >&3
		return
	fi
	case $2 in
	start) sql_section "" ready ;;
	ready) sql_section ready built ;;
	built) sql_section built done ;;
	done) sql_section done end ;;
	esac >&3
}

# stuck PHASE: the status of a run that made no step for LIFT_TIMEOUT
# with its limit lifted.  hung-in-PHASE: its spill counters stand still
# for 2 s while its main thread keeps faulting into the userfaultfd (a
# fault the handler never resolves); slow-in-PHASE otherwise.
stuck() {
	before=$(stats "$g")
	uffd=0
	for i in 1 2 3 4 5 6 7 8 9 10; do
		[ "$(cat /proc/"$PID"/wchan 2>/dev/null)" != handle_userfault ] || uffd=$((uffd + 1))
		sleep 0.2
	done
	after=$(stats "$g")
	# current and peak may move with the sampling; the counters may not.
	if [ $uffd -gt 0 ] && [ "${before#*,*,}" = "${after#*,*,}" ]; then
		echo "hung-in-$1"
	else
		echo "slow-in-$1"
	fi
}

# run_one WORKLOAD CONFIG ROUND CONF: one run; appends to $RAW/runs:
#   WORKLOAD CONFIG ROUND STATUS READY BUILT DONE WORK_CURRENT SAMPLES
#   WORK_S HALF1_S HALF2_S CHECK RATIO STATEMENTS
# READY, BUILT, DONE: stats at those points; WORK_CURRENT: the median
# memory.current over the working phase; RATIO: zswapped/zswap at the
# sample of the working phase with the most bytes spilled; STATEMENTS:
# sqlite3's timed statements, s, joined by +.
# A build longer than BUILD_CAP or a working phase longer than WORK_CAP
# (status build-over-Ns, work-over-Ns) is measured up to there (BUILT or
# DONE are read then); the limit is lifted and the run goes on to its
# check.
run_one() {
	w=$1 cfg=$2 r=$3 conf=$4
	name=$w-$cfg-$r
	g=/$name
	rm -f "$T/in" "$T/db"
	: >"$T/out"
	: >"$RAW/samples.$name"
	mkfifo "$T/in"
	if [ "$w" = py ]; then
		set -- "$PY" "$HERE/spill_dict.py" "$PY_ENTRIES" "$PY_OPS"
	else
		set -- "$SQLITE" -batch "$T/db"
	fi
	env LD_PRELOAD="$LIB" CGMALLOC_CONF="hierarchy=$H,scope=$g,$conf" "$@" \
		<"$T/in" >"$T/out" 2>"$RAW/err.$name" &
	PID=$!
	# Read-write, so that opening does not wait for the reader.
	exec 3<>"$T/in"
	if [ "$w" = sql ]; then
		printf '.parameter set @rows %s\n.parameter set @hot %s\n.parameter set @ops %s\n' \
			"$SQL_ROWS" $((SQL_ROWS / 5)) "$SQL_OPS" >&3
		release sql start
	fi
	st=ok s_ready=- s_built=- s_done=- tbuild=- m0=- m1=-
	# Only (b) is measured up to a cap; (a) must finish in PHASE_TIMEOUT.
	bcap=$PHASE_TIMEOUT
	[ $cfg = a ] || bcap=$BUILD_CAP
	if await ready; then
		s_ready=$(stats "$g")
		t_ready=$(date +%s.%N)
		release "$w" ready
		rc=0
		await built "$bcap" || rc=$?
		# The build's wall time (the await's polling included).
		[ $rc != 0 ] || tbuild=$(echo "$(date +%s.%N) $t_ready" | awk '{ printf "%.2f", $1 - $2 }')
		if [ $rc = 2 ] && [ $cfg = b ]; then
			st=build-over-${BUILD_CAP}s
			s_built=$(fresh_stats "$g" "$cfg")
			lift "$g"
			rc=0
			await built "$LIFT_TIMEOUT" || rc=$?
			[ $rc != 2 ] || st=$(stuck build)
		fi
		[ $rc = 0 ] || [ $st != ok ] || st=failed-in-build
		[ $rc != 1 ] || st=failed-in-build
	else
		st=failed-before-build
	fi
	case $st in ok|build-over-*)
		[ $st = ok ] && s_built=$(fresh_stats "$g" "$cfg")
		m0=$(thread_now "$PID")
		release "$w" built
		t0=$(date +%s)
		while [ $st = ok ] && ! grep -q '^done' "$T/out"; do
			kill -0 "$PID" 2>/dev/null || break
			if [ $cfg = b ] && [ $(($(date +%s) - t0)) -ge "$WORK_CAP" ]; then
				st=work-over-${WORK_CAP}s
				s_done=$(fresh_stats "$g" "$cfg")
				lift "$g"
				break
			fi
			stats "$g" >>"$RAW/samples.$name" || true
			sleep "$SAMPLE_S"
		done
		rc=0
		case $st in
		ok) await done || rc=$? ;;
		*) await done "$LIFT_TIMEOUT" || rc=$? ;;
		esac
		if [ $rc = 0 ]; then
			if [ $st = ok ]; then
				m1=$(thread_now "$PID")
				s_done=$(fresh_stats "$g" "$cfg")
				echo "$s_done" >>"$RAW/samples.$name"
			fi
			lift "$g"
			release "$w" done
			# python checks every record, sqlite3 prints a checksum.
			rc=0
			await "$([ "$w" = py ] && echo verified || echo end)" || rc=$?
			[ $rc != 1 ] || st=failed-in-check
			[ $rc != 2 ] || st=$(stuck check)
		elif [ $rc = 2 ] && [ $st != ok ]; then
			st=$(stuck work)
		else
			st=failed-in-work
		fi
	esac
	case $st in hung-*|slow-*)
		# What its threads wait in, for the report.
		ps -L -o lwp,stat,wchan:32,pcpu,comm -p "$PID" >"$RAW/stuck.$name" 2>&1 || true
		for t in /proc/"$PID"/task/*/stack; do
			echo "== $t"
			cat "$t" 2>/dev/null || true
		done >>"$RAW/stuck.$name"
	esac
	exec 3>&-
	case $st in
	failed-*|hung-*|slow-*)
		kill -9 "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
		;;
	*)
		wait "$PID" || st=exit-$?
		;;
	esac
	PID=
	cp "$T/out" "$RAW/out.$name"
	if [ "$w" = py ]; then
		times=$(awk '$1 == "done" { print $2, $3, $4 }' "$T/out")
		check=$(awk '$1 == "verified" || $1 == "CORRUPT" { print $1 }' "$T/out")
	else
		# .timer's lines: the working phase's statements before and after "half".
		times=$(awk 'BEGIN { h = 0 } $1 == "built" { on = 1 } $1 == "half" { h = 1 } $1 == "done" { on = 0; d = 1 }
			on && $1 == "Run" && $2 == "Time:" { t[h] += $4 }
			END { if (d) printf "%.3f %.3f %.3f\n", t[0] + t[1], t[0], t[1] }' "$T/out")
		check=$(awk '$1 == "checksum" { print $2 }' "$T/out")
	fi
	[ -n "$times" ] || times="- - -"
	# Each timed statement of sqlite3's working phase.
	stmts=$(awk '$1 == "built" { on = 1 } $1 == "done" { on = 0 }
		on && $1 == "Run" && $2 == "Time:" { s = s (s == "" ? "" : "+") $4 }
		END { print s == "" ? "-" : s }' "$T/out")
	[ "$w" = sql ] || stmts=-
	case $st in
	work-over-*) times=">$WORK_CAP - -" stmts=- ;;
	build-over-*) times="- - -" stmts=- ;;
	esac
	wmed=$(awk -F, '{ print $1 }' "$RAW/samples.$name" | sort -n |
		awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : "-" }')
	nsamp=$(wc -l <"$RAW/samples.$name")
	ratio=$(awk -F, '$6 > best { best = $6; r = $5 > 0 ? $6 / $5 : 0 }
		END { printf "%.2f\n", (best > 0 ? r : 0) }' "$RAW/samples.$name")
	echo "$w $cfg $r $st $s_ready $s_built $s_done $wmed $nsamp $times ${check:-none} $ratio $stmts $tbuild $(thread_delta "$m0" "$m1" "${times%% *}")" >>"$RAW/runs"
	echo "bench-spill-workload: $name: $st, working phase $(echo "$times" | cut -d' ' -f1) s" >&2
}

# thread_now PID: PID's main thread's time on a CPU and waiting for one
# (ns, /proc/PID/task/PID/schedstat) and its voluntary switches, as
# CPU,WAIT,SWITCHES; - if it cannot be read.
thread_now() {
	awk 'FNR == 1 && FILENAME ~ /schedstat$/ { c = $1; q = $2 }
		$1 == "voluntary_ctxt_switches:" { v = $2 }
		END { if (c == "" || v == "") print "-"; else printf "%.0f,%.0f,%.0f\n", c, q, v }' \
		"/proc/$1/task/$1/schedstat" "/proc/$1/task/$1/status" 2>/dev/null || echo -
}

# thread_delta BEFORE AFTER PHASE_S: what the main thread did between two
# thread_now around a working phase of PHASE_S seconds, as CPU,WAIT,OFF
# (seconds; OFF the phase's time less the other two) and SWITCHES.
thread_delta() {
	case $1$2 in *-*) echo -; return ;; esac
	echo "$1 $2 $3" | awk '{ split($1, a, ","); split($2, b, ",")
		c = (b[1] - a[1]) / 1e9; q = (b[2] - a[2]) / 1e9; o = $3 - c - q
		printf "%.4f,%.4f,%.4f,%.0f\n", c, q, (o > 0 ? o : 0), b[3] - a[3] }'
}

# peak_of WORKLOAD CONFIG ROUND: memory.peak of that run.
peak_of() {
	awk -v w="$1" -v c="$2" -v r="$3" '$1 == w && $2 == c && $3 == r { split($7, s, ","); print s[2] }' "$RAW/runs"
}

RAW=$B/spill-workload
rm -rf "$RAW"
mkdir -p "$RAW"
: >"$RAW/runs"
START=$(date +%s)
HIGH_py= HIGH_sql= HUNG_py= HUNG_sql=
r=1
while [ $r -le "$ROUNDS" ]; do
	# Round 1 runs (a) first: (b)'s memory.high is half of its peak.
	if [ $((r % 2)) = 1 ]; then order="a b"; else order="b a"; fi
	for w in py sql; do
		for cfg in $order; do
			if [ $cfg = a ]; then
				run_one $w a $r "spill=0"
				if [ $r = 1 ]; then
					p=$(peak_of $w a 1)
					case $p in
					''|*[!0-9]*) not_measured "the first unlimited $w run failed: $(head -3 "$RAW/err.$w-a-1")" ;;
					esac
					eval "HIGH_$w=$((p / 2))"
				fi
			elif eval "[ -n \"\$HUNG_$w\" ]"; then
				echo "$w b $r skipped-after-hang - - - - 0 - - - none 0.00 -" >>"$RAW/runs"
			else
				eval "high=\$HIGH_$w"
				run_one $w b $r "spill=1,high=$high${SPILL_EXTRA:+,$SPILL_EXTRA}"
				if tail -1 "$RAW/runs" | grep -q " hung-"; then
					eval "HUNG_$w=1"
				fi
			fi
		done
	done
	r=$((r + 1))
done
ELAPSED=$(($(date +%s) - START))

# ---- the report ----

# figures WORKLOAD: one line of key=value, the medians over the runs.
figures() {
	awk -v w="$1" -v cap="$WORK_CAP" '
		function sorted(s, a,   n, i, j, t) {
			n = split(s, a, " ")
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return n
		}
		function med(s,   a, n) {
			n = sorted(s, a)
			if (!n) return "nan"
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		function lo(s,   a, n) { n = sorted(s, a); return n ? a[1] : "nan" }
		function hi(s,   a, n) { n = sorted(s, a); return n ? a[n] : "nan" }
		function add(k, v) { L[k] = L[k] " " v }
		$1 != w { next }
		{
			split($5, R, ","); split($6, B, ","); split($7, D, ",")
			c = $2
			if ($4 ~ /^hung/) hung[c]++
			if ($4 ~ /^skipped/) skipped[c]++
			if ($4 ~ /^failed|^exit|^slow/) failed[c]++
			# A build stopped at BUILD_CAP: its figures up to there.
			if ($4 ~ /^build-over|^hung-in-build|^slow-in-build/ && $6 != "-") {
				stalled[c]++
				add(c "thrbuild", B[7] / 1e6); add(c "scanbuild", B[9]); add(c "curbuild", B[1])
			}
			if ($4 ~ /^failed|^exit|^hung|^slow|^skipped|^build-over/)
				next
			if ($13 != "verified") checks[$13]++
			if ($4 == "ok") {
				add(c "t", $10); add(c "h1", $11); add(c "h2", $12)
				if ($16 != "-") add(c "build", $16)
				rt[c, $3] = $10
				add(c "data", B[1] - R[1]); add(c "base", R[1]); add(c "endbuild", B[1])
				# The main thread in the working phase: on a CPU, waiting
				# for one, and the rest of the phase off any (faults, locks).
				if ($17 != "" && $17 != "-") {
					split($17, M, ",")
					add(c "mcpu", M[1]); add(c "mrq", M[2]); add(c "moff", M[3]); add(c "mvol", M[4])
				}
				n[c]++
			} else if ($4 ~ /^work-over/) {
				add(c "t", cap); capped[c]++
			}
			add(c "wcur", $8)
			if ($7 != "-") {
				add(c "peak", D[2]); add(c "in", D[4] - B[4]); add(c "inhot", D[8] - B[8])
				add(c "out", D[3] - B[3]); add(c "thr", (D[7] - B[7]) / 1e6); add(c "scan", D[9] - B[9])
				add(c "direct", D[10] - B[10])
			}
			add(c "thrbuild", B[7] / 1e6); add(c "scanbuild", B[9])
			if ($14 > 0) add(c "ratio", $14)
		}
		END {
			# Each round ran (a) and (b) back to back: their ratio is
			# the slowdown under the machine of that moment.
			for (k in rt) {
				split(k, kk, SUBSEP)
				if (kk[1] == "b" && ("a", kk[2]) in rt && rt["a", kk[2]] > 0)
					add("bpair", rt["b", kk[2]] / rt["a", kk[2]])
			}
			printf "pair=%s pair_lo=%s pair_hi=%s", med(L["bpair"]), lo(L["bpair"]), hi(L["bpair"])
			printf " n_a=%d n_b=%d capped_b=%d stalled_b=%d failed_a=%d failed_b=%d hung_b=%d skipped_b=%d",
			       n["a"], n["b"], capped["b"], stalled["b"], failed["a"], failed["b"], hung["b"], skipped["b"]
			nk = 0
			for (k in checks) nk++
			printf " checks=%d", nk
			split("wcur t h1 h2 peak data base in inhot out direct thr scan thrbuild scanbuild curbuild endbuild ratio build mcpu mrq moff mvol", K, " ")
			for (i = 1; i in K; i++)
				for (ci = 1; ci <= 2; ci++) {
					c = ci == 1 ? "a" : "b"
					printf " %s_%s=%s %s_%s_lo=%s %s_%s_hi=%s", c, K[i], med(L[c K[i]]),
					       c, K[i], lo(L[c K[i]]), c, K[i], hi(L[c K[i]])
				}
			printf "\n"
		}' "$RAW/runs"
}

# get KEY: a value from the figures line in $F.
get() { echo "$F" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
mib() { awk -v b="$1" 'BEGIN { if (b == "nan" || b == "") print "n/a"; else printf "%.0f", b / 1048576 }'; }
num() { awk -v v="$1" -v f="$2" 'BEGIN { if (v == "nan" || v == "") print "n/a"; else printf f, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

# Per workload W: the figures and the verdict, kept in F_W, pct_W, ....
for w in py sql; do
	F=$(figures $w)
	eval "high=\$HIGH_$w"
	data=$(get a_data) peak_a=$(get a_peak) wcur_b=$(get b_wcur)
	cold=$(awk -v d="$data" 'BEGIN { printf "%.0f", d == "nan" ? 0 : d * 0.8 }')
	saved=$(awk -v p="$peak_a" -v c="$wcur_b" 'BEGIN { if (p == "nan" || c == "nan") print "nan"; else printf "%.0f", p - c }')
	pct=$(awk -v s="$saved" -v c="$cold" 'BEGIN { if (s == "nan" || c <= 0) print "n/a"; else printf "%.0f%%", 100 * s / c }')
	slow=$(ratio "$(get b_t)" "$(get a_t)")
	[ "$(get capped_b)" -gt 0 ] && [ "$slow" != n/a ] && slow=">=$slow"
	r=$(get b_ratio)
	floor=$(awk -v base="$(get a_base)" -v d="$data" -v r="$r" 'BEGIN {
		if (d == "nan" || r == "nan" || r <= 0) print "nan"; else printf "%.0f", base + 0.2 * d + 0.8 * d / r }')
	verdict=$(awk -v p="$pct" -v s="${slow#>=}" -v gp="$GOAL_SAVED_PCT" -v gs="$GOAL_SLOWDOWN" \
			-v capped="$(get capped_b)" -v stalled="$(get stalled_b)" -v hung="$(get hung_b)" 'BEGIN {
		if (hung) { print "not met ((b) hung)"; exit }
		if (stalled) { print "not met ((b) stalls in its build)"; exit }
		if (p == "n/a" || s == "n/a") { print "not measured"; exit }
		ps = p + 0 >= gp; ss = !capped && s + 0 <= gs
		print ps && ss ? "met" : ps ? "not met (slowdown)" : ss ? "not met (bytes saved)" : "not met (both)" }')
	eval "F_$w=\$F cold_$w=\$cold saved_$w=\$saved pct_$w=\$pct slow_$w=\$slow floor_$w=\$floor verdict_$w=\"\$verdict\""
done

# row LABEL PY SQL
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }
# cell WORKLOAD COMMAND...: COMMAND run with F set to WORKLOAD's figures.
cell() {
	w=$1; shift
	eval "F=\$F_$w"
	"$@"
}
range_s() { printf '%s (%s–%s)' "$(num "$(get "$1")" %.2f)" "$(num "$(get "$1_lo")" %.2f)" "$(num "$(get "$1_hi")" %.2f)"; }
range_mib() { printf '%s (%s–%s)' "$(mib "$(get "$1")")" "$(mib "$(get "$1_lo")")" "$(mib "$(get "$1_hi")")"; }
pair() { printf '%s (%s–%s)' "$(num "$(get pair)" %.2f)" "$(num "$(get pair_lo)" %.2f)" "$(num "$(get pair_hi)" %.2f)"; }
halves() { printf '%s, %s' "$(ratio "$(get b_h1)" "$(get a_h1)")" "$(ratio "$(get b_h2)" "$(get a_h2)")"; }
# main_thread CONFIG: its main thread's working phase, medians.
main_thread() {
	printf '%s / %s / %s; switches: %s' "$(num "$(get "$1_mcpu")" %.2f)" "$(num "$(get "$1_mrq")" %.2f)" \
		"$(num "$(get "$1_moff")" %.2f)" "$(num "$(get "$1_mvol")" %.0f)"
}
# main_extra: (b)'s medians less (a)'s, where the slowdown went.
main_extra() {
	awk -v ac="$(get a_mcpu)" -v aq="$(get a_mrq)" -v ao="$(get a_moff)" \
	    -v bc="$(get b_mcpu)" -v bq="$(get b_mrq)" -v bo="$(get b_moff)" 'BEGIN {
		if (ac == "nan" || bc == "nan") { print "n/a"; exit }
		printf "%+.2f / %+.2f / %+.2f\n", bc - ac, bq - aq, bo - ao }'
}
refaults() { printf '%s (%s MiB; %s within the working set)' "$(num "$(get b_in)" %.0f)" "$(mib "$(awk -v n="$(get b_in)" 'BEGIN { print n == "nan" ? "nan" : n * 4096 }')")" "$(num "$(get b_inhot)" %.0f)"; }
runs_ok() {
	printf '%s of %s (a), %s of %s (b)' "$(get n_a)" "$ROUNDS" "$(get n_b)" "$ROUNDS"
	[ "$(get capped_b)" = 0 ] || printf '; %s (b) working phases stopped at %s s' "$(get capped_b)" "$WORK_CAP"
	[ "$(get stalled_b)" = 0 ] || printf '; %s (b) builds stopped at %s s' "$(get stalled_b)" "$BUILD_CAP"
	[ "$(get hung_b)" = 0 ] || printf '; %s (b) **hung**, %s not run after it' "$(get hung_b)" "$(get skipped_b)"
	[ "$(get failed_a)$(get failed_b)" = 00 ] || printf '; failed: %s (a), %s (b)' "$(get failed_a)" "$(get failed_b)"
}

SUMMARY="spill-workload: python3 dict: $pct_py of cold bytes saved, slowdown $slow_py: goal $verdict_py; sqlite3 cache: $pct_sql saved, slowdown $slow_sql: goal $verdict_sql"

{
	echo "# Spilling on real programs with cold data"
	echo
	echo "$SUMMARY."
	echo
	echo "Goal: under memory.high at half the peak it reaches without a limit,"
	echo "a program whose data is 80% cold saves at least $GOAL_SAVED_PCT% of the cold bytes"
	echo "at most $(awk -v g=$GOAL_SLOWDOWN 'BEGIN { printf "%.0f", (g - 1) * 100 }')% slower in its working phase."
	echo
	echo "Machine: $machine; a shared VM, so times are medians of $ROUNDS rounds"
	echo "that interleave the two configurations (the order alternates round by"
	echo "round; round 1 runs (a) first, since (b)'s limit comes from it).  The"
	echo "bench took $ELAPSED s."
	echo
	echo "- (a) \`CGMALLOC_CONF=spill=0\`: preloaded, accounted, no limit."
	echo "- (b) \`CGMALLOC_CONF=spill=1,high=H${SPILL_EXTRA:+,$SPILL_EXTRA}\`: H = half the memory.peak of (a) in"
	echo "  round 1 ($(mib "$HIGH_py") MiB for python3, $(mib "$HIGH_sql") MiB for sqlite3)."
	echo
	echo "Each run has a group of its own (\`scope=/NAME\`, \`hierarchy=\` a"
	echo "temporary file)."
	echo
	echo "## Figures (MiB unless said; medians, least–greatest run in brackets)"
	echo
	row "" "python3 dict" "sqlite3 cache"
	row "---" "---" "---"
	row "data: memory.current after the build − before it, (a)" "$(cell py mib "$(cell py get a_data)")" "$(cell sql mib "$(cell sql get a_data)")"
	row "cold bytes: 80% of the data" "$(mib "$cold_py")" "$(mib "$cold_sql")"
	row "(a) memory.peak, no limit" "$(cell py range_mib a_peak)" "$(cell sql range_mib a_peak)"
	row "(b) memory.high" "$(mib "$HIGH_py")" "$(mib "$HIGH_sql")"
	row "(b) memory.current as the build ends (the working phase starts from it)" "$(cell py range_mib b_endbuild)" "$(cell sql range_mib b_endbuild)"
	row "(a) memory.current in the working phase" "$(cell py range_mib a_wcur)" "$(cell sql range_mib a_wcur)"
	row "(b) memory.current in the working phase" "$(cell py range_mib b_wcur)" "$(cell sql range_mib b_wcur)"
	row "**saved**: (a) peak − (b) working phase" "$(mib "$saved_py")" "$(mib "$saved_sql")"
	row "**% of the cold bytes saved** (goal ≥ $GOAL_SAVED_PCT%)" "$pct_py" "$pct_sql"
	row "(a) build, s (not part of the goal: what reaching the working phase cost)" "$(cell py range_s a_build)" "$(cell sql range_s a_build)"
	row "(b) build, s" "$(cell py range_s b_build)" "$(cell sql range_s b_build)"
	row "(a) working phase, s" "$(cell py range_s a_t)" "$(cell sql range_s a_t)"
	row "(b) working phase, s" "$(cell py range_s b_t)" "$(cell sql range_s b_t)"
	row "**slowdown** (b) / (a) (goal ≤ $GOAL_SLOWDOWN)" "$slow_py" "$slow_sql"
	row "slowdown of each round, (b) / (a) run back to back: median (least–greatest)" "$(cell py pair)" "$(cell sql pair)"
	row "slowdown of the first half, of the second half" "$(cell py halves)" "$(cell sql halves)"
	row "(a) main thread in the working phase, s: on a CPU / waiting for one / off CPU; its voluntary switches" "$(cell py main_thread a)" "$(cell sql main_thread a)"
	row "(b) the same" "$(cell py main_thread b)" "$(cell sql main_thread b)"
	row "(b) − (a), s: on a CPU / waiting for one / off CPU" "$(cell py main_extra)" "$(cell sql main_extra)"
	row "(b) refaults in the working phase (zswpin)" "$(cell py refaults)" "$(cell sql refaults)"
	row "(b) pages spilled in the working phase (zswpout)" "$(cell py num "$(cell py get b_out)" %.0f)" "$(cell sql num "$(cell sql get b_out)" %.0f)"
	row "(b) of them, spilled by the program's own threads (pgsteal_direct; the rest by the library's)" "$(cell py num "$(cell py get b_direct)" %.0f)" "$(cell sql num "$(cell sql get b_direct)" %.0f)"
	row "(b) throttled in the working phase, s (throttle_usec)" "$(cell py range_s b_thr)" "$(cell sql range_s b_thr)"
	row "(b) pages scanned by reclaim in the working phase (pgscan)" "$(cell py num "$(cell py get b_scan)" %.0f)" "$(cell sql num "$(cell sql get b_scan)" %.0f)"
	row "(b) throttled in the build, s" "$(cell py range_s b_thrbuild)" "$(cell sql range_s b_thrbuild)"
	row "(b) memory.current where a build was stopped at $BUILD_CAP s" "$(cell py range_mib b_curbuild)" "$(cell sql range_mib b_curbuild)"
	row "(b) pages scanned by reclaim in the build" "$(cell py num "$(cell py get b_scanbuild)" %.0f)" "$(cell sql num "$(cell sql get b_scanbuild)" %.0f)"
	row "(b) memory.peak" "$(cell py range_mib b_peak)" "$(cell sql range_mib b_peak)"
	row "(b) compression: zswapped / zswap (lz4, idle pages zstd${SPILL_EXTRA:+; $SPILL_EXTRA})" "$(cell py num "$(cell py get b_ratio)" %.2f)" "$(cell sql num "$(cell sql get b_ratio)" %.2f)"
	row "lowest memory.current spilling can reach: before the build + hot 20% + cold / compression" "$(mib "$floor_py")" "$(mib "$floor_sql")"
	row "runs complete" "$(cell py runs_ok)" "$(cell sql runs_ok)"
	row "records checked after each run" \
		"$([ "$(cell py get checks)" = 0 ] && echo "all verified" || echo "**CORRUPT** in some run")" \
		"$([ "$(cell sql get checks)" = 1 ] && echo "one checksum in every run" || echo "**checksums differ**")"
	row "**goal**" "$verdict_py" "$verdict_sql"
	echo
	echo "A (b) working phase that passes $WORK_CAP s is measured up to there: its time"
	echo "counts as $WORK_CAP s (the slowdown is then a lower bound) and its counters are"
	echo "those of its first $WORK_CAP s.  A (b) build that passes $BUILD_CAP s is measured"
	echo "up to there (the build columns) and has no working phase figures.  Either"
	echo "way memory.high is then lifted, so that the run finishes and its records"
	echo "are checked."
	echo
	echo "## Every run"
	echo
	echo "| run | status | working phase, s (halves) | main thread in it, s: CPU / wait / off (switches) | sqlite3 statements, s | memory.current in it | memory.peak | refaults in it | throttled in it, s | pages scanned: build, working phase | check |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	awk '{
		split($6, B, ","); split($7, D, ",")
		done = $7 != "-"
		m = "-"
		if ($17 != "" && $17 != "-" && $4 == "ok") {
			split($17, M, ",")
			m = sprintf("%.2f / %.2f / %.2f (%d)", M[1], M[2], M[3], M[4])
		}
		printf "| %s %s round %s | %s | %s (%s, %s) | %s | %s | %s | %s | %s | %s | %s, %s | %s |\n", $1 == "py" ? "python3" : "sqlite3",
		       $2, $3, $4, $10, $11, $12, m, $15, $8 == "-" ? "-" : sprintf("%.0f", $8 / 1048576),
		       done ? sprintf("%.0f", D[2] / 1048576) : "-", done ? D[4] - B[4] : "-",
		       done ? sprintf("%.2f", (D[7] - B[7]) / 1e6) : "-", $6 == "-" ? "-" : B[9], done ? D[9] - B[9] : "-",
		       (length($13) > 16 ? substr($13, 1, 16) "…" : $13)
	}' "$RAW/runs"
	for f in "$RAW"/stuck.*; do
		[ -f "$f" ] || continue
		echo
		n=${f##*/stuck.}
		how=$(awk -v w="${n%%-*}" -v c="$(echo "$n" | cut -d- -f2)" -v r="${n##*-}" \
			'$1 == w && $2 == c && $3 == r { print $4 }' "$RAW/runs")
		echo "Run $n, $how: $LIFT_TIMEOUT s after memory.high was lifted it had not reached"
		case $how in
		hung-*) echo "its next step, and its spill counters stood still while its main thread"
			echo "kept faulting into the userfaultfd.  Its threads then:" ;;
		*) echo "its next step, though it was not caught in a fault.  Its threads then:" ;;
		esac
		echo
		echo '```'
		cat "$f"
		echo '```'
	done
	echo
	echo "## The workloads"
	echo
	echo "- **python3 dict** (\`bench/spill_dict.py $PY_ENTRIES $PY_OPS\`, \`$PY\`): a"
	echo "  dict of $PY_ENTRIES int keys to strings of about 200 characters (serial number,"
	echo "  words, 32 random hex digits); the working phase does $PY_OPS lookups over the"
	echo "  keys of the first fifth built, one in four replacing the value with an"
	echo "  equal new string, timed by the program (\`perf_counter\`).  Afterwards every"
	echo "  record is read back and its crc32 compared with the build's."
	echo "- **sqlite3 cache** (\`bench/spill_sqlite.sql\`, \`$SQLITE\` $("$SQLITE" -version | cut -d' ' -f1)): a database file"
	echo "  whose $SQL_ROWS rows of about 200 bytes (the same kind of record) are all in a"
	echo "  page cache of 2 GB (\`cache_size\`, exclusive locking); the working phase"
	echo "  does $SQL_OPS lookups by rowid over the first fifth of the rows and updates"
	echo "  one in four of them, timed by the shell's \`.timer\` (sum of the"
	echo "  statements' real time).  Afterwards a sha3 of every row is compared"
	echo "  across runs.  The build inserts all rows in one transaction, whose"
	echo "  commit writes every page of the cache to the file: under (b) that"
	echo "  write reads back what was spilled, through write(2), which allocates"
	echo "  nothing, so the build can end far above memory.high (README: pages"
	echo "  that come back; \`spill_hold_high=1\` holds the limit there), and the"
	echo "  working phase then starts by spilling that excess again.  The counter"
	echo "  each update increments starts at 1000, so that an update keeps the"
	echo "  record's size (see the file's header: from 0, one statement of the"
	echo "  working phase read the whole cache)."
	echo
	echo "## How it is measured"
	echo
	echo "- The workload stops at each step (before the build, after it, after the"
	echo "  working phase) until the driver has read \`cgmctl cat GROUP"
	echo "  memory.current memory.peak memory.stat\`, and during the working phase"
	echo "  the driver reads them every $SAMPLE_S s; \"memory.current in the working"
	echo "  phase\" is the median of those readings and the one at its end."
	echo "- Bytes saved are the peak without a limit minus memory.current in the"
	echo "  working phase with spill=1; memory.current includes the compressed pool"
	echo "  (zswap), as the kernel's does."
	echo "- Refaults, spills and throttling in the working phase are the memory.stat"
	echo "  counters at its end minus those at its start.  A process publishes them"
	echo "  at its allocation slow paths only, so before each of these two readings"
	echo "  in (b) the driver writes a 4K \`memory.reclaim\`, which the idle process's"
	echo "  handler thread answers (spilling a chunk) and publishes."
	echo "- The main thread's working phase: its time on a CPU and waiting for one"
	echo "  (\`/proc/PID/task/PID/schedstat\`) and its voluntary switches"
	echo "  (\`voluntary_ctxt_switches\`), read before the driver releases the phase"
	echo "  and after it printed its end (it waits on its input meanwhile, off any"
	echo "  CPU, and does nothing); off CPU is the phase's time as the program"
	echo "  timed it less the other two: waits for faults the handler thread serves,"
	echo "  and for locks."
	echo "- \"Lowest memory.current spilling can reach\": with the hot fifth resident"
	echo "  and the cold rest compressed at the measured ratio; where it is above"
	echo "  memory.high, no reclaim can bring the group under its limit and the"
	echo "  program is throttled or spills its working set."
	echo "- Raw figures: \`$RAW/\` (runs, samples, each run's output and stderr)."
	echo
	echo "## Command"
	echo
	echo '```'
	if [ -n "${SPILL_EXTRA:-}${SPILL_BUILD_CAP:-}${SPILL_OUT:-}" ]; then
		echo "${SPILL_EXTRA:+SPILL_EXTRA=$SPILL_EXTRA }${SPILL_BUILD_CAP:+SPILL_BUILD_CAP=$SPILL_BUILD_CAP }${SPILL_OUT:+SPILL_OUT=bench/$OUT_NAME }bench/spill_workload.sh $B $ROUNDS"
	else
		echo "make bench-spill-workload B=$B    # runs what follows"
		echo "bench/spill_workload.sh $B $ROUNDS"
	fi
	echo '```'
} >"$OUT"
echo "$SUMMARY"
echo "bench-spill-workload: results in $OUT"
