/*
 * Statistics in the manner of cgroup rstat: every thread keeps cumulative
 * counters in its slot (written only by itself, on the fast path); a flush
 * takes the difference from the snapshot it left last time and adds it to
 * the group's local statistics and to the hierarchical statistics of the
 * group and every ancestor.  A read of any group's hierarchical statistics
 * after a flush is therefore O(1), and a flush costs a look at each live
 * thread slot (the kernel's flush looks at each CPU) plus, for the threads
 * that changed, their depth and their process's harvest -- never the size
 * of the tree or of the process table.
 */
#include <string.h>

#include "cgm/size_class.h"
#include "internal.h"

/* Deltas are sums of counters read from the shared file: they wrap. */
static inline void wrap_add(int64_t *sum, uint64_t v)
{
	*sum = cgm_wrap_add(*sum, v);
}

/* @n allocations of @size-byte blocks into @d. */
static void delta_allocs(int64_t d[CGM_NR_STATS], uint64_t n, uint64_t size)
{
	wrap_add(&d[CGM_STAT_ALLOCS], n);
	wrap_add(&d[CGM_STAT_ALLOC_BYTES], n * size);
	wrap_add(&d[CGM_STAT_HIST0 + rstat_hist_bucket(size)], n);
}

/* @n frees of @size-byte blocks into @d. */
static void delta_frees(int64_t d[CGM_NR_STATS], uint64_t n, uint64_t size)
{
	wrap_add(&d[CGM_STAT_FREES], n);
	wrap_add(&d[CGM_STAT_FREE_BYTES], n * size);
}

/* Deltas of one thread slot since the last flush; false if nothing changed. */
static bool slot_delta(struct cgm_thread_slot *t, int64_t d[CGM_NR_STATS])
{
	bool any = false;

	memset(d, 0, sizeof(int64_t) * CGM_NR_STATS);
	uint64_t allocs[CGM_NR_BINS];
	uint32_t seq;
	int tries = 0;

	/* refilled[b] - allow[b], read as a consistent pair (refill_seq). */
	do {
		seq = __atomic_load_n(&t->refill_seq, __ATOMIC_ACQUIRE);
		for (unsigned int b = 0; b < CGM_NR_BINS; b++)
			allocs[b] = __atomic_load_n(&t->refilled[b], __ATOMIC_RELAXED) -
				    (uint64_t)__atomic_load_n(&t->allow[b], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1 || seq != __atomic_load_n(&t->refill_seq, __ATOMIC_RELAXED)) &&
		 ++tries < 100);
	for (unsigned int b = 0; b < CGM_NR_BINS && tries < 100; b++) {
		uint64_t n = allocs[b] - t->snap_allocs_small[b];

		if (!n)
			continue;
		t->snap_allocs_small[b] = allocs[b];
		delta_allocs(d, n, cgm_bin_size(b));
		any = true;
	}
	/* Small frees the branch-free free gave back to the stock. */
	for (unsigned int b = 0; b < CGM_NR_BINS; b++) {
		uint64_t now = __atomic_load_n(&t->stocked_small[b], __ATOMIC_RELAXED);
		uint64_t n = now - t->snap_stocked_small[b];

		if (!n)
			continue;
		t->snap_stocked_small[b] = now;
		delta_frees(d, n, cgm_bin_size(b));
		any = true;
	}
	/* Medium blocks: counted per bin, each its bin's block size. */
	for (unsigned int m = 0; m < CGM_NR_MEDIUM_BINS; m++) {
		uint64_t size = cgm_medium_sizes[m];
		uint64_t a = __atomic_load_n(&t->medium_allocs[m], __ATOMIC_RELAXED);
		uint64_t f = __atomic_load_n(&t->medium_frees[m], __ATOMIC_RELAXED);
		uint64_t na = a - t->snap_medium_allocs[m], nf = f - t->snap_medium_frees[m];

		if (na) {
			t->snap_medium_allocs[m] = a;
			delta_allocs(d, na, size);
			any = true;
		}
		if (nf) {
			t->snap_medium_frees[m] = f;
			delta_frees(d, nf, size);
			any = true;
		}
	}
	for (unsigned int b = 0; b < CGM_HIST_BUCKETS; b++) {
		uint64_t now = __atomic_load_n(&t->big_hist[b], __ATOMIC_RELAXED);
		uint64_t n = now - t->snap_big_hist[b];

		if (!n)
			continue;
		t->snap_big_hist[b] = now;
		wrap_add(&d[CGM_STAT_HIST0 + b], n);
		any = true;
	}
#define DELTA(stat, field, snap) do {					\
		uint64_t now = __atomic_load_n(&t->field, __ATOMIC_RELAXED); \
		if (now != t->snap) {					\
			wrap_add(&d[stat], now - t->snap);		\
			t->snap = now;					\
			any = true;					\
		}							\
	} while (0)
	DELTA(CGM_STAT_ALLOCS, big_allocs, snap_big_allocs);
	DELTA(CGM_STAT_ALLOC_BYTES, big_alloc_bytes, snap_big_alloc_bytes);
	DELTA(CGM_STAT_FREES, frees, snap_frees);
	DELTA(CGM_STAT_FREE_BYTES, freed_bytes, snap_freed_bytes);
	DELTA(CGM_STAT_FREE_BYTES, freed_unpooled_bytes, snap_freed_unpooled_bytes);
	DELTA(CGM_STAT_THROTTLE_NS, throttle_ns, snap_throttle_ns);
	DELTA(CGM_STAT_ALLOC_BYTES, realloc_new_bytes, snap_realloc_new_bytes);
	DELTA(CGM_STAT_FREE_BYTES, realloc_old_bytes, snap_realloc_old_bytes);
	{
		uint64_t now = __atomic_load_n(&t->reallocs, __ATOMIC_RELAXED);

		if (now != t->snap_reallocs) {
			wrap_add(&d[CGM_STAT_ALLOCS], now - t->snap_reallocs);
			wrap_add(&d[CGM_STAT_FREES], now - t->snap_reallocs);
			t->snap_reallocs = now;
			any = true;
		}
	}
#undef DELTA
	d[CGM_STAT_HEAP_LIVE] = cgm_wrap_sub(d[CGM_STAT_ALLOC_BYTES], d[CGM_STAT_FREE_BYTES]);
	return any;
}

static void fold(struct cgm_hier *h, uint32_t group, const int64_t d[CGM_NR_STATS])
{
	struct cgm_group *g = hier_group(h, group);

	if (!g)
		return;
	for (int i = 0; i < CGM_NR_STATS; i++)
		if (d[i])
			__atomic_add_fetch(&g->stat_local[i], d[i], __ATOMIC_RELAXED);
	for_each_ancestor(h, group, g)
		for (int i = 0; i < CGM_NR_STATS; i++)
			if (d[i])
				__atomic_add_fetch(&g->stat[i], d[i], __ATOMIC_RELAXED);
}

/*
 * Bring @p->heap_live up to date with its live bytes and untracked frees (see
 * struct cgm_proc); returns the change, for the group's heap_live.  The sum
 * is over all the process's threads, so a free counted by one thread
 * before the allocation it frees is counted by another never takes the
 * process below zero for good.  Flush lock held.
 */
static int64_t heap_live_update(struct cgm_proc *p)
{
	int64_t untracked = __atomic_load_n(&p->untracked_bytes, __ATOMIC_RELAXED);
	int64_t now = cgm_wrap_add(p->live_bytes, (uint64_t)untracked);
	int64_t change;

	if (now < 0)
		now = 0;
	change = cgm_wrap_sub(now, p->heap_live);
	p->heap_live = now;
	return change;
}

/*
 * Fold thread slot @i into its process's group.  Flush lock held.
 * Returns the slot's process if it has something for the process to do
 * (new frees to harvest, or an exited thread to reap), else CGM_NONE.
 */
static uint32_t flush_slot(struct cgm_hier *h, uint32_t i)
{
	struct cgm_thread_slot *t = hier_thread(h, i);
	int64_t d[CGM_NR_STATS];
	uint32_t proc;
	struct cgm_proc *p;
	uint32_t state = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);

	if (state == CGM_SLOT_FREE)
		return CGM_NONE;
	proc = __atomic_load_n(&t->proc, __ATOMIC_ACQUIRE);
	p = hier_proc(h, proc);
	if (!p)
		return CGM_NONE;
	if (!slot_delta(t, d))
		return state == CGM_SLOT_EXITING ? proc : CGM_NONE;
	wrap_add(&p->live_bytes, (uint64_t)d[CGM_STAT_HEAP_LIVE]);
	d[CGM_STAT_HEAP_LIVE] = heap_live_update(p);
	fold(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), d);
	return proc;
}

/* Fold what is new of process @p's spill counts into its group.  Flush lock held. */
static void fold_spill_counts(struct cgm_hier *h, struct cgm_proc *p)
{
	int64_t d[CGM_NR_STATS] = { 0 };
	bool any = false;

	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++) {
		uint64_t now = __atomic_load_n(&p->spill_counts[i], __ATOMIC_RELAXED);

		d[CGM_STAT_SPILL0 + i] = (int64_t)(now - p->spill_folded[i]);
		p->spill_folded[i] = now;
		any |= d[CGM_STAT_SPILL0 + i] != 0;
	}
	{
		uint64_t now = __atomic_load_n(&p->spill_throttle_ns, __ATOMIC_RELAXED);

		d[CGM_STAT_THROTTLE_NS] = (int64_t)(now - p->spill_throttle_folded);
		p->spill_throttle_folded = now;
		any |= d[CGM_STAT_THROTTLE_NS] != 0;
	}
	if (any)
		fold(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), d);
}

/*
 * Fold the change in process @proc's sampled statistics into its group.
 * Flush lock held.
 */
static void fold_sampled(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);
	int64_t d[CGM_NR_STATS] = { 0 };
	bool any = false;

	if (!p)
		return;
	hier_map_clear(h->hdr->sample_map, proc);
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE)
		return;
	for (int i = 0; i < CGM_NR_SAMPLED; i++) {
		int64_t now = __atomic_load_n(&p->sampled[i], __ATOMIC_RELAXED);

		if (now < 0)
			now = 0;
		d[i] = cgm_wrap_sub(now, p->sampled_folded[i]);
		/* Atomic: the process's own threads read it (acct_zswap_room) without the lock. */
		__atomic_store_n(&p->sampled_folded[i], now, __ATOMIC_RELAXED);
		any |= d[i] != 0;
	}
	if (any)
		fold(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), d);
	fold_spill_counts(h, p);
}

void rstat_fold_sampled(struct cgm_hier *h, uint32_t proc)
{
	if (proc >= CGM_MAX_PROCS || !hier_trylock(&h->hdr->flush_lock))
		return;
	fold_sampled(h, proc);
	hier_unlock(&h->hdr->flush_lock);
}

void rstat_flush(struct cgm_hier *h)
{
	/* Processes with a thread that changed or exited: only they are visited. */
	uint64_t touched[CGM_MAX_PROCS / 64] = { 0 };

	hier_lock(&h->hdr->flush_lock);
	for (uint32_t w = 0; w < CGM_MAX_THREADS / 64; w++) {
		uint64_t bits = __atomic_load_n(&h->hdr->flush_map[w], __ATOMIC_ACQUIRE);

		while (bits) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
			uint32_t proc;

			bits &= bits - 1;
			proc = flush_slot(h, i);
			if (proc < CGM_MAX_PROCS)
				touched[proc / 64] |= 1ULL << (proc % 64);
		}
	}
	/* Processes with a new residency sample. */
	for (uint32_t w = 0; w < CGM_MAX_PROCS / 64; w++) {
		uint64_t bits = __atomic_load_n(&h->hdr->sample_map[w], __ATOMIC_ACQUIRE);

		for (; bits; bits &= bits - 1)
			fold_sampled(h, w * 64 + (uint32_t)__builtin_ctzll(bits));
	}
	/* Their frees are harvested; slots of exited threads, now flushed, go. */
	for (uint32_t w = 0; w < CGM_MAX_PROCS / 64; w++) {
		for (uint64_t bits = touched[w]; bits; bits &= bits - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct cgm_proc *p = hier_proc(h, i);

			if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE)
				continue;
			acct_harvest(h, i);
			hier_lock(&p->lock);
			acct_reap_threads(h, i);
			hier_unlock(&p->lock);
		}
	}
	__atomic_add_fetch(&h->hdr->flush_seq, 1, __ATOMIC_RELEASE);
	hier_unlock(&h->hdr->flush_lock);
}

void rstat_reap_exited(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);
	struct cgm_thread_slot *t;
	bool any = false;
	uint32_t idx;

	if (!p || !hier_trylock(&h->hdr->flush_lock))
		return;
	hier_lock(&p->lock);
	for_each_proc_thread(h, p, proc, idx, t) {
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == CGM_SLOT_EXITING) {
			(void)flush_slot(h, idx);
			any = true;
		}
	}
	if (any) {
		harvest_collect(h, proc, p);
		harvest_uncharge(h, p);
		acct_reap_threads(h, proc);
	}
	hier_unlock(&p->lock);
	hier_unlock(&h->hdr->flush_lock);
}

void rstat_flush_proc(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);
	struct cgm_thread_slot *ts;
	uint32_t t;

	if (!p || !hier_trylock(&h->hdr->flush_lock))
		return;
	hier_lock(&p->lock);
	for_each_proc_thread(h, p, proc, t, ts)
		(void)flush_slot(h, t);
	hier_unlock(&p->lock);
	hier_unlock(&h->hdr->flush_lock);
}

bool rstat_flush_thread(struct cgm_hier *h, uint32_t slot)
{
	if (slot >= CGM_MAX_THREADS || !hier_trylock(&h->hdr->flush_lock))
		return false;
	(void)flush_slot(h, slot);
	hier_unlock(&h->hdr->flush_lock);
	return true;
}

/*
 * Move what process @p adds to its group's levels -- heap_live and the
 * sampled statistics -- from group @from to group @to (CGM_NONE: none).
 * Flush lock held.
 */
static void shift_levels(struct cgm_hier *h, const struct cgm_proc *p, uint32_t from,
			 uint32_t to)
{
	int64_t d[CGM_NR_STATS] = { 0 };
	bool any = p->heap_live != 0;

	d[CGM_STAT_HEAP_LIVE] = p->heap_live;
	for (int i = 0; i < CGM_NR_SAMPLED; i++) {
		d[i] = p->sampled_folded[i];
		any |= d[i] != 0;
	}
	if (!any)
		return;
	if (to != CGM_NONE)
		fold(h, to, d);
	if (from != CGM_NONE) {
		for (int i = 0; i < CGM_NR_STATS; i++)
			d[i] = cgm_wrap_sub(0, d[i]);
		fold(h, from, d);
	}
}

void rstat_fold_exit(struct cgm_hier *h, struct cgm_proc *p)
{
	uint32_t proc = hier_proc_index(h, p), t;
	struct cgm_thread_slot *ts;

	hier_lock(&h->hdr->flush_lock);
	hier_lock(&p->lock);
	for_each_proc_thread(h, p, proc, t, ts) {
		(void)flush_slot(h, t);
		/*
		 * Off the map: no flush visits the slot again, so a leaving
		 * process costs later flushes nothing, and what its threads
		 * still free on the way out does not come back into heap_live.
		 */
		hier_map_clear(h->hdr->flush_map, t);
	}
	/* Its spill counts stay with the group; its pool goes with it. */
	fold_spill_counts(h, p);
	/* Exit frees whatever the process still held, and unmaps what it mapped. */
	shift_levels(h, p, __atomic_load_n(&p->group, __ATOMIC_RELAXED), CGM_NONE);
	p->live_bytes = 0;
	p->heap_live = 0;
	memset(p->sampled_folded, 0, sizeof(p->sampled_folded));
	hier_map_clear(h->hdr->sample_map, proc);
	hier_unlock(&p->lock);
	hier_unlock(&h->hdr->flush_lock);
}

void rstat_switch_group(struct cgm_hier *h, struct cgm_proc *p, uint32_t to)
{
	struct cgm_thread_slot *ts;
	uint32_t t;

	/*
	 * Caller holds the flush lock and p->lock: no flush sees half a move.
	 * What the process's threads did up to now belongs to the group it
	 * leaves: fold it there first.  The fast paths never look at the
	 * group; while the process moves itself, its threads count under
	 * p->lock (the moving key, shim/moving.c), so only a call that was
	 * already past its site when the key came on can land on the other
	 * side -- on one side, never lost.
	 */
	for_each_proc_thread(h, p, hier_proc_index(h, p), t, ts)
		(void)flush_slot(h, t);
	fold_sampled(h, hier_proc_index(h, p));
	shift_levels(h, p, p->group, to);
	__atomic_store_n(&p->group, to, __ATOMIC_RELEASE);
}
