/*
 * cgmctl mount DIR: serve the hierarchy at DIR (mount_fs.c) until it is
 * unmounted -- by SIGTERM, SIGINT or SIGHUP (libfuse's handlers), by
 * `fusermount3 -u DIR` or umount, or because the hierarchy file went
 * away (removed, or another file put in its place): a mount of a
 * hierarchy nobody can attach to any more would only mislead.
 *
 * The mount goes through fusermount3 with auto_unmount: a user who is
 * not root can mount, and if cgmctl is killed, fusermount3 unmounts.
 * The request loop is single-threaded, libfuse's own loop with a poll()
 * timeout so that it looks at the hierarchy file between requests, and
 * at the files being polled and the memory.pressure triggers when they
 * are due (mount_poll.c).  A request that waits for processes -- a write
 * to cgroup.procs or memory.reclaim, up to a second -- holds the others,
 * and the wakeups of pollers, back meanwhile.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgm/clock.h"
#include "mount.h"

/* How often the loop looks at the hierarchy file, at the least (ns). */
#define MOUNT_TICK_NS (500 * 1000000LL)

/* libfuse's messages, as cgmctl's: one line each, after "cgmctl: mount: ". */
__attribute__((format(printf, 2, 0)))
static void log_line(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t l;

	if (level > FUSE_LOG_WARNING)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	l = strlen(line);
	while (l && line[l - 1] == '\n')
		line[--l] = '\0';
	ctl_err("mount: %s", line);
}

/* Is the hierarchy file gone: removed, or another file in its place? */
static bool hier_gone(const char *path, const struct stat *was)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR;
	return st.st_dev != was->st_dev || st.st_ino != was->st_ino;
}

/* From @now until @due, in whole milliseconds rounded up: a poll() timeout. */
static int timeout_ms(int64_t now, int64_t due)
{
	if (due <= now)
		return 0;
	return (int)((due - now + 999999) / 1000000);
}

/*
 * Serve @m's requests until the session ends (a signal, an unmount) or
 * the hierarchy file at @path, as @was, is gone (*@gone).  A signal that
 * lands between the exit check and poll() is seen a tick later at most.
 * Returns 0, or a negative errno from reading the requests.
 */
static int serve(struct mount_fs *m, struct fuse_session *se, const char *path,
		 const struct stat *was, bool *gone)
{
	struct fuse_buf buf = { .mem = NULL };
	struct pollfd pfd = { .fd = fuse_session_fd(se), .events = POLLIN };
	int64_t next_tick = cgm_now_ns() + MOUNT_TICK_NS;
	int res = 0;

	while (!fuse_session_exited(se)) {
		int64_t now = cgm_now_ns(), due = mount_poll_next(m);
		int ready = poll(&pfd, 1, timeout_ms(now, due < next_tick ? due : next_tick));

		if (ready < 0 && errno != EINTR) {
			res = -errno;
			break;
		}
		/* What is due, however busy the loop is with requests. */
		now = cgm_now_ns();
		if (now >= next_tick) {
			next_tick = now + MOUNT_TICK_NS;
			if (hier_gone(path, was)) {
				*gone = true;
				break;
			}
		}
		mount_poll_tick(m, now);
		if (ready <= 0)
			continue;
		res = fuse_session_receive_buf(se, &buf);
		if (res == -EINTR)
			continue;
		/* 0: unmounted (libfuse ends the session at ENODEV). */
		if (res <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	mount_poll_end(m);
	free(buf.mem);
	return res < 0 ? res : 0;
}

int cmd_mount(struct ctl *c, int argc, char **argv)
{
	static struct mount_fs m;
	char prog[] = "cgmctl", o[] = "-o", opts[] = "fsname=cgmalloc,subtype=cgmalloc,auto_unmount";
	char *fargv[] = { prog, o, opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	char path[PATH_MAX];
	struct stat st, hier_st;
	struct fuse_session *se = NULL;
	struct fuse *f = NULL;
	bool daemon = false, gone = false, handlers = false, mounted = false;
	const char *dir;
	int opt, err, status = CTL_FAIL;

	while ((opt = ctl_getopt(c, argc, argv, "D")) != -1) {
		if (opt != 'D')
			return CTL_USAGE;
		daemon = true;
	}
	if (ctl_nargs(c, argc, 1, "mount [--daemon] DIR") < 0)
		return CTL_USAGE;
	dir = argv[optind];
	if (stat(dir, &st) < 0) {
		ctl_err("mount: %s: %s", dir, strerror(errno));
		return CTL_FAIL;
	}
	if (!S_ISDIR(st.st_mode)) {
		ctl_err("mount: %s: not a directory", dir);
		return CTL_FAIL;
	}
	if (ctl_open(c, true) < 0)
		return CTL_FAIL;
	/* The file as opened, by an absolute path: a daemon leaves the directory. */
	if (!realpath(c->path, path) || stat(path, &hier_st) < 0) {
		ctl_err("mount: %s: %s", c->path, strerror(errno));
		goto out;
	}
	m.c = c;
	m.uid = getuid();
	m.gid = getgid();
	clock_gettime(CLOCK_REALTIME, &m.time);
	fuse_set_log_func(log_line);
	f = fuse_new(&args, &mount_ops, sizeof(mount_ops), &m);
	if (!f)
		goto out;
	se = fuse_get_session(f);
	/* Before the mount shows: a signal from then on ends the session, not cgmctl. */
	if (fuse_set_signal_handlers(se) != 0) {
		ctl_err("mount: cannot catch signals");
		goto out;
	}
	handlers = true;
	if (fuse_mount(f, dir) != 0) {
		ctl_err("mount: cannot mount %s (needs /dev/fuse and fusermount3)", dir);
		goto out;
	}
	mounted = true;
	if (daemon && fuse_daemonize(0) != 0) {
		ctl_err("mount: %s: cannot detach", dir);
		goto out;
	}
	err = serve(&m, se, path, &hier_st, &gone);
	if (err)
		ctl_err("mount: %s: %s", dir, strerror(-err));
	else if (gone)
		ctl_err("mount: the hierarchy file %s is gone: unmounting %s", path, dir);
	status = err ? CTL_FAIL : CTL_OK;
out:
	if (mounted)
		fuse_unmount(f);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (f)
		fuse_destroy(f);
	fuse_opt_free_args(&args);
	ctl_close(c);
	return status;
}
