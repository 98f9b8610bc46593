#!/bin/sh
# cgmctl mount: the hierarchy mounted at a directory and used the way a
# shell script written for cgroupfs uses /sys/fs/cgroup -- mkdir and
# rmdir of groups, echo to and cat of their files, with the errors
# cgroupfs gives; a preloaded python3 listed in cgroup.procs and
# cgroup.events, moved by a write to cgroup.procs and killed through
# cgroup.kill -- then unmounted by SIGTERM, by SIGINT, by fusermount3 -u
# (--daemon) and by removing the hierarchy file.  Run as root, it runs
# again as uid 65534 (setpriv), which mounts through set-uid fusermount3.
# Skipped (77) where FUSE cannot be used.
# Run by `make check-cgmctl-mount`, which sets CGMCTL and CGM_LIB.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/mount_lib.sh"

# wr VALUE FILE: echo VALUE > FILE, in one write; coreutils' echo says why
# a write fails, the shell why the open does.  A write that hangs fails.
wr() { run timeout 10 sh -c 'exec env echo "$1" >"$2"' wr "$1" "$2"; }

wr_ok() {
	wr "$@"
	[ "$ST" = 0 ] || fail "echo '$1' > $2: $(cat "$T/err")"
	CHECKS=$((CHECKS + 1))
}

# fails ERROR CMD...: CMD fails, saying strerror's ERROR.
fails() {
	want=$1
	shift
	run "$@"
	[ "$ST" != 0 ] || fail "'$*' succeeded, expected '$want'"
	grep -q "$want" "$T/err" || fail "'$*': expected '$want', got: $(cat "$T/err")"
	CHECKS=$((CHECKS + 1))
}

wr_fails() {
	want=$1
	shift
	fails "$want" timeout 10 sh -c 'exec env echo "$1" >"$2"' wr "$1" "$2"
}

# is FILE TEXT: cat FILE prints TEXT.
is() {
	run cat "$1"
	[ "$ST" = 0 ] || fail "cat $1: $(cat "$T/err")"
	[ "$(cat "$T/out")" = "$2" ] || fail "cat $1: '$(head -c 200 "$T/out")', expected '$2'"
	CHECKS=$((CHECKS + 1))
}

# ---- the command line ----
bad 2 "expected 1 argument \(usage: cgmctl mount \[--daemon\] DIR\)" ctl mount
bad 1 "mount: $T/nope: No such file or directory" ctl mount "$T/nope"
: >"$T/file"
bad 1 "mount: $T/file: not a directory" ctl mount "$T/file"

start_mount
A=$M/a

# ---- the tree: groups are directories ----
"$CGMCTL" help files | awk 'NR > 1 && !/\/ only/ { print $1 }' | sort >"$T/files.group"
"$CGMCTL" help files | awk 'NR > 1 && !/not on \// { print $1 }' | sort >"$T/files.root"
for f in memory.max cgroup.procs cgroup.events cgroup.kill cgroup.stat memory.stat; do
	grep -qx "$f" "$T/files.group" || fail "help files has no $f"
done
ls "$M" | sort | cmp -s - "$T/files.root" || fail "ls $M: $(ls "$M" | tr '\n' ' ')"
ok mkdir "$A"
[ -d "$A" ] || fail "mkdir $A made no directory"
ls "$A" | sort | cmp -s - "$T/files.group" || fail "ls $A is not the table's files: $(ls "$A" | tr '\n' ' ')"
ls "$M" | grep -qx a || fail "ls $M does not list a"
ok ctl cat /a memory.current
fails "File exists" mkdir "$A"
fails "File exists" mkdir "$A/memory.max"
fails "Invalid argument" mkdir "$M/a b"
fails "No such file or directory" mkdir "$M/nope/x"
fails "No such file or directory" cat "$M/memory.max"
fails "No such file or directory" cat "$A/memory.nope"
# The tree as cgmctl changes it, at once: nothing is cached.
ok ctl mkdir /x
[ -d "$M/x" ] || fail "a group made by cgmctl mkdir is not a directory of the mount"
ok ctl rmdir /x
[ ! -e "$M/x" ] || fail "a group removed by cgmctl rmdir is still in the mount"
CHECKS=$((CHECKS + 2))

# ---- files: echo and cat ----
wr_ok 100M "$A/memory.max"
is "$A/memory.max" 104857600
ok ctl cat /a memory.max
out_is 104857600
wr_fails "Invalid argument" bad "$A/memory.max"
is "$A/memory.max" 104857600
grep -q "^cgmctl: mount: /a/memory.max: bad value 'bad'" "$T/mount.err" ||
	fail "the mount did not say why 'bad' was refused: $(cat "$T/mount.err")"
wr_fails "Permission denied" 1 "$A/memory.current"
# Refused at the open, as by kernfs, before anything is written.
fails "Permission denied" sh -c ': >"$1"' sh "$A/memory.current"
wr_fails "Permission denied" 1 "$M/memory.max"
fails "Permission denied" cat "$A/cgroup.kill"
wr_ok max "$A/memory.high"
is "$A/memory.high" max
wr_ok 100M "$A/memory.high"
is "$A/memory.high" 104857600
# Small reads at increasing offsets read one text.
run dd if="$A/memory.max" bs=3
[ "$(cat "$T/out")" = 104857600 ] || fail "dd bs=3 of memory.max: $(cat "$T/out")"
run dd if="$A/memory.stat" bs=7
awk '{ print $1 }' "$T/out" >"$T/keys.dd"
ok cat "$A/memory.stat"
awk '{ print $1 }' "$T/out" >"$T/keys"
grep -qx anon "$T/keys" || fail "memory.stat has no anon: $(head -3 "$T/out")"
cmp -s "$T/keys" "$T/keys.dd" || fail "memory.stat read 7 bytes at a time has other keys"
ok ctl cat /a memory.stat
awk '{ print $1 }' "$T/out" | cmp -s - "$T/keys" || fail "memory.stat: other keys than cgmctl cat's"
# A read that has begun goes on with the text it began with; one from the start renders anew.
"$PY" - "$A/memory.max" "$CGMCTL" "$H" <<'EOF' || fail "a read of memory.max changed in the middle"
import os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
head = os.read(fd, 3)
subprocess.run([sys.argv[2], "--hierarchy", sys.argv[3], "set", "/a", "memory.max", "200M"], check=True)
text = head + os.read(fd, 100)
assert text == b"104857600\n", text
assert os.pread(fd, 100, 0) == b"209715200\n"
EOF
CHECKS=$((CHECKS + 1))
is "$M/cgroup.controllers" memory
is "$A/cgroup.subtree_control" memory
wr_ok +memory "$M/cgroup.subtree_control"
wr_fails "Invalid argument" -memory "$M/cgroup.subtree_control"
is "$A/cgroup.events" "$(printf 'populated 0\nfrozen 0')"
# What cgroupfs's directories cannot do, or a hierarchy cannot.
fails "Permission denied" touch "$A/newfile"
fails "Operation not permitted" rm "$A/memory.max"
fails "Operation not permitted" ln "$A/memory.max" "$A/link"
fails "Operation not supported" mv "$A" "$M/renamed"
fails "Operation not supported" chmod 600 "$A/memory.max"
ok touch "$A/memory.max"
ok truncate -s 0 "$A/memory.max"
is "$A/memory.max" 209715200

# memparse's forms, taken with the kernel's value; what it refuses, refused.
for vw in 0x100000:1048576 " 1G:1073741824" 1g:1073741824 2048k:2097152 010000:4096; do
	wr_ok 100M "$A/memory.max"
	wr_ok "${vw%:*}" "$A/memory.max"
	is "$A/memory.max" "${vw#*:}"
done
wr_ok 100M "$A/memory.max"
for v in 1Gx "1 G" -1 08; do
	wr_fails "Invalid argument" "$v" "$A/memory.max"
	is "$A/memory.max" 104857600
done
wr_ok max "$A/memory.max"
wr_ok max "$A/memory.high"

# ---- a process: cgroup.procs, cgroup.events, moved, killed ----
ok mkdir "$A/b"
ok mkdir "$M/c"
is "$M/cgroup.stat" "$(printf 'nr_descendants 3\nnr_dying_descendants 0')"
is "$A/cgroup.stat" "$(printf 'nr_descendants 1\nnr_dying_descendants 0')"
HOLD='import sys, time
b = bytearray(24 << 20)
open(sys.argv[1], "w").write("ready")
time.sleep(60)'
LD_PRELOAD=$CGM_LIB CGMALLOC_CONF=hierarchy=$H,group=/a "$PY" -c "$HOLD" "$T/ready" 2>"$T/hold.err" &
pid=$!
PIDS="$PIDS $pid"
wait_for test -s "$T/ready"
is "$A/cgroup.procs" "$pid"
is "$A/cgroup.events" "$(printf 'populated 1\nfrozen 0')"
is "$M/c/cgroup.events" "$(printf 'populated 0\nfrozen 0')"
run cat "$A/memory.current"
[ "$(cat "$T/out")" -ge $((24 << 20)) ] || fail "/a holds $(cat "$T/out") bytes, less than 24 MiB"
fails "Device or resource busy" rmdir "$A"
[ -d "$A" ] || fail "rmdir of a busy group removed it"
wr_fails "Invalid argument" abc "$A/b/cgroup.procs"
wr_fails "No such process" 2147483647 "$A/b/cgroup.procs"
wr_ok "$pid" "$A/b/cgroup.procs"
is "$A/b/cgroup.procs" "$pid"
is "$A/cgroup.procs" ""
is "$A/b/cgroup.events" "$(printf 'populated 1\nfrozen 0')"
# A descendant's process populates it.
is "$A/cgroup.events" "$(printf 'populated 1\nfrozen 0')"
ok ctl cat /a/b cgroup.procs
out_is "$pid"
wr_ok 1 "$M/c/cgroup.kill"
kill -0 "$pid" 2>/dev/null || fail "cgroup.kill of /c killed a process of /a/b"
wr_fails "Numerical result out of range" 0 "$A/cgroup.kill"
wr_fails "Invalid argument" 2 "$A/cgroup.kill"
kill -0 "$pid" 2>/dev/null || fail "a refused write to cgroup.kill killed"
wr_ok 1 "$A/cgroup.kill"
wait_exit "$pid" "a process of /a/b after echo 1 > /a/cgroup.kill"
[ "$ST" = 137 ] || fail "after cgroup.kill the process exited $ST, expected 137 (SIGKILL)"
is "$A/b/cgroup.procs" ""
is "$A/cgroup.events" "$(printf 'populated 0\nfrozen 0')"
fails "Device or resource busy" rmdir "$A"
ok rmdir "$A/b"
ok rmdir "$A"
[ ! -e "$A" ] || fail "rmdir $A left it"
ok ctl ls
! grep -q "^/a " "$T/out" || fail "cgmctl ls still shows /a"
# A file of a removed group, open: reads and writes say ENODEV, as
# cgroupfs's do, also once new groups have taken the removed one's place
# in the hierarchy.  (fstat says ESTALE: libfuse forgets the path.)
"$PY" - "$M" <<'EOF' || fail "the open file of a removed group"
import errno, os, sys
fd = os.open(sys.argv[1] + "/c/memory.max", os.O_RDWR)
assert os.read(fd, 100) == b"max\n"
os.rmdir(sys.argv[1] + "/c")
for i in range(4):
    os.mkdir("%s/d%d" % (sys.argv[1], i))
for what, op in (("read", lambda: os.pread(fd, 100, 0)), ("write", lambda: os.write(fd, b"1G"))):
    try:
        op()
        sys.exit(what + ": no error")
    except OSError as e:
        assert e.errno == errno.ENODEV, (what, e)
for i in range(4):
    assert open("%s/d%d/memory.max" % (sys.argv[1], i)).read() == "max\n"
    os.rmdir("%s/d%d" % (sys.argv[1], i))
EOF
[ ! -e "$M/c" ] || fail "rmdir $M/c left it"
CHECKS=$((CHECKS + 1))

# ---- unmounting ----
kill -TERM "$MPID"
stopped "SIGTERM"
# A background job ignores SIGINT unless given it back, as from a terminal.
if env --default-signal=INT true 2>/dev/null; then
	start_mount --default-signal=INT
	kill -INT "$MPID"
	stopped "SIGINT"
fi
start_mount
rm "$H"
stopped "the hierarchy file removed"
grep -q "^cgmctl: mount: the hierarchy file .* is gone: unmounting $M" "$T/mount.err" ||
	fail "the mount did not say why it went: $(cat "$T/mount.err")"
# --daemon: back at once, mounted, and gone with the mount.
ok timeout 10 "$CGMCTL" --hierarchy "$H" mount --daemon "$M"
mounted || fail "--daemon: $M is not mounted"
ok mkdir "$M/d"
ok ctl cat /d memory.max
# The daemon: the process whose command line is the one above.
dpid=""
for f in /proc/[0-9]*/cmdline; do
	if [ "$( { tr '\0' ' ' <"$f"; } 2>/dev/null)" = "$CGMCTL --hierarchy $H mount --daemon $M " ]; then
		dpid=${f#/proc/}
		dpid=${dpid%/cmdline}
	fi
done
[ -n "$dpid" ] || fail "--daemon: no cgmctl mount process runs"
PIDS="$PIDS $dpid"
ok "$FUSERMOUNT" -u "$M"
i=0
while kill -0 "$dpid" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$dpid/stat" 2>/dev/null)" != Z ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "--daemon: cgmctl still runs 5 s after fusermount3 -u"
	sleep 0.05
done
! mounted || fail "--daemon: $M still mounted"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed (uid $(id -u))"

# ---- again as a user who is not root ----
if [ "$(id -u)" != 0 ] || [ -n "${CGM_MOUNT_AS_USER:-}" ]; then
	exit 0
fi
command -v setpriv >/dev/null 2>&1 || { echo "$TEST_NAME: no setpriv: not run as uid 65534"; exit 0; }
AS_USER="setpriv --reuid 65534 --regid 65534 --clear-groups"
SELF=$HERE/$(basename "$0")
set +e
if $AS_USER sh -c ': <>/dev/fuse' 2>/dev/null; then
	$AS_USER env CGM_MOUNT_AS_USER=1 sh "$SELF"
elif command -v unshare >/dev/null 2>&1 && mknod "$T/fuse" c 10 229 2>/dev/null &&
	chmod 666 "$T/fuse"; then
	# Where /dev/fuse is root's only, the user gets a node it may open,
	# bound over /dev/fuse in a mount namespace of its own: nothing
	# outside changes.
	echo "$TEST_NAME: /dev/fuse is root's: uid 65534 gets its own in a private mount namespace"
	unshare -m --propagation private sh -c \
		'mount --bind "$1" /dev/fuse && exec '"$AS_USER"' env CGM_MOUNT_AS_USER=1 sh "$2"' \
		sh "$T/fuse" "$SELF"
else
	$AS_USER env CGM_MOUNT_AS_USER=1 sh "$SELF"
fi
st=$?
set -e
case $st in
0) ;;
77) echo "$TEST_NAME: as uid 65534: skipped (said above)" ;;
*) fail "as uid 65534: exit status $st" ;;
esac
