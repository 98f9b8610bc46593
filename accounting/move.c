/*
 * Moving a process to another group, with its charge (the cgroup v1
 * move_charge idea; cgroup v2 leaves charges behind, which would make a
 * moved process's memory count against a group it left).
 *
 * Under the flush lock and the process's lock, the pages it holds are
 * charged to the destination and uncharged from the source, its threads'
 * statistics so far are folded into the source, and its live bytes move
 * with it.  Charging, harvesting and flushing all take one of those
 * locks, so none of them sees the process half moved; the malloc/free
 * fast paths never look at the group at all, and while the process moves
 * itself they count under p->lock (the moving key, shim/moving.c).
 */
#include <errno.h>

#include "cgm/acct.h"

int acct_move(struct cgm_hier *h, uint32_t proc, uint32_t group)
{
	struct cgm_proc *p = hier_proc(h, proc);
	struct cgm_group *from, *to = hier_group(h, group);
	struct page_counter *fail, *common;
	bool moved = false;
	int64_t pages;
	int err = 0;

	if (!p || !to)
		return -ENOENT;
	hier_lock(&h->hdr->tree_lock);
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE) {
		err = -ESRCH;
		goto out;
	}
	/* Lock order: tree, flush, proc.  Charge, statistics and group move together. */
	hier_lock(&h->hdr->flush_lock);
	hier_lock(&p->lock);
	from = hier_group(h, p->group);
	if (p->group == group || !from)
		goto unlock;
	/*
	 * The destination's limits apply: a move that does not fit is
	 * refused.  Only below the two groups' common ancestor: at and above
	 * it usage does not change.  (Charging the whole path first once
	 * counted the pages twice there, and a move between two siblings
	 * was refused whenever twice the process's usage passed their
	 * parent's memory.max.)
	 */
	pages = proc_charged_pages(p);
	common = page_counter_common(&from->memory, &to->memory);
	if (pages > 0 && !page_counter_try_charge_below(&to->memory, common, pages, &fail)) {
		err = -ENOMEM;
	} else {
		page_counter_uncharge_below(&from->memory, common, pages);
		from->nr_procs--;
		to->nr_procs++;
		rstat_switch_group(h, p, group);
		moved = true;
	}
	p->move_to = CGM_NONE;
unlock:
	hier_unlock(&p->lock);
	hier_unlock(&h->hdr->flush_lock);
out:
	hier_unlock(&h->hdr->tree_lock);
	if (moved) {
		/*
		 * Frees since the flush above were folded into the statistics
		 * with the switch; a later flush sees no change in those slots
		 * and would not harvest them: harvest here.
		 */
		acct_harvest(h, proc);
		hier_bump_epoch(h);
	}
	return err;
}
