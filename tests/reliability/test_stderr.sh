#!/bin/sh
# What the library writes to stderr.  stats=exit when the program has
# closed or reused descriptor 2 by the time the library's exit handler
# runs (it runs last: it was registered first): the report goes to the
# stderr the program started with, through a copy the library keeps, and
# never into a file of the program's that took descriptor 2's number (or
# the copy's).  And a line of the library's to a stderr whose reader has
# gone does not kill the program with SIGPIPE.  The library's other
# lines, after start-up, follow the exit report's rule.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# The descriptors above 2 that are the file descriptor 2 is (for python3 -c).
COPIES_PY='
def stderr_copies():
    start, found = os.fstat(2), []
    for n in map(int, os.listdir("/proc/self/fd")):
        try:
            st = os.fstat(n)
        except OSError:
            continue  # the directory listing'"'"'s own
        if n > 2 and (st.st_dev, st.st_ino) == (start.st_dev, start.st_ino):
            found.append(n)
    return found
'
export COPIES_PY

# sort closes stdout and stderr on its way out (coreutils' close_stdout):
# the report was lost without a word.
printf 'b\na\nc\n' >"$T/in"
within 30 pre "scope=/sort,stats=exit" sort "$T/in"
[ "$ST" = 0 ] || fail "sort: exit status $ST"
[ "$(tr '\n' ' ' <"$T/out")" = "a b c " ] || fail "sort's output: $(cat "$T/out")"
grep -q "^cgmalloc: exit report of pid [0-9]*, group /sort$" "$T/err" &&
	grep -q "^== memory.stat$" "$T/err" || fail "sort: no exit report on stderr"
CHECKS=$((CHECKS + 1))

# Descriptor 2 closed, and the program's next file took its number: the
# report went into that file.
within 30 pre "scope=/reuse,stats=exit" "$PY" -c '
import os, sys
os.close(2)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert fd == 2, fd
os.write(fd, b"data\n")
print("done")' "$T/data"
[ "$ST" = 0 ] || fail "reused descriptor 2: exit status $ST"
out_is "done"
[ "$(cat "$T/data")" = data ] || fail "the program's file holds more than its data: $(head -3 "$T/data")"
grep -q "^cgmalloc: exit report of pid [0-9]*, group /reuse$" "$T/err" ||
	fail "reused descriptor 2: no exit report on the stderr the program started with"
CHECKS=$((CHECKS + 1))

# The program closed every descriptor, the library's copy too, and put a
# file of its own at the copy's number as well as at 2: no report at all,
# and both files hold only what the program wrote.
within 30 pre "scope=/both,stats=exit" "$PY" -c '
import os, sys
exec(os.environ["COPIES_PY"])
copies = stderr_copies()
assert copies, "no copy of stderr"
os.close(2)
for n in copies:
    os.close(n)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert fd == 2, fd
os.write(fd, b"data\n")
for n in copies:
    os.dup2(os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), n)
    os.write(n, b"more\n")
print("done")' "$T/data" "$T/data2"
[ "$ST" = 0 ] || fail "descriptor 2 and the copy both reused: exit status $ST"
out_is "done"
[ "$(cat "$T/data")" = data ] || fail "descriptor 2's file holds more than its data: $(head -3 "$T/data")"
[ "$(sort -u "$T/data2")" = more ] || fail "the copy's file holds more than its data: $(head -3 "$T/data2")"
[ ! -s "$T/err" ] || fail "descriptor 2 and the copy both reused: $(head -3 "$T/err")"
CHECKS=$((CHECKS + 1))

# stderr closed from the start, and the program's first file took number
# 2: nothing of the library's to compare it with, so no report (it went
# into that file).
within 30 sh -c 'exec 2>&-; exec env LD_PRELOAD="$1" CGMALLOC_CONF="hierarchy=$2,scope=/closed,stats=exit" \
	"$3" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert fd == 2, fd
os.write(fd, b\"data\n\")
print(\"done\")" "$4"' sh "$CGM_LIB" "$H" "$PY" "$T/data3"
[ "$ST" = 0 ] || fail "stderr closed from the start: exit status $ST"
out_is "done"
[ "$(cat "$T/data3")" = data ] || fail "stderr closed from the start: the program's file holds more than its data: $(head -3 "$T/data3")"
CHECKS=$((CHECKS + 1))

# Without stats=exit the library keeps no copy of stderr.
within 30 pre "scope=/none" "$PY" -c '
import os
exec(os.environ["COPIES_PY"])
print(len(stderr_copies()))'
out_is 0
CHECKS=$((CHECKS + 1))

# A line the library says late, after the program closed descriptor 2 and
# a data file took its number: memory.max's OOM kill.  The line went into
# the data file; it goes nowhere now (without stats=exit there is no copy
# to send it to).  The same program with its stderr left alone gets the
# line: the kill is said, where it can be.
within 60 env CGM_LIB="$CGM_LIB" H="$H" T="$T" "$PY" -c '
import os, subprocess
lib, h, t = os.environ["CGM_LIB"], os.environ["H"], os.environ["T"]
child = """
import os, sys
if sys.argv[1] == "reuse":
    os.close(2)
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert fd == 2, fd
    os.write(fd, b"data\\n")
chunks = [bytearray(1 << 20) for _ in range(256)]
"""
for mode in ("keep", "reuse"):
    env = dict(os.environ, LD_PRELOAD=lib,
               CGMALLOC_CONF="hierarchy=" + h + ",scope=/late-" + mode + ",max=64M,oom=kill")
    with open(t + "/late-err-" + mode, "wb") as err:
        r = subprocess.run(["/usr/bin/python3", "-c", child, mode, t + "/late-data"],
                           stderr=err, stdout=subprocess.DEVNULL, env=env)
    print(mode, r.returncode)'
[ "$ST" = 0 ] || fail "the late-line driver: exit status $ST: $(cat "$T/err")"
out_is "keep -9
reuse -9"
grep -q "OOM-killing pid" "$T/late-err-keep" || fail "no OOM line on an untouched stderr: $(head -3 "$T/late-err-keep")"
[ "$(cat "$T/late-data")" = data ] || fail "the OOM line went into the program's file: $(head -3 "$T/late-data")"
[ ! -s "$T/late-err-reuse" ] || fail "reused descriptor 2: stderr got $(head -3 "$T/late-err-reuse")"
CHECKS=$((CHECKS + 1))

# stderr a pipe whose reader has gone: the exit report, and a line about a
# bad CGMALLOC_CONF item, each ended the program by SIGPIPE (status -13
# below); the program's own write there still gets it.
within 30 env CGM_LIB="$CGM_LIB" H="$H" "$PY" -c '
import os, subprocess
r, w = os.pipe()
os.close(r)
lib, h = os.environ["CGM_LIB"], os.environ["H"]
def status(conf, cmd):
    env = dict(os.environ, LD_PRELOAD=lib, CGMALLOC_CONF="hierarchy=" + h + "," + conf)
    return subprocess.run(cmd, stderr=w, stdout=subprocess.DEVNULL, env=env).returncode
print(status("scope=/p1,stats=exit", ["/bin/true"]),
      status("scope=/p2,stats=exit", ["/bin/false"]),
      status("scope=/p3,no_such_key=1", ["/bin/true"]),
      status("scope=/p4", ["/usr/bin/python3", "-c",
             "import os, signal; signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.write(2, b\"x\")"]))'
[ "$ST" = 0 ] || fail "the pipe driver: exit status $ST: $(cat "$T/err")"
out_is "0 1 0 -13"
CHECKS=$((CHECKS + 1))

# stats_file=NAME.%p: each process of a run writes its own report (bash
# and the two programs it starts), named by its pid; %% is a %.  With one
# name for all, the last to exit overwrote the others' reports.
within 30 pre "scope=/each,stats=exit,stats_file=$T/rep.%p.100%%" bash -c \
	'/bin/true; "$0" -c "import os; print(os.getpid())"; echo "$$"' "$PY"
[ "$ST" = 0 ] || fail "stats_file with %p: exit status $ST: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "stats_file with %p: $(head -3 "$T/err")"
set -- "$T"/rep.*.100%
[ $# = 3 ] || fail "stats_file with %p: $# reports, not 3: $*"
for pid in $(cat "$T/out"); do
	grep -q "^cgmalloc: exit report of pid $pid, group /each$" "$T/rep.$pid.100%" ||
		fail "stats_file with %p: no report of pid $pid in rep.$pid.100%: $(ls "$T")"
done
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
