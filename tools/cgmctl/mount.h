/*
 * cgmctl mount: the hierarchy as a cgroup v2-shaped filesystem, through
 * FUSE.  mount_fs.c answers the kernel's requests (a directory per group,
 * the files of cgm_files[] in each); mount_poll.c answers poll() and
 * wakes the pollers of the files that changed; mount.c mounts it, runs
 * the request loop and unmounts.
 */
#ifndef CGMCTL_MOUNT_H
#define CGMCTL_MOUNT_H

/* libfuse 3.1's API: what Debian 11 and later have. */
#define FUSE_USE_VERSION 31

#include <fuse.h>
#include <fuse_lowlevel.h>
#include <sys/types.h>
#include <time.h>

#include "cgm/acct.h"
#include "cgm/files.h"
#include "cgmctl.h"

struct open_file;

/* What every request needs; the private data of the FUSE context. */
struct mount_fs {
	struct ctl *c;			/* its hierarchy is open */
	uid_t uid;			/* owner of every file: whoever mounted it */
	gid_t gid;
	struct timespec time;		/* the mount's: every file's times */
	struct open_file *watched;	/* the open files the loop looks at (mount_poll.c) */
};

/* What a path names: a group's directory, or one of its files. */
struct node {
	char group_path[CGM_PATH_MAX];
	uint32_t group;
	const struct cgm_file *file;	/* NULL: the directory */
};

/* How poll() treats a file: as cgroupfs does. */
enum mount_watch_kind {
	MOUNT_WATCH_NONE,	/* changed only until it is first read */
	MOUNT_WATCH_EVENTS,	/* and whenever its text differs from what was last read */
	MOUNT_WATCH_TRIGGER,	/* memory.pressure: a written trigger fires it */
};

/* The poll() state of an open file (mount_poll.c's). */
struct mount_watch {
	enum mount_watch_kind kind;
	struct fuse_pollhandle *ph;	/* someone waits in poll(): notify it */
	bool read;			/* a read at offset 0 rendered the file */
	uint64_t seen;			/* the fingerprint of that text (MOUNT_WATCH_EVENTS) */
	bool armed, fired;		/* MOUNT_WATCH_TRIGGER: trig written; it fired, unpolled */
	struct psi_trigger trig;
	int64_t next_ns;		/* when the loop looks at it next */
	struct open_file *prev, *next;	/* on mount_fs.watched, while it has ph or is armed */
};

/*
 * An open file or directory: what it names, (a file) the text the last
 * read at offset 0 rendered, and its poll() state.
 */
struct open_file {
	struct node n;
	char *text;
	size_t cap;			/* of text */
	size_t len;			/* of what was rendered */
	bool rendered;
	struct mount_watch w;
};

/* The filesystem's operations, for fuse_new(). */
extern const struct fuse_operations mount_ops;

/* ---- mount_fs.c ---- */

/* Is @n's group still the one it named: 0, or -ENODEV (removed, as cgroupfs says). */
int mount_still_there(struct cgm_hier *h, const struct node *n);

/* ---- mount_poll.c: poll() and its notifications ---- */

/* How poll() treats file @f. */
enum mount_watch_kind mount_watch_kind(const struct cgm_file *f);

/*
 * poll() on @of: the events ready now (POLLPRI|POLLERR: changed since
 * the last read, or a trigger fired), keeping @ph (may be NULL) to
 * notify when that changes, or destroying it.
 */
unsigned int mount_poll(struct mount_fs *m, struct open_file *of, struct fuse_pollhandle *ph);

/* A read at offset 0 rendered @of's text anew: what poll() compares with from now on. */
void mount_poll_read(struct open_file *of);

/*
 * Arm the trigger @spec ("some|full THRESHOLD_US WINDOW_US") on @of, an
 * open memory.pressure: 0, -EINVAL (a reason in @why) or -EBUSY (one is
 * armed on it already: one per open file, as in the kernel).
 */
int mount_poll_arm(struct mount_fs *m, struct open_file *of, const char *spec, char *why,
		   size_t whylen);

/* @of is being closed: its poll handle goes, its trigger is disarmed. */
void mount_poll_release(struct mount_fs *m, struct open_file *of);

/* When mount_poll_tick() has work next (CLOCK_MONOTONIC ns), or INT64_MAX: none. */
int64_t mount_poll_next(const struct mount_fs *m);

/*
 * At @now: poll the triggers that are due and look at the polled files
 * that are due; notify the pollers of those that fired or changed.
 * Called from the request loop, between requests.
 */
void mount_poll_tick(struct mount_fs *m, int64_t now);

/* The loop ends: every poll handle kept is destroyed. */
void mount_poll_end(struct mount_fs *m);

#endif /* CGMCTL_MOUNT_H */
