/*
 * The cgroup v2 interface files of a group, rendered from and parsed into
 * the hierarchy: memory.current, memory.peak, memory.max, memory.high,
 * memory.low, memory.min, memory.stat (and memory.stat.local),
 * memory.events, memory.events.local, memory.oom.group, cgroup.procs.
 *
 * Used by cgmctl, by the in-process API and by the exit report.  Reads
 * flush first (harvest the subtree's frees, fold statistics), then read
 * the group's already-hierarchical values without walking the tree.
 */
#ifndef CGM_FILES_H
#define CGM_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "cgm/hier.h"

/* The names, NULL-terminated. */
extern const char *const cgm_file_names[];

/*
 * Render file @name of group @group into @buf.  Returns the length (the
 * text may be truncated to @len - 1 like snprintf), or -ENOENT for an
 * unknown file or group.
 */
int cgm_file_read(struct cgm_hier *h, uint32_t group, const char *name,
		  char *buf, size_t len);

/* The same without the flush: what the hierarchy holds as of now. */
int cgm_file_render(struct cgm_hier *h, uint32_t group, const char *name,
		    char *buf, size_t len);

/*
 * Parse @value and apply it to file @name of group @group.  A bad value
 * changes nothing.  Returns 0, or a negative errno with a one-line reason
 * in @why: -EINVAL bad value, -EACCES read-only file, -ENOENT unknown,
 * -ESRCH no such process (cgroup.procs), -ENOMEM move refused by a limit.
 */
int cgm_file_write(struct cgm_hier *h, uint32_t group, const char *name,
		   const char *value, char *why, size_t whylen);

/* Make the statistics and charges of the subtree of @group current. */
void cgm_files_flush(struct cgm_hier *h, uint32_t group);

/* The name of stat @i in memory.stat. */
const char *cgm_stat_name(int i, char *buf, size_t len);

#endif /* CGM_FILES_H */
