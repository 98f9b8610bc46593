/*
 * cgmctl's access to the hierarchy file: opening it (and saying clearly
 * why not), returning the charges of processes that died without
 * detaching, and naming groups.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgmctl.h"

int ctl_open(struct ctl *c, bool create)
{
	char why[512];
	int err;

	if (!c->path[0]) {
		ctl_err("%s: hierarchy refused: %s", c->cmd, c->path_error);
		return -1;
	}
	/* Read commands must not leave a hierarchy behind where there was none. */
	if (!create && access(c->path, F_OK) < 0 && errno == ENOENT) {
		ctl_err("%s: no hierarchy file %s (nothing has attached to it; "
			"--hierarchy PATH names another)", c->cmd, c->path);
		return -1;
	}
	err = hier_open(&c->h, c->path, create, why, sizeof(why));
	if (err) {
		ctl_err("%s: hierarchy refused: %s", c->cmd, why);
		return -1;
	}
	/* Whatever a killed process held comes back before anything is shown. */
	acct_reclaim_dead(&c->h);
	return 0;
}

void ctl_close(struct ctl *c)
{
	hier_close(&c->h);
}

int ctl_check_path(struct ctl *c, const char *path)
{
	if (strlen(path) < CGM_PATH_MAX && group_path_valid(path) == 0)
		return 0;
	ctl_err("%s: bad group path '%s' (expected %s)", c->cmd, path, group_path_rules);
	return -1;
}

uint32_t ctl_find_group(struct ctl *c, const char *path)
{
	uint32_t idx;

	if (ctl_check_path(c, path) < 0)
		return CGM_NONE;
	hier_lock(&c->h.hdr->tree_lock);
	idx = group_lookup(&c->h, path);
	hier_unlock(&c->h.hdr->tree_lock);
	if (idx == CGM_NONE)
		ctl_err("%s: no group %s in %s", c->cmd, path, c->path);
	return idx;
}

int ctl_open_group(struct ctl *c, const char *path, uint32_t *idx)
{
	if (ctl_check_path(c, path) < 0)
		return CTL_USAGE;
	if (ctl_open(c, false) < 0)
		return CTL_FAIL;
	*idx = ctl_find_group(c, path);
	if (*idx == CGM_NONE) {
		ctl_close(c);
		return CTL_FAIL;
	}
	return CTL_OK;
}

uint32_t ctl_own_group(struct ctl *c)
{
	struct cgm_proc *p;
	uint32_t i;

	/* Preloaded (a program ran us), cgmctl is a process of a group. */
	for_each_live_proc(&c->h, i, p)
		if (p->pid == (int32_t)getpid())
			return __atomic_load_n(&p->group, __ATOMIC_ACQUIRE);
	return CGM_NONE;
}
