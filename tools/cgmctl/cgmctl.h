/*
 * cgmctl: the command-line tool over a cgmalloc hierarchy file.  Shared
 * declarations of its files; each subcommand is one cmd_* function that
 * returns the exit status.
 *
 * Exit status: 0 done, 1 the command failed (one "cgmctl: ..." line on
 * stderr says why), 2 the command line was wrong (likewise).  `run`
 * returns the command's status, since it becomes the command, and so
 * does `compare` unless it failed itself.
 */
#ifndef CGMCTL_H
#define CGMCTL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/hier.h"

#define CTL_OK		0
#define CTL_FAIL	1
#define CTL_USAGE	2

struct ctl {
	const char *cmd;		/* the subcommand, for messages */
	char path[CGM_PATH_MAX];	/* the hierarchy file ("": the default is refused) */
	char path_error[512];		/* why the default is refused */
	bool json;
	struct cgm_hier h;
};

/* ---- main.c: the command line ---- */

/* Print "cgmctl: <message>" on stderr. */
void ctl_err(const char *fmt, ...) CGM_PRINTF(1, 2);

/*
 * getopt_long() over a subcommand's arguments (argv[0] is its name): @own
 * are its short options ("+" first: stop at the first operand);
 * --hierarchy and --json are taken anywhere.  Returns an option of its
 * own, -1 at the operands (optind), or '?' after saying what was wrong.
 */
int ctl_getopt(struct ctl *c, int argc, char **argv, const char *own);

/*
 * The options (none of its own but @own) and exactly @n operands of a
 * subcommand, from argv[optind]; -1 after saying what was wrong, with
 * @usage ("cat GROUP FILE").
 */
int ctl_args(struct ctl *c, int argc, char **argv, const char *own, int n,
	     const char *usage);

/*
 * After the options: exactly @n operands are left, else -1 after saying
 * so, as ctl_args() does.
 */
int ctl_nargs(struct ctl *c, int argc, int n, const char *usage);

/* The usage text, to @f. */
void ctl_usage(FILE *f);

/* ---- hierarchy.c ---- */

/*
 * Open the hierarchy (creating it if @create), then return the charges of
 * processes that died without detaching.  On failure prints why and
 * returns -1.
 */
int ctl_open(struct ctl *c, bool create);
void ctl_close(struct ctl *c);

/* Check the syntax of group path @path: -1 after saying why it is not one. */
int ctl_check_path(struct ctl *c, const char *path);

/* The index of an existing group, or CGM_NONE after saying why not. */
uint32_t ctl_find_group(struct ctl *c, const char *path);

/*
 * Open the hierarchy (not creating it) and find group @path in it, into
 * *@idx: CTL_OK with the hierarchy open, else the exit status (CTL_USAGE
 * for a bad path, CTL_FAIL otherwise) after saying why, closed.
 */
int ctl_open_group(struct ctl *c, const char *path, uint32_t *idx);

/*
 * The group of cgmctl itself when it runs preloaded and attached to this
 * hierarchy (a program started it): its writes are then a process's, with
 * a process's rights.  CGM_NONE otherwise.
 */
uint32_t ctl_own_group(struct ctl *c);

/* ---- files.c ---- */

/* The names of a group's files, separated by spaces, in @buf. */
const char *ctl_file_list(char *buf, size_t len);

/* Is @name one of the files of a group?  -1 after saying it is not. */
int ctl_check_file(struct ctl *c, const char *name);

/*
 * File @file of group @idx as `cat` shows it: rendered with
 * cgm_file_read() (@flush) or cgm_file_render() into *@buf, which is
 * grown to hold the whole text (*@cap its size; NULL and 0 to start).
 * Returns the text's length or a negative errno (-ENOENT: the group has
 * no such file, -EACCES: write-only, -ENOMEM).
 */
int ctl_render(struct ctl *c, uint32_t idx, const char *file, bool flush, char **buf,
	       size_t *cap);

/* Write @value to @file of group @group: CTL_OK, or CTL_FAIL after saying why. */
int ctl_write(struct ctl *c, const char *group, const char *file, const char *value);

/* ---- tree.c ---- */

/*
 * The indices of @top and of its children (all its descendants if
 * @recursive) into @out (room for CGM_MAX_GROUPS), depth first, each
 * group before those below it, siblings in name order; returns how many.
 * Caller holds the tree lock.  Not reentrant (a static stack).
 */
size_t ctl_collect(const struct cgm_hier *h, uint32_t top, bool recursive, uint32_t *out);

/* A group's usage, peak and limits, in bytes (limits: CGM_SIZE_MAX for "max"). */
struct ctl_sizes {
	uint64_t current, peak, max, high;
};
void ctl_group_sizes(const struct cgm_group *g, struct ctl_sizes *s);

/* ---- export.c ---- */

/* The metric families export writes, one "NAME TYPE HELP" line each. */
void export_list_families(FILE *f);

/* ---- json.c ---- */

/* Write @s as a JSON string, quotes included. */
void json_string(FILE *f, const char *s);

/* Is @s a decimal integer, as JSON may print it bare? */
bool json_is_number(const char *s);

/* ---- kcgroup.c: a kernel memory cgroup, for compare ---- */

struct kcg {
	int version;			/* of the cgroup hierarchy: 1 or 2 */
	char dir[PATH_MAX];		/* its directory; "" when there is none */
	char name[PATH_MAX];		/* its path below the mount: libcgroup's name */
	char home[PATH_MAX];		/* our own cgroup's path below the mount, or "" */
};

/*
 * Make a child cgroup named @name with the memory controller: in this
 * process's own memory cgroup if it can, else in the nearest ancestor
 * that can have one (v2: the controller enabled for children, mkdir
 * allowed).  0, or -1 with why none could be made in @why.
 */
int kcg_create(struct kcg *k, const char *name, char *why, size_t whylen);

/* Limit it to @bytes (CGM_SIZE_MAX: none): 0 or a negative errno. */
int kcg_set_max(const struct kcg *k, uint64_t bytes);

/*
 * Move process @pid into it: 0 or a negative errno.  In v1 only the
 * thread @pid moves: a process that has not started threads.
 */
int kcg_join(const struct kcg *k, pid_t pid);

/*
 * What the kernel charges it: anonymous memory (v2 memory.stat anon, v1
 * total_rss) and all of it (memory.current, memory.usage_in_bytes).  0 or
 * a negative errno.
 */
int kcg_read(const struct kcg *k, uint64_t *anon, uint64_t *usage);

/*
 * Remove it, once the process that was moved in is reaped: processes
 * still in it are moved to our own cgroup first.  0, or a negative errno
 * (-EBUSY: processes could not be moved out).  Removing none does
 * nothing.
 */
int kcg_remove(struct kcg *k);

/* The value N of line "@key N" of a flat-keyed file's @text (memory.stat), or -1. */
int64_t ctl_keyed_value(const char *text, const char *key);

/* ---- the subcommands: tree.c, files.c, mount.c, run.c, compare.c, export.c, help.c ---- */

int cmd_ls(struct ctl *c, int argc, char **argv);
int cmd_mkdir(struct ctl *c, int argc, char **argv);
int cmd_rmdir(struct ctl *c, int argc, char **argv);
int cmd_mount(struct ctl *c, int argc, char **argv);
int cmd_cat(struct ctl *c, int argc, char **argv);
int cmd_set(struct ctl *c, int argc, char **argv);
int cmd_move(struct ctl *c, int argc, char **argv);
int cmd_run(struct ctl *c, int argc, char **argv);
int cmd_compare(struct ctl *c, int argc, char **argv);
int cmd_export(struct ctl *c, int argc, char **argv);
int cmd_top(struct ctl *c, int argc, char **argv);
int cmd_pressure(struct ctl *c, int argc, char **argv);
int cmd_help(struct ctl *c, int argc, char **argv);

#endif /* CGMCTL_H */
