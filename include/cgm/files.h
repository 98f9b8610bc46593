/*
 * The cgroup v2 interface files of a group: one table, cgm_files[], like
 * the kernel's memory_files[] in mm/memcontrol.c.  Each row is a file's
 * name, flags, the handler that renders it and the handlers that parse
 * and apply a write.  cgmctl (cat, set, run -s, help files), the
 * in-process API, the exit report and the README's list all read it.
 *
 * Reads of a file marked CGM_FILE_FLUSH flush first (harvest the
 * subtree's frees, fold statistics), then read the group's
 * already-hierarchical values without walking the tree.
 */
#ifndef CGM_FILES_H
#define CGM_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/hier.h"

/* A row's flags; the first two are the kernel's cftype flags. */
enum cgm_file_flags {
	CGM_FILE_NOT_ON_ROOT = 1u << 0,		/* CFTYPE_NOT_ON_ROOT */
	CGM_FILE_ONLY_ON_ROOT = 1u << 1,	/* CFTYPE_ONLY_ON_ROOT */
	CGM_FILE_FLUSH = 1u << 2,		/* a read makes charges and statistics current first */
};

struct cgm_file {
	const char *name;
	unsigned int flags;
	int private;			/* for the handlers: which limit, which counters */
	/*
	 * Render the file of group @group into @buf.  Returns the length of
	 * the whole text (it may be truncated to @len - 1, like snprintf).
	 */
	int (*show)(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		    char *buf, size_t len);
	/*
	 * Parse a written value, without touching the hierarchy: 0, or
	 * -EINVAL with a one-line reason in @why.  NULL: read-only.
	 */
	int (*parse)(const char *text, uint64_t *val, char *why, size_t whylen);
	/* Apply a parsed value: 0 or a negative errno (a reason in @why). */
	int (*write)(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		     uint64_t val, char *why, size_t whylen);
	/* What it is, in a few words (cgmctl help files, the README). */
	const char *help;
};

/* Is memory.stat key @i one of memory.numa_stat's (anon per node)? */
static inline bool cgm_stat_is_numa(int i)
{
	return i >= CGM_STAT_NUMA_ANON0 && i < CGM_STAT_NUMA_ANON0 + CGM_MAX_NODES;
}

extern const struct cgm_file cgm_files[];
extern const size_t cgm_nfiles;

/* The row of file @name, or NULL. */
const struct cgm_file *cgm_file_find(const char *name);

/* Does group @group have file @f (the root/non-root flags)? */
bool cgm_file_exists(const struct cgm_file *f, uint32_t group);

/*
 * Render file @name of group @group into @buf, flushing first where the
 * file asks for it.  Returns the length (the text may be truncated to
 * @len - 1 like snprintf), or -ENOENT for an unknown file or group.
 */
int cgm_file_read(struct cgm_hier *h, uint32_t group, const char *name,
		  char *buf, size_t len);

/* The same without the flush: what the hierarchy holds as of now. */
int cgm_file_render(struct cgm_hier *h, uint32_t group, const char *name,
		    char *buf, size_t len);

/*
 * Parse @value and apply it to file @name of group @group, on behalf of
 * a process in group @writer (CGM_NONE: a writer outside the hierarchy,
 * such as cgmctl, which may write anything).  A bad value changes
 * nothing.  Returns 0, or a negative errno with a one-line reason in
 * @why: -EINVAL bad value or a file the root group lacks, -EACCES
 * read-only file, -ENOENT unknown, -EPERM a process may not write this
 * (its own group's limits, unless delegated), -ESRCH no such process
 * (cgroup.procs), -ENOMEM move refused by a limit.
 */
int cgm_file_write(struct cgm_hier *h, uint32_t writer, uint32_t group, const char *name,
		   const char *value, char *why, size_t whylen);

/*
 * Check @value for file @name as cgm_file_write() would, changing
 * nothing: 0, or the error cgm_file_write() would give for a bad value,
 * a read-only or an unknown file.
 */
int cgm_file_check(const char *name, const char *value, char *why, size_t whylen);

/*
 * memory.reclaim asks each process of the subtree to reclaim, which it
 * does at its next allocation slow path; the writer's own process does it
 * at once, through this (set by the shim; NULL in cgmctl).
 */
extern void (*cgm_files_reclaim_self)(void);

/* Make the statistics and charges of the subtree of @group current. */
void cgm_files_flush(struct cgm_hier *h, uint32_t group);

/* The name of stat @i in memory.stat. */
const char *cgm_stat_name(int i, char *buf, size_t len);

#endif /* CGM_FILES_H */
