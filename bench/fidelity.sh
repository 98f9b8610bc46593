#!/bin/sh
# The fidelity table: each workload under `cgmctl compare` (a kernel memory
# cgroup and a cgmalloc group around the same preloaded process, sampled
# every 100 ms, or 5 ms for a short one), cgmalloc's memory.current
# against the kernel's anon.
# Usage: bench/fidelity.sh BUILD_DIR  (make bench-fidelity)
# Prints a markdown table; exits 77 where no kernel memory cgroup is writable.
set -eu
B=${1:?usage: fidelity.sh BUILD_DIR}
CGMCTL=$B/cgmctl
FID=$B/tests/fidelity/fid_prog
CXX_WORKLOAD=$B/tests/preload/cxx_workload
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/cgm-fidelity.XXXXXX")
trap 'rm -rf "$T"' EXIT
export LC_ALL=C

# A 30 MB file of random lines for sort.
"$PY" -c '
import random
r = random.Random(1)
with open("'"$T"'/lines", "w") as f:
    n = 0
    while n < 30 << 20:
        s = "%x %s\n" % (r.getrandbits(64), "x" * r.randrange(10, 60))
        f.write(s)
        n += len(s)
'

# measure NAME CMD...: one row.  The last column is for workloads that
# end by holding still (free-all): the median, over the last third of the
# samples, of each side, when the run holds its end state that long.
measure() {
	name=$1
	shift
	set +e
	"$CGMCTL" --hierarchy "$T/h" compare -i "${IV:-100}" -o "$T/out" -- "$@" >"$T/rep" 2>"$T/err"
	st=$?
	set -e
	if grep -q "no writable kernel memory cgroup" "$T/err"; then
		echo "fidelity: skipped: $(cat "$T/err")" >&2
		exit 77
	fi
	awk -v name="$name" -v st="$st" -v tsv="$T/out/samples.tsv" -v tail_med="$TAIL" '
		function median(a, n,   i, j, t) {
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return n ? a[int((n + 1) / 2)] : 0
		}
		$1 == "kernel_anon" { k = $2 }
		$1 == "cgm_current" { c = $2 }
		$1 == "ratio_at_peak" { rp = $2 }
		$1 == "ratio_median" { rm = $2 }
		END {
			n = 0
			getline line < tsv
			while ((getline line < tsv) > 0) { n++; split(line, f, "\t"); kr[n] = f[2]; cr[n] = f[4] }
			end = "-"
			if (tail_med && n >= 6) {
				m = 0
				for (i = n - int(n / 3) + 1; i < n; i++) { m++; ka[m] = kr[i]; ca[m] = cr[i] }
				end = sprintf("%.1f / %.1f", median(ca, m) / 1048576, median(ka, m) / 1048576)
			}
			printf "| %s | %.0f | %.0f | %s | %s | %s |%s\n", name, k, c, rp, rm, end,
			       st == 0 ? "" : " (exit " st ")"
		}' "$T/rep"
	TAIL=
	IV=
}
TAIL=
IV=

echo "| workload | kernel anon peak (MiB) | cgmalloc memory.current peak (MiB) | ratio at peak | median ratio over time | end state: cgmalloc / kernel (MiB) |"
echo "|---|---|---|---|---|---|"
measure "python3 dict, 3M entries (pymalloc arenas from mmap)" "$PY" -c '
import time
d = {i: str(i) * 3 for i in range(3000000)}
time.sleep(0.5)'
measure "own mmap of 256 MiB, touched" "$FID" mmap 256M hold=500
measure "malloc(512 MiB), 10% touched" "$FID" bigtouch 512M 10 hold=500
measure "sort of a 30 MB file" sort -o "$T/sorted" "$T/lines"
measure "allocator benchmark: 494 MiB malloc'd, 58 MiB touched" "$FID" mixed 494M 58M hold=500
TAIL=1
measure "free-all (200 MiB), no reclaim" "$FID" freeall 200M hold=1500
TAIL=1
measure "free-all (200 MiB), then memory.reclaim" "$FID" freeall 200M hold=1500 reclaim
measure "C small objects, 200 MiB" "$FID" small 200M hold=500
measure "C, 8 threads of small objects, 200 MiB" "$FID" threads 200M 8 hold=500
# (short: sampled every 5 ms)
IV=5
measure "C++ strings/maps/threads/aligned new" "$CXX_WORKLOAD"
measure "sqlite3, 1M rows in memory" sqlite3 :memory: "create table t(a, b);
with recursive c(x) as (select 1 union all select x + 1 from c limit 1000000)
insert into t select x, hex(randomblob(40)) from c; select count(*) from t;"
