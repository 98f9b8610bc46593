/*
 * Writing memory.max, memory.high, memory.low and memory.min of a group.
 *
 * As in the kernel, a memory.max below the current usage is accepted: the
 * limit is set, the group's processes are asked to return what they have
 * freed, and new charges fail until usage is back under it.  The count of
 * limited groups drives the processes' "limits" static key.
 */
#include <errno.h>

#include "cgm/acct.h"

static bool is_limited(const struct cgm_group *g)
{
	return g->memory.max != PAGE_COUNTER_MAX || g->memory.high != PAGE_COUNTER_MAX;
}

int acct_set_limit(struct cgm_hier *h, uint32_t group, enum acct_limit which, uint64_t bytes)
{
	struct cgm_group *g;
	int64_t pages = page_counter_pages(bytes);
	bool was;

	hier_lock(&h->hdr->tree_lock);
	g = hier_group(h, group);
	if (!g) {
		hier_unlock(&h->hdr->tree_lock);
		return -ENOENT;
	}
	was = is_limited(g);
	switch (which) {
	case CGM_LIMIT_MAX:
		page_counter_force_max(&g->memory, pages);
		break;
	case CGM_LIMIT_HIGH:
		page_counter_set_high(&g->memory, pages);
		break;
	case CGM_LIMIT_LOW:
		page_counter_set_low(&g->memory, pages);
		break;
	case CGM_LIMIT_MIN:
		page_counter_set_min(&g->memory, pages);
		break;
	default:
		hier_unlock(&h->hdr->tree_lock);
		return -EINVAL;
	}
	if (was != is_limited(g))
		h->hdr->nr_limited += is_limited(g) ? 1 : (uint32_t)-1;
	hier_unlock(&h->hdr->tree_lock);
	if (which == CGM_LIMIT_MAX && page_counter_read(&g->memory) > pages)
		acct_harvest_subtree(h, group);
	hier_bump_epoch(h);
	/*
	 * A process that is not allocating learns of a limit its group is
	 * near (where the background reclaim of spill=1 loads the pool's
	 * libraries; none below it, as at a process's start) too: an idle
	 * python3 holding 75 MiB in a group given memory.max=96M loaded the
	 * spill pool's libraries only when another process asked it to
	 * reclaim, at the limit, and their allocations (charged past it)
	 * took the group over it.
	 */
	if ((which == CGM_LIMIT_MAX || which == CGM_LIMIT_HIGH) &&
	    page_counter_read(&g->memory) > pages - (pages >> ACCT_SPILL_LOAD_SHIFT))
		acct_wake_subtree(h, group);
	return 0;
}
