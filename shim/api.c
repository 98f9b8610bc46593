/*
 * The in-process API of the accounting (include/cgmalloc.h): the memory.*
 * files of any group of the process's hierarchy, read and written the way
 * cgmctl does it, through accounting/files.c.
 *
 * These run in the caller's thread inside a program that is being
 * accounted, so they never allocate (text goes into the caller's buffer)
 * and hold the hierarchy's tree lock only for the lookup of a path.
 */
#include <errno.h>
#include <string.h>

#include "cgm/accounted.h"
#include "cgm/shim.h"
#include "cgm/compiler.h"
#include "cgm/files.h"
#include "cgm/spiller.h"
#include "cgmalloc.h"

/* Our slot, or CGM_NONE when accounting is off or we have detached. */
static uint32_t own_proc(void)
{
	if (!cgm_acct.h.hdr)
		return CGM_NONE;
	return __atomic_load_n(&cgm_acct.proc, __ATOMIC_ACQUIRE);
}

/* The index of our own group, or a negative errno. */
static int64_t own_group(void)
{
	uint32_t self = own_proc();
	struct cgm_proc *p = hier_proc(&cgm_acct.h, self);

	if (!p)
		return -ENODEV;
	return (int64_t)__atomic_load_n(&p->group, __ATOMIC_ACQUIRE);
}

/* The index of @group (NULL: our own), or a negative errno. */
static int64_t resolve_group(const char *group)
{
	struct cgm_hier *h = &cgm_acct.h;
	uint32_t idx;

	if (own_proc() == CGM_NONE)
		return -ENODEV;
	if (!group)
		return own_group();
	if (group_path_valid(group) < 0 || strlen(group) >= CGM_PATH_MAX)
		return -EINVAL;
	hier_lock(&h->hdr->tree_lock);
	idx = group_lookup(h, group);
	hier_unlock(&h->hdr->tree_lock);
	return idx == CGM_NONE ? -ENOENT : (int64_t)idx;
}

int64_t cgm_group_index(const char *group)
{
	return resolve_group(group);
}

CGM_EXPORT int cgm_accounting_enabled(void)
{
	return own_proc() != CGM_NONE;
}

CGM_EXPORT int cgm_read(const char *group, const char *file, char *buf, size_t len)
{
	int64_t idx;
	int n;

	if (!file || !buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	idx = resolve_group(group);
	if (idx < 0)
		return (int)idx;
	/* Our own residency as of now; other processes' are refreshed by the read if stale. */
	cgm_resident_sample(false);
	n = cgm_file_read(&cgm_acct.h, (uint32_t)idx, file, buf, len);
	if (n < 0)
		return n;
	return (size_t)n < len ? n : -ERANGE;
}

CGM_EXPORT int cgm_write(const char *group, const char *file, const char *value)
{
	char why[256];
	int64_t idx;
	int err;

	if (!file || !value)
		return -EINVAL;
	idx = resolve_group(group);
	if (idx < 0)
		return (int)idx;
	err = cgm_file_write(&cgm_acct.h, (uint32_t)own_group(), (uint32_t)idx, file, value,
			     why, sizeof(why));
	/*
	 * Our own limits key follows now rather than at the next refill, so
	 * the caller's next allocation already sees a limit it just set.
	 */
	if (err == 0)
		cgm_sync_limits();
	return err;
}

CGM_EXPORT int cgm_flush(void)
{
	uint32_t self = own_proc();

	if (self == CGM_NONE)
		return -ENODEV;
	acct_harvest(&cgm_acct.h, self);
	rstat_flush(&cgm_acct.h);
	return 0;
}

CGM_EXPORT int cgm_group(char *buf, size_t len)
{
	int64_t idx;
	int err;

	if (!buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	idx = resolve_group(NULL);
	if (idx < 0)
		return (int)idx;
	err = group_path(&cgm_acct.h, (uint32_t)idx, buf, len);
	if (err == -ENAMETOOLONG)
		return -ERANGE;
	return err < 0 ? err : (int)strlen(buf);
}

CGM_EXPORT long cgm_spill_stop(void)
{
	return cgm_spill_stop_asked();
}

CGM_EXPORT int cgm_spill_resume(void)
{
	return cgm_spill_resume_asked();
}
