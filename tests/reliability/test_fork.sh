#!/bin/sh
# fork() near a limit costs the group nothing (the kernel charges nothing
# at fork: the pages are shared copy-on-write), so children of a big
# parent run; and fork() from a signal handler that interrupted malloc
# does not deadlock.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# A python3 parent holding 80 MB in a max=100M scope forks three children
# that each do a little work: all exit 0, and the peak stays under max.
within 60 pre "scope=/fork1,max=100M" "$PY" -c '
import os
hold = bytearray(80 << 20)
kids = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        junk = [str(j) * 10 for j in range(20000)]
        os._exit(0 if len(junk) == 20000 else 3)
    kids.append(pid)
bad = [s for s in (os.waitpid(k, 0)[1] for k in kids) if s != 0]
print("children", len(kids), "failed", len(bad))
'
[ "$ST" = 0 ] || fail "fork under max=100M: exit status $ST: $(head -3 "$T/err")"
[ "$(num failed)" = 0 ] || fail "children failed: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

# multiprocessing.Pool(4) under a 60 MB parent in a max=200M group: every
# worker runs its tasks.
ok ctl mkdir /pool
ok ctl set /pool memory.max 200M
within 120 pre "group=/pool" "$PY" -c '
import multiprocessing as mp
hold = bytearray(60 << 20)
def work(i):
    return sum(len(str(j)) for j in range(20000 + i))
if __name__ == "__main__":
    with mp.Pool(4) as p:
        r = p.map(work, range(16))
    print("results", len(r))
'
[ "$ST" = 0 ] || fail "multiprocessing.Pool(4) under max=200M: exit status $ST: $(head -3 "$T/err")"
[ "$(num results)" = 16 ] || fail "pool results: $(cat "$T/out")"
ok ctl cat /pool memory.peak
[ "$(cat "$T/out")" -le $((200 << 20)) ] || fail "/pool peaked at $(cat "$T/out"), over its max"
CHECKS=$((CHECKS + 1))

# fork() in a SIGALRM handler, every millisecond, while malloc runs (with
# a limit, so that slow paths take the shared locks often): no deadlock.
within 60 pre "scope=/sigfork,max=256M" "$REL_PROG" fork-in-handler 3
[ "$ST" = 0 ] || fail "fork-in-handler: exit status $ST: $(head -3 "$T/err")"
[ "$(num forks)" -gt 0 ] || fail "no fork completed: $(cat "$T/out")"
CHECKS=$((CHECKS + 1))

# A child whose parent's group is gone before its first allocation (the
# parent moved to another group, the group removed) cannot join it: it
# says so once, runs unaccounted on the shared slot whose allowances never
# run out, and its blocks are right.
ok ctl mkdir /orphan_from
ok ctl mkdir /orphan_to
mkfifo "$T/orphan.in"
timeout -s KILL 60 env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,group=/orphan_from" \
	"$REL_PROG" orphan-child <"$T/orphan.in" >"$T/orphan.out" 2>"$T/orphan.err" &
orphan=$!
exec 3>"$T/orphan.in"
i=0
until grep -q '^parent' "$T/orphan.out" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -le 100 ] || fail "orphan-child did not start: $(cat "$T/orphan.err")"
	sleep 0.1
done
parent=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' "$T/orphan.out")
ok ctl move "$parent" /orphan_to
ok ctl rmdir /orphan_from
echo go >&3
exec 3>&-
set +e
wait "$orphan"
ST=$?
set -e
[ "$ST" = 0 ] || fail "orphan-child: exit status $ST: $(head -3 "$T/orphan.err")"
grep -q '^child status 0$' "$T/orphan.out" ||
	fail "the orphaned child failed: $(cat "$T/orphan.out")"
grep -q "cannot join its parent's group: the group is gone" "$T/orphan.err" ||
	fail "the orphaned child did not say it runs unaccounted: $(cat "$T/orphan.err")"
[ "$(grep -c 'cannot join' "$T/orphan.err")" = 1 ] ||
	fail "the orphaned child said it more than once: $(cat "$T/orphan.err")"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
