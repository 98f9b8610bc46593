#!/bin/sh
# cgmctl mount: poll() on its files as on cgroupfs.  cgroup.events wakes
# a poller (poll, select, epoll) with POLLPRI|POLLERR when a preloaded
# python3 joins the group, within a second, and the new text is read
# from offset 0; memory.events and memory.events.local wake when a
# python3 goes over memory.high; nothing wakes while nothing changes, nor
# for a file the kernel does not notify (memory.max); an open file that
# was never read, an unarmed memory.pressure and a removed group's file
# poll as changed at once.  memory.pressure takes one trigger per open
# file (a second: EBUSY; a bad one: EINVAL) and wakes its poller under a
# throttled python3, not on a quiet group.  Helper: mount_poll.py.
# Skipped (77) where FUSE cannot be used.
# Run by `make check-cgmctl-mount-poll`, which sets CGMCTL and CGM_LIB.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/mount_lib.sh"

# mp ARGS...: mount_poll.py ARGS, which must exit 0; its report in $T/out.
mp() {
	run timeout 60 "$PY" "$HERE/mount_poll.py" "$@"
	[ "$ST" = 0 ] || fail "mount_poll.py $*: exited $ST: $(cat "$T/err")"
}

# is_field KEY VALUE WHAT: the report says KEY VALUE.
is_field() {
	[ "$(field "$1")" = "$2" ] || fail "$3: $1 is '$(field "$1")', expected '$2'"
	CHECKS=$((CHECKS + 1))
}

# within SECS WHAT: the report's elapsed is below SECS.
within() {
	awk -v e="$(field elapsed)" -v s="$1" 'BEGIN { exit !(e != "" && e < s) }' ||
		fail "$2: woke after $(field elapsed) s, expected under $1 s"
	CHECKS=$((CHECKS + 1))
}

# The preloaded python3s: one that only lives, one that allocates 50 MiB
# (over an 8M memory.high: throttled) and lives.
LIVE='import time; time.sleep(30)'
ALLOC='import time
b = [bytearray(1 << 20) for _ in range(50)]
time.sleep(30)'

start_mount
G=$M/g
for d in g h p q r; do ok mkdir "$M/$d"; done

# ---- cgroup.events ----
# Never read: changed, at once (kernfs counts from the open).
mp wait poll "$G/cgroup.events" 5 --unread
is_field result woke "an unread cgroup.events"
within 0.5 "an unread cgroup.events"
is_field revents 0xa "an unread cgroup.events (POLLPRI|POLLERR)"
# Read, nothing changes: no wakeup.
mp wait poll "$G/cgroup.events" 1
is_field result timeout "cgroup.events of a group nobody joins"
# A process joins: populated 1, seen from offset 0; polled again before
# that read it is still changed, after it quiet again.
mp wait select "$G/cgroup.events" 5 --settle env LD_PRELOAD="$CGM_LIB" \
	CGMALLOC_CONF="hierarchy=$H,group=/g" "$PY" -c "$LIVE"
is_field result woke "cgroup.events, select(), a process joining"
within 1 "cgroup.events, select(), a process joining"
is_field populated 1 "cgroup.events re-read after the wakeup"
is_field again pri "cgroup.events polled again before the re-read"
is_field settle none "cgroup.events polled after the re-read"
# The kernel does not notify memory.max: a change wakes nobody.
mp wait poll "$G/memory.max" 1 sh -c 'echo 100M >"$1"' sh "$G/memory.max"
is_field result timeout "memory.max written"
ok grep -qx 104857600 "$G/memory.max"
# A poller of a removed group's file wakes; its read says ENODEV.
mp wait epoll "$M/r/cgroup.events" 5 rmdir "$M/r"
is_field result woke "cgroup.events of a group removed"
is_field read ENODEV "cgroup.events of a group removed, re-read"

# ---- memory.events, memory.events.local ----
ok sh -c 'echo 8M >"$1"' sh "$M/h/memory.high"
mp wait epoll "$M/h/memory.events" 10 env LD_PRELOAD="$CGM_LIB" \
	CGMALLOC_CONF="hierarchy=$H,group=/h" "$PY" -c "$ALLOC"
is_field result woke "memory.events, epoll, a process over memory.high"
[ "$(field high)" -ge 1 ] || fail "memory.events re-read: high $(field high), expected 1 or more"
CHECKS=$((CHECKS + 1))
mp wait poll "$M/h/memory.events.local" 10 env LD_PRELOAD="$CGM_LIB" \
	CGMALLOC_CONF="hierarchy=$H,group=/h" "$PY" -c "$ALLOC"
is_field result woke "memory.events.local, poll, a process over memory.high"
mp wait poll "$M/h/memory.events" 1
is_field result timeout "memory.events with nothing over memory.high"

# ---- memory.pressure triggers ----
# No trigger: POLLPRI|POLLERR at once, as the kernel's.
mp wait poll "$M/q/memory.pressure" 5
is_field result woke "memory.pressure without a trigger"
within 0.5 "memory.pressure without a trigger"
is_field revents 0xa "memory.pressure without a trigger (POLLPRI|POLLERR)"
# A quiet group: armed, the second write refused, no wakeup.
mp trigger "$M/q/memory.pressure" "some 100000 500000" 1.5
is_field first ok "a trigger written to memory.pressure"
is_field second EBUSY "a second trigger on the same open file"
is_field text some_avg10 "memory.pressure read with a trigger armed"
is_field result timeout "a trigger on a group with no process"
# A throttled process: the trigger fires.
ok sh -c 'echo 8M >"$1"' sh "$M/p/memory.high"
mp trigger "$M/p/memory.pressure" "some 100000 500000" 10 env LD_PRELOAD="$CGM_LIB" \
	CGMALLOC_CONF="hierarchy=$H,group=/p" "$PY" -c "$ALLOC"
is_field first ok "a trigger written to memory.pressure"
is_field second EBUSY "a second trigger on the same open file"
is_field result woke "a trigger under a throttled process"
is_field revents 0x2 "a trigger under a throttled process (POLLPRI)"
# The kernel's rules for a trigger.
mp arm "$M/q/memory.pressure" "some 1 100"
is_field arm EINVAL "trigger 'some 1 100' (window under 500 ms)"
mp arm "$M/q/memory.pressure" "some 600000 500000"
is_field arm EINVAL "trigger 'some 600000 500000' (threshold over the window)"
mp arm "$M/q/memory.pressure" "bad"
is_field arm EINVAL "trigger 'bad'"
mp arm "$M/q/memory.pressure" "full 150000 1000000"
is_field arm ok "trigger 'full 150000 1000000'"
grep -q "^cgmctl: mount: /q/memory.pressure: trigger window 100 us outside" "$T/mount.err" ||
	fail "the mount did not say why 'some 1 100' was refused: $(cat "$T/mount.err")"
CHECKS=$((CHECKS + 1))
# As a shell arms one (and disarms it at once, closing the file).
ok sh -c 'echo "some 150000 1000000" >"$1"' sh "$M/q/memory.pressure"
run ls -l "$M/q/memory.pressure"
case $(cat "$T/out") in -rw-r--r--*) ;; *) fail "memory.pressure's mode: $(cat "$T/out")" ;; esac
CHECKS=$((CHECKS + 1))

kill -TERM "$MPID"
stopped "SIGTERM"
echo "$TEST_NAME: $CHECKS checks passed"
