#!/bin/sh
# The fidelity table: each workload under `cgmctl compare` (a kernel memory
# cgroup and a cgmalloc group around the same preloaded process, sampled
# every 100 ms), cgmalloc's memory.current against the kernel's anon.
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

# measure NAME CMD...: one row.  "after free" is the last sample's ratio
# (the workloads that free everything hold a moment at the end).
measure() {
	name=$1
	shift
	set +e
	"$CGMCTL" --hierarchy "$T/h" compare -i 100 -o "$T/out" -- "$@" >"$T/rep" 2>"$T/err"
	st=$?
	set -e
	if grep -q "no writable kernel memory cgroup" "$T/err"; then
		echo "fidelity: skipped: $(cat "$T/err")" >&2
		exit 77
	fi
	awk -v name="$name" -v st="$st" -v tsv="$T/out/samples.tsv" '
		$1 == "kernel_anon" { k = $2 }
		$1 == "cgm_current" { c = $2 }
		$1 == "ratio_at_peak" { rp = $2 }
		$1 == "ratio_median" { rm = $2 }
		END {
			last = ""
			while ((getline line < tsv) > 0) last = line
			split(last, f, "\t")
			end = (f[2] > 0) ? sprintf("%.0f / %.0f", f[4] / 1048576, f[2] / 1048576) : "-"
			printf "| %s | %.0f | %.0f | %s | %s | %s |%s\n", name, k, c, rp, rm, end,
			       st == 0 ? "" : " (exit " st ")"
		}' "$T/rep"
}

echo "| workload | kernel anon peak (MiB) | cgmalloc memory.current peak (MiB) | ratio at peak | median ratio over time | at the end: cgmalloc / kernel (MiB) |"
echo "|---|---|---|---|---|---|"
measure "python3 dict, 3M entries (pymalloc arenas from mmap)" "$PY" -c '
import time
d = {i: str(i) * 3 for i in range(3000000)}
time.sleep(0.5)'
measure "own mmap of 256 MiB, touched" "$FID" mmap 256M hold=500
measure "malloc(512 MiB), 10% touched" "$FID" bigtouch 512M 10 hold=500
measure "sort of a 30 MB file" sort -o "$T/sorted" "$T/lines"
measure "allocator benchmark: 494 MiB malloc'd, 58 MiB touched" "$FID" mixed 494M 58M hold=500
measure "free-all (200 MiB), then memory.reclaim" "$FID" freeall 200M hold=800 reclaim
measure "C small objects, 200 MiB" "$FID" small 200M hold=500
measure "C, 8 threads of small objects, 200 MiB" "$FID" threads 200M 8 hold=500
measure "C++ strings/maps/threads/aligned new" "$CXX_WORKLOAD"
measure "sqlite3, 1M rows in memory" sqlite3 :memory: "create table t(a, b);
with recursive c(x) as (select 1 union all select x + 1 from c limit 1000000)
insert into t select x, hex(randomblob(40)) from c; select count(*) from t;"
