#!/bin/sh
# mlockall(MCL_CURRENT | MCL_FUTURE) in a preloaded program: its memory is
# locked, the hierarchy file is not -- 34.6 MB mapped whole, of which a
# process writes a few pages -- and accounting goes on.  Before, all of
# the file was locked in every such process (python3: 81 MB locked,
# against 46 MB under mimalloc alone).
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"

MLOCK_PY='import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
print("mlockall", libc.mlockall(3), ctypes.get_errno(), flush=True)
def locked(path):
    kb, cur = 0, ""
    for l in open("/proc/self/smaps"):
        f = l.split()
        if f and f[0].endswith(":"):
            if f[0] == "Locked:" and cur == path:
                kb += int(f[1])
        else:
            cur = f[-1] if len(f) >= 6 else ""
    return kb
data = [bytes([i % 251]) * 4000 for i in range(12000)]
print("hierarchy_locked_kb", locked(sys.argv[1]), flush=True)
print("data_locked_kb", locked(""), flush=True)'

within 30 pre "group=/mlock,stats=exit" "$PY" -c "$MLOCK_PY" "$H"
[ "$ST" = 0 ] || fail "python3 calling mlockall: exit status $ST: $(tail -2 "$T/err")"
grep -qx "mlockall 0 0" "$T/out" || fail "mlockall failed: $(head -1 "$T/out")"
hier=$(num hierarchy_locked_kb)
anon=$(num data_locked_kb)
peak=$(awk 'p { print; exit } $0 == "== memory.peak" { p = 1 }' "$T/err")
[ -n "$hier" ] && [ "$hier" -le 1024 ] ||
	fail "mlockall locked ${hier:-?} KiB of the hierarchy file (a process writes a few pages of it)"
[ "${anon:-0}" -ge 40000 ] || fail "mlockall locked ${anon:-?} KiB of anonymous memory, 47 MB expected"
[ "${peak:-0}" -ge $((40 * 1024 * 1024)) ] ||
	fail "memory.peak ${peak:-?} after 47 MB allocated with its memory locked: accounting stopped"
echo "$TEST_NAME: mlockall: ${hier} KiB of the hierarchy file locked, ${anon} KiB of anonymous memory, memory.peak $((peak / 1024 / 1024)) MiB"
CHECKS=$((CHECKS + 1))
echo "$TEST_NAME: $CHECKS checks passed"
