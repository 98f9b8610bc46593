/*
 * cgmctl run: start a command preloaded with libcgmalloc.so in a group,
 * like `systemd-run --scope -p MemoryMax=...`.
 *
 * The group is created if needed and the -s settings are applied before
 * the command starts, so its first allocation already sees them; then
 * cgmctl becomes the command (exec), which keeps the pid that `$!` or a
 * supervisor knows.  The command finds its group and hierarchy in
 * CGMALLOC_CONF (appended to what the caller had: later keys win) and
 * passes them on to its children.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/config.h"
#include "cgm/files.h"
#include "cgmctl.h"

#ifndef CGM_LIBDIR
#define CGM_LIBDIR "/usr/local/lib"
#endif

/*
 * libcgmalloc.so of the same build or installation as this cgmctl: next
 * to it (the build directory), in ../lib, or in the LIBDIR it was built
 * for.
 */
static int find_lib(char *out, size_t len)
{
	static const char *const rel[] = { "/libcgmalloc.so", "/../lib/libcgmalloc.so" };
	char exe[PATH_MAX], try[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		for (size_t i = 0; i < CGM_ARRAY_SIZE(rel); i++) {
			snprintf(try, sizeof(try), "%s%s", exe, rel[i]);
			if (access(try, R_OK) == 0 && realpath(try, out) && strlen(out) < len)
				return 0;
		}
	}
	snprintf(try, sizeof(try), "%s/libcgmalloc.so", CGM_LIBDIR);
	if (access(try, R_OK) == 0 && realpath(try, out) && strlen(out) < len)
		return 0;
	ctl_err("run: cannot find libcgmalloc.so next to %s, in ../lib or in %s",
		n > 0 ? exe : "cgmctl", CGM_LIBDIR);
	return -1;
}

/*
 * Check a -s FILE=VALUE before anything is applied, so that a bad one
 * leaves the group as it was: the file's own parser, as a write uses it.
 */
static int check_setting(struct ctl *c, const char *s, char *file, size_t len)
{
	const char *eq = strchr(s, '=');
	char why[256];

	if (!eq || (size_t)(eq - s) >= len) {
		ctl_err("run: -s '%s': expected FILE=VALUE, like memory.max=512M", s);
		return -1;
	}
	memcpy(file, s, (size_t)(eq - s));
	file[eq - s] = '\0';
	if (ctl_check_file(c, file) < 0)
		return -1;
	if (!strcmp(file, "cgroup.procs")) {
		ctl_err("run: -s cgroup.procs: the command joins the group by itself");
		return -1;
	}
	if (cgm_file_check(file, eq + 1, why, sizeof(why)) < 0) {
		ctl_err("run: -s %s: %s", file, why);
		return -1;
	}
	return 0;
}

/* LD_PRELOAD and CGMALLOC_CONF for the command. */
static int set_env(struct ctl *c, const char *lib, const char *group, bool scope)
{
	const char *conf = getenv("CGMALLOC_CONF"), *pre = getenv("LD_PRELOAD");
	char hier[PATH_MAX], buf[CGM_CONF_ENV_MAX];
	int n;

	/* The command and its children may change directory. */
	if (c->path[0] == '/') {
		snprintf(hier, sizeof(hier), "%s", c->path);
	} else if (!getcwd(hier, sizeof(hier)) ||
		   strlen(hier) + strlen(c->path) + 2 > sizeof(hier)) {
		ctl_err("run: cannot make the hierarchy path %s absolute", c->path);
		return -1;
	} else {
		strcat(hier, "/");
		strcat(hier, c->path);
	}
	if (strchr(hier, ',')) {
		ctl_err("run: the hierarchy path %s contains ',', which CGMALLOC_CONF cannot carry",
			hier);
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%s%shierarchy=%s,%s=%s", conf ? conf : "",
		     conf && conf[0] ? "," : "", hier, scope ? "scope" : "group", group);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		ctl_err("run: CGMALLOC_CONF would be longer than %zu bytes", sizeof(buf) - 1);
		return -1;
	}
	if (setenv("CGMALLOC_CONF", buf, 1) < 0)
		goto nomem;
	/* Ours first: the first object that defines malloc wins. */
	if (pre && pre[0] && !strstr(pre, lib)) {
		n = snprintf(buf, sizeof(buf), "%s:%s", lib, pre);
		if (n < 0 || (size_t)n >= sizeof(buf)) {
			ctl_err("run: LD_PRELOAD would be too long");
			return -1;
		}
		lib = buf;
	} else if (pre && pre[0]) {
		lib = pre;
	}
	if (setenv("LD_PRELOAD", lib, 1) < 0)
		goto nomem;
	return 0;
nomem:
	ctl_err("run: cannot set the environment: %s", strerror(errno));
	return -1;
}

/* Take back a group this run created, when the command does not start. */
static void undo_mkdir(struct ctl *c, const char *group, bool created)
{
	if (!created)
		return;
	hier_lock(&c->h.hdr->tree_lock);
	group_rmdir(&c->h, group);
	hier_unlock(&c->h.hdr->tree_lock);
}

/* run with its options parsed: @sets are the -s arguments. */
static int run_in_group(struct ctl *c, const char *group, bool scope, const char **sets,
			int nsets, char **cmd)
{
	char lib[PATH_MAX], file[64];
	bool created;
	int64_t idx;
	int err;

	if (ctl_check_path(c, group) < 0)
		return CTL_USAGE;
	for (int i = 0; i < nsets; i++)
		if (check_setting(c, sets[i], file, sizeof(file)) < 0)
			return CTL_USAGE;
	if (find_lib(lib, sizeof(lib)) < 0 || ctl_open(c, true) < 0)
		return CTL_FAIL;
	if (set_env(c, lib, group, scope) < 0) {
		ctl_close(c);
		return CTL_FAIL;
	}
	hier_lock(&c->h.hdr->tree_lock);
	created = group_lookup(&c->h, group) == CGM_NONE;
	idx = group_create(&c->h, group, scope ? CGM_GROUP_TRANSIENT : 0);
	hier_unlock(&c->h.hdr->tree_lock);
	if (idx < 0) {
		ctl_err("run: cannot create group %s: %s", group,
			idx == -ENOSPC ? "the hierarchy is full" : strerror((int)-idx));
		ctl_close(c);
		return CTL_FAIL;
	}
	for (int i = 0; i < nsets; i++) {
		const char *eq = strchr(sets[i], '=');

		snprintf(file, sizeof(file), "%.*s", (int)(eq - sets[i]), sets[i]);
		if (ctl_write(c, group, file, eq + 1) != CTL_OK) {
			undo_mkdir(c, group, created);
			ctl_close(c);
			return CTL_FAIL;
		}
	}
	/* The mapping goes with the exec; kept until then to undo a failure. */
	execvp(cmd[0], cmd);
	err = errno;
	ctl_err("run: cannot run %s: %s", cmd[0], strerror(err));
	undo_mkdir(c, group, created);
	ctl_close(c);
	return err == ENOENT ? 127 : 126;
}

int cmd_run(struct ctl *c, int argc, char **argv)
{
	const char **sets = calloc((size_t)argc, sizeof(*sets));
	const char *group = NULL;
	char auto_group[32];
	int nsets = 0, opt, status = CTL_USAGE;

	if (!sets) {
		ctl_err("run: out of memory");
		return CTL_FAIL;
	}
	while ((opt = ctl_getopt(c, argc, argv, "+g:s:")) != -1) {
		if (opt == 'g')
			group = optarg;
		else if (opt == 's')
			sets[nsets++] = optarg;
		else
			goto out;
	}
	if (optind >= argc) {
		ctl_err("run: no command (usage: cgmctl run [-g GROUP] [-s FILE=VALUE]... -- CMD [ARGS])");
		goto out;
	}
	/* A scope (removed with its last process) named after the command's pid. */
	if (!group) {
		snprintf(auto_group, sizeof(auto_group), "/run-%d", (int)getpid());
		group = auto_group;
	}
	status = run_in_group(c, group, group == auto_group, sets, nsets, argv + optind);
out:
	free(sets);
	return status;
}
