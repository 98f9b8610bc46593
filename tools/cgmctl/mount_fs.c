/*
 * The filesystem cgmctl mount serves: a directory per group, and in each
 * the files of cgm_files[] that the group has -- cgroup v2's layout, with
 * cgroupfs's modes and errors, so that a script written for
 * /sys/fs/cgroup runs on it.
 *
 * Requests come with paths ("/a/b/memory.max", the high-level FUSE API)
 * and each is looked up in the hierarchy afresh: cgmctl and attached
 * programs change the tree behind the kernel's back, so the kernel is
 * told to cache nothing.  What is open is reached through its handle,
 * not a path (nullpath_ok): a group's open files outlive its removal, and
 * then answer ENODEV, as cgroupfs's do.
 *
 * A read at offset 0 renders the file into the open file's own copy and
 * the reads after it are served from that, so a reader sees one text
 * however small its reads, as with a seq_file.  A write is one value,
 * parsed and applied by cgm_file_write() as `cgmctl set` does, on behalf
 * of nobody in the hierarchy (CGM_NONE): whoever can reach the mount can
 * open the hierarchy file anyway.  memory.pressure, read-only elsewhere,
 * takes a write here as cgroupfs does: a trigger, armed on the open file
 * (mount_poll.c), which poll() then reports.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cgm/acct.h"
#include "cgm/files.h"
#include "mount.h"

/* The longest value a write may carry: a page, as cgroupfs takes. */
#define MOUNT_WRITE_MAX 4096

static struct mount_fs *fs(void)
{
	return fuse_get_context()->private_data;
}

static struct cgm_hier *hier(void)
{
	return &fs()->c->h;
}

/* The index of group @path in @h, or CGM_NONE. */
static uint32_t lookup(struct cgm_hier *h, const char *path)
{
	uint32_t idx;

	hier_lock(&h->hdr->tree_lock);
	idx = group_lookup(h, path);
	hier_unlock(&h->hdr->tree_lock);
	return idx;
}

/*
 * What @path names.  A last name that the table has is a file, whatever
 * groups there are (mkdir refuses such a group, as cgroupfs does: the
 * file exists); anything else is a group.  0, -ENOENT or -ENAMETOOLONG.
 */
static int resolve(const char *path, struct node *n)
{
	const char *slash = strrchr(path, '/');
	size_t dir;

	if (!slash)
		return -ENOENT;
	if (strlen(path) >= sizeof(n->group_path))
		return -ENAMETOOLONG;
	n->file = cgm_file_find(slash + 1);
	dir = n->file ? (size_t)(slash - path) : strlen(path);
	/* "/memory.stat" is the root's. */
	dir = dir ? dir : 1;
	memcpy(n->group_path, path, dir);
	n->group_path[dir] = '\0';
	n->group = lookup(hier(), n->group_path);
	if (n->group == CGM_NONE || (n->file && !cgm_file_exists(n->file, n->group)))
		return -ENOENT;
	return 0;
}

static struct open_file *open_file(const struct fuse_file_info *fi)
{
	return (struct open_file *)(uintptr_t)fi->fh;
}

/* What @path names, or when it is open (@fi: fstat, ftruncate), what was opened. */
static int resolve_fi(const char *path, const struct fuse_file_info *fi, struct node *n)
{
	if (!fi || !fi->fh)
		return resolve(path, n);
	*n = open_file(fi)->n;
	return 0;
}

/* Does @f take writes: a value, or (memory.pressure) a trigger? */
static bool writable(const struct cgm_file *f)
{
	return f->write || mount_watch_kind(f) == MOUNT_WATCH_TRIGGER;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	const struct mount_fs *m = fs();
	struct node n;
	int err = resolve_fi(path, fi, &n);

	if (err)
		return err;
	memset(st, 0, sizeof(*st));
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_atim = st->st_mtim = st->st_ctim = m->time;
	if (!n.file) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	/*
	 * kernfs's modes: readable by all, writable by the owner.  The size
	 * is 0, as in cgroupfs; reads bypass the page cache (fs_open), so
	 * they reach fs_read() whatever it says.
	 */
	st->st_mode = S_IFREG | (n.file->show ? 0444 : 0) | (writable(n.file) ? 0200 : 0);
	st->st_nlink = 1;
	return 0;
}

int mount_still_there(struct cgm_hier *h, const struct node *n)
{
	return lookup(h, n->group_path) == n->group ? 0 : -ENODEV;
}

/* An open file's or directory's group is still there (else ENODEV, as cgroupfs says). */
static int still_there(const struct open_file *of)
{
	return mount_still_there(hier(), &of->n);
}

/* Open @path, a file (@dir false) or a directory, into @fi. */
static int open_node(const char *path, struct fuse_file_info *fi, bool dir)
{
	struct open_file *of;
	struct node n;
	int err = resolve(path, &n);

	if (err)
		return err;
	if (dir != !n.file)
		return dir ? -ENOTDIR : -EISDIR;
	of = calloc(1, sizeof(*of));
	if (!of)
		return -ENOMEM;
	of->n = n;
	of->w.kind = mount_watch_kind(n.file);
	fi->fh = (uintptr_t)of;
	return 0;
}

static int fs_opendir(const char *path, struct fuse_file_info *fi)
{
	return open_node(path, fi, true);
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	static uint32_t kids[CGM_MAX_GROUPS];
	struct cgm_hier *h = hier();
	const struct open_file *of = open_file(fi);
	const struct node *n = &of->n;
	size_t nkids;
	int err = still_there(of);

	(void)path;
	(void)off;
	(void)flags;
	if (err)
		return err;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	for (size_t i = 0; i < cgm_nfiles; i++)
		if (cgm_file_exists(&cgm_files[i], n->group))
			fill(buf, cgm_files[i].name, NULL, 0, 0);
	hier_lock(&h->hdr->tree_lock);
	/*
	 * kids[0] is the group itself; its children follow in name order.
	 * (ctl_collect()'s stack is static: requests come one at a time.)
	 */
	nkids = ctl_collect(h, n->group, false, kids);
	for (size_t i = 1; i < nkids; i++) {
		char name[CGM_NAME_MAX];

		snprintf(name, sizeof(name), "%.*s", CGM_NAME_MAX - 1, h->groups[kids[i]].name);
		/* A group that cgmctl mkdir gave a file's name is hidden by the file. */
		if (!cgm_file_find(name))
			fill(buf, name, NULL, 0, 0);
	}
	hier_unlock(&h->hdr->tree_lock);
	return 0;
}

/* mkdir makes one group, as `cgmctl mkdir` would, in a parent that exists. */
static int fs_mkdir(const char *path, mode_t mode)
{
	struct cgm_hier *h = hier();
	const char *name = strrchr(path, '/') + 1;
	char parent[CGM_PATH_MAX];
	int64_t idx;

	(void)mode;
	if (strlen(name) >= CGM_NAME_MAX || strlen(path) >= CGM_PATH_MAX)
		return -ENAMETOOLONG;
	if (cgm_file_find(name))
		return -EEXIST;
	if (group_path_valid(path) < 0)
		return -EINVAL;
	snprintf(parent, sizeof(parent), "%.*s", name - 1 == path ? 1 : (int)(name - 1 - path),
		 path);
	hier_lock(&h->hdr->tree_lock);
	/* group_create() would make a missing parent: a removed one stays removed. */
	if (group_lookup(h, parent) == CGM_NONE)
		idx = -ENOENT;
	else if (group_lookup(h, path) != CGM_NONE)
		idx = -EEXIST;
	else
		idx = group_create(h, path, 0);
	hier_unlock(&h->hdr->tree_lock);
	return idx < 0 ? (int)idx : 0;
}

/* rmdir removes an empty group; one with processes or children is busy, as in cgroupfs. */
static int fs_rmdir(const char *path)
{
	struct cgm_hier *h = hier();
	struct node n;
	int err = resolve(path, &n);

	if (err)
		return err;
	if (n.file)
		return -ENOTDIR;
	if (n.group == CGM_ROOT)
		return -EBUSY;
	/* The slots of processes that died without detaching keep no group busy. */
	acct_reclaim_dead(h);
	hier_lock(&h->hdr->tree_lock);
	err = group_rmdir(h, n.group_path);
	hier_unlock(&h->hdr->tree_lock);
	return err;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	const struct cgm_file *f;
	int err = open_node(path, fi, false);

	if (err)
		return err;
	f = open_file(fi)->n.file;
	/* As kernfs: opening a file for what it cannot do is refused, even to root. */
	if ((acc != O_WRONLY && !f->show) || (acc != O_RDONLY && !writable(f))) {
		free(open_file(fi));
		return -EACCES;
	}
	fi->direct_io = 1;
	return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct open_file *of = open_file(fi);

	(void)path;
	if (off < 0)
		return -EINVAL;
	if (off == 0 || !of->rendered) {
		int n = still_there(of);

		if (n == 0)
			n = ctl_render(fs()->c, of->n.group, of->n.file->name, true, &of->text,
				       &of->cap);
		if (n < 0)
			return n == -ENOENT ? -ENODEV : n;
		of->len = (size_t)n;
		of->rendered = true;
		mount_poll_read(of);
	}
	if ((uint64_t)off >= of->len)
		return 0;
	if (size > of->len - (size_t)off)
		size = of->len - (size_t)off;
	memcpy(buf, of->text + off, size);
	return (int)size;
}

/* One write is one value, wherever the file offset is, as in cgroupfs. */
static int fs_write(const char *path, const char *data, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct open_file *of = open_file(fi);
	char value[MOUNT_WRITE_MAX], why[256] = "";
	int err;

	(void)path;
	(void)off;
	if (size >= sizeof(value))
		return -EINVAL;
	memcpy(value, data, size);
	value[size] = '\0';
	err = still_there(of);
	if (!err && of->w.kind == MOUNT_WATCH_TRIGGER) {
		/* echo's newline ends the trigger, as the kernel's sscanf() takes it. */
		if (size && value[size - 1] == '\n')
			value[size - 1] = '\0';
		err = mount_poll_arm(fs(), of, value, why, sizeof(why));
	} else if (!err) {
		err = cgm_file_write(hier(), CGM_NONE, of->n.group, of->n.file->name, value, why,
				     sizeof(why));
	}
	/* The group went between the two. */
	if (err == -ENOENT)
		err = -ENODEV;
	if (!err)
		return (int)size;
	/* The errno is all the writer gets: the reason goes to the mount's stderr. */
	if (err != -ENODEV)
		ctl_err("mount: %s%s%s: %s", of->n.group_path, of->n.group == CGM_ROOT ? "" : "/",
			of->n.file->name, why[0] && strcmp(why, "failed") ? why : strerror(-err));
	return err;
}

/* poll(): as cgroupfs answers it (mount_poll.c). */
static int fs_poll(const char *path, struct fuse_file_info *fi, struct fuse_pollhandle *ph,
		   unsigned int *revents)
{
	(void)path;
	*revents = mount_poll(fs(), open_file(fi), ph);
	return 0;
}

/* Close a file or a directory; closing a memory.pressure disarms its trigger. */
static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct open_file *of = open_file(fi);

	(void)path;
	mount_poll_release(fs(), of);
	free(of->text);
	free(of);
	return 0;
}

/*
 * truncate(2): taken and ignored, as by cgroupfs.  (`echo 1G > memory.max`
 * opens with O_TRUNC, which libfuse hands to fs_open(): ignored there.)
 */
static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct node n;
	int err = resolve_fi(path, fi, &n);

	(void)size;
	return err ? err : n.file ? 0 : -EISDIR;
}

/* touch: taken; the times stay the mount's. */
static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct node n;

	(void)tv;
	return resolve_fi(path, fi, &n);
}

static int fs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	memset(st, 0, sizeof(*st));
	st->f_bsize = st->f_frsize = 4096;
	st->f_namemax = CGM_NAME_MAX - 1;
	return 0;
}

/*
 * What cgroupfs's directories cannot do, refused with the errors the VFS
 * gives for it there: a new file EACCES; unlink, link, symlink EPERM.
 */
static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)path;
	(void)mode;
	(void)fi;
	return -EACCES;
}

static int fs_mknod(const char *path, mode_t mode, dev_t dev)
{
	(void)path;
	(void)mode;
	(void)dev;
	return -EACCES;
}

static int fs_unlink(const char *path)
{
	(void)path;
	return -EPERM;
}

static int fs_link(const char *from, const char *to)
{
	(void)from;
	(void)to;
	return -EPERM;
}

static int fs_symlink(const char *target, const char *path)
{
	(void)target;
	(void)path;
	return -EPERM;
}

/* What cgroupfs does and a hierarchy cannot: rename a group, change a mode or an owner. */
static int fs_rename(const char *from, const char *to, unsigned int flags)
{
	(void)from;
	(void)to;
	(void)flags;
	return -EOPNOTSUPP;
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)path;
	(void)mode;
	(void)fi;
	return -EOPNOTSUPP;
}

static int fs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	(void)path;
	(void)uid;
	(void)gid;
	(void)fi;
	return -EOPNOTSUPP;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/* The tree changes behind the kernel's back: it caches no name and no attribute. */
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->attr_timeout = 0;
	/* The sizes are 0: every read must come here, not to the page cache. */
	cfg->direct_io = 1;
	/* Open files and directories are reached through their handles. */
	cfg->nullpath_ok = 1;
	return fuse_get_context()->private_data;
}

const struct fuse_operations mount_ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.releasedir = fs_release,
	.mkdir = fs_mkdir,
	.rmdir = fs_rmdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.release = fs_release,
	.truncate = fs_truncate,
	.utimens = fs_utimens,
	.statfs = fs_statfs,
	.create = fs_create,
	.mknod = fs_mknod,
	.unlink = fs_unlink,
	.link = fs_link,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.chmod = fs_chmod,
	.chown = fs_chown,
	.poll = fs_poll,
};
