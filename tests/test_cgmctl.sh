#!/bin/sh
# cgmctl: every subcommand with good and bad arguments, on a private
# hierarchy file; `run` of a preloaded python3 that must hit memory.max;
# corrupt, truncated and foreign hierarchy files; JSON that parses; the
# README's key table.  Running processes: tests/cgmctl/test_procs.sh.
# Run by `make check-cgmctl`, which sets CGMCTL and CGM_LIB.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cgmctl/lib.sh"

# ---- the command line ----
run "$CGMCTL"
[ "$ST" = 2 ] && grep -q "^usage: cgmctl" "$T/err" || fail "no arguments: status $ST, expected usage and 2"
ok "$CGMCTL" help
grep -q "^usage: cgmctl" "$T/out" || fail "help prints no usage"
ok "$CGMCTL" --help
bad 2 "unknown command 'frob'" "$CGMCTL" frob
bad 2 "unknown option '-x'" ctl ls -x
bad 2 "bad option '--nope'" "$CGMCTL" --nope ls
bad 2 "needs a value" "$CGMCTL" ls --hierarchy
bad 2 "bad option '--markdown'" ctl ls --markdown
bad 2 "topics are: conf" "$CGMCTL" help frob

# ---- read commands do not create a hierarchy ----
bad 1 "ls: no hierarchy file $H" ctl ls
bad 1 "cat: no hierarchy file" ctl cat / memory.current
bad 1 "rmdir: no hierarchy file" ctl rmdir /a
bad 1 "move: no hierarchy file" ctl move 1 /
[ ! -e "$H" ] || fail "a read command created the hierarchy file"

# ---- mkdir ----
ok ctl mkdir /a/b
[ "$(stat -c %a "$H")" = 600 ] || fail "hierarchy file mode $(stat -c %a "$H"), expected 600"
ok ctl mkdir /a/c
bad 1 "mkdir: /a/b exists" ctl mkdir /a/b
for p in a /a/../b /a//b /a/ "/a b" /a/. "/$(printf '%064d' 0)"; do
	bad 2 "bad group path" ctl mkdir "$p"
done
bad 2 "expected 1 argument \(usage: cgmctl (mk|rm)dir GROUP\)" ctl mkdir
bad 2 "expected 1 argument \(usage: cgmctl (mk|rm)dir GROUP\)" ctl mkdir /x /y

# ---- ls ----
ok ctl ls
[ "$(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')" = "/ /a " ] ||
	fail "ls: groups $(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' '), expected / /a"
ok ctl ls -r
[ "$(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')" = "/ /a /a/b /a/c " ] ||
	fail "ls -r: groups $(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')"
ok ctl ls /a
[ "$(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')" = "/a /a/b /a/c " ] || fail "ls /a"
bad 1 "ls: no group /nope" ctl ls /nope
bad 2 "expected at most 1 argument" ctl ls / /a
bad 2 "bad group path" ctl ls nope
ok ctl --json ls -r
json_ok
"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
paths = [g["path"] for g in d["groups"]]
assert paths == ["/", "/a", "/a/b", "/a/c"], paths
assert d["groups"][1]["max"] == "max" and d["groups"][1]["children"] == 2, d
' "$T/out" || fail "ls --json: not the groups expected"
ok ctl ls -r --json /a
json_ok

# ---- cat ----
ok ctl cat / memory.current
grep -qE '^[0-9]+$' "$T/out" || fail "memory.current is not a number"
ok ctl cat /a memory.max
out_is max
ok ctl cat /a/b memory.stat
[ -n "$(field anon)" ] && [ -n "$(field allocs)" ] || fail "memory.stat has no anon/allocs"
ok ctl cat /a memory.events
[ "$(cut -d' ' -f1 "$T/out" | tr '\n' ' ')" = "low high max oom oom_kill oom_group_kill sock_throttled " ] ||
	fail "memory.events keys: $(cut -d' ' -f1 "$T/out" | tr '\n' ' ')"
for f in memory.peak memory.high memory.low memory.min memory.stat.local \
	memory.events.local memory.oom.group cgroup.procs; do
	ok ctl cat /a "$f"
	ok ctl --json cat /a "$f"
	json_ok
done
ok ctl cat --json / memory.stat
"$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))["value"]
assert isinstance(v["anon"], int) and "alloc_size_le_8" in v, v
' "$T/out" || fail "cat --json memory.stat: no anon"
bad 1 "no file 'memory.nope'" ctl cat /a memory.nope
bad 1 "cat: no group /nope" ctl cat /nope memory.max
bad 2 "expected at least 1 argument \(usage: cgmctl cat GROUP \[FILE\]\.\.\.\)" ctl cat
bad 1 "cat: no file 'extra'" ctl cat /a memory.max extra
bad 2 "bad group path" ctl cat a memory.max

# ---- set: good values apply, bad ones change nothing ----
ok ctl set /a memory.max 100M
ok ctl cat /a memory.max
out_is 104857600
# Sizes are read as the kernel's memory.max reads them (strstrip(), then
# "max" or memparse() to the end); refused where it refuses them, and ""
# and a bare suffix, which it would read as 0.
nl='
'
tab=$(printf '\t')
for v in abc -5 -1 +5 12Q "" " " "$nl" M k "1M 2M" "1 G" 1Gx 1MB 1KK 1e5 1.5G 0x 0xg 08 0128 \
	MAX max1 "m ax"; do
	bad 1 "set: /a memory.max: bad value" ctl set /a memory.max "$v"
done
ok ctl cat /a memory.max
out_is 104857600
# VALUE:READ-BACK, in whole pages; past 2^63 bytes (and past 64 bits) it is max.
for vw in 0x100000:1048576 0X100000:1048576 " 1G :1073741824" "${tab}2M$nl:2097152" \
	1g:1073741824 2048k:2097152 1t:1099511627776 1P:1125899906842624 \
	1e:1152921504606846976 7E:8070450532247928832 010000:4096 0x1eK:28672 \
	0x1G:1073741824 "max$nl:max" " max :max" 8E:max 16E:max 99999999999T:max \
	18446744073709551615:max 99999999999999999999:max 0xffffffffffffffffff:max; do
	ok ctl set /a memory.max 100M
	ok ctl set /a memory.max "${vw%:*}"
	ok ctl cat /a memory.max
	[ "$(cat "$T/out")" = "${vw##*:}" ] ||
		fail "set memory.max '${vw%:*}': reads $(cat "$T/out"), expected ${vw##*:}"
done
ok ctl set /a memory.max max
ok ctl cat /a memory.max
out_is max
# memory.reclaim: the size is memparse() at the start, then swappiness=N.
# A group with no process gives nothing back, so the EAGAIN says what was
# asked; a number past 64 bits asks for all there is.
for v in "" " " max M -1 +1 "1 G" 1Gx "1G x" "1G swappiness=201" "1G swappiness=" 0x 08 abc; do
	bad 1 "set: /a memory.reclaim: bad value" ctl set /a memory.reclaim "$v"
done
ok ctl set /a memory.reclaim 0
for vw in 1G:1073741824 " 0x100000 :1048576" 010000:4096 1e:1152921504606846976 \
	"1G swappiness=10:1073741824" "1G${tab}swappiness=0:1073741824" \
	"1Gswappiness=200:1073741824" "4K$nl:4096" 16E:18446744073709551614 \
	99999999999999999999:18446744073709551614; do
	bad 1 "set: /a memory.reclaim: reclaimed 0 of the ${vw##*:} asked" \
		ctl set /a memory.reclaim "${vw%:*}"
done
ok ctl set /a/b memory.high 1G
ok ctl cat /a/b memory.high
out_is 1073741824
ok ctl set /a memory.low 4K
ok ctl set /a memory.min 0
bad 1 "bad value '2' \(expected 0 or 1\)" ctl set /a memory.oom.group 2
ok ctl set /a memory.oom.group 1
ok ctl cat /a memory.oom.group
out_is 1
bad 1 "memory.current is read-only" ctl set /a memory.current 1
bad 1 "memory.stat is read-only" ctl set /a memory.stat 1
bad 1 "no file 'memory.swap.events'" ctl set /a memory.swap.events 1
ok ctl set /a memory.swap.max 1G
run ctl cat /a memory.swap.max
grep -qx 1073741824 "$T/out" || fail "memory.swap.max reads $(cat "$T/out")"
bad 1 "set: no group /nope" ctl set /nope memory.max 1M
bad 2 "expected 3 arguments \(usage: cgmctl set GROUP FILE VALUE\)" ctl set /a memory.max
bad 2 "bad group path" ctl set a memory.max 1M

# ---- rmdir ----
bad 1 "rmdir: /a: not empty \(2 child groups" ctl rmdir /a
bad 1 "root group cannot be removed" ctl rmdir /
ok ctl rmdir /a/c
bad 1 "rmdir: no group /a/c" ctl rmdir /a/c
bad 2 "bad group path" ctl rmdir a/b
bad 2 "expected 1 argument \(usage: cgmctl (mk|rm)dir GROUP\)" ctl rmdir

# ---- move: bad arguments ----
bad 1 "no process 999999999 is attached" ctl move 999999999 /a
bad 1 "bad value 'abc' \(expected a pid\)" ctl move abc /a
bad 1 "bad value '-3' \(expected a pid\)" ctl move -- -3 /a
bad 1 "move: no group /nope" ctl move 1 /nope
bad 2 "expected 2 arguments \(usage: cgmctl move PID GROUP\)" ctl move 1
bad 2 "bad group path" ctl move 1 nope

# ---- run: a preloaded python3 under memory.max ----
# (At most 512 MiB even if the limit did not hold.)  The blocks are
# written: an untouched one costs nothing, as in the kernel.
ALLOC='import sys
l = []
try:
    for i in range(512):
        l.append(b"x" * (1 << 20))
    print("no MemoryError")
except MemoryError:
    print("MemoryError after", len(l), "MiB")'
run ctl run -g /py -s memory.max=64M -s memory.oom.group=0 -- "$PY" -c "$ALLOC"
[ "$ST" = 0 ] || fail "run python3: exit $ST"
grep -q "^MemoryError after" "$T/out" || fail "run -s memory.max=64M: python3 did not hit the limit"
n=$(sed 's/MemoryError after \([0-9]*\).*/\1/' "$T/out")
[ "$n" -ge 20 ] && [ "$n" -le 64 ] || fail "MemoryError after $n MiB under a 64M limit"
grep -v '^cgmalloc: ' "$T/err" | grep -q . && fail "run python3: stderr"
CHECKS=$((CHECKS + 1))
ok ctl cat /py memory.events
[ "$(field max)" -ge 1 ] && [ "$(field oom)" -ge 1 ] ||
	fail "memory.events after the MemoryError: max $(field max), oom $(field oom)"
ok ctl cat /py memory.max
out_is 67108864
ok ctl cat /py memory.current
[ "$(cat "$T/out")" = 0 ] || fail "/py holds $(cat "$T/out") bytes after its process exited"

# The command's environment: the library, the group, the caller's CGMALLOC_CONF kept.
run env CGMALLOC_CONF=stats=exit "$CGMCTL" --hierarchy "$H" run -g /env -- \
	"$PY" -c 'import os; print(os.environ["LD_PRELOAD"]); print(os.environ["CGMALLOC_CONF"])'
[ "$ST" = 0 ] || fail "run env: exit $ST"
[ "$(head -1 "$T/out")" = "$(realpath "$CGM_LIB")" ] || fail "run: LD_PRELOAD=$(head -1 "$T/out")"
[ "$(sed -n 2p "$T/out")" = "stats=exit,hierarchy=$H,group=/env" ] ||
	fail "run: CGMALLOC_CONF=$(sed -n 2p "$T/out")"
grep -q "^cgmalloc: exit report of pid [0-9]*, group /env$" "$T/err" ||
	fail "run: the command was not accounted in /env (no exit report)"
CHECKS=$((CHECKS + 1))

# Without -g: a scope named after the command's pid (run execs: same pid),
# there while the command runs, gone with its last process.
ctl run -- sh -c 'echo $$ >"$0.new" && mv "$0.new" "$0"; until [ -e "$0.done" ]; do sleep 0.05; done' \
	"$T/scope" 2>"$T/scope.err" &
scope_job=$!
PIDS="$PIDS $scope_job"
wait_for test -s "$T/scope"
scope_pid=$(cat "$T/scope")
ok ctl ls "/run-$scope_pid"
touch "$T/scope.done"
wait "$scope_job" || fail "run sh: exit $?: $(cat "$T/scope.err")"
bad 1 "no group /run-$scope_pid" ctl ls "/run-$scope_pid"

# A bad -s or command changes nothing: no group left behind.
bad 2 "-s memory.max: bad value '5x'" ctl run -g /bad -s memory.max=5x -- true
bad 2 "memory.current is read-only" ctl run -g /bad -s memory.current=1 -- true
bad 2 "joins the group by itself" ctl run -g /bad -s cgroup.procs=1 -- true
bad 2 "expected FILE=VALUE" ctl run -g /bad -s memory.max -- true
bad 2 "no file 'memory.nope'" ctl run -g /bad -s memory.nope=1 -- true
bad 2 "no command" ctl run -g /bad --
bad 2 "bad group path" ctl run -g bad -- true
bad 127 "run: cannot run /nonexistent/prog" ctl run -g /bad -- /nonexistent/prog
bad 1 "no group /bad" ctl ls /bad

# ---- refused hierarchy files: corrupt, truncated, another user's ----
cp "$H" "$T/garbage"
printf 'this is not a hierarchy' | dd of="$T/garbage" conv=notrunc status=none
bad 1 "hierarchy refused: $T/garbage: not a cgmalloc hierarchy \(bad magic\)" \
	"$CGMCTL" --hierarchy "$T/garbage" ls
bad 1 "hierarchy refused: .*bad magic" "$CGMCTL" --hierarchy "$T/garbage" mkdir /x
cp "$H" "$T/geometry"
printf '\377\377' | dd of="$T/geometry" bs=1 seek=24 conv=notrunc status=none
bad 1 "hierarchy refused: .*corrupt header" "$CGMCTL" --hierarchy "$T/geometry" cat / memory.stat
cp "$H" "$T/short"
truncate -s 1M "$T/short"
bad 1 "hierarchy refused: .*truncated" "$CGMCTL" --hierarchy "$T/short" ls
: >"$T/empty"
bad 1 "hierarchy refused: .*truncated" "$CGMCTL" --hierarchy "$T/empty" set / memory.max 1M
mkdir "$T/dir"
bad 1 "hierarchy refused: cannot open $T/dir: Is a directory" "$CGMCTL" --hierarchy "$T/dir" ls
# A preloaded program is refused the same file and runs on without accounting.
run env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$T/garbage" sh -c 'echo alive'
[ "$ST" = 0 ] && [ "$(cat "$T/out")" = alive ] || fail "a program preloaded with a corrupt hierarchy"
grep -q "^cgmalloc: accounting off: hierarchy .*bad magic" "$T/err" ||
	fail "the shim did not say why the corrupt hierarchy was refused"
CHECKS=$((CHECKS + 1))

if [ "$(id -u)" = 0 ]; then
	cp "$H" "$T/nobodys"
	chown 65534 "$T/nobodys"
	bad 1 "hierarchy refused: .*belongs to uid 65534, not to this user \(uid 0\)" \
		"$CGMCTL" --hierarchy "$T/nobodys" ls
	bad 1 "belongs to uid 65534" "$CGMCTL" --hierarchy "$T/nobodys" set / memory.max 1M
	# root's file, readable and writable by all, seen by nobody.
	mkdir "$T/open"
	cp "$H" "$T/open/h"
	chmod 755 "$T" "$T/open"
	chmod 666 "$T/open/h"
	bad 1 "hierarchy refused: .*belongs to uid 0, not to this user \(uid 65534\)" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$CGMCTL" --hierarchy "$T/open/h" ls
	chmod 700 "$T"
else
	echo "test_cgmctl: not root: the other-user cases are skipped"
fi

# ---- help conf and the README ----
ok "$CGMCTL" help conf
for k in verbose strict accounting hierarchy group charge_batch max high oom stats stats_file; do
	grep -q "^$k " "$T/out" || fail "help conf does not list $k"
done
ok "$CGMCTL" help conf --markdown
[ "$(sed -n 1p "$T/out")" = "| Key | Type | Default | Meaning |" ] || fail "help conf --markdown: header"
[ "$(grep -c '^| `' "$T/out")" = "$(($(wc -l <"$T/out") - 2))" ] || fail "help conf --markdown: rows"
# help files: every file of the table, the same list as cat accepts.
ok "$CGMCTL" help files
for f in memory.current memory.peak memory.max memory.high memory.low memory.min memory.stat \
	memory.stat.local memory.events memory.events.local memory.oom.group cgroup.procs; do
	grep -q "^$f " "$T/out" || fail "help files does not list $f"
done
ok "$CGMCTL" help files --markdown
[ "$(sed -n 1p "$T/out")" = "| File | Access | Meaning |" ] || fail "help files --markdown: header"
CGMCTL=$CGMCTL sh "$HERE/cgmctl/readme_tables.sh" "$HERE/../README.md" >/dev/null ||
	fail "README.md's tables are not cgmctl help conf/files --markdown"
CHECKS=$((CHECKS + 1))

echo "test_cgmctl: $CHECKS checks passed"
