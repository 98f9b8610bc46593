/*
 * Harvest: returning what a process's threads have freed.
 *
 * Frees do not touch the page counters: the free fast path only counts
 * into its thread's slot.  Those counts are harvested -- summed over the
 * process's threads into the process's pool of freed bytes, whose whole
 * pages are uncharged -- by charge slow paths, flushers and readers, the
 * way rstat folds per-cpu deltas.  Stocks refill from the pool before
 * they charge anything new (stock.c).  A process never uncharges more
 * pages than it holds: frees of memory that was allocated before it
 * attached are counted as untracked instead.
 */
#include <stdint.h>

#include "cgm/size_class.h"
#include "internal.h"

void harvest_pool_add(struct cgm_proc *p, uint64_t bytes)
{
	const int64_t cap = INT64_MAX / 2;

	if (p->free_pool < 0 || p->free_pool > cap)
		p->free_pool = p->free_pool < 0 ? 0 : cap;
	p->free_pool = bytes > (uint64_t)(cap - p->free_pool) ? cap : p->free_pool + (int64_t)bytes;
}

/* Add what thread slot @ts freed since its last harvest to @p's pool.  p->lock held. */
void harvest_collect_thread(struct cgm_proc *p, struct cgm_thread_slot *ts)
{
	/* Garbage from a scribbled file wraps; harvest_pool_add saturates. */
	uint64_t freed = __atomic_load_n(&ts->freed_bytes, __ATOMIC_RELAXED);

	harvest_pool_add(p, freed - ts->harvested_freed_bytes);
	ts->harvested_freed_bytes = freed;
}

void harvest_collect(struct cgm_hier *h, uint32_t proc, struct cgm_proc *p)
{
	struct cgm_thread_slot *ts;
	uint32_t t;

	for_each_proc_thread(h, p, proc, t, ts)
		harvest_collect_thread(p, ts);
	harvest_pool_add(p, 0);
}

/*
 * charge=resident: bytes freed but still resident (the allocator keeps
 * their pages) stay in the process's anon, which its sample charges
 * beyond the held bytes.  Of @pages about to leave held_pages, the part
 * that the last sample's anon still covers moves to sampled_pages instead
 * of being uncharged: memory.current does not dip until the next sample
 * says the pages are gone.  Returns the pages moved.  p->lock held.
 */
static int64_t sampled_takes_over(struct cgm_proc *p, int64_t pages)
{
	int64_t anon = __atomic_load_n(&p->sampled[CGM_STAT_ANON], __ATOMIC_RELAXED);
	int64_t sampled = p->sampled_pages > -p->held_pages ? p->sampled_pages : -p->held_pages;
	int64_t held_after = p->held_pages - pages, move;

	if (!(p->sample_flags & CGM_SAMPLE_CHARGE) || held_after < 0)
		return 0;
	/* Spilled pages the held bytes no longer cover stop being a credit. */
	move = sample_target(anon, held_after, __atomic_load_n(&p->spilled_pages, __ATOMIC_RELAXED)) -
	       sampled;
	if (move <= 0)
		return 0;
	if (move > pages)
		move = pages;
	__atomic_store_n(&p->sampled_pages, sampled + move, __ATOMIC_RELAXED);
	return move;
}

void harvest_uncharge(struct cgm_hier *h, struct cgm_proc *p)
{
	struct cgm_group *g = hier_group(h, p->group);
	int64_t pages;

	if (p->held_pages < 0)
		p->held_pages = 0;
	pages = p->free_pool / CGM_PAGE_SIZE;
	if (pages > p->held_pages) {
		/* Freed memory that was never charged to us. */
		/* Read by the flusher for heap_live (rstat.c), under another lock. */
		__atomic_store_n(&p->untracked_bytes,
				 cgm_wrap_add(p->untracked_bytes,
					      (uint64_t)(pages - p->held_pages) * CGM_PAGE_SIZE),
				 __ATOMIC_RELAXED);
		p->free_pool -= (pages - p->held_pages) * CGM_PAGE_SIZE;
		pages = p->held_pages;
	}
	if (pages > 0 && g) {
		int64_t keep = sampled_takes_over(p, pages);

		page_counter_uncharge(&g->memory, pages - keep);
		p->held_pages -= pages;
		p->free_pool -= pages * CGM_PAGE_SIZE;
	}
}

void acct_harvest(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);

	if (!p || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE)
		return;
	hier_lock(&p->lock);
	harvest_collect(h, proc, p);
	harvest_uncharge(h, p);
	hier_unlock(&p->lock);
}

void acct_harvest_subtree(struct cgm_hier *h, uint32_t group)
{
	struct cgm_proc *p;
	uint32_t i;

	for_each_live_proc(h, i, p)
		if (group_in_subtree(h, p->group, group))
			acct_harvest(h, i);
}
