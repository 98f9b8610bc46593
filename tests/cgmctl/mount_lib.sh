# Common code of the cgmctl mount tests (test_mount.sh, test_mount_poll.sh),
# after lib.sh: skip (77) where FUSE cannot be used; $M, the mount point;
# start_mount, which mounts the hierarchy $H there in the background
# ($MPID); stopped, which waits for it to unmount and exit.  The cleanup
# unmounts whatever happened.
skip() {
	echo "$TEST_NAME: skipped: $*" >&2
	exit 77
}

FUSERMOUNT=$(command -v fusermount3 || true)
[ -n "$FUSERMOUNT" ] || skip "no fusermount3 (Debian: fuse3)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
grep -qw fuse /proc/filesystems || skip "the kernel has no fuse filesystem"
# The mount goes through fusermount3: as root, or set-uid root for anyone else.
if [ "$(id -u)" = 0 ]; then
	(: <>/dev/fuse) 2>/dev/null || skip "root cannot open /dev/fuse"
else
	[ -u "$FUSERMOUNT" ] || skip "$FUSERMOUNT is not set-uid root"
	! grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status ||
		skip "no_new_privs is set: $FUSERMOUNT cannot gain root"
fi

# The mount point by its real path, as /proc/self/mountinfo names it.
M=$(cd "$T" && pwd -P)/mnt
mkdir "$M"
MPID=""

# Unmount before the directory goes, whatever happened.
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	"$FUSERMOUNT" -u -z "$M" 2>/dev/null || true
	rm -rf "$T"
}

mounted() { awk -v m="$M" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# start_mount [ENV-ARGS...]: cgmctl mount $M in the background ($MPID), once it is mounted.
start_mount() {
	env "$@" "$CGMCTL" --hierarchy "$H" mount "$M" >"$T/mount.out" 2>"$T/mount.err" &
	MPID=$!
	PIDS="$PIDS $MPID"
	i=0
	until mounted; do
		if ! kill -0 "$MPID" 2>/dev/null; then
			set +e
			wait "$MPID"
			st=$?
			set -e
			# What fusermount3 says when the machine forbids the mount itself.
			if grep -qE "mount failed: Operation not permitted|fuse device not found|failed to open /dev/fuse" \
				"$T/mount.err"; then
				skip "the mount is refused: $(head -1 "$T/mount.err")"
			fi
			fail "cgmctl mount exited $st before mounting: $(cat "$T/mount.err")"
		fi
		i=$((i + 1))
		[ $i -lt 200 ] || fail "$M is not mounted after 10 s"
		sleep 0.05
	done
	CHECKS=$((CHECKS + 1))
}

# wait_exit PID WHAT: PID exits within 5 s; its status in $ST.
wait_exit() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "$2: still running after 5 s"
		sleep 0.05
	done
	set +e
	wait "$1"
	ST=$?
	set -e
}

# stopped WHAT: cgmctl mount exited 0 and left $M unmounted and empty.
stopped() {
	wait_exit "$MPID" "$1"
	[ "$ST" = 0 ] || fail "$1: cgmctl mount exited $ST: $(cat "$T/mount.err")"
	! mounted || fail "$1: $M is still mounted"
	[ -z "$(ls -A "$M")" ] || fail "$1: $M is not empty: $(ls -A "$M" | head -3)"
	CHECKS=$((CHECKS + 1))
}

