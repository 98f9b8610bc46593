/*
 * A kernel memory cgroup of cgmctl compare's own, cgroup v2 or v1, so
 * that what the kernel charges a process can be read beside what
 * cgmalloc charges it.  libcgroup finds the memory controller's mount and
 * creates, limits, joins and removes the cgroup; its statistics are read
 * from its files directly.
 *
 * v2's memory.current and memory.stat "anon" are v1's
 * memory.usage_in_bytes and memory.stat "rss": the same page counter and
 * the same NR_ANON_MAPPED statistic under older names.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libcgroup.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cgm/size.h"
#include "cgmctl.h"

/* The text of file @dir/@name in @buf, NUL-terminated: 0 or a negative errno. */
static int read_text(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX + 64];
	size_t n = 0;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			close(fd);
			return (int)r;
		}
		n += (size_t)r;
	}
	buf[n] = '\0';
	close(fd);
	return 0;
}

/* Is @word one of the blank-separated words of @text? */
static bool has_word(const char *text, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p += len)
		if ((p == text || strchr(" \t\n", p[-1])) && (!p[len] || strchr(" \t\n", p[len])))
			return true;
	return false;
}

int64_t ctl_keyed_value(const char *text, const char *key)
{
	size_t len = strlen(key);

	for (const char *p = text; p; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (strncmp(p, key, len) == 0 && p[len] == ' ')
			return strtoll(p + len + 1, NULL, 10);
	}
	return -1;
}

/*
 * This process's cgroup in the hierarchy of @version, from
 * /proc/self/cgroup ("ID:controllers:path"; v2's line is "0::path").
 */
static int own_path(int version, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 256];
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
		char *tok, *save;

		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (version == 2 && strcmp(line, "0") == 0 && ctrl[1] == '\0')
			found = 0;
		for (tok = strtok_r(ctrl + 1, ",", &save); version == 1 && tok;
		     tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "memory") == 0)
				found = 0;
		if (found == 0 && strlen(path) < len)
			snprintf(out, len, "%s", path);
		else
			found = -1;
	}
	fclose(f);
	return found;
}

static void lcg_quiet(void *data, int level, const char *fmt, va_list ap)
{
	(void)data, (void)level, (void)fmt, (void)ap;
}

static void lcg_stderr(void *data, int level, const char *fmt, va_list ap)
{
	(void)data, (void)level;
	fputs("cgmctl: libcgroup: ", stderr);
	vfprintf(stderr, fmt, ap);
}

/*
 * libcgroup, told where the hierarchies are mounted: 0 or its error code.
 * Its default logger writes to stdout, where the report goes: it is
 * silenced unless CGROUP_LOGLEVEL asks for it, then it goes to stderr.
 */
static int lcg_init(void)
{
	if (getenv("CGROUP_LOGLEVEL"))
		cgroup_set_logger(lcg_stderr, -1, NULL);
	else
		cgroup_set_logger(lcg_quiet, CGROUP_LOG_ERROR, NULL);
	return cgroup_init();
}

/* libcgroup's error code @ret as a negative errno. */
static int lcg_errno(int ret)
{
	int err;

	switch (ret) {
	case 0:
		return 0;
	case ECGOTHER:
		err = cgroup_get_last_errno();
		return err > 0 ? -err : -EIO;
	case ECGNONEMPTY:
		return -EBUSY;
	case ECGROUPNOTEXIST:
	case ECGROUPVALUENOTEXIST:
		return -ENOENT;
	case ECGROUPNOTOWNER:
	case ECGROUPNOTALLOWED:
		return -EPERM;
	case ECGROUPNOTMOUNTED:
	case ECGROUPSUBSYSNOTMOUNTED:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/*
 * libcgroup's handle on cgroup @name (below the mount, "/" for the root)
 * with the memory controller, in @ctrl if asked; NULL when out of memory.
 */
static struct cgroup *lcg_group(const char *name, struct cgroup_controller **ctrl)
{
	struct cgroup *cg = cgroup_new_cgroup(name);
	struct cgroup_controller *c = cg ? cgroup_add_controller(cg, "memory") : NULL;

	if (!c) {
		if (cg)
			cgroup_free(&cg);
		return NULL;
	}
	if (ctrl)
		*ctrl = c;
	return cg;
}

/*
 * Remove cgroup @k if it is empty, through its handle @cg: 0, -EBUSY if
 * it is not empty, or another negative errno.  libcgroup reports success
 * when the only failure was a busy cgroup (ECGNONEMPTY gives way to any
 * other result): whether the directory is still there says.
 */
static int lcg_delete_empty(const struct kcg *k, struct cgroup *cg)
{
	int err = lcg_errno(cgroup_delete_cgroup_ext(cg, CGFLAG_DELETE_EMPTY_ONLY));
	struct stat st;

	if (!err && stat(k->dir, &st) == 0)
		err = -EBUSY;
	return err;
}

/*
 * Make @parent/@name (names below the mount @mnt), a child cgroup with
 * the memory controller: 0, or -1 with the reason in @why.  In v2 the
 * controller reaches a child only if the parent enables it for its
 * children, which only a cgroup without processes of its own (or the
 * root) can do.  libcgroup would enable it all the way down; a parent
 * that does not already is passed over rather than changed.
 */
static int make_child(struct kcg *k, const char *mnt, const char *parent, const char *name,
		      char *why, size_t whylen)
{
	char pdir[PATH_MAX], ctrl[512];
	struct cgroup *cg;
	int err;

	snprintf(pdir, sizeof(pdir), "%s%s", mnt, parent);
	if (k->version == 2 && (read_text(pdir, "cgroup.subtree_control", ctrl, sizeof(ctrl)) < 0 ||
				!has_word(ctrl, "memory"))) {
		snprintf(why, whylen, "memory is not in %s/cgroup.subtree_control", pdir);
		return -1;
	}
	if ((size_t)snprintf(k->name, sizeof(k->name), "%s/%s", parent, name) >= sizeof(k->name) ||
	    (size_t)snprintf(k->dir, sizeof(k->dir), "%s%s", mnt, k->name) >= sizeof(k->dir)) {
		snprintf(why, whylen, "path too long under %s", pdir);
		return -1;
	}
	cg = lcg_group(k->name, NULL);
	if (!cg) {
		snprintf(why, whylen, "libcgroup: %s", strerror(ENOMEM));
		return -1;
	}
	/* One left by a compare of the same pid that was killed: empty, so it goes. */
	err = lcg_delete_empty(k, cg);
	/* Ownership is left as it is: the files stay ours and root's. */
	if (!err)
		err = lcg_errno(cgroup_create_cgroup(cg, 1));
	cgroup_free(&cg);
	if (err) {
		snprintf(why, whylen, "libcgroup cannot create %s: %s", k->dir, strerror(-err));
		return -1;
	}
	return 0;
}

int kcg_create(struct kcg *k, const char *name, char *why, size_t whylen)
{
	char own[PATH_MAX], parent[PATH_MAX], dir[PATH_MAX];
	char *mnt = NULL;
	struct statfs sfs;
	struct stat st;
	int ret;

	k->dir[0] = k->name[0] = k->home[0] = '\0';
	ret = lcg_init();
	if (ret) {
		snprintf(why, whylen, "libcgroup finds no cgroup hierarchy: %s", cgroup_strerror(ret));
		return -1;
	}
	ret = cgroup_get_subsys_mount_point("memory", &mnt);
	if (ret || !mnt) {
		snprintf(why, whylen, "no memory controller is mounted (libcgroup: %s)",
			 ret ? cgroup_strerror(ret) : "no mount point");
		free(mnt);
		return -1;
	}
	if (statfs(mnt, &sfs) < 0) {
		snprintf(why, whylen, "statfs %s: %s", mnt, strerror(errno));
		free(mnt);
		return -1;
	}
	k->version = sfs.f_type == CGROUP2_SUPER_MAGIC ? 2 : 1;
	if (own_path(k->version, own, sizeof(own)) < 0 ||
	    (size_t)snprintf(dir, sizeof(dir), "%s%s", mnt, own) >= sizeof(dir) || stat(dir, &st) < 0)
		own[0] = '\0';
	/* Where processes left in the new cgroup go back to. */
	memcpy(k->home, own, sizeof(k->home));
	snprintf(parent, sizeof(parent), "%s", strcmp(own, "/") ? own : "");
	/*
	 * Our own cgroup first, so that the limits above it hold for the
	 * command as they hold for us, then each ancestor: in v2 a process's
	 * own cgroup cannot pass the controller down, and an unprivileged
	 * user is delegated a subtree, not the root.  A path that is not
	 * there (another cgroup namespace) is skipped.
	 */
	for (;;) {
		char *slash;

		snprintf(dir, sizeof(dir), "%s%s", mnt, parent);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
		    make_child(k, mnt, parent, name, why, whylen) == 0) {
			free(mnt);
			return 0;
		}
		slash = strrchr(parent, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(mnt);
	k->dir[0] = k->name[0] = '\0';
	return -1;
}

int kcg_set_max(const struct kcg *k, uint64_t bytes)
{
	struct cgroup_controller *c;
	struct cgroup *cg;
	int ret;

	/* Unlimited is what a new cgroup starts with. */
	if (bytes == CGM_SIZE_MAX)
		return 0;
	cg = lcg_group(k->name, &c);
	if (!cg)
		return -ENOMEM;
	ret = cgroup_add_value_uint64(c, k->version == 2 ? "memory.max" : "memory.limit_in_bytes",
				      bytes);
	if (!ret)
		ret = cgroup_modify_cgroup(cg);
	cgroup_free(&cg);
	return lcg_errno(ret);
}

int kcg_join(const struct kcg *k, pid_t pid)
{
	struct cgroup *cg = lcg_group(k->name, NULL);
	int ret;

	if (!cg)
		return -ENOMEM;
	ret = cgroup_attach_task_pid(cg, pid);
	cgroup_free(&cg);
	return lcg_errno(ret);
}

int kcg_read(const struct kcg *k, uint64_t *anon, uint64_t *usage)
{
	char stat[8192], cur[64];
	int64_t a;
	int err;

	err = read_text(k->dir, k->version == 2 ? "memory.current" : "memory.usage_in_bytes",
			cur, sizeof(cur));
	if (!err)
		err = read_text(k->dir, "memory.stat", stat, sizeof(stat));
	if (err)
		return err;
	/* v1: total_rss is hierarchical, as v2's anon is; rss is the cgroup's own. */
	a = ctl_keyed_value(stat, k->version == 2 ? "anon" : "total_rss");
	if (a < 0 && k->version == 1)
		a = ctl_keyed_value(stat, "rss");
	if (a < 0)
		return -ENODATA;
	*anon = (uint64_t)a;
	*usage = strtoull(cur, NULL, 10);
	return 0;
}

/*
 * Move the processes in the cgroup to our own, where they came from: the
 * parent cannot take them in v2, which keeps processes out of a cgroup
 * that passes a controller down.  libcgroup moves a v1 task, a thread, at
 * a time: all of them are listed.
 */
static void move_home(const struct kcg *k)
{
	char ids[8192], *save;
	struct cgroup *home;

	if (!k->home[0] ||
	    read_text(k->dir, k->version == 2 ? "cgroup.procs" : "tasks", ids, sizeof(ids)) < 0)
		return;
	home = lcg_group(k->home, NULL);
	if (!home)
		return;
	/* One that is gone meanwhile (ESRCH) is no matter. */
	for (char *id = strtok_r(ids, "\n", &save); id; id = strtok_r(NULL, "\n", &save))
		cgroup_attach_task_pid(home, (pid_t)strtol(id, NULL, 10));
	cgroup_free(&home);
}

int kcg_remove(struct kcg *k)
{
	struct timespec tick = { 0, 10 * 1000000L };
	struct cgroup *cg;
	int err;

	if (!k->dir[0])
		return 0;
	cg = lcg_group(k->name, NULL);
	if (!cg)
		return -ENOMEM;
	/*
	 * A reaped process leaves its cgroup a moment after wait() returns
	 * (the css_set is dropped asynchronously): retry for a second while
	 * the cgroup is not empty.  Processes the command left running are
	 * moved out; a cgroup that is gone already is removed.
	 */
	for (int i = 0; (err = lcg_delete_empty(k, cg)) == -EBUSY && i < 100; i++) {
		move_home(k);
		nanosleep(&tick, NULL);
	}
	cgroup_free(&cg);
	if (err)
		return err;
	k->dir[0] = k->name[0] = '\0';
	return 0;
}
