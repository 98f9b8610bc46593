/*
 * Per-thread charge stocks, after the kernel's memcg_stock: what a thread
 * has charged to its group ahead of its allocations, so that the malloc
 * and free fast paths touch nothing but the thread's own slot.
 *
 * A slot holds a byte stock and, for each of mimalloc's small bins, an
 * allowance of blocks that malloc counts down (allow[bin]--).  Both are
 * precharged: the pages behind them are already in the group's counters.
 * A stock that runs short refills first from the process's pool of freed
 * bytes (harvest.c; the bytes stay charged, as the kernel's obj_stock
 * takes freed bytes back), and only then charges new pages (charge.c).
 * Precharge comes back when a thread exits, when a group reaches
 * memory.max (drain_all_stock), and when it grows past two batches.
 */
#include <errno.h>

#include "cgm/size_class.h"
#include "internal.h"

/*
 * The bytes of @a blocks of bin @b, @a clamped to what 21 bins and a
 * stock can add up without overflow: a slot read from a scribbled file
 * may hold anything, and must not make this undefined.
 */
static int64_t allowance_bytes(int64_t a, unsigned int b)
{
	const int64_t most = INT64_MAX / 4 / CGM_NR_BINS / CGM_SMALL_MAX;

	return (a <= 0 ? 0 : a < most ? a : most) * (int64_t)cgm_bin_size(b);
}

int64_t acct_slot_precharge(const struct cgm_thread_slot *t)
{
	int64_t bytes = t->stock > INT64_MAX / 2 ? INT64_MAX / 2 : t->stock > 0 ? t->stock : 0;

	/* Branch-free: in a mixed workload most bins hold some allowance. */
	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		bytes += allowance_bytes(__atomic_load_n(&t->allow[b], __ATOMIC_RELAXED), b);
	return bytes;
}

void acct_slot_unprecharge(struct cgm_thread_slot *t)
{
	__atomic_store_n(&t->refill_seq, t->refill_seq + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (unsigned int b = 0; b < CGM_NR_BINS; b++) {
		if (t->allow[b] > 0) {
			t->stock = cgm_wrap_add(t->stock, (uint64_t)allowance_bytes(t->allow[b], b));
			/* allocations = refilled - allow stays what it was */
			cgm_owner_add(t->refilled[b], -((uint64_t)t->allow[b]));
			t->allow[b] = 0;
		}
		t->next_refill[b] = 0;
	}
	__atomic_store_n(&t->refill_seq, t->refill_seq + 1, __ATOMIC_RELEASE);
}

/*
 * Refill @t's stock with at least @need bytes from what the process's
 * threads have freed, if that is enough.  Up to a batch is taken; while
 * some group has a limit (@check_limits) and ours is near it, only @need,
 * the rest going back to the group as before.  Unless ours is near a
 * limit, whole pages are charged on top up to a full batch, so that
 * refills stay a batch apart.  What is left in the pool is uncharged.
 * False if the frees fall short of @need.
 *
 * The thread's own frees are collected first, and the other threads'
 * only when those fall short of @need: reading another thread's
 * counters takes their cache lines from it, and its next frees then
 * miss (4 threads each churning their own blocks, bench/threads: every
 * refill read 17 lines of each other thread).  Nothing new is charged
 * before every thread's frees are collected: a thread that is not the
 * process's only one tops its stock up to a batch only then.
 */
static bool stock_from_frees(struct cgm_acct *a, struct cgm_proc *p,
			     struct cgm_thread_slot *t, int64_t need, bool check_limits)
{
	struct cgm_hier *h = &a->h;
	int64_t batch_bytes = a->batch_pages * CGM_PAGE_SIZE;
	int64_t take = 0;
	bool all_collected;

	hier_lock(&p->lock);
	/* Alone in its process: its slot is the whole list. */
	all_collected = p->first_thread == hier_thread_index(h, t) && t->next == CGM_NONE;
	harvest_collect_thread(p, t);
	if (!all_collected && p->free_pool < need) {
		harvest_collect(h, a->proc, p);
		all_collected = true;
	}
	if (p->free_pool >= need) {
		/* A batch, or all that is needed when that is more. */
		take = p->free_pool < batch_bytes ? p->free_pool : batch_bytes;
		if (take < need)
			take = need;
		if (check_limits && take > need &&
		    charge_limit_near(h, p->group, batch_bytes / CGM_PAGE_SIZE))
			take = need;
	}
	p->free_pool -= take;
	if (all_collected && take > 0 && batch_bytes - take >= CGM_PAGE_SIZE) {
		struct cgm_group *g = hier_group(h, p->group);
		int64_t pages = (batch_bytes - take) / CGM_PAGE_SIZE;
		struct page_counter *fail;

		/*
		 * With limits, only far from them (memory.max is enforced by
		 * the try below, memory.high is not): a limit the workload
		 * does not reach must not cost it a refill per page.
		 */
		if (g && !(check_limits && charge_limit_near(h, p->group, pages)) &&
		    page_counter_try_charge(&g->memory, pages, &fail)) {
			p->held_pages += pages;
			take += pages * CGM_PAGE_SIZE;
		}
	}
	cgm_owner_add(t->stock, take);
	harvest_uncharge(h, p);
	hier_unlock(&p->lock);
	return take > 0;
}

/* Cover what @t's stock lacks: the process's frees, hoarded allowances, a charge. */
static int stock_cover(struct cgm_acct *a, struct cgm_thread_slot *t, bool check_limits)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	int64_t need = stock_lack(t);

	if (!p)
		return 0;
	/* Our own threads' frees come back first: the cheapest reclaim. */
	if (stock_from_frees(a, p, t, need, check_limits))
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
	return acct_try_charge(a, t, need, check_limits);
}

/*
 * Statistics past a threshold: a thread folds its own deltas up the tree
 * after this many stock refills (16 charge batches of allocation, 4 MiB
 * by default), besides the periodic and the readers' flushes.
 */
#define FLUSH_REFILLS 16

int acct_stock_refill(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t bytes,
		      bool check_limits)
{
	if (stock_cover(a, t, check_limits) < 0) {
		t->stock = cgm_wrap_add(t->stock, (uint64_t)bytes);
		return -ENOMEM;
	}
	/* Busy flush lock: somebody is flushing; try again at the next refill. */
	if (++t->refills_unflushed >= FLUSH_REFILLS &&
	    rstat_flush_thread(&a->h, hier_thread_index(&a->h, t)))
		t->refills_unflushed = 0;
	return 0;
}

/*
 * The most blocks of bin @bin one refill takes: an eighth of a charge
 * batch.  A thread that uses all 21 bins could hoard 2.6 batches that
 * way; stock_cover() gives allowances back beyond two before it charges
 * more.
 */
static int64_t bin_cap(const struct cgm_acct *a, unsigned int bin)
{
	int64_t cap = a->batch_pages * CGM_PAGE_SIZE / 8 / (int64_t)cgm_bin_size(bin);

	return cap < 1 ? 1 : cap > UINT16_MAX ? UINT16_MAX : cap;
}

/*
 * The blocks of @t's next refill of @bin: twice the last, from 8.  A
 * thread's very first refill of the bin starts where the last thread to
 * exit left it (cgm_acct.first_refill); after a reset (precharge given
 * back, a drain) it starts at 8 again, as a thread near a limit must.
 */
static int64_t refill_blocks(const struct cgm_acct *a, const struct cgm_thread_slot *t,
			     unsigned int bin)
{
	int64_t k;

	if (t->next_refill[bin])
		return 2 * (int64_t)t->next_refill[bin];
	k = t->refilled[bin] ? 8 : __atomic_load_n(&a->first_refill[bin], __ATOMIC_RELAXED);
	return k > 8 ? k : 8;
}

int acct_refill_bin(struct cgm_acct *a, struct cgm_thread_slot *t, unsigned int bin,
		    bool check_limits)
{
	int64_t size = (int64_t)cgm_bin_size(bin), k;
	uint32_t gen = __atomic_load_n(&a->h.hdr->drain_gen, __ATOMIC_ACQUIRE);

	/* Some group hit memory.max: give back what this thread precharged. */
	if (cgm_unlikely(gen != t->drained_gen)) {
		t->drained_gen = gen;
		acct_stock_drain(a, t);
	}
	if (t->allow[bin] > 0)
		return 0;
	k = refill_blocks(a, t, bin);
	if (k > bin_cap(a, bin))
		k = bin_cap(a, bin);
	/*
	 * Near a limit, precharge nothing: other processes may need the room.
	 * Only asked when the stock cannot cover the run: bytes in the stock
	 * are charged already, and turning them into an allowance takes no
	 * room from anyone (the limits' walk of the ancestors cost a refill
	 * about 160 instructions).
	 */
	if (check_limits && k > 1 && t->stock < k * size &&
	    acct_limit_near(a, (k * size + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE))
		k = 1;
	if (acct_stock_take(a, t, k * size, check_limits) < 0) {
		k = 1;
		if (acct_stock_take(a, t, size, check_limits) < 0)
			return -ENOMEM;
	}
	t->next_refill[bin] = (uint16_t)k;
	/* A flusher reads refilled[] - allow[]: change them as a pair. */
	__atomic_store_n(&t->refill_seq, t->refill_seq + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	cgm_owner_add(t->allow[bin], k);
	cgm_owner_add(t->refilled[bin], (uint64_t)k);
	__atomic_store_n(&t->refill_seq, t->refill_seq + 1, __ATOMIC_RELEASE);
	return 0;
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

void acct_stock_trim_excess(struct cgm_acct *a, struct cgm_thread_slot *t)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	int64_t keep = a->batch_pages * CGM_PAGE_SIZE;

	if (!p || t->stock <= 2 * keep)
		return;
	hier_lock(&p->lock);
	p->free_pool += t->stock - keep;
	t->stock = keep;
	/*
	 * The pool's whole pages are uncharged under the same lock.  Other
	 * threads' frees are not collected here: the next refill, flush or
	 * reader does (a trim is a free path's, and collecting walks every
	 * thread of the process -- gbench simple's trims cost 980 instructions
	 * each with it).
	 */
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE)
		harvest_uncharge(&a->h, p);
	hier_unlock(&p->lock);
}

void acct_stock_drain(struct cgm_acct *a, struct cgm_thread_slot *t)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	acct_slot_unprecharge(t);
	if (!p || t->stock <= 0)
		return;
	hier_lock(&p->lock);
	harvest_pool_add(p, (uint64_t)t->stock);
	cgm_owner_add(t->stock, -t->stock);
	harvest_uncharge(&a->h, p);
	hier_unlock(&p->lock);
}
