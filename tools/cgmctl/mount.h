/*
 * cgmctl mount: the hierarchy as a cgroup v2-shaped filesystem, through
 * FUSE.  mount_fs.c answers the kernel's requests (a directory per group,
 * the files of cgm_files[] in each); mount.c mounts it, runs the request
 * loop and unmounts.
 */
#ifndef CGMCTL_MOUNT_H
#define CGMCTL_MOUNT_H

/* libfuse 3.1's API: what Debian 11 and later have. */
#define FUSE_USE_VERSION 31

#include <fuse.h>
#include <fuse_lowlevel.h>
#include <sys/types.h>
#include <time.h>

#include "cgmctl.h"

/* What every request needs; the private data of the FUSE context. */
struct mount_fs {
	struct ctl *c;			/* its hierarchy is open */
	uid_t uid;			/* owner of every file: whoever mounted it */
	gid_t gid;
	struct timespec time;		/* the mount's: every file's times */
};

/* The filesystem's operations, for fuse_new(). */
extern const struct fuse_operations mount_ops;

#endif /* CGMCTL_MOUNT_H */
