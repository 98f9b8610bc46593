/*
 * Charging: refilling a thread's stock from its group's page counters in
 * the kernel's try_charge_memcg() order, returning freed bytes (harvest),
 * memory.high throttling and the OOM policy at memory.max.
 *
 * Frees do not touch the page counters: the free fast path only adds to
 * its thread's freed_bytes.  Those bytes are harvested -- summed over the
 * process's threads and uncharged in whole pages -- by charge slow paths,
 * by flushers and by readers, the way rstat folds per-cpu deltas.  A
 * process never uncharges more pages than it holds: frees of memory that
 * was allocated before it attached are counted as untracked instead.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/clock.h"
#include "cgm/config.h"
#include "cgm/log.h"
#include "cgm/size_class.h"

/*
 * Add freed bytes to the free pool.  The counts come from the shared
 * file: saturate rather than overflow if they are garbage.
 */
static void pool_add(struct cgm_proc *p, uint64_t bytes)
{
	const int64_t cap = INT64_MAX / 2;

	if (p->free_pool < 0 || p->free_pool > cap)
		p->free_pool = p->free_pool < 0 ? 0 : cap;
	p->free_pool = bytes > (uint64_t)(cap - p->free_pool) ? cap : p->free_pool + (int64_t)bytes;
}

/* The frees of @proc's threads since the last harvest into its pool.  p->lock held. */
static void harvest_collect(struct cgm_hier *h, uint32_t proc, struct cgm_proc *p)
{
	uint32_t t, guard = 0;

	for (t = p->first_thread; t != CGM_NONE && guard++ < CGM_MAX_THREADS;) {
		struct cgm_thread_slot *ts = hier_thread(h, t);
		uint64_t freed, small = 0;

		if (!ts || ts->proc != proc)
			break;
		freed = __atomic_load_n(&ts->freed_bytes, __ATOMIC_RELAXED);
		pool_add(p, freed - ts->harvested_freed_bytes);
		ts->harvested_freed_bytes = freed;
		/*
		 * freed_small[s] counts frees of blocks of s * 8 bytes: only
		 * the indices of mimalloc's block sizes ever change.  Summed
		 * here, added to the pool once (garbage counts from a scribbled
		 * file wrap the sum; pool_add saturates).
		 */
		for (unsigned int b = 0; b < CGM_NR_BINS; b++) {
			unsigned int s = cgm_bin_step[b];
			uint64_t n = __atomic_load_n(&ts->freed_small[s], __ATOMIC_RELAXED);

			if (n != ts->harvested_small[b]) {
				small += (n - ts->harvested_small[b]) * s * 8;
				ts->harvested_small[b] = n;
			}
		}
		pool_add(p, small);
		t = ts->next;
	}
	pool_add(p, 0);
}

/* Uncharge the whole pages of @p's pool.  p->lock held. */
static void harvest_uncharge(struct cgm_hier *h, struct cgm_proc *p)
{
	struct cgm_group *g = hier_group(h, p->group);
	int64_t pages;

	if (p->held_pages < 0)
		p->held_pages = 0;
	pages = p->free_pool / CGM_PAGE_SIZE;
	if (pages > p->held_pages) {
		/* Freed memory that was never charged to us. */
		p->untracked_bytes = (int64_t)((uint64_t)p->untracked_bytes +
					       (uint64_t)(pages - p->held_pages) * CGM_PAGE_SIZE);
		p->free_pool -= (pages - p->held_pages) * CGM_PAGE_SIZE;
		pages = p->held_pages;
	}
	if (pages > 0 && g) {
		page_counter_uncharge(&g->memory, pages);
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

static bool limit_near(struct cgm_hier *h, uint32_t group, int64_t pages);

/*
 * Refill @t's stock with at least @need bytes from what the process's
 * threads have freed, if that is enough: the bytes stay charged (the
 * kernel's obj_stock takes freed bytes back the same way).  Up to a
 * batch is taken; while some group has a limit (@check_limits) and ours
 * is near it, only @need, the rest going back to the group as before.
 * While no group has a limit, whole pages are charged on top up to a full
 * batch, so that refills stay a batch apart.  What is left in the pool is
 * uncharged.  False if the frees fall short of @need.
 */
static bool stock_from_frees(struct cgm_hier *h, uint32_t proc, struct cgm_proc *p,
			     struct cgm_thread_slot *t, int64_t need, int64_t batch_bytes,
			     bool check_limits)
{
	int64_t take = 0;

	hier_lock(&p->lock);
	harvest_collect(h, proc, p);
	if (p->free_pool >= need) {
		take = p->free_pool < batch_bytes ? p->free_pool : batch_bytes;
		if (check_limits && take > need &&
		    limit_near(h, p->group, batch_bytes / CGM_PAGE_SIZE))
			take = need;
	}
	p->free_pool -= take;
	if (take > 0 && !check_limits && batch_bytes - take >= CGM_PAGE_SIZE) {
		struct cgm_group *g = hier_group(h, p->group);
		int64_t pages = (batch_bytes - take) / CGM_PAGE_SIZE;
		struct page_counter *fail;

		if (g && page_counter_try_charge(&g->memory, pages, &fail)) {
			p->held_pages += pages;
			take += pages * CGM_PAGE_SIZE;
		}
	}
	cgm_owner_add(t->stock, take);
	harvest_uncharge(h, p);
	hier_unlock(&p->lock);
	return take > 0;
}

static bool in_subtree(const struct cgm_hier *h, uint32_t idx, uint32_t root)
{
	for (int d = 0; d < 70; d++) {
		const struct cgm_group *g;

		if (idx == root)
			return true;
		g = hier_group(h, idx);
		if (!g || idx == CGM_ROOT)
			return false;
		idx = g->parent;
	}
	return false;
}

void acct_harvest_subtree(struct cgm_hier *h, uint32_t group)
{
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		struct cgm_proc *p = &h->procs[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE &&
		    in_subtree(h, p->group, group))
			acct_harvest(h, i);
	}
}

/*
 * calculate_high_delay(): the penalty grows with the square of the
 * overage (usage - high) / high, in 2^-20 units, scaled so that one
 * MEMCG_CHARGE_BATCH charge at 10% over sleeps about 640 ms, and capped
 * at 2 s.  The stall is in proportion to the size of the charge.
 */
uint64_t acct_high_delay_ms(int64_t usage, int64_t high, int64_t nr_pages)
{
	unsigned __int128 overage, penalty;

	if (usage <= high)
		return 0;
	if (high < 1)
		high = 1;
	overage = ((unsigned __int128)(usage - high) << CGM_DELAY_PRECISION_SHIFT) / (uint64_t)high;
	penalty = overage * overage * 1000;	/* HZ = 1000: jiffies are ms */
	penalty >>= CGM_DELAY_PRECISION_SHIFT;
	penalty >>= CGM_DELAY_SCALING_SHIFT;
	penalty = penalty * (uint64_t)nr_pages / CGM_CHARGE_BATCH;
	return penalty > CGM_MAX_HIGH_DELAY_MS ? CGM_MAX_HIGH_DELAY_MS : (uint64_t)penalty;
}

/*
 * After a charge: for the group and each ancestor over its memory.high,
 * count a high event and throttle the thread by the largest penalty
 * (mem_cgroup_handle_over_high).  Harvest first: freed memory may already
 * bring the group under its limit.
 */
static void handle_over_high(struct cgm_acct *a, struct cgm_thread_slot *t,
			     uint32_t group, int64_t nr_pages)
{
	struct cgm_hier *h = &a->h;
	uint64_t delay = 0;
	bool over = false;

	for (uint32_t idx = group, d = 0; d < 70; d++) {
		struct cgm_group *g = hier_group(h, idx);
		int64_t high;

		if (!g)
			break;
		high = __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED);
		if (page_counter_read(&g->memory) > high) {
			if (!over)
				acct_harvest_subtree(h, group);
			over = true;
			if (page_counter_read(&g->memory) > high) {
				uint64_t ms = acct_high_delay_ms(page_counter_read(&g->memory),
								 high, nr_pages);

				group_event(h, idx, CGM_EV_HIGH);
				if (ms > delay)
					delay = ms;
			}
		}
		if (idx == CGM_ROOT)
			break;
		idx = g->parent;
	}
	/* The kernel does not bother sleeping for 10 ms or less. */
	if (delay > 10) {
		struct timespec ts = { (time_t)(delay / 1000), (long)(delay % 1000) * 1000000 };
		int64_t start = cgm_now_ns();

		if (a->reclaim)
			a->reclaim();
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		cgm_owner_add(t->throttle_ns, (uint64_t)(cgm_now_ns() - start));
	}
}

/* The largest live process in the subtree of @group (OOM victim). */
static uint32_t largest_proc(struct cgm_hier *h, uint32_t group)
{
	uint32_t best = CGM_NONE;
	int64_t best_held = -1;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		struct cgm_proc *p = &h->procs[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE ||
		    !in_subtree(h, p->group, group))
			continue;
		if (p->held_pages > best_held) {
			best_held = p->held_pages;
			best = i;
		}
	}
	return best;
}

/*
 * The highest ancestor of @victim_group, up to @oom_domain, that has
 * memory.oom.group set: the whole of it goes (mem_cgroup_get_oom_group).
 */
static uint32_t oom_group_of(struct cgm_hier *h, uint32_t victim_group, uint32_t oom_domain)
{
	uint32_t found = CGM_NONE;

	for (uint32_t idx = victim_group, d = 0; d < 70; d++) {
		struct cgm_group *g = hier_group(h, idx);

		if (!g)
			break;
		if (g->oom_group)
			found = idx;
		if (idx == oom_domain || idx == CGM_ROOT)
			break;
		idx = g->parent;
	}
	return found;
}

static void kill_proc(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_proc *p = hier_proc(h, idx);

	if (!p || p->pid <= 0)
		return;
	cgm_log("memory.max of a group reached: OOM-killing pid %d (%s), %lld pages",
		p->pid, p->comm, (long long)p->held_pages);
	group_event(h, p->group, CGM_EV_OOM_KILL);
	kill(p->pid, SIGKILL);
}

/*
 * oom=kill: kill the largest process of the group at its limit, or every
 * process of its oom.group.  Returns true if something other than us was
 * killed (its charge comes back once it is gone).
 */
static bool oom_kill(struct cgm_acct *a, uint32_t over)
{
	struct cgm_hier *h = &a->h;
	uint32_t victim = largest_proc(h, over), og;
	struct cgm_proc *vp = hier_proc(h, victim);
	bool others = false;

	if (!vp)
		return false;
	og = oom_group_of(h, vp->group, over);
	if (og != CGM_NONE) {
		group_event(h, og, CGM_EV_OOM_GROUP_KILL);
		for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
			struct cgm_proc *p = &h->procs[i];

			if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE &&
			    in_subtree(h, p->group, og) && i != a->proc) {
				kill_proc(h, i);
				others = true;
			}
		}
		if (in_subtree(h, hier_proc(h, a->proc)->group, og))
			kill_proc(h, a->proc);
		return others;
	}
	kill_proc(h, victim);
	return victim != a->proc;
}

/* Wait briefly for killed processes to go, then return their charges. */
static void reap_killed(struct cgm_hier *h)
{
	for (int i = 0; i < 100; i++) {
		struct timespec ts = { 0, 2000000 };

		if (acct_reclaim_dead(h) > 0)
			return;
		nanosleep(&ts, NULL);
	}
}

/* Is some counter from @group up within @pages of its max or high? */
static bool limit_near(struct cgm_hier *h, uint32_t group, int64_t pages)
{
	pages += CGM_CHARGE_BATCH;
	for (int d = 0; d < 70; d++) {
		struct cgm_group *g = hier_group(h, group);
		int64_t usage;

		if (!g)
			return false;
		usage = page_counter_read(&g->memory);
		if (usage + pages > __atomic_load_n(&g->memory.max, __ATOMIC_RELAXED) ||
		    usage + pages > __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED))
			return true;
		if (group == CGM_ROOT)
			return false;
		group = g->parent;
	}
	return false;
}

bool acct_limit_near(struct cgm_acct *a, int64_t pages)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	return p && limit_near(&a->h, p->group, pages);
}

void acct_force_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t bytes)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	int64_t pages;
	struct cgm_group *g;

	cgm_owner_add(t->stock, -bytes);
	if (t->stock >= 0 || !p)
		return;
	pages = (-t->stock + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE;
	hier_lock(&p->lock);
	g = hier_group(h, p->group);
	if (g)
		page_counter_charge(&g->memory, pages);
	p->held_pages += pages;
	cgm_owner_add(t->stock, pages * CGM_PAGE_SIZE);
	hier_unlock(&p->lock);
}

void acct_stock_trim(struct cgm_acct *a, struct cgm_thread_slot *t)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	int64_t keep = a->batch_pages * CGM_PAGE_SIZE;

	if (!p || t->stock <= 2 * keep)
		return;
	hier_lock(&p->lock);
	p->free_pool += t->stock - keep;
	t->stock = keep;
	hier_unlock(&p->lock);
	acct_harvest(&a->h, a->proc);
}

void acct_stock_drain(struct cgm_acct *a, struct cgm_thread_slot *t)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	acct_slot_unprecharge(t);
	if (!p || t->stock <= 0)
		return;
	hier_lock(&p->lock);
	pool_add(p, (uint64_t)t->stock);
	cgm_owner_add(t->stock, -t->stock);
	harvest_uncharge(&a->h, p);
	hier_unlock(&p->lock);
}

/* What a negative stock lacks, bounded (a scribbled slot may hold INT64_MIN). */
static int64_t stock_lack(const struct cgm_thread_slot *t)
{
	return t->stock < -(INT64_MAX / 2) ? INT64_MAX / 2 : -t->stock;
}

int acct_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t need,
		bool check_limits)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	int64_t nr_pages, batch;
	int retries = CGM_RECLAIM_RETRIES;
	bool oomed = false;

	if (!p)
		return 0;
	/* Our own threads' frees come back first: the cheapest reclaim. */
	if (stock_from_frees(h, a->proc, p, t, need, a->batch_pages * CGM_PAGE_SIZE, check_limits))
		return 0;
	/*
	 * Before charging more, allowances hoarded in bins beyond two charge
	 * batches come back to the stock: a thread's precharge stays within
	 * about three batches whatever its mix of sizes.
	 */
	if (acct_slot_precharge(t) > 2 * a->batch_pages * CGM_PAGE_SIZE) {
		acct_slot_unprecharge(t);
		if (t->stock >= 0)
			return 0;
		need = stock_lack(t);
	}
	nr_pages = (need + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE;
	batch = nr_pages > a->batch_pages ? nr_pages : a->batch_pages;
	/* Near a limit, precharge nothing: other processes may need the room. */
	if (check_limits && batch > nr_pages && limit_near(h, p->group, batch))
		batch = nr_pages;

	for (;;) {
		struct page_counter *fail = NULL;
		uint32_t group;
		struct cgm_group *g, *over;

		/*
		 * The counters and held_pages change under one lock: a process
		 * killed between them would leave the charge unaccounted (and a
		 * move cannot switch groups meanwhile).
		 */
		hier_lock(&p->lock);
		group = p->group;
		g = hier_group(h, group);
		if (!g) {
			hier_unlock(&p->lock);
			return 0;
		}
		if (page_counter_try_charge(&g->memory, batch, &fail)) {
			p->held_pages += batch;
			cgm_owner_add(t->stock, batch * CGM_PAGE_SIZE);
			hier_unlock(&p->lock);
			if (check_limits)
				handle_over_high(a, t, group, batch);
			return 0;
		}
		hier_unlock(&p->lock);
		/* The batch did not fit: try with exactly what is needed. */
		if (batch > nr_pages) {
			batch = nr_pages;
			continue;
		}
		over = (struct cgm_group *)((char *)fail - offsetof(struct cgm_group, memory));
		group_event(h, hier_group_index(h, over), CGM_EV_MAX);
		if (retries-- > 0) {
			/* Reclaim: every process in the limited subtree returns its frees. */
			acct_harvest_subtree(h, hier_group_index(h, over));
			if (a->reclaim)
				a->reclaim();
			/*
			 * drain_all_stock(): this thread's precharge comes back
			 * now; every other thread's at its next refill (it sees
			 * drain_gen move), as the kernel's per-CPU drains run
			 * asynchronously.
			 */
			acct_slot_unprecharge(t);
			__atomic_add_fetch(&h->hdr->drain_gen, 1, __ATOMIC_RELEASE);
			if (t->stock >= 0)
				return 0;
			nr_pages = (stock_lack(t) + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE;
			batch = nr_pages;
			continue;
		}
		if (oomed)
			return -ENOMEM;
		oomed = true;
		group_event(h, hier_group_index(h, over), CGM_EV_OOM);
		if (a->oom_policy != CGM_OOM_KILL)
			return -ENOMEM;
		if (!oom_kill(a, hier_group_index(h, over)))
			return -ENOMEM;
		reap_killed(h);
		retries = 1;
	}
}
