/*
 * Charging: new pages for a thread's stock from its group's page
 * counters, in the kernel's try_charge_memcg() order -- a batch, else
 * exactly what is needed; at a refusal, reclaim and retry, then the OOM
 * policy (oom.c) -- and memory.high throttling after a charge.
 */
#include <errno.h>
#include <stddef.h>
#include <time.h>

#include "cgm/clock.h"
#include "cgm/mul_div.h"
#include "cgm/nocancel.h"
#include "internal.h"

/*
 * calculate_high_delay(): the penalty grows with the square of the
 * overage (usage - high) / high, in 2^-20 units, scaled so that one
 * MEMCG_CHARGE_BATCH charge at 10% over sleeps about 640 ms, and capped
 * at 2 s.  The stall is in proportion to the size of the charge.
 */
uint64_t acct_high_delay_ms(int64_t usage, int64_t high, int64_t nr_pages)
{
	unsigned __int128 penalty;
	uint64_t overage;

	if (usage <= high)
		return 0;
	if (high < 1)
		high = 1;
	overage = (uint64_t)cgm_mul_div(usage - high, 1LL << CGM_DELAY_PRECISION_SHIFT, high);
	/* Far past any cap already; kept small enough that its square fits. */
	if (overage > (1ULL << 32))
		overage = 1ULL << 32;
	penalty = (unsigned __int128)overage * overage * 1000;	/* HZ = 1000: jiffies are ms */
	penalty >>= CGM_DELAY_PRECISION_SHIFT;
	penalty >>= CGM_DELAY_SCALING_SHIFT;
	penalty = penalty * (uint64_t)nr_pages / CGM_CHARGE_BATCH;
	return penalty > CGM_MAX_HIGH_DELAY_MS ? CGM_MAX_HIGH_DELAY_MS : (uint64_t)penalty;
}

/* Reclaim in an allocating thread: a memory stall (memory.pressure). */
static void reclaim_stalled(struct cgm_acct *a, int64_t need, bool deep)
{
	if (!a->reclaim)
		return;
	psi_memstall_enter(&a->h, a->proc);
	a->reclaim(need, deep);
	psi_memstall_leave(&a->h, a->proc);
}

/*
 * This process's reclaim did not bring the group under its limit: ask the
 * other processes of the subtree of @where (the group at its limit) for
 * @want pages, as the kernel's reclaim scans every memcg below the one it
 * reclaims for -- an idle process's cold pages make room for one that
 * allocates.  It waits for them, up to half a second, as a memory stall.
 * When they gave nothing, they are left alone for a second: a process
 * that answers only at its own slow paths would make every charge wait.
 * True if they gave something.
 */
#define OTHERS_QUIET_NS	(1000 * 1000000LL)

static bool reclaim_others_in(struct cgm_acct *a, uint32_t where, int64_t want)
{
	int64_t got;

	if (!a->reclaim || want <= 0 || where == CGM_NONE ||
	    cgm_now_ns() < __atomic_load_n(&a->others_quiet_until, __ATOMIC_RELAXED))
		return false;
	psi_memstall_enter(&a->h, a->proc);
	/* A batch more: the others' pools grow by what they spill. */
	got = acct_reclaim_subtree(&a->h, where, want + a->batch_pages, false);
	psi_memstall_leave(&a->h, a->proc);
	if (got <= 0)
		__atomic_store_n(&a->others_quiet_until, cgm_now_ns() + OTHERS_QUIET_NS,
				 __ATOMIC_RELAXED);
	return got > 0;
}

/*
 * The same for a charge of @need pages short under memory.max, below the
 * lowest group whose max is short (the kernel's mem_over_limit).
 */
static bool reclaim_others(struct cgm_acct *a, int64_t need)
{
	uint32_t where;
	int64_t lack = acct_max_lack(a, need, &where);

	return lack > 0 && reclaim_others_in(a, where, lack);
}

/* Pages that @group and its ancestors are over their memory.high, added up. */
static int64_t high_excess(const struct cgm_hier *h, uint32_t group)
{
	const struct cgm_group *g;
	int64_t sum = 0;

	for_each_ancestor(h, group, g) {
		int64_t over = page_counter_read(&g->memory) - __atomic_load_n(&g->memory.high,
									       __ATOMIC_RELAXED);

		if (over > 0)
			sum += over;
	}
	return sum;
}

/*
 * After a charge: the group and its ancestors over their memory.high
 * reclaim, and the thread is throttled by the largest penalty of what is
 * still over (mem_cgroup_handle_over_high).  The subtree's frees are
 * harvested first: the kernel uncharges at free, so only a group still
 * over after that is over its high.  Each such group counts a high event
 * as it enters reclaim, whether or not reclaim then brings it under, as
 * the kernel's reclaim_high() counts MEMCG_HIGH: a policy reading
 * memory.events sees how often the group ran into its high, not only how
 * often reclaim fell short.
 *
 * Reclaim goes round again for as long as it makes progress (up to the
 * kernel's MAX_RECLAIM_RETRIES), as the kernel prefers reclaim that moves
 * forward to throttling: the penalty grows with the charge, and one
 * round against a charge of thousands of pages (a residency sample of
 * what came back from the pool) typically leaves a few pages over -- a
 * forked python3 that read back its parent's data was left 168 pages
 * (2%) over memory.high=32M after one round and slept the full 2 s.
 */
#define HIGH_RECLAIM_RETRIES 16

CGM_TLS unsigned char acct_exempt;

/*
 * The part that runs once a group is over its high: cold, out of the
 * library's hot text, so that every process's charges (which only test
 * for it) keep their code in one 64 KiB window; a process over its high
 * reclaims, spills and sleeps, and maps the cold code for it anyway.
 */
/*
 * The penalty of a charge of @nr_pages into @group as it and its
 * ancestors stand, with @unsampled pages more in use than they were
 * charged for: the greatest of theirs, 0 when none is over its high.
 * With @event, each group over its high counts a high event.
 */
static uint64_t high_penalty_ms(struct cgm_hier *h, uint32_t group, int64_t unsampled,
				int64_t nr_pages, bool event)
{
	struct cgm_group *g;
	uint64_t delay = 0;

	for_each_ancestor(h, group, g) {
		int64_t usage = page_counter_read(&g->memory) + unsampled;
		int64_t high = __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED);
		uint64_t ms;

		if (usage <= high)
			continue;
		if (event)
			group_event(h, group, CGM_EV_HIGH);
		ms = acct_high_delay_ms(usage, high, nr_pages);
		if (ms > delay)
			delay = ms;
	}
	return delay;
}

static CGM_COLD void reclaim_over_high(struct cgm_acct *a, struct cgm_thread_slot *t,
				       uint32_t group, int64_t nr_pages)
{
	struct cgm_hier *h = &a->h;
	struct cgm_group *g;
	uint64_t delay;
	uint32_t idx;

	acct_harvest_subtree(h, group);
	if (!group_over_high(h, group))
		return;
	/* The events alone here: the penalty is for what reclaim leaves. */
	(void)high_penalty_ms(h, group, 0, nr_pages, true);
	for (int left = HIGH_RECLAIM_RETRIES; left > 0; left--) {
		int64_t before = high_excess(h, group), after;

		reclaim_stalled(a, 0, left < HIGH_RECLAIM_RETRIES);
		/* Still over: the other processes below the lowest group over its high, before the penalty. */
		idx = group;
		for_each_ancestor(h, idx, g) {
			int64_t over = page_counter_read(&g->memory) -
				       __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED);

			if (over > 0) {
				reclaim_others_in(a, idx, over);
				break;
			}
		}
		after = high_excess(h, group);
		if (!after)
			return;
		if (after >= before)
			break;
	}
	delay = high_penalty_ms(h, group, 0, nr_pages, false);
	/* The kernel does not bother sleeping for 10 ms or less. */
	if (delay > CGM_HIGH_DELAY_MIN_MS) {
		struct timespec ts = { (time_t)(delay / 1000), (long)(delay % 1000) * 1000000 };
		int64_t start = cgm_now_ns();

		psi_memstall_enter(h, a->proc);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		psi_memstall_leave(h, a->proc);
		cgm_owner_add(t->throttle_ns, (uint64_t)(cgm_now_ns() - start));
	}
}

bool acct_reclaim_keeps_pace(struct acct_reclaim_pace *pace, uint64_t reclaimed, uint64_t back)
{
	int64_t credit = pace->credit + (int64_t)(reclaimed - pace->last_reclaimed) - (int64_t)back;

	pace->last_reclaimed = reclaimed;
	pace->credit = credit > CGM_RECLAIM_PACE_CAP ? CGM_RECLAIM_PACE_CAP :
		       credit < -CGM_RECLAIM_PACE_CAP ? -CGM_RECLAIM_PACE_CAP : credit;
	return pace->credit >= 0;
}

uint64_t acct_high_penalty_ms(struct cgm_acct *a, int64_t unsampled, int64_t nr_pages, bool event)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	if (!p || nr_pages <= 0)
		return 0;
	return high_penalty_ms(&a->h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), unsampled,
			       nr_pages, event);
}

static void handle_over_high(struct cgm_acct *a, struct cgm_thread_slot *t,
			     uint32_t group, int64_t nr_pages)
{
	if (acct_exempt || !group_over_high(&a->h, group))
		return;
	reclaim_over_high(a, t, group, nr_pages);
}

void acct_handle_high(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t nr_pages)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	if (p && t && nr_pages > 0) {
		int nc = cgm_nocancel_begin();

		handle_over_high(a, t, __atomic_load_n(&p->group, __ATOMIC_RELAXED), nr_pages);
		cgm_nocancel_end(nc);
	}
}

/* The highest group from @group up whose usage is over its memory.max, or CGM_NONE. */
static uint32_t over_max(const struct cgm_hier *h, uint32_t group)
{
	const struct cgm_group *g;
	uint32_t found = CGM_NONE;

	for_each_ancestor(h, group, g)
		if (page_counter_read(&g->memory) > __atomic_load_n(&g->memory.max, __ATOMIC_RELAXED))
			found = group;
	return found;
}

/* Neither the process's group nor an ancestor over memory.max, and no shortfall. */
static bool max_fits(struct cgm_acct *a, const struct cgm_proc *p)
{
	return over_max(&a->h, __atomic_load_n(&p->group, __ATOMIC_RELAXED)) == CGM_NONE &&
	       !acct_sample_short(a);
}

/*
 * Rounds of reclaim before memory found in use that passes memory.max
 * fails its allocation: what one round makes room for, the other
 * processes of the group may take first with their own refaults (they
 * are charged at their next sample), as the kernel's try_charge()
 * retries a reclaim that made progress.  With one round, four python3
 * processes of a multiprocessing pool (forkserver) each holding 60 MB
 * of strings under one memory.max=128M failed with MemoryError in 2 of
 * 3 runs; with four, none of 6.
 */
#define OVER_MAX_RETRIES	4

static int over_max_reclaim(struct cgm_acct *a)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	uint32_t over;

	if (!p)
		return 0;
	over = over_max(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED));
	if (over == CGM_NONE && !acct_sample_short(a))
		return 0;
	if (over == CGM_NONE)
		over = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	group_event(h, over, CGM_EV_MAX);
	acct_harvest_subtree(h, over);
	/*
	 * Reclaim samples again: what came back makes room for what was
	 * short.  The shortfall is what reclaim must make room for: usage
	 * itself stops at memory.max, so nothing is over it.
	 */
	for (int retry = 0; retry < OVER_MAX_RETRIES; retry++) {
		reclaim_stalled(a, acct_sample_short(a), false);
		if (max_fits(a, p))
			return 0;
		/*
		 * Then the other processes of the group at its limit, while
		 * they give something (a few rounds), each followed by a
		 * sample of what that left.
		 */
		for (int round = 0; round < 4 && reclaim_others(a, acct_sample_short(a)); round++) {
			reclaim_stalled(a, acct_sample_short(a), false);
			if (max_fits(a, p))
				return 0;
		}
	}
	group_event(h, over, CGM_EV_OOM);
	if (acct_out_of_memory(a, over) && a->reclaim) {
		reclaim_stalled(a, acct_sample_short(a), false);
		if (max_fits(a, p))
			return 0;
	}
	return -ENOMEM;
}

bool charge_limit_near(const struct cgm_hier *h, uint32_t group, int64_t pages)
{
	const struct cgm_group *g;

	pages += CGM_CHARGE_BATCH;
	for_each_ancestor(h, group, g) {
		int64_t usage = page_counter_read(&g->memory);

		if (usage + pages > __atomic_load_n(&g->memory.max, __ATOMIC_RELAXED) ||
		    usage + pages > __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

bool acct_limit_near(struct cgm_acct *a, int64_t pages)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	return p && charge_limit_near(&a->h, p->group, pages);
}

/*
 * Charge @nr_pages to the process's group into @t's stock.  Returns NULL,
 * or the group whose memory.max refused (nothing charged).
 */
static struct cgm_group *charge_pages(struct cgm_acct *a, struct cgm_thread_slot *t,
				      struct cgm_proc *p, int64_t nr_pages, bool check_limits)
{
	struct cgm_hier *h = &a->h;
	struct page_counter *fail = NULL;
	struct cgm_group *g;
	uint32_t group;

	/*
	 * The counters and held_pages change under one lock: a process
	 * killed between them would leave the charge unaccounted (and a move
	 * cannot switch groups meanwhile).
	 */
	hier_lock(&p->lock);
	group = p->group;
	g = hier_group(h, group);
	if (!g) {
		hier_unlock(&p->lock);
		return NULL;
	}
	if (!page_counter_try_charge(&g->memory, nr_pages, &fail)) {
		hier_unlock(&p->lock);
		return (struct cgm_group *)((char *)fail - offsetof(struct cgm_group, memory));
	}
	p->held_pages += nr_pages;
	cgm_owner_add(t->stock, nr_pages * CGM_PAGE_SIZE);
	hier_unlock(&p->lock);
	if (check_limits)
		handle_over_high(a, t, group, nr_pages);
	return NULL;
}

/* Where a charge stands after its refusals so far. */
struct charge_retry {
	int reclaims_left;		/* nr_retries */
	bool oomed;			/* the OOM policy has run once */
};

/*
 * Group @over refused a charge of exactly what @t lacks (@nr_pages).
 * Reclaim and let the caller retry while retries last, then apply the OOM
 * policy once.  Returns 1 to retry, 0 when @t's stock no longer lacks
 * anything, or -ENOMEM when the allocation must fail.  Cold, out of the
 * charge's hot text: a refusal is followed by reclaim.
 */
static CGM_COLD int charge_refused(struct cgm_acct *a, struct cgm_thread_slot *t,
				   struct cgm_group *over, int64_t nr_pages,
				   struct charge_retry *r)
{
	struct cgm_hier *h = &a->h;
	uint32_t idx = hier_group_index(h, over);

	group_event(h, idx, CGM_EV_MAX);
	/*
	 * A charge that must not fail (ACCT_EXEMPT_MAX): past the limit, the
	 * pages it lacks and no more, and no reclaim (the caller may be
	 * setting up the reclaim itself).
	 */
	if (acct_exempt & ACCT_EXEMPT_MAX) {
		acct_force_charge(a, t, 0);
		return 0;
	}
	if (r->reclaims_left-- > 0) {
		/* Reclaim: every process in the limited subtree returns its frees. */
		acct_harvest_subtree(h, idx);
		/*
		 * Then room for the charge, as try_to_free_mem_cgroup_pages()
		 * is asked for the pages the charge needs: usage is not over
		 * the limit here, so "what is over it" would be nothing.
		 */
		reclaim_stalled(a, nr_pages, false);
		/*
		 * drain_all_stock(): this thread's precharge comes back now;
		 * every other thread's at its next refill (it sees drain_gen
		 * move), as the kernel's per-CPU drains run asynchronously.
		 */
		acct_slot_unprecharge(t);
		__atomic_add_fetch(&h->hdr->drain_gen, 1, __ATOMIC_RELEASE);
		if (t->stock >= 0)
			return 0;
		reclaim_others(a, nr_pages);
		return 1;
	}
	if (r->oomed)
		return -ENOMEM;
	r->oomed = true;
	group_event(h, idx, CGM_EV_OOM);
	if (!acct_out_of_memory(a, idx))
		return -ENOMEM;
	r->reclaims_left = 1;
	return 1;
}

static int try_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t need,
		      bool check_limits)
{
	struct charge_retry retry = { .reclaims_left = CGM_RECLAIM_RETRIES };
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	int64_t nr_pages, batch;

	if (!p)
		return 0;
	nr_pages = (need + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE;
	batch = nr_pages > a->batch_pages ? nr_pages : a->batch_pages;
	/* Near a limit, precharge nothing: other processes may need the room. */
	if (check_limits && batch > nr_pages && charge_limit_near(&a->h, p->group, batch))
		batch = nr_pages;
	for (;;) {
		struct cgm_group *over = charge_pages(a, t, p, batch, check_limits);
		int err;

		if (!over)
			return 0;
		/* The batch did not fit: try with exactly what is needed. */
		if (batch > nr_pages) {
			batch = nr_pages;
			continue;
		}
		err = charge_refused(a, t, over, nr_pages, &retry);
		if (err <= 0)
			return err;
		nr_pages = (stock_lack(t) + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE;
		batch = nr_pages;
	}
}

/* The two entry points that may reclaim and sleep, with cancellation held off (cgm/nocancel.h). */
int acct_over_max(struct cgm_acct *a)
{
	int nc = cgm_nocancel_begin(), ret = over_max_reclaim(a);

	cgm_nocancel_end(nc);
	return ret;
}

int acct_try_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t need,
		    bool check_limits)
{
	int nc = cgm_nocancel_begin(), ret = try_charge(a, t, need, check_limits);

	cgm_nocancel_end(nc);
	return ret;
}
